//! Builds the GPU test kernels (`kernels/test_kernels.cu`) with the nvcc of the CUDA toolkit
//! that choreo-sys links (`DEP_CUDART_ROOT`, from its `links = "cudart"` metadata), and the
//! Choreo kernels of the wrapper tests (`co/*.co`) with choreo-build (output name
//! `co_kernels`, included by `src/lib.rs` as `choreo_tests::co`).
//!
//! Without a toolkit the kernels are not built: a cargo warning says so, `choreo_test_kernels`
//! stays unset, the Choreo wrappers are stubs that return `Error::NotBuilt`, and every test that
//! needs the kernels fails with a clear message (they never pass silently).

use std::env;
use std::path::PathBuf;

use choreo_build::UnwrapOrExit as _;

const SOURCE: &str = "kernels/test_kernels.cu";

/// The choreo-build output name of `co/*.co`.
const CO_KERNELS: &str = "co_kernels";

fn main() {
    build_co_kernels();
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed={SOURCE}");
    println!("cargo::rerun-if-env-changed=DEP_CUDART_ROOT");
    println!("cargo::rerun-if-env-changed=DEP_CUDART_LINKED");
    println!("cargo::rustc-check-cfg=cfg(choreo_test_kernels)");

    let linked = env::var("DEP_CUDART_LINKED").is_ok_and(|value| value == "1");
    let Some(root) = env::var_os("DEP_CUDART_ROOT").filter(|_| linked).map(PathBuf::from) else {
        println!(
            "cargo::warning=choreo-tests: no CUDA toolkit (choreo-sys found none): the GPU test \
             kernels are not built, and the tests that need them will fail"
        );
        return;
    };
    let nvcc = root.join("bin").join(if cfg!(windows) { "nvcc.exe" } else { "nvcc" });
    if !nvcc.is_file() {
        println!(
            "cargo::warning=choreo-tests: {} does not exist: the GPU test kernels are not built, \
             and the tests that need them will fail",
            nvcc.display()
        );
        return;
    }

    // cc takes nvcc from the `NVCC` variable (`.compiler()` would name the host compiler).
    // SAFETY: this build script is single-threaded; nothing reads the environment concurrently.
    unsafe { env::set_var("NVCC", &nvcc) };
    let result = cc::Build::new()
        .cuda(true)
        // choreo-sys already links cudart_static (with a search path that suits pip layouts).
        .cudart("none")
        // No device debug code (-G): the spin kernel's timing should not depend on the profile.
        .debug(false)
        .opt_level(2)
        .flag("-gencode")
        .flag("arch=compute_90a,code=sm_90a")
        .flag("-gencode")
        .flag("arch=compute_90,code=compute_90")
        .file(SOURCE)
        .try_compile("choreo_test_kernels");
    if let Err(error) = result {
        eprintln!("error: choreo-tests: nvcc failed to compile {SOURCE}: {error}");
        std::process::exit(1);
    }
    println!("cargo::rustc-cfg=choreo_test_kernels");
}

/// Translates and compiles `co/*.co` with choreo-build. Sets `choreo_co_kernels` when the
/// kernels were compiled (not a stub build).
fn build_co_kernels() {
    println!("cargo::rustc-check-cfg=cfg(choreo_co_kernels)");
    let report = choreo_build::Builder::new().files("co/*.co").build(CO_KERNELS).unwrap_or_exit();
    if report.library.is_some() {
        println!("cargo::rustc-cfg=choreo_co_kernels");
    }
}
