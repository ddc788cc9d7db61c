//! CUDA streams.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use choreo_sys as sys;

use crate::device::{DeviceGuard, current_ordinal};
use crate::error::{check, check_deferred, defer_error};
use crate::event::Event;
use crate::{Device, Result};

/// Identity of stream objects for the runtime's access tracking (see [`StreamKey`]).
static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(1);

/// The id of the legacy default stream (per device; the key adds the device).
const DEFAULT_STREAM_ID: u64 = 0;

/// Identifies a stream for access tracking: a per-object id (never reused, unlike handle
/// addresses) plus the device, so the legacy default stream of each device is distinct.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct StreamKey {
    id: u64,
    device: i32,
}

/// Whether the [`Stream`] destroys its handle when dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ownership {
    Owned,
    Borrowed,
}

/// A CUDA stream: an ordered queue of device work.
///
/// - [`Stream::new`] creates an owned, *non-blocking* stream (it does not synchronise with the
///   legacy default stream) that is destroyed when dropped; work already enqueued still
///   completes.
/// - [`Stream::default_stream`] is the legacy default stream (the null handle) of the device
///   that is current when it is used; it is never destroyed.
/// - [`Stream::from_raw`] wraps a stream created elsewhere (another library, C++ code) without
///   taking ownership.
///
/// Ordering between streams is the runtime's job: device buffers record the events of every
/// access, and work on one stream waits for conflicting work on others (see
/// [`crate::DeviceBuffer`]).
pub struct Stream {
    raw: sys::cudaStream_t,
    /// The device the stream belongs to; `None` for the legacy default stream and foreign
    /// streams, which belong to whatever device is current when they are used.
    device: Option<i32>,
    ownership: Ownership,
    id: u64,
}

// SAFETY: a CUDA stream handle is a thread-safe reference to a driver object: the runtime API
// may be called with it from any thread, concurrently, and serialises enqueueing internally.
// The only state that is not just the handle is `ownership`; the handle is destroyed once, in
// `Drop`, which has exclusive access. For borrowed streams, `from_raw`'s contract requires the
// handle to stay valid for the Stream's lifetime on any thread.
unsafe impl Send for Stream {}
// SAFETY: see `Send`; every `&self` method only passes the handle to thread-safe CUDA calls.
unsafe impl Sync for Stream {}

impl Stream {
    /// Creates a non-blocking stream on the calling thread's current device.
    pub fn new() -> Result<Stream> {
        check_deferred()?;
        Stream::new_on(current_ordinal()?)
    }

    /// Creates a non-blocking stream on `device`.
    pub fn new_on_device(device: Device) -> Result<Stream> {
        check_deferred()?;
        Stream::new_on(device.raw_ordinal())
    }

    /// Creates a non-blocking stream on device `ordinal`, without consulting the deferred
    /// error slot (for the runtime's internal use).
    pub(crate) fn new_on(ordinal: i32) -> Result<Stream> {
        let _guard = DeviceGuard::enter(ordinal)?;
        let mut raw: sys::cudaStream_t = std::ptr::null_mut();
        // SAFETY: `raw` is a valid, writable handle slot for the duration of the call.
        let status =
            unsafe { sys::cudaStreamCreateWithFlags(&mut raw, sys::cudaStreamNonBlocking) };
        check(status, "cudaStreamCreateWithFlags")?;
        Ok(Stream {
            raw,
            device: Some(ordinal),
            ownership: Ownership::Owned,
            id: NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// The legacy default stream (the null stream) of whichever device is current when the
    /// stream is used. It synchronises with all blocking streams of that device and is never
    /// destroyed. Streams made by [`Stream::new`] are non-blocking and do not synchronise with
    /// it; the runtime's buffer tracking orders accesses across both kinds.
    pub fn default_stream() -> Stream {
        Stream {
            raw: std::ptr::null_mut(),
            device: None,
            ownership: Ownership::Borrowed,
            id: DEFAULT_STREAM_ID,
        }
    }

    /// Wraps a stream handle created elsewhere. The handle is never destroyed by this object.
    ///
    /// # Safety
    ///
    /// - `raw` is a valid stream handle (or one of the special handles: null for the legacy
    ///   default stream, `cudaStreamLegacy`, `cudaStreamPerThread`) and stays valid, i.e. is not
    ///   destroyed, for as long as the returned `Stream` exists;
    /// - the stream belongs to the device that is current on the thread whenever the returned
    ///   `Stream` is used (the runtime cannot look this up);
    /// - it may be used from any thread the returned `Stream` is sent to.
    pub unsafe fn from_raw(raw: sys::cudaStream_t) -> Stream {
        let id = if raw.is_null() {
            DEFAULT_STREAM_ID
        } else {
            NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed)
        };
        Stream { raw, device: None, ownership: Ownership::Borrowed, id }
    }

    /// The raw handle, for passing to CUDA or to generated `extern "C"` entry points. It stays
    /// valid while `self` exists.
    pub fn as_raw(&self) -> sys::cudaStream_t {
        self.raw
    }

    /// The device this stream belongs to (the current device for the default stream and for
    /// foreign streams).
    pub fn device(&self) -> Result<Device> {
        Ok(Device::from_raw_ordinal(self.device_ordinal()?))
    }

    /// Makes the stream's device current until the guard is dropped. Kernel launches go to the
    /// current device, so launchers hold this guard while they enqueue work on the stream.
    pub fn bind_device(&self) -> Result<DeviceGuard> {
        match self.device {
            Some(ordinal) => DeviceGuard::enter(ordinal),
            None => Ok(DeviceGuard::none()),
        }
    }

    pub(crate) fn device_ordinal(&self) -> Result<i32> {
        match self.device {
            Some(ordinal) => Ok(ordinal),
            None => current_ordinal(),
        }
    }

    pub(crate) fn key(&self) -> Result<StreamKey> {
        Ok(StreamKey { id: self.id, device: self.device_ordinal()? })
    }

    /// Blocks until all work enqueued on the stream has completed.
    pub fn synchronize(&self) -> Result<()> {
        let _guard = self.bind_device()?;
        // SAFETY: `self.raw` is a valid stream handle while `self` exists.
        check(unsafe { sys::cudaStreamSynchronize(self.raw) }, "cudaStreamSynchronize")
    }

    /// `true` when all work enqueued on the stream has completed; does not block.
    pub fn query(&self) -> Result<bool> {
        let _guard = self.bind_device()?;
        // SAFETY: `self.raw` is a valid stream handle while `self` exists.
        let status = unsafe { sys::cudaStreamQuery(self.raw) };
        if status == sys::cudaError_t::cudaErrorNotReady {
            return Ok(false);
        }
        check(status, "cudaStreamQuery")?;
        Ok(true)
    }

    /// Makes all work enqueued on this stream from now on wait until `event` has completed
    /// (its most recent record). Does not block the host.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        let _guard = self.bind_device()?;
        // SAFETY: both handles are valid while `self` and `event` exist; waiting on an event
        // of another device is allowed.
        let status = unsafe {
            sys::cudaStreamWaitEvent(self.raw, event.as_raw(), sys::cudaEventWaitDefault)
        };
        check(status, "cudaStreamWaitEvent")
    }

    /// Records a new event (with timing) at the current end of the stream.
    pub fn record_event(&self) -> Result<Event> {
        check_deferred()?;
        let mut event = Event::new_on(self.device_ordinal()?, true)?;
        event.record(self)?;
        Ok(event)
    }

    /// Records a new event without timing data (cheaper), for the runtime's bookkeeping.
    pub(crate) fn record_untimed_event(&self) -> Result<Event> {
        let mut event = Event::new_on(self.device_ordinal()?, false)?;
        event.record(self)?;
        Ok(event)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.ownership == Ownership::Owned {
            // SAFETY: the handle was created by this object, is destroyed only here, and
            // cudaStreamDestroy lets already enqueued work complete.
            let status = unsafe { sys::cudaStreamDestroy(self.raw) };
            if let Err(error) = check(status, "cudaStreamDestroy") {
                defer_error("dropping a Stream", error);
            }
        }
    }
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("raw", &self.raw)
            .field("device", &self.device)
            .field("owned", &(self.ownership == Ownership::Owned))
            .finish()
    }
}
