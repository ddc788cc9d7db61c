// A `Pending` is bound to the streams its work runs on: they cannot be dropped before it.
use choreo::{DeviceTensor, Stream};
use choreo_tests::co::timing;

fn main() -> choreo::Result<()> {
    let stream = Stream::new()?;
    let mut out = DeviceTensor::<u32, 1>::zeros([4])?;
    let pending = timing::spin_count(&stream, &mut out, 10)?;
    drop(stream);
    let count = pending.wait()?;
    println!("{count}");
    Ok(())
}
