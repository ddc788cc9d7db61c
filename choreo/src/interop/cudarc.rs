//! cudarc's streams and device slices as choreo streams and device buffers, and back, without
//! copies (feature `cudarc`).
//!
//! Both libraries work in the device's *primary* context (cudarc's [`CudaContext::new`]
//! retains it, the CUDA runtime that choreo uses makes it current), so their handles and
//! device pointers are interchangeable. Contexts made otherwise (`CudaContext::new_non_primary`,
//! `from_raw_context`) are refused with [`Error::InvalidArgument`].
//!
//! - [`Stream::from_cudarc`] wraps an `Arc<CudaStream>`: the [`Stream`] keeps a clone of the
//!   `Arc`, so the cudarc stream cannot be destroyed while choreo uses it.
//!   [`Stream::cudarc_stream`] gives that `Arc` back.
//! - [`DeviceBuffer::from_cudarc`] / [`DeviceTensor::from_cudarc`] take a `CudaSlice<T>` by
//!   value: the buffer owns the slice from then on and drops it (cudarc frees the memory, in
//!   stream order on the slice's stream) once every access choreo tracked has completed, as it
//!   frees its own memory. Work that cudarc enqueued on the slice before is waited for (its
//!   read and write events, then its stream, as cudarc orders the slice's own uses).
//! - [`DeviceBuffer::into_cudarc`] / [`DeviceTensor::into_cudarc`] hand a buffer to cudarc as
//!   a `CudaSlice<T>` of a given stream: that stream first waits for every access choreo
//!   tracked, then cudarc owns the memory (a buffer that came from cudarc gives back its
//!   original slice; one that choreo allocated is handed over with
//!   `CudaStream::upgrade_device_ptr`, and cudarc frees it as it frees its own allocations:
//!   `cuMemFreeAsync` on devices with memory pools, where choreo allocated it with
//!   `cudaMallocAsync`, else `cuMemFree`).
//!
//! Soundness follows both libraries' event tracking: every hand-over records an event on the
//! stream where the other library's later work is ordered, and nothing is freed while either
//! library's recorded work may still use it. `mem::forget` of a buffer or stream only leaks:
//! a forgotten [`DeviceBuffer`] never drops its `CudaSlice` (the memory is never freed), a
//! forgotten [`Stream`] keeps its `Arc<CudaStream>` (the stream is never destroyed).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! let ctx = cudarc::driver::CudaContext::new(0)?;
//! let cuda_stream: Arc<cudarc::driver::CudaStream> = ctx.new_stream()?;
//! let slice = cuda_stream.clone_htod(&[1.0f32, 2.0, 3.0, 4.0])?;
//!
//! let stream = choreo::Stream::from_cudarc(&cuda_stream)?;
//! let tensor = choreo::DeviceTensor::from_cudarc(slice, [2, 2])?; // no copy
//! // ... call kernel wrappers with `&stream` and `&tensor` ...
//! let slice = tensor.into_cudarc(&cuda_stream)?; // back, no copy
//! assert_eq!(cuda_stream.clone_dtoh(&slice)?, [1.0, 2.0, 3.0, 4.0]);
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;

use ::cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtrMut, DriverError};
use choreo_sys as sys;

use crate::buffer::DeviceBuffer;
use crate::elem::DeviceRepr;
use crate::host::element_count;
use crate::stream::{KeepAlive, Stream};
use crate::tensor::DeviceTensor;
use crate::{Device, Error, Result};

/// The choreo device of a cudarc context; [`Error::InvalidArgument`] unless it is the device's
/// primary context.
fn device_of(ctx: &CudaContext) -> Result<Device> {
    if !ctx.is_primary() {
        return Err(Error::InvalidArgument(format!(
            "the cudarc context of device {} is not the device's primary context (choreo's \
             runtime works in the primary context: create it with CudaContext::new)",
            ctx.ordinal()
        )));
    }
    Device::cuda(ctx.ordinal())
}

/// A cudarc error (recorded by cudarc and returned later) as a choreo error.
fn driver_error(error: DriverError, call: &'static str) -> Error {
    let code = error.0 as i32;
    Error::Cuda { code, name: format!("{:?}", error.0), message: error.to_string(), call }
}

/// The errors cudarc recorded in `ctx` while choreo called it.
fn check_cudarc(ctx: &CudaContext, call: &'static str) -> Result<()> {
    ctx.check_err().map_err(|error| driver_error(error, call))
}

impl Stream {
    /// Wraps a cudarc stream, without taking it over: the `Stream` keeps a clone of the `Arc`
    /// (so the cudarc stream lives at least as long) and never destroys the handle. Work
    /// enqueued through either is ordered as on one CUDA stream.
    ///
    /// [`Error::InvalidArgument`] when the stream's context is not the device's primary context;
    /// the errors of [`Device::cuda`] when choreo's runtime cannot use the device.
    pub fn from_cudarc(stream: &Arc<CudaStream>) -> Result<Stream> {
        let device = device_of(stream.context())?;
        let raw = stream.cu_stream() as sys::cudaStream_t;
        let owner: KeepAlive = stream.clone();
        // SAFETY: `raw` is a stream of the primary context of `device` (checked above), which
        // the runtime uses for `device`; the `Arc` kept with it keeps the handle alive, and
        // cudarc streams may be used from any thread (`CudaStream: Send + Sync`).
        Ok(unsafe { Stream::from_raw_kept_alive(device, raw, owner) })
    }

    /// The cudarc stream that [`Stream::from_cudarc`] wrapped; `None` for other streams.
    pub fn cudarc_stream(&self) -> Option<Arc<CudaStream>> {
        Arc::clone(self.keep_alive()?).downcast::<CudaStream>().ok()
    }

    /// A cudarc handle of this stream, for enqueueing cudarc work on it (the handle is
    /// borrowed: cudarc never destroys it). For a stream made by [`Stream::from_cudarc`] prefer
    /// [`Stream::cudarc_stream`], which is safe.
    ///
    /// [`Error::InvalidArgument`] for a CPU stream, or when `ctx` is not the primary context
    /// of the stream's device.
    ///
    /// # Safety
    ///
    /// The returned `CudaStream` (and every clone of the `Arc`, and every `CudaSlice` allocated
    /// on it) must not be used after `self` is dropped: the handle is destroyed with `self`
    /// when `self` owns it ([`Stream::new`]).
    pub unsafe fn to_cudarc(&self, ctx: &Arc<CudaContext>) -> Result<Arc<CudaStream>> {
        let device = self.device()?;
        if device.is_cpu() {
            return Err(Error::InvalidArgument(
                "a CPU stream has no CUDA handle for cudarc".to_string(),
            ));
        }
        if device_of(ctx)? != device {
            return Err(Error::InvalidArgument(format!(
                "the cudarc context is of device {}, the stream of device {}",
                ctx.ordinal(),
                device.ordinal()
            )));
        }
        // cudarc work enqueued next must not become part of the end of choreo's earlier work
        // (recorded lazily, see `crate::point`): record that now if someone needs it.
        self.seal_point(0)?;
        // SAFETY: the handle is a stream of `device`, whose primary context `ctx` is; the
        // caller keeps `self`, and so the handle, alive while the wrapper is used.
        Ok(unsafe { ctx.wrap_borrowed_stream(self.as_raw() as ::cudarc::driver::sys::CUstream) })
    }
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// Takes over a cudarc slice without copying: the buffer owns it and drops it (cudarc then
    /// frees the memory) once every access choreo tracked has completed. Later accesses on
    /// any stream are ordered after the work cudarc enqueued on the slice before.
    ///
    /// [`Error::InvalidArgument`] when the slice's context is not the device's primary context
    /// (the slice is then dropped, which frees it in stream order).
    pub fn from_cudarc(mut slice: CudaSlice<T>) -> Result<Self> {
        let cuda_stream = Arc::clone(slice.stream());
        let stream = Stream::from_cudarc(&cuda_stream)?;
        let len = slice.len();
        let pointer = {
            // Orders the slice's stream after cudarc's reads and writes of the slice (its
            // events, when cudarc tracks them); dropping `_record` records a write event there.
            let (pointer, _record) = slice.device_ptr_mut(&cuda_stream);
            pointer
        };
        check_cudarc(cuda_stream.context(), "CudaSlice::device_ptr_mut")?;
        // SAFETY: `pointer` is the slice's allocation of `len` values of `T` on the device of
        // the slice's (primary) context, which `stream` wraps; cudarc allocated it
        // (256-byte aligned) and initialised it as `T`s (cudarc only hands out initialised
        // slices safely). Every earlier cudarc access is ordered on `stream` (above). The
        // buffer owns the slice, so the memory stays allocated and unused by cudarc until the
        // buffer drops the slice.
        unsafe { DeviceBuffer::from_raw_parts(&stream, pointer as usize as *mut T, len, slice) }
    }

    /// Hands the buffer to cudarc as a slice of `stream`, without copying: `stream` first waits
    /// for every access choreo tracked (recorded events; the whole device when some access
    /// was not recorded), then cudarc owns the memory. A buffer made by
    /// [`DeviceBuffer::from_cudarc`] gives back its slice.
    ///
    /// Errors (the buffer is then dropped as usual, which is safe): [`Error::DeviceMismatch`]
    /// for a CPU buffer, [`Error::InvalidArgument`] for a buffer on another device than
    /// `stream`, for one made by [`DeviceBuffer::from_raw_parts`] with another owner than a
    /// `CudaSlice<T>`, and for an empty buffer that choreo allocated (it has no memory).
    pub fn into_cudarc(mut self, stream: &Arc<CudaStream>) -> Result<CudaSlice<T>> {
        let wrapped = Stream::from_cudarc(stream)?;
        let device = wrapped.device()?;
        if self.device() != device {
            return Err(match self.device().is_cpu() {
                true => Error::DeviceMismatch {
                    what: "the buffer".to_string(),
                    found: self.device(),
                    expected: device,
                },
                false => Error::InvalidArgument(format!(
                    "the buffer is on CUDA device {}, the cudarc stream of device {}",
                    self.device().ordinal(),
                    device.ordinal()
                )),
            });
        }
        match self.foreign_owner_is::<CudaSlice<T>>() {
            Some(false) => {
                return Err(Error::InvalidArgument(
                    "the buffer wraps foreign memory (DeviceBuffer::from_raw_parts) that \
                     cudarc does not own; only buffers that choreo allocated or that came \
                     from cudarc can be handed to cudarc"
                        .to_string(),
                ));
            }
            None if self.is_empty() => {
                return Err(Error::InvalidArgument(
                    "an empty buffer has no device memory to hand to cudarc".to_string(),
                ));
            }
            Some(true) | None => {}
        }
        // cudarc's later work on `stream` comes after all of choreo's.
        self.order_before(&wrapped)?;
        let len = self.len();
        let owned = self.into_raw_owned();
        let mut slice = match owned.owner {
            Some(owner) => match owner.downcast::<CudaSlice<T>>() {
                Ok(slice) => *slice,
                Err(_) => unreachable!("the owner's type was checked above"),
            },
            // SAFETY: the memory is choreo's allocation of `len` values of `T` (initialised:
            // choreo never exposes uninitialised memory safely) on the device of `stream`'s
            // primary context. Ownership passes to the slice: `into_raw_owned` made the buffer
            // give it up. cudarc frees it like its own allocations, which matches how choreo
            // allocated it: with `cuMemFreeAsync` when the device supports memory pools (then
            // choreo used `cudaMallocAsync`, from the same default pool), else `cuMemFree`
            // (choreo used `cudaMalloc`) — both decide on the device's
            // MEMORY_POOLS_SUPPORTED attribute.
            None => unsafe { stream.upgrade_device_ptr::<T>(owned.pointer as usize as u64, len) },
        };
        if !Arc::ptr_eq(slice.stream(), stream) {
            // A slice from cudarc belongs to its own stream: order it after choreo's work too.
            let own = Stream::from_cudarc(slice.stream())?;
            own.wait_event(&wrapped.record_event()?)?;
        }
        // For cudarc's own tracking: a write on `stream`, after choreo's accesses.
        drop(slice.device_ptr_mut(stream));
        check_cudarc(stream.context(), "CudaSlice::device_ptr_mut")?;
        Ok(slice)
    }
}

impl<T: DeviceRepr, const R: usize> DeviceTensor<T, R> {
    /// Takes over a cudarc slice as a tensor of `shape`, without copying (see
    /// [`DeviceBuffer::from_cudarc`]); [`Error::Length`] when the slice does not hold exactly
    /// the elements of `shape`.
    pub fn from_cudarc(slice: CudaSlice<T>, shape: [usize; R]) -> Result<Self> {
        let expected = element_count(&shape)?;
        if slice.len() != expected {
            return Err(Error::Length { expected, got: slice.len() });
        }
        DeviceTensor::from_buffer(DeviceBuffer::from_cudarc(slice)?, shape)
    }

    /// Hands the tensor's storage to cudarc as a slice of `stream` (see
    /// [`DeviceBuffer::into_cudarc`]); the shape is dropped.
    pub fn into_cudarc(self, stream: &Arc<CudaStream>) -> Result<CudaSlice<T>> {
        self.into_buffer().into_cudarc(stream)
    }
}
