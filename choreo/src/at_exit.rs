//! Giving the runtime's memory back at process exit.
//!
//! The runtime holds on to memory past its owners: pinned host blocks stay cached for reuse
//! (see [`crate::release_cached_pinned_memory`]), and memory dropped while the GPU still used
//! it waits in the graveyard until that work is done. A process that ends without giving it
//! back is fine for the operating system, but memory checkers (compute-sanitizer's leak check)
//! report every such block as a leak, which would hide real leaks. So the first time the
//! runtime keeps memory this way it registers an `atexit` handler that
//!
//! 1. waits for the GPU work that buried memory in the graveyard, then frees that memory
//!    (memory whose work reports an error stays leaked, as during the run), and
//! 2. frees the cached pinned blocks (which no GPU work uses).
//!
//! # Soundness
//!
//! The handler runs on the exiting thread, after `main` returned or `std::process::exit`. It
//! is registered right after a successful runtime call (a pinned allocation, or an event of a
//! buried allocation), i.e. after the runtime (CUDA's, or the CPU runtime, whose static
//! objects are constructed by then) initialised and registered its own teardown, so it runs
//! before that teardown (exit handlers run in reverse order of registration). Both backends
//! are handled: the memory of each is freed by its own runtime. It
//! frees only memory that no live object owns (the cache and the graveyard own it), only after
//! the GPU work that used it has completed, and it treats every CUDA failure (a runtime that
//! is already shutting down, a sticky error of a faulted kernel) as "leave the rest": the
//! memory stays leaked, exactly as without the handler. It never unwinds into the C library
//! (panics are caught) and never waits for a lock that another thread holds (it then skips
//! that part). GPU work still running at exit is waited for, as `cudaFreeHost` would anyway.

use std::ffi::c_int;
use std::sync::Once;

unsafe extern "C" {
    /// The C library's `atexit`.
    fn atexit(function: extern "C" fn()) -> c_int;
}

static REGISTER: Once = Once::new();

/// Registers the exit handler (once per process). Call after a successful runtime call.
pub(crate) fn register() {
    REGISTER.call_once(|| {
        // SAFETY: `atexit` is the C library's, taking a function pointer that is valid for the
        // rest of the process; `release_at_exit` never unwinds (it catches panics). When the
        // registration fails (non-zero), the memory is simply not released at exit.
        let _ = unsafe { atexit(release_at_exit) };
    });
}

/// The exit handler: see the module docs.
extern "C" fn release_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        crate::graveyard::drain_at_exit();
        crate::bounds_pool::release_at_exit();
        crate::pinned_pool::release_at_exit();
    });
}
