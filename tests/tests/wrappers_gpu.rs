//! GPU tests of the generated kernel wrappers (`choreo_tests::co`, from `co/*.co`): every
//! parameter kind, symbolic dimensions, shape errors before any launch, runtime checks,
//! synchronous vs asynchronous semantics, two streams overlapping, `then`, `.await`, and
//! `mem::forget` of a guard (run the binary under `compute-sanitizer --tool memcheck` too).
//! Results are checked against CPU references on fresh random data; outputs are poisoned first.
//!
//! All but one are `#[ignore]`d: run them with `--ignored` on a machine with a GPU. Without a
//! GPU, or when the kernels were not compiled (stub build), they fail with a message saying so;
//! they never pass vacuously. Timing assertions are skipped when `CHOREO_TEST_SANITIZER` is set
//! (serialised execution under compute-sanitizer).
//!
//! `shape_errors_come_before_any_cuda_call` needs the compiled kernels but no GPU: the shape
//! checks of a wrapper with only host data run before its first CUDA call.

use std::future::IntoFuture;
use std::pin::pin;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use choreo::{
    DeviceRepr, DeviceTensor, Error, HostTensor, HostView, HostViewMut, Stream, bf16, f16,
};
use choreo_tests::co::{kinds, seed, timing};
use choreo_tests::{
    CO_KERNELS_BUILT, Random, assert_no_deferred_error, block_on, serialized_execution,
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

/// Fails the test unless a GPU and the compiled kernels are available; serialises GPU tests.
fn require_gpu() -> MutexGuard<'static, ()> {
    require_kernels();
    let guard = GPU_TESTS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Err(error) = choreo::init() {
        panic!("this test needs a CUDA GPU: {error}");
    }
    guard
}

fn upload<T: DeviceRepr>(data: &[T]) -> DeviceTensor<T, 1> {
    DeviceTensor::from_host(&Stream::default_stream(), data.into()).expect("upload")
}

fn download<T: DeviceRepr>(tensor: &DeviceTensor<T, 1>) -> Vec<T> {
    tensor.to_host(&Stream::default_stream()).expect("download").into_vec()
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

/// Loop iterations of the spin kernels per millisecond on this GPU (measured once, with
/// events, on a synchronous spin of one block).
fn iterations_per_ms() -> f64 {
    static RATE: OnceLock<f64> = OnceLock::new();
    *RATE.get_or_init(|| {
        let stream = Stream::new().unwrap();
        let mut out = DeviceTensor::<u32, 1>::zeros([1]).unwrap();
        let mut sink = DeviceTensor::<u32, 1>::zeros([1]).unwrap();
        // Warm-up (module loading), then a measured run.
        timing::spin_sync(&stream, &mut out, &mut sink, 1000, 0).unwrap();
        let iters = 2_000_000;
        let start = stream.record_event().unwrap();
        timing::spin_sync(&stream, &mut out, &mut sink, iters, 0).unwrap();
        let end = stream.record_event().unwrap();
        end.synchronize().unwrap();
        let ms = f64::from(start.elapsed_ms(&end).unwrap()).max(0.01);
        let rate = f64::from(iters) / ms;
        println!("spin kernels: {rate:.0} iterations per ms");
        rate
    })
}

/// Iterations for a spin of about `ms` milliseconds (longer under compute-sanitizer scaling,
/// see `CHOREO_TEST_SPIN_SCALE`).
fn iterations_for(ms: f64) -> i32 {
    let scale = std::env::var("CHOREO_TEST_SPIN_SCALE")
        .ok()
        .and_then(|text| text.parse::<f64>().ok())
        .unwrap_or(1.0)
        .max(1.0);
    (iterations_per_ms() * ms * scale).clamp(1.0, f64::from(i32::MAX)) as i32
}

/// Milliseconds between two events.
fn elapsed_ms(start: &choreo::Event, end: &choreo::Event) -> f64 {
    end.synchronize().unwrap();
    f64::from(start.elapsed_ms(end).unwrap())
}

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

#[test]
#[ignore = "needs a CUDA GPU"]
fn synchronous_wrappers_have_finished_when_they_return() {
    let _gpu = require_gpu();
    let stream = Stream::new().unwrap();
    let iters = iterations_for(50.0);
    let mut out = upload(&[0u32; 4]);
    let mut sink = upload(&[0u32; 4]);
    timing::spin_sync(&stream, &mut out, &mut sink, iters, 11).unwrap();
    assert!(stream.query().unwrap(), "the stream still has work");
    assert!(out.buffer().is_idle().unwrap(), "`out` still has pending accesses");
    assert_eq!(download(&out), vec![11; 4]);
    assert_eq!(download(&sink), vec![lcg(1, iters); 4]);
    // The seed's synchronous function.
    let a = vec![1.0f32; 100];
    seed::bar(&stream, a.as_slice().into()).unwrap();
    assert!(stream.query().unwrap());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn asynchronous_wrappers_return_before_the_work_is_done() {
    let _gpu = require_gpu();
    let stream = Stream::new().unwrap();
    let iters = iterations_for(50.0);
    let mut out = upload(&[0u32; 4]);
    let mut sink = upload(&[0u32; 4]);
    let started = Instant::now();
    let pending = timing::spin_async(&stream, &mut out, &mut sink, iters, 7).unwrap();
    let returned_after = started.elapsed();
    let complete = pending.is_complete().unwrap();
    if !serialized_execution() {
        assert!(!complete, "a ~50 ms kernel finished before the wrapper returned");
        assert!(returned_after < Duration::from_millis(25), "returned after {returned_after:?}");
    }
    pending.wait().unwrap();
    assert_eq!(download(&out), vec![7; 4]);
    assert_eq!(download(&sink), vec![lcg(1, iters); 4]);
    // A scalar result of an asynchronous function is delivered by the guard.
    let pending = timing::spin_count(&stream, &mut out, 1000).unwrap();
    assert_eq!(pending.wait().unwrap(), 8);
    assert_no_deferred_error();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn two_streams_run_concurrently() {
    let _gpu = require_gpu();
    let (s0, s1) = (Stream::new().unwrap(), Stream::new().unwrap());
    let iters = iterations_for(20.0);
    let mut a = upload(&[0u32; 2]);
    let mut b = upload(&[0u32; 2]);
    let mut sink = upload(&[0u32; 2]);
    // One spin alone.
    timing::spin_sync(&s0, &mut a, &mut sink, 1000, 0).unwrap();
    let start = s0.record_event().unwrap();
    timing::spin_sync(&s0, &mut a, &mut sink, iters, 0).unwrap();
    let end = s0.record_event().unwrap();
    let one = elapsed_ms(&start, &end);
    // Two spins of the same length on two streams, started together.
    let start = s0.record_event().unwrap();
    s1.wait_event(&start).unwrap();
    let pending = timing::spin_two(&s0, &s1, &mut a, &mut b, iters).unwrap();
    let end0 = s0.record_event().unwrap();
    let end1 = s1.record_event().unwrap();
    pending.wait().unwrap();
    let both = elapsed_ms(&start, &end0).max(elapsed_ms(&start, &end1));
    println!("one spin: {one:.2} ms, two spins on two streams: {both:.2} ms");
    if !serialized_execution() {
        assert!(both < 1.5 * one, "no overlap: one spin {one:.2} ms, two {both:.2} ms");
    }
    assert_eq!(download(&a), vec![lcg(1, iters); 2]);
    assert_eq!(download(&b), vec![lcg(7, iters); 2]);
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
    let iters = iterations_for(30.0);
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

#[test]
#[ignore = "needs a CUDA GPU"]
fn then_orders_another_stream_after_the_work() {
    let _gpu = require_gpu();
    let (s0, s1) = (Stream::new().unwrap(), Stream::new().unwrap());
    let mut out = upload(&[0u32; 4]);
    let mut sink = upload(&[0u32; 4]);
    let pending = timing::spin_async(&s0, &mut out, &mut sink, iterations_for(50.0), 3).unwrap();
    pending.then(&s1).unwrap();
    let mut marker = choreo::Event::new().unwrap();
    marker.record(&s1).unwrap();
    if !serialized_execution() {
        assert!(!marker.query().unwrap(), "s1 did not wait for the spin");
    }
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
        let pending = timing::spin_inout(acc.as_mut_slice().into(), iterations_for(20.0)).unwrap();
        let mut future = pin!(pending.into_future());
        let (result, polls) = block_on(future.as_mut(), Duration::from_secs(20));
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
    let iters = iterations_for(50.0);
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
