//! Builds the kernels of the tests with choreo-build, into one library (output name
//! `co_kernels`): the Choreo kernels of the wrapper tests (`co/*.co`, included by `src/lib.rs`
//! as `choreo_tests::co`) and the hand-written GPU test kernels (`kernels/test_kernels.cu`,
//! whose `extern "C"` launchers `src/lib.rs` declares).
//!
//! Without nvcc, choreo-build builds stubs: a cargo warning says so, `choreo_test_kernels` and
//! `choreo_co_kernels` stay unset, the Choreo wrappers return `Error::NotBuilt`, and every test
//! that needs the kernels fails with a clear message (they never pass silently).

use choreo_build::UnwrapOrExit as _;

/// The hand-written GPU test kernels.
const TEST_KERNELS: &str = "kernels/test_kernels.cu";

/// The choreo-build output name (`choreo::include_kernels!("co_kernels")`).
const CO_KERNELS: &str = "co_kernels";

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(choreo_test_kernels)");
    println!("cargo::rustc-check-cfg=cfg(choreo_co_kernels)");
    let report = choreo_build::Builder::new()
        .files("co/*.co")
        .cuda_file(TEST_KERNELS)
        .build(CO_KERNELS)
        .unwrap_or_exit();
    // A library exists only when nvcc compiled (or found cached) every file: both kinds of
    // kernels are then linked.
    if report.library.is_some() {
        println!("cargo::rustc-cfg=choreo_test_kernels");
        println!("cargo::rustc-cfg=choreo_co_kernels");
    } else {
        println!(
            "cargo::warning=choreo-tests: the GPU test kernels ({TEST_KERNELS}) and co/*.co are \
             not compiled, so the tests that need them will fail"
        );
    }
}
