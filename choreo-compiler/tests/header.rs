//! Builds the C++ test programs in `tests/header/` against `include/choreo.h` (the runtime header
//! that generated code includes, shipped with this crate) with nvcc and runs them. The programs
//! are host code (except `device.cu`), so they run without a GPU.
//!
//! nvcc is found as builds find it (`choreo-toolkit`: `NVCC`, `CUDA_HOME`/`CUDA_PATH`, `PATH`,
//! the pip wheels of `python3`, the `ci/install-cuda` cache); when there is none,
//! `ci/install-cuda` provisions the pinned toolkit. Without nvcc every test here fails: CI
//! provides CUDA, and a header test that cannot build must not pass.

use choreo_toolkit::{Discovery, Env, Target, Toolkit};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, SystemTime};

/// Every program in `tests/header/`, by file stem. `every_program_has_a_test` keeps this list and
/// the directory in step.
const PROGRAMS: &[&str] = &["checks", "device", "env", "random", "spans", "types", "verify"];

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn programs_dir() -> PathBuf {
    manifest_dir().join("tests").join("header")
}

fn discover(env: &Env) -> Result<Option<Toolkit>, String> {
    match choreo_toolkit::find(env, &Target::host()) {
        Ok(Discovery::Found(toolkit)) => Ok(Some(toolkit)),
        Ok(Discovery::Stub(_)) => Ok(None),
        Err(error) => Err(error.to_string()),
    }
}

fn find_toolkit() -> Result<Toolkit, String> {
    if let Some(toolkit) = discover(&Env::process())? {
        return Ok(toolkit);
    }
    let script = manifest_dir().join("..").join("ci").join("install-cuda");
    let output = Command::new(&script)
        .output()
        .map_err(|err| format!("cannot run {}: {err}", script.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} failed ({}):\n{}",
            script.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let root = String::from_utf8_lossy(&output.stdout).trim().to_string();
    discover(&Env::process().with_var("CUDA_HOME", &root))?
        .ok_or_else(|| format!("ci/install-cuda printed {root}, which has no bin/nvcc"))
}

/// The result of compiling every program: the executable, or nvcc's complaint.
type Builds = BTreeMap<&'static str, Result<PathBuf, String>>;

/// Compiles all programs once per test process, on as many threads as there are cores.
fn builds() -> &'static Result<Builds, String> {
    static BUILDS: OnceLock<Result<Builds, String>> = OnceLock::new();
    BUILDS.get_or_init(|| {
        let toolkit = find_toolkit().map_err(|why| {
            format!(
                "no CUDA compiler: {why}\nThe choreo.h tests need nvcc: set CUDA_HOME, put nvcc on \
                 PATH, or let ci/install-cuda provision it."
            )
        })?;
        let out_dir =
            output_dir().map_err(|err| format!("cannot create the output folder: {err}"))?;
        let next = AtomicUsize::new(0);
        let results = Mutex::new(Builds::new());
        let workers = thread::available_parallelism().map_or(2, |n| n.get()).min(PROGRAMS.len());
        thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    while let Some(&name) = PROGRAMS.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let result = compile(&toolkit, &out_dir, name);
                        results
                            .lock()
                            .unwrap_or_else(|poison| poison.into_inner())
                            .insert(name, result);
                    }
                });
            }
        });
        Ok(results.into_inner().unwrap_or_else(|poison| poison.into_inner()))
    })
}

/// A folder of this process under the target's temporary folder; folders that earlier runs left
/// behind are removed once they are a day old.
fn output_dir() -> std::io::Result<PathBuf> {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("choreo-header");
    fs::create_dir_all(&base)?;
    let day_ago = SystemTime::now() - Duration::from_secs(24 * 60 * 60);
    for entry in fs::read_dir(&base)?.flatten() {
        let stale =
            entry.metadata().and_then(|meta| meta.modified()).is_ok_and(|time| time < day_ago);
        if stale {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
    let dir = base.join(std::process::id().to_string());
    fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn compile(toolkit: &Toolkit, out_dir: &Path, name: &str) -> Result<PathBuf, String> {
    let source = programs_dir().join(format!("{name}.cu"));
    let exe = out_dir.join(name);
    let mut nvcc = Command::new(&toolkit.nvcc);
    nvcc.args(["-std=c++17", "-gencode", "arch=compute_90a,code=sm_90a"])
        .arg("-I")
        .arg(manifest_dir().join("include"))
        .args(["-Xcompiler", "-Wall,-Wextra"]);
    nvcc.arg(format!("-L{}", toolkit.lib_dir.display()));
    nvcc.arg("-o").arg(&exe).arg(&source);
    let output =
        nvcc.output().map_err(|err| format!("cannot run {}: {err}", toolkit.nvcc.display()))?;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if !output.status.success() {
        return Err(format!("nvcc failed on {}:\n{log}", source.display()));
    }
    // Warnings from the CUDA headers are not ours; warnings in choreo.h or the tests are defects.
    let ours: Vec<&str> = log
        .lines()
        .filter(|line| {
            line.contains("warning")
                && (line.contains("choreo.h") || line.contains("tests/header/"))
        })
        .collect();
    if !ours.is_empty() {
        return Err(format!("nvcc warned about {}:\n{log}", source.display()));
    }
    Ok(exe)
}

fn executable(name: &str) -> PathBuf {
    assert!(PROGRAMS.contains(&name), "{name} is not in PROGRAMS");
    match builds() {
        Err(why) => panic!("{why}"),
        Ok(builds) => match &builds[name] {
            Ok(exe) => exe.clone(),
            Err(log) => panic!("{log}"),
        },
    }
}

/// Runs a program in `mode` with CHOREO_RANDOM_SEED cleared, plus the given environment.
fn run_with_env(name: &str, mode: &str, vars: &[(&str, &str)]) -> Output {
    let exe = executable(name);
    let mut command = Command::new(&exe);
    if !mode.is_empty() {
        command.arg(mode);
    }
    command.env_remove("CHOREO_RANDOM_SEED");
    for (key, value) in vars {
        command.env(key, value);
    }
    command.output().unwrap_or_else(|err| panic!("cannot run {}: {err}", exe.display()))
}

fn run(name: &str, mode: &str) -> Output {
    run_with_env(name, mode, &[])
}

fn describe(name: &str, mode: &str, output: &Output) -> String {
    format!(
        "{name} {mode}: {}\n--- stdout\n{}--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs a program that must succeed and print "Test Passed" last.
fn expect_pass(name: &str, mode: &str) -> Output {
    let output = run(name, mode);
    assert!(
        output.status.success() && stdout(&output).trim_end().ends_with("Test Passed"),
        "{}",
        describe(name, mode, &output)
    );
    output
}

/// Whether the process was ended by SIGABRT (what `abort()` and failed choreo checks do).
fn aborted(output: &Output) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        output.status.signal() == Some(6)
    }
    #[cfg(not(unix))]
    {
        !output.status.success()
    }
}

/// Runs a mode that must abort, printing `on_stderr` to stderr and `on_stdout` to stdout.
fn expect_abort(name: &str, mode: &str, on_stderr: &[&str], on_stdout: &[&str]) -> Output {
    let output = run(name, mode);
    let err = stderr(&output);
    let out = stdout(&output);
    assert!(aborted(&output), "expected an abort; {}", describe(name, mode, &output));
    for text in on_stderr {
        assert!(err.contains(text), "stderr lacks {text:?}; {}", describe(name, mode, &output));
    }
    for text in on_stdout {
        assert!(out.contains(text), "stdout lacks {text:?}; {}", describe(name, mode, &output));
    }
    assert!(!out.contains("not reached"), "{}", describe(name, mode, &output));
    output
}

/// The 1-based line of `marker` in a test program, so expected messages need no line numbers.
fn line_of(program: &str, marker: &str) -> usize {
    let path = programs_dir().join(program);
    let text = fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    let index = text.lines().position(|line| line.contains(marker));
    index.unwrap_or_else(|| panic!("{marker} not found in {program}")) + 1
}

#[test]
fn every_program_has_a_test() {
    let mut found: Vec<String> = fs::read_dir(programs_dir())
        .expect("tests/header exists")
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension() == Some(OsStr::new("cu")))
        .filter_map(|path| path.file_stem().map(|stem| stem.to_string_lossy().into_owned()))
        .collect();
    found.sort();
    assert_eq!(found, PROGRAMS, "tests/header/*.cu and PROGRAMS differ");
}

#[test]
fn element_types_conversions_and_operators() {
    expect_pass("types", "");
}

#[test]
fn spans_views_and_their_constructors() {
    expect_pass("spans", "");
}

#[test]
fn fill_random_covers_each_range() {
    expect_pass("random", "");
}

#[test]
fn choreo_random_seed_decides_the_sequence() {
    let seeded = |seed: &str| {
        let output = run_with_env("random", "print", &[("CHOREO_RANDOM_SEED", seed)]);
        assert!(output.status.success(), "{}", describe("random", "print", &output));
        stdout(&output)
    };
    assert_eq!(seeded("7"), seeded("7"));
    assert_ne!(seeded("7"), seeded("8"));
    let unseeded = || stdout(&run("random", "print"));
    assert_ne!(unseeded(), unseeded(), "without a seed every run draws differently");
    let bad = run_with_env("random", "print", &[("CHOREO_RANDOM_SEED", "abc")]);
    assert!(bad.status.success(), "{}", describe("random", "print", &bad));
    assert!(
        stderr(&bad).contains("ignoring CHOREO_RANDOM_SEED=\"abc\""),
        "{}",
        describe("random", "print", &bad)
    );
}

#[test]
fn passing_checks_are_silent() {
    let output = expect_pass("checks", "pass");
    assert_eq!(stdout(&output), "Test Passed\n");
    assert_eq!(stderr(&output), "");
}

#[test]
fn out_of_bounds_subscripts_abort_with_the_index_and_shape() {
    let cases = [
        ("oob-rank1", "subscript 4 of dimension 0 is outside [0, 4) of a span of shape [4]"),
        ("oob-middle", "subscript 3 of dimension 1 is outside [0, 3) of a span of shape [2, 3, 4]"),
        ("oob-last", "subscript 5 of dimension 1 is outside [0, 5) of a span of shape [2, 5]"),
        ("oob-negative", "subscript -1 of dimension 0 is outside [0, 2) of a span of shape [2, 5]"),
        ("oob-huge", "subscript 1099511627776 of dimension 0 is outside [0, 4)"),
    ];
    for (mode, message) in cases {
        let output = expect_abort(
            "checks",
            mode,
            &["choreo runtime check failed: Index out of bounds: ", message],
            &[],
        );
        // Output printed before the failure is not lost in the abort.
        assert_eq!(stdout(&output), "before the failure\n");
    }
}

#[test]
fn runtime_check_failures_print_the_message_to_stderr() {
    expect_abort(
        "checks",
        "runtime-check",
        &[
            "choreo runtime check failed: shape inconsistent on the 1st parameter ('x', dim: 0): expect: 8\n",
        ],
        &[],
    );
    expect_abort(
        "checks",
        "runtime-check-string",
        &["choreo runtime check failed: got 7 items\n"],
        &[],
    );
}

#[test]
fn choreo_assert_reports_the_callers_location_on_stdout() {
    let line = line_of("checks.cu", "CHECKS_ASSERT_LINE");
    expect_abort(
        "checks",
        "choreo-assert",
        &[],
        &[&format!("checks.cu:{line}: choreo assertion failed: arithmetic is broken\n")],
    );
    let line = line_of("checks.cu", "CHECKS_CROQ_LINE");
    expect_abort(
        "checks",
        "croq-assert",
        &[],
        &[&format!("checks.cu:{line}: choreo assertion failed: croq message\n")],
    );
    expect_abort(
        "checks",
        "explicit-location",
        &[],
        &["kernel.co:42: choreo assertion failed: generated\n"],
    );
}

#[test]
fn abend_reports_cuda_errors_and_aborts() {
    expect_abort(
        "checks",
        "abend-true",
        &["CUDA failure: 1 (invalid argument) at ", "checks.cu:"],
        &[],
    );
    expect_abort(
        "checks",
        "abend-false",
        &["choreo: unexpected failure (abend_false) at ", "checks.cu:"],
        &[],
    );
    // The device trap aborts on the host, silently.
    let output = expect_abort("checks", "co-abort", &[], &[]);
    assert_eq!(stderr(&output), "");
}

#[test]
fn invalid_shapes_and_bounds_abort_with_a_message() {
    let cases = [
        ("zero-extent", "error: invalid dimensions. make_spandata got the extent 0"),
        ("negative-extent", "error: invalid dimensions. make_spandata got the extent -2"),
        ("braced-zero-extent", "error: invalid dimensions. Cannot allocate a span of shape [4, 0]"),
        ("extent-count", "a rank-2 shape was given 3 extents"),
        ("mdspan-index", "mdspan index 2 is out of range for rank 2"),
        ("fill-random-bounds", "fill_random: the lower bound 5 is above the upper bound 1"),
        ("fill-random-narrow-bounds", "fill_random: the lower bound 0 is above the upper bound -1"),
    ];
    for (mode, message) in cases {
        expect_abort("checks", mode, &[&format!("choreo runtime check failed: {message}")], &[]);
    }
}

#[test]
fn matmul_verifiers_and_sparse_helpers() {
    let output = expect_pass("verify", "");
    assert!(stdout(&output).contains("verify_matmul_row_row_sampled: 64 samples passed\n"));
}

#[test]
fn matmul_verifiers_report_mismatches() {
    expect_abort(
        "verify",
        "subset-mismatch",
        &[],
        &[
            "verify_matmul_row_col_subset: mismatch at (2, 5) ",
            "choreo assertion failed: values are not equal.\n",
        ],
    );
    expect_abort(
        "verify",
        "row-row-subset-mismatch",
        &[],
        &[
            "verify_matmul_row_row_subset: mismatch at (4, 11) ",
            "choreo assertion failed: values are not equal.\n",
        ],
    );
    let output = expect_abort(
        "verify",
        "sampled-mismatch",
        &[],
        &["FAILED: 64/64 samples\n", "choreo assertion failed: sampled verification failed\n"],
    );
    // Only the first five mismatches are itemised.
    assert_eq!(stdout(&output).matches("mismatch at (").count(), 5, "{}", stdout(&output));
    expect_abort(
        "verify",
        "shape-mismatch",
        &[
            "verify_matmul_row_col_subset: inconsistent shapes: lhs [16, 8], rhs [12, 8], result [16, 12]",
        ],
        &[],
    );
}

/// Whether the CUDA runtime sees a device here.
fn device_count() -> u32 {
    let output = run("env", "probe");
    assert!(output.status.success(), "{}", describe("env", "probe", &output));
    let out = stdout(&output);
    out.trim()
        .strip_prefix("devices: ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected probe output {out:?}"))
}

#[test]
fn environment_check_and_device_status() {
    if device_count() == 0 {
        // No usable device: the check exits with status 1 and says why; the status check aborts.
        for mode in ["env", "env-sm-too-high"] {
            let output = run("env", mode);
            assert_eq!(output.status.code(), Some(1), "{}", describe("env", mode, &output));
            assert!(
                stderr(&output).contains("[choreo] No CUDA-capable devices found."),
                "{}",
                describe("env", mode, &output)
            );
            assert!(!stdout(&output).contains("environment ok"));
        }
        expect_abort(
            "env",
            "verify",
            &["CUDA failure: ", "reported by verify_device_status at ", "env.cu:"],
            &[],
        );
    } else {
        let output = run("env", "env");
        assert!(
            output.status.success() && stdout(&output) == "environment ok\n",
            "{}",
            describe("env", "env", &output)
        );
        let output = run("env", "verify");
        assert!(
            output.status.success() && stdout(&output) == "device status ok\n",
            "{}",
            describe("env", "verify", &output)
        );
        // No device reaches sm_99.0.
        let output = run("env", "env-sm-too-high");
        let text = describe("env", "env-sm-too-high", &output);
        assert_eq!(output.status.code(), Some(1), "{text}");
        assert!(
            stderr(&output).contains("[choreo] Compute capability too low: device 0 is sm_"),
            "{text}"
        );
        assert!(!stdout(&output).contains("environment ok"), "{text}");
    }
}

#[test]
fn device_code_compiles_for_sm_90a() {
    executable("device");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_code_runs_on_gpu() {
    assert!(device_count() > 0, "no CUDA device is visible");
    expect_pass("device", "");
    // The trap surfaces at the next synchronisation; the device printf names the caller's line.
    let line = line_of("device.cu", "DEVICE_ASSERT_LINE");
    expect_abort(
        "device",
        "device-assert",
        &["CUDA failure: "],
        &[&format!("device.cu:{line}: choreo assertion failed: device value must be zero\n")],
    );
}
