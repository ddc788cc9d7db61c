//! Streams of both backends.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use choreo_sys as sys;

use crate::backend::{Api, Backend};
use crate::device::DeviceGuard;
use crate::error::{check, check_deferred, defer_error};
use crate::event::Event;
use crate::point::{Lane, Point};
use crate::tracking::Recorded;
use crate::{Device, Error, Result};

/// Identity of stream objects for the runtime's access tracking (see [`StreamKey`]).
static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(1);

/// The id of the legacy default stream (per device; the key adds the device).
const DEFAULT_STREAM_ID: u64 = 0;

/// Identifies a stream for access tracking: a per-object id (never reused, unlike handle
/// addresses) plus the device, so the legacy default stream of each device is distinct.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct StreamKey {
    id: u64,
    device: Device,
}

impl StreamKey {
    /// The stream's device.
    pub(crate) fn device(&self) -> Device {
        self.device
    }
}

/// Whether the [`Stream`] destroys its handle when dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ownership {
    Owned,
    Borrowed,
}

/// Which device a [`Stream`] belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Placement {
    /// Created on this device, or given it explicitly.
    Fixed(Device),
    /// A CUDA stream of whatever CUDA device is current when it is used (foreign streams and
    /// the legacy default stream wrapped by [`Stream::from_raw`]).
    CurrentCuda,
    /// The legacy default stream of the default device ([`Stream::default_stream`]), resolved
    /// at each use: the current CUDA device's, or the CPU's.
    DefaultDevice,
}

/// A stream: an ordered queue of device work, on a CUDA GPU or on the CPU.
///
/// - [`Stream::new`] creates an owned, *non-blocking* stream (it does not synchronise with the
///   legacy default stream) on the default device ([`Device::default_device`]: a CUDA GPU
///   when there is one, else the CPU, unless `CHOREO_DEVICE` says otherwise);
///   [`Stream::new_on_device`] on a given device. It is destroyed when dropped; work already
///   enqueued still completes.
/// - [`Stream::default_stream`] is the legacy default stream (the null handle) of the default
///   device: with a CUDA default device, that of whichever CUDA device is current when it is
///   used, as in CUDA; on a machine without a GPU (or with `CHOREO_DEVICE=cpu`), the CPU
///   runtime's legacy stream. It is never destroyed. [`Stream::default_stream_on`] is that of
///   a given device.
/// - [`Stream::from_raw`] / [`Stream::from_raw_on`] wrap a stream created elsewhere (another
///   library, C++ code) without taking ownership.
///
/// On the CPU a stream is a queue run by a worker thread of the CPU runtime, so two streams
/// overlap for real; events, waits and host callbacks keep CUDA's meaning.
///
/// Ordering between streams is the runtime's job: device buffers record the events of every
/// access, and work on one stream waits for conflicting work on others (see
/// [`crate::DeviceBuffer`]). Streams, events and buffers of the CPU and of a GPU cannot be
/// combined: such calls fail with [`Error::DeviceMismatch`].
pub struct Stream {
    raw: sys::cudaStream_t,
    placement: Placement,
    ownership: Ownership,
    id: u64,
    /// What keeps a borrowed handle alive (e.g. the `Arc` of a cudarc stream), dropped with the
    /// `Stream`.
    keep_alive: Option<KeepAlive>,
    /// The lazily recorded points of an owned stream (see `crate::point`); `None` for borrowed
    /// streams, whose points are recorded right away.
    lane: Option<std::sync::Arc<Lane>>,
}

/// The owner of a wrapped foreign stream handle.
pub(crate) type KeepAlive = std::sync::Arc<dyn std::any::Any + Send + Sync>;

// SAFETY: a stream handle (CUDA's or the CPU runtime's) is a thread-safe reference to a runtime
// object: the runtime API may be called with it from any thread, concurrently, and serialises
// enqueueing internally. The only state that is not just the handle is `ownership` and
// `placement`, both immutable; the handle is destroyed once, in `Drop`, which has exclusive
// access. For borrowed streams, `from_raw`'s contract requires the handle to stay valid for the
// Stream's lifetime on any thread.
unsafe impl Send for Stream {}
// SAFETY: see `Send`; every `&self` method only passes the handle to thread-safe runtime calls.
unsafe impl Sync for Stream {}

impl Stream {
    /// Creates a non-blocking stream on the default device ([`Device::default_device`]): on a
    /// machine without a usable GPU (or with `CHOREO_DEVICE=cpu`) a CPU stream, else one of the
    /// calling thread's current CUDA device.
    pub fn new() -> Result<Stream> {
        check_deferred()?;
        Stream::create(Device::default_device()?)
    }

    /// Creates a non-blocking stream on `device`.
    pub fn new_on_device(device: Device) -> Result<Stream> {
        check_deferred()?;
        Stream::create(device)
    }

    /// Creates a non-blocking stream on `device`, without consulting the deferred error slot
    /// (for the runtime's internal use).
    pub(crate) fn create(device: Device) -> Result<Stream> {
        let _guard = DeviceGuard::enter(device)?;
        let api = device.api();
        let mut raw: sys::cudaStream_t = std::ptr::null_mut();
        // SAFETY: `raw` is a valid, writable handle slot for the duration of the call.
        let status =
            unsafe { (api.stream_create_with_flags)(&mut raw, sys::cudaStreamNonBlocking) };
        check(api, status, "cudaStreamCreateWithFlags")?;
        let id = NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed);
        Ok(Stream {
            raw,
            placement: Placement::Fixed(device),
            ownership: Ownership::Owned,
            id,
            keep_alive: None,
            lane: Some(Lane::new(raw, device, StreamKey { id, device })),
        })
    }

    /// The legacy default stream (the null stream) of the default device
    /// ([`Device::default_device`]), resolved whenever the stream is used:
    ///
    /// - with a CUDA default device, that of whichever CUDA device is current at the use, as
    ///   in CUDA;
    /// - on a machine without a usable GPU, or with `CHOREO_DEVICE=cpu`, the CPU runtime's.
    ///
    /// It synchronises with all blocking streams of its device and is never destroyed. Streams
    /// made by [`Stream::new`] are non-blocking and do not synchronise with it; the runtime's
    /// buffer tracking orders accesses across both kinds. When the default device cannot be
    /// chosen (e.g. `CHOREO_DEVICE=cuda` without a GPU), every use fails with that error.
    pub fn default_stream() -> Stream {
        Stream {
            raw: std::ptr::null_mut(),
            placement: Placement::DefaultDevice,
            ownership: Ownership::Borrowed,
            id: DEFAULT_STREAM_ID,
            keep_alive: None,
            lane: None,
        }
    }

    /// The legacy default stream of `device` (for a CUDA device: of that device, whichever is
    /// current when it is used).
    pub fn default_stream_on(device: Device) -> Stream {
        Stream {
            raw: std::ptr::null_mut(),
            placement: Placement::Fixed(device),
            ownership: Ownership::Borrowed,
            id: DEFAULT_STREAM_ID,
            keep_alive: None,
            lane: None,
        }
    }

    /// Wraps a CUDA stream handle created elsewhere. The handle is never destroyed by this
    /// object.
    ///
    /// # Safety
    ///
    /// - `raw` is a valid CUDA stream handle (or one of the special handles: null for the
    ///   legacy default stream, `cudaStreamLegacy`, `cudaStreamPerThread`) and stays valid,
    ///   i.e. is not destroyed, for as long as the returned `Stream` exists;
    /// - the stream belongs to the CUDA device that is current on the thread whenever the
    ///   returned `Stream` is used (the runtime cannot look this up);
    /// - it may be used from any thread the returned `Stream` is sent to.
    pub unsafe fn from_raw(raw: sys::cudaStream_t) -> Stream {
        Stream {
            raw,
            placement: Placement::CurrentCuda,
            ownership: Ownership::Borrowed,
            id: id_for(raw),
            keep_alive: None,
            lane: None,
        }
    }

    /// Wraps a stream handle of `device` created elsewhere (for the CPU: a handle of the CPU
    /// runtime, `choreo_cpu_cudaStreamCreate*`). The handle is never destroyed by this object.
    ///
    /// # Safety
    ///
    /// - `raw` is a valid stream handle *of `device`'s runtime and device* (null: its legacy
    ///   default stream) and stays valid, i.e. is not destroyed, for as long as the returned
    ///   `Stream` exists;
    /// - it may be used from any thread the returned `Stream` is sent to.
    pub unsafe fn from_raw_on(device: Device, raw: sys::cudaStream_t) -> Stream {
        Stream {
            raw,
            placement: Placement::Fixed(device),
            ownership: Ownership::Borrowed,
            id: id_for(raw),
            keep_alive: None,
            lane: None,
        }
    }

    /// Wraps a stream handle of `device` that `owner` keeps alive: the `Stream` holds `owner`
    /// until it is dropped (for the interop modules, e.g. a cudarc `Arc<CudaStream>`).
    ///
    /// # Safety
    ///
    /// `raw` is a valid stream handle of `device`'s runtime and device that stays valid while
    /// `owner` exists, and may be used from any thread.
    #[cfg_attr(not(feature = "cudarc"), allow(dead_code))]
    pub(crate) unsafe fn from_raw_kept_alive(
        device: Device,
        raw: sys::cudaStream_t,
        owner: KeepAlive,
    ) -> Stream {
        // SAFETY: forwarded to the caller; `owner` is kept as long as the Stream exists.
        let mut stream = unsafe { Stream::from_raw_on(device, raw) };
        stream.keep_alive = Some(owner);
        stream
    }

    /// The owner given to [`Stream::from_raw_kept_alive`], if any.
    #[cfg_attr(not(feature = "cudarc"), allow(dead_code))]
    pub(crate) fn keep_alive(&self) -> Option<&KeepAlive> {
        self.keep_alive.as_ref()
    }

    /// The raw handle, for passing to the runtime of the stream's backend or to generated
    /// `extern "C"` entry points compiled for it (a CPU stream's handle is the CPU runtime's
    /// `cudaStream_t`, a pointer too; it must never reach CUDA). It stays valid while `self`
    /// exists.
    pub fn as_raw(&self) -> sys::cudaStream_t {
        self.raw
    }

    /// The device this stream belongs to (for [`Stream::default_stream`] the default device,
    /// for foreign CUDA streams the current CUDA device).
    pub fn device(&self) -> Result<Device> {
        match self.placement {
            Placement::Fixed(device) => Ok(device),
            Placement::CurrentCuda => Device::current(),
            Placement::DefaultDevice => Device::default_device(),
        }
    }

    /// The backend that runs the stream's work.
    pub fn backend(&self) -> Result<Backend> {
        Ok(self.device()?.backend())
    }

    /// Makes the stream's device current until the guard is dropped. Kernel launches go to the
    /// current device, so launchers hold this guard while they enqueue work on the stream.
    pub fn bind_device(&self) -> Result<DeviceGuard> {
        match self.placement {
            Placement::Fixed(device) => DeviceGuard::enter(device),
            Placement::CurrentCuda | Placement::DefaultDevice => Ok(DeviceGuard::none()),
        }
    }

    /// The device and the function table of its backend.
    pub(crate) fn device_and_api(&self) -> Result<(Device, &'static Api)> {
        let device = self.device()?;
        Ok((device, device.api()))
    }

    pub(crate) fn key(&self) -> Result<StreamKey> {
        Ok(StreamKey { id: self.id, device: self.device()? })
    }

    /// Blocks until all work enqueued on the stream has completed.
    pub fn synchronize(&self) -> Result<()> {
        let (_, api) = self.device_and_api()?;
        let _guard = self.bind_device()?;
        // SAFETY: `self.raw` is a valid stream handle of `api`'s runtime while `self` exists.
        check(api, unsafe { (api.stream_synchronize)(self.raw) }, "cudaStreamSynchronize")
    }

    /// `true` when all work enqueued on the stream has completed; does not block.
    pub fn query(&self) -> Result<bool> {
        let (_, api) = self.device_and_api()?;
        let _guard = self.bind_device()?;
        // SAFETY: `self.raw` is a valid stream handle of `api`'s runtime while `self` exists.
        let status = unsafe { (api.stream_query)(self.raw) };
        if status == sys::cudaError_t::cudaErrorNotReady {
            return Ok(false);
        }
        check(api, status, "cudaStreamQuery")?;
        Ok(true)
    }

    /// Makes all work enqueued on this stream from now on wait until `event` has completed
    /// (its most recent record). Does not block the host.
    ///
    /// [`Error::DeviceMismatch`] when the event is of the other backend (a CPU event and a
    /// CUDA stream, or the reverse); events of another CUDA device are fine.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        let (device, api) = self.device_and_api()?;
        same_backend("the event", event.device(), device)?;
        // The wait must not become part of the end of earlier tracked work on this stream
        // (its lazily recorded point, see `crate::point`): record that first if it is needed.
        self.seal_point(0)?;
        let _guard = self.bind_device()?;
        // SAFETY: both handles are valid while `self` and `event` exist and belong to the same
        // backend's runtime (checked above); waiting on an event of another CUDA device is
        // allowed.
        let status =
            unsafe { (api.stream_wait_event)(self.raw, event.as_raw(), sys::cudaEventWaitDefault) };
        check(api, status, "cudaStreamWaitEvent")
    }

    /// Records a new event (with timing) at the current end of the stream.
    pub fn record_event(&self) -> Result<Event> {
        check_deferred()?;
        let mut event = Event::create(self.device()?, true)?;
        event.record(self)?;
        Ok(event)
    }

    /// Before a tracked operation is enqueued on the stream: seals (records) the stream's open
    /// point unless its only holders are the stream and `replaced` references that the
    /// operation replaces (see `crate::point`). Nothing for streams without lazy points.
    pub(crate) fn seal_point(&self, replaced: usize) -> Result<()> {
        match &self.lane {
            Some(lane) => lane.seal(replaced),
            None => Ok(()),
        }
    }

    /// After a tracked operation was enqueued on the stream: the point that marks its end (the
    /// open point, extended over it, or a new open point; for streams without lazy points a
    /// new recorded event).
    pub(crate) fn point_after_enqueue(&self) -> Result<Recorded> {
        match &self.lane {
            Some(lane) => Ok(Recorded { stream: lane.key(), point: lane.after_enqueue() }),
            None => self.point_now(),
        }
    }

    /// A point recorded now at the current end of the stream (the open point, if any, is
    /// recorded and used).
    pub(crate) fn point_now(&self) -> Result<Recorded> {
        match &self.lane {
            Some(lane) => Ok(Recorded { stream: lane.key(), point: lane.now()? }),
            None => Ok(Recorded {
                stream: self.key()?,
                point: Point::recorded(self.record_untimed_event()?),
            }),
        }
    }

    /// How many bookkeeping events the runtime has recorded on this stream to mark the end of
    /// tracked work (kernel calls, copies); always 0 for streams it does not own, whose events
    /// are not counted. For tests and measurements of the lazy recording (see
    /// `docs/performance.md`).
    #[doc(hidden)]
    pub fn bookkeeping_records(&self) -> u64 {
        self.lane.as_ref().map_or(0, |lane| lane.records())
    }

    /// Records a new event without timing data (cheaper), for the runtime's bookkeeping.
    pub(crate) fn record_untimed_event(&self) -> Result<Event> {
        let mut event = Event::create(self.device()?, false)?;
        event.record(self)?;
        Ok(event)
    }
}

/// The tracking id of a wrapped handle: the legacy default stream's for null.
fn id_for(raw: sys::cudaStream_t) -> u64 {
    if raw.is_null() { DEFAULT_STREAM_ID } else { NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed) }
}

/// [`Error::DeviceMismatch`] when `what`, on `found`, is of another backend than `expected`,
/// the device of the call.
pub(crate) fn same_backend(what: &str, found: Device, expected: Device) -> Result<()> {
    if found.backend() == expected.backend() {
        Ok(())
    } else {
        Err(Error::DeviceMismatch { what: what.to_owned(), found, expected })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Some(lane) = &self.lane {
            // Points that someone still holds must be recorded while the handle is valid.
            if let Err(error) = lane.close() {
                defer_error("recording the end of a dropped Stream's work", error);
            }
        }
        if self.ownership == Ownership::Owned {
            // Owned streams were created on a fixed device.
            let Placement::Fixed(device) = self.placement else {
                return;
            };
            let api = device.api();
            // SAFETY: the handle was created by this object with `api`'s runtime, is destroyed
            // only here, and cudaStreamDestroy lets already enqueued work complete.
            let status = unsafe { (api.stream_destroy)(self.raw) };
            if let Err(error) = check(api, status, "cudaStreamDestroy") {
                defer_error("dropping a Stream", error);
            }
        }
    }
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("raw", &self.raw)
            .field("placement", &self.placement)
            .field("owned", &(self.ownership == Ownership::Owned))
            .finish()
    }
}
