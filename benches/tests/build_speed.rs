//! Tests of `choreo-bench build` that need neither nvcc nor cargo: argument parsing, number
//! formatting, the generated large file, the cargo-log and build-report checks.
//!
//! The module is compiled into this test from its source file, so the tests do not depend on
//! how the binary wires it in.

#[allow(dead_code)]
#[path = "../src/build_speed.rs"]
mod build_speed;

use build_speed::{
    BuildReport, Invocation, LARGE_FUNCTIONS, Options, Stage, compiled_example_app, error_line,
    format_ms, generate_large_source, nvcc_args, parse_args, run_front_stages, translate,
};
use choreo_bench::table::three_digits;
use std::path::{Path, PathBuf};

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|arg| arg.to_string()).collect()
}

fn options(list: &[&str]) -> Options {
    match parse_args(&args(list)) {
        Ok(Invocation::Run(options)) => options,
        other => panic!("{list:?} parsed as {other:?}"),
    }
}

#[test]
fn defaults() {
    let o = options(&[]);
    assert_eq!((o.trials, o.nvcc_trials, o.nvcc, o.cargo, o.markdown), (5, 3, true, true, None));
    // The default repository is this workspace.
    assert!(o.repo.join("example-app/kernels").is_dir(), "{}", o.repo.display());
}

#[test]
fn every_flag() {
    let o = options(&[
        "--trials",
        "7",
        "--markdown",
        "out.md",
        "--no-nvcc",
        "--no-cargo",
        "--repo",
        "/x",
        "--nvcc-trials=2",
    ]);
    assert_eq!(o.trials, 7);
    assert_eq!(o.nvcc_trials, 2);
    assert_eq!(o.markdown, Some(PathBuf::from("out.md")));
    assert!(!o.nvcc && !o.cargo);
    assert_eq!(o.repo, Path::new("/x"));
    assert_eq!(options(&["--trials=9"]).trials, 9);
    // nvcc trials default to 3, but never more than --trials.
    assert_eq!(options(&["--trials", "1"]).nvcc_trials, 1);
    assert_eq!(options(&["--trials", "10"]).nvcc_trials, 3);
}

#[test]
fn help() {
    assert_eq!(parse_args(&args(&["--help"])), Ok(Invocation::Help));
    assert_eq!(parse_args(&args(&["--trials", "3", "-h"])), Ok(Invocation::Help));
}

#[test]
fn usage_errors_name_the_problem() {
    let error = |list: &[&str]| parse_args(&args(list)).expect_err("a usage error");
    assert!(error(&["--trials"]).contains("'--trials' needs a number"));
    assert!(error(&["--trials", "0"]).contains("at least 1"));
    assert!(error(&["--trials", "x"]).contains("whole number, not 'x'"));
    assert!(error(&["--trials="]).contains("needs a number"));
    assert!(error(&["--markdown"]).contains("'--markdown' needs a file"));
    assert!(error(&["--frobnicate"]).contains("unknown argument '--frobnicate'"));
    assert!(error(&["extra"]).contains("unknown argument 'extra'"));
    assert!(error(&["--no-nvcc=1"]).contains("takes no value"));
}

#[test]
fn times_have_three_significant_digits() {
    assert_eq!(three_digits(0.0123456), "0.0123");
    assert_eq!(three_digits(1.0), "1.00");
    assert_eq!(three_digits(4.567), "4.57");
    assert_eq!(three_digits(9.996), "10.0");
    assert_eq!(three_digits(78.94), "78.9");
    assert_eq!(three_digits(789.4), "789");
    assert_eq!(three_digits(1234.0), "1230");
    assert_eq!(three_digits(0.0), "0");
    assert_eq!(three_digits(f64::NAN), "n/a");
    assert_eq!(format_ms(0.5), "0.500 ms");
    assert_eq!(format_ms(9_876.0), "9880 ms");
    assert_eq!(format_ms(9_996.0), "10.0 s");
    assert_eq!(format_ms(123_456.0), "123 s");
}

/// The large file must translate cleanly (the benchmark fails otherwise), be large, and vary.
#[test]
fn generated_file_translates_without_errors() {
    let source = generate_large_source(LARGE_FUNCTIONS);
    assert!(source.lines() >= 20_000, "only {} lines", source.lines());
    assert_eq!(source.text.matches("\n__co__ ").count(), LARGE_FUNCTIONS);
    for construct in [
        "parallel.async<s0>",
        "parallel.async q",
        "parallel<s0>",
        "sync.global",
        ": group",
        "while (",
        "foreach",
        "break;",
        "continue;",
        "else",
        "return",
        "[?, 4]",
        "f16",
        "f64",
        "&acc",
    ] {
        assert!(source.text.contains(construct), "the generated file has no {construct}");
    }
    let cu = translate(&source).unwrap_or_else(|error| panic!("{error}"));
    // Every generated function got its C++ wrapper (named like the function).
    for index in [0, 1, LARGE_FUNCTIONS / 2, LARGE_FUNCTIONS - 1] {
        let name = format!("f{index:04}");
        assert!(cu.contains(&format!("{name}(")), "no {name} in the .cu");
    }
}

/// The stage split runs the same stages as `compile`; on a smaller file (three rounds of every
/// shape) to keep the test fast in debug builds.
#[test]
fn generated_file_passes_each_stage() {
    let source = generate_large_source(33);
    for stage in [Stage::Parse, Stage::Sema, Stage::Lower] {
        run_front_stages(&source, stage).unwrap_or_else(|error| panic!("{stage:?}: {error}"));
    }
}

#[test]
fn generation_is_deterministic_and_sized_by_the_count() {
    let small = generate_large_source(16);
    assert_eq!(small.text, generate_large_source(16).text);
    assert!(generate_large_source(32).lines() > small.lines());
}

/// A rejected file is a one-line error with its location and code, not a panic.
#[test]
fn rejected_source_is_a_located_error() {
    let source = build_speed::Source {
        name: "broken.co".into(),
        text: "__co__ void f(f32 [4] &a) {\n  parallel p by 4 { a.at(p) = q; }\n}\n".into(),
    };
    let error = translate(&source).expect_err("undeclared name");
    assert!(error.starts_with("broken.co was rejected (1 error), first: broken.co:2:"), "{error}");
    assert!(!error.contains('\n'), "{error}");
    assert!(run_front_stages(&source, Stage::Sema).is_err());
    assert!(run_front_stages(&source, Stage::Parse).is_ok());
}

#[test]
fn cargo_log_and_report_checks() {
    let rebuilt =
        "   Compiling example-app v0.1.0 (/work/main/example-app)\n    Finished `release`";
    let no_op = "    Finished `release` profile [optimized] target(s) in 0.05s\n";
    let other = "   Compiling example-apple v0.1.0 (/x)\n";
    assert!(compiled_example_app(rebuilt));
    assert!(!compiled_example_app(no_op));
    assert!(!compiled_example_app(other));

    let report = BuildReport::parse("name=kernels\nmode=nvcc\nnvcc_runs=0\ncache_hits=3\n");
    assert_eq!(report, BuildReport { mode: "nvcc".into(), nvcc_runs: Some(0) });
    let report = BuildReport::parse("mode=stub\nstub_reason=no nvcc\nnvcc_runs=x\n");
    assert_eq!(report, BuildReport { mode: "stub".into(), nvcc_runs: None });
}

#[test]
fn nvcc_arguments_match_choreo_build() {
    let args = nvcc_args(Path::new("/k"), Path::new("/t/saxpy.cu"), Path::new("/t/saxpy.o"));
    let text: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let line = text.join(" ");
    assert!(
        line.starts_with(
            "-c -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC \
             -DCHOREO_LEAN_PRELUDE -I /k"
        ),
        "{line}"
    );
    assert!(line.ends_with("-MD -MF /t/saxpy.d -o /t/saxpy.o /t/saxpy.cu"), "{line}");
}

#[test]
fn failures_quote_the_error_line() {
    let nvcc = b"In file included from x.cu:1:\nx.cu(3): error: identifier \"q\" is undefined\n\n\
                 1 error detected in the compilation of \"x.cu\".\n";
    assert_eq!(error_line(nvcc), "x.cu(3): error: identifier \"q\" is undefined");
    assert_eq!(error_line(b"first\n  last line  \n\n"), "last line");
    assert_eq!(error_line(b""), "(no output)");
}
