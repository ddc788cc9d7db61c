//! Calls the kernels that the build script compiled, in ways that need no GPU: a wrapper with
//! a wrong shape (rejected before anything reaches the device, in CUDA and CPU-only builds
//! alike) and, when the CUDA kernels were built, the CUDA `extern "C"` entry with a wrong
//! extent (its entry check fails before any CUDA call, so the linked C++ code runs on any
//! machine) and the host function of the hand-written `cuda/hand.cu`.

choreo::include_kernels!();

fn main() {
    // 15 elements where the kernel takes 16.
    let mut values = [0.0f32; 15];
    match add_one::add_one((&mut values[..]).into()) {
        Ok(()) => println!("wrapper: ok"),
        Err(error) => println!("wrapper: error: {error}"),
    }
    call_entry();
    call_hand_written();
}

#[cfg(kernels_built)]
unsafe extern "C" {
    // The entry of `add_one` (ABI: choreo-compiler's lower/abi.rs): device pointer, extent,
    // error buffer. Its symbol is mangled with the package, version, library and module; the
    // test writes it in (see build_integration.rs).
    #[link_name = "@ADD_ONE_ENTRY@"]
    fn __choreo_rs_add_one(
        v: *mut f32,
        v_e0: u64,
        err: *mut std::ffi::c_char,
        err_cap: usize,
    ) -> i32;
}

#[cfg(kernels_built)]
fn call_entry() {
    let mut err = [0 as std::ffi::c_char; 256];
    // SAFETY: the pointer is never dereferenced (the entry check of the extent fails first);
    // `err` is a writable buffer of `err.len()` bytes that outlives the call.
    let status =
        unsafe { __choreo_rs_add_one(std::ptr::null_mut(), 15, err.as_mut_ptr(), err.len()) };
    // SAFETY: the entry NUL-terminates what it writes into `err` (and `err` starts zeroed).
    let message = unsafe { std::ffi::CStr::from_ptr(err.as_ptr()) };
    println!("entry: status={status} message={}", message.to_string_lossy());
}

#[cfg(not(kernels_built))]
fn call_entry() {
    println!("entry: stub build, not linked");
}

#[cfg(kernels_built)]
unsafe extern "C" {
    // Host code of cuda/hand.cu: `a + b + HAND_BONUS` (from cuda/hand.h).
    fn hand_add(a: i32, b: i32) -> i32;
}

#[cfg(kernels_built)]
fn call_hand_written() {
    // SAFETY: `hand_add` takes and returns plain integers and touches no memory.
    let sum = unsafe { hand_add(40, 2) };
    println!("hand: {sum}");
}

#[cfg(not(kernels_built))]
fn call_hand_written() {
    println!("hand: stub build, not linked");
}
