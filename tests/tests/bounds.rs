//! Element accesses that the compiler cannot prove in bounds are checked at run time
//! (`tests/co/bounds.co`): an access that fails is skipped — no memory outside the buffers is
//! read or written (run the GPU variants under `compute-sanitizer --tool memcheck` to see it) —
//! and the call returns `Error::OutOfBounds` naming the buffer, the dimension, the index, the
//! extent and the `.co` location; for an asynchronous function, `wait()` does.
//!
//! Every test runs on the CPU (`NAME::on_cpu`, in every `cargo test`) and on a GPU
//! (`NAME::on_gpu`, `#[ignore = "needs a CUDA GPU"]`: `--ignored`); see
//! `choreo_tests::device_tests!`.

use choreo::Error;
use choreo_tests::co::bounds;
use choreo_tests::{TestDevice, device_tests, wait_then_write};

/// The reported violation, or a panic naming what came instead.
fn out_of_bounds(
    result: choreo::Result<()>,
) -> (&'static str, Option<usize>, i64, i64, &'static str) {
    match result {
        Err(Error::OutOfBounds { function: _, param, dim, index, extent, location }) => {
            (param, dim, index, extent, location)
        }
        other => panic!("expected Error::OutOfBounds, got {other:?}"),
    }
}

device_tests!(writes_within_the_extent_succeed_and_the_others_fail_the_call);
fn writes_within_the_extent_succeed_and_the_others_fail_the_call(dev: &TestDevice) {
    let stream = dev.stream();
    let mut exact = dev.zeros::<f32, 1>([16]);
    bounds::fill16(&mut exact, 2.5).expect("16 writes into 16 elements");
    assert_eq!(exact.to_host(&stream).expect("download").into_vec(), vec![2.5f32; 16]);

    let mut short = dev.zeros::<f32, 1>([8]);
    let (param, dim, index, extent, location) = out_of_bounds(bounds::fill16(&mut short, 1.0));
    assert_eq!((param, dim, extent), ("x", Some(0), 8));
    assert!((8..16).contains(&index), "the first failing index is one of 8..16: {index}");
    assert!(location.ends_with("bounds.co:7:30"), "{location}");
    // The writes in range happened; the others were skipped.
    assert_eq!(short.to_host(&stream).expect("download").into_vec(), vec![1.0f32; 8]);
    // The failure is the call's alone: the next call works.
    bounds::fill16(&mut exact, 3.0).expect("a later call");
}

device_tests!(an_asynchronous_call_reports_the_violation_when_waited_for);
fn an_asynchronous_call_reports_the_violation_when_waited_for(dev: &TestDevice) {
    let stream = dev.stream();
    let mut short = dev.zeros::<f32, 1>([5]);
    let pending = bounds::fill16_async(&mut short, 4.0, &stream).expect("launched");
    let (param, _, index, extent, _) = out_of_bounds(pending.wait());
    assert_eq!((param, extent), ("x", 5));
    assert!((5..16).contains(&index), "{index}");
    let mut exact = dev.zeros::<f32, 1>([16]);
    bounds::fill16_async(&mut exact, 4.0, &stream).expect("launched").wait().expect("in bounds");
}

device_tests!(a_gather_through_data_is_checked_per_read);
fn a_gather_through_data_is_checked_per_read(dev: &TestDevice) {
    let stream = dev.stream();
    let src: Vec<f32> = (0..32).map(|i| i as f32).collect();
    let src = dev.upload(&src);
    let good: Vec<i32> = (0..16).map(|i| 31 - i).collect();
    let idx = dev.upload(&good);
    let mut out = dev.zeros::<f32, 1>([16]);
    bounds::gather(&src, &idx, &mut out).expect("indices in range");
    let want: Vec<f32> = good.iter().map(|&i| i as f32).collect();
    assert_eq!(out.to_host(&stream).expect("download").into_vec(), want);

    let mut bad = good.clone();
    bad[9] = -4;
    let idx = dev.upload(&bad);
    let (param, dim, index, extent, _) = out_of_bounds(bounds::gather(&src, &idx, &mut out));
    assert_eq!((param, dim, index, extent), ("src", Some(0), -4, 32));
}

device_tests!(calls_in_flight_at_once_report_their_own_violations);
fn calls_in_flight_at_once_report_their_own_violations(dev: &TestDevice) {
    // Each call has a record of its own: every failing call in flight names its own extent.
    let stream = dev.stream();
    let mut tensors: Vec<_> = (1..16).map(|n| dev.zeros::<f32, 1>([n])).collect();
    let calls: Vec<_> = tensors
        .iter_mut()
        .map(|x| bounds::fill16_async(x, 1.0, &stream).expect("launched"))
        .collect();
    for (n, call) in (1..16i64).zip(calls) {
        let (param, _, index, extent, _) = out_of_bounds(call.wait());
        assert_eq!((param, extent), ("x", n));
        assert!((n..16).contains(&index), "{index}");
    }
}

device_tests!(a_record_is_not_reused_while_a_dropped_call_may_write_it_nor_after_forget);
fn a_record_is_not_reused_while_a_dropped_call_may_write_it_nor_after_forget(dev: &TestDevice) {
    let (held, other) = (dev.stream(), dev.stream());
    let src: Vec<f32> = (0..32).map(|i| i as f32).collect();
    let src = dev.upload(&src);
    let indices: Vec<i32> = (0..16).map(|i| 2 * i).collect();
    let idx = dev.upload(&indices);
    let mut outs: Vec<_> = (0..150).map(|_| dev.zeros::<f32, 1>([16])).collect();
    let mut short: Vec<_> = (0..8).map(|_| dev.zeros::<f32, 1>([5])).collect();
    // Loads the kernels before any is held at the gate (a first launch may wait for running
    // kernels).
    bounds::fill16_async(&mut outs[0], 0.0, &held).expect("launched").wait().expect("in bounds");
    bounds::gather_async(&src, &idx, &mut outs[0], &other)
        .expect("launched")
        .wait()
        .expect("in bounds");
    // Failing calls behind a gated kernel, dropped or forgotten without being waited for: they
    // write their records only when the gate opens.
    let gate = dev.gate();
    let mut word = dev.zeroed::<u32>(1);
    wait_then_write(&held, &gate, &mut word, 1).expect("the gated kernel");
    let held_calls: Vec<_> =
        short.iter_mut().map(|x| bounds::fill16_async(x, 1.0, &held).expect("launched")).collect();
    for (index, call) in held_calls.into_iter().enumerate() {
        if index % 2 == 0 {
            drop(call);
        } else {
            std::mem::forget(call);
        }
    }
    // Calls on another stream meanwhile (more than a block of records), in bounds, each of which
    // reads its record (gather's checks are not decided on the host): none may get the record
    // of a held call, or it would report that call's violation.
    let calls: Vec<_> = outs
        .iter_mut()
        .map(|out| bounds::gather_async(&src, &idx, out, &other).expect("launched"))
        .collect();
    gate.open();
    held.synchronize().expect("the held calls ran");
    for call in calls {
        call.wait().expect("in bounds: a record of its own");
    }
    // Later calls reuse the records of the dropped calls (now complete), zeroed again.
    for out in outs.iter_mut() {
        bounds::gather_async(&src, &idx, out, &other).expect("launched").wait().expect("in bounds");
    }
    let want: Vec<f32> = indices.iter().map(|&i| i as f32).collect();
    assert!(outs.iter().all(|out| dev.download(out) == want));
    assert!(short.iter().all(|x| dev.download(x) == [1.0f32; 5]));
    assert!(!gate.timed_out());
}

device_tests!(a_check_the_host_cannot_decide_fails_the_call_beside_one_it_decided);
fn a_check_the_host_cannot_decide_fails_the_call_beside_one_it_decided(dev: &TestDevice) {
    let mut x = dev.zeros::<f32, 1>([16]);
    let good: Vec<i32> = (0..16).collect();
    let idx = dev.upload(&good);
    bounds::fill_and_scatter(&mut x, &idx, 1.5).expect("all in bounds");
    assert_eq!(dev.download(&x), vec![1.5f32; 16]);
    // The host finds `x.at(p)` in bounds (16 elements); the scatter's index 99 is not.
    let mut bad = good.clone();
    bad[3] = 99;
    let idx = dev.upload(&bad);
    let (param, dim, index, extent, _) = out_of_bounds(bounds::fill_and_scatter(&mut x, &idx, 2.5));
    assert_eq!((param, dim, index, extent), ("x", Some(0), 99, 16));
}
