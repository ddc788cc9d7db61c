//! Safe runtime for Choreo kernels: devices, streams, events, tracked device memory, host
//! tensors and views, and [`Pending`], the completion token of asynchronous work — on a CUDA
//! GPU or on the CPU, behind the same types.
//!
//! Kernel wrappers generated from `.co` files (by `choreo-build`) are written against this
//! crate; programs use it to allocate device data and to pass host data:
//!
//! ```no_run
//! # fn main() -> choreo::Result<()> {
//! let stream = choreo::Stream::new()?;
//! let input = vec![1.0f32; 1024];
//! let x = choreo::DeviceTensor::from_host(&stream, input.as_slice().into())?;
//! let pending = x.to_host_async(&stream)?; // does not block
//! let back = pending.wait()?;              // blocks until the copy is done
//! assert_eq!(back.as_slice(), input.as_slice());
//! # Ok(())
//! # }
//! ```
//!
//! # Guarantees
//!
//! - No function panics on a runtime failure: everything fallible returns [`Result`]. Asking
//!   for a GPU on machines without a GPU, driver, or CUDA runtime gives [`Error::NoDevice`],
//!   [`Error::InsufficientDriver`] or [`Error::RuntimeNotLinked`].
//! - Device memory is owned by [`DeviceBuffer`]s that record an event for every access and
//!   free themselves only once the last one has completed, so dropping a buffer that a kernel
//!   still uses is safe (and never blocks), and work on different streams that shares a buffer
//!   is ordered automatically.
//! - The device never reads or writes the caller's host memory: copies to and from host
//!   slices and views are staged through runtime-owned pinned memory (cached for reuse), so
//!   memory safety never depends on a [`Pending`] being waited for (`mem::forget` may leak,
//!   never corrupt), and copies from the host do not block.
//! - Errors that happen in destructors are kept and returned by the next call that creates or
//!   enqueues work; see [`take_deferred_error`].
//! - Memory the runtime still holds when the process exits (cached pinned blocks, buffers
//!   dropped while the GPU used them) is given back by an exit handler once the GPU work that
//!   used it is done, so memory checkers such as compute-sanitizer's leak check see no leak.
//!
//! # Devices: a CUDA GPU or the CPU
//!
//! Every stream, event, device buffer and pinned buffer belongs to a [`Device`] of one of two
//! [`Backend`]s: a CUDA GPU, or the CPU, whose runtime (compiled into this crate from
//! `choreo_cpu_runtime.cpp`) gives the same guarantees: a [`Stream`] is an ordered queue run by
//! a worker thread (two streams overlap for real), [`Event`]s and [`Pending`]s mean what they
//! mean on CUDA, and "device" memory is host memory with the same access tracking. Calls that
//! mix objects of both backends fail with [`Error::DeviceMismatch`].
//!
//! Constructors without a device ([`Stream::new`], [`Stream::default_stream`],
//! [`DeviceTensor::zeros`], …) use [`Device::default_device`]:
//!
//! - `CHOREO_DEVICE=cpu` chooses the CPU;
//! - `CHOREO_DEVICE=cuda` chooses the current CUDA device, and is an error ([`Error::NoDevice`]
//!   or another "no GPU" error) on a machine without a usable GPU;
//! - without `CHOREO_DEVICE`, a CUDA GPU is used when a CUDA runtime is linked and the driver
//!   reports one, and the CPU otherwise.
//!
//! Explicit devices: [`Device::cpu`], [`Device::new`]/[`Device::cuda`] and
//! [`Stream::new_on_device`]. CUDA devices follow CUDA's per-thread current device; see
//! [`Device`] and [`init`].

mod at_exit;
mod backend;
mod bounds_pool;
mod buffer;
#[cfg(test)]
mod cpu_tests;
mod device;
mod elem;
mod error;
mod event;
mod graveyard;
mod host;
pub mod interop;
pub mod kernels;
mod one_or_many;
mod pending;
mod pinned;
mod pinned_pool;
mod point;
mod stream;
mod tensor;
mod tracking;

/// The raw CUDA runtime bindings this crate is built on (for generated `extern "C"`
/// declarations, which take `cudaStream_t`; the CPU runtime's stream handles have the same
/// Rust type).
pub use choreo_sys as sys;

pub use backend::Backend;
pub use buffer::DeviceBuffer;
pub use device::{
    DEVICE_ENV, Device, DeviceGuard, MemoryInfo, driver_version, init, runtime_version,
};
pub use elem::{
    Bin1, DeviceRepr, F4E2M1, F6E2M3, F6E3M2, F8E4M3, F8E5M2, F8UE4M3, F8UE8M0, S2, S4, S6, U1, U2,
    U4, U6,
};
pub use error::{Error, Result, check_cuda, check_status, take_deferred_error};
pub use event::Event;
pub use host::{HostTensor, HostView, HostViewMut, element_count};
pub use pending::{Pending, PendingFuture};
pub use pinned::PinnedHostBuffer;
pub use pinned_pool::{cached_pinned_memory, release_cached_pinned_memory};
pub use stream::Stream;
pub use tensor::DeviceTensor;

/// The scalar half-precision types that `f16`/`bf16` map to.
pub use half::{bf16, f16};
