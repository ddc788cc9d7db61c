//! The Rust wrappers that choreo-build generated for this crate (`co/*.co`) are those of the
//! compiler being tested.
//!
//! choreo-build links choreo-compiler as a build dependency, whose artifacts cargo reuses when
//! it thinks them fresh. A target folder copied (`cp -r`) after a checkout looks newer than the
//! sources, so a stale compiler can generate the wrappers while the rest is rebuilt: the tests
//! then test the old wrappers against the new runtime (seen once: wrappers without
//! `WorkStreams::enter`, one event per call on the GPU). This test translates the files again
//! with the compiler of the dev-dependency (rebuilt separately) and compares, so such a build
//! fails here, on the CPU too.

use std::path::Path;

use choreo_compiler::compile::{Arch, CompileOptions, OutputMode, SymbolScope, Target, compile};
use choreo_compiler::source::SourceDb;

/// The wrappers generated for `co/<module>.co`, as choreo-build wrote them.
fn generated(module: &str) -> String {
    let path = Path::new(env!("OUT_DIR")).join("choreo/co_kernels").join(format!("{module}.rs"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `co/<module>.co` translated as choreo-build translates it for this crate (CUDA wrappers when
/// the CUDA kernels were built, CPU wrappers always; `co/timing.co` needs no newer
/// architecture than the oldest default one).
fn translated(module: &str) -> String {
    // Named as choreo-build names it: relative to the package.
    let name = format!("co/{module}.co");
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(&name))
        .expect("the .co file");
    let mut db = SourceDb::new();
    let file = db.add(name, text);
    let options = CompileOptions {
        target: Target::Cuda("sm_80".parse::<Arch>().expect("an architecture")),
        mode: OutputMode::Library,
        cuda_wrappers: cfg!(choreo_co_kernels_cuda),
        cpu_wrappers: true,
        symbol_scope: Some(SymbolScope::new([
            env!("CARGO_PKG_NAME"),
            env!("CARGO_PKG_VERSION"),
            "co_kernels",
            module,
        ])),
        ..CompileOptions::default()
    };
    let compilation = compile(&db, file, &options);
    compilation.rs.expect("the file translates")
}

#[test]
fn the_generated_wrappers_come_from_the_compiler_under_test() {
    let (built, now) = (generated("timing"), translated("timing"));
    assert!(
        built == now,
        "the wrappers of co/timing.co in OUT_DIR differ from what choreo-compiler generates \
         now: the build script linked a stale choreo-compiler (a copied target folder? touch the \
         sources, or `cargo clean -p choreo-compiler`, and rebuild)"
    );
}
