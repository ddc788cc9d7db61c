//! Support for the kernel wrappers that `choreo-build` generates from `.co` files, and
//! [`include_kernels!`](crate::include_kernels), which brings them into a crate.
//!
//! Programs do not call the items of this module directly: the generated wrappers do (their
//! code is written by `choreo_compiler::emit::rust`). They are public so that generated code in
//! other crates can use them, and their behaviour is part of the wrappers' safety argument:
//!
//! - [`WorkStreams`] orders every stream a wrapper's kernels run on after earlier accesses to
//!   each tensor it passes, and records the new accesses afterwards (so buffers dropped while
//!   the device still uses them stay alive until it is done); it also tells the wrapper which
//!   [`Backend`] the call runs on ([`WorkStreams::backend`]), so that it calls the `extern "C"`
//!   entry compiled for that backend;
//! - [`EntryMessage`] turns the status of a generated `extern "C"` entry into an [`Error`]
//!   ([`EntryMessage::result_for`] with the call's backend);
//! - [`check_extent`] and [`extent`] check and compute shapes before anything is launched;
//! - [`return_tensor`], [`join_unit`] and [`join_value`] build results.

use std::ffi::c_char;
use std::sync::Arc;

use choreo_sys as sys;

use crate::backend::Backend;
use crate::bounds_pool;
use crate::device::DeviceGuard;
use crate::elem::DeviceRepr;
use crate::error::{check_deferred, check_status};
use crate::one_or_many::{InlineList, OneOrMany};
use crate::point::Point;
use crate::stream::Stream;
use crate::tracking::Recorded;
use crate::{Device, DeviceBuffer, DeviceTensor, Error, Pending, Result};

/// Includes the Rust modules that `choreo-build` generated for a crate's `.co` files: one
/// `pub mod <file stem>` per file, each with one safe function per `__co__` function.
///
/// `include_kernels!()` includes the output of the default build name (`kernels`, what
/// `choreo_build::compile` uses); `include_kernels!("name")` the output of
/// `choreo_build::Builder::build("name")`. The file included is
/// `$OUT_DIR/choreo/<name>.rs`, so the macro works in crates whose build script ran
/// `choreo-build`.
///
/// ```ignore
/// // build.rs: choreo_build::compile("src/kernels/*.co");
/// choreo::include_kernels!();
///
/// fn run(s0: &choreo::Stream, s1: &choreo::Stream, a: &[f32], b: &[f32]) -> choreo::Result<()> {
///     seed::foo(s0, s1, a.into(), b.into())?.wait()
/// }
/// ```
#[macro_export]
macro_rules! include_kernels {
    () => {
        $crate::include_kernels!("kernels");
    };
    ($name:literal) => {
        include!(concat!(env!("OUT_DIR"), "/choreo/", $name, ".rs"));
    };
}

/// Checks one extent of an argument before anything is launched: [`Error::Shape`] naming
/// `param` and `dim` when `got` differs from `expected`.
pub fn check_extent(param: &'static str, dim: usize, expected: usize, got: usize) -> Result<()> {
    if expected == got { Ok(()) } else { Err(Error::Shape { param, dim, expected, got }) }
}

/// The streams that a wrapper's device work runs on, and the bookkeeping of its accesses to
/// device buffers.
///
/// Before the call of the `extern "C"` entry, [`WorkStreams::read_ptr`] /
/// [`WorkStreams::write_ptr`] make every stream wait for the earlier accesses to a buffer that
/// conflict (a read waits for the last write; a write for everything), and hand out its device
/// pointer. After the call, [`WorkStreams::record_read`] / [`WorkStreams::record_write`]
/// record the call's accesses, so later work waits for them and the memory is not freed before
/// they are done, and [`WorkStreams::pending`] makes the call's [`Pending`].
///
/// Right before the entry, [`WorkStreams::enter`] makes the device current and seals the
/// streams' open points that someone other than this call still needs (see `crate::point`:
/// the events that mark the end of tracked work are recorded lazily). The first of the
/// `record_*` / `pending` calls then takes one point per work stream (normally the stream's
/// open point, extended over the call, so no event is recorded); every buffer of the call and
/// the `Pending` share them. So a call costs at most one `cudaEventRecord` per stream, and
/// none in a loop of calls on one stream whose `Pending`s are dropped or awaited. That is
/// right because the wrapper enqueues nothing on the work streams between the entry's return
/// and the first `record_*`. (Without [`WorkStreams::enter`], as in wrappers generated before
/// it existed, each call records its points right after the entry, as before.)
///
/// Recording failures are kept and returned by [`WorkStreams::recorded`]; an access that could
/// not be recorded makes later conflicting accesses synchronise the device instead (see
/// [`DeviceBuffer`]), so a failure costs time, never memory safety. A buffer written on several
/// streams keeps the events of all of them as its last write.
///
/// # Backends
///
/// A call runs on the backend of its streams ([`WorkStreams::backend`]): the wrapper calls the
/// `extern "C"` entry compiled for it, passing the streams' raw handles (for the CPU these are
/// the CPU runtime's handles) and the buffers' pointers (for the CPU, host memory).
/// [`WorkStreams::for_backends`] takes the backends the wrapper has entries for and refuses
/// the others with [`Error::UnsupportedBackend`]; [`WorkStreams::new`] is the CUDA-only form
/// (what wrappers written before the CPU backend call), so a CPU stream can never reach a CUDA
/// entry.
///
/// ```ignore
/// use choreo::Backend;
/// let backends = [Backend::Cuda, Backend::Cpu];
/// let mut work = choreo::kernels::WorkStreams::for_backends(&backends, &[s])?;
/// let x_ptr = work.read_param_ptr("x", x.buffer())?;
/// let mut message = choreo::kernels::EntryMessage::new();
/// let _device = work.enter()?; // right before the entry
/// let status = match work.backend() {
///     // SAFETY: (as today, per entry)
///     Backend::Cuda => unsafe { entry_cuda(x_ptr, s.as_raw(), message.as_mut_ptr()) },
///     Backend::Cpu => unsafe { entry_cpu(x_ptr, s.as_raw(), message.as_mut_ptr()) },
/// };
/// work.record_read(x.buffer());
/// message.result_for(work.backend(), status, "f")?;
/// ```
///
/// # Checks before anything is launched
///
/// - All work streams belong to one device ([`WorkStreams::new`]), and every buffer handed out
///   lives on that device: otherwise [`Error::DeviceMismatch`] (a CPU object in a CUDA call or
///   the reverse) or [`Error::InvalidArgument`] (another CUDA device) names the buffer and both
///   devices (a kernel cannot address another device's memory through these pointers).
/// - No buffer handed out for writing overlaps another buffer of the same call (read or
///   written): otherwise [`Error::InvalidArgument`] says that the two arguments alias. The
///   borrow checker already keeps one `DeviceTensor` from being passed as `&` and `&mut`; this
///   check keeps memory reached by other ways (views, foreign memory, sub-buffers) from making
///   a data race in safe code. Two reads of the same memory are fine.
///
/// Both are a few comparisons per buffer; the first four buffers of a call are kept inline, so
/// the common call allocates nothing for them. When a check fails, the buffers handed out
/// before stay counted as accessed but unrecorded (their next conflicting access synchronises
/// the device once): the error path costs time, never safety.
#[derive(Debug)]
pub struct WorkStreams<'s> {
    /// Distinct streams, in the order given.
    streams: OneOrMany<&'s Stream>,
    /// The device of the streams, where every buffer of the call must live.
    device: Device,
    /// The buffers handed out so far, for the aliasing check.
    handouts: InlineList<Handout, 4>,
    /// One point per stream, taken after the entry call (see [`WorkStreams::call_events`]).
    call_events: Option<OneOrMany<Recorded>>,
    /// Per stream (as `streams`): references to its open point that the call replaces.
    replaced: OneOrMany<usize>,
    /// Whether [`WorkStreams::enter`] ran (the open points were sealed where needed).
    entered: bool,
    /// The first recording error.
    error: Option<Error>,
}

/// A device buffer that a kernel call hands to its entry: the device addresses it occupies,
/// how the call uses it, and how errors name it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Handout {
    /// Device addresses, `start..end` in bytes (`start == end` for a buffer without memory).
    start: usize,
    end: usize,
    /// Whether the call writes the buffer.
    write: bool,
    /// The parameter's name, when the wrapper passed it.
    param: Option<&'static str>,
    /// The element type's Choreo name and the element count, to describe unnamed buffers.
    elem: &'static str,
    len: usize,
}

impl Handout {
    /// How errors name the buffer: its parameter, else its place among the call's buffers.
    fn describe(&self, position: usize) -> String {
        match self.param {
            Some(param) => format!("`{param}`"),
            None => format!(
                "device buffer #{position} of the call ({} × {}, device range {:#x}..{:#x})",
                self.len, self.elem, self.start, self.end
            ),
        }
    }

    /// `true` when both occupy some common device address and at least one is written.
    fn aliases(&self, other: &Handout) -> bool {
        let overlap = self.start < self.end
            && other.start < other.end
            && self.start < other.end
            && other.start < self.end;
        overlap && (self.write || other.write)
    }
}

/// The error for `new`, the `new_position`-th buffer of a call (counted from 1), when it
/// aliases one of the `earlier` buffers of the same call; `None` when it aliases none.
fn alias_error<'h>(
    earlier: impl IntoIterator<Item = &'h Handout>,
    new: &Handout,
    new_position: usize,
) -> Option<Error> {
    let (index, old) = earlier.into_iter().enumerate().find(|(_, old)| old.aliases(new))?;
    let written = match (old.write, new.write) {
        (true, true) => "both are written",
        (true, false) => "the first is written",
        _ => "the second is written",
    };
    Some(Error::InvalidArgument(format!(
        "arguments alias: the device memory of {} overlaps that of {}, and {written} by the \
         same kernel call (a call must not write memory that another of its arguments reads or \
         writes); nothing was launched",
        old.describe(index + 1),
        new.describe(new_position),
    )))
}

/// [`Error::DeviceMismatch`] (other backend) or [`Error::InvalidArgument`] (other CUDA device)
/// when `what` (a buffer on `buffer_device`) is used by a kernel call on `call_device`.
fn device_error(what: &str, buffer_device: Device, call_device: Device) -> Result<()> {
    if buffer_device == call_device {
        return Ok(());
    }
    if buffer_device.backend() != call_device.backend() {
        return Err(Error::DeviceMismatch {
            what: what.to_owned(),
            found: buffer_device,
            expected: call_device,
        });
    }
    let (buffer_device, call_device) = (buffer_device.ordinal(), call_device.ordinal());
    Err(Error::InvalidArgument(format!(
        "{what} is on device {buffer_device}, but the kernel call runs on device {call_device} \
         (the device of its streams); copy the data to device {call_device} or call with \
         streams of device {buffer_device}; nothing was launched"
    )))
}

/// [`Error::DeviceMismatch`] (other backend) or [`Error::InvalidArgument`] (other CUDA
/// device) unless every stream (given by its device, in order) belongs to the device of the
/// first.
fn same_device(devices: impl IntoIterator<Item = Device>) -> Result<Device> {
    let mut first = None;
    for (index, device) in devices.into_iter().enumerate() {
        match first {
            None => first = Some(device),
            Some(first) if first.backend() != device.backend() => {
                return Err(Error::DeviceMismatch {
                    what: format!("stream #{} of the kernel call", index + 1),
                    found: device,
                    expected: first,
                });
            }
            Some(first) if first != device => {
                return Err(Error::InvalidArgument(format!(
                    "the streams of one kernel call must belong to one device: stream #1 is on \
                     device {}, stream #{} on device {}; nothing was launched",
                    first.ordinal(),
                    index + 1,
                    device.ordinal()
                )));
            }
            Some(_) => {}
        }
    }
    first.ok_or_else(|| Error::InvalidArgument("a kernel call needs at least one stream".into()))
}

impl<'s> WorkStreams<'s> {
    /// The work streams of a wrapper whose kernels were built for CUDA only:
    /// [`WorkStreams::for_backends`] with `&[Backend::Cuda]`, so streams of the CPU are
    /// refused before anything is handed out: on a machine without a usable GPU with the error
    /// that says why ([`Error::NoDevice`], [`Error::InsufficientDriver`],
    /// [`Error::RuntimeNotLinked`]: [`Error::is_no_gpu`]), else (the CPU was chosen, e.g. by
    /// `CHOREO_DEVICE=cpu`) with [`Error::UnsupportedBackend`].
    pub fn new(streams: &[&'s Stream]) -> Result<Self> {
        Self::for_backends(&[Backend::Cuda], streams)
    }

    /// The work streams, without duplicates (the same stream passed twice counts once; so do
    /// two handles of the legacy default stream), of a wrapper that has `extern "C"` entries
    /// for the backends `supported`. At least one stream is required; all must belong to one
    /// device (else [`Error::DeviceMismatch`] for streams of both backends,
    /// [`Error::InvalidArgument`] for two CUDA devices), whose backend must be one of
    /// `supported` (else [`Error::UnsupportedBackend`]). The wrapper then calls the entry of
    /// [`WorkStreams::backend`].
    ///
    /// Fails with a deferred error of an earlier drop, if there is one (checked here once for
    /// the whole call).
    pub fn for_backends(supported: &[Backend], streams: &[&'s Stream]) -> Result<Self> {
        check_deferred()?;
        let mut unique: OneOrMany<&'s Stream> = OneOrMany::default();
        let mut devices: OneOrMany<Device> = OneOrMany::default();
        let mut replaced: OneOrMany<usize> = OneOrMany::default();
        for &stream in streams {
            let key = stream.key()?;
            let mut seen = false;
            for other in unique.as_slice() {
                seen |= other.key()? == key;
            }
            if !seen {
                unique.push(stream);
                devices.push(key.device());
                replaced.push(0);
            }
        }
        let device = same_device(devices.as_slice().iter().copied())?;
        if !supported.contains(&device.backend()) {
            // A CUDA-only call on the CPU because there is no usable GPU: say why there is none
            // (as before the CPU backend existed, and what `Error::is_no_gpu` recognises).
            if device.is_cpu() && supported.contains(&Backend::Cuda) {
                crate::device::cuda_usable()?;
            }
            return Err(Error::UnsupportedBackend {
                backend: device.backend(),
                what: "this kernel call (its kernels were not built for the backend of its \
                       streams)",
            });
        }
        Ok(WorkStreams {
            streams: unique,
            device,
            handouts: InlineList::default(),
            call_events: None,
            replaced,
            entered: false,
            error: None,
        })
    }

    /// The backend the call runs on: that of its streams, which every buffer handed out
    /// shares. Generated wrappers match on it to call the `extern "C"` entry compiled for it.
    pub fn backend(&self) -> Backend {
        self.device.backend()
    }

    /// The device the call runs on (that of its streams).
    pub fn device(&self) -> Device {
        self.device
    }

    /// The streams, first one first.
    pub fn streams(&self) -> &[&'s Stream] {
        self.streams.as_slice()
    }

    /// The first stream (where asynchronous wrappers enqueue their copies back to the host).
    pub fn first(&self) -> &'s Stream {
        // `new` guarantees at least one stream.
        self.streams()[0]
    }

    /// Checks `buffer` against the call's device and the buffers handed out before, then
    /// remembers it.
    fn hand_out<T: DeviceRepr>(
        &mut self,
        param: Option<&'static str>,
        buffer: &DeviceBuffer<T>,
        write: bool,
    ) -> Result<()> {
        let range = buffer.address_range();
        let handout = Handout {
            start: range.start,
            end: range.end,
            write,
            param,
            elem: T::CHOREO_TYPE,
            len: buffer.len(),
        };
        let position = self.handouts.len() + 1;
        // The description is formatted only for an error: this runs for every argument of
        // every call.
        if buffer.device() != self.device {
            device_error(&handout.describe(position), buffer.device(), self.device)?;
        }
        if let Some(error) = alias_error(self.handouts.iter(), &handout, position) {
            return Err(error);
        }
        self.handouts.push(handout);
        Ok(())
    }

    /// Orders every work stream after the last write to `buffer` and returns its device
    /// address for device work that only reads it. Pair with [`WorkStreams::record_read`].
    ///
    /// Fails with [`Error::DeviceMismatch`] or [`Error::InvalidArgument`] when `buffer` is on
    /// another device than the streams, and with [`Error::InvalidArgument`] when it overlaps a
    /// buffer that the call writes (see the type's docs).
    pub fn read_ptr<T: DeviceRepr>(&mut self, buffer: &DeviceBuffer<T>) -> Result<*const T> {
        self.read_ptr_of(None, buffer)
    }

    /// [`WorkStreams::read_ptr`] for the argument of parameter `param`, which errors name.
    pub fn read_param_ptr<T: DeviceRepr>(
        &mut self,
        param: &'static str,
        buffer: &DeviceBuffer<T>,
    ) -> Result<*const T> {
        self.read_ptr_of(Some(param), buffer)
    }

    fn read_ptr_of<T: DeviceRepr>(
        &mut self,
        param: Option<&'static str>,
        buffer: &DeviceBuffer<T>,
    ) -> Result<*const T> {
        self.hand_out(param, buffer, false)?;
        let mut pointer = std::ptr::null();
        for (index, stream) in self.streams.as_slice().iter().enumerate() {
            let (read, replaced) = buffer.ptr_for_read_unchecked(stream)?;
            pointer = read;
            if let Some(count) = self.replaced.as_mut_slice().get_mut(index) {
                *count += replaced;
            }
        }
        Ok(pointer)
    }

    /// Orders every work stream after all earlier accesses to `buffer` and returns its device
    /// address for device work that writes it. Pair with [`WorkStreams::record_write`].
    ///
    /// With several streams, the first one is ordered through the buffer and the others wait
    /// for an event recorded on it right after (which covers the same accesses, and the work
    /// enqueued on the first stream before them).
    ///
    /// Fails with [`Error::DeviceMismatch`] or [`Error::InvalidArgument`] when `buffer` is on
    /// another device than the streams, and with [`Error::InvalidArgument`] when it overlaps
    /// another buffer of the call (see the type's docs).
    pub fn write_ptr<T: DeviceRepr>(&mut self, buffer: &mut DeviceBuffer<T>) -> Result<*mut T> {
        self.write_ptr_of(None, buffer)
    }

    /// [`WorkStreams::write_ptr`] for the argument of parameter `param`, which errors name.
    pub fn write_param_ptr<T: DeviceRepr>(
        &mut self,
        param: &'static str,
        buffer: &mut DeviceBuffer<T>,
    ) -> Result<*mut T> {
        self.write_ptr_of(Some(param), buffer)
    }

    fn write_ptr_of<T: DeviceRepr>(
        &mut self,
        param: Option<&'static str>,
        buffer: &mut DeviceBuffer<T>,
    ) -> Result<*mut T> {
        self.hand_out(param, buffer, true)?;
        let first = self.first();
        let (pointer, replaced) = buffer.ptr_for_write_unchecked(first)?;
        if let Some(count) = self.replaced.as_mut_slice().first_mut() {
            *count += replaced;
        }
        if let Some(others) = self.streams().get(1..).filter(|others| !others.is_empty()) {
            let fork = first.record_untimed_event()?;
            for stream in others {
                // (`wait_event` first seals the stream's open point if someone needs it.)
                stream.wait_event(&fork)?;
            }
        }
        Ok(pointer)
    }

    /// Call right before the `extern "C"` entry, after every buffer was handed out: seals the
    /// work streams' open points that someone other than this call still needs (so that they
    /// do not come to include the call's work; see `crate::point`), and makes the call's device
    /// current until the guard is dropped (launches go to the current device).
    pub fn enter(&mut self) -> Result<DeviceGuard> {
        for (stream, &replaced) in self.streams.as_slice().iter().zip(self.replaced.as_slice()) {
            stream.seal_point(replaced)?;
        }
        self.entered = true;
        DeviceGuard::enter(self.device)
    }

    /// The call's points, one per work stream, taken at the first use (right after the entry
    /// call: nothing else is enqueued on the work streams in between). After
    /// [`WorkStreams::enter`] these are lazy (normally the streams' open points, extended over
    /// the call); else they are recorded now.
    fn call_events(&mut self) -> Result<&[Recorded]> {
        if self.call_events.is_none() {
            let entered = self.entered;
            let events = self
                .streams()
                .iter()
                .map(
                    |stream| {
                        if entered { stream.point_after_enqueue() } else { Recorded::now(stream) }
                    },
                )
                .collect::<Result<_>>()?;
            self.call_events = Some(events);
        }
        Ok(self.call_events.as_ref().map_or(&[], OneOrMany::as_slice))
    }

    /// Records that the work just enqueued on the work streams reads `buffer`.
    pub fn record_read<T: DeviceRepr>(&mut self, buffer: &DeviceBuffer<T>) {
        let result = self.call_events().map(|events| {
            for recorded in events {
                buffer.read_recorded(recorded);
            }
        });
        self.keep(result);
    }

    /// Records that the work just enqueued on the work streams writes `buffer`.
    pub fn record_write<T: DeviceRepr>(&mut self, buffer: &mut DeviceBuffer<T>) {
        let result = self.call_events().map(|events| buffer.write_recorded(events));
        self.keep(result);
    }

    /// Records that the work just enqueued on the work streams may write `record` (the call's
    /// bounds record, whose [`BoundsRecord::device_ptr`] the entry got): the record keeps the
    /// call's points, the end of the work after which it may be read and its memory reused.
    /// Nothing is enqueued or waited for.
    pub fn record_bounds(&mut self, record: &mut BoundsRecord) {
        let result = self.call_events().map(|events| {
            record.points =
                Some(events.iter().map(|recorded| Arc::clone(&recorded.point)).collect());
        });
        self.keep(result);
    }

    /// The first error of recording, if any (the accesses are then treated as unrecorded).
    pub fn recorded(&mut self) -> Result<()> {
        match self.error.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// A [`Pending`] that completes when the call's work on every work stream has (the call's
    /// events: call this before enqueueing anything else on the work streams), then runs
    /// `finish`.
    pub fn pending<'a, T>(
        &mut self,
        finish: impl FnOnce() -> Result<T> + Send + 'a,
    ) -> Result<Pending<'a, T>> {
        let points = self.call_events()?.iter().map(|recorded| recorded.point.clone()).collect();
        Ok(Pending::from_points(points, finish))
    }

    fn keep(&mut self, result: Result<()>) {
        if let Err(error) = result {
            self.error.get_or_insert(error);
        }
    }
}

/// The message buffer of a generated `extern "C"` entry (`char* err, size_t err_cap`), and the
/// mapping of its status to an [`Error`].
#[derive(Clone)]
pub struct EntryMessage {
    text: [c_char; 1024],
}

impl Default for EntryMessage {
    fn default() -> Self {
        EntryMessage { text: [0; 1024] }
    }
}

impl std::fmt::Debug for EntryMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("EntryMessage").field(&self.message()).finish()
    }
}

impl EntryMessage {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// The buffer's start, for the entry's `err` argument.
    pub fn as_mut_ptr(&mut self) -> *mut c_char {
        self.text.as_mut_ptr()
    }

    /// The buffer's size in bytes, for the entry's `err_cap` argument.
    pub fn capacity(&self) -> usize {
        self.text.len()
    }

    /// The text up to the first NUL (all of it, if the entry wrote none), lossily decoded.
    pub fn message(&self) -> String {
        // `c_char` is `i8` or `u8` depending on the target; both are one byte.
        let bytes: Vec<u8> =
            self.text.iter().map(|&c| c.to_ne_bytes()[0]).take_while(|&b| b != 0).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The result of the CUDA entry `function` that returned `status`:
    /// [`EntryMessage::result_for`] with [`Backend::Cuda`].
    pub fn result(&self, status: i32, function: &'static str) -> Result<()> {
        self.result_for(Backend::Cuda, status, function)
    }

    /// The result of entry `function`, compiled for `backend`, that returned `status`: `0` is
    /// success, a positive value the `cudaError_t` of a failed runtime call
    /// ([`Error::Cuda`] and the other CUDA errors for CUDA, [`Error::CpuRuntime`] for the
    /// CPU, e.g. a sticky kernel fault), a negative one a failed runtime check whose message
    /// is in the buffer ([`Error::RuntimeCheck`]).
    pub fn result_for(&self, backend: Backend, status: i32, function: &'static str) -> Result<()> {
        if status == 0 {
            return Ok(());
        }
        if status > 0 {
            return check_status(backend, sys::cudaError_t(status), function);
        }
        let mut message = self.message();
        if message.is_empty() {
            message = format!("the generated code reported status {status} without a message");
        }
        Err(Error::RuntimeCheck { function, message })
    }
}

/// The device buffer for a spanned return value of `shape`, on the device of `stream` (a CUDA
/// GPU or the CPU), zeroed. Allocation and zeroing run on the device's internal stream, which
/// never waits for user work; the wrapper orders the streams that fill it after them
/// (`WorkStreams::write_ptr`).
pub fn return_tensor<T: DeviceRepr, const R: usize>(
    stream: &Stream,
    shape: [usize; R],
) -> Result<DeviceTensor<T, R>> {
    DeviceTensor::zeros_on_device(stream.device()?, shape)
}

/// An element access of a generated function that is checked at run time, by its access
/// number: what [`Error::OutOfBounds`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundsSite {
    /// The buffer accessed.
    pub param: &'static str,
    /// `file:line:col` of the access in the `.co` file.
    pub location: &'static str,
}

/// The bounds record of a call of a function with run-time bounds checks: 32 bytes in which
/// its kernels note the first element access that failed its check (layout:
/// `choreo_compiler::lower::abi::BOUNDS_RECORD` — flag and access number, dimension, index,
/// extent).
///
/// The record lives in page-locked host memory mapped into the device's address space (a slot
/// of a runtime pool; for the CPU device, plain host memory): the host zeroes it before the
/// call, the kernels write it only when a check fails, and the host reads it once the call's
/// work has completed. So a record puts no work on any stream (no allocation, memset or copy,
/// no wait between streams), and a call costs the device nothing for it.
///
/// A wrapper makes the record with [`BoundsRecord::new`], passes [`BoundsRecord::device_ptr`]
/// and [`BoundsRecord::used_flag`] to the entry, records the call with
/// [`WorkStreams::record_bounds`] right after it, and then calls [`BoundsRecord::check`]:
/// directly (a blocking wrapper), or in the finishing step of the call's [`Pending`] (an
/// asynchronous one, so that `wait()` or `.await` fails with [`Error::OutOfBounds`]).
///
/// The entry sets the [`BoundsRecord::used_flag`] when it launched a kernel whose checks were
/// on; while that flag is 0 no kernel can have written the record, so [`BoundsRecord::check`]
/// neither waits nor reads (a launch whose checks the host proved redundant costs nothing).
///
/// # Reuse of the memory
///
/// The slot goes back to the pool only once no device work can write it: when
/// [`BoundsRecord::check`] has waited for the call's work, when the record was never handed
/// to an entry or no kernel of the call ran with its checks on (the used flag is 0), or — for a record dropped unchecked (a `Pending` dropped without being waited
/// for) — once the events of the call's work have completed (found by a later record's
/// allocation, which never blocks). A record that is forgotten (`mem::forget` of its
/// `Pending`), or whose call could not be recorded, is never reused (its memory leaks, a few
/// bytes).
#[derive(Debug)]
pub struct BoundsRecord {
    /// `None` once given back.
    slot: Option<bounds_pool::Slot>,
    /// Whether the slot's device address was handed out (to the entry).
    handed_out: bool,
    /// The end of the call's work, one point per work stream (see [`WorkStreams::record_bounds`]).
    points: Option<OneOrMany<Arc<Point>>>,
    /// Set once the call's work is known to have completed.
    completed: bool,
    used: u8,
    function: &'static str,
    sites: &'static [BoundsSite],
}

impl BoundsRecord {
    /// A zeroed record for a call on `work`'s device, of `function`, whose checked accesses
    /// are `sites`.
    pub fn new(
        work: &WorkStreams<'_>,
        function: &'static str,
        sites: &'static [BoundsSite],
    ) -> Result<BoundsRecord> {
        let slot = bounds_pool::acquire(work.device())?;
        Ok(BoundsRecord {
            slot: Some(slot),
            handed_out: false,
            points: None,
            completed: false,
            used: 0,
            function,
            sites,
        })
    }

    /// The host flag the entry sets (to 1) when a kernel ran with its checks on
    /// (`AbiParam::BoundsUsed`). The pointer is valid while the record is neither moved nor
    /// dropped; the entry writes it only during the call.
    pub fn used_flag(&mut self) -> *mut u8 {
        &mut self.used
    }

    /// The record's address for the device work of the call (`AbiParam::BoundsRecord`): mapped
    /// host memory that the call's kernels may write until its work has completed. Hand it to
    /// one entry call only, and record that call with [`WorkStreams::record_bounds`].
    pub fn device_ptr(&mut self) -> *mut u64 {
        self.handed_out = true;
        self.slot.as_ref().map_or(std::ptr::null_mut(), bounds_pool::Slot::device_ptr)
    }

    /// Fails with [`Error::OutOfBounds`] when a check of the call failed: waits for the call's
    /// work (blocking, unless it has completed, as in the finishing step of its [`Pending`]),
    /// then reads the record. Without a kernel launched with its checks on (the
    /// [`BoundsRecord::used_flag`] is 0) it neither waits nor reads.
    ///
    /// [`Error::InvalidArgument`] when a kernel ran with its checks on but the call was not
    /// recorded ([`WorkStreams::record_bounds`]): the end of its work is unknown.
    pub fn check(mut self) -> Result<()> {
        if self.used == 0 {
            return Ok(());
        }
        let Some(points) = &self.points else {
            return Err(Error::InvalidArgument(format!(
                "the bounds record of a call of `{}` was not recorded with its work, so it \
                 cannot be read",
                self.function
            )));
        };
        for point in points.as_slice() {
            point.event()?.synchronize()?;
        }
        self.completed = true;
        let Some(slot) = &self.slot else {
            return Ok(());
        };
        // SAFETY: the work of the call the slot was handed to has completed (every point of
        // the call was recorded after its work was enqueued, and waited for above); the slot
        // is handed to no other call.
        let words = unsafe { slot.read() };
        decode_bounds(self.function, self.sites, &words)
    }

    /// The host address of the record's slot (for tests of the pool).
    #[cfg(test)]
    pub(crate) fn slot_address(&self) -> usize {
        self.slot.as_ref().map_or(0, bounds_pool::Slot::host_address)
    }

    /// The words of a record that was never handed out (for tests: a new record is zeroed).
    #[cfg(test)]
    pub(crate) fn unused_words(&self) -> Option<[u64; bounds_pool::RECORD_WORDS]> {
        let slot = self.slot.as_ref().filter(|_| !self.handed_out)?;
        // SAFETY: the slot was never handed out, so no device work can write it.
        Some(unsafe { slot.read() })
    }
}

impl Drop for BoundsRecord {
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else {
            return;
        };
        if !self.handed_out || self.completed || self.used == 0 {
            // No device work can write the slot: it was never handed out, the call's work has
            // completed, or no kernel of the call ran with its checks on (the entry sets the
            // flag before such a launch, and has returned), so nothing writes the record —
            // no event needs recording for it.
            bounds_pool::release(slot);
            return;
        }
        // The events of the call's work (an open point is recorded now, at the end of its
        // stream, which is at or after the end of the work: see `crate::point`); the slot is
        // reused once they have completed. Without them (not recorded, or recording fails),
        // the slot is never reused.
        let events = self.points.take().and_then(|points| {
            points
                .as_slice()
                .iter()
                .map(|point| point.event().ok().map(Arc::clone))
                .collect::<Option<Vec<_>>>()
        });
        match events {
            Some(events) => bounds_pool::retire(slot, events),
            None => bounds_pool::leak(slot),
        }
    }
}

/// [`Error::OutOfBounds`] from a bounds record's words, when its flag is set.
fn decode_bounds(
    function: &'static str,
    sites: &'static [BoundsSite],
    words: &[u64],
) -> Result<()> {
    let word = |i: usize| words.get(i).copied().unwrap_or(0);
    // Little-endian: the low half of the first word is `flag`, the high half `access`.
    if word(0) & 0xffff_ffff == 0 {
        return Ok(());
    }
    let access = (word(0) >> 32) as usize;
    let site = sites.get(access).copied().unwrap_or(BoundsSite { param: "?", location: "?" });
    Err(Error::OutOfBounds {
        function,
        param: site.param,
        // The dimension `0xffffffff` stands for a flat element offset (a reshaping view).
        dim: match word(1) & 0xffff_ffff {
            0xffff_ffff => None,
            d => Some(d as usize),
        },
        index: word(2) as i64,
        extent: word(3) as i64,
        location: site.location,
    })
}

/// `work` followed by `copy` (a copy back to the host): complete when both are, with the value
/// of `work`.
pub fn join_unit<'a, T: 'a>(work: Pending<'a, T>, copy: Pending<'a, ()>) -> Pending<'a, T> {
    work.join(copy).map(|(value, ())| Ok(value))
}

/// `work` followed by `value` (the copy of a returned value to the host): complete when both
/// are, with the value of `value`.
pub fn join_value<'a, T: 'a>(work: Pending<'a, ()>, value: Pending<'a, T>) -> Pending<'a, T> {
    work.join(value).map(|((), value)| Ok(value))
}

/// Exact arithmetic for derived extents of returned shapes (e.g. `cdiv(N, 64)`), with the
/// C++ integer types of the generated code.
///
/// Every operation computes the mathematical result and checks that it fits the C++ type of
/// the expression node (`None` otherwise, and for division by zero); `None` propagates. So a
/// `Some` result is exactly what the generated C++ computes (no C++ operation overflowed), and
/// a wrapper never hands the entry a buffer of another size than the one it will fill.
pub mod extent {
    use super::{Error, Result};

    /// The value range of a C++ integer type.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct IntType {
        min: i128,
        max: i128,
    }

    /// `s8` / `int8_t`.
    pub const S8: IntType = IntType { min: i8::MIN as i128, max: i8::MAX as i128 };
    /// `s16` / `int16_t`.
    pub const S16: IntType = IntType { min: i16::MIN as i128, max: i16::MAX as i128 };
    /// `s32` / `int` (the type of extents in `.co` expressions).
    pub const S32: IntType = IntType { min: i32::MIN as i128, max: i32::MAX as i128 };
    /// `s64` / `int64_t`.
    pub const S64: IntType = IntType { min: i64::MIN as i128, max: i64::MAX as i128 };
    /// `u8` / `uint8_t`.
    pub const U8: IntType = IntType { min: 0, max: u8::MAX as i128 };
    /// `u16` / `uint16_t`.
    pub const U16: IntType = IntType { min: 0, max: u16::MAX as i128 };
    /// `u32` / `uint32_t`.
    pub const U32: IntType = IntType { min: 0, max: u32::MAX as i128 };
    /// `u64` / `uint64_t`.
    pub const U64: IntType = IntType { min: 0, max: u64::MAX as i128 };

    fn fit(ty: IntType, value: Option<i128>) -> Option<i128> {
        value.filter(|v| (ty.min..=ty.max).contains(v))
    }

    /// A leaf: a literal, a scalar argument, or an extent converted to `ty` (as the C++ code's
    /// `static_cast<int>(N)` does; `None` when it does not fit).
    pub fn value<V: TryInto<i128>>(ty: IntType, value: V) -> Option<i128> {
        fit(ty, value.try_into().ok())
    }

    /// A conversion to `ty`.
    pub fn cast(ty: IntType, a: Option<i128>) -> Option<i128> {
        fit(ty, a)
    }

    /// `-a`.
    pub fn neg(ty: IntType, a: Option<i128>) -> Option<i128> {
        fit(ty, a?.checked_neg())
    }

    /// `a + b`.
    pub fn add(ty: IntType, a: Option<i128>, b: Option<i128>) -> Option<i128> {
        fit(ty, a?.checked_add(b?))
    }

    /// `a - b`.
    pub fn sub(ty: IntType, a: Option<i128>, b: Option<i128>) -> Option<i128> {
        fit(ty, a?.checked_sub(b?))
    }

    /// `a * b`.
    pub fn mul(ty: IntType, a: Option<i128>, b: Option<i128>) -> Option<i128> {
        fit(ty, a?.checked_mul(b?))
    }

    /// `a / b`, truncating like C++.
    pub fn div(ty: IntType, a: Option<i128>, b: Option<i128>) -> Option<i128> {
        fit(ty, a?.checked_div(b?))
    }

    /// `a % b`, with the sign of `a` like C++.
    pub fn rem(ty: IntType, a: Option<i128>, b: Option<i128>) -> Option<i128> {
        fit(ty, a?.checked_rem(b?))
    }

    /// `a << b` (as a multiplication by `2^b`, which is what C++ computes when it is defined).
    pub fn shl(ty: IntType, a: Option<i128>, b: Option<i128>) -> Option<i128> {
        let shift = u32::try_from(b?).ok().filter(|&s| s < 64)?;
        fit(ty, a?.checked_mul(1i128 << shift))
    }

    /// `a >> b` for non-negative `a`.
    pub fn shr(ty: IntType, a: Option<i128>, b: Option<i128>) -> Option<i128> {
        let shift = u32::try_from(b?).ok().filter(|&s| s < 64)?;
        fit(ty, Some(a?).filter(|&a| a >= 0).map(|a| a >> shift))
    }

    /// `cdiv(a, b)`, i.e. `(a + b - 1) / b` in `ty`.
    pub fn cdiv(ty: IntType, a: Option<i128>, b: Option<i128>) -> Option<i128> {
        let b = b?;
        div(ty, sub(ty, add(ty, a, Some(b)), Some(1)), Some(b))
    }

    /// `min(a, b)`.
    pub fn min(ty: IntType, a: Option<i128>, b: Option<i128>) -> Option<i128> {
        fit(ty, Some(a?.min(b?)))
    }

    /// `max(a, b)`.
    pub fn max(ty: IntType, a: Option<i128>, b: Option<i128>) -> Option<i128> {
        fit(ty, Some(a?.max(b?)))
    }

    /// The extent `value` of dimension `dim` of the shape that `function` returns, as `usize`;
    /// [`Error::InvalidArgument`] when it could not be computed or is negative.
    pub fn finish(function: &'static str, dim: usize, value: Option<i128>) -> Result<usize> {
        let Some(value) = value else {
            return Err(Error::InvalidArgument(format!(
                "extent {dim} of the shape returned by `{function}` cannot be computed from the \
                 arguments: an integer operation overflows or divides by zero"
            )));
        };
        usize::try_from(value).map_err(|_| {
            Error::InvalidArgument(format!(
                "extent {dim} of the shape returned by `{function}` is {value}, which is not a \
                 valid extent"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::extent::{self, S32, U32};
    use super::*;

    #[test]
    fn a_bounds_record_decodes_to_the_access_it_names() {
        static SITES: [BoundsSite; 2] = [
            BoundsSite { param: "x", location: "k.co:3:5" },
            BoundsSite { param: "y", location: "k.co:4:5" },
        ];
        assert_eq!(decode_bounds("f", &SITES, &[0, 0, 0, 0]), Ok(()));
        let negative = (-3i64) as u64;
        let words = [1 | (1 << 32), 2, negative, 8];
        assert_eq!(
            decode_bounds("f", &SITES, &words),
            Err(Error::OutOfBounds {
                function: "f",
                param: "y",
                dim: Some(2),
                index: -3,
                extent: 8,
                location: "k.co:4:5"
            })
        );
    }

    #[test]
    fn extents_are_checked_by_dimension() {
        assert_eq!(check_extent("x", 1, 64, 64), Ok(()));
        assert_eq!(
            check_extent("x", 1, 64, 63),
            Err(Error::Shape { param: "x", dim: 1, expected: 64, got: 63 })
        );
    }

    #[test]
    fn derived_extents_follow_cpp_int_arithmetic_or_fail() {
        let n = extent::value(S32, 100usize);
        assert_eq!(extent::cdiv(S32, n, extent::value(S32, 64)), Some(2));
        assert_eq!(extent::div(S32, extent::value(S32, -7), extent::value(S32, 2)), Some(-3));
        assert_eq!(extent::rem(S32, extent::value(S32, -7), extent::value(S32, 2)), Some(-1));
        assert_eq!(extent::div(S32, n, extent::value(S32, 0)), None);
        // 65536 * 65536 overflows `int`: C++ would compute garbage, so there is no result.
        let big = extent::value(S32, 65536);
        assert_eq!(extent::mul(S32, big, big), None);
        assert_eq!(extent::value(S32, usize::MAX), None);
        // Unsigned arithmetic that would wrap in C++.
        assert_eq!(extent::sub(U32, extent::value(U32, 1), extent::value(U32, 2)), None);
        assert_eq!(extent::shl(S32, extent::value(S32, 3), extent::value(S32, 4)), Some(48));
        assert_eq!(extent::finish("f", 0, Some(48)), Ok(48));
        assert!(matches!(extent::finish("f", 0, Some(-1)), Err(Error::InvalidArgument(_))));
        assert!(matches!(extent::finish("f", 0, None), Err(Error::InvalidArgument(_))));
    }

    fn handout(start: usize, end: usize, write: bool, param: Option<&'static str>) -> Handout {
        Handout { start, end, write, param, elem: "f32", len: (end - start) / 4 }
    }

    #[test]
    fn a_written_buffer_must_not_overlap_any_other_buffer_of_the_call() {
        let x = handout(0x1000, 0x1100, false, Some("x"));
        let y = handout(0x2000, 0x2100, true, Some("y"));
        // Disjoint buffers, read or written, are fine.
        assert!(alias_error([&x], &y, 2).is_none());
        // The same memory read twice is fine.
        assert!(alias_error([&x], &x, 2).is_none());
        // Read and written, written twice, partly overlapping, in either order: aliasing.
        let y_over_x = handout(0x1080, 0x1180, true, Some("y"));
        let read_x_as_z = handout(0x10f0, 0x1100, false, Some("z"));
        for (earlier, new) in [(&x, &y_over_x), (&y_over_x, &read_x_as_z), (&y, &y)] {
            match alias_error([earlier], new, 2) {
                Some(Error::InvalidArgument(message)) => {
                    assert!(message.starts_with("arguments alias"), "{message}");
                    let (a, b) = (earlier.param.unwrap(), new.param.unwrap());
                    assert!(message.contains(&format!("`{a}`")), "{message}");
                    assert!(message.contains(&format!("`{b}`")), "{message}");
                }
                other => panic!("{earlier:?} and {new:?}: expected aliasing, got {other:?}"),
            }
        }
        // Ranges that only touch do not overlap.
        let after_x = handout(0x1100, 0x1200, true, Some("w"));
        assert!(alias_error([&x, &y], &after_x, 3).is_none());
        // Buffers without memory (zero length, null) alias nothing, not even each other.
        let empty = handout(0, 0, true, None);
        let empty_inside_x = handout(0x1010, 0x1010, true, None);
        assert!(alias_error([&x, &empty], &empty, 3).is_none());
        assert!(alias_error([&x], &empty_inside_x, 2).is_none());
    }

    #[test]
    fn unnamed_aliases_are_described_by_position_type_and_range() {
        let a = handout(0x1000, 0x1100, false, None);
        let b = handout(0x2000, 0x2100, false, None);
        let c = handout(0x10f0, 0x1200, true, None);
        let Some(Error::InvalidArgument(message)) = alias_error([&a, &b], &c, 3) else {
            panic!("expected aliasing");
        };
        assert!(message.contains("device buffer #1 of the call (64 × f32"), "{message}");
        assert!(message.contains("device buffer #3 of the call (68 × f32"), "{message}");
        assert!(message.contains("the second is written"), "{message}");
    }

    #[test]
    fn buffers_and_streams_of_a_call_must_share_one_device() {
        let gpu = Device::from_cuda_ordinal;
        assert_eq!(device_error("`x`", gpu(0), gpu(0)), Ok(()));
        assert_eq!(device_error("`x`", Device::cpu(), Device::cpu()), Ok(()));
        match device_error("`x`", gpu(1), gpu(0)) {
            Err(Error::InvalidArgument(message)) => {
                assert!(message.starts_with("`x` is on device 1"), "{message}");
                assert!(message.contains("runs on device 0"), "{message}");
            }
            other => panic!("expected a device error, got {other:?}"),
        }
        assert_eq!(same_device([gpu(3)]), Ok(gpu(3)));
        assert_eq!(same_device([gpu(0), gpu(0), gpu(0)]), Ok(gpu(0)));
        match same_device([gpu(0), gpu(0), gpu(1)]) {
            Err(Error::InvalidArgument(message)) => {
                assert!(message.contains("stream #3 on device 1"), "{message}");
            }
            other => panic!("expected a device error, got {other:?}"),
        }
        assert!(matches!(same_device([]), Err(Error::InvalidArgument(_))));
        // The CPU and a GPU: a device mismatch, naming both.
        assert_eq!(
            device_error("`x`", Device::cpu(), gpu(0)),
            Err(Error::DeviceMismatch {
                what: "`x`".into(),
                found: Device::cpu(),
                expected: gpu(0)
            })
        );
        match same_device([Device::cpu(), Device::cpu(), gpu(0)]) {
            Err(error @ Error::DeviceMismatch { .. }) => {
                let text = error.to_string();
                assert!(text.contains("stream #3"), "{text}");
                assert!(text.contains("CUDA device 0") && text.contains("the CPU"), "{text}");
            }
            other => panic!("expected a device mismatch, got {other:?}"),
        }
    }

    #[test]
    fn entry_status_maps_to_errors() {
        let mut message = EntryMessage::new();
        assert_eq!(message.result(0, "f"), Ok(()));
        let text = b"The 1st bound item of parallelby is invalid (k.co:3:17): got 0";
        let buffer = message.as_mut_ptr();
        for (index, &byte) in text.iter().enumerate() {
            // SAFETY: `index` is below the text length, which is below the buffer's capacity;
            // the pointer is the start of the buffer, which `message` owns and outlives this.
            unsafe { *buffer.add(index) = c_char::from_ne_bytes([byte]) };
        }
        match message.result(-1, "f") {
            Err(Error::RuntimeCheck { function: "f", message }) => {
                assert_eq!(message.as_bytes(), text);
            }
            other => panic!("unexpected {other:?}"),
        }
        let empty = EntryMessage::new();
        assert!(matches!(
            empty.result(-1, "g"),
            Err(Error::RuntimeCheck { function: "g", message }) if message.contains("-1")
        ));
        // A CUDA status (2 = cudaErrorMemoryAllocation) becomes a CUDA error of the call (or
        // RuntimeNotLinked in a build without a CUDA runtime); never Ok.
        assert!(empty.result(2, "f").is_err());
    }
}
