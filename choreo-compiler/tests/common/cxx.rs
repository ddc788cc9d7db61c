//! The host C++ compiler and programs run under a watchdog: what the CPU suites share
//! (`cpu_runtime.rs`, the runtime's own C++ tests, and `e2e_cpu.rs`, the end-to-end programs
//! on the CPU backend).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The system C++ compiler: `CXX`, else `c++`.
pub fn cxx() -> String {
    std::env::var("CXX").ok().filter(|c| !c.is_empty()).unwrap_or_else(|| "c++".to_string())
}

/// The folder of the runtime's sources (`choreo.h`, `choreo_cpu.h`, `choreo_cpu_runtime.cpp`).
pub fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// A program's status and output, for failure messages.
pub fn describe(output: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Compiles `choreo_cpu_runtime.cpp` into `object` with `flags` (besides `-c`, `-I` the
/// include folder); the error is the compiler's output.
pub fn compile_runtime(object: &Path, flags: &[&str]) -> Result<PathBuf, String> {
    let mut command = Command::new(cxx());
    command.args(flags).arg("-I").arg(include_dir());
    command.arg("-c").arg(include_dir().join("choreo_cpu_runtime.cpp")).arg("-o").arg(object);
    let output = command.output().map_err(|err| format!("cannot run {}: {err}", cxx()))?;
    if !output.status.success() {
        return Err(format!("the runtime does not compile:\n{}", describe(&output)));
    }
    Ok(object.to_path_buf())
}

/// Runs `command` with its output captured, killing it after `limit`.
pub fn run_with_timeout(mut command: Command, limit: Duration) -> Result<Output, String> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| format!("cannot start the program: {err}"))?;
    // The pipes are drained by threads so a chatty program cannot block on a full pipe.
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out = thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut buf).ok();
        buf
    });
    let err = thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut buf).ok();
        buf
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if start.elapsed() > limit {
            child.kill().ok();
            child.wait().ok();
            return Err(format!("the program ran longer than {limit:?} (hung?); killed"));
        }
        thread::sleep(Duration::from_millis(10));
    };
    Ok(Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

/// Precompiles `choreo.h` for CPU code compiled with `flags` into `dir` (`choreo.h.gch` next to
/// a copy of `choreo.h`) and returns `dir`, to be searched before [`include_dir`]: every
/// generated `.cpp` starts `#define __CHOREO_CPU__ 1` / `#include "choreo.h"`, and with GCC
/// that include then loads the precompiled header, which cuts each compile by more than half.
/// A compiler that cannot make or use one (clang looks for no `.gch`) reads the copy instead;
/// `None` when even that cannot be set up. A speed aid only: results do not depend on it.
pub fn precompiled_choreo_h(dir: &Path, flags: &[&str]) -> Option<PathBuf> {
    std::fs::create_dir_all(dir).ok()?;
    std::fs::copy(include_dir().join("choreo.h"), dir.join("choreo.h")).ok()?;
    let gch = dir.join("choreo.h.gch");
    let made = Command::new(cxx())
        .args(flags)
        .arg("-D__CHOREO_CPU__=1")
        .arg("-I")
        .arg(include_dir())
        .args(["-x", "c++-header"])
        .arg(include_dir().join("choreo.h"))
        .arg("-o")
        .arg(&gch)
        .output()
        .is_ok_and(|output| output.status.success());
    if !made {
        std::fs::remove_file(&gch).ok();
    }
    Some(dir.to_path_buf())
}
