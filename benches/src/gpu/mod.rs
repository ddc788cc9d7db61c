//! `choreo-bench gpu`: the GPU benchmarks, each side by side with a hand-written CUDA reference
//! in the same run (see `docs/performance.md` for the method and the results).
//!
//! - [`overlap`]: the seed's two-stream `.async` example, serial vs asynchronous, ours vs
//!   hand-written;
//! - [`launch`]: host time per call of a generated safe wrapper vs raw `<<<>>>` launches, with
//!   a profile of the CUDA calls a wrapper makes;
//! - [`bandwidth`]: a generated elementwise kernel vs `cudaMemcpy` and hand-written kernels;
//! - [`tiled`]: generated kernels with shared-memory tiles and asynchronous copies (transpose,
//!   SGEMM, row softmax) vs hand-written twins, the copy and cuBLAS;
//! - [`tma`]: TMA copies and a TMA transpose (tier 3) vs the copy and their tier-2 versions;
//! - [`gemm`]: the hand-written WGMMA GEMM (f16/bf16, 4096³ and 8192³) vs cuBLAS (dlopen);
//! - [`gemm_fp8`]: the Choreo fp8 (e4m3) WGMMA GEMM vs cuBLASLt (dlopen);
//! - [`gemm_sync`]: a Choreo mma.sync GEMM (sm_80-style) vs the same algorithm by hand;
//! - [`attention`]: the Choreo attention forward (bf16, head dim 128, causal and not), checked
//!   by a plain CUDA attention; cuDNN SDPA as the reference.
//! - [`cudnn_sdpa`]: cuDNN's attention forward (dlopen), the reference of the attention
//!   section.

pub mod attention;
pub mod bandwidth;
pub mod cudnn_sdpa;
pub mod gemm;
pub mod gemm_fp8;
pub mod gemm_sync;
pub mod launch;
pub mod overlap;
pub mod tiled;
pub mod tma;

use std::ffi::c_void;
use std::time::Instant;

use choreo::{Error, Stream, sys};
use choreo_bench::stats::Summary;
use choreo_bench::table::{Table, three_digits};

choreo::include_kernels!("bench");

/// The hand-written CUDA side (`kernels/reference.cu`). Each returns a `cudaError_t`.
pub mod reference {
    use choreo::sys::cudaStream_t;

    unsafe extern "C" {
        /// The seed's two spin kernels on `s0` and `s1`, not waited for.
        pub fn ref_seed_two_streams(
            s0: cudaStream_t,
            s1: cudaStream_t,
            a: *mut f32,
            m: i32,
            b: *mut f32,
            n: i32,
            iters: i32,
        ) -> i32;
        /// The same two kernels, each waited for before the next starts.
        pub fn ref_seed_serial(
            s0: cudaStream_t,
            s1: cudaStream_t,
            a: *mut f32,
            m: i32,
            b: *mut f32,
            n: i32,
            iters: i32,
        ) -> i32;
        /// One raw `<<<>>>` launch of `c = a + b`.
        pub fn ref_add(s: cudaStream_t, a: *const f32, b: *const f32, c: *mut f32, n: u32) -> i32;
        /// `c = a + b`, four elements per thread (the twin of `add4`).
        pub fn ref_add4(s: cudaStream_t, a: *const f32, b: *const f32, c: *mut f32, n: u32) -> i32;
        /// `c = a + b` with 16-byte accesses (`n` a multiple of 4).
        pub fn ref_add_vec4(
            s: cudaStream_t,
            a: *const f32,
            b: *const f32,
            c: *mut f32,
            n: u32,
        ) -> i32;
        /// `calls` raw launches of `c = a + b` in a C++ loop; `seconds` gets the loop's host time.
        pub fn ref_add_loop(
            s: cudaStream_t,
            a: *const f32,
            b: *const f32,
            c: *mut f32,
            n: u32,
            calls: i32,
            seconds: *mut f64,
        ) -> i32;
        /// Loads the reference kernels (module loading stays out of the measurements).
        pub fn ref_load_kernels() -> i32;
    }
}

/// What a benchmark failed with.
#[derive(Debug)]
pub enum BenchError {
    /// No GPU, no driver, or kernels not built: the environment, not the benchmark.
    CannotRun(String),
    /// A CUDA failure or a wrong result.
    Failed(String),
}

impl From<Error> for BenchError {
    fn from(error: Error) -> BenchError {
        if error.is_no_gpu() || matches!(error, Error::NotBuilt { .. }) {
            BenchError::CannotRun(error.to_string())
        } else {
            BenchError::Failed(error.to_string())
        }
    }
}

/// A result of the benchmarks.
pub type BenchResult<T> = Result<T, BenchError>;

/// Turns the status of a raw CUDA call or reference entry into a result.
pub fn cuda(status: i32, what: &str) -> BenchResult<()> {
    if status == 0 {
        Ok(())
    } else {
        Err(BenchError::Failed(format!(
            "{what} failed: {}",
            choreo::check_cuda(sys::cudaError_t(status), "reference").unwrap_err()
        )))
    }
}

/// Plain `cudaMalloc` memory for the hand-written side, freed (after a device synchronisation)
/// on drop: the references manage memory the way a CUDA C++ program would.
pub struct RawBuffer {
    ptr: *mut c_void,
    bytes: usize,
}

impl RawBuffer {
    /// `len` uninitialised `f32`s.
    pub fn f32s(len: usize) -> BenchResult<RawBuffer> {
        let bytes = len * std::mem::size_of::<f32>();
        let mut ptr = std::ptr::null_mut();
        // SAFETY: `ptr` is a writable slot for the returned device address.
        cuda(unsafe { sys::cudaMalloc(&mut ptr, bytes) }.0, "cudaMalloc")?;
        Ok(RawBuffer { ptr, bytes })
    }

    /// The device address as `f32*`.
    pub fn f32_ptr(&self) -> *mut f32 {
        self.ptr.cast()
    }

    /// The size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Copies `data` in; the device is idle when this returns (`data` must have exactly the
    /// buffer's size).
    pub fn upload(&mut self, data: &[f32]) -> BenchResult<()> {
        assert_eq!(std::mem::size_of_val(data), self.bytes, "upload size");
        cuda(
            // SAFETY: the destination is this allocation of `bytes` bytes; the source is a host
            // slice of the same size; cudaMemcpy (not async) finishes before returning.
            unsafe {
                sys::cudaMemcpy(
                    self.ptr,
                    data.as_ptr().cast(),
                    self.bytes,
                    sys::cudaMemcpyKind::cudaMemcpyHostToDevice,
                )
            }
            .0,
            "cudaMemcpy to the device",
        )?;
        // A pageable-memory cudaMemcpy may return before the data has reached the device, and
        // it is not ordered with the non-blocking streams the benchmarks launch on.
        synchronize_device()
    }

    /// Copies the contents out, after all work on the device (cudaMemcpy alone is not ordered
    /// after the non-blocking streams that the benchmarks launch on).
    pub fn download(&self) -> BenchResult<Vec<f32>> {
        synchronize_device()?;
        let mut data = vec![0f32; self.bytes / std::mem::size_of::<f32>()];
        cuda(
            // SAFETY: the source is this allocation; the destination a host vector of the same
            // size; cudaMemcpy synchronises with the device work before copying.
            unsafe {
                sys::cudaMemcpy(
                    data.as_mut_ptr().cast(),
                    self.ptr,
                    self.bytes,
                    sys::cudaMemcpyKind::cudaMemcpyDeviceToHost,
                )
            }
            .0,
            "cudaMemcpy to the host",
        )?;
        Ok(data)
    }

    /// Sets every byte to `0xFF` (a NaN pattern for floats) on `stream`: poisons an output so a
    /// check sees every element that was not written.
    pub fn poison(&mut self, stream: &Stream) -> BenchResult<()> {
        // SAFETY: the range is this allocation; the stream is live.
        cuda(
            unsafe { sys::cudaMemsetAsync(self.ptr, 0xFF, self.bytes, stream.as_raw()) }.0,
            "cudaMemsetAsync",
        )
    }
}

/// Waits for all work on the current device.
pub fn synchronize_device() -> BenchResult<()> {
    // SAFETY: no arguments.
    cuda(unsafe { sys::cudaDeviceSynchronize() }.0, "cudaDeviceSynchronize")
}

impl Drop for RawBuffer {
    fn drop(&mut self) {
        // SAFETY: the allocation came from cudaMalloc and is freed once; the device is
        // synchronised first so no enqueued reference kernel still uses it.
        unsafe {
            let _ = sys::cudaDeviceSynchronize();
            let _ = sys::cudaFree(self.ptr);
        }
    }
}

/// Options shared by the sections.
#[derive(Clone, Debug)]
pub struct Options {
    /// Timed trials per variant (after the warm-up).
    pub trials: usize,
    /// Untimed warm-up rounds per variant.
    pub warmup: usize,
    /// Small sizes and few trials: a smoke test of the harness, not figures.
    pub quick: bool,
}

/// A deterministic xorshift generator: varied, reproducible inputs (never zeros).
pub struct Random(u64);

impl Random {
    /// A generator with `seed` (any value; 0 is remapped).
    pub fn new(seed: u64) -> Random {
        Random(seed.max(1))
    }

    /// The next value in `[lo, hi)`.
    pub fn next_f32(&mut self, lo: f32, hi: f32) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + (hi - lo) * ((self.0 >> 40) as f32 / (1u64 << 24) as f32)
    }

    /// `len` values in `[lo, hi)`.
    pub fn vec_f32(&mut self, len: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..len).map(|_| self.next_f32(lo, hi)).collect()
    }
}

/// Runs `variants` round-robin: `warmup` untimed rounds, then `trials` timed rounds, each
/// variant once per round, each round starting with the next variant (so slow drifts of clocks
/// or temperature, and what a variant leaves behind for the next, hit all variants alike).
/// Each variant returns its own measurement (seconds, or ms from events). Returns one summary
/// per variant.
pub fn interleaved(
    options: &Options,
    variants: &mut [&mut dyn FnMut() -> BenchResult<f64>],
) -> BenchResult<Vec<Summary>> {
    for _ in 0..options.warmup {
        for variant in variants.iter_mut() {
            variant()?;
        }
    }
    // Each trial starts one variant later than the one before: no variant always runs right
    // after the same neighbour (a cuBLAS batch at full power leaves the clocks lower for
    // whatever follows it).
    let n = variants.len();
    let mut samples = vec![Vec::with_capacity(options.trials); n];
    for trial in 0..options.trials {
        for j in 0..n {
            let i = (trial + j) % n;
            samples[i].push(variants[i]()?);
        }
    }
    samples
        .iter()
        .map(|s| {
            Summary::of(s).ok_or_else(|| BenchError::Failed("a measurement was not finite".into()))
        })
        .collect()
}

/// Host seconds of `f`.
/// The matrix sizes a section runs: `CHOREO_BENCH_SIZES` (comma-separated, e.g. `8192` to
/// profile one size with ncu), else `quick` with `--quick`, else `full`.
pub fn sizes(options: &Options, full: &[usize], quick: &[usize]) -> Vec<usize> {
    let chosen: Option<Vec<usize>> = std::env::var("CHOREO_BENCH_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect());
    match chosen {
        Some(sizes) if !sizes.is_empty() => sizes,
        _ if options.quick => quick.to_vec(),
        _ => full.to_vec(),
    }
}

pub fn host_seconds(f: impl FnOnce() -> BenchResult<()>) -> BenchResult<f64> {
    let start = Instant::now();
    f()?;
    Ok(start.elapsed().as_secs_f64())
}

/// Device milliseconds of the work `f` enqueues on `stream`, between two events.
pub fn event_ms(stream: &Stream, f: impl FnOnce() -> BenchResult<()>) -> BenchResult<f64> {
    let start = stream.record_event()?;
    f()?;
    let end = stream.record_event()?;
    end.synchronize()?;
    Ok(f64::from(start.elapsed_ms(&end)?))
}

/// A row of median / min / max cells of `summary` scaled by `scale`, with `unit`.
pub fn timing_cells(summary: &Summary, scale: f64, unit: &str) -> [String; 3] {
    [
        format!("{} {unit}", three_digits(summary.median * scale)),
        format!("{} {unit}", three_digits(summary.min * scale)),
        format!("{} {unit}", three_digits(summary.max * scale)),
    ]
}

/// The header lines of a run: what GPU, driver and CUDA it ran on.
pub fn environment() -> BenchResult<Vec<String>> {
    if choreo::Device::count()? == 0 {
        return Err(BenchError::CannotRun("no CUDA-capable device".into()));
    }
    let device = choreo::init()?;
    let (major, minor) = device.compute_capability()?;
    let driver = choreo::driver_version()?.map_or("none".into(), |(a, b)| format!("{a}.{b}"));
    let runtime = choreo::runtime_version()?;
    let memory = device.memory_info()?;
    Ok(vec![
        format!(
            "GPU: {} (sm_{major}{minor}, {} SMs, {:.0} GiB)",
            device.name()?,
            device.multiprocessor_count()?,
            memory.total as f64 / (1u64 << 30) as f64
        ),
        format!(
            "CUDA: driver supports {driver}, runtime {}.{} (cudart_static)",
            runtime.0, runtime.1
        ),
    ])
}

/// Adds the rows of one section to `table`.
pub fn section_rows(table: &mut Table, section: &str, rows: Vec<Vec<String>>) {
    for mut row in rows {
        row.insert(0, section.to_owned());
        table.row(row);
    }
}

/// A 1-D host view of `data`.
pub fn view(data: &[f32]) -> BenchResult<choreo::HostView<'_, f32, 1>> {
    Ok(choreo::HostView::new(data, [data.len()])?)
}
