//! The example application: Choreo kernels (`kernels/*.co`), translated and compiled by
//! `build.rs` with `choreo_build::compile`, called through their generated safe wrappers.
//!
//! It runs the seed's two-stream example, saxpy, row sums, a GEMM on tensor cores
//! (`matmul.rs`) and an attention forward (`attention.rs`), checks every result against a reference computed in Rust and prints a short
//! report with event timings. The kernels run on
//! the default device: the GPU when there is a usable one, else the CPU (the CPU version of
//! the kernels is always built); `CHOREO_DEVICE=cpu|cuda` chooses. It prints the device it
//! used; when the chosen device cannot run (e.g. `CHOREO_DEVICE=cuda` without a GPU) it prints
//! one line saying why and exits with status 1.

use choreo::{DeviceTensor, Event, HostTensor, Stream};
use std::process::ExitCode;

choreo::include_kernels!(); // kernels/*.co: `seed`, `saxpy`, `reduce`
/// The Hopper kernels (sm_90a): `kernels/hopper/gemm.co` (`gemm`) and
/// `kernels/hopper/attention.co` (`attention`).
mod hopper {
    choreo::include_kernels!("hopper");
}
use hopper::gemm;

mod attention;
mod matmul;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(AppError::CannotRun(reason)) => {
            eprintln!("example-app: cannot run: {reason}");
            ExitCode::FAILURE
        }
        Err(AppError::Failed(message)) => {
            eprintln!("example-app: FAILED: {message}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Debug)]
enum AppError {
    /// No GPU, no driver, or kernels not built: the environment, not the program.
    CannotRun(String),
    /// A wrong result or a CUDA failure.
    Failed(String),
}

// ANCHOR: app_error
impl From<choreo::Error> for AppError {
    fn from(e: choreo::Error) -> AppError {
        if e.is_no_gpu() || matches!(e, choreo::Error::NotBuilt { .. }) {
            AppError::CannotRun(e.to_string())
        } else {
            AppError::Failed(e.to_string())
        }
    }
}
// ANCHOR_END: app_error

fn run() -> Result<(), AppError> {
    let device = choreo::init()?;
    if device.is_cpu() {
        println!("device: {}", device.name()?);
    } else {
        let (major, minor) = device.compute_capability()?;
        println!("device {}: {} (sm_{major}{minor})", device.ordinal(), device.name()?);
    }
    let (s0, s1) = (Stream::new()?, Stream::new()?);
    two_streams(&s0, &s1)?;
    saxpy(&s0)?;
    row_sums()?;
    matmul::run(device, &s0)?;
    attention::run(device, &s0)?;
    println!("all checks passed");
    Ok(())
}

/// A small deterministic generator (xorshift), so the inputs are varied but reproducible.
fn random_vec(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        })
        .collect()
}

fn check_close(what: &str, got: &[f32], want: impl Iterator<Item = f32>) -> Result<(), AppError> {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if (g - w).abs() > 1e-4 * (1.0 + w.abs()) {
            return Err(AppError::Failed(format!("{what}: element {i}: got {g}, want {w}")));
        }
    }
    Ok(())
}

/// The seed's example as written (`seed::foo`, host data, results stay on the device), and the
/// same two-stream shape on device tensors that are checked (`seed::scale_both`).
fn two_streams(s0: &Stream, s1: &Stream) -> Result<(), AppError> {
    let (a, b) = (random_vec(1000, 1), random_vec(300, 2));
    seed::foo(s0, s1, a.as_slice().into(), b.as_slice().into())?.wait()?;
    seed::bar(s0, a.as_slice().into())?;

    const N: usize = 1 << 22;
    let (a_host, b_host) = (random_vec(N, 3), random_vec(N, 4));
    let mut a = DeviceTensor::from_host(s0, a_host.as_slice().into())?;
    let mut b = DeviceTensor::from_host(s1, b_host.as_slice().into())?;
    let start = s0.record_event()?;
    s1.wait_event(&start)?;
    let pending = seed::scale_both(s0, s1, &mut a, &mut b, 3.0)?;
    let (end0, end1) = (s0.record_event()?, s1.record_event()?);
    pending.wait()?;
    // The Pending completes with the call's work; the end events come after it on each stream.
    end0.synchronize()?;
    end1.synchronize()?;
    let ms = start.elapsed_ms(&end0)?.max(start.elapsed_ms(&end1)?);
    check_close("scale_both a", a.to_host(s0)?.as_slice(), a_host.iter().map(|v| v * 3.0))?;
    check_close("scale_both b", b.to_host(s1)?.as_slice(), b_host.iter().map(|v| v * 3.0))?;
    println!("seed       two streams, 2 x {N} elements  {ms:8.3} ms  ok");
    Ok(())
}

fn saxpy(stream: &Stream) -> Result<(), AppError> {
    const N: usize = 1 << 24;
    let alpha = 2.5f32;
    let (x_host, y_host) = (random_vec(N, 5), random_vec(N, 6));
    let x = DeviceTensor::from_host(stream, x_host.as_slice().into())?;
    let y = DeviceTensor::from_host(stream, y_host.as_slice().into())?;
    let mut out = DeviceTensor::<f32, 1>::zeros_on(stream, [N])?;
    let mut start = Event::new()?;
    let mut end = Event::new()?;
    start.record(stream)?;
    saxpy::saxpy(stream, alpha, &x, &y, &mut out)?;
    end.record(stream)?;
    end.synchronize()?;
    let ms = start.elapsed_ms(&end)?;
    let want = x_host.iter().zip(&y_host).map(|(x, y)| alpha * x + y);
    check_close("saxpy", out.to_host(stream)?.as_slice(), want)?;
    let gbps = (3 * N * 4) as f64 / (ms as f64 * 1e-3) / 1e9;
    println!("saxpy      n = {N}  {ms:8.3} ms  {gbps:7.1} GB/s  ok");
    Ok(())
}

fn row_sums() -> Result<(), AppError> {
    const ROWS: usize = 2048;
    const COLS: usize = 1000;
    let m = HostTensor::new(random_vec(ROWS * COLS, 7), [ROWS, COLS])?;
    let started = std::time::Instant::now();
    let sums = reduce::row_sums((&m).into())?;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let want = m.as_slice().chunks(COLS).map(|row| row.iter().map(|&v| v as f64).sum::<f64>());
    check_close("row_sums", sums.as_slice(), want.map(|v| v as f32))?;
    println!("row_sums   {ROWS} x {COLS}, copies included  {ms:8.3} ms  ok");
    Ok(())
}
