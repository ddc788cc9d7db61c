//! Lazily recorded stream points: the events that mark where tracked work ends, recorded only
//! when someone needs them.
//!
//! Every tracked operation (a kernel call, a copy, a memset) marks the end of its work on each
//! stream it ran on with a [`Point`], which every buffer it accessed and its
//! [`crate::Pending`] share. Recording a CUDA event for it right away costs a
//! `cudaEventRecord` per operation, which most programs never need: in a loop of calls on one
//! stream, each call replaces the previous call's points in the buffers' tracking, and the
//! `Pending` is dropped. So a point is created *open* (without an event), and recorded when
//! needed.
//!
//! # The rules
//!
//! - Each owned stream keeps its *open point* (at most one): the point of the latest tracked
//!   operation on it, not yet recorded. Unrecorded points exist only as the open point of
//!   their stream (a point stops being open exactly when it is recorded).
//! - **On demand.** Whoever needs a point's event (another stream that must wait for it, a host
//!   wait or query, a free, [`crate::Pending::wait`] / `is_complete` / `then` / `events` /
//!   its future) records it first, at the current end of its stream ([`Point::event`]).
//! - **Before the next operation** on the stream is enqueued, the open point is *sealed*
//!   (recorded) when someone other than that operation can still need it: a `Pending`, a
//!   buffer the operation does not access, an access entry the operation does not replace
//!   (`Stream::seal_point`, with the number of references the operation replaces). When the
//!   operation replaces every reference, the point is *extended* instead: after the operation
//!   is enqueued it becomes that operation's point too (`Stream::point_after_enqueue`), and
//!   no event is recorded at all. This is the steady state of a loop of calls on one stream.
//!   Before a stream is made to wait for an event (`Stream::wait_event`, which the tracking
//!   and [`crate::Pending::then`] use), its open point is sealed if anyone holds it, so waits
//!   never become false dependencies of earlier work. (Work that a program enqueues itself
//!   through `Stream::as_raw` between two tracked operations can end up inside the earlier
//!   one's point: those who wait for it then also wait for that work; nothing else changes.)
//! - A dropped owned stream records its open point if anyone holds it, before its handle is
//!   destroyed.
//!
//! # Soundness
//!
//! Memory safety rests on one property only: **every access a point stands for was enqueued
//! before the point's event is recorded.** A point becomes an operation's point only after the
//! operation was enqueued (the extension happens in `Stream::point_after_enqueue`, under the
//! stream's lock, and only while the point is still unrecorded; on-demand recording takes the
//! same lock), so whenever it is recorded, it is recorded after all the work it covers.
//! Recording *later* than the end of an access is never unsound: the event then also covers
//! work enqueued after it, and whoever waits for it only waits longer. Everything in the sealing
//! rules above (reference counts, which operation replaces which entry) only decides how
//! *precise* a point is (whether an unrelated later operation is included), never whether it
//! covers its own accesses; counts that are stale because of a race only cost waiting time.
//!
//! Only streams this runtime owns (`Stream::new`, `Stream::new_on_device`) have open
//! points: their handle lives exactly as long as the `Stream` (or forever, if it is leaked),
//! so a point can always be recorded on it. The legacy default stream and wrapped foreign
//! streams record every point right away, as before.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use choreo_sys as sys;

use crate::device::DeviceGuard;
use crate::event::Event;
use crate::stream::StreamKey;
use crate::{Device, Error, Result};

/// The end of a tracked operation's work on one stream; see the module docs.
pub(crate) struct Point {
    /// The stream's lane, for recording on demand; `None` for points recorded at creation.
    lane: Option<Arc<Lane>>,
    /// Set once, when the point is recorded (under the lane's lock for lazy points).
    event: OnceLock<Arc<Event>>,
}

impl fmt::Debug for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Point").field("recorded", &self.event.get().is_some()).finish()
    }
}

impl Point {
    /// A point whose event is already recorded.
    pub(crate) fn recorded(event: Event) -> Arc<Point> {
        let point = Point { lane: None, event: OnceLock::new() };
        let _ = point.event.set(Arc::new(event));
        Arc::new(point)
    }

    /// `true` when the point has not been recorded yet (it is its stream's open point).
    pub(crate) fn is_open(&self) -> bool {
        self.event.get().is_none()
    }

    /// The point's event, recorded now at the end of its stream if it was still open (which is
    /// exact: an open point is the last tracked work on its stream).
    pub(crate) fn event(self: &Arc<Self>) -> Result<&Arc<Event>> {
        if let Some(event) = self.event.get() {
            return Ok(event);
        }
        let Some(lane) = &self.lane else {
            // Points without a lane are created recorded.
            return Err(Error::InvalidArgument("an unrecorded point without a stream".into()));
        };
        let mut state = lane.lock();
        if self.event.get().is_none() {
            if state.closed {
                return Err(Error::InvalidArgument(
                    "the stream of this work was destroyed before its end could be recorded \
                     (an earlier error was deferred)"
                        .into(),
                ));
            }
            lane.record(self)?;
            if state.open.as_ref().is_some_and(|open| Arc::ptr_eq(open, self)) {
                state.open = None;
            }
        }
        drop(state);
        self.event.get().ok_or_else(|| Error::InvalidArgument("point not recorded".into()))
    }
}

/// The lazy-point state of one owned stream.
pub(crate) struct Lane {
    raw: sys::cudaStream_t,
    device: Device,
    key: StreamKey,
    state: Mutex<LaneState>,
    /// Events recorded for points of this stream (for tests and measurements).
    records: AtomicU64,
}

struct LaneState {
    /// The open point: the latest tracked work on the stream, unrecorded.
    open: Option<Arc<Point>>,
    /// Set when the stream was destroyed: nothing can be recorded on it any more.
    closed: bool,
}

// SAFETY: the handle is a thread-safe reference to a runtime stream (see `Stream`), used only
// while the lane is not closed, i.e. before the owning `Stream` destroys it; the mutable state
// is behind the Mutex.
unsafe impl Send for Lane {}
// SAFETY: see `Send`.
unsafe impl Sync for Lane {}

impl Lane {
    /// The lane of an owned stream with handle `raw` on `device`.
    pub(crate) fn new(raw: sys::cudaStream_t, device: Device, key: StreamKey) -> Arc<Lane> {
        Arc::new(Lane {
            raw,
            device,
            key,
            state: Mutex::new(LaneState { open: None, closed: false }),
            records: AtomicU64::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, LaneState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The stream's key.
    pub(crate) fn key(&self) -> StreamKey {
        self.key
    }

    /// Events recorded for this stream's points so far.
    pub(crate) fn records(&self) -> u64 {
        self.records.load(Ordering::Relaxed)
    }

    /// Records `point` at the current end of the stream. The caller holds the lane's lock and
    /// checked that the lane is not closed and the point unrecorded.
    fn record(&self, point: &Point) -> Result<()> {
        let mut event = Event::create(self.device, false)?;
        let _guard = DeviceGuard::enter(self.device)?;
        // SAFETY: the lane is not closed, so the owning `Stream` has not destroyed the handle
        // (it closes the lane under this lock first); the event belongs to the same device.
        unsafe { event.record_on_raw(self.raw)? };
        self.records.fetch_add(1, Ordering::Relaxed);
        let _ = point.event.set(Arc::new(event));
        Ok(())
    }

    /// Seals the open point before the next operation is enqueued, unless its only holders
    /// are the lane and `replaced` references that the operation replaces.
    pub(crate) fn seal(&self, replaced: usize) -> Result<()> {
        let mut state = self.lock();
        let Some(open) = &state.open else {
            return Ok(());
        };
        if Arc::strong_count(open) <= 1 + replaced {
            return Ok(());
        }
        // An open lane is not closed: `close` takes the open point.
        self.record(open)?;
        state.open = None;
        Ok(())
    }

    /// The point of an operation just enqueued: the open point (extended over the operation:
    /// it is unrecorded, so it will be recorded after it), or a new open point.
    pub(crate) fn after_enqueue(self: &Arc<Self>) -> Arc<Point> {
        let mut state = self.lock();
        if let Some(open) = &state.open {
            return Arc::clone(open);
        }
        let point = Arc::new(Point { lane: Some(Arc::clone(self)), event: OnceLock::new() });
        state.open = Some(Arc::clone(&point));
        point
    }

    /// A point recorded now, at the current end of the stream: the open point, recorded, or a
    /// new recorded point.
    pub(crate) fn now(self: &Arc<Self>) -> Result<Arc<Point>> {
        let point = self.after_enqueue();
        point.event()?;
        Ok(point)
    }

    /// Called by the owning stream before it destroys its handle: records the open point if
    /// anyone still holds it, and closes the lane.
    pub(crate) fn close(&self) -> Result<()> {
        let mut state = self.lock();
        let open = state.open.take();
        state.closed = true;
        match open {
            Some(open) if Arc::strong_count(&open) > 1 => self.record(&open),
            _ => Ok(()),
        }
    }
}
