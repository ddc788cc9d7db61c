//! `choreo-bench cpu`: the generated kernels on the CPU device, side by side with hand-written
//! multithreaded Rust over the same data in the same process (variants interleaved, median of
//! the trials). Ratios are the result; absolute times depend on the machine.
//!
//! - `add`: `c = a + b` over f32 vectors (`bench::add`, one element per CUDA thread, 256 per
//!   block) against `std::thread::scope` with as many threads as the CPU runtime has workers,
//!   each summing one contiguous chunk (a loop the compiler vectorises);
//! - `add4`: `bench::add4` (four elements per thread) against the same loop;
//! - `saxpy`: `z = k x + y` (`bench::saxpy`, one element per CUDA thread) against the same
//!   kind of loop computing `k * a + b`.
//!
//! The worker count is the runtime's (`CHOREO_CPU_THREADS`, else the machine's cores); run the
//! command with `CHOREO_CPU_THREADS=1,2,…` to see the scaling.

use std::process::ExitCode;
use std::time::Instant;

use choreo::{Device, DeviceTensor, Stream};
use choreo_bench::stats::Summary;
use choreo_bench::table::{Table, three_digits};

use crate::gpu::bench;

const USAGE: &str = "usage: choreo-bench cpu [--elements N] [--trials N] [--markdown FILE]";

/// Runs the section; prints the table (and writes it as markdown when asked).
pub fn main(args: &[String]) -> ExitCode {
    let mut elements: usize = 1 << 24;
    let mut trials: usize = 15;
    let mut markdown = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let value = match arg.as_str() {
            "--elements" | "--trials" | "--markdown" => iter.next(),
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ => None,
        };
        match (arg.as_str(), value) {
            ("--elements", Some(v)) if v.parse::<usize>().is_ok_and(|n| n > 0) => {
                elements = v.parse().unwrap_or(elements)
            }
            ("--trials", Some(v)) if v.parse::<usize>().is_ok_and(|n| n > 0) => {
                trials = v.parse().unwrap_or(trials)
            }
            ("--markdown", Some(v)) => markdown = Some(std::path::PathBuf::from(v)),
            _ => {
                eprintln!("choreo-bench cpu: bad argument `{arg}`\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    match run(elements, trials) {
        Ok(table) => {
            print!("{}", table.to_text());
            if let Some(path) = markdown {
                if let Err(e) = std::fs::write(&path, table.to_markdown()) {
                    eprintln!("choreo-bench cpu: cannot write {}: {e}", path.display());
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("choreo-bench cpu: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `c = op(a, b)` elementwise by `threads` scoped threads, one contiguous chunk each.
fn hand_elementwise(
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    threads: usize,
    op: impl Fn(f32, f32) -> f32 + Copy + Send,
) {
    let chunk = c.len().div_ceil(threads.max(1));
    std::thread::scope(|scope| {
        for ((c, a), b) in c.chunks_mut(chunk).zip(a.chunks(chunk)).zip(b.chunks(chunk)) {
            scope.spawn(move || {
                for ((c, a), b) in c.iter_mut().zip(a).zip(b) {
                    *c = op(*a, *b);
                }
            });
        }
    });
}

/// The factor of the saxpy variants.
const SAXPY_K: f32 = 1.5;

fn run(n: usize, trials: usize) -> Result<Table, String> {
    let e = |e: choreo::Error| e.to_string();
    let device = Device::cpu();
    let stream = Stream::new_on_device(device).map_err(e)?;
    let threads = device.multiprocessor_count().map_err(e)? as usize;
    let a_host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.5).collect();
    let b_host: Vec<f32> = (0..n).map(|i| (i % 777) as f32 * 0.25).collect();
    let a = DeviceTensor::from_host(&stream, a_host.as_slice().into()).map_err(e)?;
    let b = DeviceTensor::from_host(&stream, b_host.as_slice().into()).map_err(e)?;
    let mut c = DeviceTensor::<f32, 1>::zeros_on(&stream, [n]).map_err(e)?;
    let mut c_hand = vec![0f32; n];
    let mut z = DeviceTensor::<f32, 1>::zeros_on(&stream, [n]).map_err(e)?;
    let mut z_hand = vec![0f32; n];

    let mut samples: [Vec<f64>; 5] = Default::default();
    for trial in 0..trials + 2 {
        let t = Instant::now();
        bench::add(&stream, &a, &b, &mut c).map_err(e)?.wait().map_err(e)?;
        let add = t.elapsed().as_secs_f64();
        let t = Instant::now();
        bench::add4(&stream, &a, &b, &mut c).map_err(e)?.wait().map_err(e)?;
        let add4 = t.elapsed().as_secs_f64();
        let t = Instant::now();
        hand_elementwise(&a_host, &b_host, &mut c_hand, threads, |a, b| a + b);
        let hand = t.elapsed().as_secs_f64();
        let t = Instant::now();
        bench::saxpy(&stream, SAXPY_K, &a, &b, &mut z).map_err(e)?.wait().map_err(e)?;
        let saxpy = t.elapsed().as_secs_f64();
        let t = Instant::now();
        hand_elementwise(&a_host, &b_host, &mut z_hand, threads, |a, b| SAXPY_K * a + b);
        let hand_saxpy = t.elapsed().as_secs_f64();
        // The first two rounds warm up (page faults of fresh memory, thread start).
        if trial >= 2 {
            for (s, v) in samples.iter_mut().zip([add, add4, hand, saxpy, hand_saxpy]) {
                s.push(v * 1e3);
            }
        }
    }
    let got = c.to_host(&stream).map_err(e)?;
    if got.as_slice() != c_hand.as_slice() {
        return Err("the kernels' sums differ from the hand-written loop's".into());
    }
    // Both sides compute k * a + b in f32 without contraction (the C++ side is built without
    // -ffp-contract=fast on x86-64), so the results agree to the last bit or within one ulp.
    let got = z.to_host(&stream).map_err(e)?;
    if let Some(i) = got
        .as_slice()
        .iter()
        .zip(&z_hand)
        .position(|(x, y)| (x - y).abs() > y.abs() * 2.0 * f32::EPSILON)
    {
        return Err(format!("saxpy differs at {i}: {} vs {}", got.as_slice()[i], z_hand[i]));
    }
    let summary = |s: &[f64]| Summary::of(s).ok_or("no samples");
    let hand = summary(&samples[2])?;
    let hand_saxpy = summary(&samples[4])?;
    let bytes = (3 * n * 4) as f64;
    let mut table = Table::new(["variant", "median", "min", "max", "derived"]);
    let names = [
        format!("ours: bench::add on the CPU ({threads} workers), {n} f32"),
        "ours: bench::add4 on the CPU".to_string(),
        format!("hand-written Rust a + b, {threads} scoped threads, contiguous chunks"),
        "ours: bench::saxpy on the CPU".to_string(),
        "hand-written Rust k * a + b, same threads".to_string(),
    ];
    let references = [&hand, &hand, &hand, &hand_saxpy, &hand_saxpy];
    for ((name, s), reference) in names.iter().zip(&samples).zip(references) {
        let sum = summary(s)?;
        let gbps = bytes / (sum.median * 1e-3) / 1e9;
        table.row([
            name.clone(),
            format!("{} ms", three_digits(sum.median)),
            format!("{} ms", three_digits(sum.min)),
            format!("{} ms", three_digits(sum.max)),
            format!(
                "{} GB/s; time / hand {}",
                three_digits(gbps),
                three_digits(sum.median / reference.median)
            ),
        ]);
    }
    Ok(table)
}
