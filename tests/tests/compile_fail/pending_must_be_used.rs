// Dropping the guard of asynchronous work unused is flagged (`#[must_use]`): the results would
// never be delivered.
#![deny(unused_must_use)]
use choreo::{DeviceTensor, Stream};
use choreo_tests::co::timing;

fn main() -> choreo::Result<()> {
    let stream = Stream::new()?;
    let mut out = DeviceTensor::<u32, 1>::zeros([4])?;
    let mut sink = DeviceTensor::<u32, 1>::zeros([4])?;
    timing::spin_async(&stream, &mut out, &mut sink, 10, 1)?;
    Ok(())
}
