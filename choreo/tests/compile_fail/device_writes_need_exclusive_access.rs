// Kernels that write a buffer need `&mut` access to it: no reader may hold it meanwhile.
fn main() -> choreo::Result<()> {
    let stream = choreo::Stream::new()?;
    let mut buffer = choreo::DeviceBuffer::<u32>::zeroed(4)?;
    let reader = &buffer;
    let _pointer = buffer.device_ptr_for_write(&stream)?;
    println!("{}", reader.len());
    Ok(())
}
