//! Device tensors: a [`DeviceBuffer`] with a row-major shape.

use std::fmt;

use crate::buffer::DeviceBuffer;
use crate::elem::DeviceRepr;
use crate::host::{HostTensor, HostView, HostViewMut, element_count};
use crate::pending::Pending;
use crate::pinned::PinnedHostBuffer;
use crate::stream::Stream;
use crate::{Device, Error, Result};

/// A row-major tensor of rank `R` in device memory (of a CUDA GPU or of the CPU): what kernel
/// wrappers take for `global` parameters (`&DeviceTensor` when the kernel only reads it,
/// `&mut DeviceTensor` when it writes it).
///
/// The storage is a [`DeviceBuffer`], so every access is tracked and dropping the tensor while
/// the device still uses it is safe.
pub struct DeviceTensor<T: DeviceRepr, const R: usize> {
    buffer: DeviceBuffer<T>,
    shape: [usize; R],
}

/// [`Error::Shape`] for the first dimension where `got` differs from `expected`.
fn check_shape<const R: usize>(
    param: &'static str,
    expected: [usize; R],
    got: [usize; R],
) -> Result<()> {
    match expected.iter().zip(&got).position(|(e, g)| e != g) {
        None => Ok(()),
        Some(dim) => Err(Error::Shape { param, dim, expected: expected[dim], got: got[dim] }),
    }
}

impl<T: DeviceRepr, const R: usize> DeviceTensor<T, R> {
    /// A zeroed tensor of `shape` on the default device (see [`DeviceBuffer::zeroed`]).
    pub fn zeros(shape: [usize; R]) -> Result<Self> {
        let buffer = DeviceBuffer::zeroed(element_count(&shape)?)?;
        Ok(Self { buffer, shape })
    }

    /// A zeroed tensor of `shape` on `device` (see [`DeviceBuffer::zeroed_on_device`]).
    pub fn zeros_on_device(device: Device, shape: [usize; R]) -> Result<Self> {
        let buffer = DeviceBuffer::zeroed_on_device(device, element_count(&shape)?)?;
        Ok(Self { buffer, shape })
    }

    /// A zeroed tensor of `shape`, allocated and zeroed in stream order on `stream`.
    pub fn zeros_on(stream: &Stream, shape: [usize; R]) -> Result<Self> {
        let buffer = DeviceBuffer::zeroed_on(stream, element_count(&shape)?)?;
        Ok(Self { buffer, shape })
    }

    /// A tensor on `stream`'s device holding a copy of `data`, staged like
    /// [`DeviceBuffer::from_host`] (`data` is not used after this returns; the host does not
    /// wait for the device).
    pub fn from_host(stream: &Stream, data: HostView<'_, T, R>) -> Result<Self> {
        let buffer = DeviceBuffer::from_host(stream, data.as_slice())?;
        Ok(Self { buffer, shape: data.shape() })
    }

    /// Gives `buffer` the shape `shape`; [`Error::Length`] when the element count differs.
    pub fn from_buffer(buffer: DeviceBuffer<T>, shape: [usize; R]) -> Result<Self> {
        let expected = element_count(&shape)?;
        if buffer.len() != expected {
            return Err(Error::Length { expected, got: buffer.len() });
        }
        Ok(Self { buffer, shape })
    }

    /// Copies `data` (same shape) into the tensor on `stream`, staged like
    /// [`DeviceBuffer::from_host`].
    pub fn copy_from_host(&mut self, stream: &Stream, data: HostView<'_, T, R>) -> Result<()> {
        check_shape("data", self.shape, data.shape())?;
        self.buffer.copy_from_host(stream, data.as_slice())
    }

    /// A host copy, made on `stream` after the work that writes the tensor. Blocks until the
    /// copy has completed.
    pub fn to_host(&self, stream: &Stream) -> Result<HostTensor<T, R>> {
        HostTensor::new(self.buffer.to_vec(stream)?, self.shape)
    }

    /// Copies into `target` (same shape) on `stream`. Blocks until the copy has completed.
    pub fn copy_to_host(&self, stream: &Stream, mut target: HostViewMut<'_, T, R>) -> Result<()> {
        check_shape("target", self.shape, target.shape())?;
        self.buffer.copy_to_host(stream, target.as_mut_slice())
    }

    /// Starts a host copy on `stream` without blocking: the device copies into runtime-owned
    /// pinned staging memory, and [`Pending::wait`] (or `.await`) returns it as a
    /// [`HostTensor`].
    pub fn to_host_async(&self, stream: &Stream) -> Result<Pending<'static, HostTensor<T, R>>> {
        let staging = self.stage_on(stream)?;
        let shape = self.shape;
        Pending::after(&[stream], move || HostTensor::new(staging.as_slice()?.to_vec(), shape))
    }

    /// Starts a copy into `target` (same shape) on `stream` without blocking. The device copies
    /// into runtime-owned pinned staging memory; [`Pending::wait`] (or `.await`) copies that
    /// into `target`. If the `Pending` is dropped instead, `target` is left unchanged.
    pub fn copy_to_host_async<'a>(
        &self,
        stream: &Stream,
        mut target: HostViewMut<'a, T, R>,
    ) -> Result<Pending<'a, ()>> {
        check_shape("target", self.shape, target.shape())?;
        let staging = self.stage_on(stream)?;
        Pending::after(&[stream], move || {
            target.as_mut_slice().copy_from_slice(staging.as_slice()?);
            Ok(())
        })
    }

    /// Enqueues a copy of the tensor into new pinned staging memory on `stream`.
    fn stage_on(&self, stream: &Stream) -> Result<PinnedHostBuffer<T>> {
        let device = self.buffer.stream_device(stream)?;
        let mut staging = PinnedHostBuffer::new_on_device(device, self.buffer.len())?;
        self.buffer.copy_to_pinned(stream, &mut staging)?;
        Ok(staging)
    }

    /// The extents, outermost first.
    pub fn shape(&self) -> [usize; R] {
        self.shape
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    /// `true` when some extent is zero.
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    /// The device that holds the tensor.
    pub fn device(&self) -> Device {
        self.buffer.device()
    }

    /// The storage, e.g. for [`DeviceBuffer::device_ptr_for_read`] in generated wrappers.
    pub fn buffer(&self) -> &DeviceBuffer<T> {
        &self.buffer
    }

    /// The storage, mutably, e.g. for [`DeviceBuffer::device_ptr_for_write`].
    pub fn buffer_mut(&mut self) -> &mut DeviceBuffer<T> {
        &mut self.buffer
    }

    /// The storage, giving up the shape.
    pub fn into_buffer(self) -> DeviceBuffer<T> {
        self.buffer
    }

    /// Checks that the tensor has `shape`; otherwise [`Error::Shape`] naming `param` and the
    /// first dimension that differs. For generated wrappers, before anything is launched.
    pub fn expect_shape(&self, param: &'static str, shape: [usize; R]) -> Result<()> {
        check_shape(param, shape, self.shape)
    }
}

impl<T: DeviceRepr, const R: usize> fmt::Debug for DeviceTensor<T, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceTensor")
            .field("type", &T::CHOREO_TYPE)
            .field("shape", &self.shape)
            .field("device", &self.buffer.device())
            .finish_non_exhaustive()
    }
}
