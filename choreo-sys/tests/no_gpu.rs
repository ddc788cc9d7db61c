//! Behaviour of the bindings on a machine without a GPU or driver (and, in a stub build, without
//! the runtime): calls fail with a status code instead of crashing, and the error helpers work.
//!
//! These tests also pass on a GPU machine: the driver-dependent assertions accept success there.

use std::ffi::CStr;

use choreo_sys::*;

/// Codes that a call which needs the driver may return on a machine without a usable GPU.
const NO_DEVICE_CODES: [cudaError_t; 3] = [
    cudaError_t::cudaErrorInsufficientDriver,
    cudaError_t::cudaErrorNoDevice,
    cudaError_t::cudaErrorStubLibrary,
];

fn c_text(ptr: *const std::ffi::c_char) -> &'static str {
    assert!(!ptr.is_null(), "cudart returned a null C string");
    // SAFETY: cudaGetErrorName/String return pointers to static NUL-terminated strings (checked
    // non-null above) that live for the whole program.
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str().expect("error text is valid UTF-8")
}

fn has_device() -> bool {
    let mut count = -1;
    // SAFETY: `count` is a valid, writable c_int.
    let status = unsafe { cudaGetDeviceCount(&mut count) };
    status.is_success() && count > 0
}

#[test]
fn device_count_fails_without_driver_or_reports_devices() {
    let mut count: std::ffi::c_int = -7;
    // SAFETY: `count` is a valid, writable c_int.
    let status = unsafe { cudaGetDeviceCount(&mut count) };
    if status.is_success() {
        assert!(count >= 0, "success with a negative device count {count}");
    } else {
        assert!(
            NO_DEVICE_CODES.contains(&status),
            "unexpected status {status:?} ({:?}) from cudaGetDeviceCount",
            status.name()
        );
        if !CUDART_LINKED {
            assert_eq!(count, -7, "a stub must not write its out-parameters");
        }
    }
}

#[test]
fn runtime_version_is_the_linked_toolkits_without_a_driver() {
    let mut version = 0;
    // SAFETY: `version` is a valid, writable c_int.
    let status = unsafe { cudaRuntimeGetVersion(&mut version) };
    if CUDART_LINKED {
        assert_eq!(status, cudaError_t::cudaSuccess);
        // CUDA 12.4 and later (then choreo-sys binds `cudaGetDeviceProperties_v2`) or 13.x.
        if cfg!(choreo_sys_cuda12) {
            assert!((12040..13000).contains(&version), "{version}");
        } else {
            assert!((13000..14000).contains(&version), "{version}");
        }
        assert_eq!(version, CUDART_VERSION);
    } else {
        assert_eq!(status, cudaError_t::cudaErrorStubLibrary);
        assert_eq!(version, 0, "a stub must not write its out-parameters");
        assert_eq!(CUDART_VERSION, 13000, "a stub build reports the generated headers' version");
    }
}

#[test]
fn allocation_without_a_device_fails_cleanly() {
    if has_device() {
        return; // The no-device behaviour cannot be observed on a GPU machine.
    }
    let mut ptr: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: `ptr` is a valid, writable pointer slot.
    let status = unsafe { cudaMalloc(&mut ptr, 1024) };
    assert!(NO_DEVICE_CODES.contains(&status), "cudaMalloc returned {status:?}");
    assert!(ptr.is_null());

    let mut stream: cudaStream_t = std::ptr::null_mut();
    // SAFETY: `stream` is a valid, writable handle slot.
    let status = unsafe { cudaStreamCreateWithFlags(&mut stream, cudaStreamNonBlocking) };
    assert!(NO_DEVICE_CODES.contains(&status), "cudaStreamCreateWithFlags returned {status:?}");

    let mut props = cudaDeviceProp::zeroed();
    // SAFETY: `props` is a valid, writable cudaDeviceProp of the header's layout.
    let status = unsafe { cudaGetDeviceProperties(&mut props, 0) };
    assert!(!status.is_success(), "cudaGetDeviceProperties succeeded without a device");
    assert_eq!(props.name_bytes(), b"", "a failed call left a name behind");
}

#[test]
fn error_names_and_strings_are_valid_text() {
    for code in [
        cudaError_t::cudaSuccess,
        cudaError_t::cudaErrorInvalidValue,
        cudaError_t::cudaErrorMemoryAllocation,
        cudaError_t::cudaErrorInsufficientDriver,
        cudaError_t::cudaErrorNoDevice,
        cudaError_t::cudaErrorStubLibrary,
        cudaError_t::cudaErrorNotReady,
        cudaError_t::cudaErrorIllegalAddress,
        cudaError_t(123_456), // not a CUDA error code
    ] {
        // SAFETY: both functions accept any value and return static strings.
        let (name, string) = unsafe { (cudaGetErrorName(code), cudaGetErrorString(code)) };
        let (name, string) = (c_text(name), c_text(string));
        assert!(!string.is_empty(), "empty description for {code:?}");
        match code.name() {
            // The runtime's name for a known code is the header's enumerator name.
            Some(expected) => assert_eq!(name, expected),
            None => assert_eq!(name, "unrecognized error code"),
        }
    }
}

#[test]
fn every_header_code_has_the_runtime_name() {
    // The codes that CUDA 13 added after 12.4: a CUDA 12.4 runtime does not know them.
    let new_in_13 = [
        cudaError_t::cudaErrorContained,
        cudaError_t::cudaErrorTensorMemoryLeak,
        cudaError_t::cudaErrorFunctionNotLoaded,
        cudaError_t::cudaErrorInvalidResourceType,
        cudaError_t::cudaErrorInvalidResourceConfiguration,
    ];
    for code in ALL_ERRORS {
        // SAFETY: accepts any value and returns a static string.
        let name = c_text(unsafe { cudaGetErrorName(code) });
        if cfg!(choreo_sys_cuda12) && new_in_13.contains(&code) && CUDART_VERSION < 12080 {
            assert_eq!(name, "unrecognized error code", "{code:?}");
        } else {
            assert_eq!(Some(name), code.name());
        }
    }
}

#[test]
fn stub_library_string_explains_the_stub_build() {
    // SAFETY: accepts any value and returns a static string.
    let text = c_text(unsafe { cudaGetErrorString(cudaError_t::cudaErrorStubLibrary) });
    if CUDART_LINKED {
        assert_ne!(text, STUB_LIBRARY_MESSAGE.to_str().unwrap());
        assert_eq!(STUB_REASON, "");
    } else {
        assert_eq!(text, STUB_LIBRARY_MESSAGE.to_str().unwrap());
        // It says why, as the build script's warning did.
        assert!(text.starts_with("CUDA runtime not linked; choreo-sys was built as stubs: "));
        assert!(!STUB_REASON.is_empty() && text.ends_with(STUB_REASON), "{text}");
    }
}

#[test]
fn error_consts_have_header_values() {
    let expected = [
        (cudaError_t::cudaSuccess, 0),
        (cudaError_t::cudaErrorInvalidValue, 1),
        (cudaError_t::cudaErrorMemoryAllocation, 2),
        (cudaError_t::cudaErrorInitializationError, 3),
        (cudaError_t::cudaErrorStubLibrary, 34),
        (cudaError_t::cudaErrorInsufficientDriver, 35),
        (cudaError_t::cudaErrorInvalidDevice, 101),
        (cudaError_t::cudaErrorNoDevice, 100),
        (cudaError_t::cudaErrorInvalidResourceHandle, 400),
        (cudaError_t::cudaErrorNotReady, 600),
        (cudaError_t::cudaErrorIllegalAddress, 700),
        (cudaError_t::cudaErrorLaunchFailure, 719),
        (cudaError_t::cudaErrorUnknown, 999),
    ];
    for (code, value) in expected {
        assert_eq!(code.0, value, "{:?}", code.name());
    }
    assert!(cudaError_t::cudaSuccess.is_success());
    assert!(!cudaError_t::cudaErrorNotReady.is_success());
}

#[test]
fn error_table_is_consistent() {
    let mut values: Vec<i32> = ALL_ERRORS.iter().map(|code| code.0).collect();
    values.sort_unstable();
    values.dedup();
    assert_eq!(values.len(), ALL_ERRORS.len(), "two enumerators share a value");
    for code in ALL_ERRORS {
        let name = code.name().expect("every enumerator has a name");
        assert_eq!(code.name_cstr().unwrap().to_str().unwrap(), name);
    }
    assert_eq!(cudaError_t(-1).name(), None);
}

#[test]
fn other_consts_have_header_values() {
    assert_eq!(cudaMemcpyKind::HostToHost.0, 0);
    assert_eq!(cudaMemcpyKind::cudaMemcpyHostToDevice.0, 1);
    assert_eq!(cudaMemcpyKind::DeviceToHost.0, 2);
    assert_eq!(cudaMemcpyKind::DeviceToDevice.0, 3);
    assert_eq!(cudaMemcpyKind::Default.0, 4);
    assert_eq!(cudaDeviceAttr::cudaDevAttrMaxThreadsPerBlock.0, 1);
    assert_eq!(cudaDeviceAttr::cudaDevAttrMaxSharedMemoryPerBlock.0, 8);
    assert_eq!(cudaDeviceAttr::cudaDevAttrMultiProcessorCount.0, 16);
    assert_eq!(cudaDeviceAttr::cudaDevAttrComputeCapabilityMajor.0, 75);
    assert_eq!(cudaDeviceAttr::cudaDevAttrComputeCapabilityMinor.0, 76);
    assert_eq!(cudaDeviceAttr::cudaDevAttrMaxSharedMemoryPerBlockOptin.0, 97);
    assert_eq!(cudaStreamLegacy as usize, 1);
    assert_eq!(cudaStreamPerThread as usize, 2);
    assert_eq!((cudaStreamNonBlocking, cudaEventDisableTiming, cudaEventBlockingSync), (1, 2, 1));
}

#[test]
fn device_prop_layout_and_name() {
    // CUDA 12's struct (filled by cudaGetDeviceProperties_v2) is larger than CUDA 13's.
    let size = if cfg!(choreo_sys_cuda12) { 1032 } else { 1008 };
    assert_eq!(std::mem::size_of::<cudaDeviceProp>(), size);
    let mut props = cudaDeviceProp::zeroed();
    assert_eq!(props.name_bytes(), b"");
    for (slot, byte) in props.name.iter_mut().zip(b"NVIDIA H200\0garbage") {
        *slot = *byte as std::ffi::c_char;
    }
    assert_eq!(props.name_bytes(), b"NVIDIA H200");
    assert_eq!(props.name(), "NVIDIA H200");
    props.name = [b'x' as std::ffi::c_char; 256];
    assert_eq!(props.name_bytes().len(), 256, "an unterminated name is read to the array end");
    assert!(format!("{props:?}").contains("major"));
}
