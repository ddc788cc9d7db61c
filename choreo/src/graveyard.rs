//! Deferred frees: device memory and pinned host memory whose last GPU accesses may still be
//! running when its owner is dropped waits here until their events have completed, so that
//! `Drop` never blocks and never frees memory the GPU may still touch.
//!
//! The list is swept (completed entries freed) whenever memory is buried or allocated, and
//! when a [`crate::Pending`] finishes. Entries whose events report an error are leaked: after a
//! GPU fault it is unknown whether the work still touches them.

use std::ffi::c_void;
use std::sync::{Arc, Mutex, PoisonError, TryLockError};

use crate::Device;
use crate::device::{DeviceGuard, internal_streams};
use crate::error::{check, defer_error};
use crate::event::Event;
use crate::pinned_pool::{self, PinnedBlock};

/// How to release a buried allocation.
pub(crate) enum Release {
    /// Return a page-locked block to the pinned cache.
    PinnedHost(PinnedBlock),
    /// Free device memory of device `device` (with its backend's runtime): with
    /// `cudaFreeAsync` on the device's idle internal free stream when it came from
    /// `cudaMallocAsync` (`pooled`), else `cudaFree` (which synchronises the device; only for
    /// devices without memory pools).
    Device { pointer: *mut c_void, device: Device, pooled: bool },
    /// Drop the owner of foreign device memory ([`crate::DeviceBuffer::from_raw_parts`]),
    /// which frees it or gives it back to the library it came from.
    Foreign { owner: Box<dyn std::any::Any + Send>, device: Device },
}

/// An allocation waiting for its events.
struct Grave {
    events: Vec<Arc<Event>>,
    release: Release,
}

// SAFETY: the memory is owned exclusively by the graveyard once buried (its previous owner was
// dropped), is never dereferenced by the host, and is only handed to the pinned cache or to
// cudaFree of its backend, which may be called from any thread.
unsafe impl Send for Grave {}

static GRAVEYARD: Mutex<Vec<Grave>> = Mutex::new(Vec::new());

/// Outcome of checking a grave's events.
enum State {
    Done,
    Busy,
    Failed(crate::Error),
}

fn state_of(events: &[Arc<Event>]) -> State {
    for event in events {
        match event.query() {
            Ok(true) => {}
            Ok(false) => return State::Busy,
            Err(error) => return State::Failed(error),
        }
    }
    State::Done
}

fn release(release: Release) {
    match release {
        // Its owner is gone and all GPU accesses have completed (the caller checked).
        Release::PinnedHost(block) => pinned_pool::release(block),
        // All recorded accesses have completed: the owner may free the memory.
        // Its device is made current first, for owners that free with their backend's API.
        Release::Foreign { owner, device } => {
            let _guard = DeviceGuard::enter(device);
            drop(owner);
        }
        Release::Device { pointer, device, pooled } => {
            if let Err(error) = free_device_memory(pointer, device, pooled) {
                // The memory is leaked rather than freed in a way that might be wrong.
                defer_error("freeing device memory", error);
            }
        }
    }
}

fn free_device_memory(pointer: *mut c_void, device: Device, pooled: bool) -> crate::Result<()> {
    let free_stream = if pooled { Some(&internal_streams(device)?.free) } else { None };
    let _guard = DeviceGuard::enter(device)?;
    let api = device.api();
    match free_stream {
        Some(stream) => {
            // SAFETY: `pointer` came from cudaMallocAsync of `api`'s runtime on `device`, whose
            // internal free stream this is, and is freed once; its owner is gone and all
            // accesses (the allocation included) have completed, so the free needs no
            // ordering beyond the idle free stream.
            let status = unsafe { (api.free_async)(pointer, stream.as_raw()) };
            check(api, status, "cudaFreeAsync")
        }
        None => {
            // SAFETY: `pointer` came from cudaMalloc of `api`'s runtime on `device`, which is
            // current, and is freed once; its owner is gone and all accesses have completed.
            check(api, unsafe { (api.free)(pointer) }, "cudaFree")
        }
    }
}

/// Frees `release` once `events` have completed: now if they already have, else later.
pub(crate) fn bury(events: Vec<Arc<Event>>, released: Release) {
    match state_of(&events) {
        State::Done => release(released),
        State::Busy => {
            // Memory waits here past its owner: free it at exit at the latest.
            crate::at_exit::register();
            GRAVEYARD
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Grave { events, release: released });
        }
        State::Failed(error) => defer_error("waiting to free memory (leaked)", error),
    }
    sweep();
}

/// Frees every buried allocation whose events have completed.
pub(crate) fn sweep() {
    let graves = std::mem::take(&mut *GRAVEYARD.lock().unwrap_or_else(PoisonError::into_inner));
    if graves.is_empty() {
        return;
    }
    let mut still_busy = Vec::new();
    for grave in graves {
        match state_of(&grave.events) {
            State::Done => release(grave.release),
            State::Busy => still_busy.push(grave),
            State::Failed(error) => defer_error("waiting to free memory (leaked)", error),
        }
    }
    if !still_busy.is_empty() {
        GRAVEYARD.lock().unwrap_or_else(PoisonError::into_inner).extend(still_busy);
    }
}

/// At process exit (see `at_exit`): waits for the work of every buried allocation and frees it,
/// then waits for the frees themselves. Skipped when another thread holds the graveyard;
/// allocations whose events report an error stay leaked.
pub(crate) fn drain_at_exit() {
    let graves = match GRAVEYARD.try_lock() {
        Ok(mut graves) => std::mem::take(&mut *graves),
        Err(TryLockError::Poisoned(poisoned)) => std::mem::take(&mut *poisoned.into_inner()),
        Err(TryLockError::WouldBlock) => return,
    };
    let mut devices: Vec<Device> = Vec::new();
    for grave in graves {
        if grave.events.iter().any(|event| event.synchronize().is_err()) {
            continue;
        }
        if let Release::Device { device, pooled: true, .. } = grave.release {
            if !devices.contains(&device) {
                devices.push(device);
            }
        }
        release(grave.release);
    }
    // `cudaFreeAsync` frees in the order of the free stream: let those frees happen.
    for device in devices {
        if let Ok(streams) = internal_streams(device) {
            let _ = streams.free.synchronize();
        }
    }
}
