//! The memory of the bounds records of kernel calls ([`crate::kernels::BoundsRecord`]): slots
//! of page-locked host memory mapped into the devices' address space, from a process-wide pool
//! per backend.
//!
//! A call's kernels write its record only when a bounds check fails, through the slot's device
//! address; the host zeroes the slot before the call and reads it after the call's work has
//! completed. So a record costs no device work at all: no allocation, memset or copy is
//! enqueued on any stream, and no stream waits for another. (A record in device memory needed
//! all three, a few µs between consecutive kernels of a stream.)
//!
//! # Slots and blocks
//!
//! Blocks of [`BLOCK_BYTES`] are allocated with `cudaHostAlloc(cudaHostAllocMapped |
//! cudaHostAllocPortable)` (the CPU runtime's `cudaHostAlloc`: plain host memory) and cut into
//! [`SLOT_BYTES`] slots (one cache line; a record is 32 bytes). A block's device address comes
//! from `cudaHostGetDevicePointer`, once per device (with the device current); on the CPU the
//! device address is the host address. Blocks are never freed while the process runs (a few
//! KiB: as many slots as calls with bounds records were in flight at once); at exit, blocks
//! none of whose slots is out are freed.
//!
//! # Soundness
//!
//! A slot is memory that the device may write while the host also owns it, so the pool keeps
//! one rule: **a slot is handed out only when no device work can write it.**
//!
//! - A new slot is written by nobody. [`acquire`] zeroes a slot (a host write) and hands it to
//!   one [`Slot`], its only owner.
//! - The owner gives the slot back with [`release`] only when no work that got its device
//!   address can still run: it was never handed to an entry, or that call's work has
//!   completed (its events were waited for or found complete).
//! - Otherwise the owner [`retire`]s it with the events of the call's work (the events of its
//!   lazy points, recorded at or after the end of the work they stand for; see `crate::point`):
//!   it becomes free only once every event has been found complete. Slots whose events report
//!   an error are leaked (after a fault it is unknown whether the work still runs).
//! - A slot whose owner is forgotten (`mem::forget` of a `Pending`) is never given back, so
//!   it is never reused; its block counts it as out and is never freed, so the device can
//!   still write it, even at exit.
//!
//! Device atomics on mapped pinned memory are atomic among device threads (all a record needs:
//! the first failing check wins). The host reads a slot only after the work of its call has
//! completed, with volatile reads; completion (an event synchronisation or a query that found
//! it complete) orders the device's writes before them.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};

use crate::backend::Backend;
use crate::device::DeviceGuard;
use crate::error::check;
use crate::event::Event;
use crate::{Device, Error, Result};

/// The words of one record (`choreo_compiler::lower::abi::BOUNDS_RECORD`: 32 bytes).
pub(crate) const RECORD_WORDS: usize = 4;

/// The bytes of one slot: one cache line, so that the host zeroing a slot never shares a line
/// with another call's record.
pub(crate) const SLOT_BYTES: usize = 64;

/// The bytes of one block (a page).
pub(crate) const BLOCK_BYTES: usize = 4096;

/// The slots of one block.
pub(crate) const SLOTS_PER_BLOCK: usize = BLOCK_BYTES / SLOT_BYTES;

/// How many retiring slots beyond the first busy one [`acquire`] checks when no slot is free
/// (slots of one stream complete in order, so the oldest is normally the first to be free;
/// the window lets slots of other streams pass a slow one).
const RETIRE_WINDOW: usize = 4;

/// Where a slot is: its block and its index in the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SlotId {
    block: usize,
    index: usize,
}

/// A mapped pinned block.
struct Block {
    /// The host address; `None` once freed at exit.
    base: Option<NonNull<u8>>,
    /// The device address of `base`, per device that asked for it.
    device_bases: Vec<(Device, usize)>,
    /// Slots handed out or retiring (not free): the block is freed at exit only at 0.
    out: usize,
}

/// A retiring slot: free once all of `events` have completed.
struct Retiring {
    events: Vec<Arc<Event>>,
    slot: SlotId,
}

/// The pool of one backend.
struct Pool {
    blocks: Vec<Block>,
    free: Vec<SlotId>,
    retiring: VecDeque<Retiring>,
}

// SAFETY: the block addresses are plain host memory, owned by the pool; the pool never
// dereferences them (slots are written by their owners) and frees them with the backend's
// `cudaFreeHost`, which may be called from any thread. The events are `Send`.
unsafe impl Send for Pool {}

/// The pools of the CUDA runtime's blocks and of the CPU runtime's.
static POOLS: [Mutex<Pool>; 2] = [
    Mutex::new(Pool { blocks: Vec::new(), free: Vec::new(), retiring: VecDeque::new() }),
    Mutex::new(Pool { blocks: Vec::new(), free: Vec::new(), retiring: VecDeque::new() }),
];

fn pool_of(backend: Backend) -> MutexGuard<'static, Pool> {
    let pool = match backend {
        Backend::Cuda => &POOLS[0],
        Backend::Cpu => &POOLS[1],
    };
    pool.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One slot of the pool, owned by one bounds record: see the module docs.
#[derive(Debug)]
pub(crate) struct Slot {
    backend: Backend,
    id: SlotId,
    /// The slot's host address (`RECORD_WORDS` words, 8-aligned).
    host: NonNull<u64>,
    /// The slot's address for the device it was acquired for.
    device: *mut u64,
}

// SAFETY: a slot is exclusively owned host memory (see the module docs); its addresses are
// only dereferenced by its owner (the host, through `&mut self` or `self`) and by the device
// work of the one call it is handed to.
unsafe impl Send for Slot {}
// SAFETY: `&Slot` gives access to the addresses only, never to the memory.
unsafe impl Sync for Slot {}

impl Slot {
    /// The address the device work of a call on the slot's device writes the record through.
    pub(crate) fn device_ptr(&self) -> *mut u64 {
        self.device
    }

    /// The slot's host address (for tests: which slot a record got).
    #[cfg(test)]
    pub(crate) fn host_address(&self) -> usize {
        self.host.as_ptr() as usize
    }

    /// The record's words.
    ///
    /// # Safety
    ///
    /// No device work that can write the slot may still be running: the slot was never handed
    /// to an entry, or the work of the call it was handed to has completed.
    pub(crate) unsafe fn read(&self) -> [u64; RECORD_WORDS] {
        let mut words = [0; RECORD_WORDS];
        for (index, word) in words.iter_mut().enumerate() {
            // SAFETY: the slot holds `RECORD_WORDS` aligned words of live pinned memory (its
            // block is never freed while the slot is out); nothing writes it now (the caller's
            // contract), and the completion that the caller observed orders the device's
            // writes before this read. Volatile: the memory is written outside Rust's view.
            *word = unsafe { self.host.as_ptr().add(index).read_volatile() };
        }
        words
    }
}

/// A zeroed slot for a call on `device`: a free one if there is one (after giving back the
/// retiring slots whose work has completed), else one of a new block.
pub(crate) fn acquire(device: Device) -> Result<Slot> {
    let backend = device.backend();
    let mut pool = pool_of(backend);
    let id = match pool.take_free() {
        Some(id) => id,
        None => pool.grow(backend)?,
    };
    let device_base = match pool.device_base(id.block, device) {
        Ok(base) => base,
        Err(error) => {
            pool.free.push(id);
            return Err(error);
        }
    };
    let block = &mut pool.blocks[id.block];
    let Some(base) = block.base else {
        return Err(Error::InvalidArgument("the bounds record pool was released".into()));
    };
    block.out += 1;
    let offset = id.index * SLOT_BYTES;
    // SAFETY: `offset` is within the block (`index < SLOTS_PER_BLOCK`); the block is a live
    // allocation of `BLOCK_BYTES` (never freed while the pool hands out its slots).
    let host = unsafe { base.add(offset) }.cast::<u64>();
    for index in 0..RECORD_WORDS {
        // SAFETY: the slot is ours alone and no device work can write it (it was free: see the
        // module docs); the words are within the block and 8-aligned (blocks are page aligned
        // and slots 64 bytes). The zeroes reach the device before the kernels that get the
        // slot are launched (the launch follows this write in program order, and mapped
        // memory is coherent).
        unsafe { host.as_ptr().add(index).write_volatile(0) };
    }
    let device_ptr = (device_base + offset) as *mut u64;
    Ok(Slot { backend, id, host, device: device_ptr })
}

/// Gives back `slot`, which no device work can write any more (see the module docs).
pub(crate) fn release(slot: Slot) {
    pool_of(slot.backend).put_free(slot.id);
}

/// Gives back `slot` once every one of `events` has completed: now if they already have, else
/// later (see [`acquire`]). A slot whose events report an error stays leaked.
pub(crate) fn retire(slot: Slot, events: Vec<Arc<Event>>) {
    let mut pool = pool_of(slot.backend);
    match completion(&events) {
        Some(true) => pool.put_free(slot.id),
        Some(false) => pool.retiring.push_back(Retiring { events, slot: slot.id }),
        None => {}
    }
}

/// Never gives back `slot` (its work's end is unknown): it stays out, and its block is never
/// freed.
pub(crate) fn leak(slot: Slot) {
    let _ = slot;
}

/// `Some(true)` when all of `events` have completed, `Some(false)` when some has not, `None`
/// when one reports an error.
fn completion(events: &[Arc<Event>]) -> Option<bool> {
    for event in events {
        match event.query() {
            Ok(true) => {}
            Ok(false) => return Some(false),
            Err(_) => return None,
        }
    }
    Some(true)
}

impl Pool {
    /// A free slot, after giving back the retiring slots found complete: from the front of the
    /// queue, and up to [`RETIRE_WINDOW`] more behind the first busy one when nothing is free.
    fn take_free(&mut self) -> Option<SlotId> {
        while let Some(front) = self.retiring.front() {
            match completion(&front.events) {
                Some(false) => break,
                done => {
                    let retiring = self.retiring.pop_front()?;
                    if done == Some(true) {
                        self.put_free(retiring.slot);
                    }
                }
            }
        }
        if self.free.is_empty() {
            let mut index = 1;
            let mut checked = 0;
            while index < self.retiring.len() && checked < RETIRE_WINDOW {
                checked += 1;
                match completion(&self.retiring[index].events) {
                    Some(false) => index += 1,
                    done => {
                        if let Some(retiring) = self.retiring.remove(index) {
                            if done == Some(true) {
                                self.put_free(retiring.slot);
                            }
                        }
                    }
                }
            }
        }
        self.free.pop()
    }

    fn put_free(&mut self, id: SlotId) {
        if let Some(block) = self.blocks.get_mut(id.block) {
            block.out = block.out.saturating_sub(1);
        }
        self.free.push(id);
    }

    /// Allocates a new block; returns its first slot and puts the others on the free list.
    fn grow(&mut self, backend: Backend) -> Result<SlotId> {
        let api = backend.api();
        let mut raw: *mut c_void = std::ptr::null_mut();
        // SAFETY: `raw` is a valid, writable pointer slot for the duration of the call.
        let status = unsafe {
            (api.host_alloc)(
                &mut raw,
                BLOCK_BYTES,
                choreo_sys::cudaHostAllocMapped | choreo_sys::cudaHostAllocPortable,
            )
        };
        check(api, status, "cudaHostAlloc")?;
        let base =
            NonNull::new(raw.cast::<u8>()).ok_or(Error::OutOfHostMemory { bytes: BLOCK_BYTES })?;
        if base.as_ptr().align_offset(SLOT_BYTES) != 0 {
            // SAFETY: the block came from this backend's cudaHostAlloc just now and is freed
            // once; nothing used it.
            let _ = unsafe { (api.free_host)(raw) };
            return Err(Error::InvalidArgument(format!(
                "the {backend} runtime returned pinned memory that is not aligned to \
                 {SLOT_BYTES} bytes"
            )));
        }
        // Free the pool's blocks at exit.
        crate::at_exit::register();
        let block = self.blocks.len();
        self.blocks.push(Block { base: Some(base), device_bases: Vec::new(), out: 0 });
        // Handed out lowest first.
        self.free.extend((1..SLOTS_PER_BLOCK).rev().map(|index| SlotId { block, index }));
        Ok(SlotId { block, index: 0 })
    }

    /// The device address of block `block` for `device`, asked once per device.
    fn device_base(&mut self, block: usize, device: Device) -> Result<usize> {
        let Some(entry) = self.blocks.get_mut(block) else {
            return Err(Error::InvalidArgument("no such bounds record block".into()));
        };
        if let Some(&(_, base)) = entry.device_bases.iter().find(|(d, _)| *d == device) {
            return Ok(base);
        }
        let Some(host) = entry.base else {
            return Err(Error::InvalidArgument("the bounds record pool was released".into()));
        };
        let _guard = DeviceGuard::enter(device)?;
        let api = device.api();
        let mut mapped: *mut c_void = std::ptr::null_mut();
        // SAFETY: `mapped` is a valid, writable pointer slot; `host` is the start of a live
        // mapped allocation of this backend's runtime; the device is current.
        let status = unsafe { (api.host_get_device_pointer)(&mut mapped, host.as_ptr().cast(), 0) };
        check(api, status, "cudaHostGetDevicePointer")?;
        if mapped.is_null() {
            return Err(Error::InvalidArgument(
                "cudaHostGetDevicePointer returned a null device address".into(),
            ));
        }
        entry.device_bases.push((device, mapped as usize));
        Ok(mapped as usize)
    }
}

/// At process exit (see `at_exit`): waits for the work of the retiring slots, then frees the
/// blocks none of whose slots is out. A pool that another thread holds is skipped; each backend
/// stops at its first failure (e.g. a runtime that is shutting down), leaving the rest leaked.
pub(crate) fn release_at_exit() {
    for (pool, backend) in POOLS.iter().zip([Backend::Cuda, Backend::Cpu]) {
        let mut pool = match pool.try_lock() {
            Ok(pool) => pool,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => continue,
        };
        for retiring in std::mem::take(&mut pool.retiring) {
            if retiring.events.iter().all(|event| event.synchronize().is_ok()) {
                pool.put_free(retiring.slot);
            }
        }
        let api = backend.api();
        let mut freed = Vec::new();
        for (index, block) in pool.blocks.iter_mut().enumerate() {
            let Some(base) = block.base.filter(|_| block.out == 0) else {
                continue;
            };
            // SAFETY: the block came from this backend's cudaHostAlloc and is freed once (its
            // base is taken); none of its slots is out, so no owner and no device work uses it.
            let status = unsafe { (api.free_host)(base.as_ptr().cast()) };
            if !status.is_success() {
                break;
            }
            block.base = None;
            freed.push(index);
        }
        pool.free.retain(|id| !freed.contains(&id.block));
    }
}

/// The slots of `backend`'s pool that are free and retiring (for tests).
#[cfg(test)]
pub(crate) fn counts(backend: Backend) -> (usize, usize) {
    let pool = pool_of(backend);
    (pool.free.len(), pool.retiring.len())
}
