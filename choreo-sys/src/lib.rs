//! Raw, hand-written FFI bindings to the subset of the CUDA runtime API (cudart 12.4 and later,
//! and 13.x) that choreo uses, linked statically against `libcudart_static.a`.
//!
//! Everything here has the C name and the C signature of `cuda_runtime_api.h` /
//! `driver_types.h`, so CUDA documentation applies unchanged. This crate is not meant to be used
//! directly: the `choreo` crate wraps it in a safe API.
//!
//! # Binding choices
//!
//! - C enums (`cudaError_t`, `cudaMemcpyKind`, `cudaDeviceAttr`) are `#[repr(transparent)]` `i32`
//!   newtypes with associated consts, never Rust enums: the runtime may return values that this
//!   crate does not know, and an unknown value in a Rust enum would be undefined behaviour.
//! - Every enumerator of `enum cudaError` and `enum cudaDeviceAttr`, and the whole
//!   `struct cudaDeviceProp`, are generated from the CUDA 13.0 headers by `tools/generate.py`;
//!   the size, alignment and every field offset of `cudaDeviceProp` are asserted at compile time
//!   against the layout measured with the C compiler.
//! - Symbol names: in CUDA 13.0 `cudaGetDeviceProperties` and `cudaEventElapsedTime` are real
//!   exported symbols, and the per-thread-default-stream renames (`_ptds`/`_ptsz`) apply only
//!   when `CUDA_API_PER_THREAD_DEFAULT_STREAM` is defined, which we do not do. Every function
//!   therefore binds its plain name; use [`cudaStreamPerThread`] explicitly where per-thread
//!   default stream semantics are wanted.
//!
//! # CUDA 12 and CUDA 13
//!
//! The build script links the runtime of the toolkit it finds when that is CUDA 12.4 or later,
//! or 13.x. Between the two majors, every declaration bound here is the same (checked against
//! the CUDA 12.4 and 12.8 headers: the functions' prototypes, the flags, `cudaMemcpyKind`, and
//! the values of every `cudaError` enumerator and of every `cudaDeviceAttr` enumerator present
//! in both) except one: CUDA 12's `cuda_runtime_api.h` maps `cudaGetDeviceProperties` to the
//! symbol `cudaGetDeviceProperties_v2`, which fills CUDA 12's `struct cudaDeviceProp` (1032
//! bytes, with fields such as `clockRate` that CUDA 13 removed). A CUDA 12 build
//! (`--cfg choreo_sys_cuda12`) therefore binds [`cudaGetDeviceProperties`] to that symbol and
//! [`cudaDeviceProp`] is CUDA 12's layout (`src/generated_cuda12.rs`, generated and
//! layout-checked the same way); `name`, `major`, `minor`, `totalGlobalMem`, … are in both.
//! Code that must build with either major reads fields present in both, or, better, asks
//! [`cudaDeviceGetAttribute`]. The attributes that CUDA 13 added (e.g.
//! `cudaDevAttrHostNumaMemoryPoolsSupported`) return `cudaErrorInvalidValue` from a CUDA 12
//! runtime; the two that CUDA 13 renamed to `cudaDevAttrReserved*` keep their values.
//! [`CUDART_VERSION`] is the linked toolkit's.
//!
//! # Builds without a CUDA toolkit
//!
//! The build script finds the toolkit with `choreo-toolkit` (the discovery that `choreo-build`
//! uses too: `NVCC`, `CUDA_HOME`/`CUDA_PATH`, `nvcc` on `PATH`, the pip wheels of `python3`, the
//! `ci/install-cuda` cache) and links its `libcudart_static` with `dl`, `rt` and `pthread`; it is
//! the only crate that links the runtime. When it finds no toolkit, one that cannot be used, or
//! one that is not CUDA 13.x (or `CHOREO_SYS_NO_CUDART=1`, or on docs.rs), it warns once and
//! builds the crate with `--cfg choreo_sys_no_cudart`: every function keeps its signature but is a Rust
//! stub that writes nothing and returns [`cudaError_t::cudaErrorStubLibrary`], so `cargo check`,
//! clippy, docs and GPU-free tests work everywhere. [`CUDART_LINKED`] says which build this is,
//! and [`STUB_REASON`] why it is a stub build; `cudaGetErrorString(cudaErrorStubLibrary)` says
//! it too ([`STUB_LIBRARY_MESSAGE`]), since cargo hides the build-script warnings of
//! dependencies that are not part of the workspace.
//!
//! The toolkit root (headers, `libcudart_static.a`) is `CUDA_HOME`/`CUDA_PATH` when set, else
//! that of `NVCC`'s real location (or, for a wrapper outside any toolkit, of the next toolkit
//! found): the same root `choreo-build` compiles the kernels against.
//!
//! Only CUDA 12.4 to 13.x is linked (see above); another version gives a stub build whose
//! warning names the version found and the versions supported.
//!
//! # Build-script metadata
//!
//! The package sets `links = "cudart"`, so the build scripts of direct dependents see
//! `DEP_CUDART_LINKED` (`1` or `0`) and, when a toolkit was found, `DEP_CUDART_ROOT` (toolkit
//! root), `DEP_CUDART_INCLUDE` (its `include` directory), `DEP_CUDART_LIB` (the directory holding
//! `libcudart_static.a` for the target) and `DEP_CUDART_VERSION` (`CUDART_VERSION`, e.g. 13000
//! or 12040).
//!
//! # Checking the bindings
//!
//! `tests/no_gpu.rs` runs anywhere; `tests/gpu.rs` (`--ignored`) needs a GPU and cross-checks
//! `cudaDeviceProp` fields against `cudaDeviceGetAttribute`; `--features bindgen` (needs libclang)
//! generates bindings from the headers and `tests/bindgen_matches.rs` checks every function
//! signature, enumerator, flag and `cudaDeviceProp` field against them (with a CUDA 13 toolkit:
//! CUDA 12's header declares `cudaGetDeviceProperties` through a macro, which bindgen does not
//! follow; the CUDA 12 bindings were compared with the CUDA 12.4 and 12.8 headers by hand, see
//! "CUDA 12 and CUDA 13" above, and `tests/no_gpu.rs` runs in CI's CUDA 12 job).
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]

use core::ffi::{CStr, c_char, c_float, c_int, c_uint, c_void};
use core::fmt;

mod generated;
#[cfg(choreo_sys_cuda12)]
mod generated_cuda12;

#[cfg(not(choreo_sys_cuda12))]
pub use generated::cudaDeviceProp;
pub use generated::{ALL_DEVICE_ATTRS, ALL_ERRORS};
#[cfg(choreo_sys_cuda12)]
pub use generated_cuda12::cudaDeviceProp;

/// `CUDART_VERSION` of the toolkit linked (`1000 * major + 10 * minor`, e.g. 13000 or 12040);
/// in a stub build that of the CUDA 13.0 headers the bindings were generated from.
pub const CUDART_VERSION: c_int = match parse_version(env!("CHOREO_SYS_CUDART_VERSION")) {
    0 => generated::CUDART_VERSION,
    linked => linked,
};

/// The decimal number `text` (as the build script writes it); 0 for anything else (a stub
/// build writes nothing).
const fn parse_version(text: &str) -> c_int {
    let bytes = text.as_bytes();
    let mut value: c_int = 0;
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() || value > c_int::MAX / 10 - 1 {
            return 0;
        }
        value = value * 10 + (bytes[i] - b'0') as c_int;
        i += 1;
    }
    value
}

/// `true` when `libcudart_static` is linked; `false` in a stub build (see the crate docs).
pub const CUDART_LINKED: bool = !cfg!(choreo_sys_no_cudart);

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

/// CUDA runtime status code (`cudaError_t`, i.e. `enum cudaError`).
///
/// The named codes are associated consts with the values of `driver_types.h`, e.g.
/// [`cudaError_t::cudaSuccess`]. Values outside that list can occur and are kept as they are.
#[repr(transparent)]
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct cudaError_t(pub i32);

impl cudaError_t {
    /// `true` for [`cudaError_t::cudaSuccess`].
    pub const fn is_success(self) -> bool {
        self.0 == Self::cudaSuccess.0
    }
}

/// Direction of a memory copy (`enum cudaMemcpyKind`).
#[repr(transparent)]
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct cudaMemcpyKind(pub i32);

impl cudaMemcpyKind {
    /// Host -> Host.
    pub const cudaMemcpyHostToHost: Self = Self(0);
    /// Host -> Device.
    pub const cudaMemcpyHostToDevice: Self = Self(1);
    /// Device -> Host.
    pub const cudaMemcpyDeviceToHost: Self = Self(2);
    /// Device -> Device.
    pub const cudaMemcpyDeviceToDevice: Self = Self(3);
    /// Direction inferred from the pointer values; requires unified virtual addressing.
    pub const cudaMemcpyDefault: Self = Self(4);

    /// Short alias of [`cudaMemcpyKind::cudaMemcpyHostToHost`].
    pub const HostToHost: Self = Self::cudaMemcpyHostToHost;
    /// Short alias of [`cudaMemcpyKind::cudaMemcpyHostToDevice`].
    pub const HostToDevice: Self = Self::cudaMemcpyHostToDevice;
    /// Short alias of [`cudaMemcpyKind::cudaMemcpyDeviceToHost`].
    pub const DeviceToHost: Self = Self::cudaMemcpyDeviceToHost;
    /// Short alias of [`cudaMemcpyKind::cudaMemcpyDeviceToDevice`].
    pub const DeviceToDevice: Self = Self::cudaMemcpyDeviceToDevice;
    /// Short alias of [`cudaMemcpyKind::cudaMemcpyDefault`].
    pub const Default: Self = Self::cudaMemcpyDefault;
}

/// Device attribute selector for [`cudaDeviceGetAttribute`] (`enum cudaDeviceAttr`); every
/// enumerator of the header is an associated const, e.g.
/// [`cudaDeviceAttr::cudaDevAttrComputeCapabilityMajor`].
#[repr(transparent)]
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct cudaDeviceAttr(pub i32);

/// Opaque CUDA stream object; only ever used behind [`cudaStream_t`].
#[repr(C)]
pub struct CUstream_st {
    _private: [u8; 0],
}

/// Opaque CUDA event object; only ever used behind [`cudaEvent_t`].
#[repr(C)]
pub struct CUevent_st {
    _private: [u8; 0],
}

/// CUDA stream handle. The null pointer is the legacy default stream.
pub type cudaStream_t = *mut CUstream_st;

/// CUDA event handle.
pub type cudaEvent_t = *mut CUevent_st;

/// Host function enqueued with [`cudaLaunchHostFunc`]; it must not call CUDA.
pub type cudaHostFn_t = Option<unsafe extern "C" fn(userData: *mut c_void)>;

/// 16-byte device UUID (`struct CUuuid_st`).
#[repr(C)]
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct CUuuid_st {
    /// The UUID bytes.
    pub bytes: [c_char; 16],
}

/// 16-byte device UUID (`cudaUUID_t`).
pub type cudaUUID_t = CUuuid_st;

impl cudaDeviceProp {
    /// A value with every field zero, to be filled by [`cudaGetDeviceProperties`].
    pub fn zeroed() -> Self {
        // SAFETY: cudaDeviceProp is a repr(C) struct made only of integers and arrays of
        // integers (c_char, c_int, c_uint, usize, and CUuuid_st which holds c_chars), for which
        // the all-zero bit pattern is a valid value.
        unsafe { core::mem::zeroed() }
    }

    /// The device name's bytes up to (not including) the first NUL; all 256 bytes if the
    /// runtime wrote no NUL.
    pub fn name_bytes(&self) -> &[u8] {
        // SAFETY: `name` is an array of 256 initialized c_char (i8 or u8), which has the same
        // size, alignment and validity as 256 u8; the returned slice borrows `self`.
        let bytes: &[u8; 256] = unsafe { &*self.name.as_ptr().cast::<[u8; 256]>() };
        let len = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        &bytes[..len]
    }

    /// The device name as text, with invalid UTF-8 replaced.
    pub fn name(&self) -> String {
        String::from_utf8_lossy(self.name_bytes()).into_owned()
    }
}

impl fmt::Debug for cudaDeviceProp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("cudaDeviceProp")
            .field("name", &self.name())
            .field("major", &self.major)
            .field("minor", &self.minor)
            .field("totalGlobalMem", &self.totalGlobalMem)
            .field("multiProcessorCount", &self.multiProcessorCount)
            .field("maxThreadsPerBlock", &self.maxThreadsPerBlock)
            .field("sharedMemPerBlock", &self.sharedMemPerBlock)
            .field("sharedMemPerBlockOptin", &self.sharedMemPerBlockOptin)
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Flags and special handles (driver_types.h `#define`s)
// ---------------------------------------------------------------------------------------------

/// `cudaHostAlloc` flag: default page-locked allocation.
pub const cudaHostAllocDefault: c_uint = 0x00;
/// `cudaHostAlloc` flag: pinned memory accessible by all CUDA contexts.
pub const cudaHostAllocPortable: c_uint = 0x01;
/// `cudaHostAlloc` flag: map the allocation into device space.
pub const cudaHostAllocMapped: c_uint = 0x02;
/// `cudaHostAlloc` flag: write-combined memory.
pub const cudaHostAllocWriteCombined: c_uint = 0x04;

/// Stream flag: default stream creation flag (synchronizes with the legacy default stream).
pub const cudaStreamDefault: c_uint = 0x00;
/// Stream flag: the stream does not synchronize with the legacy default stream.
pub const cudaStreamNonBlocking: c_uint = 0x01;

/// Event flag: default event.
pub const cudaEventDefault: c_uint = 0x00;
/// Event flag: the event uses blocking synchronization.
pub const cudaEventBlockingSync: c_uint = 0x01;
/// Event flag: the event does not record timing data.
pub const cudaEventDisableTiming: c_uint = 0x02;
/// Event flag: usable for interprocess use; requires [`cudaEventDisableTiming`].
pub const cudaEventInterprocess: c_uint = 0x04;

/// [`cudaStreamWaitEvent`] flag: default wait.
pub const cudaEventWaitDefault: c_uint = 0x00;
/// [`cudaStreamWaitEvent`] flag: captured as an external event node during stream capture.
pub const cudaEventWaitExternal: c_uint = 0x01;

/// Device id that represents the CPU.
pub const cudaCpuDeviceId: c_int = -1;
/// Device id that represents an invalid device.
pub const cudaInvalidDeviceId: c_int = -2;

/// Special stream handle for the legacy (implicitly synchronizing) default stream.
pub const cudaStreamLegacy: cudaStream_t = core::ptr::without_provenance_mut(0x1);
/// Special stream handle for the per-thread default stream.
pub const cudaStreamPerThread: cudaStream_t = core::ptr::without_provenance_mut(0x2);

// ---------------------------------------------------------------------------------------------
// Functions
// ---------------------------------------------------------------------------------------------

/// Declares the cudart functions that return `cudaError_t`: as imports of the linked library, or
/// — in a stub build — as Rust functions with the same signature that write nothing and return
/// `cudaErrorStubLibrary`. One list keeps the two builds' signatures identical.
macro_rules! cudart_status_functions {
    ($( $(#[doc = $doc:literal])* pub fn $name:ident($($arg:ident: $ty:ty),* $(,)?); )*) => {
        #[cfg(not(choreo_sys_no_cudart))]
        unsafe extern "C" {
            $(
                $(#[doc = $doc])*
                pub fn $name($($arg: $ty),*) -> cudaError_t;
            )*
        }

        $(
            #[cfg(choreo_sys_no_cudart)]
            $(#[doc = $doc])*
            ///
            /// **Stub build** (no CUDA toolkit when choreo-sys was built): writes nothing and
            /// returns [`cudaError_t::cudaErrorStubLibrary`].
            ///
            /// # Safety
            ///
            /// Same contract as the CUDA runtime function of this name.
            #[allow(unused_variables)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> cudaError_t {
                cudaError_t::cudaErrorStubLibrary
            }
        )*
    };
}

cudart_status_functions! {
    /// Returns the number of compute-capable devices in `*count`.
    pub fn cudaGetDeviceCount(count: *mut c_int);
    /// Returns the device on which the active host thread executes device code in `*device`.
    pub fn cudaGetDevice(device: *mut c_int);
    /// Sets the device to be used for GPU executions by this host thread.
    pub fn cudaSetDevice(device: c_int);
    /// Writes the integer value of attribute `attr` of `device` to `*value`.
    pub fn cudaDeviceGetAttribute(value: *mut c_int, attr: cudaDeviceAttr, device: c_int);
    /// Waits until all preceding work on the current device has completed.
    pub fn cudaDeviceSynchronize();
    /// Destroys all allocations and resets all state on the current device of this process.
    pub fn cudaDeviceReset();
    /// Writes the CUDA runtime version (`1000 * major + 10 * minor`) to `*runtimeVersion`.
    pub fn cudaRuntimeGetVersion(runtimeVersion: *mut c_int);
    /// Writes the latest CUDA version supported by the driver to `*driverVersion` (0 if no
    /// driver is installed).
    pub fn cudaDriverGetVersion(driverVersion: *mut c_int);
    /// Allocates `size` bytes of device memory; the pointer is written to `*devPtr`.
    pub fn cudaMalloc(devPtr: *mut *mut c_void, size: usize);
    /// Frees device memory allocated by [`cudaMalloc`] (synchronizes the device).
    pub fn cudaFree(devPtr: *mut c_void);
    /// Allocates `size` bytes of device memory in stream order on `hStream`.
    pub fn cudaMallocAsync(devPtr: *mut *mut c_void, size: usize, hStream: cudaStream_t);
    /// Frees device memory in stream order on `hStream`.
    pub fn cudaFreeAsync(devPtr: *mut c_void, hStream: cudaStream_t);
    /// Copies `count` bytes from `src` to `dst`; synchronous with respect to the host for most
    /// kinds.
    pub fn cudaMemcpy(dst: *mut c_void, src: *const c_void, count: usize, kind: cudaMemcpyKind);
    /// Copies `count` bytes from `src` to `dst` in stream order on `stream`.
    pub fn cudaMemcpyAsync(
        dst: *mut c_void,
        src: *const c_void,
        count: usize,
        kind: cudaMemcpyKind,
        stream: cudaStream_t,
    );
    /// Sets `count` bytes of device memory at `devPtr` to the byte `value`.
    pub fn cudaMemset(devPtr: *mut c_void, value: c_int, count: usize);
    /// Sets `count` bytes of device memory at `devPtr` to the byte `value`, in stream order.
    pub fn cudaMemsetAsync(devPtr: *mut c_void, value: c_int, count: usize, stream: cudaStream_t);
    /// Allocates `size` bytes of page-locked host memory; the pointer is written to `*ptr`.
    pub fn cudaMallocHost(ptr: *mut *mut c_void, size: usize);
    /// Allocates `size` bytes of page-locked host memory with `cudaHostAlloc*` `flags`.
    pub fn cudaHostAlloc(pHost: *mut *mut c_void, size: usize, flags: c_uint);
    /// Frees page-locked host memory from [`cudaMallocHost`] / [`cudaHostAlloc`].
    pub fn cudaFreeHost(ptr: *mut c_void);
    /// Writes to `*pDevice` the device address of the page-locked host memory `pHost` (from
    /// [`cudaHostAlloc`] with [`cudaHostAllocMapped`]) for the current device; `flags` must
    /// be 0.
    pub fn cudaHostGetDevicePointer(pDevice: *mut *mut c_void, pHost: *mut c_void, flags: c_uint);
    /// Writes the free and total device memory in bytes to `*free` / `*total`.
    pub fn cudaMemGetInfo(free: *mut usize, total: *mut usize);
    /// Creates a blocking stream; the handle is written to `*pStream`.
    pub fn cudaStreamCreate(pStream: *mut cudaStream_t);
    /// Creates a stream with `cudaStream*` `flags`; the handle is written to `*pStream`.
    pub fn cudaStreamCreateWithFlags(pStream: *mut cudaStream_t, flags: c_uint);
    /// Destroys `stream` (work already enqueued still completes).
    pub fn cudaStreamDestroy(stream: cudaStream_t);
    /// Waits until all work enqueued on `stream` has completed.
    pub fn cudaStreamSynchronize(stream: cudaStream_t);
    /// `cudaSuccess` if all work on `stream` has completed, `cudaErrorNotReady` if not.
    pub fn cudaStreamQuery(stream: cudaStream_t);
    /// Makes future work on `stream` wait for the last record of `event`.
    pub fn cudaStreamWaitEvent(stream: cudaStream_t, event: cudaEvent_t, flags: c_uint);
    /// Creates an event with default flags; the handle is written to `*event`.
    pub fn cudaEventCreate(event: *mut cudaEvent_t);
    /// Creates an event with `cudaEvent*` `flags`; the handle is written to `*event`.
    pub fn cudaEventCreateWithFlags(event: *mut cudaEvent_t, flags: c_uint);
    /// Records `event` at the current end of `stream`.
    pub fn cudaEventRecord(event: cudaEvent_t, stream: cudaStream_t);
    /// Waits until the work captured by the last record of `event` has completed.
    pub fn cudaEventSynchronize(event: cudaEvent_t);
    /// `cudaSuccess` if the work captured by `event` has completed, `cudaErrorNotReady` if not.
    pub fn cudaEventQuery(event: cudaEvent_t);
    /// Writes the time between two recorded events, in milliseconds, to `*ms`.
    pub fn cudaEventElapsedTime(ms: *mut c_float, start: cudaEvent_t, end: cudaEvent_t);
    /// Destroys `event`.
    pub fn cudaEventDestroy(event: cudaEvent_t);
    /// Enqueues the host function `fn_(userData)` on `stream`; it must not call CUDA.
    pub fn cudaLaunchHostFunc(stream: cudaStream_t, fn_: cudaHostFn_t, userData: *mut c_void);
    /// Returns the last error from a runtime call in this thread and resets it to `cudaSuccess`.
    pub fn cudaGetLastError();
    /// Returns the last error from a runtime call in this thread without resetting it.
    pub fn cudaPeekAtLastError();
}

#[cfg(not(choreo_sys_no_cudart))]
unsafe extern "C" {
    /// Writes the properties of `device` to `*prop` (the layout of the linked CUDA major; a
    /// CUDA 12 build calls `cudaGetDeviceProperties_v2`, as CUDA 12's header does).
    #[cfg_attr(choreo_sys_cuda12, link_name = "cudaGetDeviceProperties_v2")]
    pub fn cudaGetDeviceProperties(prop: *mut cudaDeviceProp, device: c_int) -> cudaError_t;
}

/// Writes the properties of `device` to `*prop`.
///
/// **Stub build** (no CUDA toolkit when choreo-sys was built): writes nothing and returns
/// [`cudaError_t::cudaErrorStubLibrary`].
///
/// # Safety
///
/// Same contract as the CUDA runtime function of this name.
#[cfg(choreo_sys_no_cudart)]
pub unsafe extern "C" fn cudaGetDeviceProperties(
    prop: *mut cudaDeviceProp,
    device: c_int,
) -> cudaError_t {
    let _ = (prop, device);
    cudaError_t::cudaErrorStubLibrary
}

#[cfg(not(choreo_sys_no_cudart))]
unsafe extern "C" {
    /// Returns the enumerator name of `error` as a static NUL-terminated string
    /// ("unrecognized error code" for unknown values).
    pub fn cudaGetErrorName(error: cudaError_t) -> *const c_char;
    /// Returns the description of `error` as a static NUL-terminated string
    /// ("unrecognized error code" for unknown values).
    pub fn cudaGetErrorString(error: cudaError_t) -> *const c_char;
}

/// What stub builds report for codes whose name they do not know, like cudart does.
#[cfg(choreo_sys_no_cudart)]
const UNRECOGNIZED: &CStr = c"unrecognized error code";

/// Returns the enumerator name of `error` as a static NUL-terminated string.
///
/// **Stub build**: the names come from the table generated from `driver_types.h`;
/// "unrecognized error code" for unknown values.
///
/// # Safety
///
/// Always safe to call; `unsafe` only to match the signature of the linked build.
#[cfg(choreo_sys_no_cudart)]
pub unsafe extern "C" fn cudaGetErrorName(error: cudaError_t) -> *const c_char {
    error.name_cstr().unwrap_or(UNRECOGNIZED).as_ptr()
}

/// Returns the description of `error` as a static NUL-terminated string.
///
/// **Stub build**: says that the runtime is not linked (for `cudaErrorStubLibrary`), otherwise
/// gives the error's name only, since the descriptions live in the runtime library.
///
/// # Safety
///
/// Always safe to call; `unsafe` only to match the signature of the linked build.
#[cfg(choreo_sys_no_cudart)]
pub unsafe extern "C" fn cudaGetErrorString(error: cudaError_t) -> *const c_char {
    if error == cudaError_t::cudaErrorStubLibrary {
        STUB_LIBRARY_MESSAGE.as_ptr()
    } else {
        error.name_cstr().unwrap_or(UNRECOGNIZED).as_ptr()
    }
}

/// The [`cudaGetErrorString`] text of `cudaErrorStubLibrary` in a stub build: "CUDA runtime
/// not linked", and why, as the build script found it (no toolkit, with where it was searched;
/// a toolkit of another CUDA version than 13.x, naming it; `CHOREO_SYS_NO_CUDART`; docs.rs).
pub const STUB_LIBRARY_MESSAGE: &CStr = match CStr::from_bytes_with_nul(
    concat!("CUDA runtime not linked; ", env!("CHOREO_SYS_STUB_REASON"), "\0").as_bytes(),
) {
    Ok(message) => message,
    Err(_) => c"CUDA runtime not linked; choreo-sys was built as stubs",
};

/// Why this build of choreo-sys has no CUDA runtime (the reason the build script printed as a
/// cargo warning); empty when [`CUDART_LINKED`].
pub const STUB_REASON: &str = env!("CHOREO_SYS_STUB_REASON");

impl cudaError_t {
    /// [`cudaError_t::name`] as a static C string; works without the CUDA runtime.
    pub const fn name_cstr(self) -> Option<&'static CStr> {
        generated::error_name_cstr(self.0)
    }
}
