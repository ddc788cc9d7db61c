//! Example application.
fn main() {}
