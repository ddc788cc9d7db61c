// A `Pending` of a wrapper with a `&` parameter keeps the caller's data borrowed until it is
// waited for (its completion copies into it).
use choreo_tests::co::timing;

fn main() -> choreo::Result<()> {
    let mut acc = vec![0.0f32; 16];
    let pending = timing::spin_inout(acc.as_mut_slice().into(), 10)?;
    acc[0] = 1.0;
    let twice = pending.wait()?;
    println!("{:?} {:?}", acc, twice);
    Ok(())
}
