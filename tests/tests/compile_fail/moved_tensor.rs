// A tensor whose buffer was moved out (`into_buffer`) cannot be passed to a wrapper: the
// "already-moved tensor" of the bad-input checks is a compile error, not a run-time one.
use choreo::DeviceTensor;
use choreo_tests::co::kinds;

fn main() -> choreo::Result<()> {
    let x = DeviceTensor::<f32, 1>::zeros([64])?;
    let mut y = DeviceTensor::<f32, 1>::zeros([64])?;
    let storage = x.into_buffer();
    kinds::axpy(&x, &mut y, 2.0)?;
    drop(storage);
    Ok(())
}
