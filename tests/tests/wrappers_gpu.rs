//! GPU tests of the generated kernel wrappers (`choreo_tests::co`, from `co/*.co`): every
//! parameter kind, symbolic dimensions, shape errors before any launch, runtime checks,
//! synchronous vs asynchronous semantics, two streams overlapping, `then`, `.await`, and
//! `mem::forget` of a guard. Results are checked against CPU references on fresh random data;
//! outputs are poisoned first.
//!
//! All but one are `#[ignore]`d: run them with `--ignored` on a machine with a GPU, and under
//! compute-sanitizer with `SANITIZE=all gpu-bundle/run-all` (see ci/bundle-gpu-tests). Without
//! a GPU, or when the kernels were not compiled (stub build), they fail with a message saying
//! so; they never pass vacuously. No check depends on how fast anything runs: work is held
//! back with gates that only the host opens, and orderings are read from the device (stream
//! and event queries, event timestamps compared with each other), so the tests pass unchanged
//! under the sanitizer's slowdown.
//!
//! `shape_errors_come_before_any_cuda_call` needs the compiled kernels but no GPU: the shape
//! checks of a wrapper with only host data run before its first CUDA call.

use std::future::IntoFuture;
use std::pin::pin;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use choreo::{
    DeviceBuffer, DeviceTensor, Error, HostTensor, HostView, HostViewMut, Stream, bf16, f16,
};
use choreo_tests::co::{kinds, seed, timing};
use choreo_tests::{
    CO_KERNELS_BUILT, Gate, KERNELS_BUILT, Random, assert_no_deferred_error, block_on,
    concurrent_kernels, download, spin_then_write, upload, wait_then_write, warm_up_kernels,
};

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// Serialises the GPU tests of this binary (timing tests must not share the GPU).
static GPU_TESTS: Mutex<()> = Mutex::new(());

/// Fails the test unless the kernels were compiled.
fn require_kernels() {
    if !CO_KERNELS_BUILT {
        panic!(
            "the Choreo test kernels were not compiled (stub build: no nvcc when choreo-tests \
             was built); the wrappers only return Error::NotBuilt"
        );
    }
}

/// Fails the test unless a GPU and the compiled kernels (the Choreo ones and the hand-written
/// test kernels) are available; serialises GPU tests.
fn require_gpu() -> MutexGuard<'static, ()> {
    require_kernels();
    if !KERNELS_BUILT {
        panic!(
            "the hand-written test kernels were not built (no nvcc when choreo-tests was built)"
        );
    }
    let guard = GPU_TESTS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Err(error) = choreo::init() {
        panic!("this test needs a CUDA GPU: {error}");
    }
    // Loads the hand-written kernels before a test holds one at a gate (see the function).
    static WARM_UP: OnceLock<Result<(), String>> = OnceLock::new();
    let warm_up = WARM_UP.get_or_init(|| warm_up_kernels().map_err(|error| error.to_string()));
    if let Err(error) = warm_up {
        panic!("the test kernels do not run: {error}");
    }
    guard
}

#[track_caller]
fn assert_close(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        // The device may contract `a * b + c` into one fused multiply-add.
        let tolerance = 1e-5 * w.abs().max(1.0);
        assert!((g - w).abs() <= tolerance, "{what}[{i}]: got {g}, expected {w}");
    }
}

/// The LCG of the spin kernels, `iters` steps from `start`.
fn lcg(start: u32, iters: i32) -> u32 {
    (0..iters).fold(start, |x, _| x.wrapping_mul(1664525).wrapping_add(1013904223))
}

/// Iterations of the spin kernels for long work: 2^25 dependent steps of the LCG, tens of
/// milliseconds on an H200. Long spins make ordering mistakes show; no check depends on their
/// length except where a test says so.
const LONG_SPIN: i32 = 1 << 25;

/// Iterations of the spin kernels for work whose length does not matter.
const SHORT_SPIN: i32 = 1000;

// ---------------------------------------------------------------------------------------------
// Parameter kinds and results
// ---------------------------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_parameter_kind_matches_the_cpu_reference() {
    let _gpu = require_gpu();
    let mut random = Random::fresh("every_parameter_kind");
    let stream = Stream::new().unwrap();
    for flip in [false, true] {
        let n = 500 + random.below(1500);
        let x = random.f32s(n);
        let acc_before = random.f32s(n);
        let g_host = random.f32s(n);
        let k = random.next_f32() * 4.0;
        let h = f16::from_f32(random.next_f32());
        let hb = bf16::from_f32(random.next_f32());
        let unnamed_data = [random.next_u32() as i32; 4];
        let unnamed_scalar = random.next_u32() as i32;

        let g = upload(&g_host);
        let mut out = upload(&vec![f32::NAN; n]);
        let mut acc = acc_before.clone();
        let returned = kinds::kinds(
            x.as_slice().into(),
            acc.as_mut_slice().into(),
            &g,
            &mut out,
            k,
            h,
            hb,
            flip,
            unnamed_data.as_slice().into(),
            unnamed_scalar,
            &stream,
        )
        .unwrap();

        let v: Vec<f32> = (0..n)
            .map(|i| {
                let v = x[i] * k + g_host[i];
                if flip { -v } else { v }
            })
            .collect();
        let acc_want: Vec<f32> = (0..n).map(|i| acc_before[i] + v[i]).collect();
        let out_want: Vec<f32> = (0..n).map(|i| h.to_f32() + hb.to_f32() * v[i]).collect();
        let ret_want: Vec<f32> = v.iter().map(|v| v * 2.0).collect();
        assert_close("acc (copied back)", &acc, &acc_want);
        assert_close("out (global, written)", &download(&out), &out_want);
        assert_eq!(returned.shape(), [n]);
        assert_close("returned", returned.as_slice(), &ret_want);
        assert_eq!(download(&g), g_host, "a read-only global must not change");
    }
    assert_no_deferred_error();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn scalars_cross_the_c_abi_exactly() {
    let _gpu = require_gpu();
    let mut random = Random::fresh("scalars");
    for negate in [false, true] {
        let (a, b, c) =
            (random.next_u32() as i8, random.next_u32() as i16, random.next_u32() as i32);
        let d = (random.next_u64() >> 12) as i64 - (1 << 50);
        let (e, f, g) = (random.next_u32() as u8, random.next_u32() as u16, random.next_u32());
        let h = random.next_u64() >> 12;
        let (i, j) = (random.next_f32(), f64::from(random.next_f32()) * 1e6);
        let (k, l) = (f16::from_f32(random.next_f32()), bf16::from_f32(random.next_f32()));
        let got = kinds::scalars(a, b, c, d, e, f, g, h, i, j, k, l, negate).unwrap();
        // The same operations in the same order as the `.co` body.
        let mut want = f64::from(a) + f64::from(b) + f64::from(c) + d as f64;
        want = want + f64::from(e) + f64::from(f) + f64::from(g) + h as f64;
        want = want + f64::from(i) + j + f64::from(k.to_f32()) + f64::from(l.to_f32());
        if negate {
            want = -want;
        }
        assert_eq!(got.to_bits(), want.to_bits(), "scalars: got {got}, expected {want}");
    }
    let (p, q) = (f16::from_f32(random.next_f32()), f16::from_f32(random.next_f32()));
    assert_eq!(kinds::pick_h(p, q, true).unwrap().to_bits(), p.to_bits());
    assert_eq!(kinds::pick_h(p, q, false).unwrap().to_bits(), q.to_bits());
    let (p, q) = (bf16::from_f32(random.next_f32()), bf16::from_f32(random.next_f32()));
    assert_eq!(kinds::pick_bf(p, q, true).unwrap().to_bits(), p.to_bits());
    assert_eq!(kinds::pick_bf(p, q, false).unwrap().to_bits(), q.to_bits());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn host_data_of_rank_two_and_inout_data() {
    let _gpu = require_gpu();
    let mut random = Random::fresh("gemv");
    let (m, n) = (1 + random.below(300), 1 + random.below(300));
    let a = random.f32s(m * n);
    let x = random.f32s(n);
    let y_before = random.f32s(m);
    let mut y = y_before.clone();
    kinds::gemv(HostView::new(&a, [m, n]).unwrap(), x.as_slice().into(), y.as_mut_slice().into())
        .unwrap();
    let want: Vec<f32> = (0..m)
        .map(|row| {
            let sum: f32 = (0..n).map(|col| a[row * n + col] * x[col]).sum();
            y_before[row] + sum
        })
        .collect();
    // Sums of up to 300 products: allow for a different summation rounding.
    for (row, (&got, &want)) in y.iter().zip(&want).enumerate() {
        assert!((got - want).abs() <= 1e-3 * want.abs().max(1.0), "y[{row}]: {got} vs {want}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn symbolic_dimensions_bind_and_shape_the_result() {
    let _gpu = require_gpu();
    let mut random = Random::fresh("matmul");
    let (m, n, k) = (1 + random.below(40), 1 + random.below(40), 1 + random.below(40));
    let a = HostTensor::new(random.f32s(m * n), [m, n]).unwrap();
    let b = HostTensor::new(random.f32s(n * k), [n, k]).unwrap();
    let c = kinds::matmul((&a).into(), (&b).into()).unwrap();
    assert_eq!(c.shape(), [m, k]);
    for row in 0..m {
        for col in 0..k {
            let want: f32 = (0..n).map(|i| a[[row, i]] * b[[i, col]]).sum();
            let got = c[[row, col]];
            assert!((got - want).abs() <= 1e-4 * want.abs().max(1.0), "c[{row},{col}]");
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn derived_and_passed_through_returns() {
    let _gpu = require_gpu();
    let mut random = Random::fresh("returns");
    for n in [1usize, 2, 7, 8, 1001] {
        let data: Vec<i32> = (0..n).map(|_| random.next_u32() as i32).collect();
        let v = upload(&data);
        let halves = kinds::halve(&v).unwrap();
        assert_eq!(halves.shape(), [n.div_ceil(2)], "cdiv(N, 2) for N = {n}");
        let want: Vec<i32> = data.iter().step_by(2).copied().collect();
        assert_eq!(halves.as_slice(), want.as_slice());
        let copy = kinds::copy_out(&v).unwrap();
        assert_eq!(copy.as_slice(), data.as_slice());
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn global_data_is_read_and_written_in_place() {
    let _gpu = require_gpu();
    let mut random = Random::fresh("axpy");
    let n = 1 + random.below(10_000);
    let (x_host, y_host, a) = (random.f32s(n), random.f32s(n), random.next_f32());
    let x = upload(&x_host);
    let mut y = upload(&y_host);
    kinds::axpy(&x, &mut y, a).unwrap();
    let want: Vec<f32> = (0..n).map(|i| a * x_host[i] + y_host[i]).collect();
    assert_close("y", &download(&y), &want);
    assert_eq!(download(&x), x_host);
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

#[test]
#[ignore = "needs a CUDA GPU"]
fn shape_mismatches_fail_before_anything_is_launched() {
    let _gpu = require_gpu();
    let stream = Stream::new().unwrap();
    let n = 64;
    let x = vec![1.0f32; n];
    let g = upload(&vec![1.0f32; n]);
    let poison = vec![f32::NAN; n];
    let mut out = upload(&poison);
    let call = |acc: &mut [f32], unnamed: &[i32], out: &mut DeviceTensor<f32, 1>| {
        kinds::kinds(
            x.as_slice().into(),
            acc.into(),
            &g,
            out,
            1.0,
            f16::ONE,
            bf16::ONE,
            false,
            unnamed.into(),
            0,
            &stream,
        )
    };
    // A repeated symbolic dimension: `acc` is `f32 [N] &`, N bound from `x`.
    let mut short = vec![5.0f32; n - 1];
    match call(&mut short, &[0; 4], &mut out) {
        Err(Error::Shape { param: "acc", dim: 0, expected, got }) => {
            assert_eq!((expected, got), (n, n - 1));
        }
        other => panic!("expected a shape error for `acc`, got {other:?}"),
    }
    assert!(short.iter().all(|&v| v == 5.0), "`acc` must not be written");
    // A constant extent: the unnamed `s32 [4]`.
    let mut acc = vec![5.0f32; n];
    match call(&mut acc, &[0; 5], &mut out) {
        Err(Error::Shape { param: "anon_0", dim: 0, expected: 4, got: 5 }) => {}
        other => panic!("expected a shape error for `anon_0`, got {other:?}"),
    }
    choreo::Device::current().unwrap().synchronize().unwrap();
    let after: Vec<u32> = download(&out).iter().map(|v| v.to_bits()).collect();
    let before: Vec<u32> = poison.iter().map(|v| v.to_bits()).collect();
    assert_eq!(after, before, "nothing may have been launched");
    // Symbols bound from different parameters (`N` of matmul: columns of `a`, rows of `b`).
    let a = HostTensor::new(vec![1.0f32; 6], [2, 3]).unwrap();
    let b = HostTensor::new(vec![1.0f32; 8], [4, 2]).unwrap();
    match kinds::matmul((&a).into(), (&b).into()) {
        Err(Error::Shape { param: "b", dim: 0, expected: 3, got: 4 }) => {}
        other => panic!("expected a shape error for `b`, got {other:?}"),
    }
}

#[test]
fn shape_errors_come_before_any_cuda_call() {
    require_kernels();
    let a = HostTensor::new(vec![1.0f32; 6], [2, 3]).unwrap();
    let b = HostTensor::new(vec![1.0f32; 10], [5, 2]).unwrap();
    match kinds::matmul((&a).into(), (&b).into()) {
        Err(Error::Shape { param: "b", dim: 0, expected: 3, got: 5 }) => {}
        other => panic!("expected a shape error for `b`, got {other:?}"),
    }
    let x = [1.0f32; 2];
    let mut y = [0.0f32; 2];
    match kinds::gemv((&a).into(), x.as_slice().into(), y.as_mut_slice().into()) {
        Err(Error::Shape { param: "x", dim: 0, expected: 3, got: 2 }) => {}
        other => panic!("expected a shape error for `x`, got {other:?}"),
    }
    assert_eq!(y, [0.0; 2]);
    // With valid shapes the call reaches CUDA: without a GPU that is an error, never a panic
    // or an abort; with one, the result is right.
    let b = HostTensor::new(vec![2.0f32; 6], [3, 2]).unwrap();
    match kinds::matmul((&a).into(), (&b).into()) {
        Ok(c) => assert_eq!(c.as_slice(), &[6.0; 4]),
        Err(error) => assert!(error.is_no_gpu(), "unexpected error without a GPU: {error}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn failed_runtime_checks_are_errors_not_aborts() {
    let _gpu = require_gpu();
    let mut out = upload(&[-1i32; 16]);
    match kinds::fill(&mut out, 0, 9) {
        Err(Error::RuntimeCheck { function: "fill", message }) => {
            assert!(message.contains("kinds.co"), "the message names the .co file: {message}");
        }
        other => panic!("expected a failed runtime check, got {other:?}"),
    }
    assert_eq!(download(&out), vec![-1; 16], "nothing may have been launched");
    kinds::fill(&mut out, 16, 9).unwrap();
    assert_eq!(download(&out), vec![9; 16]);
}

// ---------------------------------------------------------------------------------------------
// Synchronous and asynchronous semantics
// ---------------------------------------------------------------------------------------------

/// A synchronous wrapper returns only once its work is done. Ahead of it on the same stream, a
/// hand-written kernel busy-waits 300 ms of device time: a wrapper that returned without
/// waiting would find its stream still busy for that long.
#[test]
#[ignore = "needs a CUDA GPU"]
fn synchronous_wrappers_have_finished_when_they_return() {
    let _gpu = require_gpu();
    let stream = Stream::new().unwrap();
    let mut out = upload(&[0u32; 4]);
    let mut sink = upload(&[0u32; 4]);
    let mut ahead = DeviceBuffer::<u32>::zeroed(1).unwrap();
    spin_then_write(&stream, &mut ahead, Duration::from_millis(300), 1).unwrap();
    timing::spin_sync(&stream, &mut out, &mut sink, SHORT_SPIN, 11).unwrap();
    assert!(stream.query().unwrap(), "the stream still has work");
    assert!(out.buffer().is_idle().unwrap(), "`out` still has pending accesses");
    assert!(ahead.is_idle().unwrap(), "the work ahead of the call is not done");
    assert_eq!(download(&out), vec![11; 4]);
    assert_eq!(download(&sink), vec![lcg(1, SHORT_SPIN); 4]);
    // The seed's synchronous function.
    spin_then_write(&stream, &mut ahead, Duration::from_millis(300), 2).unwrap();
    let a = vec![1.0f32; 100];
    seed::bar(&stream, a.as_slice().into()).unwrap();
    assert!(stream.query().unwrap());
}

/// Runs `timing::spin_async` once (and waits), so that its kernel is loaded. With CUDA's lazy
/// module loading (the default), the first launch of a kernel loads its module, and loading
/// waits for the kernels already running on the device: a first call made while a gated kernel
/// holds the device would block until the gate times out. (Each GPU test runs in a process of
/// its own, so no earlier test has loaded it.)
fn load_spin_async(
    stream: &Stream,
    out: &mut DeviceTensor<u32, 1>,
    sink: &mut DeviceTensor<u32, 1>,
) {
    timing::spin_async(stream, out, sink, 1, 0).unwrap().wait().unwrap();
}

/// An asynchronous wrapper returns while its work is still to run: its stream is held by a
/// gated kernel that only the host opens, so the work cannot finish before the wrapper
/// returns (a wrapper that waited would hang until the gate timed out).
#[test]
#[ignore = "needs a CUDA GPU"]
fn asynchronous_wrappers_return_before_the_work_is_done() {
    let _gpu = require_gpu();
    let stream = Stream::new().unwrap();
    let mut out = upload(&[0u32; 4]);
    let mut sink = upload(&[0u32; 4]);
    load_spin_async(&stream, &mut out, &mut sink);
    let gate = Gate::closed().unwrap();
    let mut held = DeviceBuffer::<u32>::zeroed(1).unwrap();
    wait_then_write(&stream, &gate, &mut held, 1).unwrap();
    let pending = timing::spin_async(&stream, &mut out, &mut sink, SHORT_SPIN, 7).unwrap();
    assert!(!gate.timed_out(), "the wrapper waited for the device");
    assert!(!pending.is_complete().unwrap(), "the work finished before its stream was released");
    gate.open();
    pending.wait().unwrap();
    assert_eq!(download(&out), vec![7; 4]);
    assert_eq!(download(&sink), vec![lcg(1, SHORT_SPIN); 4]);
    // A scalar result of an asynchronous function is delivered by the guard.
    let pending = timing::spin_count(&stream, &mut out, 1000).unwrap();
    assert_eq!(pending.wait().unwrap(), 8);
    assert_no_deferred_error();
}

/// The two launches of `spin_pair` (stream `s0` and stream `s1`) do not wait for each other:
/// with a long spin on one stream and a one-step spin on the other, the short one finishes
/// first, in both arrangements; had one stream waited for the other, the short spin would end
/// after the long one whenever it is on the waiting stream. The end of each stream is an event
/// timestamp (device time), compared with the other: a relative order, not a duration. Both
/// streams start from one event, so neither starts early.
///
/// Overlap needs a device that runs kernels of two streams at the same time, which this
/// process first asks of it (`concurrent_kernels`); a device that runs one kernel at a time
/// (compute-sanitizer) cannot show it, and then only the results are checked.
#[test]
#[ignore = "needs a CUDA GPU"]
fn two_streams_run_concurrently() {
    let _gpu = require_gpu();
    let (s0, s1) = (Stream::new().unwrap(), Stream::new().unwrap());
    let mut a = upload(&[0u32; 2]);
    let mut b = upload(&[0u32; 2]);
    let concurrent = concurrent_kernels().unwrap();
    for (iters_a, iters_b) in [(LONG_SPIN, 1), (1, LONG_SPIN)] {
        let start = s0.record_event().unwrap();
        s1.wait_event(&start).unwrap();
        let pending = timing::spin_pair(&s0, &s1, &mut a, &mut b, iters_a, iters_b).unwrap();
        let end0 = s0.record_event().unwrap();
        let end1 = s1.record_event().unwrap();
        pending.wait().unwrap();
        end0.synchronize().unwrap();
        end1.synchronize().unwrap();
        let (t0, t1) = (start.elapsed_ms(&end0).unwrap(), start.elapsed_ms(&end1).unwrap());
        println!("s0 spins {iters_a}, s1 spins {iters_b}: s0 ends at {t0:.3} ms, s1 at {t1:.3} ms");
        if concurrent {
            if iters_a > iters_b {
                assert!(t1 < t0, "s1's short spin ended after s0's long one: s1 waited for s0");
            } else {
                assert!(t0 < t1, "s0's short spin ended after s1's long one: s0 waited for s1");
            }
        }
        assert_eq!(download(&a), vec![lcg(1, iters_a); 2]);
        assert_eq!(download(&b), vec![lcg(7, iters_b); 2]);
    }
    // The seed itself (its results stay on the device; it must run and complete).
    let mut random = Random::fresh("seed");
    let (x, y) = (random.f32s(1000), random.f32s(300));
    seed::foo(&s0, &s1, x.as_slice().into(), y.as_slice().into()).unwrap().wait().unwrap();
    assert_no_deferred_error();
}

/// A call whose kernels run on two streams records its writes with one event per stream (shared
/// by all its tensors and its guard); a read on a third stream must wait for both, without the
/// host waiting for anything.
#[test]
#[ignore = "needs a CUDA GPU"]
fn tensors_written_on_two_streams_are_read_after_both_writes() {
    let _gpu = require_gpu();
    let (s0, s1, s2) = (Stream::new().unwrap(), Stream::new().unwrap(), Stream::new().unwrap());
    let iters = LONG_SPIN / 4;
    for round in 0..3 {
        let mut a = upload(&[0u32; 2]);
        let mut b = upload(&[0u32; 2]);
        // Kernel 0 (on s0) writes `a`, kernel 1 (on s1) writes `b`: the copies on s2 and s0
        // must wait for the kernel on the other stream.
        let pending = timing::spin_two(&s0, &s1, &mut a, &mut b, iters + round).unwrap();
        drop(pending);
        let b_on_s2 = b.to_host(&s2).unwrap();
        let a_on_s1 = a.to_host(&s1).unwrap();
        assert_eq!(b_on_s2.as_slice(), [lcg(7, iters + round); 2], "round {round}: b read early");
        assert_eq!(a_on_s1.as_slice(), [lcg(1, iters + round); 2], "round {round}: a read early");
    }
    // Many short calls reuse pooled events; results stay exact.
    let mut out = upload(&[0u32; 64]);
    let mut sink = upload(&[0u32; 64]);
    for value in 0..2000u32 {
        drop(timing::spin_async(&s0, &mut out, &mut sink, 1, value).unwrap());
        if value % 500 == 499 {
            assert_eq!(out.to_host(&s2).unwrap().as_slice(), [value; 64]);
        }
    }
    assert_no_deferred_error();
}

/// `then` makes another stream wait for a guard's work without blocking the host: the work is
/// held behind a gated kernel that only the host opens, so a marker on the other stream cannot
/// complete before the gate opens.
#[test]
#[ignore = "needs a CUDA GPU"]
fn then_orders_another_stream_after_the_work() {
    let _gpu = require_gpu();
    let (s0, s1) = (Stream::new().unwrap(), Stream::new().unwrap());
    let mut out = upload(&[0u32; 4]);
    let mut sink = upload(&[0u32; 4]);
    load_spin_async(&s0, &mut out, &mut sink);
    let gate = Gate::closed().unwrap();
    let mut held = DeviceBuffer::<u32>::zeroed(1).unwrap();
    wait_then_write(&s0, &gate, &mut held, 1).unwrap();
    let pending = timing::spin_async(&s0, &mut out, &mut sink, SHORT_SPIN, 3).unwrap();
    pending.then(&s1).unwrap();
    let mut marker = choreo::Event::new().unwrap();
    marker.record(&s1).unwrap();
    assert!(!marker.query().unwrap(), "s1 did not wait for the work");
    assert!(!gate.timed_out(), "`then` or the wrapper waited for the device");
    gate.open();
    marker.synchronize().unwrap();
    assert!(pending.is_complete().unwrap(), "s1 passed the marker before the work was done");
    pending.wait().unwrap();
    assert_eq!(download(&out), vec![3; 4]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn awaiting_a_guard_delivers_inout_data_and_the_result() {
    let _gpu = require_gpu();
    let mut random = Random::fresh("await");
    let n = 1 + random.below(500);
    let before = random.f32s(n);
    let mut acc = before.clone();
    let twice = {
        let pending = timing::spin_inout(acc.as_mut_slice().into(), LONG_SPIN).unwrap();
        let mut future = pin!(pending.into_future());
        // `block_on` fails if the device finishes without the future's waker being called.
        let (result, polls) = block_on(future.as_mut());
        println!("awaited in {polls} polls");
        result.unwrap()
    };
    let want_acc: Vec<f32> = before.iter().map(|v| v + 1.0).collect();
    let want_twice: Vec<f32> = want_acc.iter().map(|v| v * 2.0).collect();
    assert_close("acc", &acc, &want_acc);
    assert_close("returned", twice.as_slice(), &want_twice);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn forgetting_a_guard_then_dropping_its_buffers_is_safe() {
    let _gpu = require_gpu();
    let stream = Stream::new().unwrap();
    let iters = LONG_SPIN;
    let mut out = upload(&[0u32; 256]);
    let mut sink = upload(&[0u32; 256]);
    let pending = timing::spin_async(&stream, &mut out, &mut sink, iters, 5).unwrap();
    std::mem::forget(pending);
    // The kernel still runs: the buffers must stay allocated until it is done.
    drop(out);
    drop(sink);
    // New allocations (which may reuse freed memory) and work on them give correct results.
    let mut random = Random::fresh("forget");
    for _ in 0..4 {
        let x_host = random.f32s(256);
        let x = upload(&x_host);
        let mut y = upload(&[0.0f32; 256]);
        kinds::axpy(&x, &mut y, 1.0).unwrap();
        assert_close("y after forget", &download(&y), &x_host);
    }
    // A forgotten guard never writes into the caller's memory.
    let before = random.f32s(64);
    let mut acc = before.clone();
    let pending = timing::spin_inout(acc.as_mut_slice().into(), iters).unwrap();
    std::mem::forget(pending);
    choreo::Device::current().unwrap().synchronize().unwrap();
    assert_eq!(acc, before, "a forgotten guard must not copy back");
    assert_no_deferred_error();
}

/// Host views accept every documented source.
#[test]
#[ignore = "needs a CUDA GPU"]
fn views_convert_from_slices_vectors_and_tensors() {
    let _gpu = require_gpu();
    let x = vec![2.0f32; 8];
    let mut y = HostTensor::new(vec![1.0f32; 8], [8]).unwrap();
    let a = [1.0f32; 64];
    kinds::gemv(HostView::new(&a, [8, 8]).unwrap(), (&x).into(), HostViewMut::from(&mut y))
        .unwrap();
    assert!(y.as_slice().iter().all(|&v| v == 17.0), "{:?}", y.as_slice());
}
