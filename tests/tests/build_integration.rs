//! `choreo-build` as users run it: fixture crates (tests/fixture-crates/) built with cargo.
//!
//! Each test copies a fixture into `target/tmp/fixtures/<test>/` under a package name of its
//! own, points its `choreo`/`choreo-build` dependencies at this workspace and runs
//! `cargo build --offline` with one target directory shared by all tests (the dependencies are
//! compiled once). Cargo serialises builds in that directory, so the tests mostly wait for each
//! other; the first one pays for compiling the compiler.
//!
//! The tests that compile kernels need nvcc (found as a build finds it: `NVCC`, `CUDA_HOME`,
//! `PATH`, pip, the `ci/install-cuda` cache). Without one they FAIL and say so. None needs a
//! GPU: the fixture binary calls a kernel entry whose entry check fails before any CUDA call,
//! and a host function of a hand-written `.cu` file.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

/// The target directory shared by every fixture build of this test run.
fn shared_target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fixture-target")
}

/// A copy of a fixture crate.
struct Fixture {
    dir: PathBuf,
    name: String,
}

impl Fixture {
    /// Copies `tests/fixture-crates/<fixture>` to a fresh folder, as package `name`.
    fn new(fixture: &str, name: &str) -> Fixture {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fixtures").join(name);
        let _ = fs::remove_dir_all(&dir);
        copy_dir(&workspace().join("tests/fixture-crates").join(fixture), &dir);
        let manifest = dir.join("Cargo.toml");
        let text = fs::read_to_string(&manifest).unwrap();
        let workspace = workspace();
        let text = text
            .replace("@NAME@", name)
            .replace("@WORKSPACE@", workspace.to_str().expect("UTF-8 workspace path"));
        fs::write(&manifest, text).unwrap();
        // The program calls its kernel's `extern "C"` entry, whose symbol is mangled with the
        // package name (and version, library and module).
        let main_rs = dir.join("src/main.rs");
        if let Ok(text) = fs::read_to_string(&main_rs) {
            let scope =
                choreo_compiler::compile::SymbolScope::new([name, "0.1.0", "kernels", "add_one"]);
            fs::write(
                &main_rs,
                text.replace(
                    "@ADD_ONE_ENTRY@",
                    &scope.entry_symbol("add_one", choreo_compiler::compile::Target::default()),
                ),
            )
            .unwrap();
        }
        // The workspace's lock file pins the same dependency versions (offline); cargo trims it.
        fs::copy(workspace.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
        let fixture = Fixture { dir, name: name.to_owned() };
        // Forget the outputs of an earlier test run (OUT_DIR with its object cache), so that
        // the first build really is one.
        let clean = fixture.cargo(&["clean", "-p", name], &[]);
        assert!(clean.status.success(), "cargo clean: {}", String::from_utf8_lossy(&clean.stderr));
        fixture
    }

    /// `cargo <args> --offline` in the fixture with `envs` set.
    fn cargo(&self, args: &[&str], envs: &[(&str, &str)]) -> Output {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut command = Command::new(cargo);
        command.args(args).arg("--offline").current_dir(&self.dir);
        // Variables of the cargo that runs this test must not leak into the inner cargo.
        for (var, _) in std::env::vars_os() {
            let var = var.to_string_lossy().into_owned();
            if (var.starts_with("CARGO_") && var != "CARGO_HOME") || var == "RUSTFLAGS" {
                command.env_remove(var);
            }
        }
        command.env("CARGO_TARGET_DIR", shared_target_dir()).env("CARGO_TERM_COLOR", "never");
        // choreo-build's shared object cache lives in the fixture's folder (which `new` wipes),
        // not in the target folder that all fixtures and test runs share: otherwise a second
        // run of these tests would find its objects there and compile nothing.
        command.env("CHOREO_CACHE_DIR", self.dir.join("choreo-cache"));
        command.envs(envs.iter().copied());
        command.output().expect("cargo runs")
    }

    /// `cargo build`, which must succeed; returns its stderr.
    fn build_ok(&self, envs: &[(&str, &str)]) -> String {
        let output = self.cargo(&["build"], envs);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "cargo build of {} failed:\n{stderr}", self.name);
        stderr
    }

    fn report_path(&self) -> PathBuf {
        self.dir.join("build-report.txt")
    }

    /// The report of the last build script run (`None` if it did not run since the last
    /// `take_report`).
    fn take_report(&self) -> Option<String> {
        let text = fs::read_to_string(self.report_path()).ok();
        let _ = fs::remove_file(self.report_path());
        text
    }

    /// Runs the built binary.
    fn run(&self) -> Output {
        Command::new(shared_target_dir().join("debug").join(&self.name))
            .output()
            .expect("the fixture binary starts")
    }

    /// Runs the built binary with `envs` set.
    fn run_with(&self, envs: &[(&str, &str)]) -> Output {
        Command::new(shared_target_dir().join("debug").join(&self.name))
            .envs(envs.iter().copied())
            .output()
            .expect("the fixture binary starts")
    }

    /// Sets the modification time of a file to now, without changing its content.
    fn touch(&self, file: &str) {
        let file = fs::File::options().write(true).open(self.dir.join(file)).unwrap();
        file.set_modified(SystemTime::now()).unwrap();
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The value of `key=` in a report.
fn field<'a>(report: &'a str, key: &str) -> &'a str {
    report
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key}= in report:\n{report}"))
}

/// The modules nvcc compiled, from the report's `file=` lines.
fn compiled_modules(report: &str) -> Vec<String> {
    report
        .lines()
        .filter(|line| line.starts_with("file=") && line.contains(" compiled=true "))
        .filter_map(|line| line.split(" module=").nth(1)?.split(' ').next().map(str::to_owned))
        .collect()
}

/// The hand-written `.cu` files nvcc compiled, from the report's `cuda_file=` lines.
fn compiled_cuda_files(report: &str) -> Vec<String> {
    report
        .lines()
        .filter(|line| line.contains(" compiled=true"))
        .filter_map(|line| line.strip_prefix("cuda_file=")?.split(' ').next().map(str::to_owned))
        .collect()
}

fn require_nvcc(report: &str) {
    assert_eq!(
        field(report, "mode"),
        "nvcc",
        "this test needs nvcc (run ci/install-cuda, or set CUDA_HOME); the build ran in stub \
         mode:\n{report}"
    );
}

#[test]
fn builds_links_runs_and_recompiles_only_what_changed() {
    let fixture = Fixture::new("basic", "fixture-basic-nvcc");

    // 1. A first build compiles the two .co files and the hand-written .cu, links them, and
    // the binary runs the linked code.
    fixture.build_ok(&[]);
    let report = fixture.take_report().expect("the build script ran");
    require_nvcc(&report);
    assert_eq!(field(&report, "nvcc_runs"), "3", "{report}");
    assert_eq!(compiled_modules(&report), ["add_one", "scale"]);
    assert_eq!(compiled_cuda_files(&report), ["cuda/hand.cu"], "{report}");
    let output = fixture.run();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    let mut lines = stdout.lines();
    // The generated wrapper checks the shape before anything reaches the device …
    let wrapper = lines.next().unwrap_or_default();
    assert!(wrapper.starts_with("wrapper: error: shape mismatch for `v`"), "{stdout}");
    assert!(wrapper.contains("extent 15, expected 16"), "{stdout}");
    // … and the linked C++ entry runs its own check.
    let entry = lines.next().unwrap_or_default();
    assert!(entry.starts_with("entry: status=-1 message="), "{stdout}");
    assert!(entry.contains("expect: 16, but got 15"), "{stdout}");
    // The hand-written file's `extern "C"` function is linked from the same library.
    assert_eq!(lines.next(), Some("hand: 42"), "{stdout}");

    // 2. Nothing changed: cargo does not even run the build script.
    fixture.build_ok(&[]);
    assert_eq!(fixture.take_report(), None, "the build script reran without a change");

    // 3. The inputs are touched but unchanged: the script reruns and nvcc runs zero times.
    std::thread::sleep(Duration::from_millis(1100)); // past cargo's mtime comparison
    fixture.touch("kernels/scale.co");
    fixture.touch("kernels/add-one.co");
    fixture.touch("cuda/hand.cu");
    fixture.build_ok(&[]);
    let report = fixture.take_report().expect("touching a .co reruns the build script");
    assert_eq!(field(&report, "nvcc_runs"), "0", "{report}");
    assert_eq!(field(&report, "cache_hits"), "3", "{report}");
    assert_eq!(field(&report, "library_rebuilt"), "false", "{report}");

    // 4. One .co changes: only its .cu is recompiled.
    std::thread::sleep(Duration::from_millis(1100));
    let add_one = fixture.dir.join("kernels/add-one.co");
    let text = fs::read_to_string(&add_one).unwrap();
    fs::write(&add_one, text.replace("+ 1.0f", "+ 2.0f")).unwrap();
    fixture.build_ok(&[]);
    let report = fixture.take_report().expect("a changed .co reruns the build script");
    assert_eq!(field(&report, "nvcc_runs"), "1", "{report}");
    assert_eq!(compiled_modules(&report), ["add_one"]);
    assert!(compiled_cuda_files(&report).is_empty(), "{report}");
    assert_eq!(field(&report, "library_rebuilt"), "true", "{report}");

    // 5. A local header included by a .co's host code changes: its includer is recompiled.
    std::thread::sleep(Duration::from_millis(1100));
    fs::write(fixture.dir.join("kernels/common.h"), "#define COMMON_VALUE 2\n").unwrap();
    fixture.build_ok(&[]);
    let report = fixture.take_report().expect("a changed header reruns the build script");
    assert_eq!(compiled_modules(&report), ["scale"], "{report}");
    assert!(fixture.run().status.success());

    // 6. A local header of the hand-written .cu changes: only that file is recompiled, and the
    // binary runs the new code.
    std::thread::sleep(Duration::from_millis(1100));
    fs::write(fixture.dir.join("cuda/hand.h"), "#define HAND_BONUS 1\n").unwrap();
    fixture.build_ok(&[]);
    let report = fixture.take_report().expect("a changed header reruns the build script");
    assert_eq!(field(&report, "nvcc_runs"), "1", "{report}");
    assert_eq!(compiled_cuda_files(&report), ["cuda/hand.cu"], "{report}");
    let stdout = String::from_utf8_lossy(&fixture.run().stdout).into_owned();
    assert_eq!(stdout.lines().nth(2), Some("hand: 43"), "{stdout}");

    // 7. The hand-written .cu itself changes: only it is recompiled.
    std::thread::sleep(Duration::from_millis(1100));
    let hand = fixture.dir.join("cuda/hand.cu");
    let text = fs::read_to_string(&hand).unwrap();
    fs::write(&hand, text.replace("a + b + HAND_BONUS", "a * b + HAND_BONUS")).unwrap();
    fixture.build_ok(&[]);
    let report = fixture.take_report().expect("a changed .cu reruns the build script");
    assert_eq!(field(&report, "nvcc_runs"), "1", "{report}");
    assert_eq!(compiled_cuda_files(&report), ["cuda/hand.cu"], "{report}");
    assert!(compiled_modules(&report).is_empty(), "{report}");
    let stdout = String::from_utf8_lossy(&fixture.run().stdout).into_owned();
    assert_eq!(stdout.lines().nth(2), Some("hand: 81"), "{stdout}");
}

#[test]
fn co_errors_fail_the_build_with_rendered_diagnostics() {
    let fixture = Fixture::new("broken", "fixture-broken");
    // The errors are found before nvcc is looked for: no toolkit is needed.
    let output = fixture.cargo(&["build"], &[("CHOREO_NVCC", "skip")]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "the build succeeded:\n{stderr}");
    // The rendered diagnostics, located at file:line:col …
    assert!(stderr.contains("error[E0301]"), "{stderr}");
    assert!(stderr.contains("kernels/syntax.co:2:7"), "{stderr}");
    assert!(stderr.contains("kernels/undeclared.co:4:"), "{stderr}");
    // … and one `error:` summary line per failing file from `cargo::error=` (cargo prints
    // `error: <package>@<version>: <message>`).
    for file in ["kernels/syntax.co", "kernels/undeclared.co"] {
        let summary = format!("{file}: 1 error");
        assert_eq!(
            stderr.lines().filter(|l| l.starts_with("error: ") && l.ends_with(&summary)).count(),
            1,
            "{stderr}"
        );
    }
    assert!(!stderr.contains("good.co:"), "{stderr}");
    // Exit status 1 and no panic.
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn without_nvcc_the_kernels_are_built_for_the_cpu_and_run() {
    let fixture = Fixture::new("basic", "fixture-basic-stub");
    let skip = [("CHOREO_NVCC", "skip")];

    let check = fixture.cargo(&["check"], &skip);
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "cargo check failed:\n{stderr}");
    // One warning, naming the reason and what is built instead.
    assert_eq!(
        stderr.matches("are not compiled for CUDA (CHOREO_NVCC=skip is set)").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("built for the CPU only"), "{stderr}");
    let report = fixture.take_report().expect("the build script ran");
    assert_eq!(field(&report, "mode"), "stub", "{report}");
    assert_eq!(field(&report, "nvcc_runs"), "0", "{report}");
    assert_eq!(field(&report, "cpu_runs"), "2", "{report}");
    assert!(report.contains("library="), "{report}");

    // `cargo build` reuses the build script's run of `cargo check`, links the CPU kernels,
    // and the binary runs.
    fixture.build_ok(&skip);
    let output = fixture.run();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut lines = stdout.lines();
    // The wrapper exists and checks shapes before anything runs, on the CPU as on the GPU.
    let wrapper = lines.next().unwrap_or_default();
    assert!(wrapper.starts_with("wrapper: error: "), "{stdout}");
    assert!(wrapper.contains("15") && !wrapper.contains("not built"), "{stdout}");
    // No CUDA entry and no hand-written .cu are linked.
    assert_eq!(lines.next(), Some("entry: stub build, not linked"), "{stdout}");
    assert_eq!(lines.next(), Some("hand: stub build, not linked"), "{stdout}");
    // The hand-written file is listed, not compiled.
    assert!(report.contains("cuda_file=cuda/hand.cu compiled=false"), "{report}");
}

/// A `.co` file whose host code defines functions, a `__device__` helper and globals with
/// external linkage: its CUDA and its CPU object both define them, and the program links both
/// (every wrapper references both entries). The CPU object keeps its copies local, so the
/// program links, and the CPU entries use the CPU copies (`calls` counts the CPU calls).
#[test]
fn host_code_with_external_linkage_links_with_both_backends() {
    let fixture = Fixture::new("hostsyms", "fixture-hostsyms");
    let stderr = fixture.build_ok(&[]);
    let report = fixture.take_report().expect("the build script ran");
    require_nvcc(&report);
    assert_eq!(field(&report, "nvcc_runs"), "2", "{report}");
    assert_eq!(field(&report, "cpu_runs"), "2", "{report}");
    assert!(!stderr.contains("is defined by"), "{stderr}");
    let output = fixture.run_with(&[("CHOREO_DEVICE", "cpu")]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "squares: 2\ncalls: 2\ncubes: 27\n");

    // The post-processed objects are cached like the others: a rerun compiles nothing.
    std::thread::sleep(Duration::from_millis(1100));
    fixture.touch("kernels/host-syms.co");
    fixture.build_ok(&[]);
    let report = fixture.take_report().expect("touching a .co reruns the build script");
    assert_eq!(field(&report, "nvcc_runs"), "0", "{report}");
    assert_eq!(field(&report, "cpu_runs"), "0", "{report}");
    assert_eq!(field(&report, "library_rebuilt"), "false", "{report}");
}

/// Without an objcopy the CPU object cannot keep its copies to itself: the build fails before
/// linking, naming each symbol that both objects of the file define and what to do, instead
/// of the linker's duplicate-symbol errors.
#[test]
fn without_objcopy_duplicate_host_symbols_are_a_located_error() {
    let fixture = Fixture::new("hostsyms", "fixture-hostsyms-no-objcopy");
    let output = fixture.cargo(&["build"], &[("OBJCOPY", "/nonexistent/objcopy")]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "the build succeeded (it needs nvcc to build both backends):\n{stderr}"
    );
    let clashes = [
        ("host-syms", "_Z8scale_ofi"),
        ("host-syms", "_Z2sqf"),
        ("host-syms", "calls"),
        ("host-syms", "table"),
        ("other", "_Z4cubef"),
    ];
    for (file, symbol) in clashes {
        let line = format!(
            "error: fixture-hostsyms-no-objcopy@0.1.0: kernels/{file}.co: `{symbol}` is \
             defined by both the CPU and the CUDA object of this file"
        );
        assert!(stderr.lines().any(|l| l == line), "no line {line:?} in:\n{stderr}");
    }
    assert!(stderr.contains("`static`, `inline`, or an unnamed namespace"), "{stderr}");
    assert!(stderr.contains("objcopy, which was not found"), "{stderr}");
    assert!(stderr.contains("no usable objcopy was found"), "{stderr}");
    // Inline functions (weak symbols) are not reported; nothing was linked.
    assert!(!stderr.contains("_Z5twicei"), "{stderr}");
    assert!(!stderr.contains("duplicate symbol"), "{stderr}");
}
