// One tensor cannot be both the read-only input and the written output of a wrapper.
use choreo::DeviceTensor;
use choreo_tests::co::kinds;

fn main() -> choreo::Result<()> {
    let mut t = DeviceTensor::<f32, 1>::zeros([64])?;
    kinds::axpy(&t, &mut t, 2.0)?;
    Ok(())
}
