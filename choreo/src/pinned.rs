//! Page-locked (pinned) host memory, the source and target of truly asynchronous copies.

use std::fmt;
use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::elem::DeviceRepr;
use crate::error::check_deferred;
use crate::graveyard::{Release, bury, sweep};
use crate::pinned_pool::{self, PinnedBlock};
use crate::tracking::Tracking;
use crate::{Device, Error, Result};

/// A buffer of `len` values of `T` in page-locked host memory (`cudaHostAlloc`), or for the
/// CPU device in plain host memory of the CPU runtime (its `cudaHostAlloc`).
///
/// The buffer belongs to the device it was made for: its copies run on streams of that
/// device's backend (a CUDA buffer serves every CUDA device); a stream of the other backend
/// gets [`Error::DeviceMismatch`].
///
/// The GPU can copy to and from pinned memory asynchronously, so the buffer tracks the copies
/// that use it like a [`crate::DeviceBuffer`] does: [`PinnedHostBuffer::as_slice`] first waits
/// for pending GPU writes, [`PinnedHostBuffer::as_mut_slice`] for all pending GPU accesses.
///
/// Drop never blocks: the memory returns to a process-wide cache of pinned blocks once the
/// copies that use it have completed (freeing pinned memory would synchronise the whole
/// device); see [`crate::release_cached_pinned_memory`].
pub struct PinnedHostBuffer<T: DeviceRepr> {
    /// Start of the allocation; dangling (and never passed to CUDA) when `block` is `None`.
    pointer: NonNull<T>,
    len: usize,
    /// The pinned block; `None` for zero bytes.
    block: Option<PinnedBlock>,
    tracking: Mutex<Tracking>,
}

// SAFETY: the buffer exclusively owns its allocation. Host access goes through `&self`
// (shared, after GPU writes completed) or `&mut self` (exclusive, after all GPU accesses
// completed); GPU writes are only enqueued through `&mut self`. The tracking state is behind a
// Mutex. `T: DeviceRepr` is Send + Sync.
unsafe impl<T: DeviceRepr> Send for PinnedHostBuffer<T> {}
// SAFETY: see `Send`.
unsafe impl<T: DeviceRepr> Sync for PinnedHostBuffer<T> {}

impl<T: DeviceRepr> PinnedHostBuffer<T> {
    /// Allocates `len` zeroed values in pinned memory for the default device
    /// ([`Device::default_device`]); for CUDA, usable by every CUDA device.
    pub fn new(len: usize) -> Result<Self> {
        Self::new_on_device(Device::default_device()?, len)
    }

    /// Allocates `len` zeroed values in pinned memory for `device` (for CUDA, usable by every
    /// CUDA device).
    pub fn new_on_device(device: Device, len: usize) -> Result<Self> {
        check_deferred()?;
        sweep();
        let bytes = len
            .checked_mul(size_of::<T>())
            .filter(|&bytes| bytes <= isize::MAX as usize)
            .ok_or(Error::OutOfHostMemory { bytes: usize::MAX })?;
        let tracking = Mutex::new(Tracking::new(device));
        if bytes == 0 {
            return Ok(Self { pointer: NonNull::dangling(), len, block: None, tracking });
        }
        let block = pinned_pool::acquire(device.backend(), bytes)?;
        let pointer = NonNull::new(block.as_ptr().cast::<T>()).unwrap_or(NonNull::dangling());
        // SAFETY: the block holds at least `bytes` bytes, is aligned to at least 256 bytes
        // (checked by `pinned_pool::acquire`; enough for T, whose alignment DeviceRepr bounds
        // by 256) and is ours alone: the pool hands out only blocks
        // that no GPU work uses. Zero bytes make every element a valid T (DeviceRepr).
        unsafe { std::ptr::write_bytes(pointer.as_ptr(), 0, len) };
        Ok(Self { pointer, len, block: Some(block), tracking })
    }

    /// Allocates pinned memory for the default device holding a copy of `data`.
    pub fn from_slice(data: &[T]) -> Result<Self> {
        Self::from_slice_on_device(Device::default_device()?, data)
    }

    /// Allocates pinned memory for `device` holding a copy of `data`.
    pub fn from_slice_on_device(device: Device, data: &[T]) -> Result<Self> {
        let mut buffer = Self::new_on_device(device, data.len())?;
        // A new buffer has no pending GPU access, so this does not wait.
        buffer.as_mut_slice()?.copy_from_slice(data);
        Ok(buffer)
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` when the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The contents, after waiting for pending GPU writes to the buffer.
    pub fn as_slice(&self) -> Result<&[T]> {
        self.lock_tracking().wait_for_writes()?;
        // SAFETY: the allocation holds `len` initialized values (zeroed at allocation, then
        // written by host code or copies of valid T). GPU writes have completed and new ones
        // need `&mut self`, so nothing writes while the returned borrow of `self` lives.
        Ok(unsafe { std::slice::from_raw_parts(self.pointer.as_ptr(), self.len) })
    }

    /// The contents, mutably, after waiting for every pending GPU access to the buffer.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.tracking.get_mut().unwrap_or_else(PoisonError::into_inner).wait_for_all()?;
        // SAFETY: as in `as_slice`; additionally all GPU reads have completed and new ones need
        // `&self`, which the returned exclusive borrow of `self` excludes.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.pointer.as_ptr(), self.len) })
    }

    /// The device whose streams copy to and from the buffer.
    pub fn device(&self) -> Device {
        self.lock_tracking().device()
    }

    /// `true` when no GPU access to the buffer is pending; does not block.
    pub fn is_idle(&self) -> Result<bool> {
        self.lock_tracking().is_idle()
    }

    pub(crate) fn lock_tracking(&self) -> MutexGuard<'_, Tracking> {
        self.tracking.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn tracking_mut(&mut self) -> &mut Tracking {
        self.tracking.get_mut().unwrap_or_else(PoisonError::into_inner)
    }

    /// The start address for copies (dangling when empty; never passed to CUDA then).
    pub(crate) fn as_ptr(&self) -> *mut T {
        self.pointer.as_ptr()
    }
}

impl<T: DeviceRepr> Drop for PinnedHostBuffer<T> {
    fn drop(&mut self) {
        let Some(block) = self.block.take() else {
            return;
        };
        let device = self.tracking_mut().device();
        let tracking = std::mem::replace(self.tracking_mut(), Tracking::new(device));
        let release = Release::PinnedHost(block);
        match tracking.into_events() {
            Some(events) => bury(events, release),
            None => {
                // Some access was never recorded: only a whole-device synchronisation can tell
                // when it is over. Leaking is the only non-blocking safe choice.
                crate::error::defer_error(
                    "dropping a PinnedHostBuffer with unrecorded GPU accesses (leaked)",
                    Error::InvalidArgument("GPU access was not recorded".into()),
                );
            }
        }
    }
}

impl<T: DeviceRepr> fmt::Debug for PinnedHostBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedHostBuffer")
            .field("type", &T::CHOREO_TYPE)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}
