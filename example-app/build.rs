//! Compiles the example's CUDA kernels with nvcc into a static library.
//!
//! The toolkit comes from choreo-sys (`DEP_CUDART_ROOT`, found by its build script). Without a
//! toolkit the app still builds, and tells at run time that its kernels were not built.
use std::path::PathBuf;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(example_kernels_built)");
    println!("cargo::rerun-if-changed=kernels/example.cu");
    println!("cargo::rerun-if-env-changed=CHOREO_CUDA_ARCH");
    let Some(root) = std::env::var_os("DEP_CUDART_ROOT").map(PathBuf::from) else {
        println!(
            "cargo::warning=no CUDA toolkit found: the example's kernels are not built (run ci/install-cuda)"
        );
        return;
    };
    let nvcc = root.join("bin").join("nvcc");
    if !nvcc.exists() {
        println!(
            "cargo::warning=no nvcc in {}: the example's kernels are not built",
            root.display()
        );
        return;
    }
    let arch = std::env::var("CHOREO_CUDA_ARCH").unwrap_or_else(|_| "sm_90a".to_string());
    let compute = arch.replace("sm_", "compute_");
    // cc takes nvcc from the `NVCC` variable (`.compiler()` would name the host compiler).
    // SAFETY: build scripts are single-threaded here; nothing reads the environment concurrently.
    unsafe { std::env::set_var("NVCC", &nvcc) };
    cc::Build::new()
        .cuda(true)
        .flag("-std=c++17")
        .flag(format!("-gencode=arch={compute},code={arch}"))
        .file("kernels/example.cu")
        .compile("example_kernels");
    println!("cargo::rustc-cfg=example_kernels_built");
}
