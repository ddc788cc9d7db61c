//! A process-wide cache of page-locked host blocks, one per backend (the CPU runtime's
//! "pinned" blocks are plain host memory, but they are freed by its `cudaFreeHost`, which
//! waits for its streams like CUDA's does).
//!
//! `cudaFreeHost` synchronises the whole device (measured on an H200 with CUDA 13.0: it waits
//! for every running kernel, even on unrelated streams), and `cudaHostAlloc` is slow (about
//! 10 ms for 16 MiB). So pinned memory is allocated in power-of-two blocks that are kept for
//! reuse when released, like PyTorch's caching host allocator: the cache never exceeds the
//! peak of pinned memory in use at once (per block size), and
//! [`release_cached_pinned_memory`] gives it back to the system. At process exit the cache is
//! freed by the runtime's exit handler (see `at_exit`), so leak checkers do not report it.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::{Mutex, PoisonError, TryLockError};

use crate::backend::Backend;
use crate::error::check;
use crate::{Error, Result};

/// The smallest block (one page).
const MIN_BLOCK_BYTES: usize = 4096;

/// The alignment every block has (the largest alignment of a `DeviceRepr` type). CUDA's
/// pinned blocks are page aligned; the CPU runtime's are checked.
const BLOCK_ALIGN: usize = 256;

/// A page-locked allocation of `bytes` bytes (a power of two), aligned to [`BLOCK_ALIGN`], made
/// by the runtime of `backend`.
#[derive(Debug)]
pub(crate) struct PinnedBlock {
    pointer: NonNull<u8>,
    bytes: usize,
    backend: Backend,
}

// SAFETY: a block is plain host memory exclusively owned by whoever holds the PinnedBlock;
// cudaFreeHost (of either runtime) may be called from any thread.
unsafe impl Send for PinnedBlock {}

impl PinnedBlock {
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.pointer.as_ptr()
    }

    /// Frees the block (synchronises the device).
    fn free(self) -> Result<()> {
        let api = self.backend.api();
        // SAFETY: the pointer came from cudaHostAlloc of the same backend's runtime and is
        // freed once (`self` is consumed); the caller guarantees that no device work uses it
        // any more.
        check(api, unsafe { (api.free_host)(self.pointer.as_ptr().cast()) }, "cudaFreeHost")
    }
}

struct Cache {
    /// Released blocks by size class (`log2(bytes)`).
    free: Vec<Vec<PinnedBlock>>,
    cached_bytes: usize,
}

/// The caches of the CUDA runtime's blocks and of the CPU runtime's.
static CACHES: [Mutex<Cache>; 2] = [
    Mutex::new(Cache { free: Vec::new(), cached_bytes: 0 }),
    Mutex::new(Cache { free: Vec::new(), cached_bytes: 0 }),
];

/// The cache of `backend`'s blocks.
fn cache_of(backend: Backend) -> &'static Mutex<Cache> {
    match backend {
        Backend::Cuda => &CACHES[0],
        Backend::Cpu => &CACHES[1],
    }
}

/// A block of `backend` of at least `bytes` bytes (`bytes > 0`): a cached one if available,
/// else new.
pub(crate) fn acquire(backend: Backend, bytes: usize) -> Result<PinnedBlock> {
    let block_bytes = bytes
        .max(MIN_BLOCK_BYTES)
        .checked_next_power_of_two()
        .filter(|&size| size <= isize::MAX as usize)
        .ok_or(Error::OutOfHostMemory { bytes })?;
    let class = block_bytes.trailing_zeros() as usize;
    {
        let mut cache = cache_of(backend).lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(block) = cache.free.get_mut(class).and_then(Vec::pop) {
            cache.cached_bytes -= block.bytes;
            return Ok(block);
        }
    }
    let api = backend.api();
    let mut raw: *mut c_void = std::ptr::null_mut();
    // SAFETY: `raw` is a valid, writable pointer slot for the duration of the call.
    let status =
        unsafe { (api.host_alloc)(&mut raw, block_bytes, choreo_sys::cudaHostAllocPortable) };
    check(api, status, "cudaHostAlloc")?;
    let pointer = NonNull::new(raw.cast::<u8>()).ok_or(Error::OutOfHostMemory { bytes })?;
    let block = PinnedBlock { pointer, bytes: block_bytes, backend };
    if pointer.as_ptr().align_offset(BLOCK_ALIGN) != 0 {
        let _ = block.free();
        return Err(Error::InvalidArgument(format!(
            "the {backend} runtime returned pinned memory that is not aligned to \
             {BLOCK_ALIGN} bytes"
        )));
    }
    // The block will be cached when released: free the cache at exit.
    crate::at_exit::register();
    Ok(block)
}

/// Takes back a block that no GPU work uses any more, for reuse. Never blocks (freeing would).
pub(crate) fn release(block: PinnedBlock) {
    let mut cache = cache_of(block.backend).lock().unwrap_or_else(PoisonError::into_inner);
    let class = block.bytes.trailing_zeros() as usize;
    if cache.free.len() <= class {
        cache.free.resize_with(class + 1, Vec::new);
    }
    cache.cached_bytes += block.bytes;
    cache.free[class].push(block);
}

/// The number of bytes of pinned host memory cached for reuse (of both backends).
pub fn cached_pinned_memory() -> usize {
    CACHES
        .iter()
        .map(|cache| cache.lock().unwrap_or_else(PoisonError::into_inner).cached_bytes)
        .sum()
}

/// Frees the pinned host memory that the runtime keeps cached for reuse (by
/// [`crate::PinnedHostBuffer`] and the staging buffers of asynchronous copies), of both
/// backends. Freeing pinned memory synchronises the device, so this waits until all running
/// work of the backends that had cached blocks has completed. Returns the number of bytes
/// freed.
pub fn release_cached_pinned_memory() -> Result<usize> {
    let blocks: Vec<PinnedBlock> = CACHES
        .iter()
        .flat_map(|cache| {
            let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
            cache.cached_bytes = 0;
            cache.free.iter_mut().flat_map(std::mem::take).collect::<Vec<_>>()
        })
        .collect();
    let mut freed = 0;
    let mut result = Ok(());
    for block in blocks {
        let bytes = block.bytes;
        match block.free() {
            Ok(()) => freed += bytes,
            Err(error) => result = result.and(Err(error)),
        }
    }
    result.map(|()| freed)
}

/// Frees the cached blocks at process exit (see `at_exit`): a backend's cache is skipped when
/// another thread holds it; each backend stops at its first failure (e.g. a runtime that is
/// shutting down), leaving the rest of its blocks leaked.
pub(crate) fn release_at_exit() {
    for cache in &CACHES {
        let blocks: Vec<PinnedBlock> = {
            let mut cache = match cache.try_lock() {
                Ok(cache) => cache,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => continue,
            };
            cache.cached_bytes = 0;
            cache.free.iter_mut().flat_map(std::mem::take).collect()
        };
        // After a failure the rest stays allocated (a `PinnedBlock` has no destructor).
        for block in blocks {
            if block.free().is_err() {
                break;
            }
        }
    }
}
