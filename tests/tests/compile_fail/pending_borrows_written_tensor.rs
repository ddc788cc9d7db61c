// A `Pending` of a wrapper that writes a device tensor keeps it borrowed mutably: the tensor
// cannot be used (here: written) until the guard is gone.
use choreo::{DeviceTensor, Stream};
use choreo_tests::co::timing;

fn main() -> choreo::Result<()> {
    let stream = Stream::new()?;
    let mut out = DeviceTensor::<u32, 1>::zeros([4])?;
    let mut sink = DeviceTensor::<u32, 1>::zeros([4])?;
    let pending = timing::spin_async(&stream, &mut out, &mut sink, 10, 1)?;
    out.buffer_mut().fill_zero(&stream)?;
    pending.wait()
}
