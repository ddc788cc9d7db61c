// An asynchronous copy-back keeps its target borrowed until the Pending is gone.
fn main() -> choreo::Result<()> {
    let stream = choreo::Stream::new()?;
    let tensor = choreo::DeviceTensor::<f32, 1>::zeros([4])?;
    let mut host = vec![0.0f32; 4];
    let pending = tensor.copy_to_host_async(&stream, (&mut host).into())?;
    host[0] = 1.0;
    pending.wait()
}
