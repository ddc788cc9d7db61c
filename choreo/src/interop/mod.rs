//! Interoperability with other crates, each behind an optional feature (all off by default):
//!
//! - `ndarray`: host tensors and views to and from ndarray's [`Array`](::ndarray::Array) and
//!   [`ArrayView`](::ndarray::ArrayView) ([`ndarray`](self::ndarray) module);
//! - `cudarc`: cudarc's `CudaStream` and `CudaSlice<T>` as choreo [`Stream`](crate::Stream)s
//!   and device buffers/tensors, and back, without copies ([`cudarc`](self::cudarc) module).
//!
//! Memory that another library allocated can also be wrapped without a feature, `unsafe`ly,
//! with [`DeviceBuffer::from_raw_parts`](crate::DeviceBuffer::from_raw_parts).
//!
//! `half`'s `f16`/`bf16` are choreo's own 16-bit float types (re-exported as [`crate::f16`] and
//! [`crate::bf16`]), so they need no conversion.

#[cfg(feature = "cudarc")]
pub mod cudarc;
#[cfg(feature = "ndarray")]
pub mod ndarray;
