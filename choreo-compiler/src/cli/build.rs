//! `choreoc build`: one `.co` file as a whole program, compiled with nvcc, or (`--target cpu`)
//! with the host C++ compiler and the CPU runtime.

use super::{compile_options, translate};
use crate::{Options, Status};
use choreo_compiler::compile::{CHOREO_H, OutputMode, Target};
use choreo_compiler::runtime::{CHOREO_CPU_H, CHOREO_CPU_RUNTIME_CPP};
use choreo_toolkit::{Discovery, Env, Toolkit};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Translates in standalone mode (keeping `main`), writes the `.cu` and `choreo.h` into a fresh
/// temporary directory `DIR` and runs
///
/// ```text
/// nvcc -std=c++17 -O2 -gencode arch=compute_XX,code=sm_XX -I DIR [-L<cudart dir>] \
///      -cudart static DIR/FILE.cu -o EXE [the arguments after --]
/// ```
///
/// The `-L` is given when nvcc would not find the static runtime by itself (the pip wheels keep
/// it in `lib`).
pub(crate) fn run_build(options: &Options) -> Status {
    if options.target_cpu {
        return run_build_cpu(options);
    }
    let host = choreo_toolkit::Target::host();
    let toolkit = match find_toolkit(options, &host) {
        Ok(toolkit) => toolkit,
        Err(message) => {
            eprintln!("error: {message}");
            return Status::Usage;
        }
    };
    let arch = options.arch.unwrap_or_default();
    let opts = compile_options(options, Target::Cuda(arch), OutputMode::Standalone);
    let cu = match translate(options, &opts) {
        Ok(compilation) => compilation.cu.unwrap_or_default(),
        Err(status) => return status,
    };
    let Some((dir, stem, output)) = work_dir(options) else { return Status::Usage };
    let cu_path = dir.join(format!("{stem}.cu"));
    if let Err(status) = write_sources(&dir, &[(&cu_path, &cu), (&dir.join("choreo.h"), CHOREO_H)])
    {
        return status;
    }
    let mut nvcc = Command::new(&toolkit.nvcc);
    nvcc.args(["-std=c++17", "-O2", "-gencode"]).arg(arch.gencode()).arg("-I").arg(&dir);
    if let Some(lib_dir) = toolkit.nvcc_lib_dir(&host) {
        let mut flag = OsString::from("-L");
        flag.push(lib_dir);
        nvcc.arg(flag);
    }
    nvcc.args(["-cudart", "static"]).arg(&cu_path).arg("-o").arg(output);
    nvcc.args(&options.nvcc_flags);
    run_compiler(nvcc, "nvcc", &dir)
}

/// `choreoc build --target cpu`: translates for the CPU in standalone mode, writes the `.cpp`,
/// `choreo.h`, `choreo_cpu.h` and `choreo_cpu_runtime.cpp` into a fresh temporary directory
/// `DIR` and runs
///
/// ```text
/// $CXX -std=c++17 -O2 -pthread -I DIR DIR/FILE.cpp DIR/choreo_cpu_runtime.cpp -o EXE [after --]
/// ```
///
/// (`CXX` unset: `c++`). No CUDA is needed.
fn run_build_cpu(options: &Options) -> Status {
    let opts = compile_options(options, Target::Cpu, OutputMode::Standalone);
    let cpp = match translate(options, &opts) {
        Ok(compilation) => compilation.cpp.unwrap_or_default(),
        Err(status) => return status,
    };
    let Some((dir, stem, output)) = work_dir(options) else { return Status::Usage };
    let cpp_path = dir.join(format!("{stem}.cpp"));
    let runtime = dir.join("choreo_cpu_runtime.cpp");
    let sources = [
        (&cpp_path, cpp.as_str()),
        (&dir.join("choreo.h"), CHOREO_H),
        (&dir.join("choreo_cpu.h"), CHOREO_CPU_H),
        (&runtime, CHOREO_CPU_RUNTIME_CPP),
    ];
    if let Err(status) = write_sources(&dir, &sources) {
        return status;
    }
    let cxx = std::env::var_os("CXX").filter(|c| !c.is_empty()).unwrap_or_else(|| "c++".into());
    let mut command = Command::new(&cxx);
    command.args(["-std=c++17", "-O2", "-pthread", "-I"]).arg(&dir);
    command.arg(&cpp_path).arg(&runtime).arg("-o").arg(output);
    command.args(&options.nvcc_flags);
    run_compiler(command, "the C++ compiler", &dir)
}

/// Writes the generated sources into the work folder `dir`; on failure says why, removes the
/// folder and gives the status to exit with.
fn write_sources(dir: &Path, sources: &[(&PathBuf, &str)]) -> Result<(), Status> {
    if let Err(e) = sources.iter().try_for_each(|(path, text)| std::fs::write(path, text)) {
        eprintln!("error: cannot write into '{}': {e}", dir.display());
        let _ = std::fs::remove_dir_all(dir);
        return Err(Status::Usage);
    }
    Ok(())
}

/// Runs the compiler (`what`, for messages) on the sources of `dir`: the folder is removed
/// unless the compiler failed (its sources are then kept for a look).
fn run_compiler(mut command: Command, what: &str, dir: &Path) -> Status {
    match command.status() {
        Ok(status) if status.success() => {
            let _ = std::fs::remove_dir_all(dir);
            Status::Ok
        }
        Ok(status) => {
            eprintln!(
                "error: {what} failed ({status}); the generated sources are kept in {}",
                dir.display()
            );
            Status::Errors
        }
        Err(e) => {
            eprintln!("error: cannot run '{}': {e}", Path::new(command.get_program()).display());
            let _ = std::fs::remove_dir_all(dir);
            Status::Usage
        }
    }
}

/// The toolkit, found as build scripts find it, with `--nvcc` in the place of `NVCC`.
fn find_toolkit(options: &Options, host: &choreo_toolkit::Target) -> Result<Toolkit, String> {
    let mut env = Env::process();
    if let Some(nvcc) = &options.nvcc {
        env = env.with_var("NVCC", nvcc.as_os_str());
    }
    match choreo_toolkit::find(&env, host) {
        Ok(Discovery::Found(toolkit)) => Ok(toolkit),
        Ok(Discovery::Stub(reason)) => Err(format!("nvcc (the CUDA compiler): {reason}")),
        Err(choreo_toolkit::Error::NvccNotFound { path, .. }) if options.nvcc.is_some() => {
            Err(format!("--nvcc {}: no such file", path.display()))
        }
        Err(error) => Err(error.to_string()),
    }
}

/// A fresh temporary directory for the sources, the input's stem and the output path; `None`
/// (after saying why) when there is none.
fn work_dir(options: &Options) -> Option<(PathBuf, String, &PathBuf)> {
    let (Some(input), Some(output)) = (options.files.first(), options.output.as_ref()) else {
        return None;
    };
    let dir = match make_temp_dir() {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("error: cannot create a temporary directory: {e}");
            return None;
        }
    };
    let stem = input.file_stem().map_or_else(|| "main".into(), |s| s.to_string_lossy().to_string());
    Some((dir, stem, output))
}

/// A new, empty directory under the system temporary directory.
fn make_temp_dir() -> std::io::Result<PathBuf> {
    let base = std::env::temp_dir();
    let pid = std::process::id();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for attempt in 0..100u32 {
        let dir = base.join(format!("choreoc-build-{pid}-{nanos:09}-{attempt}"));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free temporary directory name"))
}
