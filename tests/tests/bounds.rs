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
use choreo_tests::{TestDevice, device_tests};

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
