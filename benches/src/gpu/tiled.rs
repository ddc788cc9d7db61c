//! Tiled kernels: generated kernels that stage data through shared memory (`kernels/tiled.co`),
//! each next to its hand-written CUDA twin (`kernels/tiled_reference.cu`: same tile sizes, launch
//! shape and order of arithmetic), timed with events on one stream, round-robin:
//!
//! - **transpose** of an 8192 x 8192 f32 matrix through a padded 32 x 33 shared tile (256
//!   threads, 4 elements each), next to a device-to-device `cudaMemcpyAsync` of the same bytes.
//!   GB/s count the bytes read plus written (2 x 256 MiB);
//! - **SGEMM** c = a · b, 4096³, row-major f32: 128 x 128 block tiles, BK = 16, 8 x 8 register
//!   micro-tiles, two slots of shared tiles filled by asynchronous copies (`dma.copy.async` →
//!   cp.async) one step ahead. The generated kernel issues 16-byte cp.async when the pointers
//!   are aligned (checked at run time) and 4-byte ones otherwise: there is a hand-written twin
//!   of each, and the target compares ours with the faster. cuBLAS's sgemm
//!   (dlopen, when found) gives the scale. TFLOP/s count 2 · 4096³ operations;
//! - **row softmax** of an 8192 x 8192 f32 matrix: one block per row, the max and the sum
//!   reduced through shared memory; GB/s as a fraction of the copy's.
//!
//! The extents are constants of the kernels (so every element access is proven in bounds), so
//! `--quick` only means fewer trials here. Every variant is checked before it is timed, on a
//! poisoned (NaN) output: the transposes and the copy bit for bit; the SGEMMs on 4 full rows and
//! 4 full columns against a float64 CPU reference and element by element against each other;
//! the softmaxes on 33 rows against a float64 CPU reference and element by element against each
//! other. Sub-millisecond kernels are timed in batches of 10 launches (one event pair per
//! batch), each batch behind an untimed launch, so that the host's launch time does not enter
//! the figures.

use choreo::{DeviceTensor, HostView, Stream, sys};
use choreo_bench::stats::Summary;
use choreo_bench::table::three_digits;

use super::{
    BenchError, BenchResult, Options, Random, RawBuffer, cuda, event_ms, interleaved, timing_cells,
};

/// The generated side: `kernels/tiled.co` (library `tiled`, module `tiled`).
pub(super) mod kernels {
    choreo::include_kernels!("tiled");
}
use kernels::tiled;

/// The hand-written CUDA side (`kernels/tiled_reference.cu`). Each returns a `cudaError_t`
/// (the cuBLAS entries a status of their own).
mod reference {
    use choreo::sys::cudaStream_t;

    unsafe extern "C" {
        /// Loads the reference kernels (module loading stays out of the measurements).
        pub fn ref_tiled_load_kernels() -> i32;
        /// `o = aᵀ`, both 8192 x 8192.
        pub fn ref_transpose_tiled(s: cudaStream_t, a: *const f32, o: *mut f32) -> i32;
        /// `c = a · b`, all 4096 x 4096; `bytes_per_copy` 16 or 4 (per cp.async).
        pub fn ref_sgemm_tiled(
            s: cudaStream_t,
            a: *const f32,
            b: *const f32,
            c: *mut f32,
            bytes_per_copy: i32,
        ) -> i32;
        /// Row softmax of `x` into `y`, both 8192 x 8192.
        pub fn ref_softmax_rows(s: cudaStream_t, x: *const f32, y: *mut f32) -> i32;
        /// dlopen of cuBLAS and a handle: 0 ready, 1 library or symbol not found, 2 no handle.
        pub fn ref_cublas_load() -> i32;
        /// `c = a · b` (row-major 4096³) with cublasSgemm: the cuBLAS status, -1 if not loaded.
        pub fn ref_cublas_sgemm(s: cudaStream_t, a: *const f32, b: *const f32, c: *mut f32) -> i32;
    }
}

/// The extent of the transpose and softmax matrices (rows = columns).
const SQUARE: usize = 8192;
/// M = N = K of the SGEMM.
const GEMM: usize = 4096;
/// Launches per timed trial of the sub-millisecond kernels and copies.
const BATCH: usize = 10;

/// The section's outcome.
pub struct Outcome {
    /// Table rows `[variant, median, min, max, derived]`.
    pub rows: Vec<Vec<String>>,
    /// Transpose: ours over hand-written (speed, target ≥ 0.95).
    pub transpose_over_hand: f64,
    /// Transpose: ours over the copy of the same bytes (target ≥ 0.85).
    pub transpose_over_copy: f64,
    /// SGEMM: ours over the faster hand-written twin (target ≥ 0.95).
    pub sgemm_over_hand: f64,
    /// SGEMM: ours in TFLOP/s.
    pub sgemm_tflops: f64,
    /// Softmax: ours over hand-written (target ≥ 0.95).
    pub softmax_over_hand: f64,
    /// Softmax: ours over the copy of the same bytes.
    pub softmax_over_copy: f64,
}

/// Runs the section: transpose, softmax, then SGEMM, each with its own inputs (freed before the
/// next).
pub fn run(options: &Options) -> BenchResult<Outcome> {
    // SAFETY: no arguments.
    cuda(unsafe { reference::ref_tiled_load_kernels() }, "loading the tiled reference kernels")?;
    let mut rows = Vec::new();
    let (transpose_over_hand, transpose_over_copy) = transpose(options, &mut rows)?;
    let (softmax_over_hand, softmax_over_copy) = softmax(options, &mut rows)?;
    let (sgemm_over_hand, sgemm_tflops) = sgemm(options, &mut rows)?;
    Ok(Outcome {
        rows,
        transpose_over_hand,
        transpose_over_copy,
        sgemm_over_hand,
        sgemm_tflops,
        softmax_over_hand,
        softmax_over_copy,
    })
}

/// A failure of a check, as the section's error.
pub(super) fn failed(message: String) -> BenchError {
    BenchError::Failed(format!("tiled: {message}"))
}

/// Sets every byte of a generated kernel's output to `0xFF` (NaN) on `stream`, tracked as a
/// write of the tensor.
pub(super) fn poison(stream: &Stream, tensor: &mut DeviceTensor<f32, 2>) -> BenchResult<()> {
    let bytes = std::mem::size_of_val(&0f32) * tensor.len();
    let buffer = tensor.buffer_mut();
    let ptr = buffer.device_ptr_for_write(stream)?;
    // SAFETY: `ptr` is the tensor's allocation of `bytes` bytes, ordered on `stream` after every
    // earlier access; the write is recorded right after.
    let status = unsafe { sys::cudaMemsetAsync(ptr.cast(), 0xFF, bytes, stream.as_raw()) }.0;
    cuda(status, "cudaMemsetAsync")?;
    buffer.record_write(stream)?;
    Ok(())
}

/// An asynchronous device-to-device copy of `bytes` bytes on `stream`.
pub(super) fn copy_async(
    stream: &Stream,
    dst: *mut f32,
    src: *const f32,
    bytes: usize,
) -> BenchResult<()> {
    cuda(
        // SAFETY: the callers pass two live, disjoint allocations of at least `bytes` bytes
        // that stay allocated until the stream has run the copy.
        unsafe {
            sys::cudaMemcpyAsync(
                dst.cast(),
                src.cast(),
                bytes,
                sys::cudaMemcpyKind::cudaMemcpyDeviceToDevice,
                stream.as_raw(),
            )
        }
        .0,
        "cudaMemcpyAsync",
    )
}

/// Device milliseconds per launch of `launch`, run `repeat` times between one pair of events.
/// One untimed launch goes first, so that the device is busy while the start event and the
/// timed launches are enqueued: the host's launch time never leaves it idle inside the pair.
pub(super) fn per_launch_ms(
    stream: &Stream,
    repeat: usize,
    mut launch: impl FnMut() -> BenchResult<()>,
) -> BenchResult<f64> {
    launch()?;
    let ms = event_ms(stream, || {
        for _ in 0..repeat {
            launch()?;
        }
        Ok(())
    })?;
    Ok(ms / repeat as f64)
}

/// A table row of `summary` (ms per launch).
pub(super) fn row(name: impl Into<String>, summary: &Summary, derived: String) -> Vec<String> {
    let [median, min, max] = timing_cells(summary, 1.0, "ms");
    vec![name.into(), median, min, max, derived]
}

/// GB/s (10^9 bytes per second) of moving `bytes` in `ms`.
pub(super) fn gbps(bytes: usize, ms: f64) -> f64 {
    bytes as f64 / (ms * 1e-3) / 1e9
}

// ---- transpose ----------------------------------------------------------------------------

/// Checks that `got` is exactly the transpose of the `n` x `n` matrix `input`.
pub(super) fn check_transpose(what: &str, n: usize, input: &[f32], got: &[f32]) -> BenchResult<()> {
    let mut wrong = 0usize;
    let mut first = None;
    // 64 x 64 blocks keep both matrices' lines in the cache.
    for bi in (0..n).step_by(64) {
        for bj in (0..n).step_by(64) {
            for i in bi..(bi + 64).min(n) {
                for j in bj..(bj + 64).min(n) {
                    if got[i * n + j].to_bits() != input[j * n + i].to_bits() {
                        wrong += 1;
                        first.get_or_insert((i, j));
                    }
                }
            }
        }
    }
    match first {
        None => Ok(()),
        Some((i, j)) => Err(failed(format!(
            "transpose: {what}: {wrong} of {} elements wrong, first o[{i}][{j}] = {} (want {})",
            n * n,
            got[i * n + j],
            input[j * n + i]
        ))),
    }
}

/// The transpose: ours, the hand-written twin, the copy. Returns ours over hand and over copy.
fn transpose(options: &Options, rows: &mut Vec<Vec<String>>) -> BenchResult<(f64, f64)> {
    eprintln!("choreo-bench: tiled: transpose …");
    let n = SQUARE;
    let s = Stream::new()?;
    let input = Random::new(0x7a05).vec_f32(n * n, -1.0, 1.0);
    let a = DeviceTensor::from_host(&s, HostView::new(&input, [n, n])?)?;
    let mut o = DeviceTensor::<f32, 2>::zeros_on(&s, [n, n])?;
    let mut raw_a = RawBuffer::f32s(n * n)?;
    let mut raw_o = RawBuffer::f32s(n * n)?;
    let mut raw_copy = RawBuffer::f32s(n * n)?;
    raw_a.upload(&input)?;
    let (pa, po, pcopy) = (raw_a.f32_ptr().cast_const(), raw_o.f32_ptr(), raw_copy.f32_ptr());
    let bytes = raw_a.bytes();

    poison(&s, &mut o)?;
    tiled::transpose_tiled(&s, &a, &mut o)?.wait()?;
    check_transpose("ours", n, &input, o.to_host(&s)?.as_slice())?;
    raw_o.poison(&s)?;
    // SAFETY: both buffers hold n x n floats; the stream is live.
    cuda(unsafe { reference::ref_transpose_tiled(s.as_raw(), pa, po) }, "ref_transpose_tiled")?;
    check_transpose("hand", n, &input, &raw_o.download()?)?;
    raw_copy.poison(&s)?;
    copy_async(&s, pcopy, pa, bytes)?;
    if raw_copy.download()? != input {
        return Err(failed("transpose: the device-to-device copy is wrong".into()));
    }

    let stream = &s;
    let mut ours = || {
        per_launch_ms(stream, BATCH, || {
            drop(tiled::transpose_tiled(stream, &a, &mut o)?);
            Ok(())
        })
    };
    let mut hand = || {
        per_launch_ms(stream, BATCH, || {
            // SAFETY: as in the check above.
            cuda(
                unsafe { reference::ref_transpose_tiled(stream.as_raw(), pa, po) },
                "ref_transpose_tiled",
            )
        })
    };
    let copy = || copy_async(stream, pcopy, pa, bytes);
    against_copy(
        options,
        stream,
        bytes,
        [&mut ours, &mut hand],
        copy,
        [
            format!("transpose, ours: tiled::transpose_tiled (32x33 tile), {n}x{n} f32"),
            "transpose, hand CUDA, same kernel".to_string(),
            "transpose, cudaMemcpyAsync device to device (same bytes)".to_string(),
        ],
        rows,
    )
}

/// Times ours and the hand-written twin (each a closure timing one batch) round-robin with a
/// device-to-device copy of `bytes`, adds a row for each (`names`: ours, hand, copy) with its
/// GB/s (read plus write) as a fraction of the copy's, and returns ours/hand and ours/copy.
fn against_copy(
    options: &Options,
    stream: &Stream,
    bytes: usize,
    [ours, hand]: [&mut dyn FnMut() -> BenchResult<f64>; 2],
    mut copy: impl FnMut() -> BenchResult<()>,
    names: [String; 3],
    rows: &mut Vec<Vec<String>>,
) -> BenchResult<(f64, f64)> {
    let mut copy = || per_launch_ms(stream, BATCH, &mut copy);
    let summaries = interleaved(options, &mut [ours, hand, &mut copy])?;
    let [ours, hand, copy] = [summaries[0], summaries[1], summaries[2]];
    let moved = 2 * bytes;
    let copy_gbps = gbps(moved, copy.median);
    let rate = |s: &Summary| {
        let r = gbps(moved, s.median);
        format!("{} GB/s = {} of copy", three_digits(r), three_digits(r / copy_gbps))
    };
    let over_hand = hand.median / ours.median;
    let over_copy = copy.median / ours.median;
    let [ours_name, hand_name, copy_name] = names;
    rows.push(row(ours_name, &ours, rate(&ours)));
    rows.push(row(
        hand_name,
        &hand,
        format!("{}; ours/hand {}", rate(&hand), three_digits(over_hand)),
    ));
    rows.push(row(
        copy_name,
        &copy,
        format!("{}; ours/copy {}", rate(&copy), three_digits(over_copy)),
    ));
    Ok((over_hand, over_copy))
}

// ---- softmax ------------------------------------------------------------------------------

/// Checks rows `rows` of `got` against a float64 softmax of `input` (`n` columns): relative
/// error at most 1e-5.
fn check_softmax_rows(
    what: &str,
    n: usize,
    input: &[f32],
    got: &[f32],
    rows: &[usize],
) -> BenchResult<()> {
    for &r in rows {
        let x = &input[r * n..(r + 1) * n];
        let y = &got[r * n..(r + 1) * n];
        let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f64 = x.iter().map(|&v| f64::from(v - max).exp()).sum();
        for (c, (&v, &g)) in x.iter().zip(y).enumerate() {
            let want = f64::from(v - max).exp() / sum;
            let error = (f64::from(g) - want).abs();
            if error.is_nan() || error > 1e-5 * want {
                return Err(failed(format!(
                    "softmax: {what}: y[{r}][{c}] = {g:e}, want {want:e} (relative error {:e})",
                    error / want
                )));
            }
        }
    }
    Ok(())
}

/// Checks that `ours` and `hand` agree element by element to a relative 1e-5 (and are finite).
fn compare_relative(what: &str, ours: &[f32], hand: &[f32], tolerance: f32) -> BenchResult<()> {
    let mut wrong = 0usize;
    let mut first = None;
    for (index, (&x, &y)) in ours.iter().zip(hand).enumerate() {
        if !(x.is_finite() && y.is_finite() && (x - y).abs() <= tolerance * y.abs()) {
            wrong += 1;
            first.get_or_insert(index);
        }
    }
    match first {
        None => Ok(()),
        Some(index) => Err(failed(format!(
            "{what}: {wrong} of {} elements differ, first at {index}: {} vs {}",
            ours.len(),
            ours[index],
            hand[index]
        ))),
    }
}

/// The row softmax: ours, the hand-written twin, the copy. Returns ours over hand and over copy.
fn softmax(options: &Options, rows: &mut Vec<Vec<String>>) -> BenchResult<(f64, f64)> {
    eprintln!("choreo-bench: tiled: softmax …");
    let n = SQUARE;
    let s = Stream::new()?;
    let input = Random::new(0x50f7).vec_f32(n * n, -6.0, 6.0);
    let x = DeviceTensor::from_host(&s, HostView::new(&input, [n, n])?)?;
    let mut y = DeviceTensor::<f32, 2>::zeros_on(&s, [n, n])?;
    let mut raw_x = RawBuffer::f32s(n * n)?;
    let mut raw_y = RawBuffer::f32s(n * n)?;
    let mut raw_copy = RawBuffer::f32s(n * n)?;
    raw_x.upload(&input)?;
    let (px, py, pcopy) = (raw_x.f32_ptr().cast_const(), raw_y.f32_ptr(), raw_copy.f32_ptr());
    let bytes = raw_x.bytes();

    // 33 rows spread over the matrix against the CPU (the kernels treat every row alike), and
    // every element of ours against the hand-written kernel's.
    let check_rows: Vec<usize> = (0..n).step_by(256).chain([n - 1]).collect();
    poison(&s, &mut y)?;
    tiled::softmax_rows(&s, &x, &mut y)?.wait()?;
    let ours_out = y.to_host(&s)?.into_vec();
    check_softmax_rows("ours", n, &input, &ours_out, &check_rows)?;
    raw_y.poison(&s)?;
    // SAFETY: both buffers hold n x n floats; the stream is live.
    cuda(unsafe { reference::ref_softmax_rows(s.as_raw(), px, py) }, "ref_softmax_rows")?;
    let hand_out = raw_y.download()?;
    check_softmax_rows("hand", n, &input, &hand_out, &check_rows)?;
    compare_relative("softmax: ours vs hand", &ours_out, &hand_out, 1e-5)?;
    drop((ours_out, hand_out));
    raw_copy.poison(&s)?;
    copy_async(&s, pcopy, px, bytes)?;
    if raw_copy.download()? != input {
        return Err(failed("softmax: the device-to-device copy is wrong".into()));
    }

    let stream = &s;
    let mut ours = || {
        per_launch_ms(stream, BATCH, || {
            drop(tiled::softmax_rows(stream, &x, &mut y)?);
            Ok(())
        })
    };
    let mut hand = || {
        per_launch_ms(stream, BATCH, || {
            // SAFETY: as in the check above.
            cuda(
                unsafe { reference::ref_softmax_rows(stream.as_raw(), px, py) },
                "ref_softmax_rows",
            )
        })
    };
    let copy = || copy_async(stream, pcopy, px, bytes);
    against_copy(
        options,
        stream,
        bytes,
        [&mut ours, &mut hand],
        copy,
        [
            format!("softmax, ours: tiled::softmax_rows (block per row), {n}x{n} f32"),
            "softmax, hand CUDA, same kernel".to_string(),
            "softmax, cudaMemcpyAsync device to device (same bytes)".to_string(),
        ],
        rows,
    )
}

// ---- SGEMM --------------------------------------------------------------------------------

/// The rows and columns of c checked against the CPU: both ends and two inside, at different
/// block, thread and micro-tile positions.
const GEMM_LINES: [usize; 4] = [0, 1337, 2730, 4095];

/// Checks rows and columns [`GEMM_LINES`] of `c` (`n` x `n`) against a float64 product of `a`
/// and `b`: |c - want| ≤ 2e-5 · Σ|a_ik b_kj| + 1e-5 (float32 accumulation over 4096 terms
/// stays far inside; a wrong or missing k-tile does not).
fn check_gemm_lines(what: &str, n: usize, a: &[f32], b: &[f32], c: &[f32]) -> BenchResult<()> {
    let verdict = |i: usize, j: usize, want: f64, magnitude: f64| {
        let got = c[i * n + j];
        let error = (f64::from(got) - want).abs();
        if error <= 2e-5 * magnitude + 1e-5 {
            Ok(())
        } else {
            Err(failed(format!(
                "sgemm: {what}: c[{i}][{j}] = {got}, want {want} (error {error:e}, Σ|a·b| = \
                 {magnitude})"
            )))
        }
    };
    let mut want = vec![0f64; n];
    let mut magnitude = vec![0f64; n];
    for &i in &GEMM_LINES {
        want.fill(0.0);
        magnitude.fill(0.0);
        for k in 0..n {
            let aik = f64::from(a[i * n + k]);
            for (j, &bkj) in b[k * n..(k + 1) * n].iter().enumerate() {
                let p = aik * f64::from(bkj);
                want[j] += p;
                magnitude[j] += p.abs();
            }
        }
        for j in 0..n {
            verdict(i, j, want[j], magnitude[j])?;
        }
    }
    for &j in &GEMM_LINES {
        let column: Vec<f64> = (0..n).map(|k| f64::from(b[k * n + j])).collect();
        for i in 0..n {
            let (mut sum, mut mag) = (0f64, 0f64);
            for (&aik, &bkj) in a[i * n..(i + 1) * n].iter().zip(&column) {
                let p = f64::from(aik) * bkj;
                sum += p;
                mag += p.abs();
            }
            verdict(i, j, sum, mag)?;
        }
    }
    Ok(())
}

/// Checks that `x` and `y` agree element by element to `tolerance` (absolute; the entries are
/// about ±20) and are finite.
fn compare_absolute(what: &str, x: &[f32], y: &[f32], tolerance: f32) -> BenchResult<()> {
    let mut wrong = 0usize;
    let mut first = None;
    let mut identical = true;
    for (index, (&p, &q)) in x.iter().zip(y).enumerate() {
        identical &= p.to_bits() == q.to_bits();
        if !(p.is_finite() && q.is_finite() && (p - q).abs() <= tolerance) {
            wrong += 1;
            first.get_or_insert(index);
        }
    }
    match first {
        None => {
            if !identical {
                eprintln!("choreo-bench: tiled: {what}: equal within {tolerance}, not bit for bit");
            }
            Ok(())
        }
        Some(index) => Err(failed(format!(
            "{what}: {wrong} of {} elements differ, first at {index}: {} vs {}",
            x.len(),
            x[index],
            y[index]
        ))),
    }
}

/// cuBLAS's sgemm on `c` (poisoned first) and checked like the tiled kernels: `Ok(None)` when
/// it is ready to be timed, `Ok(Some(why))` when it is not (not found, failed, wrong result).
fn try_cublas(
    s: &Stream,
    n: usize,
    (ha, hb): (&[f32], &[f32]),
    (pa, pb): (*const f32, *const f32),
    c: &mut RawBuffer,
) -> BenchResult<Option<String>> {
    // SAFETY: no arguments.
    match unsafe { reference::ref_cublas_load() } {
        0 => {}
        1 => return Ok(Some("cuBLAS unavailable (libcublas.so not found)".into())),
        status => return Ok(Some(format!("cuBLAS unavailable (cublasCreate failed: {status})"))),
    }
    c.poison(s)?;
    // SAFETY: the buffers hold n x n floats; the stream is live.
    let status = unsafe { reference::ref_cublas_sgemm(s.as_raw(), pa, pb, c.f32_ptr()) };
    if status != 0 {
        return Ok(Some(format!("cuBLAS unavailable (cublasSgemm returned status {status})")));
    }
    match check_gemm_lines("cuBLAS", n, ha, hb, &c.download()?) {
        Ok(()) => Ok(None),
        Err(BenchError::Failed(message)) | Err(BenchError::CannotRun(message)) => {
            Ok(Some(format!("cuBLAS NOT TIMED: WRONG RESULT: {message}")))
        }
    }
}

/// The SGEMM: ours, its hand-written twins (16-byte cp.async, what the generated kernel issues
/// when the pointers are aligned, and 4-byte, its fallback), cuBLAS. Returns ours over the
/// faster twin, and ours in TFLOP/s.
fn sgemm(options: &Options, rows: &mut Vec<Vec<String>>) -> BenchResult<(f64, f64)> {
    eprintln!("choreo-bench: tiled: sgemm …");
    let n = GEMM;
    let s = Stream::new()?;
    let mut random = Random::new(0x5e33);
    let ha = random.vec_f32(n * n, -1.0, 1.0);
    let hb = random.vec_f32(n * n, -1.0, 1.0);
    let a = DeviceTensor::from_host(&s, HostView::new(&ha, [n, n])?)?;
    let b = DeviceTensor::from_host(&s, HostView::new(&hb, [n, n])?)?;
    let mut c = DeviceTensor::<f32, 2>::zeros_on(&s, [n, n])?;
    let mut raw_a = RawBuffer::f32s(n * n)?;
    let mut raw_b = RawBuffer::f32s(n * n)?;
    let mut raw_c16 = RawBuffer::f32s(n * n)?;
    let mut raw_c4 = RawBuffer::f32s(n * n)?;
    let mut raw_cublas = RawBuffer::f32s(n * n)?;
    raw_a.upload(&ha)?;
    raw_b.upload(&hb)?;
    let (pa, pb) = (raw_a.f32_ptr().cast_const(), raw_b.f32_ptr().cast_const());
    let (pc16, pc4, pcublas) = (raw_c16.f32_ptr(), raw_c4.f32_ptr(), raw_cublas.f32_ptr());

    poison(&s, &mut c)?;
    tiled::sgemm_tiled(&s, &a, &b, &mut c)?.wait()?;
    let ours_out = c.to_host(&s)?.into_vec();
    check_gemm_lines("ours", n, &ha, &hb, &ours_out)?;
    let mut hand_outs = Vec::new();
    for (buffer, bytes_per_copy) in [(&mut raw_c16, 16), (&mut raw_c4, 4)] {
        buffer.poison(&s)?;
        // SAFETY: the buffers hold n x n floats; the stream is live.
        let status = unsafe {
            reference::ref_sgemm_tiled(s.as_raw(), pa, pb, buffer.f32_ptr(), bytes_per_copy)
        };
        cuda(status, "ref_sgemm_tiled")?;
        let out = buffer.download()?;
        check_gemm_lines(&format!("hand ({bytes_per_copy}-byte cp.async)"), n, &ha, &hb, &out)?;
        hand_outs.push(out);
    }
    compare_absolute("sgemm: ours vs hand (16-byte)", &ours_out, &hand_outs[0], 1e-2)?;
    compare_absolute("sgemm: hand 4-byte vs hand 16-byte", &hand_outs[1], &hand_outs[0], 1e-2)?;
    drop((ours_out, hand_outs));
    let cublas_problem = try_cublas(&s, n, (&ha, &hb), (pa, pb), &mut raw_cublas)?;
    if let Some(problem) = &cublas_problem {
        eprintln!("choreo-bench: tiled: {problem}");
    }

    let stream = &s;
    let mut ours = || {
        per_launch_ms(stream, 1, || {
            drop(tiled::sgemm_tiled(stream, &a, &b, &mut c)?);
            Ok(())
        })
    };
    let hand = |out: *mut f32, bytes_per_copy: i32| {
        move || {
            per_launch_ms(stream, 1, || {
                // SAFETY: as in the checks above.
                let status = unsafe {
                    reference::ref_sgemm_tiled(stream.as_raw(), pa, pb, out, bytes_per_copy)
                };
                cuda(status, "ref_sgemm_tiled")
            })
        }
    };
    let mut hand16 = hand(pc16, 16);
    let mut hand4 = hand(pc4, 4);
    let mut cublas = || {
        per_launch_ms(stream, 1, || {
            // SAFETY: as in `try_cublas`.
            match unsafe { reference::ref_cublas_sgemm(stream.as_raw(), pa, pb, pcublas) } {
                0 => Ok(()),
                status => Err(failed(format!("cublasSgemm returned status {status}"))),
            }
        })
    };
    let mut variants: Vec<&mut dyn FnMut() -> BenchResult<f64>> =
        vec![&mut ours, &mut hand16, &mut hand4];
    if cublas_problem.is_none() {
        variants.push(&mut cublas);
    }
    let summaries = interleaved(options, &mut variants)?;
    let flops = 2.0 * (n as f64).powi(3);
    let tflops = |s: &Summary| flops / (s.median * 1e-3) / 1e12;
    let ours = summaries[0];
    let derived = |other: &Summary, versus: &str| {
        format!(
            "{} TFLOP/s; ours/{versus} {}",
            three_digits(tflops(other)),
            three_digits(other.median / ours.median)
        )
    };
    rows.push(row(
        format!(
            "sgemm, ours: tiled::sgemm_tiled (128x128x16 tiles, 8x8/thread, async DMA), {n}³ f32"
        ),
        &ours,
        format!("{} TFLOP/s", three_digits(tflops(&ours))),
    ));
    rows.push(row(
        "sgemm, hand CUDA, same kernel, 16-byte cp.async (ours when aligned)",
        &summaries[1],
        derived(&summaries[1], "hand"),
    ));
    rows.push(row(
        "sgemm, hand CUDA, same kernel, 4-byte cp.async (ours' fallback)",
        &summaries[2],
        derived(&summaries[2], "hand"),
    ));
    match (&cublas_problem, summaries.get(3)) {
        (None, Some(summary)) => rows.push(row(
            "sgemm, cuBLAS cublasSgemm (FP32, default math)",
            summary,
            derived(summary, "cuBLAS"),
        )),
        (problem, _) => rows.push(vec![
            "sgemm, cuBLAS".to_owned(),
            String::new(),
            String::new(),
            String::new(),
            problem.clone().unwrap_or_default(),
        ]),
    }
    // Ours over the faster of the two twins.
    let over_hand = summaries[1].median.min(summaries[2].median) / ours.median;
    Ok((over_hand, tflops(&ours)))
}
