//! GEMM on the Hopper tensor cores (issue 15): the hand-written persistent, warp-specialised
//! WGMMA kernel (`kernels/gemm_wgmma.cu`, built on the compiler's WGMMA library
//! `choreo-compiler/src/emit/cuda/wgmma.cuh`; see [`choreo_bench::gemm`]), in two versions
//! (one block per tile; clusters of two blocks sharing B tiles by TMA multicast), against
//! cuBLAS's `cublasGemmEx` loaded at run time (dlopen; nothing is linked), and the Choreo GEMMs
//! of `kernels/gemm.co` (variant keys `choreo`: stores from registers; `choreo-tma`: the
//! TMA-store epilogue) through their generated wrappers. The summary's targets are about the
//! fastest Choreo GEMM against cuBLAS; the hand-written kernel gets rows of its own:
//!
//! `C[M, N] = A[M, K] · B[N, K]ᵀ`, row-major, f32 accumulation, C in the input type, for
//! f16 and bf16 and M = N = K ∈ {4096, 8192} (`--quick`: 1024 and 2048). TFLOP/s count
//! 2·M·N·K operations; the fraction of the H200's dense f16/bf16 peak (989 TFLOP/s) is shown
//! too, so the figures mean something without cuBLAS.
//!
//! Checks before timing, each on a poisoned (NaN) output: ours on exact inputs (multiples of
//! 1/8: every correct kernel rounds the same exact sums) bit for bit against a float64 host
//! reference on 6 full rows and 6 full columns; then on random inputs in [-1, 1) against the
//! host reference on the same rows and columns (within a few units in the last place) and,
//! when cuBLAS is there, element by element against cuBLAS's output (the largest error is
//! reported; more than a few units in the last place fails the section).
//!
//! Timing as the other sections: events around a batch of launches behind an untimed one,
//! variants interleaved, medians.

use choreo::{DeviceRepr, DeviceTensor, HostView, Stream};
use choreo_bench::gemm::{self, DeviceMatrix, Dtype, Variant};
use choreo_bench::stats::Summary;
use choreo_bench::table::three_digits;

use super::tiled::{per_launch_ms, row};
use super::{BenchError, BenchResult, Options, interleaved};

/// The generated wrappers of `kernels/gemm.co` (also the `gemm-fp8` section's `gemm_e4m3`).
pub(super) mod kernels {
    choreo::include_kernels!("gemm");
}

/// The H200's dense f16/bf16 tensor-core peak (SXM, with f32 accumulation), TFLOP/s.
pub const PEAK_TFLOPS: f64 = 989.0;
/// Launches per timed trial.
const BATCH: usize = 10;

/// Launches per timed batch: [`BATCH`], or `CHOREO_BENCH_GEMM_BATCH` (1 times each launch
/// alone, after an idle GPU; a diagnostic of what back-to-back launches cost).
fn batch() -> usize {
    std::env::var("CHOREO_BENCH_GEMM_BATCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(BATCH)
}

/// One (type, size) point.
pub struct Point {
    /// The element type.
    pub dtype: Dtype,
    /// M = N = K.
    pub size: usize,
    /// The fastest Choreo GEMM (generated code) that was right, with its TFLOP/s (median):
    /// what the section's target is about.
    pub choreo: Option<(Variant, f64)>,
    /// The fastest version of the hand-written kernel that was right, with its TFLOP/s.
    pub hand: Option<(Variant, f64)>,
    /// cuBLAS's TFLOP/s (median), when it ran.
    pub cublas_tflops: Option<f64>,
}

/// The section's outcome.
pub struct Outcome {
    /// Table rows `[variant, median, min, max, derived]`.
    pub rows: Vec<Vec<String>>,
    /// Every measured point.
    pub points: Vec<Point>,
    /// Why cuBLAS did not run, if it did not.
    pub cublas_missing: Option<String>,
    /// The variants found wrong (each with why); they were left out of the timing, the others
    /// went on.
    pub wrong: Vec<String>,
}

fn failed(message: String) -> BenchError {
    BenchError::Failed(format!("gemm: {message}"))
}

/// Runs the section.
pub fn run(options: &Options) -> BenchResult<Outcome> {
    if !gemm::built() {
        return Err(BenchError::CannotRun("the GEMM kernels were not compiled".into()));
    }
    let cublas = gemm::load_cublas();
    match &cublas {
        Ok(version) => eprintln!("choreo-bench: gemm: cuBLAS {version} loaded"),
        Err(why) => eprintln!("choreo-bench: gemm: {why}; timing ours alone"),
    }
    let sizes: &[usize] = if options.quick { &[1024, 2048] } else { &[4096, 8192] };
    let mut outcome = Outcome {
        rows: Vec::new(),
        points: Vec::new(),
        cublas_missing: cublas.clone().err(),
        wrong: Vec::new(),
    };
    for &dtype in &Dtype::ALL {
        for &size in sizes {
            let point = measure(
                options,
                dtype,
                size,
                cublas.is_ok(),
                &mut outcome.rows,
                &mut outcome.wrong,
            )?;
            outcome.points.extend(point);
        }
    }
    if let Some(why) = &outcome.cublas_missing {
        outcome.rows.push(vec![
            format!("cuBLAS not measured: {why}"),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ]);
    }
    Ok(outcome)
}

fn tflops(size: usize, ms: f64) -> f64 {
    2.0 * (size as f64).powi(3) / (ms * 1e-3) / 1e12
}

/// The versions to check and time: `CHOREO_BENCH_GEMM_VARIANTS` (comma-separated keys, e.g.
/// `choreo,choreo-tma,single,group8`; unknown keys are reported and skipped) or all of them (the
/// Choreo GEMMs, then the hand-written versions safest first);
/// `CHOREO_BENCH_GEMM_CLUSTER=0` drops the cluster versions.
fn variants() -> Vec<Variant> {
    let mut chosen: Vec<Variant> = match std::env::var("CHOREO_BENCH_GEMM_VARIANTS") {
        Ok(list) if !list.trim().is_empty() => list
            .split(',')
            .map(str::trim)
            .filter(|key| !key.is_empty())
            .filter_map(|key| {
                let v = Variant::from_key(key);
                if v.is_none() {
                    eprintln!("choreo-bench: gemm: unknown variant {key:?} skipped");
                }
                v
            })
            .collect(),
        _ => Variant::CHOREO.into_iter().chain(Variant::ALL).collect(),
    };
    if std::env::var("CHOREO_BENCH_GEMM_CLUSTER").is_ok_and(|v| v == "0") {
        chosen.retain(|v| v.cluster() == 1);
    }
    chosen
}

/// Runs `variant` once on (a, b) into a poisoned `c` and returns the output (a Choreo GEMM:
/// on `choreo`'s tensors, which hold the same inputs).
fn run_once(
    raw: choreo::sys::cudaStream_t,
    dtype: Dtype,
    variant: Variant,
    (a, b, c): (&DeviceMatrix, &DeviceMatrix, &mut DeviceMatrix),
    shape: (usize, usize, usize),
    (s, choreo): (&Stream, &mut ChoreoOperands),
) -> Result<Vec<u16>, String> {
    if variant.is_choreo() {
        return choreo.run_checked(s, variant).map_err(|e| match e {
            BenchError::CannotRun(why) | BenchError::Failed(why) => why,
        });
    }
    c.poison()?;
    // SAFETY: the matrices have the sizes of the product and live past the download (which
    // synchronises the device).
    unsafe { gemm::launch_ours(raw, dtype, variant, (a, b, c), shape) }?;
    c.download()
}

fn measure(
    options: &Options,
    dtype: Dtype,
    size: usize,
    with_cublas: bool,
    rows: &mut Vec<Vec<String>>,
    wrong: &mut Vec<String>,
) -> BenchResult<Option<Point>> {
    let name = dtype.name();
    eprintln!("choreo-bench: gemm: {name} {size}³ …");
    let (m, n, k) = (size, size, size);
    let s = Stream::new()?;
    let raw = s.as_raw();
    let mut c = DeviceMatrix::new(m * n).map_err(failed)?;
    let mut c_cublas = DeviceMatrix::new(m * n).map_err(failed)?;
    let points = gemm::sample_points(m, n);
    let mut ours_co = ChoreoOperands::new(&s, dtype, (m, n, k))?;
    // Each variant is checked on its own: a wrong one is reported (a table row and stderr) and
    // left out of the timing; the others go on.
    let mut variants = variants();
    let mut rejected: Vec<(Variant, String)> = Vec::new();

    // Exact inputs: bit for bit.
    {
        let ha = gemm::exact_matrix(dtype, m, k, 0x51);
        let hb = gemm::exact_matrix(dtype, n, k, 0x52);
        let a = DeviceMatrix::from_host(&ha).map_err(failed)?;
        let b = DeviceMatrix::from_host(&hb).map_err(failed)?;
        ours_co.upload(&s, &ha, &hb)?;
        for &variant in &variants {
            eprintln!("choreo-bench: gemm: checking {} on exact inputs …", variant.name());
            let result =
                run_once(raw, dtype, variant, (&a, &b, &mut c), (m, n, k), (&s, &mut ours_co))
                    .and_then(|hc| {
                        gemm::check_points(
                            &format!("{}, {name} {size}³, exact inputs", variant.name()),
                            dtype,
                            (&ha, &hb, &hc),
                            (n, k),
                            points.iter().copied(),
                            true,
                        )
                    });
            if let Err(why) = result {
                eprintln!("choreo-bench: gemm: FAILED: {why}");
                rejected.push((variant, why));
            }
        }
        variants.retain(|v| rejected.iter().all(|(r, _)| r != v));
    }

    // Random inputs: against the host reference and cuBLAS.
    let ha = gemm::random_matrix(dtype, m, k, 0x61 + size as u64);
    let hb = gemm::random_matrix(dtype, n, k, 0x62 + size as u64);
    let a = DeviceMatrix::from_host(&ha).map_err(failed)?;
    let b = DeviceMatrix::from_host(&hb).map_err(failed)?;
    ours_co.upload(&s, &ha, &hb)?;
    let mut outputs = Vec::new();
    let mut worst = 0f64;
    for &variant in &variants {
        eprintln!("choreo-bench: gemm: checking {} on random inputs …", variant.name());
        let result = run_once(raw, dtype, variant, (&a, &b, &mut c), (m, n, k), (&s, &mut ours_co))
            .and_then(|hc| {
                gemm::check_points(
                    &format!("{}, {name} {size}³", variant.name()),
                    dtype,
                    (&ha, &hb, &hc),
                    (n, k),
                    points.iter().copied(),
                    false,
                )
                .map(|w| (w, hc))
            });
        match result {
            Ok((w, hc)) => {
                worst = worst.max(w);
                outputs.push((variant, hc));
            }
            Err(why) => {
                eprintln!("choreo-bench: gemm: FAILED: {why}");
                rejected.push((variant, why));
            }
        }
    }
    let mut against_cublas = None;
    if with_cublas {
        c_cublas.poison().map_err(failed)?;
        // SAFETY: as above.
        unsafe { gemm::launch_cublas(raw, dtype, (&a, &b, &c_cublas), (m, n, k)) }
            .map_err(failed)?;
        let theirs = c_cublas.download().map_err(failed)?;
        gemm::check_points(
            &format!("cuBLAS, {name} {size}³"),
            dtype,
            (&ha, &hb, &theirs),
            (n, k),
            points.iter().copied(),
            false,
        )
        .map_err(|e| failed(format!("cuBLAS's own output is off (layouts?): {e}")))?;
        let mut worst_cmp: Option<gemm::Comparison> = None;
        for (variant, hc) in &outputs {
            let cmp = gemm::compare(dtype, hc, &theirs);
            if cmp.wrong > 0 {
                let why = format!(
                    "{} differs from cuBLAS, {name} {size}³: {} of {} elements beyond \
                     tolerance, max relative error {:.3e}, max error / rms {:.3e}",
                    variant.name(),
                    cmp.wrong,
                    hc.len(),
                    cmp.max_relative,
                    cmp.max_error_over_rms
                );
                eprintln!("choreo-bench: gemm: FAILED: {why}");
                rejected.push((*variant, why));
                continue;
            }
            if worst_cmp.is_none_or(|w| cmp.max_relative > w.max_relative) {
                worst_cmp = Some(cmp);
            }
        }
        against_cublas = worst_cmp;
    }
    drop(outputs);
    variants.retain(|v| rejected.iter().all(|(r, _)| r != v));
    for (variant, why) in &rejected {
        rows.push(row_text(format!(
            "ours: {} {name} {size}³ WRONG, not timed: {why}",
            variant.name()
        )));
    }

    // Timing: the variants that passed, then cuBLAS.
    let shapes = (m, n, k);
    let batch = batch();
    let (pa, pb, pc, pcc) = (&a, &b, &c, &c_cublas);
    let ours_co = std::cell::RefCell::new(ours_co);
    let mut closures: Vec<Box<dyn FnMut() -> BenchResult<f64> + '_>> = variants
        .iter()
        .map(|&variant| {
            let s = &s;
            let ours_co = &ours_co;
            if variant.is_choreo() {
                return Box::new(move || {
                    per_launch_ms(s, batch, || ours_co.borrow_mut().launch(s, variant))
                }) as Box<dyn FnMut() -> BenchResult<f64> + '_>;
            }
            Box::new(move || {
                per_launch_ms(s, batch, || {
                    // SAFETY: as above; the matrices outlive the timing.
                    unsafe { gemm::launch_ours(raw, dtype, variant, (pa, pb, pc), shapes) }
                        .map_err(failed)
                })
            }) as Box<dyn FnMut() -> BenchResult<f64> + '_>
        })
        .collect();
    if with_cublas {
        let s = &s;
        closures.push(Box::new(move || {
            per_launch_ms(s, batch, || {
                // SAFETY: as above.
                unsafe { gemm::launch_cublas(raw, dtype, (pa, pb, pcc), shapes) }.map_err(failed)
            })
        }));
    }
    wrong.extend(rejected.iter().map(|(_, why)| why.clone()));
    if variants.is_empty() {
        eprintln!("choreo-bench: gemm: {name} {size}³: every variant was wrong; nothing timed");
        return Ok(None);
    }
    let mut timed: Vec<&mut dyn FnMut() -> BenchResult<f64>> =
        closures.iter_mut().map(|f| f.as_mut() as &mut dyn FnMut() -> BenchResult<f64>).collect();
    let summaries: Vec<Summary> = interleaved(options, &mut timed)?;
    drop(timed);
    drop(closures);
    let ours_count = variants.len();
    // The fastest right variant among the Choreo GEMMs and among the hand-written versions.
    let best = |choreo: bool| {
        variants
            .iter()
            .copied()
            .zip(summaries.iter().copied())
            .filter(|(v, _)| v.is_choreo() == choreo)
            .fold(None, |best: Option<(Variant, Summary)>, (v, s)| match best {
                Some(b) if b.1.median <= s.median => Some(b),
                _ => Some((v, s)),
            })
    };
    let (best_choreo, best_hand) = (best(true), best(false));
    let cublas_tflops = summaries.get(ours_count).map(|s| tflops(size, s.median));
    let peak =
        |t: f64| format!("{} TFLOP/s = {} of peak", three_digits(t), three_digits(t / PEAK_TFLOPS));
    for (variant, summary) in variants.iter().zip(&summaries) {
        let t = tflops(size, summary.median);
        let versus = match (cublas_tflops, against_cublas) {
            (Some(theirs), Some(cmp)) => format!(
                "; {} of cuBLAS; vs cuBLAS max rel. err {:.2e}; host check max err {:.2e}",
                three_digits(t / theirs),
                cmp.max_relative,
                worst
            ),
            _ => format!("; host check max err {worst:.2e}"),
        };
        eprintln!("choreo-bench: gemm: {} {name} {size}³: {}{versus}", variant.name(), peak(t));
        let how = if *variant == Variant::Choreo {
            "generated from Choreo: persistent, TMA producer + 2 WGMMA consumer warpgroups, \
             128x256x64 tiles, 4 stages"
        } else if *variant == Variant::ChoreoTma {
            "generated from Choreo: as `choreo`, 3 stages, C staged in shared memory and stored \
             by TMA"
        } else {
            "hand-written: persistent, TMA producer + 2 WGMMA consumer warpgroups, 128x256x64 \
             tiles"
        };
        rows.push(row(
            format!("ours: {} {name} {size}³ ({how})", variant.name()),
            summary,
            peak(t) + &versus,
        ));
    }
    if let Some(theirs) = cublas_tflops {
        eprintln!("choreo-bench: gemm: cuBLAS {name} {size}³: {}", peak(theirs));
        rows.push(row(
            format!("cuBLAS: cublasGemmEx {name} {size}³ (TN)"),
            &summaries[ours_count],
            peak(theirs),
        ));
    }
    if !rejected.is_empty() {
        let names: Vec<&str> = rejected.iter().map(|(v, _)| v.name()).collect();
        eprintln!("choreo-bench: gemm: {name} {size}³: wrong variants: {}", names.join(", "));
    }
    let at = |b: Option<(Variant, Summary)>| b.map(|(v, s)| (v, tflops(size, s.median)));
    Ok(Some(Point { dtype, size, choreo: at(best_choreo), hand: at(best_hand), cublas_tflops }))
}

/// A row with only its first cell filled.
fn row_text(text: String) -> Vec<String> {
    vec![text, String::new(), String::new(), String::new(), String::new()]
}

/// The Choreo GEMMs' operands: choreo tensors of the element type holding the same inputs as
/// the hand-written kernel's matrices, and the generated wrapper that multiplies them.
enum ChoreoOperands {
    /// `gemm_f16`.
    F16(ChoreoMatrices<choreo::f16>),
    /// `gemm_bf16`.
    Bf16(ChoreoMatrices<choreo::bf16>),
}

/// A, B and C of one element type.
struct ChoreoMatrices<T: DeviceRepr> {
    a: DeviceTensor<T, 2>,
    b: DeviceTensor<T, 2>,
    c: DeviceTensor<T, 2>,
}

/// 16-bit floating-point element types, by their bits.
trait Bits16: DeviceRepr + Copy {
    fn from_bits16(bits: u16) -> Self;
    fn to_bits16(self) -> u16;
}

impl Bits16 for choreo::f16 {
    fn from_bits16(bits: u16) -> Self {
        choreo::f16::from_bits(bits)
    }
    fn to_bits16(self) -> u16 {
        self.to_bits()
    }
}

impl Bits16 for choreo::bf16 {
    fn from_bits16(bits: u16) -> Self {
        choreo::bf16::from_bits(bits)
    }
    fn to_bits16(self) -> u16 {
        self.to_bits()
    }
}

/// A generated GEMM wrapper, waited for.
type Gemm<T> = fn(
    &Stream,
    &DeviceTensor<T, 2>,
    &DeviceTensor<T, 2>,
    &mut DeviceTensor<T, 2>,
) -> choreo::Result<()>;

impl<T: Bits16> ChoreoMatrices<T> {
    fn new(s: &Stream, (m, n, k): (usize, usize, usize)) -> BenchResult<Self> {
        Ok(ChoreoMatrices {
            a: DeviceTensor::zeros_on(s, [m, k])?,
            b: DeviceTensor::zeros_on(s, [n, k])?,
            c: DeviceTensor::zeros_on(s, [m, n])?,
        })
    }

    fn upload(&mut self, s: &Stream, ha: &[u16], hb: &[u16]) -> BenchResult<()> {
        for (tensor, bits) in [(&mut self.a, ha), (&mut self.b, hb)] {
            let values: Vec<T> = bits.iter().map(|&x| T::from_bits16(x)).collect();
            let shape = tensor.shape();
            tensor.copy_from_host(s, HostView::new(&values, shape)?)?;
        }
        Ok(())
    }

    /// Poisons C (NaN), multiplies, waits (so a failed run-time check is an error) and
    /// downloads C's bits.
    fn run_checked(&mut self, s: &Stream, gemm: Gemm<T>) -> BenchResult<Vec<u16>> {
        let shape = self.c.shape();
        let nan = vec![T::from_bits16(0x7e00); shape[0] * shape[1]];
        self.c.copy_from_host(s, HostView::new(&nan, shape)?)?;
        gemm(s, &self.a, &self.b, &mut self.c)?;
        Ok(self.c.to_host(s)?.as_slice().iter().map(|x| x.to_bits16()).collect())
    }
}

impl ChoreoOperands {
    fn new(s: &Stream, dtype: Dtype, shape: (usize, usize, usize)) -> BenchResult<Self> {
        Ok(match dtype {
            Dtype::F16 => ChoreoOperands::F16(ChoreoMatrices::new(s, shape)?),
            Dtype::Bf16 => ChoreoOperands::Bf16(ChoreoMatrices::new(s, shape)?),
        })
    }

    fn upload(&mut self, s: &Stream, ha: &[u16], hb: &[u16]) -> BenchResult<()> {
        match self {
            ChoreoOperands::F16(x) => x.upload(s, ha, hb),
            ChoreoOperands::Bf16(x) => x.upload(s, ha, hb),
        }
    }

    /// `variant` (a Choreo GEMM) on the operands, waited for, C's bits downloaded.
    fn run_checked(&mut self, s: &Stream, variant: Variant) -> BenchResult<Vec<u16>> {
        use kernels::gemm as k;
        let tma = variant == Variant::ChoreoTma;
        match self {
            ChoreoOperands::F16(x) if tma => {
                x.run_checked(s, |s, a, b, c| k::gemm_f16_tma_store(s, a, b, c)?.wait())
            }
            ChoreoOperands::F16(x) => {
                x.run_checked(s, |s, a, b, c| k::gemm_f16(s, a, b, c)?.wait())
            }
            ChoreoOperands::Bf16(x) if tma => {
                x.run_checked(s, |s, a, b, c| k::gemm_bf16_tma_store(s, a, b, c)?.wait())
            }
            ChoreoOperands::Bf16(x) => {
                x.run_checked(s, |s, a, b, c| k::gemm_bf16(s, a, b, c)?.wait())
            }
        }
    }

    /// One launch of `variant` (a Choreo GEMM), not waited for (the timing loop).
    fn launch(&mut self, s: &Stream, variant: Variant) -> BenchResult<()> {
        use kernels::gemm as k;
        let tma = variant == Variant::ChoreoTma;
        match self {
            ChoreoOperands::F16(x) if tma => drop(k::gemm_f16_tma_store(s, &x.a, &x.b, &mut x.c)?),
            ChoreoOperands::F16(x) => drop(k::gemm_f16(s, &x.a, &x.b, &mut x.c)?),
            ChoreoOperands::Bf16(x) if tma => {
                drop(k::gemm_bf16_tma_store(s, &x.a, &x.b, &mut x.c)?)
            }
            ChoreoOperands::Bf16(x) => drop(k::gemm_bf16(s, &x.a, &x.b, &mut x.c)?),
        }
        Ok(())
    }
}
