//! Device memory with access tracking.

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::sync::{Mutex, MutexGuard, PoisonError};

use choreo_sys as sys;

use crate::device::{DeviceGuard, internal_streams};
use crate::elem::{DeviceRepr, zeroed_vec};
use crate::error::{check, check_deferred, defer_error};
use crate::graveyard::{Release, bury, sweep};
use crate::pinned::PinnedHostBuffer;
use crate::stream::{Stream, same_backend};
use crate::tracking::{Recorded, Tracking, tracked_op};
use crate::{Device, Error, Result};

/// How the memory was allocated, which decides how it is freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AllocKind {
    /// Nothing allocated (zero bytes).
    Empty,
    /// `cudaMallocAsync` from the device's default memory pool (on the CPU: the CPU runtime's
    /// stream-ordered allocation); freed with `cudaFreeAsync` on the device's internal free
    /// stream.
    Pool,
    /// `cudaMalloc` (devices without memory pools); freed with `cudaFree` once idle.
    Plain,
    /// Memory allocated elsewhere ([`DeviceBuffer::from_raw_parts`]): its owner is dropped
    /// once idle.
    Foreign,
}

/// What [`DeviceBuffer::into_raw_owned`] hands over: the memory, no longer tracked or freed
/// by the runtime.
#[cfg_attr(not(feature = "cudarc"), allow(dead_code))]
pub(crate) struct RawOwned {
    /// Device address; null for an empty buffer.
    pub(crate) pointer: *mut std::ffi::c_void,
    /// The owner of foreign memory.
    pub(crate) owner: Option<Box<dyn std::any::Any + Send>>,
}

/// `len` values of `T` in device memory, with access tracking.
///
/// The memory belongs to one [`Device`]: a CUDA GPU, or the CPU (where "device" memory is host
/// memory that the CPU runtime's streams read and write, with the same tracking and the same
/// guarantees). Using it with a stream of the other backend fails with
/// [`Error::DeviceMismatch`].
///
/// # Ordering and safety model
///
/// Every copy or kernel launch that touches the buffer is marked by an event on the stream that
/// did it (recorded lazily, see below): the buffer keeps the events of the last write (one per stream, for a kernel call
/// whose kernels run on several streams) and one event per stream that read it since. A new
/// read on some stream first makes that stream wait for the last write; a new write waits for
/// the last write and all reads. So work on different streams that shares a buffer is ordered
/// correctly without the user synchronising anything (cudarc's model, extended to several
/// concurrent readers). One operation marks its end with one point per stream and all buffers
/// it touched share it. Points are events recorded lazily: only when another stream, the host
/// or a free needs them, or before the next operation on the stream if someone still holds
/// them; a loop of calls on one stream whose `Pending`s are dropped records none (see
/// `docs/performance.md`, "Launch overhead"). The events come from a pool, so no event is
/// created or destroyed per call.
///
/// Dropping the buffer never blocks and never frees memory the GPU may still use: the memory is
/// freed (`cudaFreeAsync` on an idle internal stream) once all recorded accesses have completed
/// — at the drop if they already have, else at a later runtime call that checks (allocations
/// do). A buffer dropped while a kernel still uses it is therefore safe. Freeing only idle
/// memory also keeps the memory pool from making later allocations wait for unrelated running
/// work (which it may do to reuse memory whose free is still pending in stream order).
///
/// Uninitialised device memory is never exposed safely: buffers are created zeroed or from
/// host data ([`DeviceBuffer::alloc_uninit`] is `unsafe`). Zero-length buffers allocate
/// nothing and their pointers are null.
///
/// # For generated code
///
/// Kernel wrappers use [`DeviceBuffer::device_ptr_for_read`] /
/// [`DeviceBuffer::device_ptr_for_write`] before launching and [`DeviceBuffer::record_read`] /
/// [`DeviceBuffer::record_write`] after. The pointers are only valid on the stream given, and
/// only for work enqueued before the matching `record_*` call.
pub struct DeviceBuffer<T: DeviceRepr> {
    /// Device address; null when nothing is allocated.
    pointer: *mut T,
    len: usize,
    device: Device,
    kind: AllocKind,
    tracking: Mutex<Tracking>,
    /// The owner of foreign memory (`AllocKind::Foreign`), dropped once the memory is idle.
    foreign: Option<Box<dyn std::any::Any + Send>>,
    _marker: PhantomData<T>,
}

// SAFETY: the buffer exclusively owns its device allocation, which the host never dereferences
// (on the CPU only the CPU runtime's stream work does, ordered by the tracking); it is only
// passed to calls of its backend's runtime, which may be made from any thread. The tracking state is
// behind a Mutex; writes need `&mut self`. `T: DeviceRepr` is Send + Sync.
unsafe impl<T: DeviceRepr> Send for DeviceBuffer<T> {}
// SAFETY: see `Send`; `&self` methods only enqueue reads of the memory and update the
// Mutex-protected tracking. The foreign owner (only `Send`) is never reached through `&self`:
// it is only moved out or dropped with `&mut self`/`self`.
unsafe impl<T: DeviceRepr> Sync for DeviceBuffer<T> {}

/// The size in bytes of `len` values of `T`, or an error when it overflows.
fn byte_len<T>(len: usize) -> Result<usize> {
    len.checked_mul(size_of::<T>()).filter(|&bytes| bytes <= isize::MAX as usize).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "{len} elements of {} bytes do not fit in memory",
            size_of::<T>()
        ))
    })
}

/// Enqueues a `cudaMemcpyAsync` of `bytes` bytes on `stream`, with its backend's runtime.
pub(crate) fn enqueue_copy(
    destination: *mut c_void,
    source: *const c_void,
    bytes: usize,
    kind: sys::cudaMemcpyKind,
    stream: &Stream,
) -> Result<()> {
    let (_, api) = stream.device_and_api()?;
    let _guard = stream.bind_device()?;
    // SAFETY: callers pass pointers to tracked device or pinned allocations of at least
    // `bytes` bytes, of the stream's backend (the tracking refused other backends before this
    // is called), which stay allocated until the copy has completed (it is recorded as an
    // access of both). User memory is never the source or target of a device copy.
    let status = unsafe { (api.memcpy_async)(destination, source, bytes, kind, stream.as_raw()) };
    check(api, status, "cudaMemcpyAsync")
}

/// Seals `stream`'s open point if anyone holds it; on failure runs `cancel` (the access was not
/// enqueued) and returns the error.
fn seal_or_cancel(stream: &Stream, cancel: impl FnOnce()) -> Result<()> {
    let sealed = stream.seal_point(0);
    if sealed.is_err() {
        cancel();
    }
    sealed
}

fn check_len(expected: usize, got: usize) -> Result<()> {
    if expected == got { Ok(()) } else { Err(Error::Length { expected, got }) }
}

impl<T: DeviceRepr> DeviceBuffer<T> {
    /// Allocates `len` values in stream order on `stream`, uninitialised; until the first
    /// recorded access only `stream` is ordered after the allocation (see
    /// [`Tracking::new_allocated`]).
    fn allocate(stream: &Stream, len: usize) -> Result<Self> {
        // Give memory of dropped buffers whose work has finished back to the pool first.
        sweep();
        let bytes = byte_len::<T>(len)?;
        let (device, api) = stream.device_and_api()?;
        if bytes == 0 {
            return Ok(Self::from_parts(
                std::ptr::null_mut(),
                len,
                Tracking::new(device),
                AllocKind::Empty,
            ));
        }
        let tracking = Tracking::new_allocated(device, stream.key()?);
        let pools_supported = internal_streams(device)?.pools_supported;
        let _guard = DeviceGuard::enter(device)?;
        let mut raw: *mut c_void = std::ptr::null_mut();
        let kind = if pools_supported {
            // SAFETY: `raw` is a valid, writable pointer slot; the stream is valid while
            // `stream` exists and belongs to the current device of `api`'s backend.
            let status = unsafe { (api.malloc_async)(&mut raw, bytes, stream.as_raw()) };
            check(api, status, "cudaMallocAsync")?;
            AllocKind::Pool
        } else {
            // SAFETY: `raw` is a valid, writable pointer slot for the duration of the call.
            check(api, unsafe { (api.malloc)(&mut raw, bytes) }, "cudaMalloc")?;
            AllocKind::Plain
        };
        Ok(Self::from_parts(raw.cast(), len, tracking, kind))
    }

    fn from_parts(pointer: *mut T, len: usize, tracking: Tracking, kind: AllocKind) -> Self {
        let device = tracking.device();
        Self {
            pointer,
            len,
            device,
            kind,
            tracking: Mutex::new(tracking),
            foreign: None,
            _marker: PhantomData,
        }
    }

    /// Wraps `len` values of `T` at `pointer`, device memory of `stream`'s device that was
    /// allocated elsewhere (another library, C++ code), without copying. `owner` is what keeps
    /// the memory allocated: the buffer holds it and drops it (on some thread) once every access
    /// it tracked has completed, like the runtime frees its own memory. (For memory that should
    /// never be freed, pass `()`.) The first access on another stream than `stream` waits for
    /// the work enqueued on `stream` before this call.
    ///
    /// [`Error::InvalidArgument`] for a null pointer with `len > 0` or a misaligned pointer.
    ///
    /// If the buffer is leaked (`mem::forget`), `owner` is never dropped: the memory leaks.
    ///
    /// # Safety
    ///
    /// Until `owner` is dropped:
    /// - `pointer` addresses at least `len * size_of::<T>()` bytes of memory that the device
    ///   of `stream` can read and write with the runtime's calls and kernels (for a CUDA device:
    ///   an allocation of that device made in its *primary* context — `cudaMalloc*`, cudarc's
    ///   `CudaContext::new`, `cuMemAlloc*` in the primary context — or managed memory; for the
    ///   CPU device: host memory), and it stays allocated (it is not freed, not even in stream
    ///   order, before `owner` is dropped);
    /// - the memory holds `len` initialised values of `T` (for [`DeviceRepr`] types: any bytes
    ///   that were written, e.g. by a memset);
    /// - nothing else accesses the memory: every earlier foreign access has been enqueued on
    ///   `stream` (or has completed) before this call, no later one happens until `owner` is
    ///   dropped, and no other `DeviceBuffer` wraps the same memory.
    ///
    /// `owner`'s `Drop` may run on any thread (it is `Send`) and must not use the memory's
    /// contents through the host.
    pub unsafe fn from_raw_parts<O: Send + 'static>(
        stream: &Stream,
        pointer: *mut T,
        len: usize,
        owner: O,
    ) -> Result<Self> {
        check_deferred()?;
        let bytes = byte_len::<T>(len)?;
        let device = stream.device()?;
        let owner: Box<dyn std::any::Any + Send> = Box::new(owner);
        if bytes == 0 {
            let mut buffer = Self::from_parts(
                std::ptr::null_mut(),
                len,
                Tracking::new(device),
                AllocKind::Empty,
            );
            buffer.foreign = Some(owner);
            return Ok(buffer);
        }
        if pointer.is_null() {
            return Err(Error::InvalidArgument(format!(
                "a null device pointer cannot hold {len} elements"
            )));
        }
        if (pointer as usize) % align_of::<T>() != 0 {
            return Err(Error::InvalidArgument(format!(
                "device pointer {pointer:p} is not aligned for {} ({} bytes)",
                T::CHOREO_TYPE,
                align_of::<T>()
            )));
        }
        let mut tracking = Tracking::new(device);
        // The foreign work enqueued on `stream` so far counts as the last write: accesses on
        // other streams wait for it.
        tracking.after_write(stream)?;
        let mut buffer = Self::from_parts(pointer, len, tracking, AllocKind::Foreign);
        buffer.foreign = Some(owner);
        Ok(buffer)
    }

    /// Makes `stream` wait for every access to the buffer (recorded events; the whole device
    /// when some access was not recorded), e.g. before handing the memory to another library
    /// that uses it on `stream`.
    #[cfg_attr(not(feature = "cudarc"), allow(dead_code))]
    pub(crate) fn order_before(&mut self, stream: &Stream) -> Result<()> {
        self.stream_device(stream)?;
        let tracking = self.tracking_mut();
        tracking.before_write(stream)?;
        tracking.cancel_write();
        Ok(())
    }

    /// For foreign memory, whether its owner is an `O`; `None` for the runtime's own memory.
    #[cfg_attr(not(feature = "cudarc"), allow(dead_code))]
    pub(crate) fn foreign_owner_is<O: 'static>(&self) -> Option<bool> {
        self.foreign.as_ref().map(|owner| owner.is::<O>())
    }

    /// Gives up the memory without freeing it (the caller takes over freeing it, after
    /// ordering its uses with [`DeviceBuffer::order_before`]).
    #[cfg_attr(not(feature = "cudarc"), allow(dead_code))]
    pub(crate) fn into_raw_owned(mut self) -> RawOwned {
        let owned = RawOwned { pointer: self.pointer.cast(), owner: self.foreign.take() };
        // What is left is dropped as an empty buffer: nothing is freed.
        self.kind = AllocKind::Empty;
        self.pointer = std::ptr::null_mut();
        owned
    }

    fn bytes(&self) -> usize {
        // Cannot overflow: checked when the buffer was allocated.
        self.len * size_of::<T>()
    }

    fn tracking_mut(&mut self) -> &mut Tracking {
        self.tracking.get_mut().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_tracking(&self) -> MutexGuard<'_, Tracking> {
        self.tracking.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Enqueues a memset to zero of the whole buffer on `stream` (tracked as a write).
    fn enqueue_zero(&mut self, stream: &Stream) -> Result<()> {
        let (pointer, bytes) = (self.pointer, self.bytes());
        if bytes == 0 {
            return Ok(());
        }
        tracked_op(stream, &mut [], &mut [self.tracking_mut()], || {
            let (_, api) = stream.device_and_api()?;
            let _guard = stream.bind_device()?;
            // SAFETY: `pointer` is this buffer's allocation of `bytes` bytes, of the stream's
            // backend (the tracking checked); the tracking keeps it alive until the memset has
            // completed.
            let status = unsafe { (api.memset_async)(pointer.cast(), 0, bytes, stream.as_raw()) };
            check(api, status, "cudaMemsetAsync")
        })
    }

    /// Allocates `len` zeroed values on the default device ([`Device::default_device`]: the
    /// calling thread's current CUDA device, or the CPU on a machine without a GPU).
    ///
    /// Allocation and zeroing happen on an internal stream that never waits for user work;
    /// the first use on any stream is ordered after them automatically.
    pub fn zeroed(len: usize) -> Result<Self> {
        Self::zeroed_on_device(Device::default_device()?, len)
    }

    /// Allocates `len` zeroed values on `device`, like [`DeviceBuffer::zeroed`].
    pub fn zeroed_on_device(device: Device, len: usize) -> Result<Self> {
        check_deferred()?;
        let streams = internal_streams(device)?;
        let mut buffer = Self::allocate(&streams.alloc, len)?;
        buffer.enqueue_zero(&streams.alloc)?;
        Ok(buffer)
    }

    /// Allocates `len` zeroed values in stream order on `stream` (and on its device).
    pub fn zeroed_on(stream: &Stream, len: usize) -> Result<Self> {
        check_deferred()?;
        let mut buffer = Self::allocate(stream, len)?;
        buffer.enqueue_zero(stream)?;
        Ok(buffer)
    }

    /// Allocates `len` values in stream order on `stream` without initialising them.
    ///
    /// # Safety
    ///
    /// The contents are whatever the memory held before (possibly another buffer's data).
    /// Every value must be written on the device (e.g. by a kernel that overwrites the whole
    /// buffer) before it is read, or copied to the host.
    pub unsafe fn alloc_uninit(stream: &Stream, len: usize) -> Result<Self> {
        check_deferred()?;
        let mut buffer = Self::allocate(stream, len)?;
        if buffer.kind != AllocKind::Empty {
            // Record the allocation so that other streams are ordered after it.
            buffer.tracking_mut().after_write(stream)?;
        }
        Ok(buffer)
    }

    /// Allocates a buffer on `stream`'s device holding a copy of `data`.
    ///
    /// `data` is staged: copied into runtime-owned pinned memory before this returns (so it is
    /// not used afterwards), from where the device copies it asynchronously, in stream order.
    /// The host does not wait for the device.
    pub fn from_host(stream: &Stream, data: &[T]) -> Result<Self> {
        check_deferred()?;
        let mut buffer = Self::allocate(stream, data.len())?;
        if buffer.kind == AllocKind::Empty {
            return Ok(buffer);
        }
        buffer.write_from_host(stream, data)?;
        Ok(buffer)
    }

    /// Copies `data` (exactly `len()` values) into the buffer on `stream`, staged like
    /// [`DeviceBuffer::from_host`]: `data` is not used after this returns, and the host does
    /// not wait for the device.
    pub fn copy_from_host(&mut self, stream: &Stream, data: &[T]) -> Result<()> {
        check_deferred()?;
        self.stream_device(stream)?;
        check_len(self.len, data.len())?;
        if self.bytes() == 0 {
            return Ok(());
        }
        self.write_from_host(stream, data)
    }

    /// Stages `data` in runtime-owned pinned memory and enqueues the copy from there. The
    /// staging buffer is freed (returned to the pinned cache) once the copy has completed.
    fn write_from_host(&mut self, stream: &Stream, data: &[T]) -> Result<()> {
        let staging = PinnedHostBuffer::from_slice_on_device(stream.device()?, data)?;
        self.copy_from_pinned(stream, &staging)
    }

    /// Copies the buffer (exactly `len()` values) into `data` on `stream`, after the work that
    /// writes the buffer. Blocks until the copy has completed (and only for that: the device
    /// copies into runtime-owned pinned staging memory, then the host copies into `data`).
    pub fn copy_to_host(&self, stream: &Stream, data: &mut [T]) -> Result<()> {
        check_deferred()?;
        let device = self.stream_device(stream)?;
        check_len(self.len, data.len())?;
        if self.bytes() == 0 {
            return Ok(());
        }
        let mut staging = PinnedHostBuffer::new_on_device(device, self.len)?;
        self.copy_to_pinned(stream, &mut staging)?;
        data.copy_from_slice(staging.as_slice()?);
        Ok(())
    }

    /// A host copy of the buffer (see [`DeviceBuffer::copy_to_host`]).
    pub fn to_vec(&self, stream: &Stream) -> Result<Vec<T>> {
        let mut data = zeroed_vec(self.len)?;
        self.copy_to_host(stream, &mut data)?;
        Ok(data)
    }

    /// Enqueues a copy of `source` into the buffer on `stream`; does not block. Both buffers
    /// track the copy, so later host access to `source` and later uses of `self` wait for it.
    pub fn copy_from_pinned(
        &mut self,
        stream: &Stream,
        source: &PinnedHostBuffer<T>,
    ) -> Result<()> {
        check_deferred()?;
        let device = self.stream_device(stream)?;
        same_backend("the pinned source", source.device(), device)?;
        check_len(self.len, source.len())?;
        let (pointer, bytes) = (self.pointer, self.bytes());
        if bytes == 0 {
            return Ok(());
        }
        let mut source_tracking = source.lock_tracking();
        tracked_op(stream, &mut [&mut source_tracking], &mut [self.tracking_mut()], || {
            enqueue_copy(
                pointer.cast(),
                source.as_ptr().cast(),
                bytes,
                sys::cudaMemcpyKind::HostToDevice,
                stream,
            )
        })
    }

    /// Enqueues a copy of the buffer into `target` on `stream`; does not block. Host access to
    /// `target` ([`PinnedHostBuffer::as_slice`]) waits for the copy.
    pub fn copy_to_pinned(&self, stream: &Stream, target: &mut PinnedHostBuffer<T>) -> Result<()> {
        check_deferred()?;
        let device = self.stream_device(stream)?;
        same_backend("the pinned target", target.device(), device)?;
        check_len(self.len, target.len())?;
        let bytes = self.bytes();
        if bytes == 0 {
            return Ok(());
        }
        let target_pointer = target.as_ptr();
        let mut tracking = self.lock_tracking();
        tracked_op(stream, &mut [&mut tracking], &mut [target.tracking_mut()], || {
            enqueue_copy(
                target_pointer.cast(),
                self.pointer.cast(),
                bytes,
                sys::cudaMemcpyKind::DeviceToHost,
                stream,
            )
        })
    }

    /// Enqueues a device-to-device copy of `source` into the buffer on `stream`.
    pub fn copy_from_device(&mut self, stream: &Stream, source: &DeviceBuffer<T>) -> Result<()> {
        check_deferred()?;
        let device = self.stream_device(stream)?;
        same_backend("the source buffer", source.device, device)?;
        check_len(self.len, source.len)?;
        let (pointer, bytes) = (self.pointer, self.bytes());
        if bytes == 0 {
            return Ok(());
        }
        let mut source_tracking = source.lock_tracking();
        tracked_op(stream, &mut [&mut source_tracking], &mut [self.tracking_mut()], || {
            enqueue_copy(
                pointer.cast(),
                source.pointer.cast(),
                bytes,
                sys::cudaMemcpyKind::DeviceToDevice,
                stream,
            )
        })
    }

    /// A new buffer on `stream`'s device with a copy of this one's contents.
    pub fn try_clone(&self, stream: &Stream) -> Result<Self> {
        check_deferred()?;
        self.stream_device(stream)?;
        let mut copy = Self::allocate(stream, self.len)?;
        copy.copy_from_device(stream, self)?;
        Ok(copy)
    }

    /// Enqueues zeroing the whole buffer on `stream`.
    pub fn fill_zero(&mut self, stream: &Stream) -> Result<()> {
        check_deferred()?;
        self.stream_device(stream)?;
        self.enqueue_zero(stream)
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` when the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device of `stream`, after checking that it is of the buffer's backend
    /// ([`Error::DeviceMismatch`] otherwise), before anything is allocated or enqueued.
    pub(crate) fn stream_device(&self, stream: &Stream) -> Result<Device> {
        let device = stream.device()?;
        same_backend("the buffer", self.device, device)?;
        Ok(device)
    }

    /// The device that holds the memory.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The device addresses the buffer occupies, `start..end` in bytes (empty for a buffer
    /// that allocated nothing).
    pub(crate) fn address_range(&self) -> std::ops::Range<usize> {
        let start = self.pointer as usize;
        start..start + self.bytes()
    }

    /// `true` when no recorded GPU access to the buffer is pending; does not block.
    pub fn is_idle(&self) -> Result<bool> {
        self.lock_tracking().is_idle()
    }

    /// Blocks until every pending GPU access to the buffer has completed.
    pub fn synchronize(&self) -> Result<()> {
        self.lock_tracking().wait_for_all()
    }

    /// For generated kernel wrappers: orders `stream` after the last write to the buffer and
    /// returns its device address for a kernel that *reads* it on `stream`. Call
    /// [`DeviceBuffer::record_read`] with the same stream right after enqueueing the kernel.
    /// Null for an empty buffer.
    pub fn device_ptr_for_read(&self, stream: &Stream) -> Result<*const T> {
        check_deferred()?;
        let pointer = self.ptr_for_read_unchecked(stream)?.0;
        // The caller enqueues next: earlier work's lazily recorded end is recorded first if
        // anyone holds it, so that it does not include the caller's work.
        seal_or_cancel(stream, || self.lock_tracking().cancel_read())?;
        Ok(pointer)
    }

    /// [`DeviceBuffer::device_ptr_for_read`] without the check for deferred errors (which
    /// [`crate::kernels::WorkStreams`] makes once per kernel call); also returns how many
    /// references to open points of `stream` the read replaces.
    pub(crate) fn ptr_for_read_unchecked(&self, stream: &Stream) -> Result<(*const T, usize)> {
        let replaced = self.lock_tracking().before_read(stream)?;
        Ok((self.pointer, replaced))
    }

    /// For generated kernel wrappers: records that work enqueued on `stream` (after
    /// [`DeviceBuffer::device_ptr_for_read`]) reads the buffer.
    ///
    /// The end of the work is recorded lazily (when another stream, the host or a free needs
    /// it): `device_ptr_for_read` recorded the end of earlier work on `stream` if it was still
    /// needed, so the point taken here marks the caller's work and what follows it.
    pub fn record_read(&self, stream: &Stream) -> Result<()> {
        self.stream_device(stream)?;
        let recorded = stream.point_after_enqueue()?;
        self.lock_tracking().read_recorded(&recorded);
        Ok(())
    }

    /// [`DeviceBuffer::record_read`] with an event already recorded on the reading stream
    /// after the read (shared by all buffers a kernel call accessed).
    pub(crate) fn read_recorded(&self, recorded: &Recorded) {
        self.lock_tracking().read_recorded(recorded);
    }

    /// For generated kernel wrappers: orders `stream` after every earlier access to the buffer
    /// and returns its device address for a kernel that *writes* it on `stream`. Call
    /// [`DeviceBuffer::record_write`] with the same stream right after enqueueing the kernel.
    /// Null for an empty buffer.
    pub fn device_ptr_for_write(&mut self, stream: &Stream) -> Result<*mut T> {
        check_deferred()?;
        let pointer = self.ptr_for_write_unchecked(stream)?.0;
        // As in `device_ptr_for_read`.
        seal_or_cancel(stream, || self.tracking_mut().cancel_write())?;
        Ok(pointer)
    }

    /// [`DeviceBuffer::device_ptr_for_write`] without the check for deferred errors; also
    /// returns how many references to open points of `stream` the write replaces.
    pub(crate) fn ptr_for_write_unchecked(&mut self, stream: &Stream) -> Result<(*mut T, usize)> {
        let replaced = self.tracking_mut().before_write(stream)?;
        Ok((self.pointer, replaced))
    }

    /// For generated kernel wrappers: records that work enqueued on `stream` (after
    /// [`DeviceBuffer::device_ptr_for_write`]) writes the buffer.
    ///
    /// Recorded lazily, like [`DeviceBuffer::record_read`].
    pub fn record_write(&mut self, stream: &Stream) -> Result<()> {
        self.stream_device(stream)?;
        let recorded = stream.point_after_enqueue()?;
        self.tracking_mut().write_recorded(std::slice::from_ref(&recorded));
        Ok(())
    }

    /// [`DeviceBuffer::record_write`] with events already recorded after the write, one per
    /// stream it ran on (shared by all buffers a kernel call accessed).
    pub(crate) fn write_recorded(&mut self, recorded: &[Recorded]) {
        self.tracking_mut().write_recorded(recorded);
    }

    /// Frees the memory once every recorded access has completed (immediately if they have,
    /// else at a later runtime call; see the graveyard). With unrecorded accesses, waits for
    /// the whole device first; leaks the memory when even that fails.
    fn release(&mut self) -> Result<()> {
        let device = self.device;
        let tracking = std::mem::replace(self.tracking_mut(), Tracking::new(device));
        let pointer: *mut c_void = self.pointer.cast();
        let release = match self.kind {
            AllocKind::Empty => return Ok(()),
            AllocKind::Pool => Release::Device { pointer, device, pooled: true },
            AllocKind::Plain => Release::Device { pointer, device, pooled: false },
            AllocKind::Foreign => match self.foreign.take() {
                Some(owner) => Release::Foreign { owner, device },
                None => return Ok(()),
            },
        };
        match tracking.into_events() {
            Some(events) => bury(events, release),
            None => {
                // Unrecorded accesses: only the whole device can be waited for.
                device.synchronize()?;
                bury(Vec::new(), release);
            }
        }
        Ok(())
    }
}

impl<T: DeviceRepr> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if let Err(error) = self.release() {
            defer_error("dropping a DeviceBuffer (its memory was leaked)", error);
        }
    }
}

impl<T: DeviceRepr> fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("type", &T::CHOREO_TYPE)
            .field("len", &self.len)
            .field("device", &self.device)
            .field("pointer", &self.pointer)
            .finish_non_exhaustive()
    }
}
