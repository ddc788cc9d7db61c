//! Never runs: the build script fails.
fn main() {}
