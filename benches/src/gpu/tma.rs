//! TMA (tier 3): generated kernels that move tiles with the Hopper copy engine
//! (`kernels/tma.co`), timed round-robin on one stream against a device-to-device
//! `cudaMemcpyAsync` of the same bytes and against the tier-2 versions of the same kernels:
//!
//! - **copy** of an 8192 x 8192 f32 matrix in [32, 256] tiles: `copy_tma` (one tile per block:
//!   a TMA load, its mbarrier, a TMA store), `copy_tma_pipelined` (8 tiles per block, the load
//!   of tile k + 1 in flight while tile k is stored: `tma.load.async`, `tma.any`, `swap`) and
//!   the tier-2 `copy_dma` (block-wide `dma.copy` global → shared → global, 16-byte accesses);
//! - **transpose** of the same matrix: `transpose_tma` (TMA load of a 32 x 32 tile, transposed
//!   by 256 threads through a padded 32 x 33 tile, TMA store at the mirrored position),
//!   `transpose_tma64` (the same with 64 x 64 tiles) and `transpose_tma_pipelined` (4 tiles of
//!   32 x 32 per block, the next tile's load in flight) against the tier-2
//!   `tiled::transpose_tiled` (the `tiled` section's kernel).
//!
//! - **warp-specialised pipeline** (`ws_poly`): a producer warpgroup feeding two consumer
//!   warpgroups through a 4-slot ring of TMA tiles with `full`/`empty` event rings (`trigger
//!   … after` binds each load to its `full` slot); the consumers compute 64 dependent
//!   multiply-adds per element. Its time is compared with `ws_poly_compute_only`, the same
//!   consumer code on tiles loaded once, without events: their ratio is the consumers' busy
//!   fraction (target ≥ 0.90: no pipeline bubble).
//!
//! GB/s count the bytes read plus written (2 x 256 MiB). Every variant is checked bit for bit
//! on a poisoned (NaN) output before it is timed. Each trial times a batch of 10 launches behind
//! an untimed one (see [`super::tiled`]).

use choreo::{DeviceTensor, HostView, Stream};
use choreo_bench::stats::Summary;
use choreo_bench::table::three_digits;

use super::tiled::{check_transpose, copy_async, gbps, per_launch_ms, poison, row};
use super::{BenchError, BenchResult, Options, Random, RawBuffer, interleaved};

/// The generated side: `kernels/tma.co` (library `tma`, module `tma`).
mod kernels {
    choreo::include_kernels!("tma");
}
use kernels::tma;

/// The extent of the matrices (rows = columns).
const SQUARE: usize = 8192;
/// Launches per timed trial.
const BATCH: usize = 10;

/// The section's outcome: speeds as ratios (time of the other over time of ours).
pub struct Outcome {
    /// Table rows `[variant, median, min, max, derived]`.
    pub rows: Vec<Vec<String>>,
    /// The faster TMA copy over the device-to-device copy (target ≥ 0.90), and its name.
    pub copy_over_d2d: (f64, &'static str),
    /// The faster TMA copy over the tier-2 copy (target ≥ 1).
    pub copy_over_tier2: f64,
    /// The fastest TMA transpose over the device-to-device copy (target ≥ 0.90), and its name.
    pub transpose_over_d2d: (f64, &'static str),
    /// The fastest TMA transpose over the tier-2 transpose (target ≥ 1).
    pub transpose_over_tier2: f64,
    /// The warp-specialised pipeline's consumer busy fraction: time of the consumers alone
    /// over time of the pipeline (target ≥ 0.90).
    pub pipeline_busy: f64,
}

fn failed(message: String) -> BenchError {
    BenchError::Failed(format!("tma: {message}"))
}

/// Checks that `got` equals `want` bit for bit.
fn check_copy(what: &str, want: &[f32], got: &[f32]) -> BenchResult<()> {
    let wrong = want.iter().zip(got).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
    match want.iter().zip(got).position(|(a, b)| a.to_bits() != b.to_bits()) {
        None => Ok(()),
        Some(i) => Err(failed(format!(
            "copy: {what}: {wrong} of {} elements wrong, first [{i}] = {} (want {})",
            want.len(),
            got[i],
            want[i]
        ))),
    }
}

/// Runs the section.
pub fn run(options: &Options) -> BenchResult<Outcome> {
    eprintln!("choreo-bench: tma: copies and transposes …");
    let n = SQUARE;
    let s = Stream::new()?;
    let input = Random::new(0x7a3a).vec_f32(n * n, -1.0, 1.0);
    let a = DeviceTensor::from_host(&s, HostView::new(&input, [n, n])?)?;
    let mut o = DeviceTensor::<f32, 2>::zeros_on(&s, [n, n])?;
    let mut raw_a = RawBuffer::f32s(n * n)?;
    let mut raw_copy = RawBuffer::f32s(n * n)?;
    raw_a.upload(&input)?;
    let (pa, pcopy) = (raw_a.f32_ptr().cast_const(), raw_copy.f32_ptr());
    let bytes = raw_a.bytes();

    // Checks, each on a poisoned output.
    poison(&s, &mut o)?;
    tma::copy_tma(&s, &a, &mut o)?.wait()?;
    check_copy("copy_tma", &input, o.to_host(&s)?.as_slice())?;
    poison(&s, &mut o)?;
    tma::copy_tma_pipelined(&s, &a, &mut o)?.wait()?;
    check_copy("copy_tma_pipelined", &input, o.to_host(&s)?.as_slice())?;
    poison(&s, &mut o)?;
    tma::copy_dma(&s, &a, &mut o)?.wait()?;
    check_copy("copy_dma", &input, o.to_host(&s)?.as_slice())?;
    poison(&s, &mut o)?;
    tma::transpose_tma(&s, &a, &mut o)?.wait()?;
    check_transpose("transpose_tma", n, &input, o.to_host(&s)?.as_slice())?;
    poison(&s, &mut o)?;
    tma::transpose_tma64(&s, &a, &mut o)?.wait()?;
    check_transpose("transpose_tma64", n, &input, o.to_host(&s)?.as_slice())?;
    poison(&s, &mut o)?;
    tma::transpose_tma_pipelined(&s, &a, &mut o)?.wait()?;
    check_transpose("transpose_tma_pipelined", n, &input, o.to_host(&s)?.as_slice())?;
    poison(&s, &mut o)?;
    super::tiled::kernels::tiled::transpose_tiled(&s, &a, &mut o)?.wait()?;
    check_transpose("transpose_tiled", n, &input, o.to_host(&s)?.as_slice())?;
    raw_copy.poison(&s)?;
    copy_async(&s, pcopy, pa, bytes)?;
    if raw_copy.download()? != input {
        return Err(failed("the device-to-device copy is wrong".into()));
    }

    let stream = &s;
    let (a, o) = (&a, std::cell::RefCell::new(o));
    let timed = |launch: &dyn Fn(&mut DeviceTensor<f32, 2>) -> BenchResult<()>| {
        per_launch_ms(stream, BATCH, || launch(&mut o.borrow_mut()))
    };
    let mut copy_tma = || {
        timed(&|o| {
            drop(tma::copy_tma(stream, a, o)?);
            Ok(())
        })
    };
    let mut copy_tma_pipelined = || {
        timed(&|o| {
            drop(tma::copy_tma_pipelined(stream, a, o)?);
            Ok(())
        })
    };
    let mut copy_dma = || {
        timed(&|o| {
            drop(tma::copy_dma(stream, a, o)?);
            Ok(())
        })
    };
    let mut transpose_tma = || {
        timed(&|o| {
            drop(tma::transpose_tma(stream, a, o)?);
            Ok(())
        })
    };
    let mut transpose_tma64 = || {
        timed(&|o| {
            drop(tma::transpose_tma64(stream, a, o)?);
            Ok(())
        })
    };
    let mut transpose_tma_pipelined = || {
        timed(&|o| {
            drop(tma::transpose_tma_pipelined(stream, a, o)?);
            Ok(())
        })
    };
    let mut transpose_tiled = || {
        timed(&|o| {
            drop(super::tiled::kernels::tiled::transpose_tiled(stream, a, o)?);
            Ok(())
        })
    };
    let mut d2d = || per_launch_ms(stream, BATCH, || copy_async(stream, pcopy, pa, bytes));
    let summaries = interleaved(
        options,
        &mut [
            &mut copy_tma,
            &mut copy_tma_pipelined,
            &mut copy_dma,
            &mut transpose_tma,
            &mut transpose_tma64,
            &mut transpose_tma_pipelined,
            &mut transpose_tiled,
            &mut d2d,
        ],
    )?;
    let [
        copy_tma,
        copy_tma_pipelined,
        copy_dma,
        transpose_tma,
        transpose_tma64,
        transpose_tma_pipelined,
        transpose_tiled,
        d2d,
    ]: [Summary; 8] =
        summaries.try_into().map_err(|_| failed("eight summaries expected".into()))?;

    let moved = 2 * bytes;
    let d2d_gbps = gbps(moved, d2d.median);
    let rate = |s: &Summary, extra: String| {
        let r = gbps(moved, s.median);
        format!("{} GB/s = {} of copy{extra}", three_digits(r), three_digits(r / d2d_gbps))
    };
    let over = |reference: &Summary, ours: &Summary| reference.median / ours.median;
    let fastest = |variants: &[(Summary, &'static str)]| {
        variants
            .iter()
            .copied()
            .fold(variants[0], |a, b| if b.0.median < a.0.median { b } else { a })
    };
    let (best_copy, best_copy_name) =
        fastest(&[(copy_tma, "copy_tma"), (copy_tma_pipelined, "copy_tma_pipelined")]);
    let (best_transpose, best_transpose_name) = fastest(&[
        (transpose_tma, "transpose_tma"),
        (transpose_tma64, "transpose_tma64"),
        (transpose_tma_pipelined, "transpose_tma_pipelined"),
    ]);
    let over_tier2_transpose =
        |s: &Summary| rate(s, format!("; over tier 2 {}", three_digits(over(&transpose_tiled, s))));
    let rows = vec![
        row(
            format!("copy, ours: tma::copy_tma ([32, 256] tiles, one per block), {n}x{n} f32"),
            &copy_tma,
            rate(&copy_tma, format!("; over tier 2 {}", three_digits(over(&copy_dma, &copy_tma)))),
        ),
        row(
            "copy, ours: tma::copy_tma_pipelined (8 tiles per block, load k+1 during store k)",
            &copy_tma_pipelined,
            rate(
                &copy_tma_pipelined,
                format!("; over tier 2 {}", three_digits(over(&copy_dma, &copy_tma_pipelined))),
            ),
        ),
        row(
            "copy, tier 2: tma::copy_dma (block-wide dma.copy through shared)",
            &copy_dma,
            rate(&copy_dma, String::new()),
        ),
        row(
            "transpose, ours: tma::transpose_tma (TMA load/store, 32x32 tiles, 32x33 staging)",
            &transpose_tma,
            over_tier2_transpose(&transpose_tma),
        ),
        row(
            "transpose, ours: tma::transpose_tma64 (64x64 tiles, 64x65 staging)",
            &transpose_tma64,
            over_tier2_transpose(&transpose_tma64),
        ),
        row(
            "transpose, ours: tma::transpose_tma_pipelined (4 tiles per block, next load in flight)",
            &transpose_tma_pipelined,
            over_tier2_transpose(&transpose_tma_pipelined),
        ),
        row(
            "transpose, tier 2: tiled::transpose_tiled (32x33 tile)",
            &transpose_tiled,
            rate(&transpose_tiled, String::new()),
        ),
        row("cudaMemcpyAsync device to device (same bytes)", &d2d, rate(&d2d, String::new())),
    ];
    drop((a, o, raw_a, raw_copy));
    let (pipeline_rows, pipeline_busy) = pipeline(options)?;
    let mut rows = rows;
    rows.extend(pipeline_rows);
    Ok(Outcome {
        pipeline_busy,
        rows,
        copy_over_d2d: (over(&d2d, &best_copy), best_copy_name),
        copy_over_tier2: over(&copy_dma, &best_copy),
        transpose_over_d2d: (over(&d2d, &best_transpose), best_transpose_name),
        transpose_over_tier2: over(&transpose_tiled, &best_transpose),
    })
}

/// Rows of the pipeline matrices.
const PIPELINE_ROWS: usize = 131072;
/// Columns of the pipeline matrices.
const PIPELINE_COLS: usize = 256;
/// Rows a block of the pipeline kernels handles (32 tiles of 32 rows).
const PIPELINE_ROWS_PER_BLOCK: usize = 1024;

/// The consumers' arithmetic of the pipeline kernels: 64 dependent multiply-adds (nvcc fuses
/// each into one FMA; `mul_add` is the same rounding).
fn ws_poly_reference(x: f32) -> f32 {
    (0..64).fold(x, |v, _| v.mul_add(0.998, 0.5))
}

/// Checks `got` against `ws_poly_reference` of the input row `source(r)` for every row `r`,
/// to a relative 1e-5 (nvcc contracts each multiply-add into an FMA, as `mul_add` does; the
/// tolerance keeps the check right should it not).
fn check_pipeline(
    what: &str,
    input: &[f32],
    got: &[f32],
    source: impl Fn(usize) -> usize,
) -> BenchResult<()> {
    let cols = PIPELINE_COLS;
    for r in 0..PIPELINE_ROWS {
        let from = source(r);
        for c in 0..cols {
            let want = ws_poly_reference(input[from * cols + c]);
            let have = got[r * cols + c];
            if (have - want).abs() > 1e-5 * want.abs() || have.is_nan() {
                return Err(failed(format!(
                    "pipeline: {what}: y[{r}][{c}] = {have}, want {want} (from x[{from}][{c}])"
                )));
            }
        }
    }
    Ok(())
}

/// The warp-specialised pipeline against its consumers alone. Returns its rows and the busy
/// fraction (time of the consumers alone over time of the pipeline).
fn pipeline(options: &Options) -> BenchResult<(Vec<Vec<String>>, f64)> {
    eprintln!("choreo-bench: tma: warp-specialised pipeline …");
    let (rows_n, cols) = (PIPELINE_ROWS, PIPELINE_COLS);
    let s = Stream::new()?;
    let input = Random::new(0x9e11).vec_f32(rows_n * cols, -1.0, 1.0);
    let x = DeviceTensor::from_host(&s, HostView::new(&input, [rows_n, cols])?)?;
    let mut y = DeviceTensor::<f32, 2>::zeros_on(&s, [rows_n, cols])?;

    poison(&s, &mut y)?;
    tma::ws_poly(&s, &x, &mut y)?.wait()?;
    check_pipeline("ws_poly", &input, y.to_host(&s)?.as_slice(), |r| r)?;
    poison(&s, &mut y)?;
    tma::ws_poly_compute_only(&s, &x, &mut y)?.wait()?;
    // Tile k of a block reads the ring slot k % 4, which holds the block's tile k % 4.
    let tile_rows = 32;
    check_pipeline("ws_poly_compute_only", &input, y.to_host(&s)?.as_slice(), |r| {
        let block = r / PIPELINE_ROWS_PER_BLOCK * PIPELINE_ROWS_PER_BLOCK;
        let k = r % PIPELINE_ROWS_PER_BLOCK / tile_rows;
        block + (k % 4) * tile_rows + r % tile_rows
    })?;

    let stream = &s;
    let (x, y) = (&x, std::cell::RefCell::new(y));
    let mut pipelined = || {
        per_launch_ms(stream, BATCH, || {
            drop(tma::ws_poly(stream, x, &mut y.borrow_mut())?);
            Ok(())
        })
    };
    let mut compute_only = || {
        per_launch_ms(stream, BATCH, || {
            drop(tma::ws_poly_compute_only(stream, x, &mut y.borrow_mut())?);
            Ok(())
        })
    };
    let summaries = interleaved(options, &mut [&mut pipelined, &mut compute_only])?;
    let (pipelined, compute_only) = (summaries[0], summaries[1]);
    let busy = compute_only.median / pipelined.median;
    let bytes = 2 * rows_n * cols * std::mem::size_of::<f32>();
    let rows = vec![
        row(
            format!(
                "pipeline, ours: tma::ws_poly (1 TMA producer + 2 consumer warpgroups, 4-slot \
                 ring, full/empty events), {rows_n}x{cols} f32"
            ),
            &pipelined,
            format!(
                "{} GB/s; consumers busy {} (compute-only time / this)",
                three_digits(gbps(bytes, pipelined.median)),
                three_digits(busy)
            ),
        ),
        row(
            "pipeline, reference: tma::ws_poly_compute_only (the consumers alone, no events)",
            &compute_only,
            String::new(),
        ),
    ];
    Ok((rows, busy))
}
