//! Replays the fuzz inputs kept in `fuzz/regressions/` (inputs that once crashed or hung the
//! compiler, and a sample of the fuzzers' corpus) through the whole pipeline, the way the fuzz
//! targets run them: bytes → lossy UTF-8 → parse + sema (even after parse errors) → rendered
//! diagnostics → `compile`. Every input must finish without a panic within a time bound.
//!
//! The local libFuzzer corpora (`fuzz/corpus/<target>/`, not committed) are replayed too when
//! present and small enough for a test run (see [`CORPUS_LIMIT_FILES`]).
//!
//! The inputs run on threads with a 2 MiB stack, the size of a test thread, so deep recursion
//! on a small stack is caught here as well (as an abort of the test binary).

use choreo_compiler::compile::{CompileOptions, compile};
use choreo_compiler::diagnostics::{Diagnostics, render_human};
use choreo_compiler::frontend::parse_file;
use choreo_compiler::preprocess::PreprocessOptions;
use choreo_compiler::sema;
use choreo_compiler::source::SourceDb;
use choreo_compiler::target::Target;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Time allowed for one input: a hang, not a speed test. The slowest input takes about 0.7 s
/// in a debug build on an idle machine; a 2-core machine running other builds has stretched
/// that past 6 s, so the bound leaves a wide margin (an exponential blow-up still exceeds it).
const TIME_LIMIT: Duration = Duration::from_secs(30);
/// A local corpus directory is replayed only when it has at most this many files …
const CORPUS_LIMIT_FILES: usize = 10_000;
/// … and at most this many bytes in all.
const CORPUS_LIMIT_BYTES: u64 = 8 << 20;
/// Stack of the threads the inputs run on (that of a test thread).
const STACK_BYTES: usize = 2 << 20;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The plain files under `dir`, recursively, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.is_file() {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Runs one input through the pipeline as the fuzz targets do.
fn run_pipeline(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let mut db = SourceDb::new();
    let file = db.add("fuzz-input.co", text);
    let mut diags = Diagnostics::new();
    let ast = parse_file(&db, file, &PreprocessOptions::default(), &mut diags);
    let _program = sema::check(&db, &ast, Target::default(), &mut diags);
    let _ = render_human(&db, diags.as_slice());
    let compilation = compile(&db, file, &CompileOptions::default());
    let _ = render_human(&db, &compilation.diagnostics);
    assert_eq!(
        compilation.cu.is_some(),
        !compilation.has_errors(),
        "compile must produce .cu text exactly when there is no error"
    );
}

/// Replays `inputs`; returns one line per input that panicked or overran [`TIME_LIMIT`].
fn replay(inputs: &[PathBuf]) -> Vec<String> {
    let mut failures = Vec::new();
    for path in inputs {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            // A running fuzzer replaces corpus files while we read the directory.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                failures.push(format!("{}: unreadable: {e}", path.display()));
                continue;
            }
        };
        let (done, finished) = mpsc::channel();
        let worker = std::thread::Builder::new().stack_size(STACK_BYTES).spawn(move || {
            let started = Instant::now();
            let outcome = std::panic::catch_unwind(|| run_pipeline(&bytes));
            // The receiver may have given up on this input already.
            let _ = done.send((outcome.is_ok(), started.elapsed()));
        });
        if let Err(e) = worker {
            failures.push(format!("{}: cannot start a thread: {e}", path.display()));
            continue;
        }
        match finished.recv_timeout(TIME_LIMIT + Duration::from_secs(1)) {
            Ok((true, elapsed)) if elapsed <= TIME_LIMIT => {}
            Ok((true, elapsed)) => failures.push(format!(
                "{}: took {:.1} s (limit {} s)",
                path.display(),
                elapsed.as_secs_f64(),
                TIME_LIMIT.as_secs()
            )),
            Ok((false, _)) => failures.push(format!("{}: panicked", path.display())),
            Err(_) => {
                // The worker is left running; the test fails below anyway.
                failures.push(format!("{}: no result within {:?}", path.display(), TIME_LIMIT));
            }
        }
    }
    failures
}

#[test]
fn regression_inputs_do_not_crash_or_hang() {
    let inputs = files_under(&fuzz_dir().join("regressions"));
    assert!(!inputs.is_empty(), "no inputs under fuzz/regressions/");
    let failures = replay(&inputs);
    assert!(
        failures.is_empty(),
        "{} of {} regression inputs failed:\n  {}",
        failures.len(),
        inputs.len(),
        failures.join("\n  ")
    );
}

#[test]
fn local_fuzz_corpora_do_not_crash_or_hang() {
    let corpus_root = fuzz_dir().join("corpus");
    let Ok(entries) = std::fs::read_dir(&corpus_root) else {
        eprintln!("no local corpus under {} (nothing to replay)", corpus_root.display());
        return;
    };
    let mut targets: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    targets.sort();
    let mut failures = Vec::new();
    for target in targets.iter().filter(|t| t.is_dir()) {
        let inputs = files_under(target);
        let bytes: u64 = inputs.iter().filter_map(|p| p.metadata().ok()).map(|m| m.len()).sum();
        if inputs.len() > CORPUS_LIMIT_FILES || bytes > CORPUS_LIMIT_BYTES {
            eprintln!(
                "skipping {} ({} files, {} bytes: larger than a test run should replay)",
                target.display(),
                inputs.len(),
                bytes
            );
            continue;
        }
        failures.extend(replay(&inputs));
    }
    assert!(failures.is_empty(), "corpus inputs failed:\n  {}", failures.join("\n  "));
}
