//! The end-to-end programs (`tests/e2e/NN_name.co`, built with nvcc and run on a GPU by
//! `ci/run-e2e`) stay valid Choreo: each is translated here, as the whole program it is, with
//! no error (some warn on purpose), so a compiler change that breaks one shows in `cargo test` on a
//! machine without a GPU or nvcc.

use choreo_compiler::compile::{CompileOptions, OutputMode, compile};
use choreo_compiler::diagnostics::render_human;
use choreo_compiler::source::SourceDb;
use std::path::PathBuf;

mod common;

#[test]
fn every_e2e_program_translates_cleanly() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
    let programs = common::co_files(&dir, 70);
    let mut failures = Vec::new();
    for path in &programs {
        let text = std::fs::read_to_string(path).expect("readable program");
        let mut db = SourceDb::new();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let file = db.add(name.clone(), text);
        let options = CompileOptions { mode: OutputMode::Standalone, ..CompileOptions::default() };
        let out = compile(&db, file, &options);
        if out.cu.is_none() || out.diagnostics.iter().any(|d| d.is_error()) {
            failures.push(format!("{name}:\n{}", render_human(&db, &out.diagnostics)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The programs `E2E_FILTER` selects (all when unset): a comma-separated list of numbers and
/// ranges of the programs' number prefixes (`E2E_FILTER=85-185`, `E2E_FILTER=86,126-130`).
fn selected(programs: Vec<PathBuf>) -> Vec<PathBuf> {
    let Ok(filter) = std::env::var("E2E_FILTER") else { return programs };
    let ranges: Vec<(u32, u32)> = filter
        .split(',')
        .map(|part| {
            let part = part.trim();
            let (lo, hi) = part.split_once('-').unwrap_or((part, part));
            let number = |s: &str| {
                s.trim().parse::<u32>().unwrap_or_else(|_| {
                    panic!("E2E_FILTER={filter}: `{part}` is not a number or range N-M")
                })
            };
            (number(lo), number(hi))
        })
        .collect();
    let chosen: Vec<PathBuf> = programs
        .into_iter()
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let n = name.split('_').next().and_then(|n| n.parse::<u32>().ok());
            n.is_some_and(|n| ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&n)))
        })
        .collect();
    assert!(!chosen.is_empty(), "E2E_FILTER={filter} selects no program");
    chosen
}

/// Programs that use what the CPU cannot run (inline PTX): their CPU translation must fail
/// with `E0806` at that construct, never produce code.
const GPU_ONLY: &[&str] = &["71_calls_atomics.co", "79_asm_inout_cpp.co"];

/// How long one program may run on the CPU (the slowest take a few seconds on 2 cores).
const CPU_RUN_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Every end-to-end program on the CPU backend, with the same checks as on the GPU: translated
/// for `Target::Cpu` as a whole program, compiled with the system C++ compiler against the CPU
/// runtime, run (under a watchdog), and passing when it exits 0 and its output equals
/// `NAME.expected` or else has a line "Test Passed" — what `ci/run-e2e` asks of it on the GPU.
#[test]
fn every_e2e_program_runs_on_the_cpu() {
    use choreo_compiler::compile::Target;
    use std::process::Command;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
    let programs = selected(common::co_files(&dir, 70));
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("e2e_cpu");
    std::fs::create_dir_all(&out_dir).expect("create the output folder");
    const FLAGS: &[&str] = &["-std=c++17", "-O1", "-g0", "-pthread", "-w"];
    // The runtime and the precompiled header, side by side (each takes seconds).
    let (runtime, precompiled) = std::thread::scope(|scope| {
        let header = scope.spawn(|| common::cxx::precompiled_choreo_h(&out_dir.join("pch"), FLAGS));
        let runtime = common::cxx::compile_runtime(
            &out_dir.join("choreo_cpu_runtime.o"),
            &["-std=c++17", "-O2", "-g0", "-pthread"],
        );
        (runtime, header.join().expect("the header thread does not panic"))
    });
    let runtime = runtime.unwrap_or_else(|e| panic!("{e}"));

    // One program: Ok(()) when it passed (or, GPU-only, was refused as it should be).
    let run_one = |path: &PathBuf| -> Result<(), String> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let stem = name.trim_end_matches(".co").to_string();
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        let mut db = SourceDb::new();
        let file = db.add(name.clone(), text);
        let options = CompileOptions {
            mode: OutputMode::Standalone,
            target: Target::Cpu,
            ..CompileOptions::default()
        };
        let out = compile(&db, file, &options);
        if GPU_ONLY.contains(&name.as_str()) {
            let refused = out.cpp.is_none()
                && out.diagnostics.iter().filter(|d| d.is_error()).all(|d| d.code == "E0806")
                && out.diagnostics.iter().any(|d| d.code == "E0806");
            return if refused {
                Ok(())
            } else {
                Err(format!(
                    "{name}: expected E0806 on the CPU target, got:\n{}",
                    render_human(&db, &out.diagnostics)
                ))
            };
        }
        let cpp = match out.cpp {
            Some(cpp) if !out.diagnostics.iter().any(|d| d.is_error()) => cpp,
            _ => return Err(format!("{name}:\n{}", render_human(&db, &out.diagnostics))),
        };
        let source = out_dir.join(format!("{stem}.cpp"));
        let exe = out_dir.join(&stem);
        std::fs::write(&source, cpp).map_err(|e| e.to_string())?;
        let mut build = Command::new(common::cxx::cxx());
        build.args(FLAGS);
        if let Some(dir) = &precompiled {
            build.arg("-I").arg(dir);
        }
        build
            .arg("-I")
            .arg(common::cxx::include_dir())
            .arg(&source)
            .arg(&runtime)
            .arg("-o")
            .arg(&exe);
        let built = build.output().map_err(|e| format!("{name}: cannot run the compiler: {e}"))?;
        if !built.status.success() {
            return Err(format!("{name} does not compile:\n{}", common::cxx::describe(&built)));
        }
        let output = common::cxx::run_with_timeout(Command::new(&exe), CPU_RUN_LIMIT)
            .map_err(|e| format!("{name}: {e}"))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let expected = dir.join(format!("{stem}.expected"));
        let passed = output.status.success()
            && match std::fs::read_to_string(&expected) {
                Ok(want) => stdout == want,
                Err(_) => stdout.lines().any(|line| line.trim() == "Test Passed"),
            };
        if passed {
            Ok(())
        } else {
            Err(format!("{name} failed on the CPU:\n{}", common::cxx::describe(&output)))
        }
    };

    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).min(4);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while let Some(path) = programs.get(next.fetch_add(1, Ordering::Relaxed)) {
                    if let Err(failure) = run_one(path) {
                        failures.lock().unwrap_or_else(|p| p.into_inner()).push(failure);
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        programs.len(),
        failures.join("\n\n")
    );
}
