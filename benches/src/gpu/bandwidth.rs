//! Bandwidth: `c = a + b` over f32 tensors of 2^28 elements (1 GiB each), timed with events on
//! one stream. Generated kernels, each next to its hand-written CUDA twin (same launch shape,
//! same accesses):
//!
//! - `add`: one element per thread (the straightforward kernel);
//! - `add4`: four elements per thread, 256 apart, all loads before the stores;
//!
//! plus a hand-written 16-byte (float4) variant and a device-to-device `cudaMemcpyAsync` of
//! 1 GiB (the copy reference), and `add_checked` / `add4_checked`: the same kernels with `c`
//! of its own run-time extent, whose stores the host proves in bounds before the launch (so
//! the kernel's unchecked instance runs), and `add_checked_in_kernel`, whose store is checked
//! in the kernel whatever the extents (the cost of an in-kernel check), each next to the
//! proven kernel. Bytes moved: 3 GiB for the adds (two reads, one write), 2 GiB
//! for the copy (one read, one write); GB/s are 10^9 bytes per second.

use choreo::{DeviceTensor, Stream, sys};

use choreo_bench::table::three_digits;

use super::{
    BenchError, BenchResult, Options, Random, RawBuffer, bench, cuda, event_ms, interleaved,
    reference, timing_cells, view,
};

/// The section's outcome.
pub struct Outcome {
    /// Table rows `[variant, median, min, max, derived]`.
    pub rows: Vec<Vec<String>>,
    /// The best generated kernel over the copy bandwidth (target ≥ 0.90), and its name.
    pub ours_over_copy: (f64, &'static str),
    /// Time of `add_checked` over `add` and of `add4_checked` over `add4`: checks the host
    /// proves (target ≤ 1.02).
    pub checked_over_proven: (f64, f64),
    /// Time of `add_checked_in_kernel` over `add`: a check made in the kernel.
    pub in_kernel_over_proven: f64,
}

/// Checks that `c` is exactly `a + b` (f32 addition is exact to reproduce); counts mismatches.
fn check(what: &str, a: &[f32], b: &[f32], c: &[f32]) -> BenchResult<()> {
    let wrong =
        a.iter().zip(b).zip(c).filter(|((x, y), z)| (*x + *y).to_bits() != z.to_bits()).count();
    if wrong == 0 {
        Ok(())
    } else {
        Err(BenchError::Failed(format!("bandwidth: {what}: {wrong} of {} elements wrong", c.len())))
    }
}

/// A raw launcher of `reference.cu`.
type Launch = unsafe extern "C" fn(sys::cudaStream_t, *const f32, *const f32, *mut f32, u32) -> i32;

/// Runs the section.
pub fn run(options: &Options) -> BenchResult<Outcome> {
    let elements: usize = if options.quick { 1 << 22 } else { 1 << 28 };
    let s = Stream::new()?;
    let mut random = Random::new(0xba2d);
    let input_a = random.vec_f32(elements, -1.0, 1.0);
    let input_b = random.vec_f32(elements, -1.0, 1.0);
    let a = DeviceTensor::from_host(&s, view(&input_a)?)?;
    let b = DeviceTensor::from_host(&s, view(&input_b)?)?;
    let poison = vec![f32::NAN; elements];
    let mut c = DeviceTensor::from_host(&s, view(&poison)?)?;
    let mut raw_a = RawBuffer::f32s(elements)?;
    let mut raw_b = RawBuffer::f32s(elements)?;
    let mut raw_c = RawBuffer::f32s(elements)?;
    raw_a.upload(&input_a)?;
    raw_b.upload(&input_b)?;
    let (pa, pb, pc) = (raw_a.f32_ptr(), raw_b.f32_ptr(), raw_c.f32_ptr());
    let n = u32::try_from(elements).map_err(|_| BenchError::Failed("too many elements".into()))?;
    // SAFETY: no arguments.
    cuda(unsafe { reference::ref_load_kernels() }, "loading the reference kernels")?;

    // Correctness of every variant, each on a poisoned output.
    type Generated = for<'x> fn(
        &'x Stream,
        &'x DeviceTensor<f32, 1>,
        &'x DeviceTensor<f32, 1>,
        &'x mut DeviceTensor<f32, 1>,
    ) -> choreo::Result<choreo::Pending<'x, ()>>;
    let generated: [(&'static str, Generated); 5] = [
        ("ours: bench::add", bench::add),
        ("ours: bench::add4", bench::add4),
        ("ours: bench::add_checked", bench::add_checked),
        ("ours: bench::add4_checked", bench::add4_checked),
        ("ours: bench::add_checked_in_kernel", bench::add_checked_in_kernel),
    ];
    for (what, kernel) in generated {
        c.copy_from_host(&s, view(&poison)?)?;
        kernel(&s, &a, &b, &mut c)?.wait()?;
        check(what, &input_a, &input_b, c.to_host(&s)?.as_slice())?;
    }
    let hand: [(&str, Launch); 3] = [
        ("hand: add", reference::ref_add),
        ("hand: add4", reference::ref_add4),
        ("hand: float4", reference::ref_add_vec4),
    ];
    for (what, launch) in hand {
        raw_c.poison(&s)?;
        // SAFETY: the buffers hold `elements` floats (cudaMalloc memory is 256-byte aligned, as
        // the float4 variant needs); the stream is live.
        cuda(unsafe { launch(s.as_raw(), pa, pb, pc, n) }, what)?;
        check(what, &input_a, &input_b, &raw_c.download()?)?;
    }
    raw_c.poison(&s)?;
    let bytes = raw_c.bytes();
    let copy = || {
        cuda(
            // SAFETY: both ranges are live allocations of `bytes` bytes; the stream is live.
            unsafe {
                sys::cudaMemcpyAsync(
                    pc.cast(),
                    pa.cast_const().cast(),
                    bytes,
                    sys::cudaMemcpyKind::cudaMemcpyDeviceToDevice,
                    s.as_raw(),
                )
            }
            .0,
            "cudaMemcpyAsync",
        )
    };
    copy()?;
    if raw_c.download()? != input_a {
        return Err(BenchError::Failed("bandwidth: the device-to-device copy is wrong".into()));
    }

    let mut ours_add = || {
        event_ms(&s, || {
            drop(bench::add(&s, &a, &b, &mut c)?);
            Ok(())
        })
    };
    // `c` is borrowed mutably by one closure at a time: the second uses its own output tensor.
    let mut c4 = DeviceTensor::from_host(&s, view(&poison)?)?;
    let mut ours_add4 = || {
        event_ms(&s, || {
            drop(bench::add4(&s, &a, &b, &mut c4)?);
            Ok(())
        })
    };
    let mut c_checked = DeviceTensor::from_host(&s, view(&poison)?)?;
    let mut ours_add_checked = || {
        event_ms(&s, || {
            drop(bench::add_checked(&s, &a, &b, &mut c_checked)?);
            Ok(())
        })
    };
    let mut c4_checked = DeviceTensor::from_host(&s, view(&poison)?)?;
    let mut ours_add4_checked = || {
        event_ms(&s, || {
            drop(bench::add4_checked(&s, &a, &b, &mut c4_checked)?);
            Ok(())
        })
    };
    let mut c_in_kernel = DeviceTensor::from_host(&s, view(&poison)?)?;
    let mut ours_add_in_kernel = || {
        event_ms(&s, || {
            drop(bench::add_checked_in_kernel(&s, &a, &b, &mut c_in_kernel)?);
            Ok(())
        })
    };
    let stream = &s;
    let raw = |launch: Launch, what: &'static str| {
        move || {
            event_ms(stream, || {
                // SAFETY: as in the correctness checks above.
                cuda(unsafe { launch(stream.as_raw(), pa, pb, pc, n) }, what)
            })
        }
    };
    let mut hand_add = raw(reference::ref_add, "ref_add");
    let mut hand_add4 = raw(reference::ref_add4, "ref_add4");
    let mut hand_vec4 = raw(reference::ref_add_vec4, "ref_add_vec4");
    let mut memcpy = || event_ms(&s, copy);
    let summaries = interleaved(
        options,
        &mut [
            &mut ours_add,
            &mut hand_add,
            &mut ours_add4,
            &mut hand_add4,
            &mut hand_vec4,
            &mut memcpy,
            &mut ours_add_checked,
            &mut ours_add4_checked,
            &mut ours_add_in_kernel,
        ],
    )?;
    let gbps = |bytes: usize, ms: f64| bytes as f64 / (ms * 1e-3) / 1e9;
    let add_bytes = 3 * bytes;
    let copy_gbps = gbps(2 * bytes, summaries[5].median);
    let names = [
        "ours: bench::add (1 element/thread)",
        "hand CUDA, same kernel",
        "ours: bench::add4 (4 elements/thread)",
        "hand CUDA, same kernel",
        "hand CUDA, float4 accesses",
        "cudaMemcpyAsync device to device",
        "ours: bench::add_checked (stores proven on the host)",
        "ours: bench::add4_checked (stores proven on the host)",
        "ours: bench::add_checked_in_kernel (stores checked in the kernel)",
    ];
    let rows = names
        .iter()
        .zip(&summaries)
        .enumerate()
        .map(|(index, (name, summary))| {
            let moved = if index == 5 { 2 * bytes } else { add_bytes };
            let [median, min, max] = timing_cells(summary, 1.0, "ms");
            let rate = gbps(moved, summary.median);
            let mut derived =
                format!("{} GB/s = {} of copy", three_digits(rate), three_digits(rate / copy_gbps));
            if index == 1 || index == 3 {
                derived += &format!(
                    "; ours/hand {}",
                    three_digits(summaries[index].median / summaries[index - 1].median)
                );
            }
            if index >= 6 {
                // Time of the checked kernel over the proven one: the checks' cost.
                let proven = if index == 7 { 2 } else { 0 };
                derived += &format!(
                    "; checked/proven time {}",
                    three_digits(summaries[index].median / summaries[proven].median)
                );
            }
            let name =
                if index == 0 { format!("{name}, {elements} f32") } else { name.to_string() };
            vec![name, median, min, max, derived]
        })
        .collect();
    let add = gbps(add_bytes, summaries[0].median) / copy_gbps;
    let add4 = gbps(add_bytes, summaries[2].median) / copy_gbps;
    let ours_over_copy = if add4 > add { (add4, "bench::add4") } else { (add, "bench::add") };
    let checked_over_proven =
        (summaries[6].median / summaries[0].median, summaries[7].median / summaries[2].median);
    let in_kernel_over_proven = summaries[8].median / summaries[0].median;
    Ok(Outcome { rows, ours_over_copy, checked_over_proven, in_kernel_over_proven })
}
