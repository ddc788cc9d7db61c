//! Translates the example's Choreo kernels (`kernels/*.co`) to CUDA, compiles them with nvcc and
//! generates their safe Rust wrappers (`choreo::include_kernels!()` in `main.rs`).
fn main() {
    choreo_build::compile("kernels/*.co");
}
