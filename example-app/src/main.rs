//! The example application: runs two kernels on the GPU through the safe `choreo` runtime, checks
//! them against CPU references and prints a short report with event timings.
//!
//! Until the build integration translates `.co` files, the kernels are hand-written CUDA
//! (`kernels/example.cu`), compiled by `build.rs` with nvcc into a static library. Without a GPU
//! (or without kernels) the program prints one line saying why and exits with status 1.

use choreo::{DeviceTensor, Event, HostTensor, Stream};
use std::process::ExitCode;

#[cfg(example_kernels_built)]
mod ffi {
    use choreo::sys::{cudaError_t, cudaStream_t};
    unsafe extern "C" {
        pub fn example_saxpy(
            a: f32,
            x: *const f32,
            y: *const f32,
            out: *mut f32,
            n: u64,
            stream: cudaStream_t,
        ) -> cudaError_t;
        pub fn example_row_sum(
            m: *const f32,
            sums: *mut f32,
            rows: u64,
            cols: u64,
            stream: cudaStream_t,
        ) -> cudaError_t;
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(AppError::NoGpu(reason)) => {
            eprintln!("example-app: cannot run: {reason}");
            ExitCode::FAILURE
        }
        Err(AppError::Failed(message)) => {
            eprintln!("example-app: FAILED: {message}");
            ExitCode::FAILURE
        }
    }
}

enum AppError {
    NoGpu(String),
    Failed(String),
}

impl From<choreo::Error> for AppError {
    fn from(e: choreo::Error) -> AppError {
        if e.is_no_gpu() { AppError::NoGpu(e.to_string()) } else { AppError::Failed(e.to_string()) }
    }
}

fn run() -> Result<(), AppError> {
    if choreo::Device::count()? == 0 {
        return Err(AppError::NoGpu("no CUDA-capable device".into()));
    }
    if !cfg!(example_kernels_built) {
        return Err(AppError::NoGpu(
            "the kernels were not built (no nvcc when this program was compiled; run ci/install-cuda)"
                .into(),
        ));
    }
    let device = choreo::init()?;
    let (major, minor) = device.compute_capability()?;
    println!("device {}: {} (sm_{major}{minor})", device.ordinal(), device.name()?);
    let stream = Stream::new()?;
    saxpy(&stream)?;
    row_sums(&stream)?;
    println!("all checks passed");
    Ok(())
}

/// A small deterministic generator (xorshift), so the inputs are fresh-looking but reproducible.
fn random_vec(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

fn saxpy(stream: &Stream) -> Result<(), AppError> {
    const N: usize = 1 << 24;
    let a = 2.5f32;
    let x_host = random_vec(N, 1);
    let y_host = random_vec(N, 2);
    let x = DeviceTensor::from_host(stream, x_host.as_slice().into())?;
    let y = DeviceTensor::from_host(stream, y_host.as_slice().into())?;
    let mut out = DeviceTensor::<f32, 1>::zeros_on(stream, [N])?;
    let mut start = Event::new()?;
    let mut end = Event::new()?;
    start.record(stream)?;
    launch_saxpy(stream, a, &x, &y, &mut out)?;
    end.record(stream)?;
    let result = out.to_host(stream)?;
    let ms = start.elapsed_ms(&end)?;
    let mismatches = result
        .as_slice()
        .iter()
        .zip(x_host.iter().zip(&y_host))
        .filter(|(got, (x, y))| (**got - (a * **x + **y)).abs() > 1e-5)
        .count();
    if mismatches > 0 {
        return Err(AppError::Failed(format!("saxpy: {mismatches} of {N} elements differ")));
    }
    let gbps = (3 * N * 4) as f64 / (ms as f64 * 1e-3) / 1e9;
    println!("saxpy      n = {N:>9}  {ms:8.3} ms  {gbps:7.1} GB/s  ok");
    Ok(())
}

fn row_sums(stream: &Stream) -> Result<(), AppError> {
    const ROWS: usize = 4096;
    const COLS: usize = 2048;
    let m_host = HostTensor::new(random_vec(ROWS * COLS, 3), [ROWS, COLS])?;
    let m = DeviceTensor::from_host(stream, (&m_host).into())?;
    let mut sums = DeviceTensor::<f32, 1>::zeros_on(stream, [ROWS])?;
    let mut start = Event::new()?;
    let mut end = Event::new()?;
    start.record(stream)?;
    launch_row_sum(stream, &m, &mut sums)?;
    end.record(stream)?;
    let pending = sums.to_host_async(stream)?;
    let result = pending.wait()?;
    let ms = start.elapsed_ms(&end)?;
    for (r, got) in result.as_slice().iter().enumerate() {
        let row = &m_host.as_slice()[r * COLS..(r + 1) * COLS];
        let want: f64 = row.iter().map(|&v| v as f64).sum();
        if (*got as f64 - want).abs() > 1e-3 * (1.0 + want.abs()) {
            return Err(AppError::Failed(format!("row_sum: row {r}: got {got}, want {want}")));
        }
    }
    println!("row_sum    {ROWS}x{COLS}  {ms:8.3} ms  ok");
    Ok(())
}

#[cfg(example_kernels_built)]
fn launch_saxpy(
    stream: &Stream,
    a: f32,
    x: &DeviceTensor<f32, 1>,
    y: &DeviceTensor<f32, 1>,
    out: &mut DeviceTensor<f32, 1>,
) -> choreo::Result<()> {
    let n = out.len();
    if x.len() != n || y.len() != n {
        return Err(choreo::Error::Length { expected: n, got: x.len().min(y.len()) });
    }
    let xp = x.buffer().device_ptr_for_read(stream)?;
    let yp = y.buffer().device_ptr_for_read(stream)?;
    let op = out.buffer_mut().device_ptr_for_write(stream)?;
    // SAFETY: the three pointers come from live device buffers of `n` elements each (checked
    // above), on the device of `stream`; the kernel only touches indices below `n`; the
    // buffers record this launch right below, so none is freed before the kernel is done.
    let status = unsafe { ffi::example_saxpy(a, xp, yp, op, n as u64, stream.as_raw()) };
    choreo::check_cuda(status, "example_saxpy")?;
    x.buffer().record_read(stream)?;
    y.buffer().record_read(stream)?;
    out.buffer_mut().record_write(stream)
}

#[cfg(example_kernels_built)]
fn launch_row_sum(
    stream: &Stream,
    m: &DeviceTensor<f32, 2>,
    sums: &mut DeviceTensor<f32, 1>,
) -> choreo::Result<()> {
    let [rows, cols] = m.shape();
    sums.expect_shape("sums", [rows])?;
    let mp = m.buffer().device_ptr_for_read(stream)?;
    let sp = sums.buffer_mut().device_ptr_for_write(stream)?;
    // SAFETY: `m` holds rows × cols elements and `sums` rows elements (checked above); the
    // kernel reads row r of `m` and writes `sums[r]` for r < rows only; both buffers record
    // this launch, so they outlive the kernel.
    let status = unsafe { ffi::example_row_sum(mp, sp, rows as u64, cols as u64, stream.as_raw()) };
    choreo::check_cuda(status, "example_row_sum")?;
    m.buffer().record_read(stream)?;
    sums.buffer_mut().record_write(stream)
}

#[cfg(not(example_kernels_built))]
fn launch_saxpy(
    _: &Stream,
    _: f32,
    _: &DeviceTensor<f32, 1>,
    _: &DeviceTensor<f32, 1>,
    _: &mut DeviceTensor<f32, 1>,
) -> choreo::Result<()> {
    Err(choreo::Error::NotBuilt { function: "example_saxpy" })
}

#[cfg(not(example_kernels_built))]
fn launch_row_sum(
    _: &Stream,
    _: &DeviceTensor<f32, 2>,
    _: &mut DeviceTensor<f32, 1>,
) -> choreo::Result<()> {
    Err(choreo::Error::NotBuilt { function: "example_row_sum" })
}
