//! Builds the kernels of the tests.
//!
//! - choreo-build, into one library (output name `co_kernels`): the Choreo kernels of the
//!   wrapper tests (`co/*.co`, included by `src/lib.rs` as `choreo_tests::co`), for the CPU
//!   always and for CUDA when nvcc is there, and the hand-written CUDA test kernels
//!   (`kernels/test_kernels.cu`, whose `extern "C"` launchers `src/lib.rs` declares), with
//!   nvcc only.
//! - `cc`: the CPU versions of the hand-written test kernels (`kernels/test_kernels_cpu.cpp`),
//!   always, against the CPU runtime's headers that choreo-build writes next to the generated
//!   files (the runtime itself is the `choreo` crate's).
//!
//! Without nvcc, choreo-build builds the `.co` kernels for the CPU only (a cargo warning says
//! so): `choreo_test_kernels` and `choreo_co_kernels_cuda` stay unset, the wrappers refuse CUDA
//! streams, the CUDA launchers return `Error::NotBuilt`, and every GPU test fails with a clear
//! message (none passes silently); the CPU tests run as usual.

use std::path::PathBuf;

use choreo_build::UnwrapOrExit as _;

/// The hand-written GPU test kernels.
const TEST_KERNELS: &str = "kernels/test_kernels.cu";

/// Their CPU versions.
const TEST_KERNELS_CPU: &str = "kernels/test_kernels_cpu.cpp";

/// The choreo-build output name (`choreo::include_kernels!("co_kernels")`).
const CO_KERNELS: &str = "co_kernels";

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed={TEST_KERNELS_CPU}");
    println!("cargo::rustc-check-cfg=cfg(choreo_test_kernels)");
    println!("cargo::rustc-check-cfg=cfg(choreo_co_kernels_cuda)");
    println!("cargo::rustc-check-cfg=cfg(choreo_co_kernels_cpu)");
    let report = choreo_build::Builder::new()
        .files("co/*.co")
        .cuda_file(TEST_KERNELS)
        .build(CO_KERNELS)
        .unwrap_or_exit();
    // With a toolkit, nvcc compiled (or found cached) every file, the hand-written ones too.
    if report.toolkit.is_some() {
        println!("cargo::rustc-cfg=choreo_test_kernels");
        println!("cargo::rustc-cfg=choreo_co_kernels_cuda");
    } else {
        println!(
            "cargo::warning=choreo-tests: the GPU test kernels ({TEST_KERNELS}) and the CUDA \
             versions of co/*.co are not compiled, so the GPU tests will fail; the CPU tests run"
        );
    }
    if report.library.is_some() && report.files.iter().all(|file| file.cpu_object.is_some()) {
        println!("cargo::rustc-cfg=choreo_co_kernels_cpu");
    }

    // The headers of the CPU dialect: `<OUT_DIR>/choreo/<name>/{choreo.h,choreo_cpu.h}`, next to
    // the generated files (the index is `<OUT_DIR>/choreo/<name>.rs`).
    let generated: PathBuf = report.index_rs.with_extension("");
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .flag_if_supported("-pthread")
        .warnings(true)
        .include(&generated)
        .file(TEST_KERNELS_CPU)
        .compile("choreo_tests_cpu_kernels");
}
