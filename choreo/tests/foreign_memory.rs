//! `DeviceBuffer::from_raw_parts`: memory allocated elsewhere, wrapped without a copy, on the
//! CPU device (whose "device" memory is host memory, so a `Vec` can play the foreign
//! allocation). The owner is dropped exactly once, after the tracked accesses have completed;
//! a leaked buffer never drops it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use choreo::{Device, DeviceBuffer, DeviceTensor, Error, HostView, Stream};

/// A foreign allocation: a `Vec` whose drop is counted.
struct Owner {
    data: Vec<f32>,
    drops: Arc<AtomicUsize>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

fn owner(values: &[f32]) -> (Owner, *mut f32, Arc<AtomicUsize>) {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut data = values.to_vec();
    // The Vec's heap block does not move when the Vec is moved into the buffer.
    let pointer = data.as_mut_ptr();
    (Owner { data, drops: Arc::clone(&drops) }, pointer, drops)
}

#[test]
fn foreign_memory_is_used_in_place_and_its_owner_dropped_once_idle() -> choreo::Result<()> {
    let stream = Stream::new_on_device(Device::cpu())?;
    let (owner, pointer, drops) = owner(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(owner.data.len(), 6);
    // SAFETY: `pointer` is the owner's block of 6 initialised f32s in host memory (the CPU
    // device's memory), which stays allocated until the owner is dropped; nothing else uses it.
    let buffer = unsafe { DeviceBuffer::from_raw_parts(&stream, pointer, 6, owner)? };
    assert_eq!(buffer.len(), 6);
    assert_eq!(buffer.to_vec(&stream)?, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);

    // As a tensor, written and read through the runtime on another stream.
    let mut tensor = DeviceTensor::from_buffer(buffer, [2, 3])?;
    let other = Stream::new_on_device(Device::cpu())?;
    let values = [6.0f32, 5.0, 4.0, 3.0, 2.0, 1.0];
    tensor.copy_from_host(&other, HostView::new(&values, [2, 3])?)?;
    assert_eq!(tensor.to_host(&stream)?.as_slice(), values);
    // The write went to the foreign memory itself (no copy was made).
    let copy = tensor.buffer().try_clone(&other)?;
    assert_eq!(drops.load(Ordering::SeqCst), 0, "the owner lives while the buffer does");
    drop(tensor);
    stream.synchronize()?;
    other.synchronize()?;
    // Dropping an idle buffer releases at once (a busy one at a later runtime call).
    let _ = DeviceBuffer::<f32>::zeroed_on(&stream, 1)?;
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the owner is dropped exactly once");
    assert_eq!(copy.to_vec(&stream)?, values);
    Ok(())
}

#[test]
fn the_wrapped_memory_is_not_copied() -> choreo::Result<()> {
    let stream = Stream::new_on_device(Device::cpu())?;
    let (owner, pointer, _drops) = owner(&[0.0; 4]);
    // SAFETY: as above; the test reads the block through `pointer` only after the buffer's
    // write has completed (`synchronize`), while the owner is still alive (the buffer is).
    let mut buffer = unsafe { DeviceBuffer::from_raw_parts(&stream, pointer, 4, owner)? };
    buffer.copy_from_host(&stream, &[7.0, 8.0, 9.0, 10.0])?;
    buffer.synchronize()?;
    // SAFETY: the block is alive (owned by `buffer`) and no access is pending.
    let seen = unsafe { std::slice::from_raw_parts(pointer, 4) }.to_vec();
    assert_eq!(seen, [7.0, 8.0, 9.0, 10.0]);
    Ok(())
}

#[test]
fn bad_pointers_are_errors_and_empty_buffers_need_none() -> choreo::Result<()> {
    let stream = Stream::new_on_device(Device::cpu())?;
    let drops = Arc::new(AtomicUsize::new(0));
    let counted = || Owner { data: Vec::new(), drops: Arc::clone(&drops) };
    // SAFETY: the calls are refused before the pointer is used.
    let null =
        unsafe { DeviceBuffer::<f32>::from_raw_parts(&stream, std::ptr::null_mut(), 4, counted()) };
    assert!(matches!(&null, Err(Error::InvalidArgument(m)) if m.contains("null")), "{null:?}");
    let mut block = [0u64; 4];
    let misaligned = block.as_mut_ptr().cast::<u8>().wrapping_add(1).cast::<f32>();
    // SAFETY: as above.
    let result = unsafe { DeviceBuffer::from_raw_parts(&stream, misaligned, 2, counted()) };
    assert!(
        matches!(&result, Err(Error::InvalidArgument(m)) if m.contains("aligned")),
        "{result:?}"
    );
    assert_eq!(drops.load(Ordering::SeqCst), 2, "a refused owner is dropped at once");
    // SAFETY: zero elements: the pointer is never used.
    let empty = unsafe {
        DeviceBuffer::<f32>::from_raw_parts(&stream, std::ptr::null_mut(), 0, counted())?
    };
    assert!(empty.is_empty());
    assert_eq!(empty.to_vec(&stream)?, Vec::<f32>::new());
    drop(empty);
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    Ok(())
}

/// `mem::forget` of the buffer leaks the foreign memory: its owner is never dropped (and the
/// memory never freed), which is safe.
#[test]
fn a_forgotten_buffer_leaks_its_owner() -> choreo::Result<()> {
    let stream = Stream::new_on_device(Device::cpu())?;
    let (owner, pointer, drops) = owner(&[1.0, 2.0]);
    // SAFETY: as in the first test.
    let buffer = unsafe { DeviceBuffer::from_raw_parts(&stream, pointer, 2, owner)? };
    let pending = buffer.to_vec(&stream)?;
    std::mem::forget(buffer);
    stream.synchronize()?;
    let _ = DeviceBuffer::<f32>::zeroed_on(&stream, 1)?;
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    assert_eq!(pending, [1.0, 2.0]);
    Ok(())
}
