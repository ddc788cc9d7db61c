//! Rust wrapper emission (`emit::rust`): every `tests/fixtures/rust/*.co` and every codegen
//! fixture (`tests/fixtures/codegen/*.co`, whose `.cu` the `codegen` tests snapshot) is
//! translated and its generated module compared with the committed insta snapshot
//! (`tests/snapshots/emit_rust__<stem>.snap`; stub mode, for the `rust/` fixtures:
//! `emit_rust__<stem>_stub.snap`); the generated modules of all fixtures, in both modes, are
//! compiled against the workspace's `choreo` crate with clippy and `-D warnings` (the lints the
//! workspace uses); output is deterministic; stub and real wrappers have the same signatures.
//!
//! The wrappers of `tests/co/*.co` (the GPU tests' kernels) are also built for real, with nvcc
//! and choreo-build, by the `choreo-tests` crate.
//!
//! Update snapshots with `INSTA_UPDATE=always cargo test -p choreo-compiler --test emit_rust`
//! and review the diff.

use choreo_compiler::compile::{CompileOptions, compile};
use choreo_compiler::diagnostics::render_human;
use choreo_compiler::source::SourceDb;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `.co` files of `tests/fixtures/<dir>`, sorted.
fn fixtures_in(dir: &str, at_least: usize) -> Vec<PathBuf> {
    common::co_files(&manifest_dir().join("tests/fixtures").join(dir), at_least)
}

/// The wrapper fixtures (`tests/fixtures/rust`), snapshotted in both modes.
fn fixtures() -> Vec<PathBuf> {
    fixtures_in("rust", 6)
}

/// Every fixture whose wrappers are snapshotted: the wrapper fixtures, then the codegen
/// fixtures (each of which thus has its `.cu` and its `.rs` pinned).
fn all_fixtures() -> Vec<PathBuf> {
    let mut all = fixtures();
    all.extend(fixtures_in("codegen", 25));
    all
}

/// The file name the compiler sees: relative to the crate, so snapshots do not depend on
/// where the repository is checked out.
fn display_name(path: &Path) -> String {
    path.strip_prefix(manifest_dir()).unwrap_or(path).display().to_string()
}

fn stem(path: &Path) -> String {
    path.file_stem().expect("file stem").to_string_lossy().to_string()
}

/// The `.rs` of a fixture (`compile`'s output): wrappers of kernels built for CUDA and the CPU,
/// as a build with nvcc makes them, or stub wrappers (no kernels) with `stub`; panics with the
/// rendered diagnostics when it has errors.
fn emit(path: &Path, stub: bool) -> String {
    let text = std::fs::read_to_string(path).expect("fixture readable");
    let mut db = SourceDb::new();
    let file = db.add(display_name(path), text);
    let options =
        CompileOptions { cuda_wrappers: !stub, cpu_wrappers: !stub, ..CompileOptions::default() };
    let out = compile(&db, file, &options);
    match out.rs {
        Some(rs) => rs,
        None => panic!("{} was rejected:\n{}", path.display(), render_human(&db, &out.diagnostics)),
    }
}

#[test]
fn rs_snapshots() {
    for path in all_fixtures() {
        insta::assert_snapshot!(stem(&path), emit(&path, false));
    }
}

#[test]
fn rs_stub_snapshots() {
    for path in fixtures() {
        insta::assert_snapshot!(format!("{}_stub", stem(&path)), emit(&path, true));
    }
}

#[test]
fn output_is_deterministic() {
    for path in all_fixtures() {
        for stub in [false, true] {
            assert!(emit(&path, stub) == emit(&path, stub), "{}: outputs differ", path.display());
        }
    }
}

/// The lines from `pub fn` through the line that opens the body, of every function.
fn signatures(text: &str) -> Vec<String> {
    let mut all = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if line.starts_with("pub fn ") {
            current = Some(String::new());
        }
        if let Some(signature) = current.as_mut() {
            signature.push_str(line);
            signature.push('\n');
            if line.ends_with('{') {
                all.extend(current.take());
            }
        }
    }
    all
}

#[test]
fn stub_and_real_wrappers_have_the_same_signatures() {
    for path in fixtures() {
        let (real, stub) = (emit(&path, false), emit(&path, true));
        let real_signatures = signatures(&real);
        assert!(!real_signatures.is_empty(), "{}: no function found", path.display());
        assert_eq!(real_signatures, signatures(&stub), "{}", path.display());
        assert!(!stub.contains("extern \"C\""), "stubs must not reference the kernels");
        assert!(!stub.contains("unsafe"), "stubs need no unsafe code");
        assert_eq!(
            stub.matches("Err(::choreo::Error::NotBuilt").count(),
            real_signatures.len(),
            "every stub returns NotBuilt"
        );
    }
}

#[test]
fn the_seed_maps_parameters_as_the_design_says() {
    let text = emit(&manifest_dir().join("tests/fixtures/rust/seed.co"), false);
    // foo: asynchronous, two streams bound to the guard's lifetime, host data by view.
    assert!(text.contains(
        "pub fn foo<'a>(\n    s0: &'a ::choreo::Stream,\n    s1: &'a ::choreo::Stream,\n    \
         a: ::choreo::HostView<'_, f32, 1>,\n    b: ::choreo::HostView<'_, f32, 1>,\n) -> \
         Result<::choreo::Pending<'a, ()>, ::choreo::Error> {"
    ));
    assert!(text.contains(
        "WorkStreams::for_backends(&[::choreo::Backend::Cuda, ::choreo::Backend::Cpu], &[s0, s1])"
    ));
    // bar: synchronous, no lifetime, staged on its stream.
    assert!(text.contains(
        "pub fn bar(\n    _s: &::choreo::Stream,\n    a: ::choreo::HostView<'_, f32, 1>,\n) -> \
         Result<(), ::choreo::Error> {"
    ));
    assert!(text.contains("let __choreo_staging: &::choreo::Stream = _s;"));
}

#[test]
fn global_parameters_follow_the_read_write_sets() {
    let text = emit(&manifest_dir().join("tests/fixtures/rust/global_rw.co"), false);
    assert!(text.contains("    x: &::choreo::DeviceTensor<f32, 1>,\n"));
    assert!(text.contains("    y: &mut ::choreo::DeviceTensor<f32, 1>,\n"));
    assert!(text.contains("__choreo_work.read_param_ptr(\"x\", x.buffer())"));
    assert!(text.contains("__choreo_work.write_param_ptr(\"y\", y.buffer_mut())"));
    assert!(text.contains("    idx: &'a ::choreo::DeviceTensor<i32, 1>,\n"));
    assert!(text.contains("    out: &'a mut ::choreo::DeviceTensor<f32, 1>,\n"));
    // `?` and `??` extents are passed, not checked.
    assert!(!text.contains("check_extent(\"idx\""));
    assert!(!text.contains("check_extent(\"out\", 0"));
    // An unbound asynchronous launch runs (and is waited for) on the default stream.
    assert!(text.contains("&[&__choreo_default_stream])"));
}

/// Compiles the generated modules of every fixture, real and stub, in a scratch crate that
/// depends on the workspace's `choreo`, with clippy (or `cargo check` where clippy is not
/// installed) and every warning an error. Nothing is linked, so no CUDA is needed.
#[test]
fn generated_modules_compile_without_warnings() {
    let workspace = manifest_dir().parent().expect("workspace root").to_path_buf();
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("emit-rust-check");
    let src = root.join("src");
    let _ = std::fs::remove_dir_all(src.join("generated"));
    std::fs::create_dir_all(src.join("generated")).expect("create the scratch crate");
    let manifest = format!(
        "[package]\nname = \"emit-rust-check\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
         publish = false\n\n[dependencies]\nchoreo-runtime = {{ path = {:?} }}\n\n[workspace]\n",
        workspace.join("choreo").display().to_string()
    );
    std::fs::write(root.join("Cargo.toml"), manifest).expect("write Cargo.toml");
    // The workspace's lock file pins the dependencies to the versions the workspace builds
    // with (already downloaded): resolved afresh offline, cargo would pick the newest versions
    // its index knows, which need not be on disk.
    std::fs::copy(workspace.join("Cargo.lock"), root.join("Cargo.lock")).expect("copy Cargo.lock");
    let mut lib = String::from(
        "//! Generated wrappers of the emit_rust fixtures, compiled to check them.\n\
         #![deny(warnings, missing_docs, unsafe_op_in_unsafe_fn)]\n\
         #![deny(clippy::all, clippy::undocumented_unsafe_blocks)]\n\
         // Fixtures of different files define functions of the same name, so their entries\n\
         // clash here (this crate only type-checks; it never links the kernels).\n\
         #![allow(clashing_extern_declarations)]\n",
    );
    let wrapper_fixtures = fixtures();
    for path in all_fixtures() {
        let stem = stem(&path);
        let mut modes = vec![(false, stem.clone())];
        if wrapper_fixtures.contains(&path) {
            modes.push((true, format!("{stem}_stub")));
        }
        for (stub, module) in modes {
            std::fs::write(src.join("generated").join(format!("{module}.rs")), emit(&path, stub))
                .expect("write a generated module");
            lib.push_str(&format!(
                "\n/// The wrappers of `{stem}.co`{}.\npub mod {module} {{\n    \
                 include!(\"generated/{module}.rs\");\n}}\n",
                if stub { " (stub build)" } else { "" }
            ));
        }
    }
    std::fs::write(src.join("lib.rs"), lib).expect("write lib.rs");

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let has_clippy = Command::new(&cargo)
        .args(["clippy", "--version"])
        .output()
        .is_ok_and(|output| output.status.success());
    let mut command = Command::new(&cargo);
    command.arg(if has_clippy { "clippy" } else { "check" });
    command
        .args(["--offline", "--quiet", "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", root.join("target"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        // Nothing is linked; the CUDA toolkit is not needed.
        .env("CHOREO_NVCC", "skip");
    let output = command.output().expect("run cargo");
    assert!(
        output.status.success(),
        "the generated modules do not compile cleanly ({}):\n{}",
        if has_clippy { "cargo clippy" } else { "cargo check" },
        String::from_utf8_lossy(&output.stderr)
    );
}
