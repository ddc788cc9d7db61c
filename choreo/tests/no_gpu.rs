//! The runtime on a machine without a usable GPU (CI, this project's build machines): every
//! entry point that needs CUDA returns a clear `Err` (no driver, no device, or no CUDA runtime
//! linked), nothing panics or aborts, and what needs no GPU still works — the default device
//! is then the CPU (unless `CHOREO_DEVICE=cuda` asks for a GPU, which is then an error).
//!
//! On a machine with a GPU the same calls must succeed instead, so these tests check real
//! behaviour everywhere and never pass vacuously.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use choreo::{
    Device, DeviceBuffer, DeviceTensor, Error, Event, HostView, Pending, PinnedHostBuffer, Stream,
};

/// What the raw CUDA runtime says about this machine, asked without going through the crate
/// under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Machine {
    /// choreo-sys was built without a toolkit.
    NoRuntime,
    /// cudaGetDeviceCount failed with this status.
    NoGpu(i32),
    /// This many devices.
    Gpus(i32),
}

fn machine() -> Machine {
    if !choreo::sys::CUDART_LINKED {
        return Machine::NoRuntime;
    }
    let mut count = 0;
    // SAFETY: `count` is a valid, writable c_int for the duration of the call.
    let status = unsafe { choreo::sys::cudaGetDeviceCount(&mut count) };
    if status.is_success() && count > 0 { Machine::Gpus(count) } else { Machine::NoGpu(status.0) }
}

/// Checks that `result` is the "no GPU here" error this machine must produce, with a message
/// that names the problem.
#[track_caller]
fn assert_no_gpu_error<T: std::fmt::Debug>(what: &str, result: choreo::Result<T>) {
    let error = match result {
        Ok(value) => panic!("{what}: expected an error on a machine without a GPU, got {value:?}"),
        Err(error) => error,
    };
    assert!(error.is_no_gpu(), "{what}: not a no-GPU error: {error:?}");
    let text = error.to_string();
    match machine() {
        Machine::NoRuntime => {
            assert_eq!(error, Error::RuntimeNotLinked, "{what}");
            assert!(text.contains("CUDA runtime not linked"), "{what}: {text}");
        }
        Machine::NoGpu(35) => {
            assert!(matches!(error, Error::InsufficientDriver { .. }), "{what}: {error:?}");
            assert!(
                text.contains("CUDA driver is missing or too old for CUDA runtime 13.0"),
                "{what}: {text}"
            );
        }
        Machine::NoGpu(100) => {
            assert_eq!(error, Error::NoDevice, "{what}");
            assert!(text.contains("no CUDA-capable device"), "{what}: {text}");
        }
        other => panic!("{what}: unexpected machine state {other:?} for error {error:?}"),
    }
}

/// The value of `CHOREO_DEVICE` this test process runs with (`None`: unset or empty).
fn device_env() -> Option<String> {
    std::env::var(choreo::DEVICE_ENV).ok().filter(|value| !value.trim().is_empty())
}

#[test]
fn every_cuda_entry_point_fails_cleanly_without_a_gpu_and_works_with_one() {
    let machine = machine();
    if let Machine::Gpus(count) = machine {
        // With a GPU, the same entry points must work.
        assert_eq!(Device::count().unwrap(), usize::try_from(count).unwrap());
        let gpu = Device::cuda(0).unwrap();
        let stream = Stream::new_on_device(gpu).unwrap();
        Stream::default_stream_on(gpu).synchronize().unwrap();
        Event::new_on_device(gpu).unwrap();
        DeviceBuffer::<f32>::zeroed_on_device(gpu, 16).unwrap();
        DeviceTensor::<f32, 2>::zeros_on_device(gpu, [2, 3]).unwrap();
        PinnedHostBuffer::<u8>::new_on_device(gpu, 16).unwrap();
        let data = [1.0f32, 2.0, 3.0];
        let tensor = DeviceTensor::from_host(&stream, HostView::from(&data)).unwrap();
        assert_eq!(tensor.to_host(&stream).unwrap().as_slice(), data);
        if device_env().is_none() {
            assert_eq!(Device::default_device(), Device::current(), "a GPU is the default");
        }
        return;
    }

    // Device::count reports "no devices" as Ok(0); every other case is an error.
    match (machine, Device::count()) {
        (Machine::NoGpu(100), Ok(count)) => assert_eq!(count, 0),
        (_, result) => assert_no_gpu_error("Device::count", result),
    }
    assert_no_gpu_error("Device::current", Device::current());
    assert_no_gpu_error("Device::new(0)", Device::new(0));
    assert_no_gpu_error("Device::cuda(0)", Device::cuda(0));
    assert_no_gpu_error("Device::set(0)", Device::set(0));
    // Nothing was allocated, so there is no pinned memory of CUDA to give back; nothing was
    // created, so no destructor could have deferred an error.
    assert_eq!(choreo::take_deferred_error(), None);
}

#[test]
fn without_a_gpu_the_default_device_is_the_cpu_unless_cuda_is_asked_for() {
    if let Machine::Gpus(_) = machine() {
        return; // Checked by the test above.
    }
    match device_env().as_deref().map(str::trim) {
        Some(value) if value.eq_ignore_ascii_case("cuda") => {
            // A GPU was asked for: everything that uses the default device says why there is
            // none.
            assert_no_gpu_error("Device::default_device", Device::default_device());
            assert_no_gpu_error("init", choreo::init());
            assert_no_gpu_error("Stream::new", Stream::new());
            let legacy = Stream::default_stream();
            assert_no_gpu_error("default stream synchronize", legacy.synchronize());
            assert_no_gpu_error("default stream query", legacy.query());
            assert_no_gpu_error("default stream record_event", legacy.record_event());
            assert_no_gpu_error("Event::new", Event::new());
            assert_no_gpu_error("DeviceBuffer::zeroed", DeviceBuffer::<f32>::zeroed(16));
            assert_no_gpu_error("DeviceTensor::zeros", DeviceTensor::<f32, 2>::zeros([2, 3]));
            assert_no_gpu_error("PinnedHostBuffer::new", PinnedHostBuffer::<f32>::new(16));
            assert_no_gpu_error(
                "DeviceBuffer::from_host",
                DeviceBuffer::from_host(&Stream::default_stream(), &[1.0f32, 2.0]),
            );
            assert_no_gpu_error("Pending::after", Pending::after(&[&legacy], || Ok(())));
        }
        Some(value) if !value.eq_ignore_ascii_case("cpu") => {
            assert!(matches!(Device::default_device(), Err(Error::InvalidDeviceSelection { .. })));
        }
        _ => {
            // The CPU: the same calls work.
            let cpu = Device::cpu();
            assert_eq!(Device::default_device(), Ok(cpu));
            assert_eq!(choreo::init(), Ok(cpu));
            let stream = Stream::new().unwrap();
            assert_eq!(stream.device(), Ok(cpu));
            let legacy = Stream::default_stream();
            assert_eq!(legacy.device(), Ok(cpu));
            legacy.synchronize().unwrap();
            assert!(legacy.query().is_ok());
            legacy.record_event().unwrap().synchronize().unwrap();
            assert_eq!(Event::new().unwrap().device(), cpu);
            assert_eq!(DeviceBuffer::<f32>::zeroed(16).unwrap().device(), cpu);
            let zeros = DeviceTensor::<f32, 2>::zeros([2, 3]).unwrap();
            assert_eq!(zeros.to_host(&stream).unwrap().as_slice(), [0.0; 6]);
            let pinned = PinnedHostBuffer::from_slice(&[1u8, 2, 3]).unwrap();
            assert_eq!(pinned.as_slice().unwrap(), [1, 2, 3]);
            let data = [1u8, 2, 3, 4, 5, 6];
            let tensor =
                DeviceTensor::from_host(&legacy, HostView::new(&data, [2, 3]).unwrap()).unwrap();
            assert_eq!(tensor.to_host_async(&stream).unwrap().wait().unwrap().as_slice(), data);
            Pending::after(&[&legacy], || Ok(())).unwrap().wait().unwrap();
            assert_eq!(choreo::take_deferred_error(), None);
        }
    }
}

#[test]
fn versions_are_reported_without_a_gpu() {
    if machine() == Machine::NoRuntime {
        assert_eq!(choreo::runtime_version(), Err(Error::RuntimeNotLinked));
        return;
    }
    assert_eq!(choreo::runtime_version().unwrap(), (13, 0));
    let driver = choreo::driver_version().unwrap();
    match machine() {
        Machine::NoGpu(35) => assert!(driver.is_none_or(|(major, _)| major < 13), "{driver:?}"),
        _ => assert!(driver.is_some()),
    }
}

/// A waker that counts wake-ups.
struct CountingWaker(std::sync::atomic::AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn pending_without_device_work_needs_no_gpu() {
    let ready = Pending::ready(41);
    assert!(ready.is_complete().unwrap());
    assert!(ready.events().unwrap().is_empty());
    assert_eq!(ready.map(|value| Ok(value + 1)).wait().unwrap(), 42);

    let mut output = vec![0u32; 3];
    let copy_back = Pending::from_parts(Vec::new(), || {
        output.copy_from_slice(&[7, 8, 9]);
        Ok("done")
    });
    let joined = copy_back.join(Pending::ready(5u8));
    assert_eq!(joined.wait().unwrap(), ("done", 5));
    assert_eq!(output, [7, 8, 9]);

    // Errors of the finishing step come out of `wait`.
    let failing: Pending<'_, ()> = Pending::from_parts(Vec::new(), || Err(Error::NoDevice));
    assert_eq!(failing.wait(), Err(Error::NoDevice));

    // A dropped Pending never runs its finishing step.
    let mut untouched = [1u8; 2];
    drop(Pending::from_parts(Vec::new(), || {
        untouched = [0; 2];
        Ok(())
    }));
    assert_eq!(untouched, [1, 1]);
}

#[test]
fn pending_future_of_completed_work_is_ready_at_once() {
    let counter = Arc::new(CountingWaker(std::sync::atomic::AtomicUsize::new(0)));
    let waker = Waker::from(Arc::clone(&counter));
    let mut context = Context::from_waker(&waker);
    let mut future = pin!(std::future::IntoFuture::into_future(Pending::ready(vec![1, 2, 3])));
    match future.as_mut().poll(&mut context) {
        Poll::Ready(Ok(value)) => assert_eq!(value, [1, 2, 3]),
        other => panic!("expected Ready(Ok), got {other:?}"),
    }
    // Polling again after completion is an error, not a panic.
    match future.as_mut().poll(&mut context) {
        Poll::Ready(Err(Error::InvalidArgument(message))) => {
            assert!(message.contains("after it completed"), "{message}")
        }
        other => panic!("expected an error, got {other:?}"),
    }
    assert_eq!(counter.0.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[test]
fn then_of_completed_work_enqueues_nothing() {
    // No events: nothing to wait for, so even the no-GPU machine accepts it.
    Pending::ready(()).then(&Stream::default_stream()).unwrap();
}

#[test]
fn error_messages_name_the_problem() {
    let cases: Vec<(Error, Vec<&str>)> = vec![
        (Error::NoDevice, vec!["no CUDA-capable device"]),
        (
            Error::InsufficientDriver { driver: 0, runtime: 13000 },
            vec!["CUDA driver is missing or too old for CUDA runtime 13.0", "no CUDA driver"],
        ),
        (
            Error::InsufficientDriver { driver: 12040, runtime: 13000 },
            vec!["too old for CUDA runtime 13.0", "supports CUDA 12.4"],
        ),
        (Error::RuntimeNotLinked, vec!["CUDA runtime not linked", "without a CUDA toolkit"]),
        (
            Error::NotBuilt { function: "seed::matmul" },
            vec!["kernels not built", "seed::matmul", "stub build"],
        ),
        (
            Error::Shape { param: "lhs", dim: 1, expected: 64, got: 32 },
            vec!["`lhs`", "dimension 1", "32", "expected 64"],
        ),
        (Error::Length { expected: 6, got: 5 }, vec!["expected 6 elements, got 5"]),
        (Error::InvalidArgument("bad thing".into()), vec!["invalid argument: bad thing"]),
        (Error::OutOfHostMemory { bytes: 1024 }, vec!["out of host memory", "1024 bytes"]),
        (
            Error::Cuda {
                code: 2,
                name: "cudaErrorMemoryAllocation".into(),
                message: "out of memory".into(),
                call: "cudaMallocAsync",
            },
            vec!["CUDA error 2", "cudaErrorMemoryAllocation", "cudaMallocAsync", "out of memory"],
        ),
        (
            Error::Deferred {
                during: "dropping a DeviceBuffer",
                source: Box::new(Error::NoDevice),
            },
            vec!["dropping a DeviceBuffer", "reported late", "no CUDA-capable device"],
        ),
    ];
    for (error, needles) in cases {
        let text = error.to_string();
        for needle in needles {
            assert!(text.contains(needle), "{error:?}: {text:?} lacks {needle:?}");
        }
    }
}

#[test]
fn errors_classify_themselves() {
    assert!(Error::NoDevice.is_no_gpu());
    assert!(Error::RuntimeNotLinked.is_no_gpu());
    assert!(Error::InsufficientDriver { driver: 0, runtime: 13000 }.is_no_gpu());
    assert!(Error::Deferred { during: "x", source: Box::new(Error::NoDevice) }.is_no_gpu());
    assert!(!Error::NotBuilt { function: "f" }.is_no_gpu());
    assert!(!Error::Length { expected: 1, got: 2 }.is_no_gpu());
    assert_eq!(Error::NoDevice.cuda_code(), Some(100));
    assert_eq!(Error::InsufficientDriver { driver: 0, runtime: 13000 }.cuda_code(), Some(35));
    assert_eq!(Error::Length { expected: 1, got: 2 }.cuda_code(), None);
    let deferred = Error::Deferred { during: "x", source: Box::new(Error::NoDevice) };
    let source = std::error::Error::source(&deferred).expect("deferred errors have a source");
    assert_eq!(source.to_string(), Error::NoDevice.to_string());
}
