//! Launch overhead: host time per call to enqueue `c = a + b` on three small device tensors
//! (1024 elements: the kernel itself takes a few µs), for
//!
//! - ours: the generated safe wrapper `bench::add(&s, &a, &b, &mut c)` (asynchronous; the
//!   returned `Pending` is dropped), shape checks and access tracking included;
//! - the generated C entry `__choreo_rs_add` called directly (the C++ part of ours alone);
//! - raw `<<<>>>` from Rust: a plain `extern "C"` launcher per call;
//! - raw `<<<>>>` from C++: the launches in a C++ loop, timed in C++.
//!
//! Calls are timed in batches of [`BATCH`] (fewer than the launch queue holds, so the host never
//! waits for the GPU inside a batch); the stream is synchronised between batches, untimed.
//!
//! A profile follows: the host cost of each CUDA runtime call a wrapper can make, measured the
//! same way, so the difference between ours and raw can be accounted for call by call.

use std::ffi::c_void;

use choreo::kernels::{EntryMessage, WorkStreams};
use choreo::{DeviceTensor, Stream, sys};

use choreo_bench::table::three_digits;

use super::{
    BenchError, BenchResult, Options, Random, RawBuffer, bench, cuda, interleaved, reference,
    timing_cells, view,
};

/// Elements per tensor.
const ELEMENTS: usize = 1024;
/// Calls per timed batch.
const BATCH: usize = 200;

unsafe extern "C" {
    // The C entry that the generated wrapper `bench::add` calls (see choreo-compiler's
    // lower/abi.rs: device pointers with their extents, the stream, an error message buffer).
    // Its symbol is mangled with (package, version, library, module, function); a wrong name
    // fails the link.
    #[link_name = "__choreo_rs_12choreo_bench50_1_05bench5bench3add"]
    fn __choreo_rs_add(
        s: sys::cudaStream_t,
        a: *const f32,
        a__e0: u64,
        b: *const f32,
        b__e0: u64,
        c: *mut f32,
        c__e0: u64,
        err: *mut std::ffi::c_char,
        err_cap: usize,
    ) -> i32;
}

/// Host seconds per call of `call`, over one batch; the stream is synchronised afterwards.
fn per_call(stream: &Stream, mut call: impl FnMut() -> BenchResult<()>) -> BenchResult<f64> {
    let start = std::time::Instant::now();
    for _ in 0..BATCH {
        call()?;
    }
    let seconds = start.elapsed().as_secs_f64();
    stream.synchronize()?;
    Ok(seconds / BATCH as f64)
}

/// The section's outcome.
pub struct Outcome {
    /// Table rows `[variant, median, min, max, derived]`.
    pub rows: Vec<Vec<String>>,
    /// Rows of the profile of single CUDA calls.
    pub profile: Vec<Vec<String>>,
    /// Ours over raw `<<<>>>` from C++ (target ≤ 1.25).
    pub ours_over_cpp: f64,
    /// Ours over raw `<<<>>>` from Rust.
    pub ours_over_rust: f64,
}

/// Runs the section.
pub fn run(options: &Options) -> BenchResult<Outcome> {
    let s = Stream::new()?;
    let mut random = Random::new(0x1a0c);
    let input_a = random.vec_f32(ELEMENTS, -1.0, 1.0);
    let input_b = random.vec_f32(ELEMENTS, -1.0, 1.0);
    let a = DeviceTensor::from_host(&s, view(&input_a)?)?;
    let b = DeviceTensor::from_host(&s, view(&input_b)?)?;
    let mut c = DeviceTensor::from_host(&s, view(&vec![f32::NAN; ELEMENTS])?)?;
    let mut raw_a = RawBuffer::f32s(ELEMENTS)?;
    let mut raw_b = RawBuffer::f32s(ELEMENTS)?;
    let mut raw_c = RawBuffer::f32s(ELEMENTS)?;
    raw_a.upload(&input_a)?;
    raw_b.upload(&input_b)?;
    raw_c.poison(&s)?;
    // SAFETY: no arguments.
    cuda(unsafe { reference::ref_load_kernels() }, "loading the reference kernels")?;

    // Correctness of both sides once.
    bench::add(&s, &a, &b, &mut c)?.wait()?;
    let want: Vec<f32> = input_a.iter().zip(&input_b).map(|(x, y)| x + y).collect();
    if c.to_host(&s)?.as_slice() != want.as_slice() {
        return Err(BenchError::Failed("launch: the generated add computed a wrong result".into()));
    }
    let (pa, pb, pc) = (raw_a.f32_ptr(), raw_b.f32_ptr(), raw_c.f32_ptr());
    let n = ELEMENTS as u32;
    // SAFETY: the three buffers hold ELEMENTS floats; the stream is live.
    cuda(unsafe { reference::ref_add(s.as_raw(), pa, pb, pc, n) }, "ref_add")?;
    if raw_c.download()? != want {
        return Err(BenchError::Failed("launch: the reference add computed a wrong result".into()));
    }

    let mut ours = || {
        per_call(&s, || {
            // Dropping the `Pending` does not wait: the work goes on, as in a launch loop.
            drop(bench::add(&s, &a, &b, &mut c)?);
            Ok(())
        })
    };
    let mut entry = || {
        per_call(&s, || {
            let mut message = [0 as std::ffi::c_char; 256];
            let e = ELEMENTS as u64;
            // SAFETY: the entry's C signature is declared above; the pointers are live
            // allocations of ELEMENTS floats with their extents; the message buffer is writable
            // for its length.
            let status = unsafe {
                __choreo_rs_add(
                    s.as_raw(),
                    pa,
                    e,
                    pb,
                    e,
                    pc,
                    e,
                    message.as_mut_ptr(),
                    message.len(),
                )
            };
            cuda(status, "__choreo_rs_add")
        })
    };
    // The wrapper's Rust layer alone: the same calls as the generated `bench::add`, in the
    // same order, with the entry call left out (the accesses are still recorded, so the
    // tracking stays exact).
    let mut c_bookkeeping = DeviceTensor::from_host(&s, view(&vec![f32::NAN; ELEMENTS])?)?;
    let mut bookkeeping = || {
        per_call(&s, || {
            let mut work = WorkStreams::new(&[&s])?;
            let pointers = (
                work.read_ptr(a.buffer())?,
                work.read_ptr(b.buffer())?,
                work.write_ptr(c_bookkeeping.buffer_mut())?,
            );
            let mut message = EntryMessage::new();
            {
                let _device = work.enter()?;
                std::hint::black_box((pointers, message.as_mut_ptr()));
            }
            work.record_read(a.buffer());
            work.record_read(b.buffer());
            work.record_write(c_bookkeeping.buffer_mut());
            message.result(0, "add")?;
            work.recorded()?;
            drop(work.pending(|| Ok(()))?);
            Ok(())
        })
    };
    let mut rust_raw = || {
        per_call(&s, || {
            // SAFETY: as above.
            cuda(unsafe { reference::ref_add(s.as_raw(), pa, pb, pc, n) }, "ref_add")
        })
    };
    let mut cpp_raw = || {
        let mut seconds = 0f64;
        // SAFETY: as above; `seconds` is writable.
        let status = unsafe {
            reference::ref_add_loop(s.as_raw(), pa, pb, pc, n, BATCH as i32, &mut seconds)
        };
        cuda(status, "ref_add_loop")?;
        s.synchronize()?;
        Ok(seconds / BATCH as f64)
    };
    let summaries = interleaved(
        options,
        &mut [&mut ours, &mut entry, &mut bookkeeping, &mut rust_raw, &mut cpp_raw],
    )?;
    let [ours, entry, bookkeeping, rust_raw, cpp_raw] = [0, 1, 2, 3, 4].map(|i| summaries[i]);
    let row = |name: &str, summary: &choreo_bench::stats::Summary| {
        let [median, min, max] = timing_cells(summary, 1e6, "µs");
        vec![
            name.to_owned(),
            median,
            min,
            max,
            format!("{}× raw C++", three_digits(summary.median / cpp_raw.median)),
        ]
    };
    let rows = vec![
        row("ours: safe wrapper bench::add (3 tensors, async)", &ours),
        row("generated C entry __choreo_rs_add (no Rust layer)", &entry),
        row("the wrapper's Rust layer alone (no launch)", &bookkeeping),
        row("raw <<<>>> via Rust extern \"C\" launcher", &rust_raw),
        row("raw <<<>>> in a C++ loop", &cpp_raw),
    ];
    let profile = profile(options, &s)?;
    Ok(Outcome {
        rows,
        profile,
        ours_over_cpp: ours.median / cpp_raw.median,
        ours_over_rust: ours.median / rust_raw.median,
    })
}

/// Host µs per call of the CUDA runtime calls a wrapper may make.
fn profile(options: &Options, s: &Stream) -> BenchResult<Vec<Vec<String>>> {
    let other = Stream::new()?;
    // `event` is re-recorded on `s` by the first variant; `waited` stays recorded on `other`.
    let mut event: sys::cudaEvent_t = std::ptr::null_mut();
    let mut waited: sys::cudaEvent_t = std::ptr::null_mut();
    for slot in [&mut event, &mut waited] {
        cuda(
            // SAFETY: `slot` is a writable handle slot.
            unsafe { sys::cudaEventCreateWithFlags(slot, sys::cudaEventDisableTiming) }.0,
            "cudaEventCreateWithFlags",
        )?;
    }
    // SAFETY: live event and stream.
    cuda(unsafe { sys::cudaEventRecord(waited, other.as_raw()) }.0, "cudaEventRecord")?;
    other.synchronize()?;
    let mut record = || {
        per_call(s, || {
            // SAFETY: live event and stream.
            cuda(unsafe { sys::cudaEventRecord(event, s.as_raw()) }.0, "cudaEventRecord")
        })
    };
    let mut create_destroy = || {
        per_call(s, || {
            let mut fresh: sys::cudaEvent_t = std::ptr::null_mut();
            // SAFETY: `fresh` is a writable slot; the event is destroyed right after.
            unsafe {
                cuda(
                    sys::cudaEventCreateWithFlags(&mut fresh, sys::cudaEventDisableTiming).0,
                    "create",
                )?;
                cuda(sys::cudaEventDestroy(fresh).0, "destroy")
            }
        })
    };
    let mut wait = || {
        per_call(s, || {
            // SAFETY: live event (recorded on `other`, complete) and stream.
            cuda(
                unsafe { sys::cudaStreamWaitEvent(s.as_raw(), waited, 0) }.0,
                "cudaStreamWaitEvent",
            )
        })
    };
    let mut get_device = || {
        per_call(s, || {
            let mut device = 0;
            // SAFETY: `device` is writable.
            cuda(unsafe { sys::cudaGetDevice(&mut device) }.0, "cudaGetDevice")
        })
    };
    let mut query = || {
        per_call(s, || {
            // SAFETY: live event; "not ready" is a normal answer.
            let _ = unsafe { sys::cudaEventQuery(event) };
            Ok(())
        })
    };
    let mut host_func = || {
        per_call(s, || {
            // SAFETY: the callback does nothing and takes no data.
            cuda(
                unsafe { sys::cudaLaunchHostFunc(s.as_raw(), Some(noop), std::ptr::null_mut()) }.0,
                "cudaLaunchHostFunc",
            )
        })
    };
    let summaries = interleaved(
        options,
        &mut [
            &mut record,
            &mut create_destroy,
            &mut wait,
            &mut get_device,
            &mut query,
            &mut host_func,
        ],
    )?;
    // SAFETY: created above, destroyed once; the stream work using it has been synchronised.
    unsafe {
        let _ = sys::cudaEventDestroy(event);
        let _ = sys::cudaEventDestroy(waited);
    }
    let names = [
        "cudaEventRecord",
        "cudaEventCreateWithFlags + cudaEventDestroy (no timing)",
        "cudaStreamWaitEvent (other stream's event)",
        "cudaGetDevice",
        "cudaEventQuery",
        "cudaLaunchHostFunc (empty callback)",
    ];
    Ok(names
        .iter()
        .zip(&summaries)
        .map(|(name, summary)| {
            let [median, min, max] = timing_cells(summary, 1e6, "µs");
            vec![(*name).to_owned(), median, min, max, String::new()]
        })
        .collect())
}

unsafe extern "C" fn noop(_: *mut c_void) {}
