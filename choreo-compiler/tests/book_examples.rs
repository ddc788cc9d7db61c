//! The user guide's examples (`docs/book/src/examples/*.co`, included into the chapters with
//! `{{#include …}}`) stay valid: each is translated here in library mode, as `choreo-build`
//! translates a crate's kernels, and any error diagnostic fails the test; then every generated
//! `.cu` is compiled with nvcc (`-c`, sm_90a), as `tests/codegen.rs` compiles its snapshots. Like
//! that test, the nvcc step fails when no CUDA toolkit is found (CI provisions one with
//! `ci/install-cuda`; `source ci/env.sh` before `cargo test`). The nvcc step takes minutes, so
//! it is `#[ignore]`d in the normal run and `ci/book` runs it.

use choreo_compiler::compile::{Arch, CompileOptions, compile};
use choreo_compiler::diagnostics::render_human;
use choreo_compiler::source::SourceDb;
use choreo_toolkit::{Discovery, Env};
use std::path::{Path, PathBuf};

mod common;

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/book/src/examples")
}

/// The book's `.co` examples, sorted.
fn examples() -> Vec<PathBuf> {
    common::co_files(&examples_dir(), 20)
}

fn name(path: &Path) -> String {
    format!("examples/{}", path.file_name().and_then(|n| n.to_str()).unwrap_or_default())
}

/// Translates one example; `Err` with the rendered diagnostics when it has an error.
fn translate(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path).expect("readable example");
    let mut db = SourceDb::new();
    let file = db.add(name(path), text);
    let out = compile(&db, file, &CompileOptions::default());
    match out.cu {
        Some(cu) if !out.diagnostics.iter().any(|d| d.is_error()) => Ok(cu),
        _ => Err(format!("{}:\n{}", name(path), render_human(&db, &out.diagnostics))),
    }
}

#[test]
fn every_book_example_translates_cleanly() {
    let failures: Vec<String> = examples().iter().filter_map(|p| translate(p).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// About 2 minutes on 2 cores (22 files, ~4.5 s of nvcc each; 116 s measured with one core
/// busy), so not part of `ci/test`;
/// `ci/book` runs it: `cargo test -p choreo-compiler --test book_examples -- --ignored`.
#[test]
#[ignore = "runs nvcc on every example (minutes); ci/book runs it"]
fn every_book_example_compiles_with_nvcc() {
    let toolkit = match choreo_toolkit::find(&Env::process(), &choreo_toolkit::Target::host()) {
        Ok(Discovery::Found(toolkit)) => toolkit,
        Ok(Discovery::Stub(reason)) => panic!("compiling the book's examples needs nvcc: {reason}"),
        Err(error) => panic!("compiling the book's examples needs nvcc: {error}"),
    };
    let include = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("include");
    let out_dir = std::env::temp_dir().join(format!("choreo-book-nvcc-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).expect("temp dir");
    let mut jobs = Vec::new();
    for path in examples() {
        let cu = translate(&path).unwrap_or_else(|e| panic!("{e}"));
        let stem = path.file_stem().expect("stem").to_string_lossy().to_string();
        let cu_path = out_dir.join(format!("{stem}.cu"));
        std::fs::write(&cu_path, cu).expect("write .cu");
        jobs.push((stem, cu_path));
    }
    let args: Vec<std::ffi::OsString> =
        ["-std=c++17", "-O2", "-DCHOREO_LEAN_PRELUDE", "-gencode", &Arch::SM_90A.gencode(), "-I"]
            .into_iter()
            .map(Into::into)
            .chain([include.into_os_string()])
            .collect();
    let results = common::nvcc::compile_all(&toolkit.nvcc, &args, jobs);
    common::nvcc::assert_all_compiled(&results, &out_dir, "a book example");
}
