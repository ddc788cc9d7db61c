//! The two backends of the runtime and the function table of each.
//!
//! Every runtime call the crate makes goes through an [`Api`]: a table of the CUDA runtime
//! functions it uses, with their CUDA signatures. [`CUDA`] holds the functions of `choreo-sys`
//! (the linked cudart, or its stubs), [`CPU`] those of the CPU runtime
//! (`choreo_cpu_runtime.cpp`, compiled into this crate by its build script), which exports the
//! same functions with the prefix `choreo_cpu_` and the same status codes. Each stream, event,
//! buffer and pinned block remembers its [`crate::Device`], whose backend picks the table, so
//! one code path serves both backends.

use std::ffi::{c_char, c_float, c_int, c_uint, c_void};
use std::fmt;

use choreo_sys::{
    cudaDeviceAttr, cudaError_t, cudaEvent_t, cudaHostFn_t, cudaMemcpyKind, cudaStream_t,
};

/// The kind of device a stream, event or allocation belongs to, and so the runtime that runs
/// its work.
///
/// Generated kernel wrappers match on [`crate::kernels::WorkStreams::backend`] to call the
/// `extern "C"` entry compiled for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    /// An NVIDIA GPU, driven through the CUDA runtime (`choreo-sys`).
    Cuda,
    /// The host CPU, driven through choreo's CPU runtime: streams are ordered queues run by
    /// worker threads, "device" memory is host memory.
    Cpu,
}

impl Backend {
    /// The backend's name as users write it (`CHOREO_DEVICE` values): `"cuda"` or `"cpu"`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cuda => "cuda",
            Backend::Cpu => "cpu",
        }
    }

    /// The function table of this backend.
    pub(crate) fn api(self) -> &'static Api {
        match self {
            Backend::Cuda => &CUDA,
            Backend::Cpu => &CPU,
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Cuda => "CUDA",
            Backend::Cpu => "CPU",
        })
    }
}

/// The runtime functions the crate calls, with the CUDA runtime's signatures and semantics
/// (handles are the backend's own; a CPU handle must never reach CUDA, nor the reverse, which
/// the objects' remembered devices ensure).
pub(crate) struct Api {
    pub(crate) backend: Backend,
    pub(crate) set_device: unsafe extern "C" fn(c_int) -> cudaError_t,
    pub(crate) device_get_attribute:
        unsafe extern "C" fn(*mut c_int, cudaDeviceAttr, c_int) -> cudaError_t,
    pub(crate) device_synchronize: unsafe extern "C" fn() -> cudaError_t,
    pub(crate) malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> cudaError_t,
    pub(crate) free: unsafe extern "C" fn(*mut c_void) -> cudaError_t,
    pub(crate) malloc_async:
        unsafe extern "C" fn(*mut *mut c_void, usize, cudaStream_t) -> cudaError_t,
    pub(crate) free_async: unsafe extern "C" fn(*mut c_void, cudaStream_t) -> cudaError_t,
    pub(crate) memcpy_async: unsafe extern "C" fn(
        *mut c_void,
        *const c_void,
        usize,
        cudaMemcpyKind,
        cudaStream_t,
    ) -> cudaError_t,
    pub(crate) memset_async:
        unsafe extern "C" fn(*mut c_void, c_int, usize, cudaStream_t) -> cudaError_t,
    pub(crate) host_alloc: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> cudaError_t,
    pub(crate) free_host: unsafe extern "C" fn(*mut c_void) -> cudaError_t,
    /// `cudaHostGetDevicePointer`: the device address of mapped pinned memory.
    pub(crate) host_get_device_pointer:
        unsafe extern "C" fn(*mut *mut c_void, *mut c_void, c_uint) -> cudaError_t,
    pub(crate) mem_get_info: unsafe extern "C" fn(*mut usize, *mut usize) -> cudaError_t,
    pub(crate) stream_create_with_flags:
        unsafe extern "C" fn(*mut cudaStream_t, c_uint) -> cudaError_t,
    pub(crate) stream_destroy: unsafe extern "C" fn(cudaStream_t) -> cudaError_t,
    pub(crate) stream_synchronize: unsafe extern "C" fn(cudaStream_t) -> cudaError_t,
    pub(crate) stream_query: unsafe extern "C" fn(cudaStream_t) -> cudaError_t,
    pub(crate) stream_wait_event:
        unsafe extern "C" fn(cudaStream_t, cudaEvent_t, c_uint) -> cudaError_t,
    pub(crate) event_create_with_flags:
        unsafe extern "C" fn(*mut cudaEvent_t, c_uint) -> cudaError_t,
    pub(crate) event_record: unsafe extern "C" fn(cudaEvent_t, cudaStream_t) -> cudaError_t,
    pub(crate) event_synchronize: unsafe extern "C" fn(cudaEvent_t) -> cudaError_t,
    pub(crate) event_query: unsafe extern "C" fn(cudaEvent_t) -> cudaError_t,
    pub(crate) event_elapsed_time:
        unsafe extern "C" fn(*mut c_float, cudaEvent_t, cudaEvent_t) -> cudaError_t,
    pub(crate) event_destroy: unsafe extern "C" fn(cudaEvent_t) -> cudaError_t,
    pub(crate) launch_host_func:
        unsafe extern "C" fn(cudaStream_t, cudaHostFn_t, *mut c_void) -> cudaError_t,
    pub(crate) get_error_name: unsafe extern "C" fn(cudaError_t) -> *const c_char,
    pub(crate) get_error_string: unsafe extern "C" fn(cudaError_t) -> *const c_char,
}

impl fmt::Debug for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Api").field("backend", &self.backend).finish_non_exhaustive()
    }
}

/// The CUDA runtime, through `choreo-sys`.
pub(crate) static CUDA: Api = {
    use choreo_sys as sys;
    Api {
        backend: Backend::Cuda,
        set_device: sys::cudaSetDevice,
        device_get_attribute: sys::cudaDeviceGetAttribute,
        device_synchronize: sys::cudaDeviceSynchronize,
        malloc: sys::cudaMalloc,
        free: sys::cudaFree,
        malloc_async: sys::cudaMallocAsync,
        free_async: sys::cudaFreeAsync,
        memcpy_async: sys::cudaMemcpyAsync,
        memset_async: sys::cudaMemsetAsync,
        host_alloc: sys::cudaHostAlloc,
        free_host: sys::cudaFreeHost,
        host_get_device_pointer: sys::cudaHostGetDevicePointer,
        mem_get_info: sys::cudaMemGetInfo,
        stream_create_with_flags: sys::cudaStreamCreateWithFlags,
        stream_destroy: sys::cudaStreamDestroy,
        stream_synchronize: sys::cudaStreamSynchronize,
        stream_query: sys::cudaStreamQuery,
        stream_wait_event: sys::cudaStreamWaitEvent,
        event_create_with_flags: sys::cudaEventCreateWithFlags,
        event_record: sys::cudaEventRecord,
        event_synchronize: sys::cudaEventSynchronize,
        event_query: sys::cudaEventQuery,
        event_elapsed_time: sys::cudaEventElapsedTime,
        event_destroy: sys::cudaEventDestroy,
        launch_host_func: sys::cudaLaunchHostFunc,
        get_error_name: sys::cudaGetErrorName,
        get_error_string: sys::cudaGetErrorString,
    }
};

/// The C API of the CPU runtime (`choreo_cpu.h`): the CUDA runtime functions with the prefix
/// `choreo_cpu_`, CUDA's signatures (`cudaError_t` is a C `int` there, which
/// `choreo_sys::cudaError_t` is ABI-compatible with; the handles are pointers to the runtime's
/// own stream and event objects) and CUDA's status numbers.
mod cpu_ffi {
    use std::ffi::{c_char, c_float, c_int, c_uint, c_void};

    use choreo_sys::{
        cudaDeviceAttr, cudaError_t, cudaEvent_t, cudaHostFn_t, cudaMemcpyKind, cudaStream_t,
    };

    unsafe extern "C" {
        pub(super) fn choreo_cpu_cudaSetDevice(device: c_int) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaDeviceGetAttribute(
            value: *mut c_int,
            attr: cudaDeviceAttr,
            device: c_int,
        ) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaDeviceSynchronize() -> cudaError_t;
        pub(super) fn choreo_cpu_cudaMalloc(pointer: *mut *mut c_void, size: usize) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaFree(pointer: *mut c_void) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaMallocAsync(
            pointer: *mut *mut c_void,
            size: usize,
            stream: cudaStream_t,
        ) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaFreeAsync(
            pointer: *mut c_void,
            stream: cudaStream_t,
        ) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaMemcpyAsync(
            dst: *mut c_void,
            src: *const c_void,
            count: usize,
            kind: cudaMemcpyKind,
            stream: cudaStream_t,
        ) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaMemsetAsync(
            pointer: *mut c_void,
            value: c_int,
            count: usize,
            stream: cudaStream_t,
        ) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaHostAlloc(
            pointer: *mut *mut c_void,
            size: usize,
            flags: c_uint,
        ) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaFreeHost(pointer: *mut c_void) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaMemGetInfo(free: *mut usize, total: *mut usize)
        -> cudaError_t;
        pub(super) fn choreo_cpu_cudaStreamCreateWithFlags(
            stream: *mut cudaStream_t,
            flags: c_uint,
        ) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaStreamDestroy(stream: cudaStream_t) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaStreamSynchronize(stream: cudaStream_t) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaStreamQuery(stream: cudaStream_t) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaStreamWaitEvent(
            stream: cudaStream_t,
            event: cudaEvent_t,
            flags: c_uint,
        ) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaEventCreateWithFlags(
            event: *mut cudaEvent_t,
            flags: c_uint,
        ) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaEventRecord(
            event: cudaEvent_t,
            stream: cudaStream_t,
        ) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaEventSynchronize(event: cudaEvent_t) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaEventQuery(event: cudaEvent_t) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaEventElapsedTime(
            milliseconds: *mut c_float,
            start: cudaEvent_t,
            end: cudaEvent_t,
        ) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaEventDestroy(event: cudaEvent_t) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaLaunchHostFunc(
            stream: cudaStream_t,
            function: cudaHostFn_t,
            data: *mut c_void,
        ) -> cudaError_t;
        pub(super) fn choreo_cpu_cudaGetErrorName(error: cudaError_t) -> *const c_char;
        pub(super) fn choreo_cpu_cudaGetErrorString(error: cudaError_t) -> *const c_char;
        pub(super) fn choreo_cpu_worker_count() -> c_uint;
    }
}

/// `cudaHostGetDevicePointer` of the CPU runtime: its "device" addresses host memory
/// directly, so the device address of pinned memory is its host address (its kernels get
/// host pointers).
///
/// # Safety
///
/// `device` must be null or valid for one write; `host` is not dereferenced.
unsafe extern "C" fn cpu_host_get_device_pointer(
    device: *mut *mut c_void,
    host: *mut c_void,
    flags: c_uint,
) -> cudaError_t {
    if device.is_null() || host.is_null() || flags != 0 {
        return cudaError_t::cudaErrorInvalidValue;
    }
    // SAFETY: `device` is non-null and, by the caller's contract, valid for one write.
    unsafe { device.write(host) };
    cudaError_t::cudaSuccess
}

/// The CPU runtime, through its C API.
pub(crate) static CPU: Api = {
    use cpu_ffi::*;
    Api {
        backend: Backend::Cpu,
        set_device: choreo_cpu_cudaSetDevice,
        device_get_attribute: choreo_cpu_cudaDeviceGetAttribute,
        device_synchronize: choreo_cpu_cudaDeviceSynchronize,
        malloc: choreo_cpu_cudaMalloc,
        free: choreo_cpu_cudaFree,
        malloc_async: choreo_cpu_cudaMallocAsync,
        free_async: choreo_cpu_cudaFreeAsync,
        memcpy_async: choreo_cpu_cudaMemcpyAsync,
        memset_async: choreo_cpu_cudaMemsetAsync,
        host_alloc: choreo_cpu_cudaHostAlloc,
        free_host: choreo_cpu_cudaFreeHost,
        host_get_device_pointer: cpu_host_get_device_pointer,
        mem_get_info: choreo_cpu_cudaMemGetInfo,
        stream_create_with_flags: choreo_cpu_cudaStreamCreateWithFlags,
        stream_destroy: choreo_cpu_cudaStreamDestroy,
        stream_synchronize: choreo_cpu_cudaStreamSynchronize,
        stream_query: choreo_cpu_cudaStreamQuery,
        stream_wait_event: choreo_cpu_cudaStreamWaitEvent,
        event_create_with_flags: choreo_cpu_cudaEventCreateWithFlags,
        event_record: choreo_cpu_cudaEventRecord,
        event_synchronize: choreo_cpu_cudaEventSynchronize,
        event_query: choreo_cpu_cudaEventQuery,
        event_elapsed_time: choreo_cpu_cudaEventElapsedTime,
        event_destroy: choreo_cpu_cudaEventDestroy,
        launch_host_func: choreo_cpu_cudaLaunchHostFunc,
        get_error_name: choreo_cpu_cudaGetErrorName,
        get_error_string: choreo_cpu_cudaGetErrorString,
    }
};

/// The number of worker threads of the CPU runtime's pool (`CHOREO_CPU_THREADS`, else the
/// hardware's thread count).
pub(crate) fn cpu_worker_count() -> u32 {
    // SAFETY: takes no arguments and only reads the runtime's configuration.
    unsafe { cpu_ffi::choreo_cpu_worker_count() }
}
