//! Cross-crate integration tests live in `tests/`. This library holds what they share: the
//! launchers of the GPU test kernels (`kernels/test_kernels.cu`, built by `build.rs` when a
//! CUDA toolkit is available).
//!
//! The tracked launchers ([`spin_then_write`], [`wait_then_write`], [`add_one`], [`saxpy`],
//! [`f32_to_fp8`]) use the runtime's buffer access API exactly like generated kernel wrappers
//! do; the `raw_*` ones launch on raw device pointers without any tracking, for tests of
//! explicit synchronisation. A [`Gate`] holds kernels back until the test opens it, so tests
//! of "while the kernel is still running" do not depend on timing.
//! Without the kernels every launcher returns [`Error::NotBuilt`], so tests that need them fail
//! with a clear message instead of passing.
//!
//! Nothing here depends on how fast the GPU or the host is, so the tests pass unchanged under
//! compute-sanitizer's slowdown: orderings are checked with device-side evidence (gates that
//! only the host opens, event and stream queries, event timestamps compared with each other),
//! waits for the device have no deadline but device-side timeouts that report failure, and
//! checks that need two kernels to run at the same time first ask the device whether it runs
//! kernels concurrently at all ([`concurrent_kernels`]).
//!
//! [`co`] holds the wrappers that `choreo-build` generates from `co/*.co` (the kernels of the
//! wrapper tests, `tests/wrappers_gpu.rs`, and of the compile-fail tests).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

use choreo::{DeviceBuffer, Error, Result, Stream};

/// `data` as a rank-1 device tensor, copied on the default stream (panics on failure: a test
/// helper).
pub fn upload<T: choreo::DeviceRepr>(data: &[T]) -> choreo::DeviceTensor<T, 1> {
    choreo::DeviceTensor::from_host(&Stream::default_stream(), data.into()).expect("upload")
}

/// The elements of a rank-1 device tensor, copied on the default stream (panics on failure).
pub fn download<T: choreo::DeviceRepr>(tensor: &choreo::DeviceTensor<T, 1>) -> Vec<T> {
    tensor.to_host(&Stream::default_stream()).expect("download").into_vec()
}

/// `true` when `build.rs` compiled the test kernels.
pub const KERNELS_BUILT: bool = cfg!(choreo_test_kernels);

/// `true` when `build.rs` compiled the Choreo kernels of [`co`] (else its wrappers are stubs
/// that return [`Error::NotBuilt`]).
pub const CO_KERNELS_BUILT: bool = cfg!(choreo_co_kernels);

/// The generated wrappers of `co/*.co`: one module per file (`co::seed`, `co::kinds`, …).
pub mod co {
    choreo::include_kernels!("co_kernels");
}

#[cfg(choreo_test_kernels)]
mod ffi {
    use choreo::sys::{cudaError_t, cudaStream_t};

    unsafe extern "C" {
        pub fn choreo_test_spin_then_write(
            out: *mut u32,
            n: usize,
            spin_ns: u64,
            value: u32,
            stream: cudaStream_t,
        ) -> cudaError_t;
        pub fn choreo_test_wait_then_write(
            gate: *mut u32,
            out: *mut u32,
            n: usize,
            timeout_ns: u64,
            value: u32,
            stream: cudaStream_t,
        ) -> cudaError_t;
        pub fn choreo_test_rendezvous(
            words: *mut u32,
            me: u32,
            timeout_ns: u64,
            stream: cudaStream_t,
        ) -> cudaError_t;
        pub fn choreo_test_trap(stream: cudaStream_t) -> cudaError_t;
        pub fn choreo_test_add_one(data: *mut u32, n: usize, stream: cudaStream_t) -> cudaError_t;
        pub fn choreo_test_saxpy(
            a: f32,
            x: *const f32,
            y: *mut f32,
            n: usize,
            stream: cudaStream_t,
        ) -> cudaError_t;
        pub fn choreo_test_f32_to_fp8_device(
            input: *const f32,
            output: *mut u8,
            n: usize,
            e5m2: i32,
            stream: cudaStream_t,
        ) -> cudaError_t;
        pub fn choreo_test_host_f32_to_fp8(x: f32, saturate: i32, e5m2: i32) -> u8;
        pub fn choreo_test_host_fp8_to_f32(code: u8, e5m2: i32) -> f32;
    }
}

/// The error of every launcher when the kernels were not built.
#[cfg_attr(choreo_test_kernels, allow(dead_code))]
fn not_built(function: &'static str) -> Error {
    Error::NotBuilt { function }
}

#[cfg_attr(not(choreo_test_kernels), allow(dead_code))]
fn nanoseconds(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// fp8 format selector of the conversion helpers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fp8Format {
    /// `f8_e4m3`.
    E4M3,
    /// `f8_e5m2`.
    E5M2,
}

impl Fp8Format {
    #[cfg_attr(not(choreo_test_kernels), allow(dead_code))]
    fn selector(self) -> i32 {
        match self {
            Fp8Format::E4M3 => 0,
            Fp8Format::E5M2 => 1,
        }
    }
}

/// Enqueues on `stream` a kernel that busy-waits for `spin` and then writes `value` to every
/// element of `out`.
pub fn spin_then_write(
    stream: &Stream,
    out: &mut DeviceBuffer<u32>,
    spin: Duration,
    value: u32,
) -> Result<()> {
    #[cfg(not(choreo_test_kernels))]
    {
        let _ = (stream, out, spin, value);
        Err(not_built("choreo_tests::spin_then_write"))
    }
    #[cfg(choreo_test_kernels)]
    {
        let _device = stream.bind_device()?;
        let len = out.len();
        let pointer = out.device_ptr_for_write(stream)?;
        // SAFETY: `pointer` addresses `len` u32 of `out`, which stays alive until the kernel
        // has finished because the write is recorded below; the stream is valid.
        let status = unsafe {
            ffi::choreo_test_spin_then_write(
                pointer,
                len,
                nanoseconds(spin),
                value,
                stream.as_raw(),
            )
        };
        let recorded = out.record_write(stream);
        choreo::check_cuda(status, "choreo_test_spin_then_write")?;
        recorded
    }
}

/// How long a gated kernel waits for its gate before it gives up (and reports it). A hang
/// guard, not a measure of anything: a kernel only waits this long when the host blocked on it
/// (which the test then reports as a failure, see [`Gate::timed_out`]).
pub const GATE_TIMEOUT: Duration = Duration::from_secs(60);

/// Words of mapped pinned memory that kernels poll and the host writes (gates, rendezvous).
///
/// They come from slabs that are never freed while the process runs (freeing pinned memory
/// waits for every running kernel, and a kernel may still poll a word). At exit, a handler
/// sets every word (so no kernel waits any more), waits for the device and frees the slabs, so
/// compute-sanitizer's leak check finds nothing.
mod mapped {
    use super::*;

    /// Words per slab.
    const SLAB_WORDS: usize = 4096;

    struct Slabs {
        /// Slab start addresses.
        slabs: Vec<usize>,
        /// Words handed out of the last slab.
        used: usize,
    }

    static SLABS: Mutex<Slabs> = Mutex::new(Slabs { slabs: Vec::new(), used: SLAB_WORDS });

    unsafe extern "C" {
        fn atexit(function: extern "C" fn()) -> std::ffi::c_int;
    }

    /// `count` (at most a slab's) fresh zeroed words, never handed out again.
    pub(super) fn words(count: usize) -> Result<*mut AtomicU32> {
        assert!(count <= SLAB_WORDS);
        let mut slabs = SLABS.lock().unwrap_or_else(PoisonError::into_inner);
        if slabs.used + count > SLAB_WORDS {
            let mut raw = std::ptr::null_mut();
            // SAFETY: `raw` is a valid pointer slot. Pinned memory is mapped into the device's
            // address space at the same address (unified addressing on 64-bit Linux).
            let status = unsafe {
                choreo::sys::cudaHostAlloc(
                    &mut raw,
                    SLAB_WORDS * size_of::<u32>(),
                    choreo::sys::cudaHostAllocPortable | choreo::sys::cudaHostAllocMapped,
                )
            };
            choreo::check_cuda(status, "cudaHostAlloc")?;
            // SAFETY: the slab holds SLAB_WORDS u32, is page aligned and ours alone.
            unsafe { std::ptr::write_bytes(raw.cast::<u32>(), 0, SLAB_WORDS) };
            if slabs.slabs.is_empty() {
                // After the CUDA runtime initialised, so this runs before its teardown.
                // SAFETY: the C library's atexit; `release` never unwinds.
                let _ = unsafe { atexit(release) };
            }
            slabs.slabs.push(raw as usize);
            slabs.used = 0;
        }
        let start = slabs.slabs.last().copied().unwrap_or_default() as *mut AtomicU32;
        // SAFETY: `used + count <= SLAB_WORDS`, inside the slab; AtomicU32 has the layout of
        // u32 and the words are initialised (zeroed).
        let words = unsafe { start.add(slabs.used) };
        slabs.used += count;
        Ok(words)
    }

    /// The exit handler: opens everything, waits for the device, frees the slabs.
    extern "C" fn release() {
        let _ = std::panic::catch_unwind(|| {
            let Ok(slabs) = SLABS.try_lock() else { return };
            for &slab in &slabs.slabs {
                for index in 0..SLAB_WORDS {
                    // SAFETY: inside a live slab of initialised words.
                    unsafe { &*(slab as *const AtomicU32).add(index) }.store(1, Ordering::SeqCst);
                }
            }
            // SAFETY: no arguments; afterwards no kernel uses the slabs.
            if !unsafe { choreo::sys::cudaDeviceSynchronize() }.is_success() {
                return;
            }
            for &slab in &slabs.slabs {
                // SAFETY: each slab came from cudaHostAlloc and is freed once, after the device
                // finished everything that could read it.
                let _ = unsafe { choreo::sys::cudaFreeHost(slab as *mut std::ffi::c_void) };
            }
        });
    }
}

/// Two words of mapped pinned memory that gated kernels poll: `[open, timed_out]`. The host
/// opens the gate; a kernel that waited [`GATE_TIMEOUT`] in vain proceeds and sets
/// `timed_out`. Dropping the gate opens it (so a failing test does not leave kernels waiting).
///
/// Gates make "the kernel is still running" a fact instead of a matter of timing: until the
/// host opens the gate, the kernel cannot finish. A test must not block on gated work before
/// it opens the gate; if the host (or the runtime under test) blocks anyway, the kernel gives
/// up after the timeout and [`Gate::timed_out`] says so.
pub struct Gate {
    words: *mut AtomicU32,
    timeout: Duration,
}

// SAFETY: the words are atomics in memory that is never freed while the process runs.
unsafe impl Send for Gate {}
// SAFETY: see `Send`; all access goes through the atomics.
unsafe impl Sync for Gate {}

impl Gate {
    /// A closed gate whose kernels give up after [`GATE_TIMEOUT`].
    pub fn closed() -> Result<Gate> {
        Gate::closed_for(GATE_TIMEOUT)
    }

    /// A closed gate whose kernels give up after `timeout`: for probes and controls, whose
    /// gate may time out in some environments without that being a failure.
    pub fn closed_for(timeout: Duration) -> Result<Gate> {
        Ok(Gate { words: mapped::words(2)?, timeout })
    }

    fn word(&self, index: usize) -> &AtomicU32 {
        // SAFETY: `words` points to two initialised AtomicU32 that are never freed.
        unsafe { &*self.words.add(index) }
    }

    /// Lets the kernels waiting on this gate proceed.
    pub fn open(&self) {
        self.word(0).store(1, Ordering::SeqCst);
    }

    /// `true` if a kernel gave up waiting (the test did not open the gate in time).
    pub fn timed_out(&self) -> bool {
        self.word(1).load(Ordering::SeqCst) != 0
    }

    #[cfg_attr(not(choreo_test_kernels), allow(dead_code))]
    fn device_pointer(&self) -> *mut u32 {
        self.words.cast()
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.open();
    }
}

/// How long each side of [`concurrent_kernels`]' rendezvous waits for the other.
const RENDEZVOUS_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether this device, in this process, runs kernels of two streams at the same time: two
/// hand-written kernels on two fresh streams try to meet (each waits for the other, with a
/// device-side timeout). Asked once per process; the answer is printed.
///
/// Checks that two streams of a kernel call overlap need this: on a device that runs one
/// kernel at a time (compute-sanitizer serialises kernels) nothing can overlap, whatever the
/// runtime does. When the answer is `true`, overlap is required; the device proved it can.
pub fn concurrent_kernels() -> Result<bool> {
    static ANSWER: OnceLock<Result<bool, String>> = OnceLock::new();
    asked_once(
        &ANSWER,
        rendezvous,
        [
            "the device ran two kernels of two streams one after the other (their rendezvous \
             timed out): checks of overlap are not possible in this process",
            "the device runs kernels of two streams concurrently",
        ],
        "the rendezvous of two kernels",
    )
}

/// The answer of a per-process probe of the device, asked the first time only and printed
/// (`said[answer as usize]`, or that `what` failed).
fn asked_once(
    answer: &OnceLock<Result<bool, String>>,
    probe: fn() -> Result<bool>,
    said: [&str; 2],
    what: &str,
) -> Result<bool> {
    let answer = answer.get_or_init(|| {
        let answer = probe().map_err(|error| error.to_string());
        match &answer {
            Ok(yes) => println!("{}", said[usize::from(*yes)]),
            Err(error) => println!("{what} failed: {error}"),
        }
        answer
    });
    answer.clone().map_err(Error::InvalidArgument)
}

fn rendezvous() -> Result<bool> {
    #[cfg(not(choreo_test_kernels))]
    {
        Err(not_built("choreo_tests::concurrent_kernels"))
    }
    #[cfg(choreo_test_kernels)]
    {
        let words = mapped::words(4)?;
        let streams = [Stream::new()?, Stream::new()?];
        for (me, stream) in (0..).zip(&streams) {
            let _device = stream.bind_device()?;
            // SAFETY: `words` are four words of mapped pinned memory that are never freed while
            // the process runs; the stream is valid.
            let status = unsafe {
                ffi::choreo_test_rendezvous(
                    words.cast(),
                    me,
                    nanoseconds(RENDEZVOUS_TIMEOUT),
                    stream.as_raw(),
                )
            };
            choreo::check_cuda(status, "choreo_test_rendezvous")?;
        }
        for stream in &streams {
            stream.synchronize()?;
        }
        // SAFETY: as above; the kernels have finished.
        let met = |side: usize| unsafe { &*words.add(2 + side) }.load(Ordering::SeqCst) != 0;
        Ok(met(0) && met(1))
    }
}

/// How long the gated kernel of [`gated_kernels_hold_other_work`]' probe waits for its gate.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Whether, in this process, a kernel held at a gate holds back work that CUDA lets run
/// beside it: a kernel is held at a gate (with a short device-side timeout) on one stream,
/// the add-one kernel is launched on another and waited for, and the answer is whether the
/// gate timed out meanwhile. Asked once per process; the answer is printed.
///
/// On the device itself the add-one finishes at once. Under compute-sanitizer it waits for the
/// gated kernel (observed on an H200 with compute-sanitizer 2025.3 under memcheck and
/// racecheck, although two kernels of one function do run concurrently there, see
/// [`concurrent_kernels`]), and so do other calls. Tests that check "still running while the
/// gate is closed" need the answer: where gated kernels hold other work, they open each gate
/// right after its kernel is enqueued, skip the "still running" checks (saying so) and check
/// everything else. Raw launches only, so the answer says nothing about the runtime under
/// test.
pub fn gated_kernels_hold_other_work() -> Result<bool> {
    static ANSWER: OnceLock<Result<bool, String>> = OnceLock::new();
    asked_once(
        &ANSWER,
        gated_kernel_probe,
        [
            "a gated kernel holds back no work of another stream",
            "a gated kernel held back a kernel of another stream (as under compute-sanitizer): \
             gates open as soon as their kernel is enqueued, and \"still running\" checks are \
             skipped in this process",
        ],
        "the gated-kernel probe",
    )
}

fn gated_kernel_probe() -> Result<bool> {
    let (held, other) = (Stream::new()?, Stream::new()?);
    let gate = Gate::closed_for(PROBE_TIMEOUT)?;
    let mut word = DeviceBuffer::<u32>::zeroed_on(&held, 1)?;
    let mut words = DeviceBuffer::<u32>::zeroed_on(&other, 256)?;
    wait_then_write(&held, &gate, &mut word, 1)?;
    add_one(&other, &mut words)?;
    other.synchronize()?;
    let waited = gate.timed_out();
    gate.open();
    held.synchronize()?;
    Ok(waited)
}

/// Launches a kernel that executes a trap instruction. The kernel fails, and with it the CUDA
/// context: every later CUDA call of the process fails (a "sticky" error). Only for a test
/// process of its own.
pub fn trap(stream: &Stream) -> Result<()> {
    #[cfg(not(choreo_test_kernels))]
    {
        let _ = stream;
        Err(not_built("choreo_tests::trap"))
    }
    #[cfg(choreo_test_kernels)]
    {
        let _device = stream.bind_device()?;
        // SAFETY: a kernel without parameters on a valid stream.
        let status = unsafe { ffi::choreo_test_trap(stream.as_raw()) };
        choreo::check_cuda(status, "choreo_test_trap")
    }
}

/// Enqueues on `stream` a kernel that waits until `gate` is opened and then writes `value` to
/// every element of `out`.
pub fn wait_then_write(
    stream: &Stream,
    gate: &Gate,
    out: &mut DeviceBuffer<u32>,
    value: u32,
) -> Result<()> {
    #[cfg(not(choreo_test_kernels))]
    {
        let _ = (stream, gate, out, value);
        Err(not_built("choreo_tests::wait_then_write"))
    }
    #[cfg(choreo_test_kernels)]
    {
        let _device = stream.bind_device()?;
        let len = out.len();
        let pointer = out.device_ptr_for_write(stream)?;
        // SAFETY: as in `spin_then_write`; the gate's memory is never freed.
        let status = unsafe {
            ffi::choreo_test_wait_then_write(
                gate.device_pointer(),
                pointer,
                len,
                nanoseconds(gate.timeout),
                value,
                stream.as_raw(),
            )
        };
        let recorded = out.record_write(stream);
        choreo::check_cuda(status, "choreo_test_wait_then_write")?;
        recorded
    }
}

/// Launches every test kernel once and waits for them.
///
/// With CUDA's default lazy module loading, the first launch of a kernel loads it, and loading
/// can wait for kernels that are already running; a test that holds a kernel at a [`Gate`]
/// would then stall the first launch of another kernel until the gate opens (observed on an
/// H200). Warming up before any gate closes avoids that.
pub fn warm_up_kernels() -> Result<()> {
    let stream = Stream::new()?;
    let gate = Gate::closed()?;
    gate.open();
    let mut words = DeviceBuffer::<u32>::zeroed_on(&stream, 256)?;
    let floats = DeviceBuffer::<f32>::zeroed_on(&stream, 256)?;
    let mut more_floats = DeviceBuffer::<f32>::zeroed_on(&stream, 256)?;
    let mut bytes = DeviceBuffer::<u8>::zeroed_on(&stream, 256)?;
    spin_then_write(&stream, &mut words, Duration::ZERO, 1)?;
    wait_then_write(&stream, &gate, &mut words, 2)?;
    add_one(&stream, &mut words)?;
    saxpy(&stream, 1.0, &floats, &mut more_floats)?;
    f32_to_fp8(&stream, Fp8Format::E4M3, &floats, &mut bytes)?;
    #[cfg(choreo_test_kernels)]
    {
        let scratch = mapped::words(4)?;
        // SAFETY: as in `rendezvous`; a zero timeout returns at once.
        let status = unsafe { ffi::choreo_test_rendezvous(scratch.cast(), 0, 0, stream.as_raw()) };
        choreo::check_cuda(status, "choreo_test_rendezvous")?;
    }
    let values = words.to_vec(&stream)?;
    if values.iter().any(|&value| value != 3) {
        return Err(Error::InvalidArgument(format!("warm-up kernels computed {:?}", &values[..4])));
    }
    Ok(())
}

/// Enqueues on `stream` a kernel that adds one to every element of `data`.
pub fn add_one(stream: &Stream, data: &mut DeviceBuffer<u32>) -> Result<()> {
    #[cfg(not(choreo_test_kernels))]
    {
        let _ = (stream, data);
        Err(not_built("choreo_tests::add_one"))
    }
    #[cfg(choreo_test_kernels)]
    {
        let _device = stream.bind_device()?;
        let len = data.len();
        let pointer = data.device_ptr_for_write(stream)?;
        // SAFETY: as in `spin_then_write`.
        let status = unsafe { ffi::choreo_test_add_one(pointer, len, stream.as_raw()) };
        let recorded = data.record_write(stream);
        choreo::check_cuda(status, "choreo_test_add_one")?;
        recorded
    }
}

/// Enqueues `y = a * x + y` on `stream`.
pub fn saxpy(
    stream: &Stream,
    a: f32,
    x: &DeviceBuffer<f32>,
    y: &mut DeviceBuffer<f32>,
) -> Result<()> {
    if x.len() != y.len() {
        return Err(Error::Length { expected: y.len(), got: x.len() });
    }
    #[cfg(not(choreo_test_kernels))]
    {
        let _ = (stream, a);
        Err(not_built("choreo_tests::saxpy"))
    }
    #[cfg(choreo_test_kernels)]
    {
        let _device = stream.bind_device()?;
        let len = y.len();
        let x_pointer = x.device_ptr_for_read(stream)?;
        let y_pointer = y.device_ptr_for_write(stream)?;
        // SAFETY: both pointers address `len` f32 of buffers whose accesses are recorded below,
        // so they stay alive until the kernel has finished; `x` and `y` are distinct buffers
        // (one is borrowed shared, the other exclusively).
        let status =
            unsafe { ffi::choreo_test_saxpy(a, x_pointer, y_pointer, len, stream.as_raw()) };
        let read = x.record_read(stream);
        let written = y.record_write(stream);
        choreo::check_cuda(status, "choreo_test_saxpy")?;
        read.and(written)
    }
}

/// Enqueues on `stream` CUDA's device conversion (`__nv_cvt_float_to_fp8`, saturating) of
/// `input` into `output`.
pub fn f32_to_fp8(
    stream: &Stream,
    format: Fp8Format,
    input: &DeviceBuffer<f32>,
    output: &mut DeviceBuffer<u8>,
) -> Result<()> {
    if input.len() != output.len() {
        return Err(Error::Length { expected: output.len(), got: input.len() });
    }
    #[cfg(not(choreo_test_kernels))]
    {
        let _ = (stream, format);
        Err(not_built("choreo_tests::f32_to_fp8"))
    }
    #[cfg(choreo_test_kernels)]
    {
        let _device = stream.bind_device()?;
        let len = output.len();
        let input_pointer = input.device_ptr_for_read(stream)?;
        let output_pointer = output.device_ptr_for_write(stream)?;
        // SAFETY: as in `saxpy`.
        let status = unsafe {
            ffi::choreo_test_f32_to_fp8_device(
                input_pointer,
                output_pointer,
                len,
                format.selector(),
                stream.as_raw(),
            )
        };
        let read = input.record_read(stream);
        let written = output.record_write(stream);
        choreo::check_cuda(status, "choreo_test_f32_to_fp8_device")?;
        read.and(written)
    }
}

/// Enqueues the spin-then-write kernel on raw device memory, without any tracking.
///
/// # Safety
///
/// `out` must point to `len` writable `u32` of device memory (of the stream's device) that
/// stays allocated until the kernel has finished.
pub unsafe fn raw_spin_then_write(
    stream: &Stream,
    out: *mut u32,
    len: usize,
    spin: Duration,
    value: u32,
) -> Result<()> {
    #[cfg(not(choreo_test_kernels))]
    {
        let _ = (stream, out, len, spin, value);
        Err(not_built("choreo_tests::raw_spin_then_write"))
    }
    #[cfg(choreo_test_kernels)]
    {
        let _device = stream.bind_device()?;
        // SAFETY: the caller guarantees the memory; the stream is valid.
        let status = unsafe {
            ffi::choreo_test_spin_then_write(out, len, nanoseconds(spin), value, stream.as_raw())
        };
        choreo::check_cuda(status, "choreo_test_spin_then_write")
    }
}

/// Enqueues the gated write kernel on raw device memory, without any tracking.
///
/// # Safety
///
/// As for [`raw_spin_then_write`].
pub unsafe fn raw_wait_then_write(
    stream: &Stream,
    gate: &Gate,
    out: *mut u32,
    len: usize,
    value: u32,
) -> Result<()> {
    #[cfg(not(choreo_test_kernels))]
    {
        let _ = (stream, gate, out, len, value);
        Err(not_built("choreo_tests::raw_wait_then_write"))
    }
    #[cfg(choreo_test_kernels)]
    {
        let _device = stream.bind_device()?;
        // SAFETY: the caller guarantees the memory; the gate's memory is never freed.
        let status = unsafe {
            ffi::choreo_test_wait_then_write(
                gate.device_pointer(),
                out,
                len,
                nanoseconds(gate.timeout),
                value,
                stream.as_raw(),
            )
        };
        choreo::check_cuda(status, "choreo_test_wait_then_write")
    }
}

/// Enqueues the add-one kernel on raw device memory, without any tracking.
///
/// # Safety
///
/// As for [`raw_spin_then_write`].
pub unsafe fn raw_add_one(stream: &Stream, data: *mut u32, len: usize) -> Result<()> {
    #[cfg(not(choreo_test_kernels))]
    {
        let _ = (stream, data, len);
        Err(not_built("choreo_tests::raw_add_one"))
    }
    #[cfg(choreo_test_kernels)]
    {
        let _device = stream.bind_device()?;
        // SAFETY: the caller guarantees the memory; the stream is valid.
        let status = unsafe { ffi::choreo_test_add_one(data, len, stream.as_raw()) };
        choreo::check_cuda(status, "choreo_test_add_one")
    }
}

/// CUDA's host implementation of `__nv_cvt_float_to_fp8` (the reference for choreo's fp8
/// conversions); needs no GPU.
pub fn cuda_host_f32_to_fp8(value: f32, saturate: bool, format: Fp8Format) -> Result<u8> {
    #[cfg(not(choreo_test_kernels))]
    {
        let _ = (value, saturate, format);
        Err(not_built("choreo_tests::cuda_host_f32_to_fp8"))
    }
    #[cfg(choreo_test_kernels)]
    {
        // SAFETY: a pure host function taking and returning plain values.
        Ok(unsafe {
            ffi::choreo_test_host_f32_to_fp8(value, i32::from(saturate), format.selector())
        })
    }
}

/// CUDA's host conversion of an fp8 code to f32 (through `__half`); needs no GPU.
pub fn cuda_host_fp8_to_f32(code: u8, format: Fp8Format) -> Result<f32> {
    #[cfg(not(choreo_test_kernels))]
    {
        let _ = (code, format);
        Err(not_built("choreo_tests::cuda_host_fp8_to_f32"))
    }
    #[cfg(choreo_test_kernels)]
    {
        // SAFETY: a pure host function taking and returning plain values.
        Ok(unsafe { ffi::choreo_test_host_fp8_to_f32(code, format.selector()) })
    }
}

/// Checks that no destructor deferred an error (see `choreo::take_deferred_error`).
pub fn assert_no_deferred_error() {
    if let Some(error) = choreo::take_deferred_error() {
        panic!("a destructor deferred an error: {error}");
    }
}

/// A small xorshift generator for test data, seeded from the clock; the seed is printed so that
/// a failure can be reproduced.
pub struct Random(u64);

impl Random {
    /// A generator with a fresh seed, printed with `label`.
    pub fn fresh(label: &str) -> Random {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos());
        let seed = (nanos as u64) | 1;
        println!("{label}: random seed {seed:#x}");
        Random(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in [-1, 1).
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 / (1u32 << 23) as f32 - 1.0
    }

    /// `len` values uniform in [-1, 1).
    pub fn f32s(&mut self, len: usize) -> Vec<f32> {
        (0..len).map(|_| self.next_f32()).collect()
    }

    /// Uniform in `0..bound` (`bound` > 0).
    pub fn below(&mut self, bound: usize) -> usize {
        (self.next_u64() % bound as u64) as usize
    }
}

/// Wakes a parked thread.
pub struct ThreadWaker(pub std::thread::Thread);

impl std::task::Wake for ThreadWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

/// The waker of [`block_on`]: notes the wake-up and unparks the polling thread.
struct Notified {
    woken: AtomicBool,
    /// Set by the watchdog once the device has finished all work.
    device_idle: AtomicBool,
    thread: Thread,
}

impl Wake for Notified {
    fn wake(self: Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        self.thread.unpark();
    }
}

/// A minimal executor: polls on the current thread and parks until the future's waker is
/// called. Returns the output and the number of polls.
///
/// It checks the future's wake-ups without any deadline: once the future is pending, a
/// watchdog thread waits for the whole device (`cudaDeviceSynchronize` returns after the host
/// callbacks enqueued on streams have run, and the callback is what wakes a
/// [`choreo::Pending`]'s future). If the device is idle and the waker was never called, the
/// future missed its wake-up: panics, saying whether the future was complete anyway.
pub fn block_on<F: Future + ?Sized>(mut future: Pin<&mut F>) -> (F::Output, usize) {
    let notified = Arc::new(Notified {
        woken: AtomicBool::new(false),
        device_idle: AtomicBool::new(false),
        thread: thread::current(),
    });
    let waker = Waker::from(Arc::clone(&notified));
    let mut context = Context::from_waker(&waker);
    let mut watchdog = None;
    let mut polls = 0;
    loop {
        polls += 1;
        notified.woken.store(false, Ordering::SeqCst);
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return (output, polls);
        }
        if watchdog.is_none() {
            let device = choreo::Device::current().expect("the current device");
            let notified = Arc::clone(&notified);
            watchdog = Some(thread::spawn(move || {
                let synchronized = device.synchronize();
                notified.device_idle.store(true, Ordering::SeqCst);
                notified.thread.unpark();
                synchronized
            }));
        }
        while !notified.woken.load(Ordering::SeqCst) {
            if notified.device_idle.load(Ordering::SeqCst) && !notified.woken.load(Ordering::SeqCst)
            {
                let synchronized = watchdog.take().map(|watchdog| watchdog.join());
                let ready = future.as_mut().poll(&mut context).is_ready();
                panic!(
                    "the device finished all its work (synchronize: {synchronized:?}) but the \
                     future's waker was not called after poll {polls}; the future is {}",
                    if ready { "complete: a missing wake-up" } else { "still not complete" }
                );
            }
            thread::park();
        }
    }
}
