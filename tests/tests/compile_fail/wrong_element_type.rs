// A device tensor of another element type than the `.co` signature says is rejected.
use choreo::DeviceTensor;
use choreo_tests::co::kinds;

fn main() -> choreo::Result<()> {
    let v = DeviceTensor::<f32, 1>::zeros([8])?;
    let halves = kinds::halve(&v)?;
    println!("{:?}", halves.as_slice());
    Ok(())
}
