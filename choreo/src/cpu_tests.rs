//! The runtime on the CPU device, tested on every machine (no GPU needed): stream order and
//! overlap, events, `Pending` (`wait`, `.await`, `then`, `mem::forget`), buffers freed in
//! stream order, tensors to and from the host, device mismatches, the CPU runtime's errors,
//! and the default device.
//!
//! There are no CPU kernels here (they come from generated code); the device work is host
//! functions enqueued on the streams (`cudaLaunchHostFunc` of the CPU runtime), which run on
//! the stream's worker thread in stream order like a kernel. A [`Gate`] holds such work until
//! the test opens it, so "still running" is a fact, not a matter of timing; a gate that is
//! never opened lets its work go after 20 s and says so, so a broken ordering fails a test
//! instead of hanging it.

use std::ffi::c_void;
use std::future::{Future, IntoFuture};
use std::panic::AssertUnwindSafe;
use std::pin::pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

use crate::backend::Backend;
use crate::error::check;
use crate::kernels::{EntryMessage, WorkStreams};
use crate::{
    Device, DeviceBuffer, DeviceTensor, Error, Event, HostTensor, HostView, HostViewMut, Pending,
    PinnedHostBuffer, Result, Stream, check_status,
};

/// How long gated work waits for its gate at most.
const GATE_TIMEOUT: Duration = Duration::from_secs(20);

/// Holds device work until the test opens it.
#[derive(Clone)]
struct Gate {
    state: Arc<(Mutex<GateState>, Condvar)>,
}

#[derive(Default)]
struct GateState {
    open: bool,
    timed_out: bool,
}

impl Gate {
    fn closed() -> Gate {
        Gate { state: Arc::new((Mutex::new(GateState::default()), Condvar::new())) }
    }

    fn open(&self) {
        let (state, opened) = &*self.state;
        state.lock().unwrap_or_else(PoisonError::into_inner).open = true;
        opened.notify_all();
    }

    /// Waits (on a stream's worker) until the gate is open or the timeout has passed.
    fn pass(&self) {
        let (state, opened) = &*self.state;
        let guard = state.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut guard, timeout) = opened
            .wait_timeout_while(guard, GATE_TIMEOUT, |state| !state.open)
            .unwrap_or_else(PoisonError::into_inner);
        if timeout.timed_out() {
            guard.timed_out = true;
        }
    }

    fn timed_out(&self) -> bool {
        self.state.0.lock().unwrap_or_else(PoisonError::into_inner).timed_out
    }
}

/// The closure a host function runs.
type HostWork = Box<dyn FnOnce() + Send>;

/// The host function of [`enqueue_host`]: runs the boxed closure it is given.
unsafe extern "C" fn run_host_work(data: *mut c_void) {
    // SAFETY: `data` is the `Box<HostWork>` that `enqueue_host` leaked for this call; the
    // runtime runs the host function once, so it is taken back once.
    let work = unsafe { Box::from_raw(data.cast::<HostWork>()) };
    // A panic must not unwind into the C++ runtime.
    let _ = std::panic::catch_unwind(AssertUnwindSafe(work));
}

/// Enqueues `work` on `stream` as a host function: it runs on the stream's worker, in stream
/// order, like a kernel. `work` must not call the runtime.
fn enqueue_host(stream: &Stream, work: impl FnOnce() + Send + 'static) -> Result<()> {
    let (_, api) = stream.device_and_api()?;
    let data = Box::into_raw(Box::new(Box::new(work) as HostWork)).cast::<c_void>();
    // SAFETY: the stream is a valid stream of `api`'s runtime while `stream` exists;
    // `run_host_work` matches `cudaHostFn_t` and takes back `data`, a leaked `Box<HostWork>`,
    // exactly once; the closure does not call the runtime.
    let status = unsafe { (api.launch_host_func)(stream.as_raw(), Some(run_host_work), data) };
    if let Err(error) = check(api, status, "cudaLaunchHostFunc") {
        // SAFETY: the host function was not enqueued, so `data` is still ours to free.
        drop(unsafe { Box::from_raw(data.cast::<HostWork>()) });
        return Err(error);
    }
    Ok(())
}

/// The address of a CPU buffer's memory, to move into host work.
#[derive(Clone, Copy)]
struct Address(usize);

/// Like a kernel on `stream` that waits for `gate`, then writes `value` to every element of
/// `buffer` (a tracked write).
fn gated_fill(
    stream: &Stream,
    gate: &Gate,
    buffer: &mut DeviceBuffer<u32>,
    value: u32,
) -> Result<()> {
    let address = Address(buffer.device_ptr_for_write(stream)? as usize);
    let (len, gate) = (buffer.len(), gate.clone());
    enqueue_host(stream, move || {
        gate.pass();
        let Address(address) = address;
        for index in 0..len {
            // SAFETY: `address` is the start of the buffer's CPU memory of `len` u32; the write
            // is recorded right after it is enqueued, so the memory stays allocated until it
            // has run and every other access is ordered before or after it.
            unsafe { (address as *mut u32).add(index).write(value) };
        }
    })?;
    buffer.record_write(stream)
}

/// Like a kernel on `stream` that adds one to every element of `buffer` (a tracked write).
fn add_one(stream: &Stream, buffer: &mut DeviceBuffer<u32>) -> Result<()> {
    let address = Address(buffer.device_ptr_for_write(stream)? as usize);
    let len = buffer.len();
    enqueue_host(stream, move || {
        let Address(address) = address;
        for index in 0..len {
            // SAFETY: as in `gated_fill`.
            unsafe {
                let element = (address as *mut u32).add(index);
                element.write(element.read() + 1);
            }
        }
    })?;
    buffer.record_write(stream)
}

/// Held by every test here: see [`crate::error::DEFERRED_SLOT_USERS`].
fn runtime_test() -> std::sync::RwLockReadGuard<'static, ()> {
    crate::error::DEFERRED_SLOT_USERS.read().unwrap_or_else(PoisonError::into_inner)
}

fn cpu_stream() -> Stream {
    Stream::new_on_device(Device::cpu()).unwrap()
}

/// Wakes the thread that polls.
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` to completion on this thread, parking between polls; fails when a poll
/// returns `Pending` and no wake-up comes within the gate timeout.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut context = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        let parked = std::time::Instant::now();
        thread::park_timeout(GATE_TIMEOUT);
        assert!(parked.elapsed() < GATE_TIMEOUT, "the future was never woken");
    }
}

#[test]
fn work_on_one_cpu_stream_waits_for_tracked_work_of_another() {
    let _runtime = runtime_test();
    let (a, b) = (cpu_stream(), cpu_stream());
    let gate = Gate::closed();
    let mut buffer = DeviceBuffer::<u32>::zeroed_on_device(Device::cpu(), 4096).unwrap();
    gated_fill(&a, &gate, &mut buffer, 1).unwrap();
    // No explicit synchronisation: the buffer's write event makes `b` wait for `a`.
    add_one(&b, &mut buffer).unwrap();
    assert!(!b.query().unwrap(), "stream b ran although it depends on a's gated write");
    assert!(!buffer.is_idle().unwrap());
    gate.open();
    assert_eq!(buffer.to_vec(&b).unwrap(), vec![2; 4096]);
    assert!(buffer.is_idle().unwrap());
    assert!(!gate.timed_out());
}

#[test]
fn two_cpu_streams_run_at_the_same_time() {
    let _runtime = runtime_test();
    let (held, free) = (cpu_stream(), cpu_stream());
    let gate = Gate::closed();
    let counter = Arc::new(AtomicU32::new(0));
    let gated = gate.clone();
    enqueue_host(&held, move || gated.pass()).unwrap();
    let count = Arc::clone(&counter);
    enqueue_host(&free, move || {
        count.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    // The second stream finishes while the first is held: they do not share one queue.
    free.synchronize().unwrap();
    assert_eq!(counter.load(Ordering::SeqCst), 1);
    assert!(!held.query().unwrap(), "the held stream finished although its gate is closed");
    gate.open();
    held.synchronize().unwrap();
    assert!(held.query().unwrap());
    assert!(!gate.timed_out());
}

#[test]
fn cpu_events_mark_points_of_their_stream() {
    let _runtime = runtime_test();
    let stream = cpu_stream();
    let unrecorded = Event::new_on_device(Device::cpu()).unwrap();
    assert!(unrecorded.query().unwrap(), "an event that was never recorded counts as complete");
    assert_eq!(unrecorded.device(), Device::cpu());

    let start = stream.record_event().unwrap();
    let gate = Gate::closed();
    let gated = gate.clone();
    enqueue_host(&stream, move || gated.pass()).unwrap();
    let end = stream.record_event().unwrap();
    assert!(start.query().is_ok());
    assert!(!end.query().unwrap(), "the event after gated work completed early");
    // Another stream that waits for the event waits for the gated work.
    let other = cpu_stream();
    other.wait_event(&end).unwrap();
    let seen = Arc::new(AtomicU32::new(0));
    let seen_by_other = Arc::clone(&seen);
    enqueue_host(&other, move || {
        seen_by_other.store(1, Ordering::SeqCst);
    })
    .unwrap();
    assert!(!other.query().unwrap(), "a stream ran past a wait for an incomplete event");
    gate.open();
    end.synchronize().unwrap();
    assert!(end.query().unwrap());
    other.synchronize().unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    let elapsed = start.elapsed_ms(&end).unwrap();
    assert!(elapsed >= 0.0, "{elapsed}");
    // Untimed bookkeeping events cannot time.
    let untimed = stream.record_untimed_event().unwrap();
    assert!(matches!(start.elapsed_ms(&untimed), Err(Error::InvalidArgument(_))));
    assert!(!gate.timed_out());
    // On an idle stream a record is reached at once, as on a GPU: the stream stays idle.
    stream.synchronize().unwrap();
    let at_once = stream.record_event().unwrap();
    assert!(at_once.query().unwrap(), "an event recorded on an idle stream is not complete");
    assert!(stream.query().unwrap(), "a record on an idle stream left it busy");
    assert!(end.elapsed_ms(&at_once).unwrap() >= 0.0);
}

#[test]
fn pending_wait_and_await_deliver_results_of_cpu_work() {
    let _runtime = runtime_test();
    let stream = cpu_stream();
    let gate = Gate::closed();
    let len = 1 << 12;
    let mut buffer = DeviceBuffer::<u32>::zeroed_on_device(Device::cpu(), len).unwrap();
    gated_fill(&stream, &gate, &mut buffer, 42).unwrap();
    let tensor = DeviceTensor::from_buffer(buffer, [len]).unwrap();

    // `.await`: the first poll finds the copy held at the gate and registers for a wake-up.
    let mut future = pin!(tensor.to_host_async(&stream).unwrap().into_future());
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let first = future.as_mut().poll(&mut Context::from_waker(&waker));
    assert!(first.is_pending(), "the awaited copy finished although its gate is closed");
    gate.open();
    let host = block_on(future).unwrap();
    assert!(host.as_slice().iter().all(|&value| value == 42));

    // `wait`, into a host view; a dropped Pending leaves its view alone.
    let mut target = vec![0u32; len];
    let pending =
        tensor.copy_to_host_async(&stream, HostViewMut::new(&mut target, [len]).unwrap()).unwrap();
    pending.wait().unwrap();
    assert!(target.iter().all(|&value| value == 42));
    let mut untouched = vec![7u32; len];
    drop(tensor.copy_to_host_async(&stream, HostViewMut::new(&mut untouched, [len]).unwrap()));
    stream.synchronize().unwrap();
    assert!(untouched.iter().all(|&value| value == 7));
    assert!(!gate.timed_out());
}

#[test]
fn then_orders_another_cpu_stream_after_pending_work() {
    let _runtime = runtime_test();
    let (a, b) = (cpu_stream(), cpu_stream());
    let gate = Gate::closed();
    let flag = Arc::new(AtomicU32::new(0));
    let (gated, set) = (gate.clone(), Arc::clone(&flag));
    enqueue_host(&a, move || {
        gated.pass();
        set.store(1, Ordering::SeqCst);
    })
    .unwrap();
    let pending = Pending::after(&[&a], || Ok("done")).unwrap();
    assert!(!pending.is_complete().unwrap());
    pending.then(&b).unwrap();
    let seen = Arc::new(AtomicU32::new(u32::MAX));
    let (read, record) = (Arc::clone(&flag), Arc::clone(&seen));
    enqueue_host(&b, move || record.store(read.load(Ordering::SeqCst), Ordering::SeqCst)).unwrap();
    assert!(!b.query().unwrap(), "stream b ran before the pending work it waits for");
    // `event()` orders like the work itself, even once the Pending is gone.
    let event = pending.event().unwrap();
    assert!(!event.query().unwrap());
    gate.open();
    b.synchronize().unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 1, "b did not see the write of the pending work");
    event.synchronize().unwrap();
    assert_eq!(pending.wait().unwrap(), "done");
    assert!(!gate.timed_out());
}

#[test]
fn a_buffer_dropped_while_cpu_work_writes_it_is_freed_only_after() {
    let _runtime = runtime_test();
    let (a, b) = (cpu_stream(), cpu_stream());
    let gate = Gate::closed();
    let len = 1 << 16;
    let mut victim = DeviceBuffer::<u32>::zeroed_on_device(Device::cpu(), len).unwrap();
    gated_fill(&a, &gate, &mut victim, 0xBAD).unwrap();
    // Dropping does not block, and the memory is not given back while the write is pending.
    drop(victim);
    let mut fresh: Vec<DeviceBuffer<u32>> =
        (0..8).map(|_| DeviceBuffer::<u32>::zeroed_on(&b, len).unwrap()).collect();
    for buffer in &mut fresh {
        add_one(&b, buffer).unwrap();
    }
    assert!(!a.query().unwrap(), "the gated write finished although its gate is closed");
    gate.open();
    a.synchronize().unwrap();
    for (index, buffer) in fresh.iter().enumerate() {
        let values = buffer.to_vec(&b).unwrap();
        assert!(values.iter().all(|&value| value == 1), "fresh buffer {index} clobbered");
    }
    assert!(!gate.timed_out());
}

#[test]
fn forgetting_a_pending_while_cpu_work_runs_is_memory_safe() {
    let _runtime = runtime_test();
    let (running, other) = (cpu_stream(), cpu_stream());
    let gate = Gate::closed();
    let len = 1 << 16;
    let mut buffer = DeviceBuffer::<u32>::zeroed_on_device(Device::cpu(), len).unwrap();
    gated_fill(&running, &gate, &mut buffer, 0xBAD).unwrap();
    let tensor = DeviceTensor::from_buffer(buffer, [len]).unwrap();
    std::mem::forget(tensor.to_host_async(&running).unwrap());
    drop(tensor);
    let mut fresh = Vec::new();
    for round in 1..=4u32 {
        let mut buffer = DeviceBuffer::<u32>::zeroed_on(&other, len).unwrap();
        for _ in 0..round {
            add_one(&other, &mut buffer).unwrap();
        }
        fresh.push((round, buffer));
    }
    assert!(!running.query().unwrap());
    gate.open();
    running.synchronize().unwrap();
    for (round, buffer) in &fresh {
        let values = buffer.to_vec(&other).unwrap();
        assert!(values.iter().all(|value| value == round), "buffer of round {round} clobbered");
    }
    assert!(!gate.timed_out());
}

#[test]
fn cpu_tensors_go_to_and_from_the_host() {
    let _runtime = runtime_test();
    let stream = cpu_stream();
    let data: Vec<f32> = (0..12).map(|value| value as f32).collect();
    let tensor = DeviceTensor::from_host(&stream, HostView::new(&data, [3, 4]).unwrap()).unwrap();
    assert_eq!(tensor.device(), Device::cpu());
    assert_eq!(tensor.shape(), [3, 4]);
    let back = tensor.to_host(&stream).unwrap();
    assert_eq!(back, HostTensor::new(data.clone(), [3, 4]).unwrap());

    let mut copy = DeviceTensor::<f32, 2>::zeros_on_device(Device::cpu(), [3, 4]).unwrap();
    assert_eq!(copy.to_host(&stream).unwrap().as_slice(), [0.0; 12]);
    copy.copy_from_host(&stream, HostView::new(&data, [3, 4]).unwrap()).unwrap();
    copy.buffer_mut().copy_from_device(&stream, tensor.buffer()).unwrap();
    let clone = copy.buffer().try_clone(&stream).unwrap();
    assert_eq!(clone.to_vec(&stream).unwrap(), data);
    let mut zeroed = clone;
    zeroed.fill_zero(&stream).unwrap();
    assert_eq!(zeroed.to_vec(&stream).unwrap(), vec![0.0; 12]);

    // Shape and length errors come before anything is enqueued.
    let wrong = [0.0f32; 12];
    assert_eq!(
        copy.copy_from_host(&stream, HostView::new(&wrong, [4, 3]).unwrap()),
        Err(Error::Shape { param: "data", dim: 0, expected: 3, got: 4 })
    );
    let mut short = [0.0f32; 11];
    assert_eq!(
        copy.buffer().copy_to_host(&stream, &mut short),
        Err(Error::Length { expected: 12, got: 11 })
    );
    assert_eq!(copy.expect_shape("x", [3, 4]), Ok(()));

    // Pinned buffers of the CPU, and zero-length data.
    let mut pinned = PinnedHostBuffer::<f32>::new_on_device(Device::cpu(), 12).unwrap();
    assert_eq!(pinned.device(), Device::cpu());
    tensor.buffer().copy_to_pinned(&stream, &mut pinned).unwrap();
    assert_eq!(pinned.as_slice().unwrap(), data.as_slice());
    let empty = DeviceTensor::<u8, 2>::zeros_on_device(Device::cpu(), [0, 5]).unwrap();
    let host = empty.to_host_async(&stream).unwrap().wait().unwrap();
    assert_eq!(host.shape(), [0, 5]);
    drop(pinned);
    assert!(crate::release_cached_pinned_memory().is_ok());
}

#[test]
fn a_cpu_kernel_call_goes_through_work_streams() {
    let _runtime = runtime_test();
    // What a generated wrapper with a CPU entry does, with a host function as the "entry".
    let stream = cpu_stream();
    let x = DeviceTensor::from_host(&stream, HostView::from(&[1u32, 2, 3])).unwrap();
    let mut y = DeviceTensor::<u32, 1>::zeros_on_device(Device::cpu(), [3]).unwrap();
    let mut work = WorkStreams::for_backends(&[Backend::Cuda, Backend::Cpu], &[&stream]).unwrap();
    assert_eq!(work.backend(), Backend::Cpu);
    assert_eq!(work.device(), Device::cpu());
    let x_address = Address(work.read_param_ptr("x", x.buffer()).unwrap() as usize);
    let y_address = Address(work.write_param_ptr("y", y.buffer_mut()).unwrap() as usize);
    // The aliasing check holds on the CPU too.
    assert!(matches!(work.read_param_ptr("y again", y.buffer()), Err(Error::InvalidArgument(_))));
    match work.backend() {
        Backend::Cpu => enqueue_host(&stream, move || {
            let (Address(x), Address(y)) = (x_address, y_address);
            for index in 0..3 {
                // SAFETY: the pointers are those of `x` (3 u32, read) and `y` (3 u32, written),
                // handed out for this call and recorded right after it is enqueued.
                unsafe {
                    (y as *mut u32).add(index).write((x as *const u32).add(index).read() * 10)
                };
            }
        })
        .unwrap(),
        Backend::Cuda => unreachable!("the streams are the CPU's"),
    }
    work.record_read(x.buffer());
    work.record_write(y.buffer_mut());
    work.recorded().unwrap();
    let pending = work.pending(|| Ok(())).unwrap();
    pending.wait().unwrap();
    assert_eq!(y.to_host(&stream).unwrap().as_slice(), [10, 20, 30]);
    // A wrapper with CUDA entries only refuses the CPU before handing out anything: with the
    // reason there is no GPU, or (a GPU is there) because its kernels are CUDA's only.
    match (WorkStreams::new(&[&stream]), crate::device::cuda_usable()) {
        (Err(error), Err(no_gpu)) => assert_eq!(error, no_gpu),
        (Err(Error::UnsupportedBackend { backend: Backend::Cpu, .. }), Ok(())) => {}
        (other, _) => panic!("a CUDA-only call accepted CPU streams: {other:?}"),
    }
    assert!(matches!(
        WorkStreams::for_backends(&[], &[&stream]),
        Err(Error::UnsupportedBackend { backend: Backend::Cpu, .. })
    ));
}

#[test]
fn objects_of_the_cpu_and_a_gpu_do_not_mix() {
    let _runtime = runtime_test();
    // A CUDA device value and its legacy stream: nothing below reaches CUDA, since every
    // mismatch is found before the runtime is called (so this runs without a GPU too).
    let gpu = Device::from_cuda_ordinal(0);
    let gpu_stream = Stream::default_stream_on(gpu);
    let cpu = cpu_stream();
    let mut tensor = DeviceTensor::from_host(&cpu, HostView::from(&[1.0f32, 2.0])).unwrap();
    let mismatch = |result: Result<()>, what: &str| match result {
        Err(Error::DeviceMismatch { found, expected, .. }) => {
            assert_ne!(found.backend(), expected.backend(), "{what}");
        }
        other => panic!("{what}: expected a device mismatch, got {other:?}"),
    };
    mismatch(tensor.to_host(&gpu_stream).map(drop), "to_host");
    mismatch(tensor.to_host_async(&gpu_stream).map(drop), "to_host_async");
    mismatch(tensor.copy_from_host(&gpu_stream, HostView::from(&[0.0f32; 2])), "copy_from_host");
    mismatch(tensor.buffer().try_clone(&gpu_stream).map(drop), "try_clone");
    mismatch(tensor.buffer_mut().fill_zero(&gpu_stream), "fill_zero");
    mismatch(tensor.buffer().device_ptr_for_read(&gpu_stream).map(drop), "device_ptr_for_read");
    mismatch(tensor.buffer_mut().record_write(&gpu_stream), "record_write");
    let event = cpu.record_event().unwrap();
    mismatch(gpu_stream.wait_event(&event), "wait_event");
    let pending = Pending::after(&[&cpu], || Ok(())).unwrap();
    mismatch(pending.then(&gpu_stream), "then");
    pending.wait().unwrap();
    mismatch(
        WorkStreams::for_backends(&[Backend::Cpu, Backend::Cuda], &[&cpu, &gpu_stream]).map(drop),
        "streams of a call",
    );
    // A GPU stream's call with a CPU tensor: the tensor is named.
    let mut work = WorkStreams::for_backends(&[Backend::Cuda], &[&gpu_stream]);
    if let Ok(work) = &mut work {
        match work.read_param_ptr("x", tensor.buffer()) {
            Err(error @ Error::DeviceMismatch { .. }) => {
                let text = error.to_string();
                assert!(text.contains("`x` is on the CPU"), "{text}");
                assert!(text.contains("CUDA device 0"), "{text}");
            }
            other => panic!("expected a device mismatch, got {other:?}"),
        }
    }
    // Nothing was left half done.
    tensor.buffer().synchronize().unwrap();
    assert_eq!(tensor.to_host(&cpu).unwrap().as_slice(), [1.0, 2.0]);
}

#[test]
fn cpu_runtime_statuses_are_typed_errors() {
    let _runtime = runtime_test();
    // 719 = cudaErrorLaunchFailure: what a trapping CPU kernel leaves as its sticky error.
    match check_status(Backend::Cpu, choreo_sys::cudaError_t(719), "k") {
        Err(error @ Error::CpuRuntime { code: 719, call: "k", .. }) => {
            let Error::CpuRuntime { name, .. } = &error else { unreachable!() };
            assert_eq!(name, "cudaErrorLaunchFailure");
            assert!(error.to_string().starts_with("CPU runtime error 719"), "{error}");
            assert_eq!(error.cuda_code(), Some(719));
            assert!(!error.is_no_gpu());
        }
        other => panic!("expected a CPU runtime error, got {other:?}"),
    }
    assert_eq!(check_status(Backend::Cpu, choreo_sys::cudaError_t(0), "k"), Ok(()));
    let message = EntryMessage::new();
    assert!(matches!(
        message.result_for(Backend::Cpu, 719, "f"),
        Err(Error::CpuRuntime { code: 719, call: "f", .. })
    ));
    assert_eq!(message.result_for(Backend::Cpu, 0, "f"), Ok(()));
}

#[test]
fn the_cpu_device_describes_itself() {
    let _runtime = runtime_test();
    let cpu = Device::cpu();
    assert!(cpu.name().unwrap().starts_with("CPU ("), "{:?}", cpu.name());
    assert_eq!(cpu.compute_capability(), Ok((0, 0)));
    assert!(cpu.multiprocessor_count().unwrap() >= 1);
    let memory = cpu.memory_info().unwrap();
    assert!(memory.total >= memory.free, "{memory:?}");
    cpu.synchronize().unwrap();
    let _guard = cpu.bind().unwrap();
    cpu.make_current().unwrap();
}

#[test]
fn without_a_gpu_the_default_device_is_the_cpu() {
    let _runtime = runtime_test();
    let gpu_usable = crate::device::cuda_usable().is_ok();
    let forced = std::env::var_os(crate::DEVICE_ENV).filter(|value| !value.is_empty());
    let expected = match forced.as_ref().and_then(|value| value.to_str()) {
        Some("cpu") => Device::cpu(),
        None if !gpu_usable => Device::cpu(),
        // A GPU machine or another setting: checked by the tests that run there.
        _ => return,
    };
    assert_eq!(Device::default_device(), Ok(expected));
    assert_eq!(crate::init(), Ok(expected));
    assert_eq!(Stream::new().unwrap().device(), Ok(expected));
    let legacy = Stream::default_stream();
    assert_eq!(legacy.device(), Ok(expected));
    assert_eq!(legacy.backend(), Ok(Backend::Cpu));
    // The legacy stream works like any other on the CPU.
    let tensor = DeviceTensor::from_host(&legacy, HostView::from(&[3i32, 4])).unwrap();
    assert_eq!(tensor.device(), expected);
    assert_eq!(tensor.to_host(&legacy).unwrap().as_slice(), [3, 4]);
    legacy.synchronize().unwrap();
    assert_eq!(DeviceTensor::<f32, 1>::zeros([2]).unwrap().device(), expected);
    assert_eq!(Event::new().unwrap().device(), expected);
    assert_eq!(PinnedHostBuffer::<u8>::new(4).unwrap().device(), expected);
}

unsafe extern "C" {
    /// `src/cpu_test_kernels.cpp`: enqueues a CPU kernel on `stream` that writes `value` to
    /// `out[0..len]`; returns the launch's status.
    fn choreo_rs_test_fill(
        out: *mut u32,
        len: u64,
        value: u32,
        stream: choreo_sys::cudaStream_t,
    ) -> i32;
}

#[test]
fn a_cpu_kernel_launched_like_a_generated_wrapper_does_runs_in_stream_order() {
    let _runtime = runtime_test();
    let (a, b) = (cpu_stream(), cpu_stream());
    let len = 1000;
    let mut out = DeviceTensor::<u32, 1>::zeros_on_device(Device::cpu(), [len]).unwrap();
    // Hold `a`, and write the tensor there first: the kernel on `b` must wait for it.
    let gate = Gate::closed();
    gated_fill(&a, &gate, out.buffer_mut(), 1).unwrap();
    let mut work = WorkStreams::for_backends(&[Backend::Cuda, Backend::Cpu], &[&b]).unwrap();
    let pointer = work.write_param_ptr("out", out.buffer_mut()).unwrap();
    let status = match work.backend() {
        // SAFETY: `pointer` is the tensor's CPU memory of `len` u32, handed out for this call
        // (the stream waits for the earlier write) and recorded right after; `b` is a live CPU
        // stream.
        Backend::Cpu => unsafe { choreo_rs_test_fill(pointer, len as u64, 7, b.as_raw()) },
        Backend::Cuda => unreachable!("the stream is the CPU's"),
    };
    work.record_write(out.buffer_mut());
    EntryMessage::new().result_for(work.backend(), status, "fill").unwrap();
    work.recorded().unwrap();
    let pending = work.pending(|| Ok(())).unwrap();
    assert!(!pending.is_complete().unwrap(), "the kernel ran before the write it waits for");
    gate.open();
    pending.wait().unwrap();
    assert!(out.to_host(&b).unwrap().as_slice().iter().all(|&value| value == 7));
    assert!(!gate.timed_out());
}

// Lazily recorded points (`crate::point`): when the end of tracked work is recorded, and that
// waiting for it still means exactly that work. The bodies take the device, so that the same
// checks run on a GPU (the `#[ignore]`d `gpu_*` tests) and on the CPU here.

/// What a generated wrapper does for a call that reads `source` and writes `target` on
/// `stream`: hand out the pointers, `enter`, the "entry" (a copy, behind `gate` if given),
/// record the accesses, and return the call's `Pending`.
fn wrapper_call(
    stream: &Stream,
    source: &DeviceBuffer<u32>,
    target: &mut DeviceBuffer<u32>,
    gate: Option<&Gate>,
) -> Result<Pending<'static, ()>> {
    let mut work = WorkStreams::for_backends(&[Backend::Cuda, Backend::Cpu], &[stream])?;
    let from = work.read_param_ptr("source", source)?;
    let to = work.write_param_ptr("target", target)?;
    {
        let _device = work.enter()?;
        if let Some(gate) = gate {
            let gate = gate.clone();
            enqueue_host(stream, move || gate.pass())?;
        }
        let bytes = source.len().min(target.len()) * size_of::<u32>();
        crate::buffer::enqueue_copy(
            to.cast(),
            from.cast(),
            bytes,
            choreo_sys::cudaMemcpyKind::DeviceToDevice,
            stream,
        )?;
    }
    work.record_read(source);
    work.record_write(target);
    work.recorded()?;
    work.pending(|| Ok(()))
}

fn buffer_of(stream: &Stream, values: &[u32]) -> DeviceBuffer<u32> {
    let buffer = DeviceBuffer::from_host(stream, values).unwrap();
    buffer.synchronize().unwrap();
    buffer
}

/// A loop of calls on one stream with the same buffers, whose `Pending`s are dropped, records
/// no event; a read on another stream then records exactly one, on demand.
fn steady_state_records_nothing(device: Device) {
    let s = Stream::new_on_device(device).unwrap();
    let t = Stream::new_on_device(device).unwrap();
    let a = buffer_of(&s, &[1, 2, 3, 4]);
    let mut c = buffer_of(&s, &[0; 4]);
    wrapper_call(&s, &a, &mut c, None).unwrap().wait().unwrap();
    let before = s.bookkeeping_records();
    for _ in 0..100 {
        drop(wrapper_call(&s, &a, &mut c, None).unwrap());
    }
    // Copies (tracked operations of the runtime) are lazy too.
    for _ in 0..10 {
        c.copy_from_device(&s, &a).unwrap();
    }
    assert_eq!(s.bookkeeping_records(), before, "the steady state recorded events");
    // Another stream reads `c`: the open point is recorded now, once.
    let mut d = buffer_of(&t, &[0; 4]);
    d.copy_from_device(&t, &c).unwrap();
    assert_eq!(s.bookkeeping_records(), before + 1);
    assert_eq!(d.to_vec(&t).unwrap(), [1, 2, 3, 4]);
    assert_eq!(s.bookkeeping_records(), before + 1);
}

/// A call on the same stream that does not replace every reference to the open point seals
/// it first: a later reader on another stream waits for the earlier call only, not for the
/// (held) later one.
fn a_call_that_does_not_supersede_seals_the_point(device: Device) {
    let s = Stream::new_on_device(device).unwrap();
    let t = Stream::new_on_device(device).unwrap();
    let (a, b) = (buffer_of(&s, &[5, 6]), buffer_of(&s, &[7, 8]));
    let (mut c, mut e) = (buffer_of(&s, &[0; 2]), buffer_of(&s, &[0; 2]));
    drop(wrapper_call(&s, &a, &mut c, None).unwrap());
    let before = s.bookkeeping_records();
    let gate = Gate::closed();
    // `c` keeps the first call's point, which this call (of other buffers) does not replace.
    let held = wrapper_call(&s, &b, &mut e, Some(&gate)).unwrap();
    assert_eq!(s.bookkeeping_records(), before + 1, "the first call's point was not sealed");
    // `t` waits for the first call only: this completes while the second call is held.
    let mut d = buffer_of(&t, &[0; 2]);
    d.copy_from_device(&t, &c).unwrap();
    assert_eq!(d.to_vec(&t).unwrap(), [5, 6]);
    assert!(!held.is_complete().unwrap());
    gate.open();
    held.wait().unwrap();
    assert!(!gate.timed_out(), "the reader waited for the later call");
    assert_eq!(e.to_vec(&s).unwrap(), [7, 8]);
}

/// Whoever needs the end of the work records it, once: `Pending::wait`, a host query or wait,
/// a free, a `Pending` held across the next call.
fn points_are_recorded_when_needed(device: Device) {
    let s = Stream::new_on_device(device).unwrap();
    let a = buffer_of(&s, &[9, 10, 11]);
    let mut c = buffer_of(&s, &[0; 3]);
    drop(wrapper_call(&s, &a, &mut c, None).unwrap());
    let mut count = s.bookkeeping_records();
    let expect_one_more = |count: &mut u64, what: &str| {
        *count += 1;
        assert_eq!(s.bookkeeping_records(), *count, "{what}");
    };
    wrapper_call(&s, &a, &mut c, None).unwrap().wait().unwrap();
    expect_one_more(&mut count, "Pending::wait records the point");
    drop(wrapper_call(&s, &a, &mut c, None).unwrap());
    c.synchronize().unwrap();
    expect_one_more(&mut count, "a host wait records the point");
    drop(wrapper_call(&s, &a, &mut c, None).unwrap());
    let _ = c.is_idle().unwrap();
    expect_one_more(&mut count, "a host query records the point");
    // A `Pending` held across a call that replaces every buffer entry: the point is sealed
    // before that call, so waiting for the `Pending` does not include it.
    let held = wrapper_call(&s, &a, &mut c, None).unwrap();
    let gate = Gate::closed();
    let later = wrapper_call(&s, &a, &mut c, Some(&gate)).unwrap();
    expect_one_more(&mut count, "a held Pending makes the next call seal the point");
    held.wait().unwrap();
    assert_eq!(s.bookkeeping_records(), count, "the sealed point was recorded twice");
    assert!(!later.is_complete().unwrap());
    gate.open();
    later.wait().unwrap();
    expect_one_more(&mut count, "Pending::wait of the later call");
    // A free records the point of the last access.
    let mut scratch = buffer_of(&s, &[0; 3]);
    count = s.bookkeeping_records();
    drop(wrapper_call(&s, &a, &mut scratch, None).unwrap());
    drop(scratch);
    assert_eq!(s.bookkeeping_records(), count + 1, "a free records the point");
    assert!(!gate.timed_out());
    assert_eq!(c.to_vec(&s).unwrap(), [9, 10, 11]);
}

/// A stream dropped while a buffer still refers to its open point records the point first;
/// forgotten `Pending`s keep their points alive (and sealed before the next call).
fn dropped_streams_and_forgotten_pendings(device: Device) {
    let t = Stream::new_on_device(device).unwrap();
    let a = buffer_of(&t, &[1, 1, 2, 3]);
    let mut c = buffer_of(&t, &[0; 4]);
    {
        let s = Stream::new_on_device(device).unwrap();
        drop(wrapper_call(&s, &a, &mut c, None).unwrap());
        std::mem::forget(wrapper_call(&s, &a, &mut c, None).unwrap());
        drop(wrapper_call(&s, &a, &mut c, None).unwrap());
    }
    assert_eq!(c.to_vec(&t).unwrap(), [1, 1, 2, 3]);
    // A held call on a stream that is dropped right after: its end (which `c` still needs) is
    // recorded when the stream is dropped, and a reader of `c` on `t` waits for it. The held
    // call writes new values, so the reader's result shows whether it waited. Nothing here
    // depends on timing: everything that blocks the host (`buffer_of` synchronises) happens
    // before the gate is held, and the gate is opened by a helper as soon as the reader is
    // enqueued, or after a while if the main thread blocks before that (compute-sanitizer
    // makes the destruction of a stream wait for its work).
    let mut d = buffer_of(&t, &[0; 4]);
    let b = buffer_of(&t, &[5, 6, 7, 8]);
    let s = Stream::new_on_device(device).unwrap();
    let gate = Gate::closed();
    drop(wrapper_call(&s, &b, &mut c, Some(&gate)).unwrap());
    let (enqueued, opener) = {
        let (sender, receiver) = std::sync::mpsc::channel::<()>();
        let gate = gate.clone();
        let opener = thread::spawn(move || {
            let _ = receiver.recv_timeout(Duration::from_secs(2));
            gate.open();
        });
        (sender, opener)
    };
    drop(s);
    d.copy_from_device(&t, &c).unwrap();
    let _ = enqueued.send(());
    opener.join().unwrap();
    assert_eq!(d.to_vec(&t).unwrap(), [5, 6, 7, 8], "the reader did not wait for the held call");
    assert!(!gate.timed_out());
}

/// Calls from several threads on one stream, each with its own buffers, then read on another
/// stream: every result is there.
fn threads_share_a_stream(device: Device) {
    let s = Stream::new_on_device(device).unwrap();
    let t = Stream::new_on_device(device).unwrap();
    let results: Vec<DeviceBuffer<u32>> = thread::scope(|scope| {
        let workers: Vec<_> = (0..4u32)
            .map(|worker| {
                let s = &s;
                scope.spawn(move || {
                    let source = buffer_of(s, &[worker; 64]);
                    let mut target = buffer_of(s, &[u32::MAX; 64]);
                    for _ in 0..50 {
                        drop(wrapper_call(s, &source, &mut target, None).unwrap());
                    }
                    target
                })
            })
            .collect();
        workers.into_iter().map(|worker| worker.join().unwrap()).collect()
    });
    for (worker, target) in results.iter().enumerate() {
        let mut copy = buffer_of(&t, &[0; 64]);
        copy.copy_from_device(&t, target).unwrap();
        assert_eq!(copy.to_vec(&t).unwrap(), [worker as u32; 64]);
    }
}

#[test]
fn lazy_points_are_not_recorded_in_the_steady_state() {
    let _runtime = runtime_test();
    steady_state_records_nothing(Device::cpu());
}

#[test]
fn lazy_points_are_sealed_by_a_call_that_does_not_supersede_them() {
    let _runtime = runtime_test();
    a_call_that_does_not_supersede_seals_the_point(Device::cpu());
}

#[test]
fn lazy_points_are_recorded_when_needed() {
    let _runtime = runtime_test();
    points_are_recorded_when_needed(Device::cpu());
}

#[test]
fn lazy_points_survive_dropped_streams_and_forgotten_pendings() {
    let _runtime = runtime_test();
    dropped_streams_and_forgotten_pendings(Device::cpu());
}

#[test]
fn lazy_points_with_threads_on_one_stream() {
    let _runtime = runtime_test();
    threads_share_a_stream(Device::cpu());
}

fn gpu() -> Device {
    Device::cuda(0).expect("these tests need a CUDA GPU")
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_lazy_points_are_not_recorded_in_the_steady_state() {
    steady_state_records_nothing(gpu());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_lazy_points_are_sealed_by_a_call_that_does_not_supersede_them() {
    a_call_that_does_not_supersede_seals_the_point(gpu());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_lazy_points_are_recorded_when_needed() {
    points_are_recorded_when_needed(gpu());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_lazy_points_survive_dropped_streams_and_forgotten_pendings() {
    dropped_streams_and_forgotten_pendings(gpu());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_lazy_points_with_threads_on_one_stream() {
    threads_share_a_stream(gpu());
}

// Bounds records (`crate::bounds_pool`): slots of mapped pinned memory that the host zeroes and
// reads, reused only once the call that may write them has completed.

/// The accesses of the bounds calls below.
static BOUNDS_SITES: [crate::kernels::BoundsSite; 1] =
    [crate::kernels::BoundsSite { param: "x", location: "t.co:3:5" }];

/// What a generated wrapper with a bounds record does for one call on `stream`: the record,
/// its device address to the "entry", which (behind `gate`, if given) copies `failure` into
/// the record when `write`, and sets the used flag when `used`; the call recorded on the record;
/// its `Pending` checks the record. Returns the `Pending` and the record's host address.
fn bounds_call(
    stream: &Stream,
    failure: &DeviceBuffer<u64>,
    gate: Option<&Gate>,
    used: bool,
    write: bool,
) -> Result<(Pending<'static, ()>, usize)> {
    let mut work = WorkStreams::for_backends(&[Backend::Cuda, Backend::Cpu], &[stream])?;
    let mut record = crate::kernels::BoundsRecord::new(&work, "f", &BOUNDS_SITES)?;
    let address = record.slot_address();
    let from = work.read_param_ptr("failure", failure)?;
    let to = record.device_ptr();
    {
        let _device = work.enter()?;
        if let Some(gate) = gate {
            let gate = gate.clone();
            enqueue_host(stream, move || gate.pass())?;
        }
        if used {
            // SAFETY: the flag is a byte of `record`, which lives (unmoved) until after this.
            unsafe { record.used_flag().write(1) };
        }
        if write {
            crate::buffer::enqueue_copy(
                to.cast(),
                from.cast(),
                4 * size_of::<u64>(),
                choreo_sys::cudaMemcpyKind::Default,
                stream,
            )?;
        }
    }
    work.record_read(failure);
    work.record_bounds(&mut record);
    work.recorded()?;
    Ok((work.pending(move || record.check())?, address))
}

/// Records held at once until one of them is the slot at `address`, or as many as the pool has
/// free and retiring slots plus one (so every slot that may be given out is given out): whether
/// `address` came, and the records (to be dropped by the caller).
fn take_all_slots(
    work: &WorkStreams<'_>,
    address: usize,
) -> (bool, Vec<crate::kernels::BoundsRecord>) {
    let (free, retiring) = crate::bounds_pool::counts(work.backend());
    let mut records = Vec::new();
    for _ in 0..free + retiring + 1 {
        let record = crate::kernels::BoundsRecord::new(work, "f", &BOUNDS_SITES).unwrap();
        assert_eq!(record.unused_words(), Some([0; 4]), "a new record is not zeroed");
        let found = record.slot_address() == address;
        records.push(record);
        if found {
            return (true, records);
        }
    }
    (false, records)
}

fn bounds_records_are_reused_only_after_their_calls(device: Device) {
    let s = Stream::new_on_device(device).unwrap();
    let t = Stream::new_on_device(device).unwrap();
    // flag 1, access 0; dimension 0; index 20; extent 16.
    let failure = DeviceBuffer::from_host(&s, &[1u64, 0, 20, 16]).unwrap();
    failure.synchronize().unwrap();
    let expected = Error::OutOfBounds {
        function: "f",
        param: "x",
        dim: Some(0),
        index: 20,
        extent: 16,
        location: "t.co:3:5",
    };
    // A failed check fails `wait()`; a call whose checks were all off (used flag 0) reads
    // nothing, even if the record was written; one that wrote nothing succeeds.
    assert_eq!(
        bounds_call(&s, &failure, None, true, true).unwrap().0.wait(),
        Err(expected.clone())
    );
    assert_eq!(bounds_call(&s, &failure, None, false, true).unwrap().0.wait(), Ok(()));
    assert_eq!(bounds_call(&s, &failure, None, true, false).unwrap().0.wait(), Ok(()));
    assert!(
        block_on(bounds_call(&s, &failure, None, true, true).unwrap().0.into_future())
            .is_err_and(|error| error == expected)
    );

    // A call held at a gate, its `Pending` dropped: while it may still write its record, the
    // slot is given to no other record, however many are taken.
    let gate = Gate::closed();
    let (pending, held) = bounds_call(&s, &failure, Some(&gate), true, true).unwrap();
    drop(pending);
    let work = WorkStreams::for_backends(&[Backend::Cuda, Backend::Cpu], &[&t]).unwrap();
    let (found, records) = take_all_slots(&work, held);
    assert!(!found, "the slot of a running call was reused");
    assert!(records.len() > crate::bounds_pool::SLOTS_PER_BLOCK, "{}", records.len());
    drop(records);
    // Once the call has completed (and written the slot), the slot comes back, zeroed.
    gate.open();
    s.synchronize().unwrap();
    let (found, records) = take_all_slots(&work, held);
    assert!(found, "the slot of a completed call was not reused");
    drop(records);
    assert!(!gate.timed_out());

    // A forgotten `Pending`: its slot is never reused, even after its call completed.
    let gate = Gate::closed();
    let (pending, forgotten) = bounds_call(&s, &failure, Some(&gate), true, true).unwrap();
    std::mem::forget(pending);
    gate.open();
    s.synchronize().unwrap();
    let (found, records) = take_all_slots(&work, forgotten);
    assert!(!found, "the slot of a forgotten call was reused");
    drop(records);
    // Calls in flight at once each have a record of their own.
    let gate = Gate::closed();
    let calls: Vec<_> = (0..8)
        .map(|index| {
            let gate = (index == 0).then_some(&gate);
            bounds_call(&s, &failure, gate, true, index % 2 == 0).unwrap().0
        })
        .collect();
    gate.open();
    for (index, call) in calls.into_iter().enumerate() {
        let want = if index % 2 == 0 { Err(expected.clone()) } else { Ok(()) };
        assert_eq!(call.wait(), want, "call {index}");
    }
    assert!(!gate.timed_out());
}

#[test]
fn bounds_records_are_reused_only_after_their_calls_never_after_forget_on_the_cpu() {
    // The pool is process-wide: no other unit test runs the runtime meanwhile.
    let _exclusive =
        crate::error::DEFERRED_SLOT_USERS.write().unwrap_or_else(PoisonError::into_inner);
    bounds_records_are_reused_only_after_their_calls(Device::cpu());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_bounds_records_are_reused_only_after_their_calls_never_after_forget() {
    let _exclusive =
        crate::error::DEFERRED_SLOT_USERS.write().unwrap_or_else(PoisonError::into_inner);
    bounds_records_are_reused_only_after_their_calls(gpu());
}
