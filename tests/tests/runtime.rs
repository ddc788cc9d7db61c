//! Tests of the `choreo` runtime with real kernels (the hand-written test kernels of
//! `choreo_tests`): stream ordering, events, async copies, access tracking across streams,
//! `Pending` (wait, `.await`, `then`, `mem::forget`), and buffers dropped while the device still
//! uses them.
//!
//! Every test but the first runs twice (`choreo_tests::device_tests!`): `NAME::on_cpu` on the
//! CPU device (the CPU versions of the kernels), in every `cargo test` (CI included), and
//! `NAME::on_gpu` on CUDA device 0, `#[ignore]`d: run it with `--ignored` on a machine with a
//! GPU; for memory safety also under compute-sanitizer: `SANITIZE=all gpu-bundle/run-all`, see
//! ci/bundle-gpu-tests. Without a GPU, or without the CUDA test kernels (no nvcc at build
//! time), the GPU variants fail with a message saying so; they never pass vacuously. No check
//! depends on how fast anything runs: "still running" is made a fact with gates that only the
//! host opens, and orderings are read from the device (stream and event queries, results), so
//! the tests pass unchanged under the sanitizer's slowdown and on two shared cores.
//!
//! `fp8_conversions_match_cuda_host_reference` is the exception: it needs nvcc at build time
//! (CUDA's host code is the reference) but no GPU, so it runs once, everywhere the toolkit is
//! installed (CI included).

use std::future::{Future, IntoFuture};
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::thread;
use std::time::{Duration, Instant};

use choreo::{
    Device, DeviceBuffer, DeviceTensor, F8E4M3, F8E5M2, HostViewMut, Pending, PinnedHostBuffer,
    Stream,
};
use choreo_tests::{
    Fp8Format, Gate, Random, TestDevice, ThreadWaker, add_one, assert_no_deferred_error,
    concurrent_kernels, cuda_host_f32_to_fp8, cuda_host_fp8_to_f32, device_tests, f32_to_fp8,
    gated_kernels_hold_other_work, raw_add_one, raw_wait_then_write, saxpy, spin_then_write,
    wait_then_write,
};

/// A spin of `milliseconds` of device time (the kernel reads the GPU's clock; on the CPU, the
/// host's). Spins only make ordering mistakes likely to show; no check depends on their length.
fn spin(milliseconds: u64) -> Duration {
    Duration::from_millis(milliseconds)
}

/// Host-side step times of a test, reported when a check fails (a step that blocks shows up
/// here). Only for the message: no check compares times.
struct Steps {
    started: Instant,
    marks: Vec<(&'static str, Duration)>,
}

impl Steps {
    fn new() -> Steps {
        Steps { started: Instant::now(), marks: Vec::new() }
    }

    fn mark(&mut self, step: &'static str) {
        self.marks.push((step, self.started.elapsed()));
    }
}

impl std::fmt::Display for Steps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (step, at) in &self.marks {
            write!(f, "[{step} at {at:.1?}] ")?;
        }
        Ok(())
    }
}

/// Checks that work held at a gate has not finished (`finished` is a stream or event query).
#[track_caller]
fn assert_still_running(finished: bool, what: &str, steps: &Steps) {
    assert!(!finished, "{what} finished although its gate is closed; steps: {steps}");
}

/// The failure of `fp8_conversions_match_cuda_host_reference` in a build without nvcc.
fn needs_nvcc<T>(error: choreo::Error) -> T {
    panic!(
        "this test needs the CUDA toolkit when choreo-tests is built (CUDA's host fp8 code, \
         compiled by nvcc, is the reference; no GPU is needed): {error}"
    )
}

#[test]
fn fp8_conversions_match_cuda_host_reference() {
    // Decoding: all 256 codes of both formats.
    for code in 0..=255u8 {
        for format in [Fp8Format::E4M3, Fp8Format::E5M2] {
            let reference = cuda_host_fp8_to_f32(code, format).unwrap_or_else(needs_nvcc);
            let ours = match format {
                Fp8Format::E4M3 => F8E4M3::from_bits(code).to_f32(),
                Fp8Format::E5M2 => F8E5M2::from_bits(code).to_f32(),
            };
            if reference.is_nan() {
                assert!(ours.is_nan(), "{format:?} {code:#04x}: {ours} vs NaN");
            } else {
                assert_eq!(ours.to_bits(), reference.to_bits(), "{format:?} {code:#04x}");
            }
        }
    }

    // Encoding: a stride through all f32 bit patterns, plus every midpoint between neighbouring
    // codes and the floats right next to it, in both saturation modes.
    let mut inputs: Vec<f32> = (0..=u32::MAX).step_by(4099).map(f32::from_bits).collect();
    let decoders: [fn(u8) -> f32; 2] =
        [|code| F8E4M3::from_bits(code).to_f32(), |code| F8E5M2::from_bits(code).to_f32()];
    for decode in decoders {
        for code in 0..0x7Fu8 {
            let (low, high) = (decode(code), decode(code + 1));
            if !low.is_finite() || !high.is_finite() {
                continue;
            }
            // Exact: both neighbours have few significant bits.
            let midpoint = (low + high) / 2.0;
            let bits = midpoint.to_bits();
            for value in [midpoint, f32::from_bits(bits + 1), f32::from_bits(bits - 1)] {
                inputs.push(value);
                inputs.push(-value);
            }
        }
    }
    inputs.extend([f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN_POSITIVE, 464.0, 61440.0]);
    for &value in &inputs {
        for saturate in [true, false] {
            for format in [Fp8Format::E4M3, Fp8Format::E5M2] {
                let reference =
                    cuda_host_f32_to_fp8(value, saturate, format).unwrap_or_else(needs_nvcc);
                let ours = match (format, saturate) {
                    (Fp8Format::E4M3, true) => F8E4M3::from_f32(value).to_bits(),
                    (Fp8Format::E4M3, false) => F8E4M3::from_f32_unsaturated(value).to_bits(),
                    (Fp8Format::E5M2, true) => F8E5M2::from_f32(value).to_bits(),
                    (Fp8Format::E5M2, false) => F8E5M2::from_f32_unsaturated(value).to_bits(),
                };
                assert_eq!(
                    ours,
                    reference,
                    "{format:?} saturate={saturate} of {value:e} ({:#010x})",
                    value.to_bits()
                );
            }
        }
    }
}

device_tests!(device_information_is_plausible);
fn device_information_is_plausible(dev: &TestDevice) {
    let device = dev.device();
    let name = device.name().unwrap();
    assert!(!name.trim().is_empty(), "empty device name");
    let (major, minor) = device.compute_capability().unwrap();
    let multiprocessors = device.multiprocessor_count().unwrap();
    assert!(multiprocessors > 0);
    let memory = device.memory_info().unwrap();
    assert!(memory.total > 0 && memory.free <= memory.total, "{memory:?}");
    if dev.is_cpu() {
        // The CPU runtime's documented answers: compute capability 0.0, a multiprocessor per
        // worker thread.
        assert_eq!((major, minor), (0, 0), "the CPU's compute capability");
        assert!(name.starts_with("CPU ("), "{name}");
        assert_eq!(device.ordinal(), 0);
    } else {
        let count = Device::count().unwrap();
        assert!(count >= 1);
        assert!(device.ordinal() < count);
        assert_eq!(Device::current().unwrap(), device);
        assert!(major >= 7 && minor < 10, "compute capability {major}.{minor}");
        assert!(Device::new(count).is_err(), "device {count} must not exist");
    }
    println!("{name}: compute capability {major}.{minor}, {multiprocessors} SMs, {memory:?}");
}

device_tests!(copy_after_spinning_kernel_on_the_same_stream_sees_its_writes);
fn copy_after_spinning_kernel_on_the_same_stream_sees_its_writes(dev: &TestDevice) {
    let stream = dev.stream();
    let len = 1 << 20;
    let mut buffer = dev.zeroed::<u32>(len);
    spin_then_write(&stream, &mut buffer, spin(5), 0x00C0_FFEE).unwrap();
    let mut host = vec![0xDEAD_BEEF_u32; len];
    buffer.copy_to_host(&stream, &mut host).unwrap();
    assert!(host.iter().all(|&value| value == 0x00C0_FFEE), "stale values after the spin");
    assert_no_deferred_error();
}

device_tests!(events_time_a_two_millisecond_spin);
/// Events time device work with the device's clock: the spin kernel busy-waits 2 ms of the
/// GPU's global timer (on the CPU, waits 2 ms of the host's steady clock, which the CPU's events
/// read too) between two events, so at least that much device time lies between them
/// however slowly the host or the kernel runs (a lower bound, never an upper one), and events
/// recorded later on a stream have later timestamps.
fn events_time_a_two_millisecond_spin(dev: &TestDevice) {
    let stream = dev.stream();
    let mut buffer = dev.zeroed::<u32>(256);
    let start = stream.record_event().unwrap();
    spin_then_write(&stream, &mut buffer, spin(2), 1).unwrap();
    let middle = stream.record_event().unwrap();
    spin_then_write(&stream, &mut buffer, spin(2), 2).unwrap();
    let end = stream.record_event().unwrap();
    end.synchronize().unwrap();
    assert!(end.query().unwrap());
    let first = start.elapsed_ms(&middle).unwrap();
    let both = start.elapsed_ms(&end).unwrap();
    let second = middle.elapsed_ms(&end).unwrap();
    // Half the spin: room for the resolution of the global timer the kernel reads.
    assert!(first >= 1.0, "a 2 ms spin took {first} ms between its events");
    assert!(second >= 1.0, "a 2 ms spin took {second} ms between its events");
    assert!(both >= first && both >= second, "events out of order: {first} + {second} vs {both}");
    assert_eq!(buffer.to_vec(&stream).unwrap(), vec![2; 256]);
    assert_no_deferred_error();
}

device_tests!(async_copies_round_trip_16_mib_in_chunks);
fn async_copies_round_trip_16_mib_in_chunks(dev: &TestDevice) {
    const TOTAL: usize = 16 << 20;
    let stream = dev.stream();
    let mut random = Random::fresh("16 MiB in chunks");
    let data: Vec<u32> = (0..TOTAL / size_of::<u32>()).map(|_| random.next_u32()).collect();
    for chunk_bytes in [16 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20] {
        let chunk = chunk_bytes / size_of::<u32>();

        // Host -> device from pinned memory, fully asynchronous. The pinned sources are
        // dropped right away: their memory must outlive the copies anyway.
        let mut device_chunks = Vec::new();
        for piece in data.chunks(chunk) {
            let source = PinnedHostBuffer::from_slice_on_device(dev.device(), piece).unwrap();
            let mut target = DeviceBuffer::<u32>::zeroed_on(&stream, piece.len()).unwrap();
            target.copy_from_pinned(&stream, &source).unwrap();
            drop(source);
            device_chunks.push(target);
        }
        // Device -> host through Pending (runtime-owned staging), then through pinned targets.
        let mut pendings = Vec::new();
        let mut pinned_targets = Vec::new();
        for buffer in device_chunks {
            let len = buffer.len();
            let mut pinned = PinnedHostBuffer::<u32>::new_on_device(dev.device(), len).unwrap();
            buffer.copy_to_pinned(&stream, &mut pinned).unwrap();
            pinned_targets.push(pinned);
            let tensor = DeviceTensor::from_buffer(buffer, [len]).unwrap();
            pendings.push(tensor.to_host_async(&stream).unwrap());
            // `tensor` is dropped here while its copy may still run.
        }
        let mut round_trip = Vec::with_capacity(data.len());
        for pending in pendings {
            round_trip.extend(pending.wait().unwrap().into_vec());
        }
        assert!(round_trip == data, "Pending round trip differs ({chunk_bytes}-byte chunks)");
        let pinned_round_trip: Vec<u32> =
            pinned_targets.iter().flat_map(|pinned| pinned.as_slice().unwrap().to_vec()).collect();
        assert!(pinned_round_trip == data, "pinned round trip differs ({chunk_bytes}-byte chunks)");
    }
    assert_no_deferred_error();
}

device_tests!(synchronous_copies_and_saxpy_compute_real_values);
fn synchronous_copies_and_saxpy_compute_real_values(dev: &TestDevice) {
    let stream = dev.stream();
    let mut random = Random::fresh("saxpy");
    let len = 100_003;
    let x: Vec<f32> = (0..len).map(|_| random.next_f32()).collect();
    let y: Vec<f32> = (0..len).map(|_| random.next_f32()).collect();
    let x_device = DeviceBuffer::from_host(&stream, &x).unwrap();
    let mut y_device = dev.zeroed::<f32>(len);
    y_device.copy_from_host(&stream, &y).unwrap();
    saxpy(&stream, 2.5, &x_device, &mut y_device).unwrap();
    let result = y_device.to_vec(&stream).unwrap();
    for i in 0..len {
        let expected = 2.5f32.mul_add(x[i], y[i]);
        let tolerance = 1e-6 * expected.abs().max(1.0);
        assert!((result[i] - expected).abs() <= tolerance, "{i}: {} vs {expected}", result[i]);
    }
    // Device-to-device copy and clone.
    let copy = y_device.try_clone(&stream).unwrap();
    assert_eq!(copy.to_vec(&stream).unwrap(), result);
    assert!(y_device.copy_from_host(&stream, &y[1..]).is_err(), "length mismatch accepted");
    assert_no_deferred_error();
}

device_tests!(tracked_buffers_order_work_across_streams);
fn tracked_buffers_order_work_across_streams(dev: &TestDevice) {
    let mut steps = Steps::new();
    let (a, b) = (dev.stream(), dev.stream());
    let gate = dev.gate();
    let len = 4096;
    let mut buffer = dev.zeroed::<u32>(len);
    wait_then_write(&a, &gate, &mut buffer, 1).unwrap();
    steps.mark("gated write");
    // No explicit synchronisation: the buffer's write event makes `b` wait for `a`.
    add_one(&b, &mut buffer).unwrap();
    steps.mark("add one");
    assert_still_running(b.query().unwrap(), "stream b (it depends on a's gated write)", &steps);
    gate.open();
    assert_eq!(buffer.to_vec(&b).unwrap(), vec![2; len]);
    assert!(!gate.timed_out());
    assert_no_deferred_error();
}

/// Device memory for the untracked tests, with a stream of its own for allocating, zeroing,
/// reading and freeing: a `DeviceBuffer` whose address is taken once (a write recorded on its
/// own stream, before any kernel uses it); the kernels that use it afterwards are launched on
/// the raw pointer, so the runtime does not know about them. Nothing here synchronises the
/// whole device: device-wide synchronisation would wait for the gated kernels of the test.
/// Users synchronise the streams that wrote the memory before `read` and before dropping it.
struct RawDeviceMemory {
    buffer: DeviceBuffer<u32>,
    pointer: *mut u32,
    stream: Stream,
}

impl RawDeviceMemory {
    fn zeroed(dev: &TestDevice, len: usize) -> RawDeviceMemory {
        let stream = dev.stream();
        let mut buffer = DeviceBuffer::<u32>::zeroed_on(&stream, len).unwrap();
        let pointer = buffer.device_ptr_for_write(&stream).unwrap();
        buffer.record_write(&stream).unwrap();
        stream.synchronize().unwrap();
        RawDeviceMemory { buffer, pointer, stream }
    }

    fn read(&self) -> Vec<u32> {
        self.buffer.to_vec(&self.stream).unwrap()
    }
}

device_tests!(then_orders_another_stream_after_pending_work);
fn then_orders_another_stream_after_pending_work(dev: &TestDevice) {
    let mut steps = Steps::new();
    let (a, b) = (dev.stream(), dev.stream());
    let len = 1024;

    // Where a gated kernel holds back other work (compute-sanitizer), each gate opens as soon
    // as its kernel is enqueued and the "still running" checks are skipped; the results are
    // checked all the same.
    let holds = gated_kernels_hold_other_work(dev.device()).unwrap();
    let release_early = |gate: &Gate| {
        if holds {
            gate.open();
        }
    };

    // Control: without `then`, `b` does not wait: its add-one finishes while `a` is held at
    // its gate, and the later write of 1 wins. (This shows the test detects a missing order.)
    // Only a device that runs kernels of two streams at once, and lets the add-one run beside
    // a gated kernel, can show that.
    if concurrent_kernels(dev.device()).unwrap() && !holds {
        let control = RawDeviceMemory::zeroed(dev, len);
        let gate = dev.gate();
        // SAFETY: `control` holds `len` u32 and outlives the work (its Drop synchronises).
        unsafe {
            raw_wait_then_write(&a, &gate, control.pointer, len, 1).unwrap();
            raw_add_one(&b, control.pointer, len).unwrap();
        }
        b.synchronize().unwrap();
        assert!(!gate.timed_out(), "the unordered add-one waited for the gated kernel");
        gate.open();
        a.synchronize().unwrap();
        assert_eq!(control.read(), vec![1; len], "the unordered control did not race as expected");
    }

    // With `then`: `a` writes 1 once its gate opens; `b` waits for `a`'s pending work, then
    // adds one.
    let memory = RawDeviceMemory::zeroed(dev, len);
    let gate = dev.gate();
    // SAFETY: as above.
    unsafe { raw_wait_then_write(&a, &gate, memory.pointer, len, 1).unwrap() };
    release_early(&gate);
    let pending = Pending::after(&[&a], || Ok(())).unwrap();
    steps.mark("pending");
    if !holds {
        assert_still_running(pending.is_complete().unwrap(), "the pending work", &steps);
    }
    pending.then(&b).unwrap();
    // SAFETY: as above.
    unsafe { raw_add_one(&b, memory.pointer, len).unwrap() };
    steps.mark("add one");
    if !holds {
        assert_still_running(
            b.query().unwrap(),
            "stream b (it waits for the pending work)",
            &steps,
        );
    }
    gate.open();
    b.synchronize().unwrap();
    assert_eq!(memory.read(), vec![2; len]);
    pending.wait().unwrap();

    // `event()` gives the same ordering as an event of its own, even once the Pending is gone.
    let merged = RawDeviceMemory::zeroed(dev, len);
    let gate = dev.gate();
    // SAFETY: as above.
    unsafe { raw_wait_then_write(&a, &gate, merged.pointer, len, 5).unwrap() };
    release_early(&gate);
    let pending = Pending::after(&[&a], || Ok(())).unwrap();
    let event = pending.event().unwrap();
    drop(pending);
    b.wait_event(&event).unwrap();
    steps.mark("merged event");
    // SAFETY: as above.
    unsafe { raw_add_one(&b, merged.pointer, len).unwrap() };
    if !holds {
        assert_still_running(
            b.query().unwrap(),
            "stream b (it waits for the merged event)",
            &steps,
        );
    }
    gate.open();
    b.synchronize().unwrap();
    assert_eq!(merged.read(), vec![6; len]);
    assert!(!gate.timed_out());
    assert_no_deferred_error();
}

device_tests!(awaiting_a_pending_is_woken_by_the_stream);
fn awaiting_a_pending_is_woken_by_the_stream(dev: &TestDevice) {
    let mut steps = Steps::new();
    let stream = dev.stream();
    let len = 1 << 16;
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    // Where a gated kernel holds back other work (compute-sanitizer; there the first poll,
    // which creates a stream and enqueues the waking host function, waited for the gate), the
    // gate opens before the first poll, which may then find the copy done or not; the waking
    // and the data are checked all the same.
    let holds = gated_kernels_hold_other_work(dev.device()).unwrap();

    let gate = dev.gate();
    let mut buffer = dev.zeroed::<u32>(len);
    wait_then_write(&stream, &gate, &mut buffer, 42).unwrap();
    steps.mark("gated write");
    let tensor = DeviceTensor::from_buffer(buffer, [len]).unwrap();
    let mut future = pin!(tensor.to_host_async(&stream).unwrap().into_future());
    steps.mark("to_host_async");
    if holds {
        gate.open();
    }
    // The kernel waits at the gate: the first poll must register and return Pending.
    let first = future.as_mut().poll(&mut Context::from_waker(&waker));
    steps.mark("first poll");
    if !holds {
        assert_still_running(first.is_ready(), "the awaited copy", &steps);
    }
    gate.open();
    // `block_on` fails if the device finishes without the future's waker being called.
    let (result, polls) = match first {
        std::task::Poll::Ready(result) => (result, 1),
        std::task::Poll::Pending => dev.block_on(future.as_mut()),
    };
    println!("awaited in {polls} polls; {steps}");
    let host = result.unwrap();
    assert_eq!(host.shape(), [len]);
    assert!(host.as_slice().iter().all(|&value| value == 42));

    // A future dropped after registering its callback leaves the callback's state valid.
    let gate = dev.gate();
    let mut buffer = dev.zeroed::<u32>(len);
    wait_then_write(&stream, &gate, &mut buffer, 7).unwrap();
    let tensor = DeviceTensor::from_buffer(buffer, [len]).unwrap();
    {
        let mut future = pin!(tensor.to_host_async(&stream).unwrap().into_future());
        if holds {
            gate.open();
        }
        let first = future.as_mut().poll(&mut Context::from_waker(&waker));
        if !holds {
            assert_still_running(first.is_ready(), "the awaited copy", &steps);
        }
    }
    gate.open();
    stream.synchronize().unwrap();
    assert_eq!(tensor.to_host(&stream).unwrap().into_vec(), vec![7; len]);
    assert!(!gate.timed_out());
    assert_no_deferred_error();
}

device_tests!(wait_copies_into_a_host_view_mut_and_drop_leaves_it_alone);
fn wait_copies_into_a_host_view_mut_and_drop_leaves_it_alone(dev: &TestDevice) {
    let stream = dev.stream();
    let shape = [64, 48];
    let len = 64 * 48;
    let mut buffer = dev.zeroed::<u32>(len);
    spin_then_write(&stream, &mut buffer, spin(10), 9).unwrap();
    let tensor = DeviceTensor::from_buffer(buffer, shape).unwrap();

    let mut host = vec![0xFFFF_FFFF_u32; len];
    let pending =
        tensor.copy_to_host_async(&stream, HostViewMut::new(&mut host, shape).unwrap()).unwrap();
    pending.wait().unwrap();
    assert!(host.iter().all(|&value| value == 9));

    // Dropping the Pending skips the copy-back: the host data stays as it was.
    let mut untouched = vec![0xFFFF_FFFF_u32; len];
    let pending = tensor
        .copy_to_host_async(&stream, HostViewMut::new(&mut untouched, shape).unwrap())
        .unwrap();
    drop(pending);
    stream.synchronize().unwrap();
    assert!(untouched.iter().all(|&value| value == 0xFFFF_FFFF));

    // Shape mismatches are errors before anything is enqueued.
    let mut wrong = vec![0u32; len];
    let error = tensor
        .copy_to_host_async(&stream, HostViewMut::new(&mut wrong, [48, 64]).unwrap())
        .unwrap_err();
    assert!(
        matches!(error, choreo::Error::Shape { dim: 0, expected: 64, got: 48, .. }),
        "{error:?}"
    );
    assert_no_deferred_error();
}

device_tests!(forgetting_a_pending_while_its_kernel_runs_is_memory_safe);
fn forgetting_a_pending_while_its_kernel_runs_is_memory_safe(dev: &TestDevice) {
    let mut steps = Steps::new();
    let running = dev.stream();
    let other = dev.stream();
    let gate = dev.gate();
    let len = 1 << 22; // 16 MiB
    let mut buffer = dev.zeroed::<u32>(len);
    wait_then_write(&running, &gate, &mut buffer, 0xBAD).unwrap();
    steps.mark("gated write");
    let tensor = DeviceTensor::from_buffer(buffer, [len]).unwrap();
    let pending = tensor.to_host_async(&running).unwrap();
    steps.mark("to_host_async");
    std::mem::forget(pending);
    drop(tensor);
    steps.mark("drop");

    // Allocate and use new memory while the kernel is held at its gate. If the dropped
    // buffer's memory were reused too early, the late writes of 0xBAD would land in these.
    let mut fresh = Vec::new();
    for round in 1..=4u32 {
        let mut buffer = DeviceBuffer::<u32>::zeroed_on(&other, len).unwrap();
        for _ in 0..round {
            add_one(&other, &mut buffer).unwrap();
        }
        fresh.push((round, buffer));
        steps.mark("fresh buffer");
    }
    assert_still_running(running.query().unwrap(), "the gated kernel", &steps);
    gate.open();
    running.synchronize().unwrap();
    other.synchronize().unwrap();
    for (round, buffer) in &fresh {
        let values = buffer.to_vec(&other).unwrap();
        assert!(values.iter().all(|value| value == round), "buffer of round {round} clobbered");
    }
    assert!(!gate.timed_out());
    assert_no_deferred_error();
}

device_tests!(dropping_a_buffer_while_a_kernel_writes_it_is_safe);
fn dropping_a_buffer_while_a_kernel_writes_it_is_safe(dev: &TestDevice) {
    let mut steps = Steps::new();
    let (a, b) = (dev.stream(), dev.stream());
    let gate = dev.gate();
    let len = 1 << 22;
    let mut victim = dev.zeroed::<u32>(len);
    wait_then_write(&a, &gate, &mut victim, 0xBAD).unwrap();
    steps.mark("gated write");
    drop(victim);
    steps.mark("drop");
    let mut fresh: Vec<DeviceBuffer<u32>> =
        (0..8).map(|_| DeviceBuffer::<u32>::zeroed_on(&b, len).unwrap()).collect();
    steps.mark("fresh buffers");
    for buffer in &mut fresh {
        add_one(&b, buffer).unwrap();
    }
    steps.mark("add one");
    assert_still_running(a.query().unwrap(), "the gated kernel", &steps);
    gate.open();
    a.synchronize().unwrap();
    b.synchronize().unwrap();
    for (index, buffer) in fresh.iter().enumerate() {
        let values = buffer.to_vec(&b).unwrap();
        assert!(values.iter().all(|&value| value == 1), "fresh buffer {index} clobbered");
    }
    assert!(!gate.timed_out());
    assert_no_deferred_error();
}

device_tests!(pinned_buffers_are_recycled_without_blocking_on_running_kernels);
fn pinned_buffers_are_recycled_without_blocking_on_running_kernels(dev: &TestDevice) {
    let mut steps = Steps::new();
    let stream = dev.stream();
    let gate = dev.gate();
    let mut buffer = dev.zeroed::<u32>(1024);
    wait_then_write(&stream, &gate, &mut buffer, 3).unwrap();
    steps.mark("gated write");
    // Pinned buffers come and go while a kernel runs; freeing pinned memory would wait for
    // the kernel (cudaFreeHost synchronises the device), which only the host can release: the
    // host would hang until the gate timed out, and the kernel would then have finished.
    for round in 0..64u32 {
        let mut pinned = PinnedHostBuffer::<u32>::new_on_device(dev.device(), 4096).unwrap();
        pinned.as_mut_slice().unwrap().fill(round);
        assert!(pinned.as_slice().unwrap().iter().all(|&value| value == round));
    }
    steps.mark("pinned buffers");
    assert_still_running(stream.query().unwrap(), "the gated kernel", &steps);
    assert!(!gate.timed_out(), "pinned allocations waited for the gated kernel; {steps}");
    gate.open();
    assert_eq!(buffer.to_vec(&stream).unwrap(), vec![3; 1024]);
    assert!(!gate.timed_out());
    assert_no_deferred_error();
}

device_tests!(zero_length_buffers_work);
fn zero_length_buffers_work(dev: &TestDevice) {
    let stream = dev.stream();
    let empty = dev.zeroed::<f32>(0);
    assert!(empty.is_empty());
    assert_eq!(empty.to_vec(&stream).unwrap(), Vec::<f32>::new());
    let mut from_host = DeviceBuffer::<f32>::from_host(&stream, &[]).unwrap();
    from_host.copy_from_host(&stream, &[]).unwrap();
    empty.copy_to_host(&stream, &mut []).unwrap();
    saxpy(&stream, 1.0, &empty, &mut from_host).unwrap();
    from_host
        .copy_from_pinned(&stream, &PinnedHostBuffer::new_on_device(dev.device(), 0).unwrap())
        .unwrap();
    let mut pinned = PinnedHostBuffer::<f32>::new_on_device(dev.device(), 0).unwrap();
    empty.copy_to_pinned(&stream, &mut pinned).unwrap();
    assert!(pinned.as_slice().unwrap().is_empty());
    let tensor = dev.zeros::<u8, 2>([0, 5]);
    let host = tensor.to_host_async(&stream).unwrap().wait().unwrap();
    assert_eq!(host.shape(), [0, 5]);
    assert!(host.is_empty());
    stream.synchronize().unwrap();
    assert!(from_host.is_idle().unwrap());
    assert_no_deferred_error();
}

device_tests!(device_fp8_conversion_matches_the_rust_conversion);
fn device_fp8_conversion_matches_the_rust_conversion(dev: &TestDevice) {
    let stream = dev.stream();
    let mut random = Random::fresh("fp8 on device");
    let mut inputs: Vec<f32> =
        (0..1 << 20).map(|_| f32::from_bits(random.next_u32())).filter(|v| !v.is_nan()).collect();
    inputs.extend((0..1 << 16).map(|i| (i as f32 - 32768.0) / 64.0));
    inputs.extend([0.0, -0.0, 448.0, 464.0, 57344.0, 61440.0, f32::INFINITY, f32::NEG_INFINITY]);
    let input = DeviceBuffer::from_host(&stream, &inputs).unwrap();
    for format in [Fp8Format::E4M3, Fp8Format::E5M2] {
        let mut output = dev.zeroed::<u8>(inputs.len());
        f32_to_fp8(&stream, format, &input, &mut output).unwrap();
        let codes = output.to_vec(&stream).unwrap();
        for (&value, &code) in inputs.iter().zip(&codes) {
            let ours = match format {
                Fp8Format::E4M3 => F8E4M3::from_f32(value).to_bits(),
                Fp8Format::E5M2 => F8E5M2::from_f32(value).to_bits(),
            };
            assert_eq!(ours, code, "{format:?} of {value:e} ({:#010x})", value.to_bits());
        }
    }
    assert_no_deferred_error();
}
