//! The `cudarc` feature: cudarc streams and slices as choreo streams and tensors, and back,
//! without copies. The tests that need a GPU are `#[ignore]`d here (CI has none); run them on a
//! GPU machine with
//!
//! ```text
//! cargo test -p choreo-runtime --features cudarc --test cudarc_interop -- --include-ignored
//! ```
#![cfg(feature = "cudarc")]

use std::sync::Arc;

use choreo::{Device, DeviceBuffer, DeviceTensor, Error, HostView, Stream};
use cudarc::driver::{CudaContext, CudaStream};

/// Streams that did not come from cudarc have no cudarc stream to give back (no GPU needed:
/// the CPU device's streams).
#[test]
fn only_streams_from_cudarc_give_one_back() -> choreo::Result<()> {
    let stream = Stream::new_on_device(Device::cpu())?;
    assert!(stream.cudarc_stream().is_none());
    assert!(Stream::default_stream_on(Device::cpu()).cudarc_stream().is_none());
    Ok(())
}

fn cuda() -> (Arc<CudaContext>, Arc<CudaStream>) {
    let ctx = CudaContext::new(0).expect("a CUDA GPU and driver");
    let stream = ctx.new_stream().expect("a cudarc stream");
    (ctx, stream)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_cudarc_stream_is_wrapped_and_given_back() -> choreo::Result<()> {
    let (ctx, cuda_stream) = cuda();
    let stream = Stream::from_cudarc(&cuda_stream)?;
    assert_eq!(stream.device()?, Device::cuda(0)?);
    assert_eq!(stream.as_raw() as usize, cuda_stream.cu_stream() as usize);
    let back = stream.cudarc_stream().expect("the wrapped stream");
    assert!(Arc::ptr_eq(&back, &cuda_stream));
    // The Stream keeps the cudarc stream alive.
    drop(back);
    let raw = cuda_stream.cu_stream() as usize;
    drop(cuda_stream);
    let x = DeviceTensor::from_host(&stream, HostView::new(&[1.0f32, 2.0], [2])?)?;
    assert_eq!(x.to_host(&stream)?.as_slice(), [1.0, 2.0]);
    assert_eq!(stream.as_raw() as usize, raw);
    // A choreo stream lent to cudarc.
    let own = Stream::new_on_device(Device::cuda(0)?)?;
    // SAFETY: `lent` is dropped before `own`.
    let lent = unsafe { own.to_cudarc(&ctx)? };
    let slice = lent.clone_htod(&[5i32, 6, 7]).expect("cudarc upload");
    assert_eq!(lent.clone_dtoh(&slice).expect("cudarc download"), [5, 6, 7]);
    drop((slice, lent));
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_cudarc_slice_becomes_a_tensor_and_goes_back_without_copies() -> choreo::Result<()> {
    // ANCHOR: book
    let ctx = cudarc::driver::CudaContext::new(0).expect("a CUDA GPU and driver");
    let cuda_stream = ctx.new_stream().expect("a cudarc stream");
    let slice = cuda_stream.clone_htod(&[1.0f32, 2.0, 3.0, 4.0]).expect("cudarc upload");

    let stream = choreo::Stream::from_cudarc(&cuda_stream)?; // keeps the Arc
    let tensor = choreo::DeviceTensor::from_cudarc(slice, [2, 2])?; // no copy
    assert_eq!(tensor.to_host(&stream)?.as_slice(), [1.0, 2.0, 3.0, 4.0]);
    let slice = tensor.into_cudarc(&cuda_stream)?; // back, no copy
    assert_eq!(cuda_stream.clone_dtoh(&slice).expect("download"), [1.0, 2.0, 3.0, 4.0]);
    // ANCHOR_END: book
    drop((slice, stream));

    let (_ctx, cuda_stream) = cuda();
    let slice = cuda_stream.clone_htod(&[1.0f32, 2.0, 3.0, 4.0]).expect("cudarc upload");
    let address = {
        use cudarc::driver::DevicePtr;
        let (pointer, _record) = slice.device_ptr(&cuda_stream);
        pointer
    };
    // Used by choreo on another stream: ordered after cudarc's upload.
    let stream = Stream::new_on_device(Device::cuda(0)?)?;
    let mut tensor = DeviceTensor::from_cudarc(slice, [2, 2])?;
    assert_eq!(tensor.to_host(&stream)?.as_slice(), [1.0, 2.0, 3.0, 4.0]);
    tensor.copy_from_host(&stream, HostView::new(&[4.0, 3.0, 2.0, 1.0], [2, 2])?)?;
    // Back to cudarc: its stream waits for choreo's write.
    let slice = tensor.into_cudarc(&cuda_stream)?;
    let back_address = {
        use cudarc::driver::DevicePtr;
        let (pointer, _record) = slice.device_ptr(&cuda_stream);
        pointer
    };
    assert_eq!(address, back_address, "the same memory, not a copy");
    assert_eq!(cuda_stream.clone_dtoh(&slice).expect("cudarc download"), [4.0, 3.0, 2.0, 1.0]);
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn choreo_memory_is_handed_to_cudarc_and_freed_by_it() -> choreo::Result<()> {
    let (_ctx, cuda_stream) = cuda();
    let stream = Stream::new_on_device(Device::cuda(0)?)?;
    let x = DeviceTensor::from_host(&stream, HostView::new(&[9u32, 8, 7], [3])?)?;
    let slice = x.into_cudarc(&cuda_stream)?;
    assert_eq!(cuda_stream.clone_dtoh(&slice).expect("cudarc download"), [9, 8, 7]);
    drop(slice); // cudarc frees choreo's allocation
    cuda_stream.synchronize().expect("the free completes");
    // Wrong shapes and empty buffers are errors.
    let slice = cuda_stream.clone_htod(&[1u8, 2, 3]).expect("cudarc upload");
    let wrong = DeviceTensor::<u8, 2>::from_cudarc(slice, [2, 2]);
    assert!(matches!(wrong, Err(Error::Length { expected: 4, got: 3 })), "{wrong:?}");
    let empty = DeviceBuffer::<f32>::zeroed_on(&stream, 0)?.into_cudarc(&cuda_stream);
    assert!(matches!(empty, Err(Error::InvalidArgument(_))), "{empty:?}");
    Ok(())
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_tensor_from_cudarc_dropped_while_in_use_is_freed_later() -> choreo::Result<()> {
    let (_ctx, cuda_stream) = cuda();
    let stream = Stream::new_on_device(Device::cuda(0)?)?;
    let data = vec![1.5f32; 1 << 20];
    for _ in 0..8 {
        let slice = cuda_stream.clone_htod(&data).expect("cudarc upload");
        let tensor = DeviceTensor::from_cudarc(slice, [1 << 20])?;
        let pending = tensor.to_host_async(&stream)?;
        drop(tensor); // still being read: the slice is dropped once the copy is done
        assert!(pending.wait()?.as_slice().iter().all(|&v| v == 1.5));
    }
    stream.synchronize()?;
    Ok(())
}
