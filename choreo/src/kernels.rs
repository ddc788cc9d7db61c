//! Support for the kernel wrappers that `choreo-build` generates from `.co` files, and
//! [`include_kernels!`](crate::include_kernels), which brings them into a crate.
//!
//! Programs do not call the items of this module directly: the generated wrappers do (their
//! code is written by `choreo_compiler::emit::rust`). They are public so that generated code in
//! other crates can use them, and their behaviour is part of the wrappers' safety argument:
//!
//! - [`WorkStreams`] orders every stream a wrapper's kernels run on after earlier accesses to
//!   each tensor it passes, and records the new accesses afterwards (so buffers dropped while
//!   the device still uses them stay alive until it is done);
//! - [`EntryMessage`] turns the status of a generated `extern "C"` entry into an [`Error`];
//! - [`check_extent`] and [`extent`] check and compute shapes before anything is launched;
//! - [`return_tensor`], [`join_unit`] and [`join_value`] build results.

use std::ffi::c_char;

use choreo_sys as sys;

use crate::elem::DeviceRepr;
use crate::error::{check_cuda, check_deferred};
use crate::one_or_many::OneOrMany;
use crate::stream::Stream;
use crate::tracking::Recorded;
use crate::{DeviceBuffer, DeviceTensor, Error, Pending, Result};

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
/// The first of these records one event per work stream; every buffer of the call and the
/// `Pending` share those events. So a call costs one `cudaEventRecord` per stream (plus waits
/// only where streams actually change), not one per buffer. That is right because the wrapper
/// enqueues nothing on the work streams between the entry's return and the recording.
///
/// Recording failures are kept and returned by [`WorkStreams::recorded`]; an access that could
/// not be recorded makes later conflicting accesses synchronise the device instead (see
/// [`DeviceBuffer`]), so a failure costs time, never memory safety. A buffer written on several
/// streams keeps the events of all of them as its last write.
#[derive(Debug)]
pub struct WorkStreams<'s> {
    /// Distinct streams, in the order given.
    streams: OneOrMany<&'s Stream>,
    /// One event per stream, recorded after the entry call (see [`WorkStreams::call_events`]).
    call_events: Option<OneOrMany<Recorded>>,
    /// The first recording error.
    error: Option<Error>,
}

impl<'s> WorkStreams<'s> {
    /// The work streams, without duplicates (the same stream passed twice counts once; so do
    /// two handles of the legacy default stream). At least one stream is required.
    ///
    /// Fails with a deferred error of an earlier drop, if there is one (checked here once for
    /// the whole call).
    pub fn new(streams: &[&'s Stream]) -> Result<Self> {
        check_deferred()?;
        let mut unique: OneOrMany<&'s Stream> = OneOrMany::default();
        for &stream in streams {
            let key = stream.key()?;
            let mut seen = false;
            for other in unique.as_slice() {
                seen |= other.key()? == key;
            }
            if !seen {
                unique.push(stream);
            }
        }
        if unique.as_slice().is_empty() {
            return Err(Error::InvalidArgument("a kernel call needs at least one stream".into()));
        }
        Ok(WorkStreams { streams: unique, call_events: None, error: None })
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

    /// Orders every work stream after the last write to `buffer` and returns its device
    /// address for device work that only reads it. Pair with [`WorkStreams::record_read`].
    pub fn read_ptr<T: DeviceRepr>(&self, buffer: &DeviceBuffer<T>) -> Result<*const T> {
        let mut pointer = std::ptr::null();
        for stream in self.streams() {
            pointer = buffer.ptr_for_read_unchecked(stream)?;
        }
        Ok(pointer)
    }

    /// Orders every work stream after all earlier accesses to `buffer` and returns its device
    /// address for device work that writes it. Pair with [`WorkStreams::record_write`].
    ///
    /// With several streams, the first one is ordered through the buffer and the others wait
    /// for an event recorded on it right after (which covers the same accesses, and the work
    /// enqueued on the first stream before them).
    pub fn write_ptr<T: DeviceRepr>(&self, buffer: &mut DeviceBuffer<T>) -> Result<*mut T> {
        let first = self.first();
        let pointer = buffer.ptr_for_write_unchecked(first)?;
        if let Some(others) = self.streams().get(1..).filter(|others| !others.is_empty()) {
            let fork = first.record_untimed_event()?;
            for stream in others {
                stream.wait_event(&fork)?;
            }
        }
        Ok(pointer)
    }

    /// The call's events, one per work stream, recorded at the first use (right after the
    /// entry call: nothing else is enqueued on the work streams in between).
    fn call_events(&mut self) -> Result<&[Recorded]> {
        if self.call_events.is_none() {
            let events =
                self.streams().iter().map(|stream| Recorded::now(stream)).collect::<Result<_>>()?;
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
        let events = self.call_events()?.iter().map(|recorded| recorded.event.clone()).collect();
        Ok(Pending::from_shared_events(events, finish))
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

    /// The result of entry `function` that returned `status`: `0` is success, a positive value
    /// the `cudaError_t` of a failed CUDA call, a negative one a failed runtime check whose
    /// message is in the buffer ([`Error::RuntimeCheck`]).
    pub fn result(&self, status: i32, function: &'static str) -> Result<()> {
        if status == 0 {
            return Ok(());
        }
        if status > 0 {
            return check_cuda(sys::cudaError_t(status), function);
        }
        let mut message = self.message();
        if message.is_empty() {
            message = format!("the generated code reported status {status} without a message");
        }
        Err(Error::RuntimeCheck { function, message })
    }
}

/// The device buffer for a spanned return value of `shape`, on the device of `stream`,
/// zeroed. Allocation and zeroing run on the device's internal stream, which never waits for
/// user work; the wrapper orders the streams that fill it after them (`WorkStreams::write_ptr`).
pub fn return_tensor<T: DeviceRepr, const R: usize>(
    stream: &Stream,
    shape: [usize; R],
) -> Result<DeviceTensor<T, R>> {
    let _device = stream.bind_device()?;
    DeviceTensor::zeros(shape)
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
