//! GEMM on the Hopper tensor cores (issue 15): the hand-written persistent, warp-specialised
//! WGMMA kernel (`kernels/gemm_wgmma.cu`, built on the compiler's WGMMA library
//! `choreo-compiler/src/emit/cuda/wgmma.cuh`; see [`choreo_bench::gemm`]), in two versions
//! (one block per tile; clusters of two blocks sharing B tiles by TMA multicast), against
//! cuBLAS's `cublasGemmEx` loaded at run time (dlopen; nothing is linked):
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

use choreo::Stream;
use choreo_bench::gemm::{self, DeviceMatrix, Dtype, Variant};
use choreo_bench::stats::Summary;
use choreo_bench::table::three_digits;

use super::tiled::{per_launch_ms, row};
use super::{BenchError, BenchResult, Options, interleaved};

/// The H200's dense f16/bf16 tensor-core peak (SXM, with f32 accumulation), TFLOP/s.
pub const PEAK_TFLOPS: f64 = 989.0;
/// Launches per timed trial.
const BATCH: usize = 10;

/// One (type, size) point.
pub struct Point {
    /// The element type.
    pub dtype: Dtype,
    /// M = N = K.
    pub size: usize,
    /// Our TFLOP/s (median of the faster version).
    pub ours_tflops: f64,
    /// The faster version.
    pub ours_variant: Variant,
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
    let mut outcome =
        Outcome { rows: Vec::new(), points: Vec::new(), cublas_missing: cublas.clone().err() };
    for &dtype in &Dtype::ALL {
        for &size in sizes {
            let point = measure(options, dtype, size, cublas.is_ok(), &mut outcome.rows)?;
            outcome.points.push(point);
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

/// The versions to check and time: both, or only the single-block one when
/// `CHOREO_BENCH_GEMM_CLUSTER=0` (to measure it alone should the cluster version misbehave).
fn variants() -> Vec<Variant> {
    if std::env::var("CHOREO_BENCH_GEMM_CLUSTER").is_ok_and(|v| v == "0") {
        vec![Variant::Single]
    } else {
        Variant::ALL.to_vec()
    }
}

fn measure(
    options: &Options,
    dtype: Dtype,
    size: usize,
    with_cublas: bool,
    rows: &mut Vec<Vec<String>>,
) -> BenchResult<Point> {
    let variants = variants();
    let name = dtype.name();
    eprintln!("choreo-bench: gemm: {name} {size}³ …");
    let (m, n, k) = (size, size, size);
    let s = Stream::new()?;
    let raw = s.as_raw();
    let mut c = DeviceMatrix::new(m * n).map_err(failed)?;
    let mut c_cublas = DeviceMatrix::new(m * n).map_err(failed)?;
    let points = gemm::sample_points(m, n);

    // Exact inputs: bit for bit.
    {
        let ha = gemm::exact_matrix(dtype, m, k, 0x51);
        let hb = gemm::exact_matrix(dtype, n, k, 0x52);
        let a = DeviceMatrix::from_host(&ha).map_err(failed)?;
        let b = DeviceMatrix::from_host(&hb).map_err(failed)?;
        for &variant in &variants {
            eprintln!("choreo-bench: gemm: checking {} on exact inputs …", variant.name());
            c.poison().map_err(failed)?;
            // SAFETY: the matrices have the sizes of the product and live past the download.
            unsafe { gemm::launch_ours(raw, dtype, variant, (&a, &b, &c), (m, n, k)) }
                .map_err(failed)?;
            let hc = c.download().map_err(failed)?;
            gemm::check_points(
                &format!("{}, {name} {size}³, exact inputs", variant.name()),
                dtype,
                (&ha, &hb, &hc),
                (n, k),
                points.iter().copied(),
                true,
            )
            .map_err(failed)?;
        }
    }

    // Random inputs: against the host reference and cuBLAS.
    let ha = gemm::random_matrix(dtype, m, k, 0x61 + size as u64);
    let hb = gemm::random_matrix(dtype, n, k, 0x62 + size as u64);
    let a = DeviceMatrix::from_host(&ha).map_err(failed)?;
    let b = DeviceMatrix::from_host(&hb).map_err(failed)?;
    let mut outputs = Vec::new();
    let mut worst = 0f64;
    for &variant in &variants {
        eprintln!("choreo-bench: gemm: checking {} on random inputs …", variant.name());
        c.poison().map_err(failed)?;
        // SAFETY: as above.
        unsafe { gemm::launch_ours(raw, dtype, variant, (&a, &b, &c), (m, n, k)) }
            .map_err(failed)?;
        let hc = c.download().map_err(failed)?;
        worst = worst.max(
            gemm::check_points(
                &format!("{}, {name} {size}³", variant.name()),
                dtype,
                (&ha, &hb, &hc),
                (n, k),
                points.iter().copied(),
                false,
            )
            .map_err(failed)?,
        );
        outputs.push((variant, hc));
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
                return Err(failed(format!(
                    "{} differs from cuBLAS, {name} {size}³: {} of {} elements beyond \
                     tolerance, max relative error {:.3e}, max error / rms {:.3e}",
                    variant.name(),
                    cmp.wrong,
                    hc.len(),
                    cmp.max_relative,
                    cmp.max_error_over_rms
                )));
            }
            if worst_cmp.is_none_or(|w| cmp.max_relative > w.max_relative) {
                worst_cmp = Some(cmp);
            }
        }
        against_cublas = worst_cmp;
    }
    drop(outputs);

    // Timing.
    let shapes = (m, n, k);
    let (pa, pb, pc, pcc) = (&a, &b, &c, &c_cublas);
    let launch_ours = |variant: Variant| {
        per_launch_ms(&s, BATCH, || {
            // SAFETY: as above; the matrices outlive the timing.
            unsafe { gemm::launch_ours(raw, dtype, variant, (pa, pb, pc), shapes) }.map_err(failed)
        })
    };
    let mut single = || launch_ours(Variant::Single);
    let mut cluster = || launch_ours(Variant::Cluster2);
    let mut theirs = || {
        per_launch_ms(&s, BATCH, || {
            // SAFETY: as above.
            unsafe { gemm::launch_cublas(raw, dtype, (pa, pb, pcc), shapes) }.map_err(failed)
        })
    };
    let mut timed: Vec<&mut dyn FnMut() -> BenchResult<f64>> = vec![&mut single];
    if variants.contains(&Variant::Cluster2) {
        timed.push(&mut cluster);
    }
    if with_cublas {
        timed.push(&mut theirs);
    }
    let summaries: Vec<Summary> = interleaved(options, &mut timed)?;
    let ours_count = variants.len();
    let (ours_variant, ours_summary) = variants
        .iter()
        .copied()
        .zip(summaries.iter().copied())
        .fold(None, |best: Option<(Variant, Summary)>, (v, s)| match best {
            Some(b) if b.1.median <= s.median => Some(b),
            _ => Some((v, s)),
        })
        .ok_or_else(|| failed("no version was timed".into()))?;
    let ours_tflops = tflops(size, ours_summary.median);
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
        rows.push(row(
            format!(
                "ours: {} {name} {size}³ (persistent, TMA producer + 2 WGMMA consumer \
                 warpgroups, 128x256x64 tiles, 4 stages)",
                variant.name()
            ),
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
    Ok(Point { dtype, size, ours_tflops, ours_variant, cublas_tflops })
}
