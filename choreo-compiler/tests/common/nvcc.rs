//! Compiling generated `.cu` files with nvcc from the tests (`codegen.rs`, `book_examples.rs`):
//! two at a time, each file's time and failure reported, the sources kept only on failure.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One nvcc run: the file's name, how long nvcc took, and its output when it failed.
pub type NvccResult = (String, Duration, Result<(), String>);

/// Compiles every `(name, .cu path)` of `jobs` with `nvcc args… -c file -o file.o` on two
/// threads; results sorted by name. Prints each file's time and the total.
pub fn compile_all(
    nvcc: &Path,
    args: &[OsString],
    jobs: Vec<(String, PathBuf)>,
) -> Vec<NvccResult> {
    let queue = Mutex::new(jobs.into_iter());
    let results: Mutex<Vec<NvccResult>> = Mutex::new(Vec::new());
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let Some((name, cu_path)) = queue.lock().expect("queue").next() else {
                        break;
                    };
                    let t = Instant::now();
                    let output = Command::new(nvcc)
                        .args(args)
                        .arg("-c")
                        .arg(&cu_path)
                        .arg("-o")
                        .arg(cu_path.with_extension("o"))
                        .output();
                    let result = match output {
                        Ok(o) if o.status.success() => Ok(()),
                        Ok(o) => Err(format!(
                            "{}{}",
                            String::from_utf8_lossy(&o.stdout),
                            String::from_utf8_lossy(&o.stderr)
                        )),
                        Err(e) => Err(format!("cannot run {}: {e}", nvcc.display())),
                    };
                    results.lock().expect("results").push((name, t.elapsed(), result));
                }
            });
        }
    });
    let mut results = results.into_inner().expect("results");
    results.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, time, _) in &results {
        eprintln!("nvcc {name}.cu: {:.2} s", time.as_secs_f64());
    }
    eprintln!(
        "nvcc: {} files in {:.1} s (2 threads)",
        results.len(),
        started.elapsed().as_secs_f64()
    );
    results
}

/// Fails with every failure's nvcc output (`what` says what was compiled); removes `out_dir`
/// when all compiled, keeps it for a look otherwise.
pub fn assert_all_compiled(results: &[NvccResult], out_dir: &Path, what: &str) {
    let failures: Vec<String> = results
        .iter()
        .filter_map(|(name, _, result)| {
            result.as_ref().err().map(|e| format!("--- {name}.cu ---\n{e}"))
        })
        .collect();
    if failures.is_empty() {
        let _ = std::fs::remove_dir_all(out_dir);
    }
    assert!(
        failures.is_empty(),
        "nvcc rejected {what} (sources kept in {}):\n{}",
        out_dir.display(),
        failures.join("\n")
    );
}
