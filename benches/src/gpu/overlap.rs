//! Overlap: the seed's two-stream example (`seed_async` in `bench.co`: two `parallel.async`
//! launches on streams `s0` and `s1`) with kernels of a few milliseconds each. Wall time from
//! the call to the completion of both kernels, for:
//!
//! - ours, serial: `seed_sync` (synchronous launches: the second kernel starts after the first);
//! - ours, async: `seed_async(...)?.wait()`;
//! - hand-written, serial and on two streams: the same kernels in CUDA C++ (`reference.cu`).
//!
//! Each kernel uses a fraction of the GPU, so two streams can run them side by side: the ideal
//! speed-up is 2. The figure of merit is ours/hand on two streams (target ≥ 0.97, i.e. at most
//! 3 % slower than hand-written code).

use choreo::{DeviceTensor, Stream};

use choreo_bench::table::three_digits;

use super::{
    BenchError, BenchResult, Options, Random, RawBuffer, bench, cuda, host_seconds, interleaved,
    reference, timing_cells, view,
};

/// Elements per tensor: 32 blocks of 128 threads per kernel.
const ELEMENTS: usize = 32 * 128;

/// The multiply-add of each kernel, as the CPU reference computes it (`fmaf` on the GPU: nvcc
/// contracts `x * a + b`).
fn reference_value(mut x: f32, iters: i32, offset: f32) -> f32 {
    for _ in 0..iters {
        x = x.mul_add(0.9999, offset);
    }
    x
}

/// Checks `got` against the CPU reference of `input` after `iters` steps; the largest relative
/// error must be under 1e-6.
fn check(what: &str, input: &[f32], got: &[f32], iters: i32, offset: f32) -> BenchResult<()> {
    let mut worst = 0f64;
    for (&x, &y) in input.iter().zip(got) {
        let want = f64::from(reference_value(x, iters, offset));
        let error = (f64::from(y) - want).abs() / want.abs().max(1e-30);
        worst = if error.is_nan() { f64::INFINITY } else { worst.max(error) };
    }
    if worst <= 1e-6 {
        Ok(())
    } else {
        Err(BenchError::Failed(format!(
            "overlap: {what}: wrong result (max relative error {worst:e})"
        )))
    }
}

/// The section's rows: `[variant, median, min, max, derived]`, and the ours/hand ratio.
pub struct Outcome {
    /// Table rows.
    pub rows: Vec<Vec<String>>,
    /// Hand-written two-stream time over ours (≥ 0.97 is the target).
    pub ours_over_hand: f64,
    /// Milliseconds one kernel takes alone.
    pub kernel_ms: f64,
}

/// Runs the section.
pub fn run(options: &Options) -> BenchResult<Outcome> {
    let s0 = Stream::new()?;
    let s1 = Stream::new()?;
    let mut random = Random::new(0x5eed);
    let input_a = random.vec_f32(ELEMENTS, 0.5, 1.5);
    let input_b = random.vec_f32(ELEMENTS, 0.5, 1.5);
    let mut a = DeviceTensor::from_host(&s0, view(&input_a)?)?;
    let mut b = DeviceTensor::from_host(&s0, view(&input_b)?)?;
    let mut hand_a = RawBuffer::f32s(ELEMENTS)?;
    let mut hand_b = RawBuffer::f32s(ELEMENTS)?;
    s0.synchronize()?;
    // SAFETY: no arguments; loads the reference kernels.
    cuda(unsafe { reference::ref_load_kernels() }, "loading the reference kernels")?;
    let n = ELEMENTS as i32;

    // Correctness first, with few iterations (the CPU reference is cheap then), every variant
    // on fresh copies of the same inputs.
    let check_iters = 1000;
    let variants: [(&str, bool); 2] = [("ours async", true), ("ours serial", false)];
    for (what, asynchronous) in variants {
        a.copy_from_host(&s0, view(&input_a)?)?;
        b.copy_from_host(&s0, view(&input_b)?)?;
        if asynchronous {
            bench::seed_async(&s0, &s1, &mut a, &mut b, check_iters)?.wait()?;
        } else {
            bench::seed_sync(&s0, &s1, &mut a, &mut b, check_iters)?;
        }
        check(what, &input_a, a.to_host(&s0)?.as_slice(), check_iters, 0.0001)?;
        check(what, &input_b, b.to_host(&s0)?.as_slice(), check_iters, 0.0002)?;
    }
    for (what, two_streams) in [("hand two streams", true), ("hand serial", false)] {
        hand_a.upload(&input_a)?;
        hand_b.upload(&input_b)?;
        let launch =
            if two_streams { reference::ref_seed_two_streams } else { reference::ref_seed_serial };
        // SAFETY: both buffers hold ELEMENTS floats; the streams are live.
        let status = unsafe {
            launch(s0.as_raw(), s1.as_raw(), hand_a.f32_ptr(), n, hand_b.f32_ptr(), n, check_iters)
        };
        cuda(status, what)?;
        check(what, &input_a, &hand_a.download()?, check_iters, 0.0001)?;
        check(what, &input_b, &hand_b.download()?, check_iters, 0.0002)?;
    }

    // Size the kernels: one kernel alone should take about 2 ms (0.2 ms in a quick run).
    let target_ms = if options.quick { 0.2 } else { 2.0 };
    let probe_iters = 1 << 16;
    let probe = host_seconds(|| {
        bench::seed_sync(&s0, &s1, &mut a, &mut b, probe_iters)?;
        Ok(())
    })?;
    let probe = host_seconds(|| {
        bench::seed_sync(&s0, &s1, &mut a, &mut b, probe_iters)?;
        Ok(())
    })?
    .min(probe);
    let per_kernel_ms = probe * 1e3 / 2.0;
    let iters =
        ((f64::from(probe_iters) * target_ms / per_kernel_ms) as i64).clamp(1, 1 << 30) as i32;

    let mut ours_serial = || {
        host_seconds(|| {
            bench::seed_sync(&s0, &s1, &mut a, &mut b, iters)?;
            Ok(())
        })
    };
    // Separate tensors would only cost memory: the two closures run one after the other.
    let mut ours_async_a = DeviceTensor::from_host(&s0, view(&input_a)?)?;
    let mut ours_async_b = DeviceTensor::from_host(&s0, view(&input_b)?)?;
    s0.synchronize()?;
    let mut ours_async = || {
        host_seconds(|| {
            bench::seed_async(&s0, &s1, &mut ours_async_a, &mut ours_async_b, iters)?.wait()?;
            Ok(())
        })
    };
    let (pa, pb) = (hand_a.f32_ptr(), hand_b.f32_ptr());
    let mut hand_two_streams = || {
        host_seconds(|| {
            // SAFETY: both buffers hold ELEMENTS floats; the streams are live.
            let status = unsafe {
                reference::ref_seed_two_streams(s0.as_raw(), s1.as_raw(), pa, n, pb, n, iters)
            };
            cuda(status, "ref_seed_two_streams")?;
            s0.synchronize()?;
            s1.synchronize()?;
            Ok(())
        })
    };
    let mut hand_serial = || {
        host_seconds(|| {
            // SAFETY: as above.
            let status = unsafe {
                reference::ref_seed_serial(s0.as_raw(), s1.as_raw(), pa, n, pb, n, iters)
            };
            cuda(status, "ref_seed_serial")
        })
    };
    let summaries = interleaved(
        options,
        &mut [&mut ours_serial, &mut ours_async, &mut hand_serial, &mut hand_two_streams],
    )?;
    let [ours_serial, ours_async, hand_serial, hand_async] = [0, 1, 2, 3].map(|i| summaries[i]);
    let row = |name: &str, summary: &choreo_bench::stats::Summary, derived: String| {
        let [median, min, max] = timing_cells(summary, 1e3, "ms");
        vec![name.to_owned(), median, min, max, derived]
    };
    let ours_over_hand = hand_async.median / ours_async.median;
    let rows = vec![
        row("ours, serial (seed_sync)", &ours_serial, String::new()),
        row(
            "ours, async on 2 streams (seed_async)",
            &ours_async,
            format!(
                "speed-up {}× over serial",
                three_digits(ours_serial.median / ours_async.median)
            ),
        ),
        row("hand CUDA, serial", &hand_serial, String::new()),
        row(
            "hand CUDA, 2 streams",
            &hand_async,
            format!(
                "speed-up {}× over serial",
                three_digits(hand_serial.median / hand_async.median)
            ),
        ),
        vec![
            "ours / hand (2 streams)".to_owned(),
            String::new(),
            String::new(),
            String::new(),
            format!(
                "{} (target ≥ 0.97; {iters} steps/element, {ELEMENTS} elements/kernel)",
                three_digits(ours_over_hand)
            ),
        ],
    ];
    Ok(Outcome {
        rows,
        ours_over_hand,
        kernel_ms: per_kernel_ms * f64::from(iters) / f64::from(probe_iters),
    })
}
