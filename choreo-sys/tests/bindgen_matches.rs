//! Checks the hand-written bindings against bindings that bindgen generates from the CUDA headers
//! (only with `--features bindgen`, which needs libclang; see build.rs).
//!
//! - Function signatures are compared at compile time: each hand-written function must coerce to
//!   the very function-pointer type of the generated declaration (which uses `choreo_sys`'s own
//!   handle/enum/struct types, so those are compared by name there and by content below).
//! - Enumerator values, flag values and the layout of `cudaDeviceProp` are compared by
//!   `check_against_header`, which build.rs writes from what bindgen saw in the header, so an
//!   enumerator or field missing from `choreo_sys` is a compile error.
#![cfg(feature = "bindgen")]
#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    missing_docs,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]

/// bindgen's view of the header, with its own types.
mod header {
    include!(concat!(env!("OUT_DIR"), "/cudart_bindgen.rs"));
}

/// bindgen's declarations of the functions, over `choreo_sys`'s types.
mod header_fns {
    include!(concat!(env!("OUT_DIR"), "/cudart_bindgen_fns.rs"));
}

/// Size of a field's type, without a value of the struct.
macro_rules! size_of_field {
    ($ty:path, $field:ident) => {{
        fn size_of_pointee<T>(_: *const T) -> usize {
            core::mem::size_of::<T>()
        }
        let value = core::mem::MaybeUninit::<$ty>::uninit();
        // SAFETY: addr_of! computes the field address without reading or referencing the
        // uninitialized value.
        size_of_pointee(unsafe { core::ptr::addr_of!((*value.as_ptr()).$field) })
    }};
}

include!(concat!(env!("OUT_DIR"), "/cudart_bindgen_checks.rs"));

/// Each `_` is one parameter; the generated declaration fixes the types, then the hand-written
/// function must have exactly that type.
macro_rules! same_signature {
    ($($name:ident($($arg:tt),*);)*) => {
        #[test]
        fn functions_have_the_header_signatures() {
            let mut checked = 0usize;
            $(
                // An array's elements share one type: the cast fixes it from the generated
                // declaration, and the hand-written function must coerce to it.
                let pair = [header_fns::$name as unsafe extern "C" fn($($arg),*) -> _, choreo_sys::$name];
                assert_eq!(pair.len(), 2);
                checked += 1;
            )*
            assert_eq!(checked, 40, "every bound function is listed");
        }
    };
}

same_signature! {
    cudaGetDeviceCount(_);
    cudaGetDevice(_);
    cudaSetDevice(_);
    cudaGetDeviceProperties(_, _);
    cudaDeviceGetAttribute(_, _, _);
    cudaDeviceSynchronize();
    cudaDeviceReset();
    cudaRuntimeGetVersion(_);
    cudaDriverGetVersion(_);
    cudaMalloc(_, _);
    cudaFree(_);
    cudaMallocAsync(_, _, _);
    cudaFreeAsync(_, _);
    cudaMemcpy(_, _, _, _);
    cudaMemcpyAsync(_, _, _, _, _);
    cudaMemset(_, _, _);
    cudaMemsetAsync(_, _, _, _);
    cudaMallocHost(_, _);
    cudaHostAlloc(_, _, _);
    cudaHostGetDevicePointer(_, _, _);
    cudaFreeHost(_);
    cudaMemGetInfo(_, _);
    cudaStreamCreate(_);
    cudaStreamCreateWithFlags(_, _);
    cudaStreamDestroy(_);
    cudaStreamSynchronize(_);
    cudaStreamQuery(_);
    cudaStreamWaitEvent(_, _, _);
    cudaEventCreate(_);
    cudaEventCreateWithFlags(_, _);
    cudaEventRecord(_, _);
    cudaEventSynchronize(_);
    cudaEventQuery(_);
    cudaEventElapsedTime(_, _, _);
    cudaEventDestroy(_);
    cudaLaunchHostFunc(_, _, _);
    cudaGetLastError();
    cudaPeekAtLastError();
    cudaGetErrorName(_);
    cudaGetErrorString(_);
}

#[test]
fn values_and_layouts_match_the_header() {
    check_against_header();
}

#[test]
fn own_types_have_the_header_representation() {
    use core::mem::{align_of, size_of};
    assert_eq!(size_of::<choreo_sys::cudaDeviceProp>(), size_of::<header::cudaDeviceProp>());
    assert_eq!(align_of::<choreo_sys::cudaDeviceProp>(), align_of::<header::cudaDeviceProp>());
    assert_eq!(size_of::<choreo_sys::cudaError_t>(), size_of::<header::cudaError_t>());
    assert_eq!(size_of::<choreo_sys::cudaMemcpyKind>(), size_of::<header::cudaMemcpyKind>());
    assert_eq!(size_of::<choreo_sys::cudaDeviceAttr>(), size_of::<header::cudaDeviceAttr>());
    assert_eq!(size_of::<choreo_sys::cudaUUID_t>(), size_of::<header::cudaUUID_t>());
    assert_eq!(size_of::<choreo_sys::cudaHostFn_t>(), size_of::<header::cudaHostFn_t>());
    assert_eq!(choreo_sys::CUDART_VERSION as i64, header::CUDART_VERSION as i64);
}
