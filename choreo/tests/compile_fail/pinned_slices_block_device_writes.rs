// While host code reads pinned memory, no copy may be enqueued that writes it.
fn main() -> choreo::Result<()> {
    let stream = choreo::Stream::new()?;
    let mut pinned = choreo::PinnedHostBuffer::<u32>::new(4)?;
    let device = choreo::DeviceBuffer::<u32>::zeroed(4)?;
    let view = pinned.as_slice()?;
    device.copy_to_pinned(&stream, &mut pinned)?;
    println!("{}", view[0]);
    Ok(())
}
