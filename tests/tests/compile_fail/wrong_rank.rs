// Host data of another rank than the `.co` signature says is rejected (`a` is `f32 [M, N]`).
use choreo::HostView;
use choreo_tests::co::kinds;

fn main() -> choreo::Result<()> {
    let a = vec![1.0f32; 12];
    let x = vec![1.0f32; 4];
    let mut y = vec![0.0f32; 3];
    kinds::gemv(HostView::new(&a, [12])?, x.as_slice().into(), y.as_mut_slice().into())?;
    Ok(())
}
