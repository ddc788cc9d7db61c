//! Translates the Choreo side of the GPU benchmarks (`kernels/bench.co`) and compiles it, with
//! its hand-written CUDA twin (`kernels/reference.cu`), into one static library with the same
//! nvcc and flags, so the two sides differ only in how they were written.
//!
//! Without nvcc (stub build) the harness still compiles; `choreo-bench gpu` then says that the
//! kernels were not built and exits with status 1. `cfg(choreo_bench_kernels)` is set when they
//! were.

use choreo_build::UnwrapOrExit as _;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(choreo_bench_kernels)");
    let report = choreo_build::Builder::new()
        .files("kernels/*.co")
        .cuda_file("kernels/reference.cu")
        .build("bench")
        .unwrap_or_exit();
    if report.library.is_some() {
        println!("cargo::rustc-cfg=choreo_bench_kernels");
    }
}
