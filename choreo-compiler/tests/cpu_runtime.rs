//! The CPU runtime (`include/choreo_cpu.h`, `include/choreo_cpu_runtime.cpp`): builds each C++
//! program of `tests/cpu_runtime/` with the system C++ compiler (`CXX`, else `c++`) against the
//! runtime, runs it and checks that it prints `ok` and exits with status 0. No GPU is needed.
//!
//! The runtime is compiled once into an object shared by every program. Every program runs
//! under a watchdog: a runtime that deadlocks fails its test after `RUN_TIMEOUT` instead of
//! hanging the suite.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

mod common;

use common::cxx::{cxx, describe, include_dir, run_with_timeout};

/// Every program in `tests/cpu_runtime/`, by file stem; `every_program_has_a_test` keeps this
/// list and the directory in step.
const PROGRAMS: &[&str] = &[
    "barriers",
    "choreo_h",
    "errors_assert",
    "errors_deadlock",
    "errors_loop_barrier",
    "errors_mbarrier",
    "errors_trap",
    "kernels",
    "lowp",
    "mbarriers",
    "streams",
    "stress",
    "support",
];

const RUN_TIMEOUT: Duration = Duration::from_secs(30);

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn programs_dir() -> PathBuf {
    manifest_dir().join("tests").join("cpu_runtime")
}

fn out_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cpu_runtime");
    fs::create_dir_all(&dir).expect("create the output folder");
    dir
}

/// The flags of every compilation: the runtime must build warning-free.
const FLAGS: &[&str] = &["-std=c++17", "-O1", "-g0", "-pthread", "-Wall", "-Wextra", "-Werror"];

fn common_flags(command: &mut Command) {
    command.args(FLAGS);
    command.arg("-I").arg(include_dir());
}

/// How the runtime object is built: as shipped, or with the portable ucontext fibres.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavour {
    Default,
    Ucontext,
}

/// choreo_cpu_runtime.cpp compiled once (per flavour) for the whole test binary.
fn runtime_object(flavour: Flavour) -> &'static Result<PathBuf, String> {
    static DEFAULT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    static UCONTEXT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let (cell, name) = match flavour {
        Flavour::Default => (&DEFAULT, "choreo_cpu_runtime.o"),
        Flavour::Ucontext => (&UCONTEXT, "choreo_cpu_runtime_ucontext.o"),
    };
    cell.get_or_init(|| {
        let mut flags = FLAGS.to_vec();
        if flavour == Flavour::Ucontext {
            flags.push("-DCHOREO_CPU_UCONTEXT");
        }
        common::cxx::compile_runtime(&out_dir().join(name), &flags)
    })
}

/// Builds and runs `tests/cpu_runtime/<name>.cpp`; returns its output (which printed `ok`).
fn run_program(name: &str) -> Output {
    run_program_with(name, Flavour::Default)
}

fn run_program_with(name: &str, flavour: Flavour) -> Output {
    let object = match runtime_object(flavour) {
        Ok(object) => object,
        Err(err) => panic!("{err}"),
    };
    let suffix = if flavour == Flavour::Ucontext { "-ucontext" } else { "" };
    let exe = out_dir().join(format!("{name}{suffix}"));
    let mut command = Command::new(cxx());
    common_flags(&mut command);
    command.arg(programs_dir().join(format!("{name}.cpp"))).arg(object).arg("-o").arg(&exe);
    let output = command.output().unwrap_or_else(|err| panic!("cannot run {}: {err}", cxx()));
    assert!(output.status.success(), "{name}.cpp does not compile:\n{}", describe(&output));
    let mut run = Command::new(&exe);
    // More workers than this machine may have cores: the pool's sharing is exercised anyway.
    run.env("CHOREO_CPU_THREADS", "4");
    let output = run_with_timeout(run, RUN_TIMEOUT).unwrap_or_else(|err| panic!("{name}: {err}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.lines().any(|line| line == "ok"),
        "{name} failed:\n{}",
        describe(&output)
    );
    output
}

#[test]
fn every_program_has_a_test() {
    let mut found: Vec<String> = fs::read_dir(programs_dir())
        .expect("tests/cpu_runtime")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            if path.extension()? != "cpp" {
                return None;
            }
            Some(path.file_stem()?.to_string_lossy().into_owned())
        })
        .collect();
    found.sort();
    let mut listed: Vec<String> = PROGRAMS.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(found, listed, "PROGRAMS and tests/cpu_runtime/*.cpp differ");
}

#[test]
fn streams_events_memory_and_errors_of_the_c_api() {
    run_program("streams");
}

#[test]
fn loop_mode_kernels_atomics_printf_order_and_concurrent_streams() {
    let output = run_program("kernels");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let blocks: Vec<&str> = stdout.lines().filter(|line| line.starts_with("block ")).collect();
    let want: Vec<String> = (0..8).map(|b| format!("block {b}")).collect();
    assert_eq!(blocks, want, "device printf not in block order:\n{stdout}");
}

#[test]
fn fibre_kernels_with_block_warp_named_and_grid_barriers() {
    run_program("barriers");
}

#[test]
fn a_trap_is_a_sticky_launch_failure_and_unwinds_the_block() {
    let output = run_program("errors_trap");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("kernel trapping") && stderr.contains("__trap()"), "{stderr}");
}

#[test]
fn a_deadlock_is_reported_with_its_block_and_barriers() {
    let output = run_program("errors_deadlock");
    let stderr = String::from_utf8_lossy(&output.stderr);
    for part in ["deadlock", "kernel stuck", "), block (", "__syncthreads", "bar.sync 3"] {
        assert!(stderr.contains(part), "no {part:?} in the message:\n{stderr}");
    }
}

#[test]
fn mbarrier_rings_and_transaction_bytes_complete_phases_in_order() {
    run_program("mbarriers");
}

#[test]
fn an_mbarrier_wait_that_cannot_complete_is_a_reported_deadlock() {
    let output = run_program("errors_mbarrier");
    let stderr = String::from_utf8_lossy(&output.stderr);
    for part in ["deadlock", "kernel stuck", "), block (", "mbarrier wait"] {
        assert!(stderr.contains(part), "no {part:?} in the message:\n{stderr}");
    }
}

#[test]
fn a_failed_device_assertion_is_the_sticky_assert_error() {
    run_program("errors_assert");
}

#[test]
fn half_bfloat16_and_fp8_conversions_match_cuda_bit_for_bit() {
    run_program("lowp");
}

#[test]
fn choreo_h_compiles_and_runs_in_cpu_mode() {
    run_program("choreo_h");
}

#[test]
fn the_support_library_of_generated_code_works_in_cpu_mode() {
    run_program("support");
}

#[test]
fn fibres_work_with_the_portable_ucontext_switch() {
    run_program_with("barriers", Flavour::Ucontext);
    run_program_with("errors_deadlock", Flavour::Ucontext);
}

#[test]
fn many_streams_kernels_and_events_keep_their_order() {
    run_program("stress");
}

#[test]
fn a_barrier_without_fibres_is_reported_not_run_wrongly() {
    let output = run_program("errors_loop_barrier");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("__syncthreads in a kernel launched without kFibres"), "{stderr}");
}
