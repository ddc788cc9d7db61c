//! Access tracking for memory that the GPU reads and writes asynchronously (cudarc's model,
//! extended to several concurrent readers).
//!
//! Each tracked allocation keeps the events recorded after its last write (one per stream the
//! write ran on: a kernel call may write a tensor from kernels on several streams) and one event
//! per stream that read it since then. Events are shared (`Arc`): an operation records one event
//! per stream it ran on, and every allocation it accessed keeps that same event. Before a read,
//! the reading stream waits for the last write; before a write, the writing stream waits for the
//! last write and all reads. After enqueueing, the access is recorded. A free (or host access)
//! waits for all of them.
//!
//! The events are lazily recorded points ([`crate::point`]): an operation's point is recorded
//! only when someone needs it (another stream, the host, a free), or before the next operation
//! on its stream when someone else still holds it. `before_*` count the references to open
//! points that the operation will replace, so that the stream can tell whether its open point
//! must be sealed first.
//!
//! Accesses whose recording did not happen (a caller took a pointer and never called
//! `record_*`, or recording failed after the work was enqueued) are counted; while any are
//! outstanding, conflicting accesses and the free fall back to synchronising the whole device,
//! so a missed record costs time, never memory safety.

use std::sync::Arc;

use crate::device::DeviceGuard;
use crate::error::check;
use crate::event::Event;
use crate::point::Point;
use crate::stream::{Stream, StreamKey, same_backend};
use crate::{Device, Result};

/// A point (a lazily recorded event) together with its stream.
#[derive(Clone)]
pub(crate) struct Recorded {
    /// The stream.
    pub(crate) stream: StreamKey,
    /// The end of the access on that stream: recorded at or after the access was enqueued.
    pub(crate) point: Arc<Point>,
}

impl std::fmt::Debug for Recorded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorded").field("stream", &self.stream).finish_non_exhaustive()
    }
}

impl Recorded {
    /// A point recorded now at the end of `stream`.
    pub(crate) fn now(stream: &Stream) -> Result<Recorded> {
        stream.point_now()
    }

    /// The event, recorded now if the point was still open.
    fn event(&self) -> Result<&Arc<Event>> {
        self.point.event()
    }

    /// `true` when this is an open (unrecorded) point of `stream`.
    fn is_open_on(&self, stream: StreamKey) -> bool {
        self.stream == stream && self.point.is_open()
    }
}

/// The access history of one allocation.
pub(crate) struct Tracking {
    /// The allocation's device, for the whole-device fallback and the backend check.
    device: Device,
    /// The last write, one entry per stream it ran on (empty: never written).
    writes: Vec<Recorded>,
    /// At most one entry per stream: a later read on the same stream replaces its entry.
    reads: Vec<Recorded>,
    /// Reads handed out by `before_read` and not yet recorded.
    unrecorded_reads: usize,
    /// Writes handed out by `before_write` and not yet recorded.
    unrecorded_writes: usize,
    /// A stream-ordered allocation on this stream that no recorded access covers yet. Accesses
    /// on the same stream are ordered after it anyway; others need the fallback.
    unrecorded_allocation: Option<StreamKey>,
}

impl Tracking {
    pub(crate) fn new(device: Device) -> Tracking {
        Tracking {
            device,
            writes: Vec::new(),
            reads: Vec::new(),
            unrecorded_reads: 0,
            unrecorded_writes: 0,
            unrecorded_allocation: None,
        }
    }

    /// Tracking for a fresh allocation made in stream order on `stream`: until the first
    /// recorded access, only `stream` is ordered after the allocation.
    pub(crate) fn new_allocated(device: Device, stream: StreamKey) -> Tracking {
        Tracking { unrecorded_allocation: Some(stream), ..Tracking::new(device) }
    }

    /// `true` while some access (or the allocation) is not covered by a recorded event.
    fn has_unrecorded(&self) -> bool {
        self.unrecorded_reads > 0
            || self.unrecorded_writes > 0
            || self.unrecorded_allocation.is_some()
    }

    /// `true` when an access on `stream` needs the whole-device fallback because of the
    /// unrecorded allocation.
    fn allocation_unordered_for(&self, stream: StreamKey) -> bool {
        self.unrecorded_allocation.is_some_and(|allocated_on| allocated_on != stream)
    }

    /// Undoes a [`Tracking::before_read`] whose read was not enqueued.
    pub(crate) fn cancel_read(&mut self) {
        self.unrecorded_reads = self.unrecorded_reads.saturating_sub(1);
    }

    /// Undoes a [`Tracking::before_write`] whose write was not enqueued.
    pub(crate) fn cancel_write(&mut self) {
        self.unrecorded_writes = self.unrecorded_writes.saturating_sub(1);
    }

    /// Blocks until everything ever enqueued on the allocation's device has completed; the
    /// fallback for accesses that were not recorded.
    fn synchronize_device(&mut self) -> Result<()> {
        let _guard = DeviceGuard::enter(self.device)?;
        let api = self.device.api();
        // SAFETY: no arguments; waits for the current device of `api`'s backend, which the
        // guard selected.
        check(api, unsafe { (api.device_synchronize)() }, "cudaDeviceSynchronize")?;
        self.unrecorded_reads = 0;
        self.unrecorded_writes = 0;
        self.unrecorded_allocation = None;
        Ok(())
    }

    /// Orders `stream` after the last write. Call before enqueueing a read on `stream`, then
    /// [`Tracking::read_recorded`] once it is enqueued.
    ///
    /// [`crate::Error::DeviceMismatch`] when `stream` is of the other backend.
    ///
    /// Returns how many references to open points of `stream` the read will replace (see
    /// [`crate::point`]).
    pub(crate) fn before_read(&mut self, stream: &Stream) -> Result<usize> {
        let key = stream.key()?;
        same_backend("the memory", self.device, key.device())?;
        if self.unrecorded_writes > 0 || self.allocation_unordered_for(key) {
            // Callers of `before_write` hold `&mut` access to the allocation until they
            // record, so a read can only see an unrecorded write that was never recorded.
            self.synchronize_device()?;
        }
        for write in &self.writes {
            if write.stream != key {
                // Records the write's point if it is still open; `wait_event` first seals
                // `stream`'s own open point if someone needs it.
                stream.wait_event(write.event()?)?;
            }
        }
        self.unrecorded_reads += 1;
        Ok(self.reads.iter().filter(|read| read.is_open_on(key)).count())
    }

    /// Records a read enqueued after [`Tracking::before_read`], with `recorded`: an event
    /// recorded on the reading stream after the read was enqueued.
    pub(crate) fn read_recorded(&mut self, recorded: &Recorded) {
        match self.reads.iter_mut().find(|read| read.stream == recorded.stream) {
            // Stream order makes the new event cover the earlier reads on this stream. (An
            // extended open point is already there.)
            Some(read) => {
                if !Arc::ptr_eq(&read.point, &recorded.point) {
                    read.point = Arc::clone(&recorded.point);
                }
            }
            None => self.reads.push(recorded.clone()),
        }
        self.unrecorded_reads = self.unrecorded_reads.saturating_sub(1);
        // The read's event is ordered after the allocation: later accesses wait for it.
        self.unrecorded_allocation = None;
    }

    /// Orders `stream` after the last write and all reads since. Call before enqueueing a
    /// write on `stream`, then [`Tracking::write_recorded`] once it is enqueued.
    ///
    /// [`crate::Error::DeviceMismatch`] when `stream` is of the other backend.
    ///
    /// Returns how many references to open points of `stream` the write will replace.
    pub(crate) fn before_write(&mut self, stream: &Stream) -> Result<usize> {
        let key = stream.key()?;
        same_backend("the memory", self.device, key.device())?;
        if self.unrecorded_reads > 0
            || self.unrecorded_writes > 0
            || self.allocation_unordered_for(key)
        {
            // Writers have exclusive access, so nothing is between `before_*` and `after_*`
            // right now: these accesses were never recorded.
            self.synchronize_device()?;
        }
        let mut replaced = 0;
        for access in self.writes.iter().chain(&self.reads) {
            if access.stream != key {
                stream.wait_event(access.event()?)?;
            } else if access.point.is_open() {
                replaced += 1;
            }
        }
        self.unrecorded_writes += 1;
        Ok(replaced)
    }

    /// Records a write enqueued after [`Tracking::before_write`], with `recorded`: one event
    /// per stream the write ran on, each recorded after the write was enqueued there. The write
    /// waited for all earlier accesses, so its events alone now stand for the whole history.
    pub(crate) fn write_recorded(&mut self, recorded: &[Recorded]) {
        self.unrecorded_writes = self.unrecorded_writes.saturating_sub(1);
        self.unrecorded_allocation = None;
        if self.reads.is_empty()
            && self.writes.len() == recorded.len()
            && self
                .writes
                .iter()
                .zip(recorded)
                .all(|(old, new)| Arc::ptr_eq(&old.point, &new.point))
        {
            // The same (extended) points: nothing changes.
            return;
        }
        self.writes.clear();
        self.writes.extend_from_slice(recorded);
        self.reads.clear();
    }

    /// Records a write enqueued on `stream` after [`Tracking::before_write`] (with a new
    /// event).
    pub(crate) fn after_write(&mut self, stream: &Stream) -> Result<()> {
        self.write_recorded(&[Recorded::now(stream)?]);
        Ok(())
    }

    /// `true` when all recorded accesses have completed and none is unrecorded.
    pub(crate) fn is_idle(&self) -> Result<bool> {
        if self.has_unrecorded() {
            return Ok(false);
        }
        for access in self.writes.iter().chain(&self.reads) {
            if !access.event()?.query()? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Blocks until the last write has completed (what a host read needs).
    pub(crate) fn wait_for_writes(&mut self) -> Result<()> {
        if self.unrecorded_writes > 0 || self.unrecorded_allocation.is_some() {
            return self.synchronize_device();
        }
        for write in &self.writes {
            write.event()?.synchronize()?;
        }
        Ok(())
    }

    /// Blocks until every access has completed (what a host write or a free needs).
    pub(crate) fn wait_for_all(&mut self) -> Result<()> {
        if self.has_unrecorded() {
            return self.synchronize_device();
        }
        for access in self.writes.iter().chain(&self.reads) {
            access.event()?.synchronize()?;
        }
        Ok(())
    }

    /// The events of all recorded accesses (open points are recorded now), giving up the
    /// tracking (for deferred frees). `None` when unrecorded accesses exist or a point could not
    /// be recorded.
    pub(crate) fn into_events(self) -> Option<Vec<Arc<Event>>> {
        if self.has_unrecorded() {
            return None;
        }
        self.writes
            .iter()
            .chain(&self.reads)
            .map(|access| access.event().ok().map(Arc::clone))
            .collect()
    }

    /// The device of the allocation.
    pub(crate) fn device(&self) -> Device {
        self.device
    }
}

/// Enqueues one operation on `stream` that reads the allocations of `reads` and writes those of
/// `writes`: orders the stream after the conflicting earlier accesses, runs `enqueue`, and
/// records the accesses. When ordering or enqueueing fails nothing stays counted as
/// outstanding; when recording fails after the work was enqueued, the access stays counted as
/// unrecorded (see the module docs), so the error costs time, not safety.
pub(crate) fn tracked_op(
    stream: &Stream,
    reads: &mut [&mut Tracking],
    writes: &mut [&mut Tracking],
    enqueue: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let mut prepared_reads = 0;
    let mut prepared_writes = 0;
    let mut replaced = 0;
    let mut ordered = Ok(());
    for tracking in reads.iter_mut() {
        match tracking.before_read(stream) {
            Ok(count) => replaced += count,
            Err(error) => {
                ordered = Err(error);
                break;
            }
        }
        prepared_reads += 1;
    }
    if ordered.is_ok() {
        for tracking in writes.iter_mut() {
            match tracking.before_write(stream) {
                Ok(count) => replaced += count,
                Err(error) => {
                    ordered = Err(error);
                    break;
                }
            }
            prepared_writes += 1;
        }
    }
    // The stream's open point is sealed now unless this operation replaces every reference.
    let enqueued = ordered.and_then(|()| stream.seal_point(replaced)).and_then(|()| enqueue());
    if let Err(error) = enqueued {
        reads[..prepared_reads].iter_mut().for_each(|tracking| tracking.cancel_read());
        writes[..prepared_writes].iter_mut().for_each(|tracking| tracking.cancel_write());
        return Err(error);
    }
    // One point for all accesses of the operation, made after it was enqueued. When it cannot
    // be made, the accesses stay counted as unrecorded.
    let recorded = stream.point_after_enqueue()?;
    for tracking in reads.iter_mut() {
        tracking.read_recorded(&recorded);
    }
    for tracking in writes.iter_mut() {
        tracking.write_recorded(std::slice::from_ref(&recorded));
    }
    Ok(())
}
