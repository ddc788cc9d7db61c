//! Translates the Choreo side of the GPU benchmarks and compiles it, with its hand-written CUDA
//! twin, into static libraries with the same nvcc and flags, so the two sides differ only in how
//! they were written:
//!
//! - `bench`: `kernels/bench.co` and `kernels/reference.cu` (overlap, launch, bandwidth);
//! - `tiled`: `kernels/tiled.co` and `kernels/tiled_reference.cu` (the `tiled` section: shared
//!   tiles, asynchronous copies), a library of its own so that its generated module
//!   (`gpu::tiled::tiled`) lives in the section's Rust module;
//! - `tma`: `kernels/tma.co` (the `tma` section: TMA copies and transpose, tier 3);
//! - `gemm`: `kernels/gemm.co` (the Choreo GEMM) and `kernels/gemm_wgmma.cu` (the `gemm`
//!   section: the hand-written Hopper GEMM on the
//!   compiler's WGMMA library `choreo-compiler/src/emit/cuda/wgmma.cuh`, and cuBLAS through
//!   dlopen) and `kernels/wgmma_unit.cu` (one-instruction checks of the library for the GPU
//!   test), sm_90a; `kernels/cublaslt.cu` (cuBLASLt through dlopen, for the `gemm-fp8`
//!   section's fp8 `gemm_e4m3` of `gemm.co`); `kernels/gemm_sync.co` (the Choreo mma.sync GEMM)
//!   and `kernels/gemm_sync_hand.cu` (its hand-written twin) for the `gemm-sync` section;
//!   `kernels/cudnn_sdpa.cu` (cuDNN's attention forward through dlopen, host code only: the
//!   attention section's reference).
//! - `attention`: `kernels/attention.co` (the Choreo attention forward, sm_90a) and
//!   `kernels/attention_reference.cu` (a plain CUDA attention that checks it) for the
//!   `attention` section.
//!
//! Without nvcc (stub build) the harness still compiles; `choreo-bench gpu` then says that the
//! kernels were not built and exits with status 1. `cfg(choreo_bench_kernels)` is set when they
//! were (both libraries).

use choreo_build::UnwrapOrExit as _;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(choreo_bench_kernels)");
    let bench = choreo_build::Builder::new()
        .file("kernels/bench.co")
        .cuda_file("kernels/reference.cu")
        .build("bench")
        .unwrap_or_exit();
    let tiled = choreo_build::Builder::new()
        .file("kernels/tiled.co")
        .cuda_file("kernels/tiled_reference.cu")
        .build("tiled")
        .unwrap_or_exit();
    // TMA needs sm_90: pinned, whatever the default arch.
    let tma = choreo_build::Builder::new()
        .file("kernels/tma.co")
        .arch("sm_90a")
        .build("tma")
        .unwrap_or_exit();
    // WGMMA and setmaxnreg need sm_90a: pinned.
    let wgmma_dir = "../choreo-compiler/src/emit/cuda";
    println!("cargo::rerun-if-changed={wgmma_dir}/wgmma.cuh");
    let gemm = choreo_build::Builder::new()
        .file("kernels/gemm.co")
        .file("kernels/gemm_sync.co")
        .cuda_file("kernels/gemm_wgmma.cu")
        .cuda_file("kernels/gemm_sync_hand.cu")
        .cuda_file("kernels/wgmma_unit.cu")
        .cuda_file("kernels/cublaslt.cu")
        .cuda_file("kernels/cudnn_sdpa.cu")
        .include(wgmma_dir)
        .arch("sm_90a")
        .build("gemm")
        .unwrap_or_exit();
    let attention = choreo_build::Builder::new()
        .file("kernels/attention.co")
        .cuda_file("kernels/attention_reference.cu")
        .arch("sm_90a")
        .build("attention")
        .unwrap_or_exit();
    if bench.library.is_some()
        && tiled.library.is_some()
        && tma.library.is_some()
        && gemm.library.is_some()
        && attention.library.is_some()
    {
        println!("cargo::rustc-cfg=choreo_bench_kernels");
    }
}
