//! Bad input at the Rust boundary of the generated wrappers: each kind of wrong argument
//! gives a specific `Err` before anything is launched, and leaves the arguments as they were.
//!
//! - a tensor of the wrong shape: `Error::Shape` naming the parameter and the dimension;
//! - data of the wrong length: `Error::Length` when the view or tensor is made, or
//!   `Error::Shape` for a rank-1 argument against a constant extent;
//! - device buffers that alias within one call: `Error::InvalidArgument` ("arguments alias");
//! - a tensor or a stream of the CPU device in a call on the GPU, or streams of both:
//!   `Error::DeviceMismatch` (one GPU);
//! - a tensor of another device, a stream of another device, streams of two devices:
//!   `Error::InvalidArgument` naming both devices (these need two GPUs:
//!   `#[ignore = "needs two CUDA GPUs"]`, and their names end in `two_gpus` so that
//!   `gpu-bundle/run-all` leaves them out on a machine with one GPU).
//!
//! The first three run on the CPU (`NAME::on_cpu`, in every `cargo test`) and on a GPU
//! (`NAME::on_gpu`, `#[ignore = "needs a CUDA GPU"]`: `--ignored`); see
//! `choreo_tests::device_tests!`. The device mismatches need a GPU (a GPU and the CPU in one
//! call, or two GPUs) and exist only as GPU tests (`--ignored`).
//!
//! Two more cases live elsewhere: a tensor whose buffer was moved out is a compile error
//! (`compile_fail/moved_tensor.rs`), and a call after a sticky error has its own test process
//! (`sticky_error.rs`), since the error poisons the process's runtime of that device.

use choreo::kernels::WorkStreams;
use choreo::{Backend, Device, DeviceTensor, Error, HostTensor, HostView, Stream};
use choreo_tests::co::{kinds, timing};
use choreo_tests::{TestDevice, device_tests, run_on_gpu};

/// The backends the wrappers of `co/*.co` are built for (as a generated wrapper lists them).
const BACKENDS: &[Backend] = &[Backend::Cuda, Backend::Cpu];

/// Fails the test unless `devices` GPUs are available (after `run_on_gpu`'s checks).
fn require_gpus(devices: usize) {
    let count = Device::count().unwrap();
    if count < devices {
        panic!("this test needs {devices} CUDA GPUs; this machine has {count}");
    }
}

/// The message of an `Error::InvalidArgument`, or a panic naming what came instead.
#[track_caller]
fn invalid_argument<T: std::fmt::Debug>(result: choreo::Result<T>) -> String {
    match result {
        Err(Error::InvalidArgument(message)) => message,
        other => panic!("expected Error::InvalidArgument, got {other:?}"),
    }
}

device_tests!(a_tensor_of_the_wrong_shape_is_a_shape_error);
fn a_tensor_of_the_wrong_shape_is_a_shape_error(dev: &TestDevice) {
    // `axpy(global f32 [N] x, global f32 [N] y, f32 a)`: N is bound by `x`.
    let x = dev.upload(&[1.0f32; 64]);
    let mut y = dev.upload(&[5.0f32; 65]);
    match kinds::axpy(&x, &mut y, 2.0) {
        Err(Error::Shape { param: "y", dim: 0, expected: 64, got: 65 }) => {}
        other => panic!("expected a shape error for `y`, got {other:?}"),
    }
    assert_eq!(dev.download(&y), vec![5.0; 65], "nothing may have been launched");
    // Rank 2: `gemv(f32 [M, N] a, f32 [N] x, f32 [M] &y)` with `x` one too long.
    let a = HostTensor::new(vec![1.0f32; 6], [2, 3]).unwrap();
    let mut out = [7.0f32; 2];
    match kinds::gemv((&a).into(), [1.0f32; 4].as_slice().into(), out.as_mut_slice().into()) {
        Err(Error::Shape { param: "x", dim: 0, expected: 3, got: 4 }) => {}
        other => panic!("expected a shape error for `x`, got {other:?}"),
    }
    assert_eq!(out, [7.0; 2], "`y` must not be written");
    choreo_tests::assert_no_deferred_error();
}

device_tests!(data_of_the_wrong_length_is_a_length_error);
fn data_of_the_wrong_length_is_a_length_error(dev: &TestDevice) {
    // Views and tensors check their element count against their shape when they are made,
    // so a wrapper never sees data of the wrong length.
    let seven = [1.0f32; 7];
    assert_eq!(HostView::new(&seven, [2, 3]).unwrap_err(), Error::Length { expected: 6, got: 7 });
    assert_eq!(
        HostTensor::new(vec![1.0f32; 5], [2, 3]).unwrap_err(),
        Error::Length { expected: 6, got: 5 }
    );
    let buffer = dev.zeroed::<f32>(7);
    assert_eq!(
        DeviceTensor::from_buffer(buffer, [2, 3]).unwrap_err(),
        Error::Length { expected: 6, got: 7 }
    );
    // A rank-1 argument is its own shape: against a constant extent (`s32 [4]` of `kinds`)
    // a wrong length is a shape error naming the parameter.
    let stream = dev.stream();
    let n = 16;
    let g = dev.upload(&vec![1.0f32; n]);
    let mut out = dev.upload(&vec![3.0f32; n]);
    let mut acc = vec![0.0f32; n];
    let result = kinds::kinds(
        vec![1.0f32; n].as_slice().into(),
        acc.as_mut_slice().into(),
        &g,
        &mut out,
        1.0,
        choreo::f16::ONE,
        choreo::bf16::ONE,
        false,
        [0i32; 5].as_slice().into(),
        0,
        &stream,
    );
    match result {
        Err(Error::Shape { param: "anon_0", dim: 0, expected: 4, got: 5 }) => {}
        other => panic!("expected a shape error for the unnamed `s32 [4]`, got {other:?}"),
    }
    assert_eq!(dev.download(&out), vec![3.0; n], "nothing may have been launched");
    assert_eq!(acc, vec![0.0; n]);
    choreo_tests::assert_no_deferred_error();
}

device_tests!(aliased_device_arguments_are_refused_before_launch);
/// Device buffers that overlap within one call are refused before anything is launched when
/// one of them is written. Safe code cannot pass one tensor as `&` and `&mut` to a wrapper
/// (`compile_fail/same_tensor_in_and_out.rs`), so this drives the wrappers' own bookkeeping,
/// `WorkStreams`, with one buffer handed out twice, as a wrapper would hand out two views of
/// one allocation.
fn aliased_device_arguments_are_refused_before_launch(dev: &TestDevice) {
    let stream = dev.stream();
    let mut t = dev.upload(&[4u32; 64]);
    let other = dev.upload(&[1u32; 64]);

    // Read and then written in the same call.
    let mut work = WorkStreams::for_backends(BACKENDS, &[&stream]).unwrap();
    work.read_ptr(other.buffer()).unwrap();
    work.read_ptr(t.buffer()).unwrap();
    let message = invalid_argument(work.write_ptr(t.buffer_mut()));
    assert!(message.starts_with("arguments alias"), "{message}");
    assert!(message.contains("device buffer #2") && message.contains("device buffer #3"));
    drop(work);
    // Written twice, named by the wrapper.
    let mut work = WorkStreams::for_backends(BACKENDS, &[&stream]).unwrap();
    work.write_param_ptr("out", t.buffer_mut()).unwrap();
    let message = invalid_argument(work.write_param_ptr("acc", t.buffer_mut()));
    assert!(message.contains("`out`") && message.contains("`acc`"), "{message}");
    drop(work);
    // Read twice: no conflict.
    let mut work = WorkStreams::for_backends(BACKENDS, &[&stream]).unwrap();
    work.read_ptr(t.buffer()).unwrap();
    work.read_ptr(t.buffer()).unwrap();
    drop(work);

    // Nothing was launched, and the buffers stay usable (their unrecorded accesses cost a
    // device synchronisation, never correctness).
    assert_eq!(dev.download(&t), vec![4; 64]);
    timing::spin_sync(&stream, &mut t, &mut dev.upload(&[0u32; 64]), 1, 9).unwrap();
    assert_eq!(dev.download(&t), vec![9; 64]);
    assert_eq!(dev.download(&other), vec![1; 64]);
    choreo_tests::assert_no_deferred_error();
}

/// The foreign-device cases a machine with one GPU has: a tensor or a stream of the CPU
/// device in a call on the GPU (and the reverse) is `Error::DeviceMismatch`, before anything is
/// launched.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_tensor_of_the_cpu_in_a_gpu_call_is_a_device_mismatch() {
    run_on_gpu(|dev| {
        let cpu = Stream::new_on_device(Device::cpu()).unwrap();
        let on_cpu = DeviceTensor::from_host(&cpu, [1.0f32; 64].as_slice().into()).unwrap();
        // `axpy` has no stream parameter: it runs on the default stream, the GPU's here.
        let mut on_gpu = dev.upload(&[5.0f32; 64]);
        let result = kinds::axpy(&on_cpu, &mut on_gpu, 2.0);
        assert!(matches!(result, Err(Error::DeviceMismatch { .. })), "{result:?}");
        assert_eq!(dev.download(&on_gpu), vec![5.0; 64], "nothing may have been launched");
        // A written tensor of the CPU.
        let mut on_cpu = on_cpu;
        let result = kinds::axpy(&on_gpu, &mut on_cpu, 2.0);
        assert!(matches!(result, Err(Error::DeviceMismatch { .. })), "{result:?}");
        assert_eq!(on_cpu.to_host(&cpu).unwrap().into_vec(), vec![1.0; 64], "nothing launched");
        choreo_tests::assert_no_deferred_error();
    });
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_stream_of_the_cpu_in_a_gpu_call_is_a_device_mismatch() {
    run_on_gpu(|dev| {
        let on_gpu = dev.stream();
        assert_eq!(
            on_gpu.backend().unwrap(),
            choreo::Backend::Cuda,
            "the default device is the GPU"
        );
        let on_cpu = Stream::new_on_device(Device::cpu()).unwrap();
        let mut out = dev.upload(&[3u32; 8]);
        let mut sink = dev.upload(&[3u32; 8]);
        // Tensors of the GPU, the call's stream of the CPU.
        let result = timing::spin_sync(&on_cpu, &mut out, &mut sink, 1, 9);
        assert!(matches!(result, Err(Error::DeviceMismatch { .. })), "{result:?}");
        // The two streams of one call on two devices.
        let result = timing::spin_two(&on_gpu, &on_cpu, &mut out, &mut sink, 1).map(|_| ());
        assert!(matches!(result, Err(Error::DeviceMismatch { .. })), "{result:?}");
        assert_eq!(dev.download(&out), vec![3; 8], "nothing may have been launched");
        assert_eq!(dev.download(&sink), vec![3; 8], "nothing may have been launched");
        choreo_tests::assert_no_deferred_error();
    });
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn a_tensor_of_another_device_is_refused_two_gpus() {
    run_on_gpu(|dev| {
        require_gpus(2);
        Device::set(0).unwrap();
        let device_1 = Stream::new_on_device(Device::new(1).unwrap()).unwrap();
        let foreign = DeviceTensor::from_host(&device_1, [1.0f32; 64].as_slice().into()).unwrap();
        let mut local = dev.upload(&[5.0f32; 64]);
        // `axpy` runs on the current device (0); `x` lives on device 1.
        let message = invalid_argument(kinds::axpy(&foreign, &mut local, 2.0));
        assert!(message.contains("is on device 1") && message.contains("runs on device 0"));
        assert_eq!(dev.download(&local), vec![5.0; 64], "nothing may have been launched");
        // A written tensor of another device.
        let mut foreign = foreign;
        let message = invalid_argument(kinds::axpy(&local, &mut foreign, 2.0));
        assert!(message.contains("is on device 1") && message.contains("runs on device 0"));
        let back = foreign.to_host(&device_1).unwrap().into_vec();
        assert_eq!(back, vec![1.0; 64], "nothing may have been launched");
        choreo_tests::assert_no_deferred_error();
    });
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn a_stream_of_another_device_is_refused_two_gpus() {
    run_on_gpu(|dev| {
        require_gpus(2);
        Device::set(0).unwrap();
        let on_0 = dev.stream();
        let on_1 = Stream::new_on_device(Device::new(1).unwrap()).unwrap();
        let mut out = dev.upload(&[3u32; 8]);
        let mut sink = dev.upload(&[3u32; 8]);
        // Tensors of device 0, the call's stream of device 1.
        let message = invalid_argument(timing::spin_sync(&on_1, &mut out, &mut sink, 1, 9));
        assert!(message.contains("is on device 0") && message.contains("runs on device 1"));
        // The two streams of one call on two devices.
        let message = invalid_argument(timing::spin_two(&on_0, &on_1, &mut out, &mut sink, 1));
        assert!(message.contains("must belong to one device"), "{message}");
        assert_eq!(dev.download(&out), vec![3; 8], "nothing may have been launched");
        assert_eq!(dev.download(&sink), vec![3; 8], "nothing may have been launched");
        choreo_tests::assert_no_deferred_error();
    });
}
