//! The fp8 GEMM (issue 15): the Choreo `gemm_e4m3` (`kernels/gemm.co`: persistent, TMA
//! producer + 2 WGMMA consumer warpgroups, 128 x 256 x 128 tiles, 4 stages, m64n256k32 e4m3
//! WGMMAs) against cuBLASLt's fp8 GEMM loaded at run time (`kernels/cublaslt.cu`, dlopen):
//!
//! `C[M, N] = A[M, K] · B[N, K]ᵀ`, A and B e4m3 row-major (K-major; cuBLASLt's "TN" form), f32
//! accumulation, C bf16, for M = N = K ∈ {4096, 8192} (`--quick`: 1024 and 2048). TFLOP/s count
//! 2·M·N·K operations; the fraction of the H200's dense fp8 peak (1979 TFLOP/s) is shown too.
//!
//! cuBLASLt is timed in two modes: fast accumulation (`CUBLASLT_MATMUL_DESC_FAST_ACCUM` = 1:
//! the tensor cores' accumulators throughout, the algorithm and numerics of `gemm_e4m3`; the
//! target's reference) and its default (partial sums promoted periodically: more accurate on
//! long K, slower; shown for information).
//!
//! Checks before timing, each on a poisoned (NaN) output, each saying which check failed: on
//! exact inputs (the integers -4..=4: every correct kernel rounds the same exact f32 sums to
//! bf16) ours and cuBLASLt bit for bit against a float64 host reference on 6 full rows and 6
//! full columns, and ours against cuBLASLt on every element; then on random inputs in [-1, 1)
//! (rounded to e4m3) the same within a few bf16 units in the last place.

use choreo::{DeviceTensor, F8E4M3, HostView, Stream, bf16};
use choreo_bench::gemm::{self, Comparison};
use choreo_bench::gemm_fp8::{self, OUTPUT};
use choreo_bench::stats::Summary;
use choreo_bench::table::three_digits;

use super::gemm::kernels;
use super::tiled::{per_launch_ms, row};
use super::{BenchError, BenchResult, Options, interleaved};

/// The H200's dense fp8 tensor-core peak (SXM), TFLOP/s.
pub const PEAK_TFLOPS: f64 = 1979.0;
/// Launches per timed trial.
const BATCH: usize = 10;

/// One size.
pub struct Point {
    /// M = N = K.
    pub size: usize,
    /// Ours (median), when ours was right.
    pub ours_tflops: Option<f64>,
    /// cuBLASLt with fast accumulation (median), when it ran.
    pub cublaslt_tflops: Option<f64>,
    /// cuBLASLt with its default accumulation (median), when it ran.
    pub cublaslt_default_tflops: Option<f64>,
}

/// The section's outcome.
pub struct Outcome {
    /// Table rows `[variant, median, min, max, derived]`.
    pub rows: Vec<Vec<String>>,
    /// Every measured size.
    pub points: Vec<Point>,
    /// Why cuBLASLt did not run, if it did not.
    pub cublaslt_missing: Option<String>,
    /// The checks that failed (each says which and why).
    pub wrong: Vec<String>,
}

fn failed(message: String) -> BenchError {
    BenchError::Failed(format!("gemm-fp8: {message}"))
}

fn tflops(size: usize, ms: f64) -> f64 {
    2.0 * (size as f64).powi(3) / (ms * 1e-3) / 1e12
}

/// Runs the section.
pub fn run(options: &Options) -> BenchResult<Outcome> {
    if !gemm::built() {
        return Err(BenchError::CannotRun("the GEMM kernels were not compiled".into()));
    }
    let lt = gemm_fp8::load_cublaslt();
    match &lt {
        Ok(version) => eprintln!("choreo-bench: gemm-fp8: cuBLASLt {version} loaded"),
        Err(why) => eprintln!("choreo-bench: gemm-fp8: {why}; timing ours alone"),
    }
    let sizes: &[usize] = if options.quick { &[1024, 2048] } else { &[4096, 8192] };
    let mut outcome = Outcome {
        rows: Vec::new(),
        points: Vec::new(),
        cublaslt_missing: lt.clone().err(),
        wrong: Vec::new(),
    };
    for &size in sizes {
        let point = measure(options, size, lt.is_ok(), &mut outcome)?;
        outcome.points.push(point);
    }
    if let Some(why) = &outcome.cublaslt_missing {
        outcome.rows.push(row_text(format!("cuBLASLt not measured: {why}")));
    }
    Ok(outcome)
}

/// A row with only its first cell filled.
fn row_text(text: String) -> Vec<String> {
    vec![text, String::new(), String::new(), String::new(), String::new()]
}

/// The operands on the device: A, B, our C and cuBLASLt's C.
struct Operands {
    a: DeviceTensor<F8E4M3, 2>,
    b: DeviceTensor<F8E4M3, 2>,
    c: DeviceTensor<bf16, 2>,
    c_lt: DeviceTensor<bf16, 2>,
}

impl Operands {
    fn upload(&mut self, s: &Stream, ha: &[F8E4M3], hb: &[F8E4M3]) -> BenchResult<()> {
        let shape = self.a.shape();
        self.a.copy_from_host(s, HostView::new(ha, shape)?)?;
        let shape = self.b.shape();
        self.b.copy_from_host(s, HostView::new(hb, shape)?)?;
        Ok(())
    }
}

/// Fills `c` with NaN.
fn poison(s: &Stream, c: &mut DeviceTensor<bf16, 2>) -> BenchResult<()> {
    let shape = c.shape();
    let nan = vec![bf16::from_bits(0xFFFF); shape[0] * shape[1]];
    c.copy_from_host(s, HostView::new(&nan, shape)?)?;
    Ok(())
}

/// C's bits.
fn download(s: &Stream, c: &DeviceTensor<bf16, 2>) -> BenchResult<Vec<u16>> {
    Ok(c.to_host(s)?.as_slice().iter().map(|x| x.to_bits()).collect())
}

/// One launch of ours, not waited for.
fn launch_ours(
    s: &Stream,
    ops: (&DeviceTensor<F8E4M3, 2>, &DeviceTensor<F8E4M3, 2>, &mut DeviceTensor<bf16, 2>),
) -> BenchResult<()> {
    drop(kernels::gemm::gemm_e4m3(s, ops.0, ops.1, ops.2)?);
    Ok(())
}

/// One cuBLASLt product on `s`, not waited for (see [`gemm_fp8::cublaslt`]).
fn launch_cublaslt(
    s: &Stream,
    ops: (&DeviceTensor<F8E4M3, 2>, &DeviceTensor<F8E4M3, 2>, &mut DeviceTensor<bf16, 2>),
    fast_accum: bool,
) -> BenchResult<()> {
    gemm_fp8::cublaslt(s, ops, fast_accum).map_err(failed)
}

fn measure(
    options: &Options,
    size: usize,
    with_lt: bool,
    outcome: &mut Outcome,
) -> BenchResult<Point> {
    eprintln!("choreo-bench: gemm-fp8: e4m3 {size}³ …");
    let (m, n, k) = (size, size, size);
    let s = Stream::new()?;
    let mut ops = Operands {
        a: DeviceTensor::zeros_on(&s, [m, k])?,
        b: DeviceTensor::zeros_on(&s, [n, k])?,
        c: DeviceTensor::zeros_on(&s, [m, n])?,
        c_lt: DeviceTensor::zeros_on(&s, [m, n])?,
    };
    let points = gemm::sample_points(m, n);
    let mut ours_ok = true;
    let mut lt_ok = with_lt;
    let mut lt_default_ok = with_lt;
    let mut worst_host = 0f64;
    let mut versus: Option<Comparison> = None;
    let wrong = |why: String, outcome: &mut Outcome| {
        eprintln!("choreo-bench: gemm-fp8: FAILED: {why}");
        outcome.rows.push(row_text(format!("WRONG, not timed: {why}")));
        outcome.wrong.push(why);
    };
    for exact in [true, false] {
        let kind = if exact { "exact inputs" } else { "random inputs" };
        let (ha, hb) = if exact {
            (gemm_fp8::exact_matrix(m, k, 0x71), gemm_fp8::exact_matrix(n, k, 0x72))
        } else {
            let seed = 0x81 + size as u64;
            (gemm_fp8::random_matrix(m, k, seed), gemm_fp8::random_matrix(n, k, seed + 1))
        };
        ops.upload(&s, &ha, &hb)?;
        let mut ours = None;
        if ours_ok {
            eprintln!("choreo-bench: gemm-fp8: checking gemm_e4m3 on {kind} …");
            poison(&s, &mut ops.c)?;
            let what = format!("gemm_e4m3 vs the host reference, {size}³, {kind}");
            // A failed run-time check or bounds check is reported like a wrong result (a
            // fault of the kernel leaves the context unusable: the next call fails anyway).
            let result = kernels::gemm::gemm_e4m3(&s, &ops.a, &ops.b, &mut ops.c)
                .and_then(|p| p.wait())
                .map_err(|e| format!("gemm_e4m3, {size}³, {kind}: {e}"))
                .and_then(|()| {
                    download(&s, &ops.c).map_err(|e| match e {
                        BenchError::Failed(why) | BenchError::CannotRun(why) => why,
                    })
                })
                .and_then(|hc| {
                    gemm_fp8::check_points(
                        &what,
                        (&ha, &hb, &hc),
                        (n, k),
                        points.iter().copied(),
                        exact,
                    )
                    .map(|w| (w, hc))
                });
            match result {
                Ok((w, hc)) => {
                    worst_host = worst_host.max(w);
                    ours = Some(hc);
                }
                Err(why) => {
                    wrong(why, outcome);
                    ours_ok = false;
                }
            }
        }
        // cuBLASLt in both modes: fast accumulation (the reference; compared with ours) and
        // its default. A mode that fails or is wrong is reported and left out of the timing.
        for fast in [true, false] {
            let mode_ok = if fast { &mut lt_ok } else { &mut lt_default_ok };
            if !*mode_ok {
                continue;
            }
            let mode = if fast { "fast accum" } else { "default accum" };
            eprintln!("choreo-bench: gemm-fp8: checking cuBLASLt ({mode}) on {kind} …");
            poison(&s, &mut ops.c_lt)?;
            let theirs = launch_cublaslt(&s, (&ops.a, &ops.b, &mut ops.c_lt), fast)
                .and_then(|()| download(&s, &ops.c_lt));
            let theirs = match theirs {
                Ok(theirs) => theirs,
                Err(BenchError::Failed(why) | BenchError::CannotRun(why)) => {
                    wrong(format!("cuBLASLt ({mode}), {size}³, {kind}: {why}"), outcome);
                    *mode_ok = false;
                    continue;
                }
            };
            let what = format!("cuBLASLt ({mode}) vs the host reference, {size}³, {kind}");
            let host = gemm_fp8::check_points(
                &what,
                (&ha, &hb, &theirs),
                (n, k),
                points.iter().copied(),
                exact,
            );
            if let Err(why) = host {
                // cuBLASLt itself off: the layouts or descriptors are wrong, not ours.
                wrong(
                    format!(
                        "{why} (cuBLASLt's own output: its descriptors or the layout mapping \
                         are wrong)"
                    ),
                    outcome,
                );
                *mode_ok = false;
                continue;
            }
            let Some(hc) = ours.as_ref().filter(|_| fast) else {
                continue;
            };
            let cmp = gemm::compare(OUTPUT, hc, &theirs);
            let differing = hc.iter().zip(&theirs).filter(|(x, y)| x != y).count();
            if (exact && differing > 0) || cmp.wrong > 0 {
                let (i, j) = hc
                    .iter()
                    .zip(&theirs)
                    .position(|(x, y)| x != y)
                    .map_or((0, 0), |x| (x / n, x % n));
                wrong(
                    format!(
                        "gemm_e4m3 vs cuBLASLt, {size}³, {kind}: {differing} of {} elements \
                         differ ({} beyond tolerance), first at C[{i}][{j}] = {} vs {}; max \
                         relative error {:.3e}",
                        hc.len(),
                        cmp.wrong,
                        OUTPUT.value(hc[i * n + j]),
                        OUTPUT.value(theirs[i * n + j]),
                        cmp.max_relative
                    ),
                    outcome,
                );
                ours_ok = false;
            } else if !exact {
                versus = Some(cmp);
            }
        }
    }

    // Timing: ours, cuBLASLt fast accumulation, cuBLASLt default.
    let mut point =
        Point { size, ours_tflops: None, cublaslt_tflops: None, cublaslt_default_tflops: None };
    let Operands { a, b, mut c, mut c_lt } = ops;
    let (a, b) = (&a, &b);
    let s = &s;
    let mut ours = || per_launch_ms(s, BATCH, || launch_ours(s, (a, b, &mut c)));
    let c_lt = std::cell::RefCell::new(&mut c_lt);
    let mut lt_fast =
        || per_launch_ms(s, BATCH, || launch_cublaslt(s, (a, b, &mut **c_lt.borrow_mut()), true));
    let mut lt_default =
        || per_launch_ms(s, BATCH, || launch_cublaslt(s, (a, b, &mut **c_lt.borrow_mut()), false));
    let mut names: Vec<&str> = Vec::new();
    let mut timed: Vec<&mut dyn FnMut() -> BenchResult<f64>> = Vec::new();
    if ours_ok {
        names.push("ours");
        timed.push(&mut ours);
    }
    if lt_ok {
        names.push("fast");
        timed.push(&mut lt_fast);
    }
    if lt_default_ok {
        names.push("default");
        timed.push(&mut lt_default);
    }
    if timed.is_empty() {
        eprintln!("choreo-bench: gemm-fp8: {size}³: nothing right to time");
        return Ok(point);
    }
    let summaries: Vec<Summary> = interleaved(options, &mut timed)?;
    let get = |name: &str| names.iter().position(|x| *x == name).map(|i| summaries[i]);
    let peak =
        |t: f64| format!("{} TFLOP/s = {} of peak", three_digits(t), three_digits(t / PEAK_TFLOPS));
    point.ours_tflops = get("ours").map(|x| tflops(size, x.median));
    point.cublaslt_tflops = get("fast").map(|x| tflops(size, x.median));
    point.cublaslt_default_tflops = get("default").map(|x| tflops(size, x.median));
    if let (Some(summary), Some(t)) = (get("ours"), point.ours_tflops) {
        let mut derived = peak(t);
        if let Some(theirs) = point.cublaslt_tflops {
            derived += &format!("; {} of cuBLASLt (fast accum)", three_digits(t / theirs));
        }
        if let Some(cmp) = versus {
            derived += &format!("; vs cuBLASLt max rel. err {:.2e}", cmp.max_relative);
        }
        derived += &format!("; host check max err {worst_host:.2e}");
        eprintln!("choreo-bench: gemm-fp8: gemm_e4m3 {size}³: {derived}");
        outcome.rows.push(row(
            format!(
                "ours: Choreo gemm_e4m3 e4m3→bf16 {size}³ (persistent, TMA producer + 2 WGMMA \
                 consumer warpgroups, 128x256x128 tiles, 4 stages)"
            ),
            &summary,
            derived,
        ));
    }
    for (name, label) in [("fast", "fast accumulation"), ("default", "default accumulation")] {
        if let Some(summary) = get(name) {
            let t = tflops(size, summary.median);
            eprintln!("choreo-bench: gemm-fp8: cuBLASLt {label} {size}³: {}", peak(t));
            outcome.rows.push(row(
                format!("cuBLASLt: cublasLtMatmul e4m3→bf16 {size}³ (TN, {label})"),
                &summary,
                peak(t),
            ));
        }
    }
    Ok(point)
}
