//! The CPU version of the kernels: each `.co` file's `.cpp` (the CUDA emitter's text in its
//! CPU dialect, see `choreo_compiler::emit::cpu`), compiled by the host C++ compiler that `cc`
//! finds for the target, with `choreo.h` and `choreo_cpu.h` from the generated folder. The CPU
//! runtime those objects call (`choreo_cpu_runtime.cpp`) is compiled once, by the `choreo`
//! crate's build script, so every library of a program shares one.
//!
//! The command comes from `cc::Build::try_get_compiler` (the target's compiler, `CXX`/
//! `CXXFLAGS`, cross prefixes, `-fPIC`, the optimisation level of the profile) and is run
//! here, one process per stale file, in parallel (`nvcc::parallel_map`): like the nvcc path, so that a file whose
//! inputs did not change is not recompiled. Its object `obj/cpu/<module>.o` is kept with a
//! `.key` file holding the hash of the `.cpp`, both headers and the full command line.

use crate::error::{Error, NvccFailure};
use crate::hash::{Digest, Hasher};
use crate::nvcc::{JobError, parallel_map};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One `.cpp` to bring up to date.
pub(crate) struct CpuJob {
    /// The `.co` file it was generated from (for messages).
    pub(crate) source: PathBuf,
    /// The `.co` file's folder (`-I`, for its local includes).
    pub(crate) source_dir: PathBuf,
    /// The generated `.cpp`.
    pub(crate) cpp: PathBuf,
    /// The hash of its text.
    pub(crate) digest: Digest,
    /// The object to write.
    pub(crate) object: PathBuf,
}

/// What every CPU compile of a build shares.
pub(crate) struct CpuConfig {
    /// The compiler and its flags, as `cc` chose them for the target.
    pub(crate) compiler: PathBuf,
    pub(crate) flags: Vec<String>,
    /// The environment `cc` wants the compiler run with.
    pub(crate) env: Vec<(String, String)>,
    /// `-D` definitions (also given to the Choreo preprocessor).
    pub(crate) defines: Vec<(String, Option<String>)>,
    /// The generated folder (`choreo.h`, `choreo_cpu.h`) and the user's include folders.
    pub(crate) include_dirs: Vec<PathBuf>,
    /// The hash of the two runtime headers.
    pub(crate) headers: Digest,
}

impl CpuConfig {
    /// The configuration `cc` gives for `target` (its triple) on `host`, at `opt_level`.
    pub(crate) fn from_cc(
        target: &str,
        host: &str,
        opt_level: &str,
        defines: Vec<(String, Option<String>)>,
        include_dirs: Vec<PathBuf>,
    ) -> Result<CpuConfig, Error> {
        let mut build = cc::Build::new();
        build
            .cpp(true)
            .target(target)
            .host(host)
            .opt_level_str(opt_level)
            .cargo_metadata(false)
            .cargo_warnings(false)
            .warnings(false)
            .std("c++17");
        let tool =
            build.try_get_compiler().map_err(|e| Error::CxxNotFound { message: e.to_string() })?;
        let mut flags: Vec<String> =
            tool.args().iter().map(|a| a.to_string_lossy().into_owned()).collect();
        flags.push("-pthread".to_string());
        let env = tool
            .get_envs()
            .map(|(k, v)| (k.to_string_lossy().into_owned(), v.to_string_lossy().into_owned()))
            .collect();
        let headers = Digest::of(format!(
            "{}\0{}",
            choreo_compiler::runtime::CHOREO_H,
            choreo_compiler::runtime::CHOREO_CPU_H
        ));
        Ok(CpuConfig {
            compiler: tool.path().to_path_buf(),
            flags,
            env,
            defines,
            include_dirs,
            headers,
        })
    }

    fn args(&self, job: &CpuJob) -> Vec<String> {
        let mut args = self.flags.clone();
        // Errors in the generated code carry `#line` directives naming the `.co` file.
        args.push("-D__CHOREO_CPU__=1".to_string());
        for (name, value) in &self.defines {
            args.push(match value {
                Some(value) => format!("-D{name}={value}"),
                None => format!("-D{name}"),
            });
        }
        for dir in self.include_dirs.iter().chain([&job.source_dir]) {
            args.push(format!("-I{}", dir.display()));
        }
        args.push("-c".to_string());
        args.push(job.cpp.display().to_string());
        args.push("-o".to_string());
        args.push(job.object.display().to_string());
        args
    }

    fn key(&self, job: &CpuJob) -> String {
        let mut hasher = Hasher::new();
        hasher
            .field("choreo-build cpu object v1")
            .field(self.compiler.as_os_str().as_encoded_bytes())
            .field(job.digest.to_string())
            .field(self.headers.to_string());
        for arg in self.args(job) {
            hasher.field(arg);
        }
        hasher.finish().to_string()
    }
}

/// The objects of a build's CPU versions, in the order of its jobs.
pub(crate) struct Objects {
    /// Each object with the hash of its content.
    pub(crate) objects: Vec<(PathBuf, Digest)>,
    /// Whether each was compiled (its cache entry was stale).
    pub(crate) compiled: Vec<bool>,
}

/// Compiles the stale objects of `jobs` (`threads` at a time).
pub(crate) fn compile_all(
    config: &CpuConfig,
    jobs: &[CpuJob],
    threads: usize,
) -> Result<Objects, Error> {
    let stale: Vec<bool> = jobs
        .iter()
        .map(|job| {
            !job.object.is_file()
                || fs::read_to_string(key_file(&job.object))
                    .map_or(true, |key| key.trim() != config.key(job))
        })
        .collect();
    let to_compile: Vec<&CpuJob> =
        jobs.iter().zip(&stale).filter(|(_, stale)| **stale).map(|(job, _)| job).collect();
    let results = parallel_map(&to_compile, threads, |job| compile_one(config, job));
    let mut compile_failures = Vec::new();
    for (result, job) in results.into_iter().zip(&to_compile) {
        match result {
            Some(Ok(())) => {}
            Some(Err(JobError::Failed(failure))) => compile_failures.push(*failure),
            Some(Err(JobError::Fatal(error))) => return Err(error),
            None => {
                let stopped = std::io::Error::other("the compile thread stopped");
                return Err(Error::io("compile", &job.cpp, stopped));
            }
        }
    }
    if !compile_failures.is_empty() {
        return Err(Error::CxxCompile(compile_failures));
    }
    let objects = jobs
        .iter()
        .map(|job| {
            let bytes = fs::read(&job.object).map_err(|e| Error::io("read", &job.object, e))?;
            Ok((job.object.clone(), Digest::of(bytes)))
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok(Objects { objects, compiled: stale })
}

fn key_file(object: &Path) -> PathBuf {
    object.with_extension("key")
}

/// Runs the compiler on one job: `JobError::Failed` is a compile error of the file (reported
/// with the others), `JobError::Fatal` a failure to run at all.
fn compile_one(config: &CpuConfig, job: &CpuJob) -> Result<(), JobError> {
    let key_path = key_file(&job.object);
    // A failed or interrupted run must not leave an entry that looks valid.
    let _ = fs::remove_file(&key_path);
    if let Some(dir) = job.object.parent() {
        fs::create_dir_all(dir)
            .map_err(|e| JobError::Fatal(Error::io("create directory", dir, e)))?;
    }
    let args = config.args(job);
    let mut command = Command::new(&config.compiler);
    command.args(&args);
    for (name, value) in &config.env {
        command.env(name, value);
    }
    let output = command.output().map_err(|source| {
        JobError::Fatal(Error::Spawn { program: config.compiler.clone(), source })
    })?;
    if !output.status.success() {
        let mut text = String::from_utf8_lossy(&output.stderr).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stdout));
        return Err(JobError::Failed(Box::new(NvccFailure {
            source_file: job.source.clone(),
            cu_file: job.cpp.clone(),
            hand_written: false,
            command: std::iter::once(config.compiler.display().to_string())
                .chain(args)
                .collect::<Vec<_>>()
                .join(" "),
            status: output.status.to_string(),
            output: text,
        })));
    }
    fs::write(&key_path, config.key(job))
        .map_err(|e| JobError::Fatal(Error::io("write", &key_path, e)))?;
    Ok(())
}
