//! Safe runtime for Choreo kernels: devices, streams, events, tracked device memory, host
//! tensors and views, and [`Pending`], the completion token of asynchronous work.
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
//! - No function panics on a CUDA failure: everything fallible returns [`Result`]. Machines
//!   without a GPU, driver, or CUDA runtime get [`Error::NoDevice`],
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
//! Device selection follows CUDA's per-thread current device; see [`Device`] and [`init`].

mod at_exit;
mod buffer;
mod device;
mod elem;
mod error;
mod event;
mod graveyard;
mod host;
pub mod kernels;
mod one_or_many;
mod pending;
mod pinned;
mod pinned_pool;
mod stream;
mod tensor;
mod tracking;

/// The raw CUDA runtime bindings this crate is built on (for generated `extern "C"`
/// declarations, which take `cudaStream_t`).
pub use choreo_sys as sys;

pub use buffer::DeviceBuffer;
pub use device::{Device, DeviceGuard, MemoryInfo, driver_version, init, runtime_version};
pub use elem::{DeviceRepr, F8E4M3, F8E5M2};
pub use error::{Error, Result, check_cuda, take_deferred_error};
pub use event::Event;
pub use host::{HostTensor, HostView, HostViewMut, element_count};
pub use pending::{Pending, PendingFuture};
pub use pinned::PinnedHostBuffer;
pub use pinned_pool::{cached_pinned_memory, release_cached_pinned_memory};
pub use stream::Stream;
pub use tensor::DeviceTensor;

/// The scalar half-precision types that `f16`/`bf16` map to.
pub use half::{bf16, f16};
