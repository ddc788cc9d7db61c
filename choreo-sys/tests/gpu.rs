//! The bindings against a real GPU and driver. Run with `--ignored` on a GPU machine (see
//! ci/bundle-gpu-tests); every test fails, rather than passing, when there is no usable device.

use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

use choreo_sys::*;

/// Panics with the runtime's name and description of `status` unless it is success.
#[track_caller]
fn check(status: cudaError_t) {
    if !status.is_success() {
        // SAFETY: both functions accept any value and return static NUL-terminated strings.
        let (name, text) = unsafe {
            (
                std::ffi::CStr::from_ptr(cudaGetErrorName(status)),
                std::ffi::CStr::from_ptr(cudaGetErrorString(status)),
            )
        };
        panic!("CUDA call failed: {status:?} {name:?}: {text:?}");
    }
}

/// Makes device 0 current, failing the test when there is no device.
fn device0() {
    if !CUDART_LINKED {
        panic!("choreo-sys was built without the CUDA runtime (stub build)");
    }
    let mut count = 0;
    // SAFETY: `count` is a valid, writable c_int.
    check(unsafe { cudaGetDeviceCount(&mut count) });
    assert!(count > 0, "no CUDA device");
    // SAFETY: plain call with a device index that exists.
    check(unsafe { cudaSetDevice(0) });
}

fn attribute(attr: cudaDeviceAttr) -> c_int {
    let mut value = -1;
    // SAFETY: `value` is a valid, writable c_int; device 0 exists (device0() ran).
    check(unsafe { cudaDeviceGetAttribute(&mut value, attr, 0) });
    value
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_properties_agree_with_attributes() {
    device0();
    let mut props = cudaDeviceProp::zeroed();
    // SAFETY: `props` is a writable cudaDeviceProp with the header's layout (asserted at compile
    // time); device 0 exists.
    check(unsafe { cudaGetDeviceProperties(&mut props, 0) });
    println!("{props:?}");
    assert!(!props.name_bytes().is_empty(), "empty device name");
    // Fields spread over the whole struct: a layout error would show up as a mismatch here.
    #[allow(unused_mut)]
    let mut pairs = vec![
        (props.major, cudaDeviceAttr::cudaDevAttrComputeCapabilityMajor),
        (props.minor, cudaDeviceAttr::cudaDevAttrComputeCapabilityMinor),
        (props.multiProcessorCount, cudaDeviceAttr::cudaDevAttrMultiProcessorCount),
        (props.maxThreadsPerBlock, cudaDeviceAttr::cudaDevAttrMaxThreadsPerBlock),
        (props.warpSize, cudaDeviceAttr::cudaDevAttrWarpSize),
        (props.maxThreadsDim[2], cudaDeviceAttr::cudaDevAttrMaxBlockDimZ),
        (props.maxGridSize[0], cudaDeviceAttr::cudaDevAttrMaxGridDimX),
        (props.l2CacheSize, cudaDeviceAttr::cudaDevAttrL2CacheSize),
        (props.pciBusID, cudaDeviceAttr::cudaDevAttrPciBusId),
        (props.maxBlocksPerMultiProcessor, cudaDeviceAttr::cudaDevAttrMaxBlocksPerMultiprocessor),
        (props.memoryPoolsSupported, cudaDeviceAttr::cudaDevAttrMemoryPoolsSupported),
        (props.clusterLaunch, cudaDeviceAttr::cudaDevAttrClusterLaunch),
    ];
    // CUDA 12.4's struct has no hostNumaId (12.x added it later).
    #[cfg(not(choreo_sys_cuda12))]
    pairs.push((props.hostNumaId, cudaDeviceAttr::cudaDevAttrHostNumaId));
    for (field, attr) in pairs {
        assert_eq!(field, attribute(attr), "cudaDeviceProp field vs {attr:?}");
    }
    assert_eq!(
        props.sharedMemPerBlockOptin,
        attribute(cudaDeviceAttr::cudaDevAttrMaxSharedMemoryPerBlockOptin) as usize
    );
    let mut free = 0usize;
    let mut total = 0usize;
    // SAFETY: both are valid, writable usize.
    check(unsafe { cudaMemGetInfo(&mut free, &mut total) });
    assert_eq!(total, props.totalGlobalMem);
    assert!(0 < free && free <= total);

    let mut driver = 0;
    // SAFETY: `driver` is a valid, writable c_int.
    check(unsafe { cudaDriverGetVersion(&mut driver) });
    assert!(
        driver / 1000 >= CUDART_VERSION / 1000,
        "driver supports CUDA {driver}, the runtime needs {CUDART_VERSION}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn memory_round_trips_through_the_device() {
    device0();
    const N: usize = 1 << 20;
    let input: Vec<u32> = (0..N as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let bytes = N * size_of::<u32>();
    let (mut a, mut b): (*mut c_void, *mut c_void) = (ptr::null_mut(), ptr::null_mut());
    let mut stream: cudaStream_t = ptr::null_mut();
    let mut pinned: *mut c_void = ptr::null_mut();
    // SAFETY: every out-pointer is a valid, writable slot; the copies stay within the `bytes`
    // allocated for each buffer and for `input`/`pinned`; the stream is synchronized before the
    // host reads `pinned`, and everything is freed once, after its last use.
    unsafe {
        check(cudaStreamCreateWithFlags(&mut stream, cudaStreamNonBlocking));
        check(cudaMalloc(&mut a, bytes));
        check(cudaMallocAsync(&mut b, bytes, stream));
        check(cudaHostAlloc(&mut pinned, bytes, cudaHostAllocDefault));
        check(cudaMemcpy(a, input.as_ptr().cast(), bytes, cudaMemcpyKind::HostToDevice));
        check(cudaMemsetAsync(b, 0xff, bytes, stream));
        check(cudaMemcpyAsync(b, a, bytes / 2, cudaMemcpyKind::DeviceToDevice, stream));
        check(cudaMemcpyAsync(pinned, b, bytes, cudaMemcpyKind::DeviceToHost, stream));
        check(cudaStreamSynchronize(stream));
        check(cudaStreamQuery(stream));
        let output = std::slice::from_raw_parts(pinned.cast::<u32>(), N);
        assert_eq!(output[..N / 2], input[..N / 2]);
        assert!(output[N / 2..].iter().all(|&word| word == u32::MAX));
        check(cudaFreeAsync(b, stream));
        check(cudaStreamSynchronize(stream));
        check(cudaFree(a));
        check(cudaFreeHost(pinned));
        check(cudaStreamDestroy(stream));
        check(cudaGetLastError());
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn mapped_pinned_memory_is_written_by_the_device_through_its_device_pointer() {
    device0();
    const BYTES: usize = 4096;
    let mut host: *mut c_void = ptr::null_mut();
    let mut device: *mut c_void = ptr::null_mut();
    let mut stream: cudaStream_t = ptr::null_mut();
    // SAFETY: every out-pointer is a valid, writable slot; the memset stays within the
    // `BYTES` allocated; the host reads the memory only after the stream is synchronized, and
    // everything is freed once, after its last use.
    unsafe {
        check(cudaStreamCreateWithFlags(&mut stream, cudaStreamNonBlocking));
        check(cudaHostAlloc(&mut host, BYTES, cudaHostAllocMapped | cudaHostAllocPortable));
        ptr::write_bytes(host.cast::<u8>(), 0, BYTES);
        check(cudaHostGetDevicePointer(&mut device, host, 0));
        assert!(!device.is_null());
        check(cudaMemsetAsync(device.cast::<u8>().add(64).cast(), 0x5a, 32, stream));
        check(cudaStreamSynchronize(stream));
        let bytes = std::slice::from_raw_parts(host.cast::<u8>(), BYTES);
        assert!(bytes[..64].iter().all(|&b| b == 0));
        assert!(bytes[64..96].iter().all(|&b| b == 0x5a));
        assert!(bytes[96..].iter().all(|&b| b == 0));
        check(cudaFreeHost(host));
        check(cudaStreamDestroy(stream));
    }
}

static HOST_FN_CALLS: AtomicU32 = AtomicU32::new(0);

unsafe extern "C" fn count_call(user_data: *mut c_void) {
    // `user_data` is the address of HOST_FN_CALLS, passed below.
    // SAFETY: it points to a static AtomicU32, valid for the whole program.
    let counter = unsafe { &*user_data.cast::<AtomicU32>() };
    counter.fetch_add(1, Ordering::SeqCst);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn events_host_functions_and_stream_order() {
    device0();
    let (mut s1, mut s2): (cudaStream_t, cudaStream_t) = (ptr::null_mut(), ptr::null_mut());
    let (mut start, mut end, mut sync): (cudaEvent_t, cudaEvent_t, cudaEvent_t) =
        (ptr::null_mut(), ptr::null_mut(), ptr::null_mut());
    let mut buffer: *mut c_void = ptr::null_mut();
    let mut ms = -1.0f32;
    // SAFETY: out-pointers are valid slots; handles are used only between their creation and
    // destruction; the host function only touches an atomic (it must not call CUDA) and its
    // user data is a static; the streams are synchronized before anything is destroyed.
    unsafe {
        check(cudaStreamCreate(&mut s1));
        check(cudaStreamCreateWithFlags(&mut s2, cudaStreamNonBlocking));
        check(cudaEventCreate(&mut start));
        check(cudaEventCreate(&mut end));
        check(cudaEventCreateWithFlags(&mut sync, cudaEventDisableTiming));
        check(cudaMalloc(&mut buffer, 64 << 20));
        check(cudaEventRecord(start, s1));
        check(cudaMemsetAsync(buffer, 1, 64 << 20, s1));
        check(cudaEventRecord(end, s1));
        check(cudaEventRecord(sync, s1));
        check(cudaStreamWaitEvent(s2, sync, cudaEventWaitDefault));
        let user_data = ptr::from_ref(&HOST_FN_CALLS).cast_mut().cast::<c_void>();
        check(cudaLaunchHostFunc(s2, Some(count_call), user_data));
        check(cudaStreamSynchronize(s2));
        assert_eq!(HOST_FN_CALLS.load(Ordering::SeqCst), 1);
        check(cudaEventSynchronize(end));
        check(cudaEventQuery(end));
        check(cudaEventElapsedTime(&mut ms, start, end));
        assert!(ms >= 0.0, "elapsed time {ms}");
        // Timing is disabled on `sync`: asking for it is an error, not a crash.
        assert_eq!(
            cudaEventElapsedTime(&mut ms, start, sync),
            cudaError_t::cudaErrorInvalidResourceHandle
        );
        check(cudaDeviceSynchronize());
        check(cudaFree(buffer));
        for event in [start, end, sync] {
            check(cudaEventDestroy(event));
        }
        check(cudaStreamDestroy(s1));
        check(cudaStreamDestroy(s2));
        // The error above is not sticky; it was also recorded as the last error.
        assert_eq!(cudaPeekAtLastError(), cudaError_t::cudaErrorInvalidResourceHandle);
        assert_eq!(cudaGetLastError(), cudaError_t::cudaErrorInvalidResourceHandle);
        check(cudaGetLastError());
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_arguments_return_errors() {
    device0();
    let mut count = 0;
    // SAFETY: a device index that does not exist is a documented error case; the
    // out-pointer of cudaGetDeviceCount is valid.
    unsafe {
        check(cudaGetDeviceCount(&mut count));
        assert_eq!(cudaSetDevice(count), cudaError_t::cudaErrorInvalidDevice);
        let mut huge: *mut c_void = ptr::null_mut();
        assert_eq!(cudaMalloc(&mut huge, usize::MAX / 2), cudaError_t::cudaErrorMemoryAllocation);
        assert!(huge.is_null());
        let _ = cudaGetLastError();
    }
}
