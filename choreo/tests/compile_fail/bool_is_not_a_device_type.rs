// A kernel could leave any byte in a bool's place, so bool cannot live in device buffers.
fn main() -> choreo::Result<()> {
    let _flags = choreo::DeviceBuffer::<bool>::zeroed(4)?;
    Ok(())
}
