//! Tests of the generated kernel wrappers (`choreo_tests::co`, from `co/*.co`): every
//! parameter kind, symbolic dimensions, shape errors before any launch, runtime checks,
//! synchronous vs asynchronous semantics, two streams overlapping, `then`, `.await`, and
//! `mem::forget` of a guard. Results are checked against references computed here on fresh
//! random data; outputs are poisoned first.
//!
//! Every test body runs twice (`choreo_tests::device_tests!`): `NAME::on_cpu` on the CPU device,
//! in every `cargo test` (CI included), and `NAME::on_gpu` on CUDA device 0, `#[ignore]`d: run
//! it with `--ignored` on a machine with a GPU, and under compute-sanitizer with
//! `SANITIZE=all gpu-bundle/run-all` (see ci/bundle-gpu-tests). Without a GPU, or when the
//! kernels were not compiled for CUDA (no nvcc), the GPU variants fail with a message saying
//! so; they never pass vacuously. No check depends on how fast anything runs: work is held
//! back with gates that only the host opens, and orderings are read from the device (stream
//! and event queries), so the tests pass unchanged under the sanitizer's slowdown and on two
//! shared cores.
//!
//! `shape_errors_come_before_any_launch` runs once, on the default device: the shape checks of
//! a wrapper with only host data run before it touches any device.

use std::future::IntoFuture;
use std::pin::pin;
use std::time::Duration;

use choreo::{DeviceTensor, Error, HostTensor, HostView, HostViewMut, Stream, bf16, f16};
use choreo_tests::co::{kinds, seed, timing};
use choreo_tests::{
    CO_KERNELS_ON_CPU, CO_KERNELS_ON_GPU, Random, TestDevice, assert_no_deferred_error,
    concurrent_kernels, device_tests, spin_then_write, wait_then_write,
};

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

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

/// Iterations of the spin kernels for long work: 2^25 dependent steps of the LCG on a GPU, tens
/// of milliseconds on an H200; 2^18 on the CPU (a fraction of a millisecond per block: the CPU runs the
/// blocks of a launch on a few threads, not on a hundred multiprocessors). Long spins make
/// ordering mistakes show; no check depends on their length.
fn long_spin(dev: &TestDevice) -> i32 {
    if dev.is_cpu() { 1 << 18 } else { 1 << 25 }
}

/// Iterations of the spin kernels for work whose length does not matter.
const SHORT_SPIN: i32 = 1000;

// ---------------------------------------------------------------------------------------------
// Parameter kinds and results
// ---------------------------------------------------------------------------------------------

device_tests!(every_parameter_kind_matches_the_cpu_reference);
fn every_parameter_kind_matches_the_cpu_reference(dev: &TestDevice) {
    let mut random = Random::fresh("every_parameter_kind");
    let stream = dev.stream();
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

        let g = dev.upload(&g_host);
        let mut out = dev.upload(&vec![f32::NAN; n]);
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
        assert_close("out (global, written)", &dev.download(&out), &out_want);
        assert_eq!(returned.shape(), [n]);
        assert_close("returned", returned.as_slice(), &ret_want);
        assert_eq!(dev.download(&g), g_host, "a read-only global must not change");
    }
    assert_no_deferred_error();
}

device_tests!(scalars_cross_the_c_abi_exactly);
fn scalars_cross_the_c_abi_exactly(_dev: &TestDevice) {
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

device_tests!(host_data_of_rank_two_and_inout_data);
fn host_data_of_rank_two_and_inout_data(_dev: &TestDevice) {
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

device_tests!(symbolic_dimensions_bind_and_shape_the_result);
fn symbolic_dimensions_bind_and_shape_the_result(_dev: &TestDevice) {
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

device_tests!(derived_and_passed_through_returns);
fn derived_and_passed_through_returns(dev: &TestDevice) {
    let mut random = Random::fresh("returns");
    for n in [1usize, 2, 7, 8, 1001] {
        let data: Vec<i32> = (0..n).map(|_| random.next_u32() as i32).collect();
        let v = dev.upload(&data);
        let halves = kinds::halve(&v).unwrap();
        assert_eq!(halves.shape(), [n.div_ceil(2)], "cdiv(N, 2) for N = {n}");
        let want: Vec<i32> = data.iter().step_by(2).copied().collect();
        assert_eq!(halves.as_slice(), want.as_slice());
        let copy = kinds::copy_out(&v).unwrap();
        assert_eq!(copy.as_slice(), data.as_slice());
    }
}

device_tests!(global_data_is_read_and_written_in_place);
fn global_data_is_read_and_written_in_place(dev: &TestDevice) {
    let mut random = Random::fresh("axpy");
    let n = 1 + random.below(10_000);
    let (x_host, y_host, a) = (random.f32s(n), random.f32s(n), random.next_f32());
    let x = dev.upload(&x_host);
    let mut y = dev.upload(&y_host);
    kinds::axpy(&x, &mut y, a).unwrap();
    let want: Vec<f32> = (0..n).map(|i| a * x_host[i] + y_host[i]).collect();
    assert_close("y", &dev.download(&y), &want);
    assert_eq!(dev.download(&x), x_host);
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

device_tests!(shape_mismatches_fail_before_anything_is_launched);
fn shape_mismatches_fail_before_anything_is_launched(dev: &TestDevice) {
    let stream = dev.stream();
    let n = 64;
    let x = vec![1.0f32; n];
    let g = dev.upload(&vec![1.0f32; n]);
    let poison = vec![f32::NAN; n];
    let mut out = dev.upload(&poison);
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
    dev.synchronize();
    let after: Vec<u32> = dev.download(&out).iter().map(|v| v.to_bits()).collect();
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
fn shape_errors_come_before_any_launch() {
    if !CO_KERNELS_ON_CPU && !CO_KERNELS_ON_GPU {
        panic!("the Choreo test kernels were not built for any device");
    }
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
    // With valid shapes the call runs on the default device (the CPU where there is no usable
    // GPU): the result is right, or, where the default device cannot run it (CHOREO_DEVICE=cuda
    // without a GPU, a build without the kernels for it), an error — never a panic or an abort.
    let b = HostTensor::new(vec![2.0f32; 6], [3, 2]).unwrap();
    match kinds::matmul((&a).into(), (&b).into()) {
        Ok(c) => assert_eq!(c.as_slice(), &[6.0; 4]),
        Err(error) => assert!(
            error.is_no_gpu() || matches!(error, Error::UnsupportedBackend { .. }),
            "unexpected error: {error}"
        ),
    }
}

device_tests!(failed_runtime_checks_are_errors_not_aborts);
fn failed_runtime_checks_are_errors_not_aborts(dev: &TestDevice) {
    let mut out = dev.upload(&[-1i32; 16]);
    match kinds::fill(&mut out, 0, 9) {
        Err(Error::RuntimeCheck { function: "fill", message }) => {
            assert!(message.contains("kinds.co"), "the message names the .co file: {message}");
        }
        other => panic!("expected a failed runtime check, got {other:?}"),
    }
    assert_eq!(dev.download(&out), vec![-1; 16], "nothing may have been launched");
    kinds::fill(&mut out, 16, 9).unwrap();
    assert_eq!(dev.download(&out), vec![9; 16]);
}

// ---------------------------------------------------------------------------------------------
// Synchronous and asynchronous semantics
// ---------------------------------------------------------------------------------------------

device_tests!(synchronous_wrappers_have_finished_when_they_return);
/// A synchronous wrapper returns only once its work is done. Ahead of it on the same stream, a
/// hand-written kernel waits 300 ms of device time (30 ms on the CPU, whose clock is the
/// host's): a wrapper that returned without waiting would find its stream still busy for that
/// long. (A longer wait only makes a mistake likelier to show; no check depends on it.)
fn synchronous_wrappers_have_finished_when_they_return(dev: &TestDevice) {
    let ahead_time = Duration::from_millis(if dev.is_cpu() { 30 } else { 300 });
    let stream = dev.stream();
    let mut out = dev.upload(&[0u32; 4]);
    let mut sink = dev.upload(&[0u32; 4]);
    let mut ahead = dev.zeroed::<u32>(1);
    spin_then_write(&stream, &mut ahead, ahead_time, 1).unwrap();
    timing::spin_sync(&stream, &mut out, &mut sink, SHORT_SPIN, 11).unwrap();
    assert!(stream.query().unwrap(), "the stream still has work");
    assert!(out.buffer().is_idle().unwrap(), "`out` still has pending accesses");
    assert!(ahead.is_idle().unwrap(), "the work ahead of the call is not done");
    assert_eq!(dev.download(&out), vec![11; 4]);
    assert_eq!(dev.download(&sink), vec![lcg(1, SHORT_SPIN); 4]);
    // The seed's synchronous function.
    spin_then_write(&stream, &mut ahead, ahead_time, 2).unwrap();
    let a = vec![1.0f32; 100];
    seed::bar(&stream, a.as_slice().into()).unwrap();
    assert!(stream.query().unwrap());
}

/// Runs `timing::spin_async` once (and waits), so that its kernel is loaded. With CUDA's lazy
/// module loading (the default), the first launch of a kernel loads its module, and loading
/// waits for the kernels already running on the device: a first call made while a gated kernel
/// holds the device would block until the gate times out. (Each GPU test runs in a process of
/// its own, so no earlier test has loaded it.) The CPU loads nothing lazily; the call costs it
/// nothing of note.
fn load_spin_async(
    stream: &Stream,
    out: &mut DeviceTensor<u32, 1>,
    sink: &mut DeviceTensor<u32, 1>,
) {
    timing::spin_async(stream, out, sink, 1, 0).unwrap().wait().unwrap();
}

device_tests!(asynchronous_wrappers_return_before_the_work_is_done);
/// An asynchronous wrapper returns while its work is still to run: its stream is held by a
/// gated kernel that only the host opens, so the work cannot finish before the wrapper
/// returns (a wrapper that waited would hang until the gate timed out).
fn asynchronous_wrappers_return_before_the_work_is_done(dev: &TestDevice) {
    let stream = dev.stream();
    let mut out = dev.upload(&[0u32; 4]);
    let mut sink = dev.upload(&[0u32; 4]);
    load_spin_async(&stream, &mut out, &mut sink);
    let gate = dev.gate();
    let mut held = dev.zeroed::<u32>(1);
    wait_then_write(&stream, &gate, &mut held, 1).unwrap();
    let pending = timing::spin_async(&stream, &mut out, &mut sink, SHORT_SPIN, 7).unwrap();
    assert!(!gate.timed_out(), "the wrapper waited for the device");
    assert!(!pending.is_complete().unwrap(), "the work finished before its stream was released");
    gate.open();
    pending.wait().unwrap();
    assert_eq!(dev.download(&out), vec![7; 4]);
    assert_eq!(dev.download(&sink), vec![lcg(1, SHORT_SPIN); 4]);
    // A scalar result of an asynchronous function is delivered by the guard.
    let pending = timing::spin_count(&stream, &mut out, 1000).unwrap();
    assert_eq!(pending.wait().unwrap(), 8);
    assert_no_deferred_error();
}

device_tests!(two_streams_run_concurrently);
/// The two launches of `spin_pair` (stream `s0` and stream `s1`) do not wait for each other:
/// with a long spin on one stream and a one-step spin on the other, the short one finishes
/// while the long one still runs, in both arrangements. The evidence is read from the device:
/// once the short stream's end event has completed, the long stream is queried, and "still
/// running" proves that the short spin did not wait for the long one. A stream that waited
/// could never show it. Both streams start from one event, so neither starts early.
///
/// How long the long spin must be for that depends on the device and on the host (a CPU
/// stream's thread may be scheduled late on busy cores): when the long spin happened to end
/// first, nothing is proven either way, and the check is repeated with a spin twice as long,
/// up to ten times; only a short spin that never finishes first fails the test. No check
/// compares durations.
///
/// Overlap needs a device that runs kernels of two streams at the same time, which this
/// process first asks of it (`concurrent_kernels`); a device that runs one kernel at a time
/// (compute-sanitizer) cannot show it, and then only the results are checked.
fn two_streams_run_concurrently(dev: &TestDevice) {
    const ATTEMPTS: usize = 10;
    let (s0, s1) = (dev.stream(), dev.stream());
    let mut a = dev.upload(&[0u32; 2]);
    let mut b = dev.upload(&[0u32; 2]);
    let concurrent = concurrent_kernels(dev.device()).unwrap();
    for long_on_s0 in [true, false] {
        let mut long = long_spin(dev);
        for attempt in 1..=ATTEMPTS {
            let (iters_a, iters_b) = if long_on_s0 { (long, 1) } else { (1, long) };
            let start = s0.record_event().unwrap();
            s1.wait_event(&start).unwrap();
            let pending = timing::spin_pair(&s0, &s1, &mut a, &mut b, iters_a, iters_b).unwrap();
            let end0 = s0.record_event().unwrap();
            let end1 = s1.record_event().unwrap();
            let (short_end, long_stream) = if long_on_s0 { (&end1, &s0) } else { (&end0, &s1) };
            short_end.synchronize().unwrap();
            let overlapped = !long_stream.query().unwrap();
            pending.wait().unwrap();
            end0.synchronize().unwrap();
            end1.synchronize().unwrap();
            let (t0, t1) = (start.elapsed_ms(&end0).unwrap(), start.elapsed_ms(&end1).unwrap());
            println!(
                "s0 spins {iters_a}, s1 spins {iters_b}: s0 ends at {t0:.3} ms, s1 at {t1:.3} ms; \
                 the long spin was {}running when the short one ended",
                if overlapped { "" } else { "no longer " }
            );
            assert_eq!(dev.download(&a), vec![lcg(1, iters_a); 2]);
            assert_eq!(dev.download(&b), vec![lcg(7, iters_b); 2]);
            if !concurrent || overlapped {
                break;
            }
            assert!(
                attempt < ATTEMPTS,
                "in {ATTEMPTS} attempts (up to {long} iterations) the one-step spin never ended \
                 while the long one ran: {} waited for {}",
                if long_on_s0 { "s1" } else { "s0" },
                if long_on_s0 { "s0" } else { "s1" },
            );
            long = long.saturating_mul(2).min(1 << 30);
        }
    }
    // The seed itself (its results stay on the device; it must run and complete).
    let mut random = Random::fresh("seed");
    let (x, y) = (random.f32s(1000), random.f32s(300));
    seed::foo(&s0, &s1, x.as_slice().into(), y.as_slice().into()).unwrap().wait().unwrap();
    assert_no_deferred_error();
}

device_tests!(tensors_written_on_two_streams_are_read_after_both_writes);
/// A call whose kernels run on two streams records its writes with one event per stream (shared
/// by all its tensors and its guard); a read on a third stream must wait for both, without the
/// host waiting for anything.
fn tensors_written_on_two_streams_are_read_after_both_writes(dev: &TestDevice) {
    let (s0, s1, s2) = (dev.stream(), dev.stream(), dev.stream());
    let iters = long_spin(dev) / 4;
    for round in 0..3 {
        let mut a = dev.upload(&[0u32; 2]);
        let mut b = dev.upload(&[0u32; 2]);
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
    let mut out = dev.upload(&[0u32; 64]);
    let mut sink = dev.upload(&[0u32; 64]);
    for value in 0..2000u32 {
        drop(timing::spin_async(&s0, &mut out, &mut sink, 1, value).unwrap());
        if value % 500 == 499 {
            assert_eq!(out.to_host(&s2).unwrap().as_slice(), [value; 64]);
        }
    }
    assert_no_deferred_error();
}

device_tests!(then_orders_another_stream_after_the_work);
/// `then` makes another stream wait for a guard's work without blocking the host: the work is
/// held behind a gated kernel that only the host opens, so a marker on the other stream cannot
/// complete before the gate opens.
fn then_orders_another_stream_after_the_work(dev: &TestDevice) {
    let (s0, s1) = (dev.stream(), dev.stream());
    let mut out = dev.upload(&[0u32; 4]);
    let mut sink = dev.upload(&[0u32; 4]);
    load_spin_async(&s0, &mut out, &mut sink);
    let gate = dev.gate();
    let mut held = dev.zeroed::<u32>(1);
    wait_then_write(&s0, &gate, &mut held, 1).unwrap();
    let pending = timing::spin_async(&s0, &mut out, &mut sink, SHORT_SPIN, 3).unwrap();
    pending.then(&s1).unwrap();
    let mut marker = dev.event();
    marker.record(&s1).unwrap();
    assert!(!marker.query().unwrap(), "s1 did not wait for the work");
    assert!(!gate.timed_out(), "`then` or the wrapper waited for the device");
    gate.open();
    marker.synchronize().unwrap();
    assert!(pending.is_complete().unwrap(), "s1 passed the marker before the work was done");
    pending.wait().unwrap();
    assert_eq!(dev.download(&out), vec![3; 4]);
}

device_tests!(awaiting_a_guard_delivers_inout_data_and_the_result);
fn awaiting_a_guard_delivers_inout_data_and_the_result(dev: &TestDevice) {
    let mut random = Random::fresh("await");
    let n = 1 + random.below(500);
    let before = random.f32s(n);
    let mut acc = before.clone();
    let twice = {
        let pending = timing::spin_inout(acc.as_mut_slice().into(), long_spin(dev)).unwrap();
        let mut future = pin!(pending.into_future());
        // `block_on` fails if the device finishes without the future's waker being called.
        let (result, polls) = dev.block_on(future.as_mut());
        println!("awaited in {polls} polls");
        result.unwrap()
    };
    let want_acc: Vec<f32> = before.iter().map(|v| v + 1.0).collect();
    let want_twice: Vec<f32> = want_acc.iter().map(|v| v * 2.0).collect();
    assert_close("acc", &acc, &want_acc);
    assert_close("returned", twice.as_slice(), &want_twice);
}

device_tests!(forgetting_a_guard_then_dropping_its_buffers_is_safe);
fn forgetting_a_guard_then_dropping_its_buffers_is_safe(dev: &TestDevice) {
    let stream = dev.stream();
    let iters = long_spin(dev);
    let mut out = dev.upload(&[0u32; 256]);
    let mut sink = dev.upload(&[0u32; 256]);
    let pending = timing::spin_async(&stream, &mut out, &mut sink, iters, 5).unwrap();
    std::mem::forget(pending);
    // The kernel still runs: the buffers must stay allocated until it is done.
    drop(out);
    drop(sink);
    // New allocations (which may reuse freed memory) and work on them give correct results.
    let mut random = Random::fresh("forget");
    for _ in 0..4 {
        let x_host = random.f32s(256);
        let x = dev.upload(&x_host);
        let mut y = dev.upload(&[0.0f32; 256]);
        kinds::axpy(&x, &mut y, 1.0).unwrap();
        assert_close("y after forget", &dev.download(&y), &x_host);
    }
    // A forgotten guard never writes into the caller's memory.
    let before = random.f32s(64);
    let mut acc = before.clone();
    let pending = timing::spin_inout(acc.as_mut_slice().into(), iters).unwrap();
    std::mem::forget(pending);
    dev.synchronize();
    assert_eq!(acc, before, "a forgotten guard must not copy back");
    assert_no_deferred_error();
}

device_tests!(views_convert_from_slices_vectors_and_tensors);
/// Host views accept every documented source.
fn views_convert_from_slices_vectors_and_tensors(_dev: &TestDevice) {
    let x = vec![2.0f32; 8];
    let mut y = HostTensor::new(vec![1.0f32; 8], [8]).unwrap();
    let a = [1.0f32; 64];
    kinds::gemv(HostView::new(&a, [8, 8]).unwrap(), (&x).into(), HostViewMut::from(&mut y))
        .unwrap();
    assert!(y.as_slice().iter().all(|&v| v == 17.0), "{:?}", y.as_slice());
}

device_tests!(a_loop_of_calls_records_no_event_and_readers_wait_for_the_right_call);
/// The end of a call is recorded lazily (`docs/performance.md`, "Lazy points"): a loop of calls
/// on one stream with the same tensors, whose guards are dropped, records no event. Work that
/// another call still needs is sealed before later work on the stream, so a reader on another
/// stream waits for exactly the call that wrote the tensor, not for later work held on the
/// first stream.
fn a_loop_of_calls_records_no_event_and_readers_wait_for_the_right_call(dev: &TestDevice) {
    let (s0, s1) = (dev.stream(), dev.stream());
    let mut out = dev.upload(&[0u32; 64]);
    let mut sink = dev.upload(&[0u32; 64]);
    timing::spin_async(&s0, &mut out, &mut sink, 1, 0).unwrap().wait().unwrap();
    let before = s0.bookkeeping_records();
    for value in 1..=200u32 {
        drop(timing::spin_async(&s0, &mut out, &mut sink, 1, value).unwrap());
    }
    assert_eq!(s0.bookkeeping_records(), before, "the loop of calls recorded events");
    // Later work on s0 (of another buffer) held by a gate: the last call's end, which `out`
    // still needs, is recorded before it.
    let gate = dev.gate();
    let mut held = dev.zeroed::<u32>(1);
    wait_then_write(&s0, &gate, &mut held, 1).unwrap();
    assert_eq!(s0.bookkeeping_records(), before + 1, "the last call's end was not sealed");
    assert_eq!(out.to_host(&s1).unwrap().as_slice(), [200; 64]);
    assert!(!gate.timed_out(), "the reader on s1 waited for the held work on s0");
    gate.open();
    assert_eq!(held.to_vec(&s0).unwrap(), [1]);
    assert_no_deferred_error();
}
