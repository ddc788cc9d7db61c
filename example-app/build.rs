//! Translates the example's Choreo kernels to CUDA, compiles them with nvcc and generates their
//! safe Rust wrappers (`choreo::include_kernels!` in `main.rs`); the CPU version of every kernel
//! is always built too.
use choreo_build::UnwrapOrExit as _;

fn main() {
    // kernels/*.co: for the default architectures (sm_80 and sm_90), the GPU found at build
    // time, or CHOREO_CUDA_ARCH.
    choreo_build::compile("kernels/*.co");
    // The GEMM and the attention forward use WGMMA and setmaxnreg, which only sm_90a (Hopper)
    // has: built for it whatever the list above is. On another GPU their calls return a CUDA
    // error.
    choreo_build::Builder::new()
        .file("kernels/hopper/gemm.co")
        .file("kernels/hopper/attention.co")
        .arch("sm_90a")
        .build("hopper")
        .unwrap_or_exit();
}
