// The events of a Pending say when its work is done; re-recording one would make `wait` return
// early, so they are only handed out shared, and recording needs `&mut`.
fn main() -> choreo::Result<()> {
    let stream = choreo::Stream::new()?;
    let pending = choreo::Pending::after(&[&stream], || Ok(()))?;
    pending.events()?[0].record(&stream)?;
    pending.wait()
}
