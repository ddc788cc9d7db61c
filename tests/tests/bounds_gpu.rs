//! Element accesses that the compiler cannot prove in bounds are checked at run time
//! (`tests/co/bounds.co`): an access that fails is skipped — no memory outside the buffers is
//! read or written (run this binary under `compute-sanitizer --tool memcheck` to see it) — and
//! the call returns `Error::OutOfBounds` naming the buffer, the dimension, the index, the extent
//! and the `.co` location; for an asynchronous function, `wait()` does.

use choreo::{DeviceTensor, Error, Stream};
use choreo_tests::CO_KERNELS_BUILT;
use choreo_tests::co::bounds;

fn require_gpu() -> Stream {
    if !CO_KERNELS_BUILT {
        panic!("the Choreo test kernels were not compiled (stub build)");
    }
    choreo::init().unwrap_or_else(|error| panic!("this test needs a CUDA GPU: {error}"));
    Stream::new().expect("a stream")
}

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

#[test]
#[ignore = "needs a CUDA GPU"]
fn writes_within_the_extent_succeed_and_the_others_fail_the_call() {
    let stream = require_gpu();
    let mut exact = DeviceTensor::<f32, 1>::zeros_on(&stream, [16]).expect("alloc");
    bounds::fill16(&mut exact, 2.5).expect("16 writes into 16 elements");
    assert_eq!(exact.to_host(&stream).expect("download").into_vec(), vec![2.5f32; 16]);

    let mut short = DeviceTensor::<f32, 1>::zeros_on(&stream, [8]).expect("alloc");
    let (param, dim, index, extent, location) = out_of_bounds(bounds::fill16(&mut short, 1.0));
    assert_eq!((param, dim, extent), ("x", Some(0), 8));
    assert!((8..16).contains(&index), "the first failing index is one of 8..16: {index}");
    assert!(location.ends_with("bounds.co:7:30"), "{location}");
    // The writes in range happened; the others were skipped.
    assert_eq!(short.to_host(&stream).expect("download").into_vec(), vec![1.0f32; 8]);
    // The failure is the call's alone: the next call works.
    bounds::fill16(&mut exact, 3.0).expect("a later call");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn an_asynchronous_call_reports_the_violation_when_waited_for() {
    let stream = require_gpu();
    let mut short = DeviceTensor::<f32, 1>::zeros_on(&stream, [5]).expect("alloc");
    let pending = bounds::fill16_async(&mut short, 4.0, &stream).expect("launched");
    let (param, _, index, extent, _) = out_of_bounds(pending.wait());
    assert_eq!((param, extent), ("x", 5));
    assert!((5..16).contains(&index), "{index}");
    let mut exact = DeviceTensor::<f32, 1>::zeros_on(&stream, [16]).expect("alloc");
    bounds::fill16_async(&mut exact, 4.0, &stream).expect("launched").wait().expect("in bounds");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_gather_through_data_is_checked_per_read() {
    let stream = require_gpu();
    let src: Vec<f32> = (0..32).map(|i| i as f32).collect();
    let src = DeviceTensor::from_host(&stream, src.as_slice().into()).expect("upload");
    let good: Vec<i32> = (0..16).map(|i| 31 - i).collect();
    let idx = DeviceTensor::from_host(&stream, good.as_slice().into()).expect("upload");
    let mut out = DeviceTensor::<f32, 1>::zeros_on(&stream, [16]).expect("alloc");
    bounds::gather(&src, &idx, &mut out).expect("indices in range");
    let want: Vec<f32> = good.iter().map(|&i| i as f32).collect();
    assert_eq!(out.to_host(&stream).expect("download").into_vec(), want);

    let mut bad = good.clone();
    bad[9] = -4;
    let idx = DeviceTensor::from_host(&stream, bad.as_slice().into()).expect("upload");
    let (param, dim, index, extent, _) = out_of_bounds(bounds::gather(&src, &idx, &mut out));
    assert_eq!((param, dim, index, extent), ("src", Some(0), -4, 32));
}
