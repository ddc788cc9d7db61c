//! The mma.sync GEMM (issue 15): an sm_80-style tensor-core GEMM (no WGMMA, no TMA) written in
//! Choreo (`kernels/gemm_sync.co`, `gemm_sync_f16`) against the same algorithm written by hand
//! (`kernels/gemm_sync_hand.cu`), both built for sm_90a and run on the same operands:
//!
//! `C[M, N] = A[M, K] · B[N, K]ᵀ`, f16, row-major, f32 accumulation; 128 x 128 x 32 block tiles
//! of 4 warps (64 x 64 each: 4 x 8 m16n8k16 accumulators), two slots of padded shared tiles,
//! ldmatrix + mma.sync; M = N = K ∈ {4096, 8192} (`--quick`: 1024 and 2048).
//!
//! Two hand-written versions: the twin (copies as the compiler emits them: `dma.copy.async` of
//! f16 rows becomes 16-byte cp.async double buffering) — the target's reference, Choreo ≥ 0.95 ×
//! it — and the same kernel with synchronous 16-byte loads and stores (shown for information:
//! what the asynchronous copies gain).
//! cuBLAS's `cublasGemmEx` (which uses whatever it likes, WGMMA included) is the yardstick.
//!
//! Checks before timing, each on a poisoned (NaN) output, each naming the kernel and check that
//! failed: on exact inputs (multiples of 1/8) every kernel bit for bit against the float64 host
//! reference on 6 full rows and 6 full columns; on random inputs within a few f16 units in the
//! last place of it; Choreo against the twin on every element (the same MMAs in the same order:
//! equal bits expected, the count of differing elements is reported), and every kernel against
//! cuBLAS element by element within tolerance.

use choreo::{DeviceTensor, HostView, Stream, f16};
use choreo_bench::gemm::{self, DeviceMatrix, Dtype};
use choreo_bench::gemm_sync::{self, Hand};
use choreo_bench::stats::Summary;
use choreo_bench::table::three_digits;

use super::gemm::kernels;
use super::tiled::{per_launch_ms, row};
use super::{BenchError, BenchResult, Options, interleaved};

/// The H200's dense f16 tensor-core peak (SXM, f32 accumulation), TFLOP/s.
pub const PEAK_TFLOPS: f64 = 989.0;
/// Launches per timed trial.
const BATCH: usize = 10;
const DTYPE: Dtype = Dtype::F16;

/// One size.
pub struct Point {
    /// M = N = K.
    pub size: usize,
    /// Choreo's TFLOP/s (median), when it was right.
    pub ours_tflops: Option<f64>,
    /// The twin's, when it was right.
    pub twin_tflops: Option<f64>,
    /// The version with synchronous copies', when it was right.
    pub sync_copies_tflops: Option<f64>,
    /// cuBLAS's, when it ran.
    pub cublas_tflops: Option<f64>,
    /// Elements where Choreo's and the twin's outputs differ (random inputs).
    pub differing_from_twin: Option<usize>,
}

/// The section's outcome.
pub struct Outcome {
    /// Table rows `[variant, median, min, max, derived]`.
    pub rows: Vec<Vec<String>>,
    /// Every size.
    pub points: Vec<Point>,
    /// Why cuBLAS did not run, if it did not.
    pub cublas_missing: Option<String>,
    /// The checks that failed.
    pub wrong: Vec<String>,
}

fn failed(message: String) -> BenchError {
    BenchError::Failed(format!("gemm-sync: {message}"))
}

fn tflops(size: usize, ms: f64) -> f64 {
    2.0 * (size as f64).powi(3) / (ms * 1e-3) / 1e12
}

/// A row with only its first cell filled.
fn row_text(text: String) -> Vec<String> {
    vec![text, String::new(), String::new(), String::new(), String::new()]
}

/// Runs the section.
pub fn run(options: &Options) -> BenchResult<Outcome> {
    if !gemm::built() {
        return Err(BenchError::CannotRun("the GEMM kernels were not compiled".into()));
    }
    let cublas = gemm::load_cublas();
    match &cublas {
        Ok(version) => eprintln!("choreo-bench: gemm-sync: cuBLAS {version} loaded"),
        Err(why) => eprintln!("choreo-bench: gemm-sync: {why}; no cuBLAS check or timing"),
    }
    let sizes = super::sizes(options, &[4096, 8192], &[1024, 2048]);
    let mut outcome = Outcome {
        rows: Vec::new(),
        points: Vec::new(),
        cublas_missing: cublas.clone().err(),
        wrong: Vec::new(),
    };
    for size in sizes {
        let point = measure(options, size, cublas.is_ok(), &mut outcome)?;
        outcome.points.push(point);
    }
    if let Some(why) = &outcome.cublas_missing {
        outcome.rows.push(row_text(format!("cuBLAS not measured: {why}")));
    }
    Ok(outcome)
}

/// The kernels of the section.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kernel {
    Choreo,
    Hand(Hand),
    Cublas,
}

impl Kernel {
    fn name(self) -> &'static str {
        match self {
            Kernel::Choreo => "Choreo gemm_sync_f16",
            Kernel::Hand(h) => h.name(),
            Kernel::Cublas => "cuBLAS cublasGemmEx",
        }
    }
}

/// The operands: A and B twice (choreo tensors for the generated wrapper, raw matrices for the
/// hand-written kernel and cuBLAS), one C per kernel.
struct Operands {
    a: DeviceTensor<f16, 2>,
    b: DeviceTensor<f16, 2>,
    c: DeviceTensor<f16, 2>,
    ra: DeviceMatrix,
    rb: DeviceMatrix,
    rc: [DeviceMatrix; 3],
}

impl Operands {
    fn new(s: &Stream, (m, n, k): (usize, usize, usize)) -> BenchResult<Operands> {
        let matrix = |elems| DeviceMatrix::new(elems).map_err(failed);
        Ok(Operands {
            a: DeviceTensor::zeros_on(s, [m, k])?,
            b: DeviceTensor::zeros_on(s, [n, k])?,
            c: DeviceTensor::zeros_on(s, [m, n])?,
            ra: matrix(m * k)?,
            rb: matrix(n * k)?,
            rc: [matrix(m * n)?, matrix(m * n)?, matrix(m * n)?],
        })
    }

    fn upload(&mut self, s: &Stream, ha: &[u16], hb: &[u16]) -> BenchResult<()> {
        let values = |v: &[u16]| v.iter().map(|&x| f16::from_bits(x)).collect::<Vec<_>>();
        let shape = self.a.shape();
        self.a.copy_from_host(s, HostView::new(&values(ha), shape)?)?;
        let shape = self.b.shape();
        self.b.copy_from_host(s, HostView::new(&values(hb), shape)?)?;
        self.ra = DeviceMatrix::from_host(ha).map_err(failed)?;
        self.rb = DeviceMatrix::from_host(hb).map_err(failed)?;
        Ok(())
    }

    /// The index in `rc` of a raw-matrix kernel's C.
    fn raw_index(kernel: Kernel) -> usize {
        match kernel {
            Kernel::Hand(Hand::SyncCopies) => 1,
            Kernel::Cublas => 2,
            Kernel::Hand(Hand::Twin) | Kernel::Choreo => 0,
        }
    }

    /// One launch of `kernel`, not waited for.
    fn launch(
        &mut self,
        s: &Stream,
        kernel: Kernel,
        shape: (usize, usize, usize),
    ) -> BenchResult<()> {
        match kernel {
            Kernel::Choreo => {
                drop(kernels::gemm_sync::gemm_sync_f16(s, &self.a, &self.b, &mut self.c)?);
                Ok(())
            }
            Kernel::Hand(hand) => {
                let ops = (&self.ra, &self.rb, &self.rc[Operands::raw_index(kernel)]);
                // SAFETY: the matrices have the product's sizes and live as long as `self`,
                // which outlives every launch (the device is synchronised before they drop).
                unsafe { gemm_sync::launch_hand(s.as_raw(), hand, ops, shape) }.map_err(failed)
            }
            Kernel::Cublas => {
                let ops = (&self.ra, &self.rb, &self.rc[Operands::raw_index(kernel)]);
                // SAFETY: as above.
                unsafe { gemm::launch_cublas(s.as_raw(), DTYPE, ops, shape) }.map_err(failed)
            }
        }
    }

    /// Poisons `kernel`'s C, runs it, waits and returns C's bits (a failed run-time check of
    /// the Choreo wrapper is an error here).
    fn run_checked(
        &mut self,
        s: &Stream,
        kernel: Kernel,
        shape: (usize, usize, usize),
    ) -> BenchResult<Vec<u16>> {
        if kernel == Kernel::Choreo {
            let c_shape = self.c.shape();
            let nan = vec![f16::from_bits(0xFFFF); c_shape[0] * c_shape[1]];
            self.c.copy_from_host(s, HostView::new(&nan, c_shape)?)?;
            kernels::gemm_sync::gemm_sync_f16(s, &self.a, &self.b, &mut self.c)?.wait()?;
            return Ok(self.c.to_host(s)?.as_slice().iter().map(|x| x.to_bits()).collect());
        }
        // poison() and download() synchronise the device.
        let index = Operands::raw_index(kernel);
        self.rc[index].poison().map_err(failed)?;
        self.launch(s, kernel, shape)?;
        self.rc[index].download().map_err(failed)
    }
}

fn measure(
    options: &Options,
    size: usize,
    with_cublas: bool,
    outcome: &mut Outcome,
) -> BenchResult<Point> {
    eprintln!("choreo-bench: gemm-sync: f16 {size}³ …");
    let shape = (size, size, size);
    let (m, n, k) = shape;
    let s = Stream::new()?;
    let mut ops = Operands::new(&s, shape)?;
    let points = gemm::sample_points(m, n);
    let mut kernels =
        vec![Kernel::Choreo, Kernel::Hand(Hand::Twin), Kernel::Hand(Hand::SyncCopies)];
    if with_cublas {
        kernels.push(Kernel::Cublas);
    }
    let wrong = |why: String, outcome: &mut Outcome| {
        eprintln!("choreo-bench: gemm-sync: FAILED: {why}");
        outcome.rows.push(row_text(format!("WRONG, not timed: {why}")));
        outcome.wrong.push(why);
    };
    let mut worst_host = 0f64;
    let mut differing_from_twin = None;
    let mut worst_cublas: Option<gemm::Comparison> = None;
    for exact in [true, false] {
        let kind = if exact { "exact inputs" } else { "random inputs" };
        let (ha, hb) = if exact {
            (gemm::exact_matrix(DTYPE, m, k, 0x91), gemm::exact_matrix(DTYPE, n, k, 0x92))
        } else {
            let seed = 0xa1 + size as u64;
            (gemm::random_matrix(DTYPE, m, k, seed), gemm::random_matrix(DTYPE, n, k, seed + 1))
        };
        ops.upload(&s, &ha, &hb)?;
        let mut outputs: Vec<(Kernel, Vec<u16>)> = Vec::new();
        let mut rejected = Vec::new();
        for &kernel in &kernels {
            eprintln!("choreo-bench: gemm-sync: checking {} on {kind} …", kernel.name());
            let what = format!("{} vs the host reference, {size}³, {kind}", kernel.name());
            let result = ops.run_checked(&s, kernel, shape).and_then(|hc| {
                gemm::check_points(
                    &what,
                    DTYPE,
                    (&ha, &hb, &hc),
                    (n, k),
                    points.iter().copied(),
                    exact,
                )
                .map(|w| (w, hc))
                .map_err(BenchError::Failed)
            });
            match result {
                Ok((w, hc)) => {
                    worst_host = worst_host.max(w);
                    outputs.push((kernel, hc));
                }
                Err(BenchError::Failed(why) | BenchError::CannotRun(why)) => {
                    wrong(why, outcome);
                    rejected.push(kernel);
                }
            }
        }
        // Every element: Choreo against the twin, everyone against cuBLAS.
        let get = |kernel: Kernel| outputs.iter().find(|(k, _)| *k == kernel).map(|(_, c)| c);
        if let (Some(ours), Some(twin)) = (get(Kernel::Choreo), get(Kernel::Hand(Hand::Twin))) {
            let differing = ours.iter().zip(twin).filter(|(x, y)| x != y).count();
            let cmp = gemm::compare(DTYPE, ours, twin);
            if cmp.wrong > 0 || (exact && differing > 0) {
                wrong(
                    format!(
                        "Choreo gemm_sync_f16 vs its hand-written twin, {size}³, {kind}: {differing} \
                         elements differ, {} beyond tolerance (max relative error {:.3e})",
                        cmp.wrong, cmp.max_relative
                    ),
                    outcome,
                );
                rejected.push(Kernel::Choreo);
            }
            if !exact {
                differing_from_twin = Some(differing);
            }
        }
        if let Some(theirs) = get(Kernel::Cublas) {
            for (kernel, hc) in outputs.iter().filter(|(k, _)| *k != Kernel::Cublas) {
                let cmp = gemm::compare(DTYPE, hc, theirs);
                if cmp.wrong > 0 {
                    wrong(
                        format!(
                            "{} vs cuBLAS, {size}³, {kind}: {} of {} elements beyond tolerance, max \
                             relative error {:.3e}",
                            kernel.name(),
                            cmp.wrong,
                            hc.len(),
                            cmp.max_relative
                        ),
                        outcome,
                    );
                    rejected.push(*kernel);
                } else if worst_cublas.is_none_or(|w| cmp.max_relative > w.max_relative) {
                    worst_cublas = Some(cmp);
                }
            }
        }
        kernels.retain(|k| !rejected.contains(k));
    }

    // Timing, interleaved.
    let mut point = Point {
        size,
        ours_tflops: None,
        twin_tflops: None,
        sync_copies_tflops: None,
        cublas_tflops: None,
        differing_from_twin,
    };
    if kernels.is_empty() {
        return Ok(point);
    }
    let ops = std::cell::RefCell::new(ops);
    let s = &s;
    let mut closures: Vec<Box<dyn FnMut() -> BenchResult<f64> + '_>> = kernels
        .iter()
        .map(|&kernel| {
            let ops = &ops;
            Box::new(move || per_launch_ms(s, BATCH, || ops.borrow_mut().launch(s, kernel, shape)))
                as Box<dyn FnMut() -> BenchResult<f64> + '_>
        })
        .collect();
    let mut timed: Vec<&mut dyn FnMut() -> BenchResult<f64>> =
        closures.iter_mut().map(|f| f.as_mut() as &mut dyn FnMut() -> BenchResult<f64>).collect();
    let summaries: Vec<Summary> = interleaved(options, &mut timed)?;
    drop(timed);
    drop(closures);
    let of = |kernel: Kernel| kernels.iter().position(|k| *k == kernel).map(|i| summaries[i]);
    let t = |kernel: Kernel| of(kernel).map(|x| tflops(size, x.median));
    point.ours_tflops = t(Kernel::Choreo);
    point.twin_tflops = t(Kernel::Hand(Hand::Twin));
    point.sync_copies_tflops = t(Kernel::Hand(Hand::SyncCopies));
    point.cublas_tflops = t(Kernel::Cublas);
    let peak =
        |x: f64| format!("{} TFLOP/s = {} of peak", three_digits(x), three_digits(x / PEAK_TFLOPS));
    for (&kernel, summary) in kernels.iter().zip(&summaries) {
        let mine = tflops(size, summary.median);
        let mut derived = peak(mine);
        if kernel == Kernel::Choreo {
            if let Some(twin) = point.twin_tflops {
                derived += &format!("; {} of the hand-written twin", three_digits(mine / twin));
            }
            if let Some(d) = differing_from_twin {
                derived += &format!("; {d} elements differ from the twin's");
            }
        }
        if kernel != Kernel::Cublas {
            if let Some(theirs) = point.cublas_tflops {
                derived += &format!("; {} of cuBLAS", three_digits(mine / theirs));
            }
            if let Some(cmp) = worst_cublas {
                derived += &format!("; vs cuBLAS max rel. err {:.2e}", cmp.max_relative);
            }
            derived += &format!("; host check max err {worst_host:.2e}");
        }
        eprintln!("choreo-bench: gemm-sync: {} {size}³: {derived}", kernel.name());
        let how = match kernel {
            Kernel::Choreo => {
                "generated from Choreo: 128x128x32 tiles, 4 warps, ldmatrix + mma.sync m16n8k16"
            }
            Kernel::Hand(Hand::Twin) => "hand-written, same algorithm and copies (cp.async)",
            Kernel::Hand(Hand::SyncCopies) => "hand-written, synchronous copies",
            Kernel::Cublas => "TN, default algorithm",
        };
        outcome.rows.push(row(format!("{} f16 {size}³ ({how})", kernel.name()), summary, derived));
    }
    Ok(point)
}
