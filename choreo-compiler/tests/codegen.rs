//! Code generation tests: every `tests/fixtures/codegen/*.co` is translated (library mode,
//! sm_90a, runtime checks on) and its `.cu` compared with the committed insta snapshot
//! (`tests/snapshots/codegen__<stem>.snap`); every snapshot must compile with nvcc; output is
//! deterministic; `compile` never panics on any fixture of the repository. The same for the
//! CPU backend: each fixture's `.cpp` (`codegen__<stem>_cpu.snap`) compiles with the host C++
//! compiler, and fixtures the CPU cannot run are refused with `E0806`.
//!
//! Update snapshots with `INSTA_UPDATE=always cargo test -p choreo-compiler --test codegen`
//! and review the diff.

use choreo_compiler::compile::{Arch, CompileOptions, OutputMode, Target, compile};
use choreo_compiler::diagnostics::render_human;
use choreo_compiler::source::SourceDb;
use choreo_toolkit::{Discovery, Env, Toolkit};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn codegen_fixtures() -> Vec<PathBuf> {
    common::co_files(&manifest_dir().join("tests/fixtures/codegen"), 25)
}

/// The file name the compiler sees: relative to the crate, so snapshots do not depend on
/// where the repository is checked out.
fn display_name(path: &Path) -> String {
    path.strip_prefix(manifest_dir()).unwrap_or(path).display().to_string()
}

/// Translates a fixture; panics with the rendered diagnostics when it has errors.
fn translate(path: &Path, opts: &CompileOptions) -> String {
    let text = std::fs::read_to_string(path).expect("fixture readable");
    let mut db = SourceDb::new();
    let file = db.add(display_name(path), text);
    let out = compile(&db, file, opts);
    match out.cu {
        Some(cu) => cu,
        None => panic!("{} was rejected:\n{}", path.display(), render_human(&db, &out.diagnostics)),
    }
}

/// The CUDA toolkit, found as builds find it (`choreo-toolkit`); `test` fails without one.
fn toolkit(test: &str) -> Toolkit {
    match choreo_toolkit::find(&Env::process(), &choreo_toolkit::Target::host()) {
        Ok(Discovery::Found(toolkit)) => toolkit,
        Ok(Discovery::Stub(reason)) => panic!("{test} needs nvcc: {reason}"),
        Err(error) => panic!("{test} needs nvcc: {error}"),
    }
}

/// nvcc's arguments for compiling generated code for `arch` with `choreo.h` from
/// `include_dir`, without the input and output arguments.
fn nvcc_args(arch: Arch, include_dir: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = ["-std=c++17", "-O2", "-gencode"].map(OsString::from).into();
    args.push(arch.gencode().into());
    args.push("-I".into());
    args.push(include_dir.into());
    args
}

fn stem(path: &Path) -> String {
    path.file_stem().expect("file stem").to_string_lossy().to_string()
}

/// Every codegen fixture is accepted (all rejections are reported together).
#[test]
fn codegen_fixtures_are_accepted() {
    let mut failures = Vec::new();
    for path in codegen_fixtures() {
        let text = std::fs::read_to_string(&path).expect("fixture readable");
        let mut db = SourceDb::new();
        let file = db.add(display_name(&path), text);
        let out = compile(&db, file, &CompileOptions::default());
        if out.cu.is_none() {
            failures.push(render_human(&db, &out.diagnostics));
        }
    }
    assert!(failures.is_empty(), "rejected fixtures:\n{}", failures.join("\n"));
}

#[test]
fn cu_snapshots() {
    let opts = CompileOptions::default();
    for path in codegen_fixtures() {
        let cu = translate(&path, &opts);
        insta::assert_snapshot!(stem(&path), cu);
    }
}

#[test]
fn output_is_deterministic() {
    let opts = CompileOptions::default();
    for path in codegen_fixtures() {
        let first = translate(&path, &opts);
        let second = translate(&path, &opts);
        assert!(first == second, "{}: two translations differ", path.display());
    }
}

#[test]
fn standalone_mode_keeps_main_and_library_mode_renames_it() {
    let path = manifest_dir().join("tests/fixtures/codegen/launch_sync_default.co");
    let library = translate(&path, &CompileOptions::default());
    let standalone =
        translate(&path, &CompileOptions { mode: OutputMode::Standalone, ..Default::default() });
    // The new name is unique to the file (its scope), so several files with a `main` link
    // into one program.
    assert!(
        library.contains("int __choreo_unused_main_19launch_sync_default() {"),
        "library mode renames main"
    );
    assert!(!library.contains("int main()"));
    assert!(standalone.contains("int main() {"), "standalone mode keeps main");
    assert!(!standalone.contains("__choreo_unused_main_19launch_sync_default()"));
}

#[test]
fn runtime_checks_can_be_turned_off() {
    let path = manifest_dir().join("tests/fixtures/codegen/symbolic_dims.co");
    let with = translate(&path, &CompileOptions::default());
    let without = translate(&path, &CompileOptions { runtime_checks: false, ..Default::default() });
    assert!(with.contains("are inconsistent."), "symbol consistency check emitted");
    assert!(!without.contains("are inconsistent."), "no entry checks without runtime checks");
}

#[test]
fn arch_sets_the_required_sm() {
    let path = manifest_dir().join("tests/fixtures/codegen/launch_sync_default.co");
    let arch: Arch = "sm_80".parse().expect("known arch");
    let cu = translate(&path, &CompileOptions { target: Target::Cuda(arch), ..Default::default() });
    assert!(cu.contains("#define __CHOREO_REQUIRED_GPU_DEVICE_SM__ 80\n"));
}

/// Every fixture of the repository, accepted or not, goes through `compile` without a panic.
#[test]
fn compile_never_panics_on_any_fixture() {
    let root = manifest_dir().join("tests/fixtures");
    let mut dirs = vec![root];
    let mut count = 0;
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("fixture dir readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|x| x != "co") {
                continue;
            }
            let text =
                String::from_utf8_lossy(&std::fs::read(&path).expect("readable")).into_owned();
            let mut db = SourceDb::new();
            let file = db.add(display_name(&path), text);
            for mode in [OutputMode::Library, OutputMode::Standalone] {
                let result = std::panic::catch_unwind(|| {
                    compile(&db, file, &CompileOptions { mode, ..Default::default() })
                });
                let out =
                    result.unwrap_or_else(|_| panic!("compile panicked on {}", path.display()));
                assert_eq!(out.cu.is_some(), !out.has_errors(), "{}", path.display());
            }
            count += 1;
        }
    }
    assert!(count > 100, "expected the whole fixture corpus, found {count} files");
}

/// Every snapshot `.cu` compiles with nvcc (`-c`, library mode, sm_90a). Fails when nvcc is
/// missing: CI provisions it with `ci/install-cuda`.
#[test]
fn snapshots_compile_with_nvcc() {
    let nvcc = toolkit("snapshots_compile_with_nvcc").nvcc;
    let include = manifest_dir().join("include");
    let out_dir = std::env::temp_dir().join(format!("choreo-codegen-nvcc-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).expect("temp dir");
    let opts = CompileOptions::default();
    let jobs: Vec<(String, PathBuf)> = codegen_fixtures()
        .into_iter()
        .map(|path| {
            let cu = translate(&path, &opts);
            let cu_path = out_dir.join(format!("{}.cu", stem(&path)));
            std::fs::write(&cu_path, cu).expect("write .cu");
            (stem(&path), cu_path)
        })
        .collect();
    let results = common::nvcc::compile_all(&nvcc, &nvcc_args(Arch::SM_90A, &include), jobs);
    common::nvcc::assert_all_compiled(&results, &out_dir, "generated code");
}

/// Fixtures with inline PTX, which the CPU target refuses (`E0806`).
const GPU_ONLY_FIXTURES: &[&str] = &["calls_atomics"];

/// The CPU backend's `.cpp` of a fixture, or `None` for the fixtures the CPU cannot run (which
/// must be refused with `E0806` only).
fn translate_for_cpu(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).expect("fixture readable");
    let mut db = SourceDb::new();
    let file = db.add(display_name(path), text);
    let opts = CompileOptions { target: Target::Cpu, ..CompileOptions::default() };
    let out = compile(&db, file, &opts);
    if GPU_ONLY_FIXTURES.contains(&stem(path).as_str()) {
        let errors: Vec<_> = out.diagnostics.iter().filter(|d| d.is_error()).collect();
        assert!(
            out.cpp.is_none() && !errors.is_empty() && errors.iter().all(|d| d.code == "E0806"),
            "{}: expected E0806 on the CPU target:\n{}",
            path.display(),
            render_human(&db, &out.diagnostics)
        );
        return None;
    }
    match out.cpp {
        Some(cpp) => Some(cpp),
        None => panic!(
            "{} was rejected on the CPU:\n{}",
            path.display(),
            render_human(&db, &out.diagnostics)
        ),
    }
}

#[test]
fn cpp_snapshots() {
    for path in codegen_fixtures() {
        if let Some(cpp) = translate_for_cpu(&path) {
            insta::assert_snapshot!(format!("{}_cpu", stem(&path)), cpp);
        }
    }
}

/// Every CPU snapshot compiles with the host C++ compiler (`CXX`, else `c++`) against the CPU
/// runtime header, as choreo-build compiles it (`-std=c++17`, library mode).
#[test]
fn cpp_snapshots_compile_with_the_host_compiler() {
    let include = manifest_dir().join("include");
    let out_dir = std::env::temp_dir().join(format!("choreo-codegen-cxx-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).expect("temp dir");
    let jobs: Vec<(String, PathBuf)> = codegen_fixtures()
        .into_iter()
        .filter_map(|path| {
            let cpp = translate_for_cpu(&path)?;
            let cpp_path = out_dir.join(format!("{}.cpp", stem(&path)));
            std::fs::write(&cpp_path, cpp).expect("write .cpp");
            Some((stem(&path), cpp_path))
        })
        .collect();
    const FLAGS: &[&str] = &["-std=c++17", "-O0", "-pthread", "-Wall"];
    let precompiled = common::cxx::precompiled_choreo_h(&out_dir.join("pch"), FLAGS);
    let args: Vec<OsString> = FLAGS
        .iter()
        .map(OsString::from)
        .chain(precompiled.into_iter().flat_map(|dir| [OsString::from("-I"), dir.into()]))
        .chain([OsString::from("-I"), include.into_os_string()])
        .collect();
    let cxx = PathBuf::from(common::cxx::cxx());
    let results = common::nvcc::compile_all(&cxx, &args, jobs);
    common::nvcc::assert_all_compiled(&results, &out_dir, "generated CPU code");
}

/// Translation speed, per fixture (run in release:
/// `cargo test --release -p choreo-compiler --test codegen translation_speed -- --ignored --nocapture`).
#[test]
#[ignore = "timing report; run in release mode"]
fn translation_speed() {
    let opts = CompileOptions::default();
    let mut total = Duration::ZERO;
    let files = codegen_fixtures();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable");
        let mut db = SourceDb::new();
        let file = db.add(display_name(path), text);
        let rounds = 20;
        let t = Instant::now();
        for _ in 0..rounds {
            let out = compile(&db, file, &opts);
            assert!(out.cu.is_some());
        }
        let per = t.elapsed() / rounds;
        total += per;
        eprintln!("{}: {:.3} ms", stem(path), per.as_secs_f64() * 1e3);
        assert!(per < Duration::from_millis(100), "{} takes {per:?} to translate", stem(path));
    }
    eprintln!(
        "average: {:.3} ms/file over {} files",
        total.as_secs_f64() * 1e3 / files.len() as f64,
        files.len()
    );
}

/// Builds `tests/fixtures/codegen/abi_extern_c.co` as a program (standalone mode) and runs it:
/// it calls the `extern "C"` entries with device pointers and checks results, failed-check
/// statuses and messages, f16 bit patterns, that local buffers do not leak and that async
/// results arrive in stream order. Self-contained (the source and choreo.h are embedded), so
/// the test binary can run on a GPU machine without the repository; needs nvcc there too.
#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_extern_c_abi() {
    const SOURCE: &str = include_str!("fixtures/codegen/abi_extern_c.co");
    let toolkit = toolkit("gpu_extern_c_abi");
    let mut db = SourceDb::new();
    let file = db.add("abi_extern_c.co", SOURCE);
    let opts = CompileOptions { mode: OutputMode::Standalone, ..Default::default() };
    let out = compile(&db, file, &opts);
    let cu = out.cu.unwrap_or_else(|| panic!("{}", render_human(&db, &out.diagnostics)));
    let dir = std::env::temp_dir().join(format!("choreo-gpu-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("abi_extern_c.cu"), cu).expect("write .cu");
    std::fs::write(dir.join("choreo.h"), choreo_compiler::compile::CHOREO_H).expect("choreo.h");
    let exe = dir.join("abi_extern_c");
    let status = Command::new(&toolkit.nvcc)
        .args(nvcc_args(Arch::SM_90A, &dir))
        .arg(format!("-L{}", toolkit.lib_dir.display()))
        .arg(dir.join("abi_extern_c.cu"))
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("nvcc runs");
    assert!(status.success(), "nvcc failed on the ABI program (sources in {})", dir.display());
    let run = Command::new(&exe).output().expect("the ABI program runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success() && stdout.contains("Test Passed"),
        "ABI program failed ({}):\n{stdout}{stderr}",
        run.status
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn choreoc(args: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_choreoc")).args(args).output().expect("choreoc runs")
}

#[test]
fn cli_emit_cu_prints_what_compile_returns() {
    let path = manifest_dir().join("tests/fixtures/codegen/multi_kernel.co");
    let out = choreoc(&["emit-cu".as_ref(), path.as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let mut db = SourceDb::new();
    let file = db.add(path.display().to_string(), std::fs::read_to_string(&path).expect("read"));
    let expected = compile(&db, file, &CompileOptions::default()).cu.expect("accepted");
    assert!(String::from_utf8_lossy(&out.stdout) == expected, "emit-cu output differs");

    let standalone = choreoc(&[
        "emit-cu".as_ref(),
        "--standalone".as_ref(),
        "--arch".as_ref(),
        "sm_80".as_ref(),
        manifest_dir().join("tests/fixtures/codegen/launch_sync_default.co").as_os_str(),
    ]);
    let text = String::from_utf8_lossy(&standalone.stdout);
    assert!(text.contains("int main() {") && text.contains("__CHOREO_REQUIRED_GPU_DEVICE_SM__ 80"));
}

#[test]
fn cli_emit_cu_reports_errors_and_usage() {
    let dir = std::env::temp_dir().join(format!("choreo-cli-emit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bad = dir.join("bad.co");
    std::fs::write(&bad, "__co__ void f(int n) {\n  n = 3;\n}\n").expect("write");
    let out = choreoc(&["emit-cu".as_ref(), bad.as_os_str()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty(), "no .cu on errors");
    assert!(stderr.contains("E0403") && stderr.contains("bad.co:2:3"), "{stderr}");
    let out = choreoc(&["emit-cu".as_ref()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("required arguments were not provided"));
    let out = choreoc(&["emit-cu".as_ref(), "--arch".as_ref(), "sm_1".as_ref(), bad.as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown CUDA architecture 'sm_1'"));
    let out = choreoc(&["emit-cu".as_ref(), dir.join("missing.co").as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.co"));
    let out = choreoc(&["build".as_ref(), bad.as_os_str()]);
    assert_eq!(out.status.code(), Some(2), "build needs -o");
    let help = choreoc(&["help".as_ref(), "build".as_ref()]);
    assert!(
        String::from_utf8_lossy(&help.stdout)
            .contains("Usage: choreoc build [OPTIONS] -o <EXE> <FILE.co>")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `choreoc build` produces an executable with nvcc (it is not run: that needs a GPU).
#[test]
fn cli_build_makes_an_executable() {
    toolkit("cli_build_makes_an_executable");
    let dir = std::env::temp_dir().join(format!("choreo-cli-build-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let exe = dir.join("scale");
    let source = manifest_dir().join("tests/fixtures/codegen/launch_sync_default.co");
    let out = choreoc(&[
        "build".as_ref(),
        source.as_os_str(),
        "-o".as_ref(),
        exe.as_os_str(),
        "--".as_ref(),
        "-DCHOREO_LEAN_PRELUDE".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(exe.is_file(), "no executable written");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Compiles `text` and returns the codes of its errors.
fn error_codes(text: &str) -> Vec<&'static str> {
    let mut db = SourceDb::new();
    let file = db.add("inline.co", text);
    let out = compile(&db, file, &CompileOptions::default());
    assert_eq!(out.cu.is_none(), out.has_errors());
    out.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.code).collect()
}

#[test]
fn lowering_rejects_what_cannot_be_a_cpp_function() {
    assert_eq!(error_codes("__co__ void main() {\n  println(\"x\");\n}\n"), vec!["E0802"]);
    let twice = "__co__ void f(int n) { println(n); }\n__co__ void f(f32 x) { println(x); }\n";
    assert_eq!(error_codes(twice), vec!["E0803"]);
    assert!(error_codes("__co__ void fine(int n) { println(n); }\n").is_empty());
}
