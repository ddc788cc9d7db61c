//! Cross-crate integration tests live in `tests/`. This library holds what they share:
//!
//! - [`device_tests!`] and [`TestDevice`]: one test body, written once, becomes two tests, `NAME::on_cpu`
//!   (run everywhere, CI included, on the CPU device) and `NAME::on_gpu` (`#[ignore = "needs a
//!   CUDA GPU"]`, run on CUDA device 0 by `--ignored` and `ci/bundle-gpu-tests`' `run-all`);
//! - the launchers of the hand-written test kernels, in two versions with one signature: CUDA
//!   (`kernels/test_kernels.cu`, built by `build.rs` when a CUDA toolkit is available) and CPU
//!   (`kernels/test_kernels_cpu.cpp`, always built). Each launcher runs the version of its
//!   stream's backend.
//!
//! The tracked launchers ([`spin_then_write`], [`wait_then_write`], [`add_one`], [`saxpy`],
//! [`f32_to_fp8`]) use the runtime's buffer access API exactly like generated kernel wrappers
//! do; the `raw_*` ones launch on raw device pointers without any tracking, for tests of
//! explicit synchronisation. A [`Gate`] holds kernels back until the test opens it, so tests
//! of "while the kernel is still running" do not depend on timing.
//! Without the CUDA kernels every launcher returns [`Error::NotBuilt`] for a CUDA stream, so GPU
//! tests that need them fail with a clear message instead of passing.
//!
//! Nothing here depends on how fast the device or the host is, so the tests pass unchanged
//! under compute-sanitizer's slowdown and on two shared cores: orderings are checked with
//! device-side evidence (gates that only the host opens, event and stream queries, event
//! timestamps compared with each other), waits for the device have no deadline but device-side
//! timeouts that report failure, and checks that need two kernels to run at the same time
//! first ask the device whether it runs kernels concurrently at all ([`concurrent_kernels`]).
//!
//! [`co`] holds the wrappers that `choreo-build` generates from `co/*.co` (the kernels of the
//! wrapper tests, `tests/wrappers.rs`, and of the compile-fail tests).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

use choreo::sys::{cudaError_t, cudaStream_t};
use choreo::{Backend, Device, DeviceBuffer, DeviceTensor, Error, Result, Stream};

/// `data` as a rank-1 device tensor, copied on the default stream (panics on failure: a test
/// helper).
pub fn upload<T: choreo::DeviceRepr>(data: &[T]) -> DeviceTensor<T, 1> {
    DeviceTensor::from_host(&Stream::default_stream(), data.into()).expect("upload")
}

/// The elements of a rank-1 device tensor, copied on the default stream (panics on failure).
pub fn download<T: choreo::DeviceRepr>(tensor: &DeviceTensor<T, 1>) -> Vec<T> {
    tensor.to_host(&Stream::default_stream()).expect("download").into_vec()
}

/// `true` when `build.rs` compiled the CUDA test kernels (`kernels/test_kernels.cu`). Their
/// CPU versions are always built.
pub const KERNELS_BUILT: bool = cfg!(choreo_test_kernels);

/// `true` when `build.rs` compiled the Choreo kernels of [`co`] for CUDA (else their wrappers
/// refuse CUDA streams).
pub const CO_KERNELS_ON_GPU: bool = cfg!(choreo_co_kernels_cuda);

/// `true` when `build.rs` compiled the Choreo kernels of [`co`] for the CPU (always, unless
/// a file has no CPU version).
pub const CO_KERNELS_ON_CPU: bool = cfg!(choreo_co_kernels_cpu);

/// The generated wrappers of `co/*.co`: one module per file (`co::seed`, `co::kinds`, …).
pub mod co {
    choreo::include_kernels!("co_kernels");
}

// ---------------------------------------------------------------------------------------------
// One test body, two devices
// ---------------------------------------------------------------------------------------------

/// Makes two tests of each test body named: `NAME::on_cpu`, run on [`Device::cpu`] by every
/// `cargo test` (CI included), and `NAME::on_gpu`, `#[ignore = "needs a CUDA GPU"]`, run on
/// CUDA device 0 with `--ignored` (as `ci/bundle-gpu-tests`' `run-all` does). The body is a
/// function of the same name taking a [`TestDevice`] (a module and a function may share a name:
/// they live in different namespaces):
///
/// ```ignore
/// choreo_tests::device_tests!(adds_one);
/// fn adds_one(device: &TestDevice) {
///     let stream = device.stream();
///     // ...
/// }
/// ```
///
/// The body creates its streams, tensors and gates on the device it is given; wrappers
/// without a stream parameter run on the process's default device, which each variant makes
/// sure is its own (see [`run_on_cpu`], [`run_on_gpu`]). The GPU variant fails with a message
/// saying why when there is no GPU or no CUDA build of the kernels: it never passes vacuously.
#[macro_export]
macro_rules! device_tests {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[test]
            fn on_cpu() {
                $crate::run_on_cpu(module_path!(), super::$name);
            }

            #[test]
            #[ignore = "needs a CUDA GPU"]
            fn on_gpu() {
                $crate::run_on_gpu(super::$name);
            }
        }
    )+};
}

/// Serialises the device tests of one test binary (each binary is a process of its own).
/// Several tests hold a kernel at a [`Gate`] while the host enqueues more work, and some
/// operations wait for running kernels (CUDA: the first launch of a lazily loaded kernel,
/// copies to or from pageable memory; both runtimes: freeing pinned memory, device-wide
/// synchronisation), which would turn one test's deliberate wait into another test's stall.
/// `CHOREO_TEST_PARALLEL=1` lifts the lock (to investigate such interference).
static DEVICE_TESTS: Mutex<()> = Mutex::new(());

/// The environment variable that marks a child process started by [`run_on_cpu`].
const CPU_CHILD_ENV: &str = "CHOREO_TESTS_CPU_CHILD";

/// The device one variant of a test runs on (see [`device_tests!`]), with helpers that create
/// streams, tensors and gates on it. Holding it serialises the device tests of the binary.
pub struct TestDevice {
    device: Device,
    _serialized: Option<MutexGuard<'static, ()>>,
}

impl TestDevice {
    fn enter(device: Device) -> TestDevice {
        let serialized = std::env::var_os("CHOREO_TEST_PARALLEL")
            .is_none()
            .then(|| DEVICE_TESTS.lock().unwrap_or_else(PoisonError::into_inner));
        TestDevice { device, _serialized: serialized }
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.device
    }

    /// `true` for the CPU variant.
    pub fn is_cpu(&self) -> bool {
        self.device.is_cpu()
    }

    /// A new (non-blocking) stream on the device.
    pub fn stream(&self) -> Stream {
        Stream::new_on_device(self.device).expect("a stream")
    }

    /// The device's legacy default stream.
    pub fn default_stream(&self) -> Stream {
        Stream::default_stream_on(self.device)
    }

    /// `data` as a rank-1 tensor of the device, copied on its default stream.
    pub fn upload<T: choreo::DeviceRepr>(&self, data: &[T]) -> DeviceTensor<T, 1> {
        DeviceTensor::from_host(&self.default_stream(), data.into()).expect("upload")
    }

    /// The elements of a rank-1 tensor, copied on the device's default stream.
    pub fn download<T: choreo::DeviceRepr>(&self, tensor: &DeviceTensor<T, 1>) -> Vec<T> {
        tensor.to_host(&self.default_stream()).expect("download").into_vec()
    }

    /// `len` zeroed elements of the device.
    pub fn zeroed<T: choreo::DeviceRepr>(&self, len: usize) -> DeviceBuffer<T> {
        DeviceBuffer::zeroed_on_device(self.device, len).expect("a zeroed buffer")
    }

    /// A zeroed tensor of the device.
    pub fn zeros<T: choreo::DeviceRepr, const R: usize>(
        &self,
        shape: [usize; R],
    ) -> DeviceTensor<T, R> {
        DeviceTensor::zeros_on_device(self.device, shape).expect("a zeroed tensor")
    }

    /// An event of the device.
    pub fn event(&self) -> choreo::Event {
        choreo::Event::new_on_device(self.device).expect("an event")
    }

    /// A closed [`Gate`] for kernels of the device.
    pub fn gate(&self) -> Gate {
        Gate::closed(self.device).expect("a gate")
    }

    /// Waits for all work of the device.
    pub fn synchronize(&self) {
        self.device.synchronize().expect("device synchronisation");
    }

    /// [`block_on`] with this device's watchdog.
    pub fn block_on<F: Future + ?Sized>(&self, future: Pin<&mut F>) -> (F::Output, usize) {
        block_on(self.device, future)
    }
}

/// The CPU variant of a test (see [`device_tests!`]): runs `body` on [`Device::cpu`].
///
/// Wrappers without a stream parameter run on the process's default device, so the body needs
/// the CPU to be it. It is where there is no usable GPU (CI) or with `CHOREO_DEVICE=cpu`; on a
/// machine with a GPU the test runs itself again in a child process with `CHOREO_DEVICE=cpu`
/// (the default device is chosen once per process) and passes when the child passed. `module`
/// is the test's module path (`binary::NAME`).
pub fn run_on_cpu(module: &str, body: fn(&TestDevice)) {
    if !CO_KERNELS_ON_CPU {
        panic!(
            "the CPU versions of the Choreo test kernels (co/*.co) were not built; the wrappers \
             refuse CPU streams"
        );
    }
    match Device::default_device() {
        Ok(device) if device.is_cpu() => body(&TestDevice::enter(Device::cpu())),
        other => {
            if std::env::var_os(CPU_CHILD_ENV).is_some() {
                panic!("the default device is {other:?}, not the CPU, with CHOREO_DEVICE=cpu");
            }
            // `binary::NAME` → the test's name `NAME::on_cpu`.
            let name = module.split_once("::").map_or(module, |(_, name)| name);
            run_in_cpu_child(&format!("{name}::on_cpu"));
        }
    }
}

/// Runs test `name` of this binary in a child process whose default device is the CPU.
fn run_in_cpu_child(name: &str) {
    let binary = std::env::current_exe().expect("the test binary's path");
    println!("the default device is not the CPU: running {name} with CHOREO_DEVICE=cpu");
    let output = std::process::Command::new(binary)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("CHOREO_DEVICE", "cpu")
        .env(CPU_CHILD_ENV, "1")
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{name} failed with CHOREO_DEVICE=cpu ({})",
        output.status
    );
}

/// The GPU variant of a test (see [`device_tests!`]): runs `body` on CUDA device 0, which must
/// be the default device (wrappers without a stream parameter run there). Fails, saying why,
/// without a GPU, with `CHOREO_DEVICE=cpu`, or without the CUDA build of the kernels.
pub fn run_on_gpu(body: fn(&TestDevice)) {
    let device = match Device::cuda(0) {
        Ok(device) => device,
        Err(error) => panic!("this test needs a CUDA GPU: {error}"),
    };
    match Device::default_device() {
        Ok(default) if default.backend() == Backend::Cuda => {}
        Ok(default) => panic!(
            "this test needs a CUDA GPU as the default device (wrappers without a stream \
             parameter run there), but the default device is {default} (CHOREO_DEVICE={:?})",
            std::env::var_os("CHOREO_DEVICE").unwrap_or_default()
        ),
        Err(error) => panic!("this test needs a CUDA GPU: {error}"),
    }
    if !CO_KERNELS_ON_GPU || !KERNELS_BUILT {
        panic!(
            "the test kernels were not compiled for CUDA (stub build: no nvcc when choreo-tests \
             was built); the wrappers refuse CUDA streams"
        );
    }
    device.make_current().expect("CUDA device 0 made current");
    let test = TestDevice::enter(device);
    // Loads the hand-written kernels before a test holds one at a gate (see the function).
    static WARM_UP: OnceLock<Result<(), String>> = OnceLock::new();
    let warm_up = WARM_UP.get_or_init(|| warm_up_kernels(device).map_err(|e| e.to_string()));
    if let Err(error) = warm_up {
        panic!("the test kernels do not run: {error}");
    }
    body(&test);
}

// ---------------------------------------------------------------------------------------------
// The hand-written test kernels
// ---------------------------------------------------------------------------------------------

/// The signatures shared by a launcher's CUDA and CPU versions.
type SpinFn = unsafe extern "C" fn(*mut u32, usize, u64, u32, cudaStream_t) -> cudaError_t;
type WaitFn =
    unsafe extern "C" fn(*mut u32, *mut u32, usize, u64, u32, cudaStream_t) -> cudaError_t;
type RendezvousFn = unsafe extern "C" fn(*mut u32, u32, u64, cudaStream_t) -> cudaError_t;
type TrapFn = unsafe extern "C" fn(cudaStream_t) -> cudaError_t;
type AddOneFn = unsafe extern "C" fn(*mut u32, usize, cudaStream_t) -> cudaError_t;
type SaxpyFn = unsafe extern "C" fn(f32, *const f32, *mut f32, usize, cudaStream_t) -> cudaError_t;
type Fp8Fn = unsafe extern "C" fn(*const f32, *mut u8, usize, i32, cudaStream_t) -> cudaError_t;

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

/// The CPU versions (`kernels/test_kernels_cpu.cpp`; they return the CPU runtime's `int`
/// status, which has CUDA's numbers and `cudaError_t`'s layout).
mod cpu_ffi {
    use choreo::sys::{cudaError_t, cudaStream_t};

    unsafe extern "C" {
        pub fn choreo_test_cpu_spin_then_write(
            out: *mut u32,
            n: usize,
            spin_ns: u64,
            value: u32,
            stream: cudaStream_t,
        ) -> cudaError_t;
        pub fn choreo_test_cpu_wait_then_write(
            gate: *mut u32,
            out: *mut u32,
            n: usize,
            timeout_ns: u64,
            value: u32,
            stream: cudaStream_t,
        ) -> cudaError_t;
        pub fn choreo_test_cpu_rendezvous(
            words: *mut u32,
            me: u32,
            timeout_ns: u64,
            stream: cudaStream_t,
        ) -> cudaError_t;
        pub fn choreo_test_cpu_trap(stream: cudaStream_t) -> cudaError_t;
        pub fn choreo_test_cpu_add_one(
            data: *mut u32,
            n: usize,
            stream: cudaStream_t,
        ) -> cudaError_t;
        pub fn choreo_test_cpu_saxpy(
            a: f32,
            x: *const f32,
            y: *mut f32,
            n: usize,
            stream: cudaStream_t,
        ) -> cudaError_t;
        pub fn choreo_test_cpu_f32_to_fp8_device(
            input: *const f32,
            output: *mut u8,
            n: usize,
            e5m2: i32,
            stream: cudaStream_t,
        ) -> cudaError_t;
    }
}

/// `Some(ffi::NAME)` when the CUDA kernels were built, else `None`.
macro_rules! cuda_version {
    ($name:ident) => {{
        #[cfg(choreo_test_kernels)]
        {
            Some(ffi::$name as _)
        }
        #[cfg(not(choreo_test_kernels))]
        {
            None
        }
    }};
}

/// A launcher for the backend of `stream`: the CPU version, or the CUDA one (when built, else
/// [`Error::NotBuilt`] naming `function`). Also makes the stream's device current for the
/// launch.
fn version_for<F>(
    stream: &Stream,
    function: &'static str,
    cpu: F,
    cuda: Option<F>,
) -> Result<(Backend, F, choreo::DeviceGuard)> {
    let backend = stream.backend()?;
    let launcher = match backend {
        Backend::Cpu => cpu,
        Backend::Cuda => cuda.ok_or(Error::NotBuilt { function })?,
    };
    Ok((backend, launcher, stream.bind_device()?))
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
    fn selector(self) -> i32 {
        match self {
            Fp8Format::E4M3 => 0,
            Fp8Format::E5M2 => 1,
        }
    }
}

/// Enqueues on `stream` a kernel that waits `spin` (thread 0 of each block, by the device's
/// clock) and then writes `value` to every element of `out`.
pub fn spin_then_write(
    stream: &Stream,
    out: &mut DeviceBuffer<u32>,
    spin: Duration,
    value: u32,
) -> Result<()> {
    const NAME: &str = "choreo_tests::spin_then_write";
    let (backend, launch, _device) = version_for::<SpinFn>(
        stream,
        NAME,
        cpu_ffi::choreo_test_cpu_spin_then_write,
        cuda_version!(choreo_test_spin_then_write),
    )?;
    let len = out.len();
    let pointer = out.device_ptr_for_write(stream)?;
    // SAFETY: `pointer` addresses `len` u32 of `out`, which stays alive until the kernel has
    // finished because the write is recorded below; the stream is valid and of the backend of
    // the launcher.
    let status = unsafe { launch(pointer, len, nanoseconds(spin), value, stream.as_raw()) };
    let recorded = out.record_write(stream);
    choreo::check_status(backend, status, NAME)?;
    recorded
}

/// How long a gated kernel waits for its gate before it gives up (and reports it). A hang
/// guard, not a measure of anything: a kernel only waits this long when the host blocked on it
/// (which the test then reports as a failure, see [`Gate::timed_out`]).
pub const GATE_TIMEOUT: Duration = Duration::from_secs(60);

/// Words that kernels poll and the host writes (gates, rendezvous): for a GPU, mapped pinned
/// memory; for the CPU, host memory.
///
/// They are never freed while the process runs (freeing pinned memory waits for every running
/// kernel, and a kernel may still poll a word). GPU words come from slabs; at exit, a handler
/// sets every GPU word (so no kernel waits any more), waits for the device and frees the slabs,
/// so compute-sanitizer's leak check finds nothing. CPU words are leaked (a few bytes per gate).
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

    /// `count` (at most a slab's) fresh zeroed words for kernels of `device`, never handed out
    /// again.
    pub(super) fn words(device: Device, count: usize) -> Result<*mut AtomicU32> {
        assert!(count <= SLAB_WORDS);
        if device.is_cpu() {
            let words: &'static mut [AtomicU32] =
                Box::leak((0..count).map(|_| AtomicU32::new(0)).collect());
            return Ok(words.as_mut_ptr());
        }
        let mut slabs = SLABS.lock().unwrap_or_else(PoisonError::into_inner);
        if slabs.used + count > SLAB_WORDS {
            let _bound = device.bind()?;
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

/// Two words that gated kernels poll: `[open, timed_out]` (mapped pinned memory for a GPU,
/// host memory for the CPU). The host opens the gate; a kernel that waited [`GATE_TIMEOUT`] in
/// vain proceeds and sets `timed_out`. Dropping the gate opens it (so a failing test does not
/// leave kernels waiting).
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
    /// A closed gate for kernels of `device`, whose kernels give up after [`GATE_TIMEOUT`].
    pub fn closed(device: Device) -> Result<Gate> {
        Gate::closed_for(device, GATE_TIMEOUT)
    }

    /// A closed gate for kernels of `device`, whose kernels give up after `timeout`: for
    /// probes and controls, whose gate may time out in some environments without that being a
    /// failure.
    pub fn closed_for(device: Device, timeout: Duration) -> Result<Gate> {
        Ok(Gate { words: mapped::words(device, 2)?, timeout })
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

/// The answers of a per-process probe, one per backend.
type Answers = [OnceLock<Result<bool, String>>; 2];

fn answer_for(answers: &Answers, device: Device) -> &OnceLock<Result<bool, String>> {
    &answers[usize::from(device.is_cpu())]
}

/// Whether `device`, in this process, runs kernels of two streams at the same time: two
/// hand-written kernels on two fresh streams try to meet (each waits for the other, with a
/// device-side timeout). Asked once per process and backend; the answer is printed.
///
/// Checks that two streams of a kernel call overlap need this: on a device that runs one
/// kernel at a time (compute-sanitizer serialises kernels) they cannot hold, and are skipped.
/// The CPU runs each stream on a thread of its own, so its answer is yes unless the host
/// did not schedule both threads within the timeout.
pub fn concurrent_kernels(device: Device) -> Result<bool> {
    static ANSWERS: Answers = [OnceLock::new(), OnceLock::new()];
    asked_once(
        answer_for(&ANSWERS, device),
        device,
        rendezvous,
        [
            "the device runs one kernel at a time (as under compute-sanitizer): overlap checks \
             are skipped in this process",
            "the device runs kernels of two streams concurrently",
        ],
        "the rendezvous of two kernels",
    )
}

/// The answer of a per-process probe of the device, asked the first time only and printed
/// (`said[answer as usize]`, or that `what` failed).
fn asked_once(
    answer: &OnceLock<Result<bool, String>>,
    device: Device,
    probe: fn(Device) -> Result<bool>,
    said: [&str; 2],
    what: &str,
) -> Result<bool> {
    let answer = answer.get_or_init(|| {
        let answer = probe(device).map_err(|error| error.to_string());
        match &answer {
            Ok(yes) => println!("{device}: {}", said[usize::from(*yes)]),
            Err(error) => println!("{device}: {what} failed: {error}"),
        }
        answer
    });
    answer.clone().map_err(Error::InvalidArgument)
}

fn rendezvous(device: Device) -> Result<bool> {
    let words = mapped::words(device, 4)?;
    let streams = [Stream::new_on_device(device)?, Stream::new_on_device(device)?];
    for (me, stream) in (0..).zip(&streams) {
        let (backend, launch, _device) = version_for::<RendezvousFn>(
            stream,
            "choreo_tests::concurrent_kernels",
            cpu_ffi::choreo_test_cpu_rendezvous,
            cuda_version!(choreo_test_rendezvous),
        )?;
        // SAFETY: `words` are four words of memory for `device`'s kernels that are never freed
        // while the process runs; the stream is valid and of the launcher's backend.
        let status =
            unsafe { launch(words.cast(), me, nanoseconds(RENDEZVOUS_TIMEOUT), stream.as_raw()) };
        choreo::check_status(backend, status, "choreo_test_rendezvous")?;
    }
    for stream in &streams {
        stream.synchronize()?;
    }
    // SAFETY: as above; the kernels have finished.
    let met = |side: usize| unsafe { &*words.add(2 + side) }.load(Ordering::SeqCst) != 0;
    Ok(met(0) && met(1))
}

/// How long the gated kernel of [`gated_kernels_hold_other_work`]' probe waits for its gate.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Whether, in this process, a kernel of `device` held at a gate holds back work that the
/// runtime lets run beside it: a kernel is held at a gate (with a short device-side timeout)
/// on one stream, the add-one kernel is launched on another and waited for, and the answer is
/// whether the gate timed out meanwhile. Asked once per process and backend; the answer is
/// printed.
///
/// On a GPU itself the add-one finishes at once. Under compute-sanitizer it waits for the
/// gated kernel (observed on an H200 with compute-sanitizer 2025.3 under memcheck and
/// racecheck, although two kernels of one function do run concurrently there, see
/// [`concurrent_kernels`]), and so do other calls. On the CPU the other stream's thread runs
/// it. Tests that check "still running while the gate is closed" need the answer: where gated
/// kernels hold other work, they open each gate right after its kernel is enqueued, skip the
/// "still running" checks (saying so) and check everything else. Raw launches only, so the
/// answer says nothing about the runtime under test.
pub fn gated_kernels_hold_other_work(device: Device) -> Result<bool> {
    static ANSWERS: Answers = [OnceLock::new(), OnceLock::new()];
    asked_once(
        answer_for(&ANSWERS, device),
        device,
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

fn gated_kernel_probe(device: Device) -> Result<bool> {
    let (held, other) = (Stream::new_on_device(device)?, Stream::new_on_device(device)?);
    let gate = Gate::closed_for(device, PROBE_TIMEOUT)?;
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

/// Launches a kernel that executes a trap instruction. The kernel fails, and with it the
/// device's runtime: every later call of the process on that backend fails (a "sticky"
/// error, on the CPU as on a GPU). Only for a test process of its own.
pub fn trap(stream: &Stream) -> Result<()> {
    const NAME: &str = "choreo_tests::trap";
    let (backend, launch, _device) = version_for::<TrapFn>(
        stream,
        NAME,
        cpu_ffi::choreo_test_cpu_trap,
        cuda_version!(choreo_test_trap),
    )?;
    // SAFETY: a kernel without parameters on a valid stream of the launcher's backend.
    let status = unsafe { launch(stream.as_raw()) };
    choreo::check_status(backend, status, NAME)
}

/// Enqueues on `stream` a kernel that waits until `gate` is opened and then writes `value` to
/// every element of `out`.
pub fn wait_then_write(
    stream: &Stream,
    gate: &Gate,
    out: &mut DeviceBuffer<u32>,
    value: u32,
) -> Result<()> {
    const NAME: &str = "choreo_tests::wait_then_write";
    let (backend, launch, _device) = version_for::<WaitFn>(
        stream,
        NAME,
        cpu_ffi::choreo_test_cpu_wait_then_write,
        cuda_version!(choreo_test_wait_then_write),
    )?;
    let len = out.len();
    let pointer = out.device_ptr_for_write(stream)?;
    // SAFETY: as in `spin_then_write`; the gate's memory is never freed.
    let status = unsafe {
        launch(
            gate.device_pointer(),
            pointer,
            len,
            nanoseconds(gate.timeout),
            value,
            stream.as_raw(),
        )
    };
    let recorded = out.record_write(stream);
    choreo::check_status(backend, status, NAME)?;
    recorded
}

/// Launches every test kernel of `device` once and waits for them.
///
/// With CUDA's default lazy module loading, the first launch of a kernel loads it, and loading
/// can wait for kernels that are already running; a test that holds a kernel at a [`Gate`]
/// would then stall the first launch of another kernel until the gate opens (observed on an
/// H200). Warming up before any gate closes avoids that. (The CPU loads nothing lazily.)
pub fn warm_up_kernels(device: Device) -> Result<()> {
    let stream = Stream::new_on_device(device)?;
    let gate = Gate::closed(device)?;
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
    {
        let (backend, launch, _device) = version_for::<RendezvousFn>(
            &stream,
            "choreo_tests::warm_up_kernels",
            cpu_ffi::choreo_test_cpu_rendezvous,
            cuda_version!(choreo_test_rendezvous),
        )?;
        let scratch = mapped::words(device, 4)?;
        // SAFETY: as in `rendezvous`; a zero timeout returns at once.
        let status = unsafe { launch(scratch.cast(), 0, 0, stream.as_raw()) };
        choreo::check_status(backend, status, "choreo_test_rendezvous")?;
    }
    let values = words.to_vec(&stream)?;
    if values.iter().any(|&value| value != 3) {
        return Err(Error::InvalidArgument(format!("warm-up kernels computed {:?}", &values[..4])));
    }
    Ok(())
}

/// Enqueues on `stream` a kernel that adds one to every element of `data`.
pub fn add_one(stream: &Stream, data: &mut DeviceBuffer<u32>) -> Result<()> {
    const NAME: &str = "choreo_tests::add_one";
    let (backend, launch, _device) = version_for::<AddOneFn>(
        stream,
        NAME,
        cpu_ffi::choreo_test_cpu_add_one,
        cuda_version!(choreo_test_add_one),
    )?;
    let len = data.len();
    let pointer = data.device_ptr_for_write(stream)?;
    // SAFETY: as in `spin_then_write`.
    let status = unsafe { launch(pointer, len, stream.as_raw()) };
    let recorded = data.record_write(stream);
    choreo::check_status(backend, status, NAME)?;
    recorded
}

/// Enqueues `y = a * x + y` on `stream`.
pub fn saxpy(
    stream: &Stream,
    a: f32,
    x: &DeviceBuffer<f32>,
    y: &mut DeviceBuffer<f32>,
) -> Result<()> {
    const NAME: &str = "choreo_tests::saxpy";
    if x.len() != y.len() {
        return Err(Error::Length { expected: y.len(), got: x.len() });
    }
    let (backend, launch, _device) = version_for::<SaxpyFn>(
        stream,
        NAME,
        cpu_ffi::choreo_test_cpu_saxpy,
        cuda_version!(choreo_test_saxpy),
    )?;
    let len = y.len();
    let x_pointer = x.device_ptr_for_read(stream)?;
    let y_pointer = y.device_ptr_for_write(stream)?;
    // SAFETY: both pointers address `len` f32 of buffers whose accesses are recorded below,
    // so they stay alive until the kernel has finished; `x` and `y` are distinct buffers
    // (one is borrowed shared, the other exclusively).
    let status = unsafe { launch(a, x_pointer, y_pointer, len, stream.as_raw()) };
    let read = x.record_read(stream);
    let written = y.record_write(stream);
    choreo::check_status(backend, status, NAME)?;
    read.and(written)
}

/// Enqueues on `stream` the device conversion of `input` into `output` (saturating): CUDA's
/// `__nv_cvt_float_to_fp8` on a GPU, the CPU runtime's version of it on the CPU.
pub fn f32_to_fp8(
    stream: &Stream,
    format: Fp8Format,
    input: &DeviceBuffer<f32>,
    output: &mut DeviceBuffer<u8>,
) -> Result<()> {
    const NAME: &str = "choreo_tests::f32_to_fp8";
    if input.len() != output.len() {
        return Err(Error::Length { expected: output.len(), got: input.len() });
    }
    let (backend, launch, _device) = version_for::<Fp8Fn>(
        stream,
        NAME,
        cpu_ffi::choreo_test_cpu_f32_to_fp8_device,
        cuda_version!(choreo_test_f32_to_fp8_device),
    )?;
    let len = output.len();
    let input_pointer = input.device_ptr_for_read(stream)?;
    let output_pointer = output.device_ptr_for_write(stream)?;
    // SAFETY: as in `saxpy`.
    let status =
        unsafe { launch(input_pointer, output_pointer, len, format.selector(), stream.as_raw()) };
    let read = input.record_read(stream);
    let written = output.record_write(stream);
    choreo::check_status(backend, status, NAME)?;
    read.and(written)
}

/// Enqueues the gated write kernel on raw device memory, without any tracking.
///
/// # Safety
///
/// `out` must point to `len` writable `u32` of memory of the stream's device that stays
/// allocated until the kernel has finished.
pub unsafe fn raw_wait_then_write(
    stream: &Stream,
    gate: &Gate,
    out: *mut u32,
    len: usize,
    value: u32,
) -> Result<()> {
    const NAME: &str = "choreo_tests::raw_wait_then_write";
    let (backend, launch, _device) = version_for::<WaitFn>(
        stream,
        NAME,
        cpu_ffi::choreo_test_cpu_wait_then_write,
        cuda_version!(choreo_test_wait_then_write),
    )?;
    // SAFETY: the caller guarantees the memory; the gate's memory is never freed.
    let status = unsafe {
        launch(gate.device_pointer(), out, len, nanoseconds(gate.timeout), value, stream.as_raw())
    };
    choreo::check_status(backend, status, NAME)
}

/// Enqueues the add-one kernel on raw device memory, without any tracking.
///
/// # Safety
///
/// As for [`raw_wait_then_write`].
pub unsafe fn raw_add_one(stream: &Stream, data: *mut u32, len: usize) -> Result<()> {
    const NAME: &str = "choreo_tests::raw_add_one";
    let (backend, launch, _device) = version_for::<AddOneFn>(
        stream,
        NAME,
        cpu_ffi::choreo_test_cpu_add_one,
        cuda_version!(choreo_test_add_one),
    )?;
    // SAFETY: the caller guarantees the memory; the stream is valid.
    let status = unsafe { launch(data, len, stream.as_raw()) };
    choreo::check_status(backend, status, NAME)
}

/// CUDA's host implementation of `__nv_cvt_float_to_fp8` (the reference for choreo's fp8
/// conversions); needs nvcc at build time, no GPU.
pub fn cuda_host_f32_to_fp8(value: f32, saturate: bool, format: Fp8Format) -> Result<u8> {
    #[cfg(not(choreo_test_kernels))]
    {
        let _ = (value, saturate, format);
        Err(Error::NotBuilt { function: "choreo_tests::cuda_host_f32_to_fp8" })
    }
    #[cfg(choreo_test_kernels)]
    {
        // SAFETY: a pure host function taking and returning plain values.
        Ok(unsafe {
            ffi::choreo_test_host_f32_to_fp8(value, i32::from(saturate), format.selector())
        })
    }
}

/// CUDA's host conversion of an fp8 code to f32 (through `__half`); needs nvcc at build time,
/// no GPU.
pub fn cuda_host_fp8_to_f32(code: u8, format: Fp8Format) -> Result<f32> {
    #[cfg(not(choreo_test_kernels))]
    {
        let _ = (code, format);
        Err(Error::NotBuilt { function: "choreo_tests::cuda_host_fp8_to_f32" })
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
/// watchdog thread waits for the whole of `device` (`cudaDeviceSynchronize`, and the CPU
/// runtime's, return after the host callbacks enqueued on streams have run, and the callback is
/// what wakes a [`choreo::Pending`]'s future). If the device is idle and the waker was never
/// called, the future missed its wake-up: panics, saying whether the future was complete
/// anyway.
pub fn block_on<F: Future + ?Sized>(device: Device, mut future: Pin<&mut F>) -> (F::Output, usize) {
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
