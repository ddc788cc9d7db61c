//! Build script of choreo: compiles the CPU runtime into the crate.
//!
//! The sources are the single copy that `choreo-compiler` ships (`include/choreo_cpu.h`,
//! `include/choreo_cpu_runtime.cpp`, exposed as `choreo_compiler::runtime::{CHOREO_CPU_H,
//! CHOREO_CPU_RUNTIME_CPP}`), a build dependency, so the crate builds from its package alone
//! (`cargo package`) and always carries the runtime that matches the compiler's generated code.
//! They are written to `$OUT_DIR/cpu-runtime/` and compiled with the host's C++ compiler (`cc`:
//! C++17, `-pthread`, warnings shown but not errors) into the static library
//! `choreo_cpu_runtime`, which `cc` links into the crate together with the C++ standard
//! library; `pthread` is linked on Unix. The library exports the runtime's C API
//! (`choreo_cpu_cudaMalloc`, …), which `src/backend.rs` binds, and the kernel-facing C++ entry
//! points that CPU kernels compiled from generated code call. `src/cpu_test_kernels.cpp` (two
//! tiny kernels for the crate's own tests of the CPU device) is compiled into it too.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process;

use choreo_compiler::runtime::{CHOREO_CPU_H, CHOREO_CPU_RUNTIME_CPP, CHOREO_H};

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let Some(out_dir) = env::var_os("OUT_DIR").map(PathBuf::from) else {
        fail("OUT_DIR is not set (this script runs under cargo)");
    };
    let sources = out_dir.join("cpu-runtime");
    if let Err(error) = fs::create_dir_all(&sources) {
        fail(&format!("cannot create {}: {error}", sources.display()));
    }
    write(&sources.join("choreo_cpu.h"), CHOREO_CPU_H);
    // The runtime includes only choreo_cpu.h; the CPU dialect of generated code (and the test
    // kernels below) begins `#define __CHOREO_CPU__ 1` and includes choreo.h, which includes
    // choreo_cpu.h then.
    write(&sources.join("choreo.h"), CHOREO_H);
    let runtime = sources.join("choreo_cpu_runtime.cpp");
    write(&runtime, CHOREO_CPU_RUNTIME_CPP);

    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .flag_if_supported("-pthread")
        .warnings(true)
        .warnings_into_errors(false)
        .include(&sources)
        .file(&runtime)
        .file("src/cpu_test_kernels.cpp");
    println!("cargo::rerun-if-changed=src/cpu_test_kernels.cpp");
    if let Err(error) = build.try_compile("choreo_cpu_runtime") {
        fail(&format!(
            "compiling the CPU runtime ({}) failed: {error}. A C++17 compiler is needed (g++ >= 10 \
             or clang >= 11; set CXX to choose one)",
            runtime.display()
        ));
    }
    if env::var("CARGO_CFG_TARGET_FAMILY")
        .is_ok_and(|family| family.split(',').any(|f| f == "unix"))
    {
        println!("cargo::rustc-link-lib=pthread");
    }
}

/// Writes `text` to `path`, unless it already holds exactly that (so the C++ compiler's inputs
/// keep their timestamps).
fn write(path: &Path, text: &str) {
    if fs::read_to_string(path).is_ok_and(|old| old == text) {
        return;
    }
    if let Err(error) = fs::write(path, text) {
        fail(&format!("cannot write {}: {error}", path.display()));
    }
}

fn fail(message: &str) -> ! {
    eprintln!("error: choreo build script: {message}");
    process::exit(1);
}
