//! Events of both backends.

use std::fmt;

use choreo_sys as sys;

use crate::backend::Api;
use crate::device::DeviceGuard;
use crate::error::{check, check_deferred, defer_error};
use crate::stream::{Stream, same_backend};
use crate::{Device, Error, Result};

/// An event: a marker in a stream that completes when the work before it has completed (a
/// CUDA event, or one of the CPU runtime for CPU streams).
///
/// Recording needs `&mut self`: re-recording moves the marker, and the runtime hands out
/// `&Event`s of work it tracks (e.g. [`crate::Pending::events`]) that must keep meaning what
/// they meant.
pub struct Event {
    raw: sys::cudaEvent_t,
    device: Device,
    timing: bool,
}

// SAFETY: an event handle (CUDA's or the CPU runtime's) is a thread-safe reference to a runtime
// object; the runtime API may be
// called with it from any thread. It is destroyed once, in `Drop`, and re-recorded only through
// `&mut self`.
unsafe impl Send for Event {}
// SAFETY: see `Send`; `&self` methods only query, wait on or read the timing of the event.
unsafe impl Sync for Event {}

impl Event {
    /// Creates an event (with timing data) on the default device
    /// ([`Device::default_device`]). Until it is recorded, it counts as complete.
    pub fn new() -> Result<Event> {
        check_deferred()?;
        Event::create(Device::default_device()?, true)
    }

    /// Creates an event (with timing data) on `device`. Until it is recorded, it counts as
    /// complete.
    pub fn new_on_device(device: Device) -> Result<Event> {
        check_deferred()?;
        Event::create(device, true)
    }

    /// An event of `device`. Untimed ones may come from the pool and then still carry an old
    /// record: they are only made by [`Stream::record_untimed_event`] and by the recording of the
    /// runtime's lazy points (`crate::point`), which record them at once.
    pub(crate) fn create(device: Device, timing: bool) -> Result<Event> {
        if !timing {
            if let Some(raw) = pool::take(device) {
                return Ok(Event { raw, device, timing });
            }
        }
        let _guard = DeviceGuard::enter(device)?;
        let api = device.api();
        let flags = if timing { sys::cudaEventDefault } else { sys::cudaEventDisableTiming };
        let mut raw: sys::cudaEvent_t = std::ptr::null_mut();
        // SAFETY: `raw` is a valid, writable handle slot for the duration of the call.
        let status = unsafe { (api.event_create_with_flags)(&mut raw, flags) };
        check(api, status, "cudaEventCreateWithFlags")?;
        Ok(Event { raw, device, timing })
    }

    /// The function table of the event's backend.
    fn api(&self) -> &'static Api {
        self.device.api()
    }

    /// Records the event at the current end of `stream`, which must belong to the event's
    /// device ([`Error::DeviceMismatch`] for a stream of the other backend).
    pub fn record(&mut self, stream: &Stream) -> Result<()> {
        let stream_device = stream.device()?;
        same_backend("the event", self.device, stream_device)?;
        if stream_device != self.device {
            return Err(Error::InvalidArgument(format!(
                "an event of device {} cannot be recorded on a stream of device {}",
                self.device.ordinal(),
                stream_device.ordinal()
            )));
        }
        let _guard = stream.bind_device()?;
        let api = self.api();
        // SAFETY: both handles are valid while `self` and `stream` exist, and belong to the
        // same device of `api`'s backend (checked above).
        check(api, unsafe { (api.event_record)(self.raw, stream.as_raw()) }, "cudaEventRecord")
    }

    /// Records the event at the current end of the stream `raw`, without the checks of
    /// [`Event::record`] (for the runtime's lazily recorded points, which keep the handle).
    ///
    /// # Safety
    ///
    /// `raw` is a valid stream handle of the event's device (and backend) for the duration of
    /// the call.
    pub(crate) unsafe fn record_on_raw(&mut self, raw: sys::cudaStream_t) -> Result<()> {
        let api = self.api();
        // SAFETY: `self.raw` is a valid event handle of `api`'s runtime; the caller guarantees
        // that `raw` is a valid stream of the same device.
        check(api, unsafe { (api.event_record)(self.raw, raw) }, "cudaEventRecord")
    }

    /// Blocks until the work before the most recent record has completed (immediately if the
    /// event was never recorded).
    pub fn synchronize(&self) -> Result<()> {
        let api = self.api();
        // SAFETY: `self.raw` is a valid event handle of `api`'s runtime while `self` exists.
        check(api, unsafe { (api.event_synchronize)(self.raw) }, "cudaEventSynchronize")
    }

    /// `true` when the work before the most recent record has completed; does not block.
    pub fn query(&self) -> Result<bool> {
        let api = self.api();
        // SAFETY: `self.raw` is a valid event handle of `api`'s runtime while `self` exists.
        let status = unsafe { (api.event_query)(self.raw) };
        if status == sys::cudaError_t::cudaErrorNotReady {
            return Ok(false);
        }
        check(api, status, "cudaEventQuery")?;
        Ok(true)
    }

    /// Milliseconds between this event and `end` (both recorded and complete, both created
    /// with timing, e.g. by [`Event::new`] or [`Stream::record_event`]).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        if !self.timing || !end.timing {
            return Err(Error::InvalidArgument(
                "elapsed time needs two events created with timing (Event::new or \
                 Stream::record_event)"
                    .into(),
            ));
        }
        same_backend("the end event", end.device, self.device)?;
        let api = self.api();
        let mut milliseconds = 0f32;
        // SAFETY: both handles are valid while the events exist and belong to `api`'s runtime
        // (checked above); `milliseconds` is writable.
        let status = unsafe { (api.event_elapsed_time)(&mut milliseconds, self.raw, end.as_raw()) };
        check(api, status, "cudaEventElapsedTime")?;
        Ok(milliseconds)
    }

    /// The device the event belongs to.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The raw handle; valid while `self` exists. Recording it through the raw handle while
    /// the runtime relies on it (e.g. an event of a [`crate::Pending`]) breaks the runtime's
    /// ordering guarantees, so only wait on or query it.
    pub fn as_raw(&self) -> sys::cudaEvent_t {
        self.raw
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // Untimed events are the runtime's bookkeeping events, made for every tracked access:
        // they go back to the pool, since re-recording an event is cheaper than creating one.
        if !self.timing && pool::give_back(self.device, self.raw) {
            return;
        }
        let api = self.api();
        // SAFETY: the handle was created by this object with `api`'s runtime and is destroyed
        // only here. Destroying an event whose work is still pending is allowed: the runtime
        // releases it once the work completes, and waits already enqueued on it are unaffected.
        let status = unsafe { (api.event_destroy)(self.raw) };
        if let Err(error) = check(api, status, "cudaEventDestroy") {
            defer_error("dropping an Event", error);
        }
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("raw", &self.raw)
            .field("device", &self.device)
            .field("timing", &self.timing)
            .finish()
    }
}

/// Untimed events of dropped [`Event`]s, reused by [`Event::create`] (`cudaEventCreate` and
/// `cudaEventDestroy` cost more host time than `cudaEventRecord`, and every tracked access
/// records an event).
///
/// Reusing a handle is sound because no [`Event`] refers to it any more: waits that streams
/// enqueued on it (`cudaStreamWaitEvent`) captured the record they wait for when they were
/// enqueued (in CUDA, and in the CPU runtime, whose waits hold the recorded stream position),
/// so recording the handle again does not change them, exactly as destroying it would not; and
/// nothing else can query or synchronise a handle whose `Event` is gone. Handles are pooled by
/// device, so a CPU handle is only ever reused as a CPU event.
mod pool {
    use std::sync::{Mutex, PoisonError};

    use choreo_sys as sys;

    use crate::Device;

    /// Most events kept; more are destroyed.
    const LIMIT: usize = 4096;

    /// A pooled handle with its device.
    struct Pooled {
        device: Device,
        raw: sys::cudaEvent_t,
    }

    // SAFETY: an event handle is a thread-safe reference to a runtime object (see `Event`), and
    // a pooled one is owned by the pool alone.
    unsafe impl Send for Pooled {}

    static POOL: Mutex<Vec<Pooled>> = Mutex::new(Vec::new());

    /// An untimed event of `device` from the pool, if there is one.
    pub(super) fn take(device: Device) -> Option<sys::cudaEvent_t> {
        let mut pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
        let index = pool.iter().rposition(|pooled| pooled.device == device)?;
        Some(pool.swap_remove(index).raw)
    }

    /// Keeps `raw` (an untimed event of `device` that no `Event` owns any more) for reuse;
    /// `false` when the pool is full and the caller must destroy it.
    pub(super) fn give_back(device: Device, raw: sys::cudaEvent_t) -> bool {
        let mut pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
        if pool.len() >= LIMIT {
            return false;
        }
        pool.push(Pooled { device, raw });
        true
    }
}
