//! The `build.rs` API of choreo: turn `.co` files into a static library and safe Rust wrappers.
