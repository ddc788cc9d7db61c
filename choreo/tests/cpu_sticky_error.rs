//! A CPU kernel that traps leaves a *sticky* error, as a faulting CUDA kernel does: the call
//! that finds it and every later call of the CPU runtime fail with
//! `Error::CpuRuntime { code: 719 (cudaErrorLaunchFailure), .. }`, nothing panics, and drops
//! stay safe (their errors are deferred). The error is process-wide, so this test is a binary
//! of its own.

use choreo::{Device, DeviceTensor, Error, HostView, Stream};

unsafe extern "C" {
    /// `src/cpu_test_kernels.cpp` (compiled into the choreo crate): enqueues a one-thread CPU
    /// kernel that calls `__trap()` on `stream`; returns the launch's status.
    fn choreo_rs_test_trap(stream: choreo::sys::cudaStream_t) -> i32;
}

/// `cudaErrorLaunchFailure`.
const LAUNCH_FAILURE: i32 = 719;

#[track_caller]
fn assert_sticky<T: std::fmt::Debug>(what: &str, result: choreo::Result<T>) {
    match result {
        Err(Error::CpuRuntime { code: LAUNCH_FAILURE, name, .. }) => {
            assert_eq!(name, "cudaErrorLaunchFailure", "{what}");
        }
        other => panic!("{what}: expected the sticky launch failure, got {other:?}"),
    }
}

#[test]
fn a_trapping_cpu_kernel_leaves_a_sticky_error() {
    let cpu = Device::cpu();
    let stream = Stream::new_on_device(cpu).unwrap();
    let tensor = DeviceTensor::from_host(&stream, HostView::from(&[1u32, 2, 3])).unwrap();
    assert_eq!(tensor.to_host(&stream).unwrap().as_slice(), [1, 2, 3]);

    // SAFETY: `stream` is a live stream of the CPU runtime; the kernel takes no memory.
    let status = unsafe { choreo_rs_test_trap(stream.as_raw()) };
    // The launch itself is enqueued; the fault shows when the work runs.
    assert!(status == 0 || status == LAUNCH_FAILURE, "launch status {status}");
    assert_sticky("synchronize", stream.synchronize());

    // Sticky: later calls fail the same way, on any stream of the CPU.
    assert_sticky("synchronize again", stream.synchronize());
    assert_sticky("a new stream", Stream::new_on_device(cpu));
    assert_sticky("a copy to the host", tensor.to_host(&stream));
    assert_sticky("an allocation", DeviceTensor::<f32, 1>::zeros_on_device(cpu, [4]));
    assert_sticky("the device", cpu.synchronize());

    // Dropping objects after the fault neither panics nor frees memory the work might touch;
    // the errors of the drops are kept for later.
    drop(tensor);
    drop(stream);
    if let Some(error) = choreo::take_deferred_error() {
        assert!(matches!(error, Error::Deferred { .. }), "{error:?}");
    }
}
