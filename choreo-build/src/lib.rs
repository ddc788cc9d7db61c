//! The `build.rs` API of choreo: turn `.co` files (and hand-written `.cu` files) into a static
//! library and safe Rust wrappers.
//!
//! ```no_run
//! // build.rs, in `fn main`:
//! choreo_build::compile("src/kernels/*.co"); // defaults; reports and exits on error
//! ```
//!
//! or, with options:
//!
//! ```no_run
//! use choreo_build::UnwrapOrExit as _;
//!
//! choreo_build::Builder::new()
//!     .files("src/kernels/**/*.co")
//!     .arch("sm_90a")
//!     .define("TILE", "64")
//!     .nvcc_flag("-lineinfo")
//!     .build("kernels")
//!     .unwrap_or_exit();
//! ```
//!
//! and in the crate: `choreo::include_kernels!("kernels");` (or `include_kernels!()` for the
//! default name `kernels`).
//!
//! # Hand-written CUDA files
//!
//! [`Builder::cuda_file`] and [`Builder::cuda_files`] add CUDA C++ sources written by hand.
//! They are compiled by the same nvcc with the same command line as the generated files (the
//! same architecture and `-gencode`, defines, include folders, `-ccbin`, [`Builder::nvcc_flag`]s,
//! `NUM_JOBS` parallelism, object cache) into the **same** static library, with `-I` their own
//! folder and `-I` the folder of the generated files, so `#include "choreo.h"` works in them.
//! Rust calls them through `extern "C"` functions declared by the user (no wrappers are
//! generated); the library is linked by the same `rustc-link-lib` line. A builder may have only
//! `.cu` files: the index is then empty and `include_kernels!` still works. Their objects are
//! `obj/cuda/<stem>-<hash of the path>.<architectures>.o`, so they never collide with generated objects or
//! with each other. In stub mode they are not compiled either. The [`Report`] lists them in
//! [`Report::cuda_files`].
//!
//! ```no_run
//! use choreo_build::UnwrapOrExit as _;
//!
//! choreo_build::Builder::new()
//!     .files("src/kernels/*.co")
//!     .cuda_file("src/cuda/reduce.cu")
//!     .build("kernels")
//!     .unwrap_or_exit();
//! ```
//!
//! # What a build does
//!
//! 1. Expands the patterns (sorted, de-duplicated; a pattern matching nothing is an error, and
//!    so is a builder without any `.co` or `.cu` file) and translates every `.co` file with
//!    `choreo-compiler` in library mode. All diagnostics of all files are collected; any error
//!    stops the build before nvcc runs.
//! 2. Writes, under `<OUT_DIR>/choreo/<name>/`, `choreo.h` and per file `<module>.cu` and
//!    `<module>.rs` (the module is the file stem with `-`/`.` turned into `_`), and the index
//!    `<OUT_DIR>/choreo/<name>.rs` with one `pub mod <module>` per file. Every file is written
//!    only when its content changes.
//! 3. Compiles each `.cu` — generated or hand-written — with nvcc into its own object, in
//!    parallel (at most `NUM_JOBS` at once, sharing cargo's jobserver: `-j` limits them
//!    together with everything else cargo runs), unless the object cache says it is up to date (see
//!    below), then archives the objects into `lib<link name>.a`, where the link name is
//!    `choreo_<package>_<name>` (unique, so two crates that both use the default name cannot
//!    pick up each other's library). The archive is remade when an object's content changed.
//! 4. Prints the cargo directives: link the library and `stdc++` (the CUDA runtime that the
//!    kernels call is linked by `choreo-sys`, which every crate using the wrappers depends on
//!    through `choreo`); `rerun-if-changed` for every `.co` and `.cu`
//!    input, every local header they include (found by scanning `#include "…"`, and as nvcc
//!    reported them), every glob's base directory; `rerun-if-env-changed` for every
//!    environment variable read.
//! 5. Writes a [`Report`] to `<OUT_DIR>/choreo/<name>.report` and returns it.
//!
//! nvcc flags: `-c -std=c++17 -O3 -gencode=arch=compute_XX,code=sm_XX` for each architecture
//! (plus `code=compute_XX` PTX of the newest one without the `a` suffix), `-Xcompiler -fPIC`,
//! `-DCHOREO_LEAN_PRELUDE` (unless [`Builder::lean_prelude`]`(false)`), the defines, `-I` the
//! `.co` file's folder (for a hand-written `.cu`: its folder, then the generated folder) and
//! [`Builder::include`] folders, `-ccbin` (see below), then the
//! [`Builder::nvcc_flag`]s. Never `-rdc`, never `-G` (add it with `nvcc_flag` to debug device
//! code), never `-arch=native`; nothing at build time needs a GPU (a visible one chooses the
//! default architecture).
//!
//! # The architectures
//!
//! A list, the first of: [`Builder::arch`], the `CHOREO_CUDA_ARCH` environment variable,
//! `CUDA_COMPUTE_CAP` (each one architecture or a comma-separated list: `sm_80,sm_90`, `80`,
//! `8.6`), the GPUs `nvidia-smi` lists at build time (native builds that compile CUDA; `sm_90a`
//! for Hopper), else [`DEFAULT_ARCHS`] (`sm_80,sm_90`, with `compute_90` PTX that newer GPUs
//! JIT-compile). An architecture the toolkit cannot compile is an error (`sm_100`/`sm_120`
//! need CUDA 12.8, CUDA 13 dropped `sm_70`); a detected GPU it cannot compile for falls back to
//! the defaults with a warning.
//!
//! Each `.co` file is translated once, for the oldest architecture it is built for, and that
//! `.cu` is compiled for all of them (the translator's choices are capabilities and limits, so
//! code for an older architecture runs on newer ones). It is also translated for the list's
//! other architectures: one that some of them reject (TMA, clusters: sm_90+) is built for the
//! newer part of the list that accepts it, one that only `sm_90a` accepts (`setmaxnreg`,
//! the `group-4` level) for `sm_90a` alone when the list was automatic — a cargo warning says
//! so each time; with a list you set, that is the file's `E0805` error.
//! [`Report::arch`] and [`FileReport::archs`] say what was built.
//!
//! # Finding the CUDA toolkit
//!
//! With `choreo-toolkit`, the discovery that `choreo-sys` uses too: `NVCC` → `CUDA_HOME`/
//! `CUDA_PATH` → `nvcc` on `PATH` → the pip toolkit of `python3` (`<site-packages>/nvidia/cu13`)
//! → the folder of `ci/install-cuda` (`$CHOREO_CUDA_CACHE`, else `~/.cache/choreo/cuda-13.0`,
//! then `nvidia/cu13`) → stub mode. `NVCC` only names the compiler to run (it may be an
//! sccache/ccache wrapper outside the toolkit). The toolkit root (headers, the runtime that
//! `choreo-sys` links) is `CUDA_HOME`/`CUDA_PATH` when set, else the folder above the `bin` of
//! nvcc's real location, else — `NVCC` names a wrapper outside any toolkit — the root of the
//! next toolkit found on `PATH`, in the pip wheels or the `ci/install-cuda` cache (with a
//! warning naming it; set `CUDA_HOME` to choose). `choreo-sys` resolves the same root in the
//! same environment, so the kernels are compiled against the runtime that is linked. The CUDA
//! version comes from `cuda_runtime_api.h`. The host compiler: `NVCC_CCBIN`, else `CUDAHOSTCXX`, else — for
//! cross builds (`TARGET` ≠ `HOST`) — the target C++ compiler cc would use (`CXX_<target>`,
//! …), else nvcc's default. Cross builds link `targets/<arch>-linux/lib` (`sbsa-linux` for
//! aarch64) and pass `--target-directory`; a toolkit without the target's runtime is an error
//! that says what to install.
//!
//! # Stub mode
//!
//! Without nvcc, with `CHOREO_NVCC=skip`, on docs.rs (`DOCS_RS`), and whenever `choreo-sys`
//! links no CUDA runtime (`CHOREO_SYS_NO_CUDART` is set, or the toolkit found is not CUDA 13.x,
//! the version choreo-sys binds: a CUDA 12 toolkit gives a warning naming its version), the
//! `.co` files are still translated (their errors still fail
//! the build) and the wrappers are still generated — in a form whose functions return
//! `Err(choreo::Error::NotBuilt)` — but nothing is compiled or linked, and one `cargo::warning`
//! says so, why, and how to install nvcc. `cargo check`, clippy and rustdoc work without CUDA.
//!
//! # The object cache
//!
//! A no-op build runs nvcc zero times; changing one `.co` file recompiles only its `.cu`, and
//! changing a hand-written `.cu` recompiles only it. Objects are kept per architecture list
//! (`obj/<module>.<architectures>.o`, e.g. `obj/scale.sm_80-sm_90.o`), so building for other
//! architectures and back compiles nothing. Comment-only edits of a `.co` file compile nothing
//! either: host comments reach the generated `.cu`/`.cpp`, but their cache digest replaces
//! every comment by a space (an edit that adds or removes lines moves the `#line` directives
//! after it and recompiles that file). Each object is stored with a key: the
//! hash of the `.cu` text (generated, without comments, or the hand-written file's bytes), `choreo.h`, the nvcc
//! path, size and modification time, the toolkit root and CUDA version, the whole nvcc command
//! line and `NVCC_PREPEND_FLAGS`/`NVCC_APPEND_FLAGS`, plus the content hashes of the non-system headers
//! nvcc reported reading (`-MD`). Changes to system headers under `/usr/` or to the host
//! compiler itself are not detected (as in ccache's default mode): `cargo clean` after
//! upgrading them.
//!
//! # Errors
//!
//! [`Builder::build`] returns an [`Error`] and never panics. [`UnwrapOrExit::unwrap_or_exit`]
//! (and [`compile`]) print it — every diagnostic rendered like rustc, nvcc's output — to
//! stderr, which cargo shows for a failing build script, print one `cargo::error=` summary line
//! per failing file and exit with status 1. Warnings of the translator are passed on as
//! `cargo::warning=` lines (and rendered on stderr, visible with `cargo build -vv`).
//!
//! # Inspecting the generated sources
//!
//! [`Builder::emit_sources_to`] or the `CHOREO_DUMP_DIR` environment variable copy the
//! generated files to a folder of your choice: `<dir>/<name>/<module>.cu`, `.rs`, `choreo.h`
//! and `<dir>/<name>.rs`.

mod arch;
mod comments;
mod cpu;
mod elf;
mod error;
mod hash;
mod inputs;
mod nvcc;
mod output;
mod shared_cache;

pub use arch::{ArchOrigin, DEFAULT_ARCHS};
pub use choreo_toolkit::{FoundBy, RootFrom, StubReason, Toolkit};
pub use error::{DuplicateSymbol, Error, FileDiagnostics, NvccFailure};

use choreo_compiler::compile::{
    Arch, CompileOptions, OutputMode, SymbolScope, Target as CompileTarget,
};
use choreo_compiler::diagnostics::{Diagnostic, Severity, render_human};
use choreo_compiler::source::SourceDb;
use choreo_toolkit::{Discovery, Env, Target};
use error::{one_line, plural};
use hash::Digest;
use inputs::{CudaInput, Input};
use nvcc::{CacheState, Job, JobError, NvccConfig};
use shared_cache::SharedCache;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The output name used by [`compile`] and expected by `choreo::include_kernels!()`.
pub const DEFAULT_NAME: &str = "kernels";

/// Most local headers followed through `#include "…"` per `.co` file for `rerun-if-changed`.
const MAX_LOCAL_INCLUDES: usize = 256;

/// Compiles the `.co` files matching `pattern` with the defaults, under the name
/// [`DEFAULT_NAME`]; on failure prints the error for cargo and exits with status 1.
///
/// ```no_run
/// // build.rs, in `fn main`:
/// choreo_build::compile("src/kernels/*.co");
/// ```
pub fn compile(pattern: &str) -> Report {
    Builder::new().files(pattern).build(DEFAULT_NAME).unwrap_or_exit()
}

/// Configures and runs a build of `.co` files and hand-written `.cu` files (see the crate docs).
#[derive(Debug, Clone)]
pub struct Builder {
    files: Vec<PathBuf>,
    patterns: Vec<String>,
    cuda_files: Vec<PathBuf>,
    cuda_patterns: Vec<String>,
    arch: Option<String>,
    defines: Vec<(String, Option<String>)>,
    nvcc_flags: Vec<String>,
    include_dirs: Vec<PathBuf>,
    runtime_checks: bool,
    bounds_checks: bool,
    out_dir: Option<PathBuf>,
    dump_dir: Option<PathBuf>,
    lean_prelude: bool,
    cargo_metadata: bool,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder::new()
    }
}

impl Builder {
    /// A builder with no inputs and the defaults: architectures from `CHOREO_CUDA_ARCH`,
    /// `CUDA_COMPUTE_CAP`, the GPU visible at build time or [`DEFAULT_ARCHS`] (see the crate
    /// docs), runtime checks on, lean prelude on, cargo directives printed.
    pub fn new() -> Builder {
        Builder {
            files: Vec::new(),
            patterns: Vec::new(),
            cuda_files: Vec::new(),
            cuda_patterns: Vec::new(),
            arch: None,
            defines: Vec::new(),
            nvcc_flags: Vec::new(),
            include_dirs: Vec::new(),
            runtime_checks: true,
            bounds_checks: true,
            out_dir: None,
            dump_dir: None,
            lean_prelude: true,
            cargo_metadata: true,
        }
    }

    /// Adds one `.co` file (relative paths are relative to the package directory, where cargo
    /// runs build scripts).
    pub fn file(&mut self, path: impl AsRef<Path>) -> &mut Builder {
        self.files.push(path.as_ref().to_path_buf());
        self
    }

    /// Adds the `.co` files matching a glob pattern (`src/kernels/**/*.co`). May be called more
    /// than once; a pattern matching no file is an error of [`Builder::build`].
    pub fn files(&mut self, pattern: impl Into<String>) -> &mut Builder {
        self.patterns.push(pattern.into());
        self
    }

    /// Adds one hand-written CUDA C++ file (`.cu`), compiled as it is into the same static
    /// library as the `.co` kernels, with the same nvcc command line plus `-I` the folder of
    /// the generated files (so it can `#include "choreo.h"`). Its `extern "C"` functions are
    /// what Rust calls (declare them in an `unsafe extern "C"` block); no wrappers are
    /// generated for it. Relative paths are relative to the package directory.
    ///
    /// A builder with `.cu` files and no `.co` files is fine. Editing the file, or a local
    /// header it includes, recompiles it (and only it).
    pub fn cuda_file(&mut self, path: impl AsRef<Path>) -> &mut Builder {
        self.cuda_files.push(path.as_ref().to_path_buf());
        self
    }

    /// Adds the hand-written `.cu` files matching a glob pattern (`src/cuda/**/*.cu`), like
    /// [`Builder::cuda_file`] for each. May be called more than once; a pattern matching no file
    /// is an error of [`Builder::build`].
    pub fn cuda_files(&mut self, pattern: impl Into<String>) -> &mut Builder {
        self.cuda_patterns.push(pattern.into());
        self
    }

    /// Sets the CUDA architectures: one (`sm_70` … `sm_120`, `sm_90a`) or a comma-separated
    /// list (`sm_80,sm_90`; also `80`, `8.0`, `compute_80`); overrides `CHOREO_CUDA_ARCH`,
    /// `CUDA_COMPUTE_CAP` and the detection of the GPU (see "The architectures" in the crate
    /// docs).
    pub fn arch(&mut self, arch: impl Into<String>) -> &mut Builder {
        self.arch = Some(arch.into());
        self
    }

    /// Defines a macro with a value, like `-DNAME=VALUE`, for the Choreo preprocessor and nvcc.
    pub fn define(&mut self, name: impl Into<String>, value: impl Into<String>) -> &mut Builder {
        self.defines.push((name.into(), Some(value.into())));
        self
    }

    /// Defines a macro without a value (it expands to `1`), like `-DNAME`.
    pub fn define_flag(&mut self, name: impl Into<String>) -> &mut Builder {
        self.defines.push((name.into(), None));
        self
    }

    /// Adds a flag to every nvcc command line (after the ones choreo-build sets).
    pub fn nvcc_flag(&mut self, flag: impl Into<String>) -> &mut Builder {
        self.nvcc_flags.push(flag.into());
        self
    }

    /// Adds an include directory for the host and device code (`-I`). The folder of each
    /// `.co` (or hand-written `.cu`) file is always searched.
    pub fn include(&mut self, dir: impl AsRef<Path>) -> &mut Builder {
        self.include_dirs.push(dir.as_ref().to_path_buf());
        self
    }

    /// Whether the generated code checks shapes and launch bounds at run time (default true).
    pub fn runtime_checks(&mut self, enabled: bool) -> &mut Builder {
        self.runtime_checks = enabled;
        self
    }

    /// Whether element accesses that the compiler cannot prove in bounds are checked at run
    /// time (default true): a failing access is skipped and the call returns
    /// `choreo::Error::OutOfBounds`. Turned off, the kernels skip the checks and the wrapper of
    /// every function with such an access is an `unsafe fn` (the caller vouches for the
    /// indices); proven accesses cost nothing either way.
    pub fn bounds_checks(&mut self, enabled: bool) -> &mut Builder {
        self.bounds_checks = enabled;
        self
    }

    /// Where to write outputs, instead of cargo's `OUT_DIR`. `choreo::include_kernels!` reads
    /// from `OUT_DIR`, so this is for use outside build scripts.
    pub fn out_dir(&mut self, dir: impl AsRef<Path>) -> &mut Builder {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Also copies the generated `.cu`, `.rs` and `choreo.h` to `dir` (for inspection); the
    /// `CHOREO_DUMP_DIR` environment variable does the same when this is not called.
    pub fn emit_sources_to(&mut self, dir: impl AsRef<Path>) -> &mut Builder {
        self.dump_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Whether to compile with `-DCHOREO_LEAN_PRELUDE` (default true): `choreo.h` then leaves
    /// out the standard headers that upstream's header adds for host code besides the ones it
    /// needs (`<future>`, `<thread>`, `<chrono>`, …), which saves seconds of nvcc time per file.
    /// Turn it off for host code that uses those without including them.
    pub fn lean_prelude(&mut self, enabled: bool) -> &mut Builder {
        self.lean_prelude = enabled;
        self
    }

    /// Whether to print `cargo::` directives (default true). Without them nothing is linked:
    /// for use outside build scripts.
    pub fn cargo_metadata(&mut self, enabled: bool) -> &mut Builder {
        self.cargo_metadata = enabled;
        self
    }

    /// Runs the build. `name` names the output: `choreo::include_kernels!("<name>")` includes
    /// its Rust modules. It must be letters, digits, `_` and `-`, not starting with a digit.
    pub fn build(&self, name: &str) -> Result<Report, Error> {
        let env = Env::process();
        let mut cargo = Cargo::new(self.cargo_metadata);
        let result = self.build_in(&env, &mut cargo, name);
        // Also on failure: cargo must rerun when any of these change.
        for var in env.read_vars() {
            cargo.line(&format!("rerun-if-env-changed={var}"));
        }
        result
    }

    fn build_in(&self, env: &Env, cargo: &mut Cargo, name: &str) -> Result<Report, Error> {
        let valid_name = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            return Err(Error::InvalidName { name: name.to_owned() });
        }
        let out_dir = match &self.out_dir {
            Some(dir) => dir.clone(),
            None => env
                .non_empty("OUT_DIR")
                .map(PathBuf::from)
                .ok_or(Error::MissingEnv { var: "OUT_DIR" })?,
        };
        let layout = Layout { choreo_dir: out_dir.join("choreo"), name: name.to_owned() };
        let target = Target::from_env(env);
        // The object cache shared with other builds, located once for both compilers.
        let shared = shared_cache(env, &out_dir)?;

        let (inputs, cuda_inputs) = self.inputs(cargo)?;
        let discovery = choreo_toolkit::discover(env, &target)?;
        let cuda = !matches!(discovery, Discovery::Stub(_));
        if let (Discovery::Stub(reason), Some(policy)) = (&discovery, env.text("CHOREO_NVCC")) {
            if policy == "require" {
                return Err(Error::NvccRequired { reason: one_line(&reason.to_string()) });
            }
        }
        let cuda_version = match &discovery {
            Discovery::Found(toolkit) => Some(toolkit.version),
            Discovery::Stub(_) => None,
        };
        // The GPU of the build machine matters only for a native build that compiles CUDA.
        let detect = cuda && !target.cross && env.is_process();
        let archs = self.resolve_archs(env, cuda_version, detect)?;
        for note in &archs.notes {
            cargo.line(&format!("warning=choreo-build: {note}"));
        }
        // docs.rs builds documentation only: nothing is compiled there.
        let cpu = env.non_empty("DOCS_RS").is_none();
        // The external symbols of each file live in (package, version, library, module): two
        // files, libraries or crates (two versions of one included) never define one twice.
        let scope = [
            env.text("CARGO_PKG_NAME").unwrap_or_default(),
            env.text("CARGO_PKG_VERSION").unwrap_or_default(),
            name.to_owned(),
        ];
        let translated = self.translate(&inputs, &archs, cuda, cpu, &scope, cargo)?;
        let mut hand_written = read_hand_written(cuda_inputs, cargo)?;
        let mut generated = write_sources(&layout, &translated)?;
        let dump_dir =
            self.dump_dir.clone().or_else(|| env.non_empty("CHOREO_DUMP_DIR").map(PathBuf::from));
        if let Some(dir) = &dump_dir {
            dump(dir, &layout, generated.iter().map(|file| &file.report))?;
        }
        let mut report = Report {
            name: name.to_owned(),
            arch: archs.joined(),
            arch_origin: archs.origin.clone(),
            files: Vec::new(),
            cuda_files: Vec::new(),
            index_rs: layout.index_rs(),
            library: None,
            toolkit: None,
            stub: None,
            nvcc_runs: 0,
            cache_hits: 0,
            cpu_runs: 0,
            warnings: translated.iter().map(|file| file.warnings).sum(),
            dump_dir,
        };

        // The CPU version of every file that has one (always, unless on docs.rs).
        let mut objects = Vec::new();
        // Whether the CPU objects were post-processed by an objcopy (see `cpu`).
        let mut objcopy = None;
        if generated.iter().any(|file| file.cpp_digest.is_some()) {
            let cpu = self.compile_cpu(
                env,
                &target,
                &layout,
                &scope,
                cuda,
                shared.clone(),
                &mut generated,
            )?;
            objects.extend(cpu.objects);
            report.cpu_runs = cpu.runs;
            objcopy = cpu.objcopy;
        }

        let toolkit = match discovery {
            Discovery::Stub(reason) => {
                let built_on_cpu = !objects.is_empty();
                let (what, consequence) = match (generated.is_empty(), hand_written.is_empty()) {
                    (false, true) if built_on_cpu => (
                        "the .co kernels",
                        "they are built for the CPU only, and their Rust wrappers run them there",
                    ),
                    (false, true) => (
                        "the .co kernels",
                        "their Rust wrappers return Err(choreo::Error::NotBuilt)",
                    ),
                    (false, false) if built_on_cpu => (
                        "the .co kernels and the hand-written .cu files",
                        "the .co kernels are built for the CPU only, and the hand-written \
                         .cu files are not linked",
                    ),
                    (false, false) => (
                        "the .co kernels and the hand-written .cu files",
                        "the Rust wrappers of the .co kernels return \
                         Err(choreo::Error::NotBuilt), and nothing is linked",
                    ),
                    (true, _) => ("the hand-written .cu files", "nothing is linked"),
                };
                cargo.line(&format!(
                    "warning=choreo-build: {what} of `{name}` are not compiled for CUDA ({}); \
                     {consequence}",
                    one_line(&reason.to_string())
                ));
                report.stub = Some(reason);
                if built_on_cpu {
                    report.library =
                        Some(self.link(env, &layout, &out_dir, &target, name, &objects, cargo)?);
                }
                report.files = generated.into_iter().map(|file| file.report).collect();
                report.cuda_files = hand_written.into_iter().map(|file| file.report).collect();
                write_report(&layout, &report)?;
                return Ok(report);
            }
            Discovery::Found(toolkit) => toolkit,
        };
        if let RootFrom::Search(by) = &toolkit.root_from {
            // The wrapper's nvcc and this toolkit may differ: say which one is used.
            cargo.line(&format!(
                "warning=choreo-build: NVCC names {}, which is outside any CUDA toolkit, and \
                 CUDA_HOME/CUDA_PATH are unset: the headers and the CUDA runtime (linked by \
                 choreo-sys) are taken from the CUDA {} toolkit at {} ({by}); set CUDA_HOME to \
                 the root of the toolkit that NVCC runs",
                toolkit.nvcc.display(),
                toolkit.version_string(),
                toolkit.root.display()
            ));
        }
        let config =
            self.nvcc_config(env, &target, &toolkit, archs.archs.clone(), &out_dir, shared)?;
        let cuda_objects =
            compile_objects(&config, &layout, &mut generated, &mut hand_written, env, cargo)?;
        report.nvcc_runs = generated.iter().filter(|file| file.report.compiled).count()
            + hand_written.iter().filter(|file| file.report.compiled).count();
        report.cache_hits = cuda_objects.len() - report.nvcc_runs;
        objects.extend(cuda_objects);
        check_symbols(&generated, &hand_written, objcopy, cargo)?;
        report.library = Some(self.link(env, &layout, &out_dir, &target, name, &objects, cargo)?);
        report.files = generated.into_iter().map(|file| file.report).collect();
        report.cuda_files = hand_written.into_iter().map(|file| file.report).collect();
        report.toolkit = Some(toolkit);
        write_report(&layout, &report)?;
        Ok(report)
    }

    /// Archives `objects` into the build's static library and prints its link lines.
    #[allow(clippy::too_many_arguments)]
    fn link(
        &self,
        env: &Env,
        layout: &Layout,
        out_dir: &Path,
        target: &Target,
        name: &str,
        objects: &[(PathBuf, Digest)],
        cargo: &mut Cargo,
    ) -> Result<Library, Error> {
        let link_name = link_name(env, name);
        let lib_dir = layout.choreo_dir.join("lib");
        std::fs::create_dir_all(&lib_dir)
            .map_err(|e| Error::io("create directory", &lib_dir, e))?;
        let lib_path = lib_dir.join(format!("lib{link_name}.a"));
        let rebuilt = nvcc::archive(archiver(env, out_dir), &lib_path, objects)?;
        cargo.line(&format!("rustc-link-search=native={}", absolute(&lib_dir)?.display()));
        cargo.line(&format!("rustc-link-lib=static={link_name}"));
        // The objects are C++. The CUDA runtime they call is linked by choreo-sys (found by the
        // same discovery), and the CPU runtime by `choreo`; every crate using the wrappers
        // depends on both through `choreo`.
        if target.os == "linux" {
            cargo.line("rustc-link-lib=dylib=stdc++");
        }
        Ok(Library { link_name, path: lib_path, rebuilt })
    }

    /// Compiles the CPU versions (`obj/cpu/<module>.o`), stale ones only. When the CUDA
    /// versions are linked too (`cuda`), each CPU object's hidden symbols are made local (see
    /// `cpu`). `shared`: the shared object cache ([`shared_cache`]).
    #[allow(clippy::too_many_arguments)]
    fn compile_cpu(
        &self,
        env: &Env,
        target: &Target,
        layout: &Layout,
        scope: &[String],
        cuda: bool,
        shared: Option<SharedCache>,
        generated: &mut [Generated],
    ) -> Result<CpuBuild, Error> {
        let generated_dir = absolute(&layout.generated_dir())?;
        let mut include_dirs = vec![generated_dir.clone()];
        for dir in &self.include_dirs {
            include_dirs.push(absolute(dir)?);
        }
        let config = cpu::CpuConfig::from_cc(
            &target.triple,
            &env.text("HOST").unwrap_or_else(|| target.triple.clone()),
            // Like the nvcc path (`-O2` in every profile): kernels of a debug build are still
            // meant to run at speed, and the generated code is not for stepping through.
            "2",
            self.defines.clone(),
            include_dirs,
            // A CPU-only build links its objects as compiled, as a CUDA build links nvcc's.
            |compiler| {
                let from_env = env.non_empty("OBJCOPY").map(PathBuf::from);
                cpu::find_objcopy(from_env, compiler, &target.triple, target.cross)
            },
            cuda,
        )?
        .with_shared_cache(absolute(&layout.out_dir())?, shared);
        let obj_dir = generated_dir.join("obj").join("cpu");
        let mut jobs = Vec::new();
        for file in generated.iter_mut() {
            let (Some(cpp), Some(digest)) = (&file.report.cpp, file.cpp_digest) else { continue };
            let object = obj_dir.join(format!("{}.o", file.input.module));
            file.report.cpu_object = Some(object.clone());
            // Unique per file, library, crate and version, like the entry symbols.
            let scope = scope.iter().map(String::as_str).chain([file.input.module.as_str()]);
            let scope = scope.collect::<Vec<_>>().join("\0");
            let hash = Digest::of(scope).to_string();
            jobs.push(cpu::CpuJob {
                source: file.input.path.clone(),
                source_dir: file.co_dir.clone(),
                cpp: absolute(cpp)?,
                digest,
                object,
                local_suffix: format!(".choreo_cpu_{}", &hash[..16]),
            });
        }
        let built = cpu::compile_all(&config, &jobs, jobs_from_env(env))?;
        // The jobs are the files with a CPU version, in order.
        let with_cpu = generated.iter_mut().filter(|f| f.report.cpu_object.is_some());
        for (file, compiled) in with_cpu.zip(&built.compiled) {
            file.report.cpu_compiled = *compiled;
        }
        let runs = built.compiled.iter().filter(|c| **c).count();
        let objcopy = cuda.then_some(config.objcopy.is_some());
        Ok(CpuBuild { objects: built.objects, runs, objcopy })
    }

    /// The input files, sorted: the `.co` files with module names, and the hand-written `.cu`
    /// files. Prints what cargo must watch.
    fn inputs(&self, cargo: &mut Cargo) -> Result<(Vec<Input>, Vec<CudaInput>), Error> {
        let (paths, watch_dirs) = inputs::collect(&self.files, &self.patterns)?;
        let (cuda_paths, cuda_watch_dirs) = inputs::collect(&self.cuda_files, &self.cuda_patterns)?;
        if paths.is_empty() && cuda_paths.is_empty() {
            return Err(Error::NoInputs { pattern: None });
        }
        for dir in watch_dirs.iter().chain(&cuda_watch_dirs) {
            cargo.line(&format!("rerun-if-changed={}", dir.display()));
        }
        for path in paths.iter().chain(&cuda_paths) {
            cargo.line(&format!("rerun-if-changed={}", path.display()));
        }
        let inputs = inputs::assign_modules(paths)?;
        Ok((inputs, cuda_paths.into_iter().map(CudaInput::new).collect()))
    }

    /// Translates every input; all diagnostics of all files are collected, and any error fails
    /// the build. Warnings become cargo warnings (and are rendered on stderr).
    ///
    /// Each file is translated for the CPU (when `cpu`) and then for CUDA; the Rust wrappers
    /// call the CUDA entries when `cuda` (nvcc will compile them) and the CPU entries when the
    /// CPU version exists. A file whose only errors on the CPU are constructs the CPU cannot
    /// run (`E0806`, e.g. inline PTX) gets no CPU version when CUDA is built (a cargo warning
    /// says so); without CUDA those are its errors.
    fn translate(
        &self,
        inputs: &[Input],
        archs: &arch::ArchList,
        cuda: bool,
        cpu: bool,
        scope: &[String],
        cargo: &mut Cargo,
    ) -> Result<Vec<Translated>, Error> {
        let mut options = CompileOptions {
            defines: self.defines.clone(),
            target: CompileTarget::Cuda(archs.floor()),
            mode: OutputMode::Library,
            runtime_checks: self.runtime_checks,
            cuda_wrappers: cuda,
            cpu_wrappers: false,
            symbol_scope: None,
            bounds_checks: self.bounds_checks,
        };
        let mut translated = Vec::new();
        let mut failed = Vec::new();
        for input in inputs {
            let text = read_source(&input.path)?;
            let co_dir = absolute(input.path.parent().unwrap_or(Path::new("")))?;
            for header in inputs::local_includes(&text, &co_dir, MAX_LOCAL_INCLUDES) {
                cargo.line(&format!("rerun-if-changed={}", header.display()));
            }
            let mut db = SourceDb::new();
            let file = db.add(input.path.display().to_string(), text);
            options.symbol_scope = Some(SymbolScope::new(
                scope.iter().map(String::as_str).chain([input.module.as_str()]),
            ));
            let mut cpp = None;
            let mut cpu_failure = None;
            if cpu {
                let cpu_options = CompileOptions { target: CompileTarget::Cpu, ..options.clone() };
                let on_cpu = choreo_compiler::compile::compile(&db, file, &cpu_options);
                let errors: Vec<&Diagnostic> =
                    on_cpu.diagnostics.iter().filter(|d| d.is_error()).collect();
                if errors.is_empty() {
                    cpp = on_cpu.cpp;
                } else if errors.iter().all(|d| d.code == "E0806") {
                    if cuda {
                        cargo.line(&format!(
                            "warning={}: the kernels of this file use what the CPU cannot run \
                             ({}); they are built for CUDA only",
                            db.location(errors[0].primary.span),
                            one_line(&errors[0].message)
                        ));
                    } else {
                        cpu_failure = Some(on_cpu.diagnostics);
                    }
                }
                // Other errors are the file's own: the CUDA translation reports them.
            }
            options.cpu_wrappers = cpp.is_some();
            let (compilation, file_archs) = self.translate_for_archs(&db, file, &options, archs);
            match &file_archs {
                Some(chosen) if chosen.len() < archs.archs.len() || chosen[0] != archs.floor() => {
                    let dropped: Vec<Arch> =
                        archs.archs.iter().filter(|a| !chosen.contains(a)).copied().collect();
                    let why = if chosen == &[Arch::SM_90A] && !archs.archs.contains(&Arch::SM_90A) {
                        "it uses a construct that only sm_90a has (e.g. setmaxnreg or the \
                         group-4 level), so its kernels run on sm_90 (Hopper) GPUs only"
                            .to_owned()
                    } else {
                        format!(
                            "it uses a construct that {} lacks, so its kernels do not run on \
                             those GPUs",
                            arch::join(&dropped)
                        )
                    };
                    cargo.line(&format!(
                        "warning={}: built for {} instead of {} ({}): {why}",
                        input.path.display(),
                        arch::join(chosen),
                        archs.joined(),
                        archs.origin
                    ));
                }
                _ => {}
            }
            let mut diagnostics = compilation.diagnostics;
            if let Some(cpu_errors) = cpu_failure {
                diagnostics.extend(cpu_errors.into_iter().filter(|d| d.code == "E0806"));
            }
            let errors = diagnostics.iter().filter(|d| d.is_error()).count();
            let mut warnings = 0;
            for warning in diagnostics.iter().filter(|d| d.severity == Severity::Warning) {
                warnings += 1;
                cargo.line(&format!(
                    "warning={}: warning[{}]: {}",
                    db.location(warning.primary.span),
                    warning.code,
                    one_line(&warning.message)
                ));
            }
            // A compile-time `println!` prints where cargo shows it (build-script output
            // is hidden otherwise).
            for note in diagnostics.iter().filter(|d| d.code == "N0701") {
                cargo.line(&format!(
                    "warning={}: println!: {}",
                    db.location(note.primary.span),
                    one_line(&note.message)
                ));
            }
            let rendered = render_human(&db, &diagnostics);
            match (compilation.cu, compilation.rs) {
                (Some(cu), Some(rs)) if errors == 0 => {
                    eprint!("{rendered}");
                    translated.push(Translated {
                        input: input.clone(),
                        co_dir,
                        cu,
                        cpp,
                        rs,
                        warnings,
                        archs: file_archs.unwrap_or_else(|| archs.archs.clone()),
                    });
                }
                _ => failed.push(FileDiagnostics {
                    file: input.path.clone(),
                    errors: errors.max(1),
                    warnings,
                    rendered,
                }),
            }
        }
        if failed.is_empty() { Ok(translated) } else { Err(Error::Diagnostics(failed)) }
    }

    /// The build's architectures (see [`arch::resolve`]); `detect`: ask `nvidia-smi` for the
    /// GPUs of this machine when nothing sets them.
    fn resolve_archs(
        &self,
        env: &Env,
        cuda_version: Option<u32>,
        detect: bool,
    ) -> Result<arch::ArchList, Error> {
        arch::resolve(self.arch.as_deref(), env, cuda_version, || {
            if detect { arch::detect_gpus() } else { None }
        })
        .map_err(|(origin, message)| Error::InvalidArch {
            origin: match origin {
                ArchOrigin::Env(var) => var,
                _ => "Builder::arch",
            },
            message,
        })
    }

    /// Translates `file` for CUDA for each architecture of `archs` and chooses those it is
    /// built for ([`arch::file_archs`]): the translation for the oldest of them, and them;
    /// `None` with the translation for the oldest of the list when there are none (its errors
    /// are the file's).
    fn translate_for_archs(
        &self,
        db: &SourceDb,
        file: choreo_compiler::source::FileId,
        options: &CompileOptions,
        archs: &arch::ArchList,
    ) -> (choreo_compiler::compile::Compilation, Option<Vec<Arch>>) {
        let mut results = Vec::new();
        let mut translate = |arch: Arch| {
            let options = CompileOptions { target: CompileTarget::Cuda(arch), ..options.clone() };
            let compilation = choreo_compiler::compile::compile(db, file, &options);
            let ok = compilation.cu.is_some()
                && compilation.rs.is_some()
                && !compilation.diagnostics.iter().any(Diagnostic::is_error);
            results.push((arch, ok, compilation));
            ok
        };
        let chosen = match arch::file_archs(archs, &mut translate) {
            arch::FileArchs::Archs { archs, .. } => Some(archs),
            arch::FileArchs::Hopper => Some(vec![Arch::SM_90A]),
            arch::FileArchs::None => None,
        };
        // The translation for the oldest architecture chosen; with none, the first that failed
        // (its diagnostics are the file's errors).
        let index = match &chosen {
            Some(chosen) => results.iter().position(|(arch, ..)| *arch == chosen[0]),
            None => results.iter().position(|(_, ok, _)| !ok),
        };
        (results.swap_remove(index.unwrap_or(0)).2, chosen)
    }

    fn nvcc_config(
        &self,
        env: &Env,
        target: &Target,
        toolkit: &Toolkit,
        archs: Vec<Arch>,
        out_dir: &Path,
        shared: Option<SharedCache>,
    ) -> Result<NvccConfig, Error> {
        let ccbin = match env.non_empty("NVCC_CCBIN").or_else(|| env.non_empty("CUDAHOSTCXX")) {
            Some(ccbin) => Some(PathBuf::from(ccbin)),
            None if target.cross => Some(cross_cxx(target)?),
            None => None,
        };
        let include_dirs =
            self.include_dirs.iter().map(|dir| absolute(dir)).collect::<Result<Vec<_>, _>>()?;
        let env_flags = ["NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"]
            .into_iter()
            .filter_map(|var| env.text(var).map(|value| (var, value)))
            .collect();
        Ok(NvccConfig {
            toolkit: toolkit.clone(),
            archs,
            defines: self.defines.clone(),
            include_dirs,
            ccbin,
            target_dir: if target.cross { target.toolkit_dir() } else { None },
            lean_prelude: self.lean_prelude,
            pic: target.os != "windows",
            user_flags: self.nvcc_flags.clone(),
            env_flags,
            out_dir: absolute(out_dir)?,
            shared,
        })
    }
}

/// What [`Builder::compile_cpu`] made.
struct CpuBuild {
    /// The objects, with the digests of their sources.
    objects: Vec<(PathBuf, Digest)>,
    /// How many were compiled (the others were up to date).
    runs: usize,
    /// In a build with CUDA: whether an objcopy made the objects' host symbols local.
    objcopy: Option<bool>,
}

/// Before the objects of a build with both backends are archived: a symbol that two of them
/// define (strong, global) would fail the program's link. One defined by both objects of a
/// `.co` file is an error, located at the file (both are linked whenever one of its wrappers
/// is); one defined by objects of two files is a warning (their link fails only when both are
/// used). Without objcopy (`objcopy == Some(false)`) a warning also says that the CPU objects'
/// host symbols are not local.
fn check_symbols(
    generated: &[Generated],
    hand_written: &[HandWritten],
    objcopy: Option<bool>,
    cargo: &mut Cargo,
) -> Result<(), Error> {
    let mut objects = Vec::new();
    for file in generated {
        let source = &file.input.path;
        if let Some(object) = &file.report.cpu_object {
            objects.push((object.clone(), source.clone(), "CPU"));
        }
        if let Some(object) = &file.report.object {
            objects.push((object.clone(), source.clone(), "CUDA"));
        }
    }
    for file in hand_written {
        if let Some(object) = &file.report.object {
            objects.push((object.clone(), file.input.path.clone(), "CUDA"));
        }
    }
    let no_objcopy = objcopy == Some(false);
    if no_objcopy {
        cargo.line(
            "warning=choreo-build: no usable objcopy was found (set OBJCOPY): the CPU objects' \
             host symbols are not made local, so host code with external linkage in a .co file \
             is defined by both its CUDA and its CPU object, and inline functions of the two \
             may be merged",
        );
    }
    let mut errors = Vec::new();
    for clash in cpu::clashes(&objects) {
        let duplicate = error::DuplicateSymbol {
            symbol: clash.symbol,
            first: clash.first,
            second: clash.second,
            no_objcopy,
        };
        if duplicate.first.0 == duplicate.second.0 {
            errors.push(duplicate);
        } else {
            cargo.line(&format!(
                "warning={} (the program's link fails if it uses both files)",
                duplicate.describe()
            ));
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(Error::DuplicateSymbols(errors)) }
}

/// Reads the hand-written `.cu` files (their content is part of their cache key) and prints
/// `rerun-if-changed` for the local headers they include.
fn read_hand_written(inputs: Vec<CudaInput>, cargo: &mut Cargo) -> Result<Vec<HandWritten>, Error> {
    let mut files = Vec::with_capacity(inputs.len());
    for input in inputs {
        let bytes = std::fs::read(&input.path).map_err(|e| Error::io("read", &input.path, e))?;
        let cu = absolute(&input.path)?;
        let dir = cu.parent().map(Path::to_path_buf).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        for header in inputs::local_includes(&text, &dir, MAX_LOCAL_INCLUDES) {
            cargo.line(&format!("rerun-if-changed={}", header.display()));
        }
        files.push(HandWritten {
            report: CudaFileReport { source: input.path.clone(), object: None, compiled: false },
            digest: Digest::of(&bytes),
            input,
            dir,
            cu,
        });
    }
    Ok(files)
}

/// Reads a `.co` file as UTF-8.
fn read_source(path: &Path) -> Result<String, Error> {
    let bytes = std::fs::read(path).map_err(|e| Error::io("read", path, e))?;
    String::from_utf8(bytes).map_err(|e| Error::NotUtf8 {
        path: path.to_path_buf(),
        offset: e.utf8_error().valid_up_to(),
    })
}

/// `path` made absolute against the current directory (the package directory in a build
/// script), without resolving links.
fn absolute(path: &Path) -> Result<PathBuf, Error> {
    std::path::absolute(path).map_err(|e| Error::io("resolve", path, e))
}

/// The object cache shared by the builds of the target folder (see `shared_cache`):
/// `CHOREO_CACHE_DIR`, else next to cargo's build folders.
fn shared_cache(env: &Env, out_dir: &Path) -> Result<Option<SharedCache>, Error> {
    let chosen = env.non_empty("CHOREO_CACHE_DIR").map(|dir| dir.to_string_lossy().into_owned());
    Ok(SharedCache::locate(&absolute(out_dir)?, chosen.as_deref()))
}

/// The most parallel compiler runs: cargo's `NUM_JOBS`, else the available parallelism (under
/// cargo, its jobserver's tokens limit them further, see `nvcc::parallel_map`).
fn jobs_from_env(env: &Env) -> usize {
    env.text("NUM_JOBS")
        .and_then(|jobs| jobs.parse().ok())
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1)
}

/// The library's link name: `choreo_<package>_<name>`, with `-` as `_`.
fn link_name(env: &Env, name: &str) -> String {
    let name = match env.text("CARGO_PKG_NAME") {
        Some(package) => format!("choreo_{package}_{name}"),
        None => format!("choreo_{name}"),
    };
    name.replace('-', "_")
}

/// The target's C++ compiler as cc would choose it (for nvcc's `-ccbin` in cross builds).
fn cross_cxx(target: &Target) -> Result<PathBuf, Error> {
    cc::Build::new().cpp(true).try_get_compiler().map(|tool| tool.path().to_path_buf()).map_err(
        |e| Error::Toolkit {
            root: PathBuf::new(),
            message: format!(
                "cross build for {}: cannot determine the target's C++ compiler for nvcc's \
                 -ccbin ({e}); set NVCC_CCBIN or CXX_{}",
                target.triple,
                target.triple.replace('-', "_")
            ),
        },
    )
}

/// The archiver: cc's choice for the cargo target (`AR`, cross prefixes) in a build script,
/// plain `ar` outside one.
fn archiver(env: &Env, out_dir: &Path) -> Command {
    if env.is_process() && env.text("TARGET").is_some() {
        if let Ok(ar) = cc::Build::new().out_dir(out_dir).try_get_archiver() {
            return ar;
        }
    }
    Command::new("ar")
}

/// Passes nvcc's output on: all of it to stderr (shown by `cargo build -vv` and on failure),
/// and its warnings about the user's own lines as cargo warnings: those that name the `.co`
/// file (through the `#line` directives of host code) or the hand-written `.cu` file (by its
/// absolute path, as nvcc was given it). Warnings about generated lines are not something the
/// user can act on, so they stay on stderr.
fn forward_nvcc_warnings(cargo: &mut Cargo, job: &Job, output: &str) {
    if output.trim().is_empty() {
        return;
    }
    let co = &job.source;
    eprintln!("nvcc output for {}:\n{}", co.display(), output.trim_end());
    const MAX: usize = 5;
    let user_file = if job.hand_written { &job.cu } else { &job.source };
    let user_file = user_file.display().to_string();
    let warnings: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with(&user_file) && line.contains("warning"))
        .collect();
    for line in warnings.iter().take(MAX) {
        cargo.line(&format!("warning=nvcc: {}", one_line(line)));
    }
    if warnings.len() > MAX {
        cargo.line(&format!(
            "warning={}: nvcc: {} more (see the build script's stderr)",
            co.display(),
            plural(warnings.len() - MAX, "warning")
        ));
    }
}

/// Where a build's files go: everything under `<OUT_DIR>/choreo/`.
struct Layout {
    /// `<OUT_DIR>/choreo`.
    choreo_dir: PathBuf,
    /// The build's name.
    name: String,
}

impl Layout {
    /// `<OUT_DIR>`.
    fn out_dir(&self) -> PathBuf {
        self.choreo_dir.parent().map_or_else(PathBuf::new, Path::to_path_buf)
    }

    /// `<OUT_DIR>/choreo/<name>/`: `choreo.h`, the `.cu` and `.rs` files, `obj/`.
    fn generated_dir(&self) -> PathBuf {
        self.choreo_dir.join(&self.name)
    }

    /// `<OUT_DIR>/choreo/<name>.rs`, the index.
    fn index_rs(&self) -> PathBuf {
        self.choreo_dir.join(format!("{}.rs", self.name))
    }

    /// `<OUT_DIR>/choreo/<name>/choreo.h`.
    fn header(&self) -> PathBuf {
        self.generated_dir().join("choreo.h")
    }
}

/// A `.co` file that translated without errors.
struct Translated {
    input: Input,
    /// Its folder, absolute (for `-I`).
    co_dir: PathBuf,
    /// The `.cu` text.
    cu: String,
    /// The `.cpp` text of the CPU version, when there is one.
    cpp: Option<String>,
    /// The Rust wrapper module text.
    rs: String,
    /// How many warnings it drew.
    warnings: usize,
    /// The architectures it is compiled for (the `.cu` is the translation for the first).
    archs: Vec<Arch>,
}

/// A hand-written `.cu` file that was read.
struct HandWritten {
    input: CudaInput,
    /// Its folder, absolute (for `-I`).
    dir: PathBuf,
    /// The file, absolute (nvcc's input).
    cu: PathBuf,
    /// The hash of its bytes.
    digest: Digest,
    report: CudaFileReport,
}

/// A file whose sources are written.
struct Generated {
    input: Input,
    co_dir: PathBuf,
    cu_digest: Digest,
    /// The hash of the `.cpp`, when there is a CPU version.
    cpp_digest: Option<Digest>,
    /// The architectures it is compiled for.
    archs: Vec<Arch>,
    report: FileReport,
}

/// Writes `choreo.h`, every `.cu` and `.rs` and the index (each only if it changed).
fn write_sources(layout: &Layout, translated: &[Translated]) -> Result<Vec<Generated>, Error> {
    let dir = layout.generated_dir();
    output::write_if_changed(&layout.header(), choreo_compiler::runtime::CHOREO_H)?;
    output::write_if_changed(&dir.join("choreo_cpu.h"), choreo_compiler::runtime::CHOREO_CPU_H)?;
    let mut generated = Vec::with_capacity(translated.len());
    let mut entries = Vec::with_capacity(translated.len());
    for file in translated {
        let source = file.input.path.display().to_string();
        let cu = dir.join(format!("{}.cu", file.input.module));
        let rs = dir.join(format!("{}.rs", file.input.module));
        let cu_written = output::write_if_changed(&cu, &file.cu)?;
        let rs_written = output::write_if_changed(&rs, &file.rs)?;
        let cpp = match &file.cpp {
            Some(text) => {
                let path = dir.join(format!("{}.cpp", file.input.module));
                output::write_if_changed(&path, text)?;
                Some(path)
            }
            None => None,
        };
        entries.push((
            file.input.module.clone(),
            source,
            format!("choreo/{}/{}.rs", layout.name, file.input.module),
        ));
        generated.push(Generated {
            input: file.input.clone(),
            co_dir: file.co_dir.clone(),
            // Comments do not count: a comment-only edit of the `.co` file compiles nothing.
            cu_digest: comments::code_digest(&file.cu),
            cpp_digest: file.cpp.as_deref().map(comments::code_digest),
            archs: file.archs.clone(),
            report: FileReport {
                source: file.input.path.clone(),
                module: file.input.module.clone(),
                archs: file.archs.iter().map(Arch::to_string).collect(),
                cu,
                rs,
                cpp,
                object: None,
                cpu_object: None,
                cu_written,
                rs_written,
                compiled: false,
                cpu_compiled: false,
            },
        });
    }
    let entries: Vec<output::IndexEntry<'_>> = entries
        .iter()
        .map(|(module, source, rs)| output::IndexEntry {
            module,
            source,
            rs_from_out_dir: rs.clone(),
        })
        .collect();
    output::write_if_changed(&layout.index_rs(), &output::index_text(&layout.name, &entries))?;
    Ok(generated)
}

/// Brings every object up to date: cache check, parallel nvcc runs for the stale ones. Returns
/// the objects with the digests of their content (for the archive: generated ones first, then
/// hand-written ones) and marks the compiled files in `generated` and `hand_written`.
fn compile_objects(
    config: &NvccConfig,
    layout: &Layout,
    generated: &mut [Generated],
    hand_written: &mut [HandWritten],
    env: &Env,
    cargo: &mut Cargo,
) -> Result<Vec<(PathBuf, Digest)>, Error> {
    let header_digest = Digest::of(choreo_compiler::compile::CHOREO_H);
    let generated_dir = absolute(&layout.generated_dir())?;
    let obj_dir = generated_dir.join("obj");
    // Hand-written files' objects live apart (and are named apart, see `cuda_object_stem`).
    let cuda_obj_dir = obj_dir.join("cuda");
    let dir_to_create = if hand_written.is_empty() { &obj_dir } else { &cuda_obj_dir };
    std::fs::create_dir_all(dir_to_create)
        .map_err(|e| Error::io("create directory", dir_to_create, e))?;
    // Every job with its key and its digest; generated files first, then hand-written ones.
    let mut jobs = Vec::with_capacity(generated.len() + hand_written.len());
    for file in generated.iter_mut() {
        let job = Job {
            source: file.input.path.clone(),
            source_dir: file.co_dir.clone(),
            cu: absolute(&file.report.cu)?,
            object: obj_dir.join(format!("{}.{}.o", file.input.module, arch_tag(&file.archs))),
            generated_dir: generated_dir.clone(),
            hand_written: false,
            archs: file.archs.clone(),
        };
        file.report.object = Some(job.object.clone());
        let key = config.key(&job, file.cu_digest, header_digest);
        jobs.push((job, key));
    }
    for file in hand_written.iter_mut() {
        let job = Job {
            source: file.input.path.clone(),
            source_dir: file.dir.clone(),
            cu: file.cu.clone(),
            object: cuda_obj_dir.join(format!(
                "{}.{}.o",
                file.input.object_stem,
                arch_tag(&config.archs)
            )),
            generated_dir: generated_dir.clone(),
            hand_written: true,
            archs: config.archs.clone(),
        };
        file.report.object = Some(job.object.clone());
        let key = config.key(&job, file.digest, header_digest);
        jobs.push((job, key));
    }
    let objects: Vec<(PathBuf, Digest)> =
        jobs.iter().map(|(job, key)| (job.object.clone(), *key)).collect();
    let mut stale = Vec::new();
    let mut deps_of = vec![Vec::new(); jobs.len()];
    for (index, (job, key)) in jobs.iter().enumerate() {
        match nvcc::check_cache(job, *key) {
            CacheState::Fresh(deps) => deps_of[index] = deps,
            CacheState::Stale => match nvcc::fetch_shared(config, job, *key) {
                Some(deps) => deps_of[index] = deps,
                None => stale.push(index),
            },
        }
    }
    let stale_jobs: Vec<(Job, Digest)> = stale.iter().map(|&index| jobs[index].clone()).collect();
    let results = nvcc::compile_all(config, &stale_jobs, jobs_from_env(env));
    let mut failures = Vec::new();
    for (&index, result) in stale.iter().zip(results) {
        match result {
            Ok(compiled) => {
                match index.checked_sub(generated.len()) {
                    None => generated[index].report.compiled = true,
                    Some(hand_index) => hand_written[hand_index].report.compiled = true,
                }
                deps_of[index] = compiled.deps;
                forward_nvcc_warnings(cargo, &jobs[index].0, &compiled.output);
            }
            Err(JobError::Failed(failure)) => failures.push(*failure),
            Err(JobError::Fatal(error)) => return Err(error),
        }
    }
    // Headers nvcc read besides the generated ones (also those found by scanning `#include`,
    // plus any that are included through `-I` folders or macros).
    let mut watched: Vec<&PathBuf> = deps_of.iter().flatten().collect();
    watched.sort();
    watched.dedup();
    for dep in watched {
        cargo.line(&format!("rerun-if-changed={}", dep.display()));
    }
    if !failures.is_empty() {
        return Err(Error::Nvcc(failures));
    }
    // The archive is keyed by the objects' content, not their cache keys: an object recompiled
    // because a header it includes changed has the same cache key as before, yet the library
    // must take the new object.
    objects
        .into_iter()
        .map(|(object, _)| {
            let bytes = std::fs::read(&object).map_err(|e| Error::io("read", &object, e))?;
            Ok((object, Digest::of(bytes)))
        })
        .collect()
}

/// The architectures of an object as part of its file name (`sm_80-sm_90`): each list has
/// its own objects and cache entries, so a build for other architectures leaves those of the
/// previous ones in place, and switching back compiles nothing.
fn arch_tag(archs: &[Arch]) -> String {
    archs.iter().map(Arch::to_string).collect::<Vec<_>>().join("-")
}

/// Copies the generated files to the dump folder (each only when its content differs):
/// `<dir>/<name>.rs` and `<dir>/<name>/{choreo.h, <module>.cu, <module>.rs}`.
fn dump<'a>(
    dir: &Path,
    layout: &Layout,
    files: impl Iterator<Item = &'a FileReport>,
) -> Result<(), Error> {
    let copy = |from: &Path, to: &Path| -> Result<(), Error> {
        let text = std::fs::read_to_string(from).map_err(|e| Error::io("read", from, e))?;
        output::write_if_changed(to, &text).map(|_| ())
    };
    let sub = dir.join(&layout.name);
    copy(&layout.index_rs(), &dir.join(format!("{}.rs", layout.name)))?;
    copy(&layout.header(), &sub.join("choreo.h"))?;
    for file in files {
        for generated in [&file.cu, &file.rs] {
            if let Some(file_name) = generated.file_name() {
                copy(generated, &sub.join(file_name))?;
            }
        }
    }
    Ok(())
}

fn write_report(layout: &Layout, report: &Report) -> Result<(), Error> {
    let path = layout.choreo_dir.join(format!("{}.report", layout.name));
    std::fs::write(&path, report.to_string()).map_err(|e| Error::io("write", path, e))
}

/// Prints `cargo::` directives (or nothing, when disabled), each distinct line once.
struct Cargo {
    enabled: bool,
    printed: std::collections::HashSet<String>,
}

impl Cargo {
    fn new(enabled: bool) -> Cargo {
        Cargo { enabled, printed: Default::default() }
    }

    fn line(&mut self, directive: &str) {
        if self.enabled && self.printed.insert(directive.to_owned()) {
            println!("cargo::{directive}");
        }
    }
}

/// What a build did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Report {
    /// The output name given to [`Builder::build`].
    pub name: String,
    /// The build's CUDA architectures, comma-separated, e.g. `sm_90a` or `sm_80,sm_90` (a file
    /// may be built for fewer: [`FileReport::archs`]).
    pub arch: String,
    /// Where they came from.
    pub arch_origin: ArchOrigin,
    /// Every `.co` input, in build order.
    pub files: Vec<FileReport>,
    /// Every hand-written `.cu` input ([`Builder::cuda_file`], [`Builder::cuda_files`]), in
    /// build order (sorted by path). Their nvcc runs and cache hits are counted in
    /// [`Report::nvcc_runs`] and [`Report::cache_hits`] too.
    pub cuda_files: Vec<CudaFileReport>,
    /// `<OUT_DIR>/choreo/<name>.rs`, the index that `choreo::include_kernels!` includes.
    pub index_rs: PathBuf,
    /// The static library (absent in stub mode).
    pub library: Option<Library>,
    /// The CUDA toolkit used (absent in stub mode).
    pub toolkit: Option<Toolkit>,
    /// Why nothing was compiled, in stub mode.
    pub stub: Option<StubReason>,
    /// How many times nvcc ran (one per `.cu` — generated or hand-written — whose cache entry
    /// was stale).
    pub nvcc_runs: usize,
    /// How many objects (generated or hand-written) were up to date.
    pub cache_hits: usize,
    /// How many times the host C++ compiler ran on a CPU version (one per stale `.cpp`).
    pub cpu_runs: usize,
    /// Warnings reported by the translator.
    pub warnings: usize,
    /// Where the generated sources were copied, if anywhere.
    pub dump_dir: Option<PathBuf>,
}

/// What happened to one `.co` file.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FileReport {
    /// The `.co` file.
    pub source: PathBuf,
    /// Its Rust module name.
    pub module: String,
    /// The CUDA architectures it is built for, e.g. `["sm_80", "sm_90"]`: the build's, or —
    /// when it uses a construct that some of them lack — fewer of them, or `sm_90a` alone (a
    /// cargo warning says so). The `.cu` is its translation for the first.
    pub archs: Vec<String>,
    /// The generated `.cu`.
    pub cu: PathBuf,
    /// The generated `.rs`.
    pub rs: PathBuf,
    /// The generated `.cpp` of the CPU version (absent when the file has none).
    pub cpp: Option<PathBuf>,
    /// The CUDA object file (absent without nvcc): `obj/<module>.<architectures>.o`.
    pub object: Option<PathBuf>,
    /// The CPU object file (`obj/cpu/<module>.o`; absent without a CPU version).
    pub cpu_object: Option<PathBuf>,
    /// Whether the `.cu` file was (re)written (its content changed).
    pub cu_written: bool,
    /// Whether the `.rs` file was (re)written.
    pub rs_written: bool,
    /// Whether nvcc compiled it in this build (false: cache hit, or no nvcc).
    pub compiled: bool,
    /// Whether the C++ compiler compiled its CPU version in this build (false: cache hit).
    pub cpu_compiled: bool,
}

/// What happened to one hand-written `.cu` file.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CudaFileReport {
    /// The `.cu` file, as given (or as the glob found it).
    pub source: PathBuf,
    /// Its object (absent in stub mode):
    /// `<OUT_DIR>/choreo/<name>/obj/cuda/<stem>-<hash>.<architectures>.o`, where the hash is of
    /// the path, so files of the same stem in different folders, and the generated objects
    /// (`obj/<module>.<architectures>.o`), never collide.
    pub object: Option<PathBuf>,
    /// Whether nvcc compiled it in this build (false: cache hit, or stub mode).
    pub compiled: bool,
}

/// The static library of a build.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Library {
    /// The name given to `rustc-link-lib` (`choreo_<package>_<name>`).
    pub link_name: String,
    /// `lib<link_name>.a`.
    pub path: PathBuf,
    /// Whether it was (re)created in this build.
    pub rebuilt: bool,
}

impl fmt::Display for Report {
    /// `key=value` lines (the format of `<OUT_DIR>/choreo/<name>.report`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "name={}", self.name)?;
        writeln!(f, "arch={}\narch_origin={}", self.arch, self.arch_origin)?;
        match (&self.stub, &self.toolkit) {
            (Some(reason), _) => {
                writeln!(f, "mode=stub\nstub_reason={}", one_line(&reason.to_string()))?
            }
            (None, Some(toolkit)) => writeln!(
                f,
                "mode=nvcc\nnvcc={}\ncuda_version={}\nnvcc_found_by={}\ncuda_root={}\n\
                 cuda_root_from={}\ncudart_lib_dir={}",
                toolkit.nvcc.display(),
                toolkit.version_string(),
                toolkit.found_by,
                toolkit.root.display(),
                toolkit.root_from,
                toolkit.lib_dir.display()
            )?,
            (None, None) => writeln!(f, "mode=unknown")?,
        }
        writeln!(f, "index_rs={}", self.index_rs.display())?;
        if let Some(library) = &self.library {
            writeln!(
                f,
                "library={}\nlink_name={}\nlibrary_rebuilt={}",
                library.path.display(),
                library.link_name,
                library.rebuilt
            )?;
        }
        writeln!(
            f,
            "nvcc_runs={}\ncache_hits={}\ncpu_runs={}\nwarnings={}",
            self.nvcc_runs, self.cache_hits, self.cpu_runs, self.warnings
        )?;
        if let Some(dir) = &self.dump_dir {
            writeln!(f, "dump_dir={}", dir.display())?;
        }
        for file in &self.files {
            write!(
                f,
                "file={} module={} archs={} compiled={} cu_written={} rs_written={} cu={} rs={}",
                file.source.display(),
                file.module,
                file.archs.join(","),
                file.compiled,
                file.cu_written,
                file.rs_written,
                file.cu.display(),
                file.rs.display()
            )?;
            if let Some(cpp) = &file.cpp {
                write!(f, " cpp={} cpu_compiled={}", cpp.display(), file.cpu_compiled)?;
            }
            writeln!(f)?;
        }
        for file in &self.cuda_files {
            write!(f, "cuda_file={} compiled={}", file.source.display(), file.compiled)?;
            if let Some(object) = &file.object {
                write!(f, " object={}", object.display())?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// `unwrap_or_exit` for build results: the way a build script ends on an error.
pub trait UnwrapOrExit<T> {
    /// The value, or — on an error — print it for cargo ([`Error::report_to_cargo`]) and exit
    /// the build script with status 1 (no panic, no backtrace).
    fn unwrap_or_exit(self) -> T;
}

impl<T> UnwrapOrExit<T> for Result<T, Error> {
    fn unwrap_or_exit(self) -> T {
        match self {
            Ok(value) => value,
            Err(error) => {
                error.report_to_cargo();
                std::process::exit(1)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_comes_from_the_builder_then_the_environment_then_the_default() {
        let resolve = |builder: &Builder, env: &Env| {
            builder.resolve_archs(env, Some(13000), false).map(|archs| archs.joined())
        };
        let env = Env::fixed([("CHOREO_CUDA_ARCH", "sm_80")]);
        assert_eq!(resolve(Builder::new().arch("sm_86"), &env).unwrap(), "sm_86");
        assert_eq!(resolve(Builder::new().arch("sm_90,sm_86"), &env).unwrap(), "sm_86,sm_90");
        assert_eq!(resolve(&Builder::new(), &env).unwrap(), "sm_80");
        let none = Env::fixed([]);
        assert_eq!(resolve(&Builder::new(), &none).unwrap(), DEFAULT_ARCHS.join(","));
        let bad = Env::fixed([("CHOREO_CUDA_ARCH", "sm_91")]);
        let error = resolve(&Builder::new(), &bad).unwrap_err().to_string();
        assert!(error.contains("CHOREO_CUDA_ARCH") && error.contains("sm_91"), "{error}");
        let error = resolve(Builder::new().arch("native"), &none).unwrap_err().to_string();
        assert!(error.contains("Builder::arch"), "{error}");
        let cap = Env::fixed([("CUDA_COMPUTE_CAP", "sm_70")]);
        let error = resolve(&Builder::new(), &cap).unwrap_err().to_string();
        assert!(error.contains("CUDA_COMPUTE_CAP") && error.contains("CUDA 13"), "{error}");
    }

    #[test]
    fn link_names_are_unique_per_package() {
        let env = Env::fixed([("CARGO_PKG_NAME", "my-app")]);
        assert_eq!(link_name(&env, "kernels"), "choreo_my_app_kernels");
        assert_eq!(link_name(&Env::fixed([]), "k"), "choreo_k");
    }

    #[test]
    fn invalid_names_are_rejected_before_anything_is_read() {
        let mut cargo = Cargo::new(false);
        for name in ["", "1x", "a/b", "a.b", "../x"] {
            let error =
                Builder::new().out_dir("/nonexistent").build_in(&Env::fixed([]), &mut cargo, name);
            assert!(matches!(error, Err(Error::InvalidName { .. })), "{name}");
        }
    }

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("choreo-build-lib-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Each file is built for the architectures of the list it translates for: all of them,
    /// the newer part (TMA needs sm_90), or sm_90a alone (setmaxnreg) when the list is the
    /// default; with a list the user set, the last is the file's E0805.
    #[test]
    fn each_file_is_built_for_the_architectures_its_constructs_need() {
        let dir = temp("file-archs");
        let plain = "__co__ void plain(global s32 [32] a) {\n  parallel t by 32 : thread { a.at(t) = t; }\n}\n";
        let setreg = "__co__ void roles(global s32 [32] a) {\n  parallel b by 1 : block {\n    \
                      call croq::cuda::setreg_dec(40);\n    parallel t by 32 : thread { a.at(t) = t; }\n  }\n}\n";
        let tma = "__co__ void move_tile(f32 [256] x, f32 [256] &y) {\n  parallel b by 1 : block {\n    \
                   shared f32 [256] t;\n    tma.load x => t;\n    tma.copy t => y;\n  }\n}\n";
        for (name, text) in [("plain", plain), ("setreg", setreg), ("tma", tma)] {
            std::fs::write(dir.join(format!("{name}.co")), text).unwrap();
        }
        let pattern = format!("{}/*.co", dir.display());
        // On docs.rs nothing is compiled, but every file is translated.
        let env = Env::fixed([("DOCS_RS", "1")]);
        let mut cargo = Cargo::new(true);
        let report = Builder::new()
            .files(&pattern)
            .out_dir(dir.join("out"))
            .build_in(&env, &mut cargo, "k")
            .unwrap();
        assert_eq!(
            (report.arch.as_str(), &report.arch_origin),
            ("sm_80,sm_90", &ArchOrigin::Default)
        );
        let archs: Vec<(String, String)> =
            report.files.iter().map(|f| (f.module.clone(), f.archs.join(","))).collect();
        assert_eq!(
            archs,
            [
                ("plain".to_owned(), "sm_80,sm_90".to_owned()),
                ("setreg".to_owned(), "sm_90a".to_owned()),
                ("tma".to_owned(), "sm_90".to_owned())
            ]
        );
        let warnings: Vec<&String> =
            cargo.printed.iter().filter(|line| line.starts_with("warning=")).collect();
        let about = |file: &str| {
            warnings.iter().find(|w| w.contains(&format!("{file}.co: built for"))).copied()
        };
        let setreg_warning = about("setreg").expect("a warning about setreg.co");
        assert!(
            setreg_warning.contains("built for sm_90a instead of sm_80,sm_90"),
            "{setreg_warning}"
        );
        assert!(setreg_warning.contains("Hopper"), "{setreg_warning}");
        let tma_warning = about("tma").expect("a warning about tma.co");
        assert!(tma_warning.contains("built for sm_90 instead of sm_80,sm_90"), "{tma_warning}");
        assert!(about("plain").is_none(), "{warnings:?}");
        // The generated .cu is the translation for the oldest architecture built.
        let cu = std::fs::read_to_string(&report.files[0].cu).unwrap();
        assert!(cu.contains("__CHOREO_REQUIRED_GPU_DEVICE_SM__ 80"), "plain.cu");
        let cu = std::fs::read_to_string(&report.files[1].cu).unwrap();
        assert!(cu.contains("__CHOREO_REQUIRED_GPU_DEVICE_SM__ 90"), "setreg.cu");

        // A list the user set: setmaxnreg on sm_90 is the file's error.
        let env = Env::fixed([("DOCS_RS", "1"), ("CHOREO_CUDA_ARCH", "sm_80,sm_90")]);
        let mut cargo = Cargo::new(false);
        let error = Builder::new()
            .files(&pattern)
            .out_dir(dir.join("out2"))
            .build_in(&env, &mut cargo, "k")
            .unwrap_err();
        let Error::Diagnostics(failed) = &error else { panic!("{error}") };
        assert_eq!(failed.len(), 1, "{error}");
        assert!(failed[0].file.ends_with("setreg.co"), "{error}");
        assert!(failed[0].rendered.contains("E0805"), "{}", failed[0].rendered);
    }

    #[test]
    fn a_builder_without_any_input_is_an_error_but_one_with_only_cu_files_is_not() {
        let dir = temp("no-inputs");
        let skip = Env::fixed([("CHOREO_NVCC", "skip")]);
        let mut cargo = Cargo::new(false);
        let error = Builder::new().out_dir(&dir).build_in(&skip, &mut cargo, "k").unwrap_err();
        assert!(matches!(error, Error::NoInputs { pattern: None }), "{error}");
        assert!(error.to_string().contains("Builder::cuda_file"), "{error}");
        // A `.cu` pattern that matches nothing is an error like a `.co` one.
        let pattern = format!("{}/none/*.cu", dir.display());
        let error = Builder::new()
            .cuda_files(&pattern)
            .out_dir(&dir)
            .build_in(&skip, &mut cargo, "k")
            .unwrap_err();
        assert!(matches!(&error, Error::NoInputs { pattern: Some(p) } if *p == pattern), "{error}");
    }

    #[test]
    fn stub_mode_skips_hand_written_files_and_still_writes_the_index() {
        let dir = temp("stub");
        std::fs::create_dir_all(dir.join("cuda")).unwrap();
        std::fs::write(dir.join("cuda/util.h"), "#define UTIL 1\n").unwrap();
        std::fs::write(
            dir.join("cuda/util.cu"),
            "#include \"choreo.h\"\n#include \"util.h\"\n\
             extern \"C\" int util() { return UTIL; }\n",
        )
        .unwrap();
        let skip = Env::fixed([("CHOREO_NVCC", "skip")]);
        // Enabled, to record the directives (they also go to the test's captured stdout).
        let mut cargo = Cargo::new(true);
        let report = Builder::new()
            .cuda_files(format!("{}/cuda/*.cu", dir.display()))
            .out_dir(dir.join("out"))
            .build_in(&skip, &mut cargo, "k")
            .unwrap();
        assert!(report.stub.is_some() && report.library.is_none(), "{report}");
        assert!(report.files.is_empty(), "{report}");
        assert_eq!(report.cuda_files.len(), 1, "{report}");
        let cuda = &report.cuda_files[0];
        assert_eq!(cuda.source, dir.join("cuda/util.cu"));
        assert!(!cuda.compiled && cuda.object.is_none(), "{report}");
        assert_eq!(report.nvcc_runs, 0);
        // The (empty) index exists, so `include_kernels!` works, and so does `choreo.h`.
        let index = std::fs::read_to_string(&report.index_rs).unwrap();
        assert!(!index.contains("pub mod"), "{index}");
        assert!(dir.join("out/choreo/k/choreo.h").is_file());
        // Cargo watches the file, the glob's folder and the local header it includes.
        let printed = &cargo.printed;
        for watched in [dir.join("cuda/util.cu"), dir.join("cuda"), dir.join("cuda/util.h")] {
            let line = format!("rerun-if-changed={}", watched.display());
            assert!(printed.contains(&line), "{line} not in {printed:?}");
        }
        let warning = printed.iter().find(|line| line.starts_with("warning=")).unwrap();
        assert!(
            warning.contains(
                "the hand-written .cu files of `k` are not compiled for CUDA (CHOREO_NVCC"
            ),
            "{warning}"
        );
        assert!(report.to_string().contains(&format!(
            "cuda_file={} compiled=false\n",
            dir.join("cuda/util.cu").display()
        )));
    }

    /// Without nvcc the `.co` kernels are compiled for the CPU (by the host C++ compiler
    /// that `cc` finds): the library exists, the wrappers call the CPU entries only, and a
    /// warning says so.
    #[test]
    fn without_nvcc_the_kernels_are_built_for_the_cpu_only() {
        let dir = temp("cpu-only");
        std::fs::create_dir_all(dir.join("k")).unwrap();
        std::fs::write(
            dir.join("k/scale.co"),
            "__co__ void scale(global f32 [N] x, f32 k) {\n  parallel p by N : block { x.at(p) = x.at(p) * k; }\n}\n",
        )
        .unwrap();
        let host = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
        let skip = Env::fixed([
            ("CHOREO_NVCC", "skip"),
            ("TARGET", host.as_str()),
            ("HOST", host.as_str()),
        ]);
        let mut cargo = Cargo::new(true);
        let report = Builder::new()
            .files(format!("{}/k/*.co", dir.display()))
            .out_dir(dir.join("out"))
            .build_in(&skip, &mut cargo, "k")
            .unwrap();
        assert!(report.stub.is_some(), "{report}");
        let library = report.library.as_ref().expect("a CPU library");
        assert!(library.path.is_file(), "{report}");
        assert_eq!(report.cpu_runs, 1, "{report}");
        let file = &report.files[0];
        assert!(file.cpu_object.as_ref().is_some_and(|o| o.is_file()), "{report}");
        assert!(file.cpu_compiled, "{report}");
        // Nothing to clash with: the object is linked as compiled, its symbols not renamed.
        let object = std::fs::read(file.cpu_object.as_ref().unwrap()).unwrap();
        if let Some(symbols) = elf::defined_symbols(&object) {
            assert!(symbols.iter().all(|s| !s.name.contains(".choreo_cpu_")), "{symbols:?}");
            assert!(symbols.iter().any(|s| s.hidden), "compiled -fvisibility=hidden");
        }
        let rs = std::fs::read_to_string(&file.rs).unwrap();
        assert!(rs.contains("fn __choreo_cpu_rs_"), "{rs}");
        assert!(!rs.contains("fn __choreo_rs_"), "{rs}");
        assert!(rs.contains("for_backends(&[::choreo::Backend::Cpu]"), "{rs}");
        let warning = cargo.printed.iter().find(|line| line.starts_with("warning=")).unwrap();
        assert!(warning.contains("built for the CPU only"), "{warning}");
        // A rebuild with nothing changed runs the C++ compiler zero times.
        let again = Builder::new()
            .files(format!("{}/k/*.co", dir.display()))
            .out_dir(dir.join("out"))
            .build_in(&skip, &mut Cargo::new(false), "k")
            .unwrap();
        assert_eq!(again.cpu_runs, 0, "{again}");
        assert!(!again.files[0].cpu_compiled, "{again}");
    }

    /// `CHOREO_NVCC=require`: a build that could not compile for CUDA fails, saying why,
    /// instead of building for the CPU only.
    #[test]
    fn choreo_nvcc_require_makes_a_cpu_only_build_an_error() {
        let dir = temp("require");
        std::fs::create_dir_all(dir.join("k")).unwrap();
        std::fs::write(dir.join("k/a.co"), "__co__ void a(global f32 [4] x) {}\n").unwrap();
        let env = Env::fixed([("CHOREO_NVCC", "require"), ("CHOREO_SYS_NO_CUDART", "1")]);
        let error = Builder::new()
            .files(format!("{}/k/*.co", dir.display()))
            .out_dir(dir.join("out"))
            .build_in(&env, &mut Cargo::new(false), "k")
            .unwrap_err();
        assert!(matches!(error, Error::NvccRequired { .. }), "{error}");
        assert!(error.to_string().contains("CHOREO_SYS_NO_CUDART is set"), "{error}");
    }

    /// choreo-sys links only CUDA 12.4 to 13.x: kernels built with another toolkit would have no
    /// runtime to link against, so the build is a stub build whose warning names the toolkit.
    #[test]
    fn a_toolkit_that_choreo_sys_does_not_link_means_stub_mode_with_a_warning() {
        let dir = temp("cuda12");
        let root = dir.join("cuda-12.2");
        for sub in ["bin", "include", "lib64", "cuda"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("bin/nvcc"), "#!/bin/sh\nexit 1\n").unwrap();
        std::fs::write(root.join("include/cuda_runtime_api.h"), "#define CUDART_VERSION 12020\n")
            .unwrap();
        std::fs::write(root.join("lib64/libcudart_static.a"), "!<arch>\n").unwrap();
        std::fs::write(root.join("cuda/k.cu"), "extern \"C\" int k() { return 1; }\n").unwrap();
        let env = Env::fixed([("CUDA_HOME", root.to_str().unwrap())]);
        let mut cargo = Cargo::new(true);
        let report = Builder::new()
            .cuda_file(root.join("cuda/k.cu"))
            .out_dir(dir.join("out"))
            .build_in(&env, &mut cargo, "k")
            .unwrap();
        assert!(report.library.is_none() && report.toolkit.is_none(), "{report}");
        assert!(
            matches!(&report.stub, Some(StubReason::UnsupportedVersion { version: 12020, .. })),
            "{report}"
        );
        let warning = cargo.printed.iter().find(|line| line.starts_with("warning=")).unwrap();
        assert!(
            warning.contains("is CUDA 12.2, but only CUDA 12.4 to 13.x is supported"),
            "{warning}"
        );
        assert!(warning.contains("stub build") && warning.contains("not compiled"), "{warning}");
        assert!(!cargo.printed.iter().any(|line| line.starts_with("rustc-link")), "{warning}");
    }

    /// `NVCC` names a wrapper outside any toolkit and `CUDA_HOME` is unset: the toolkit found
    /// on `PATH` gives the root, and a warning says which toolkit that is.
    #[test]
    fn a_wrapper_without_cuda_home_warns_which_toolkit_it_uses() {
        let dir = temp("wrapper-root");
        let root = dir.join("cuda-13.0");
        for sub in ["bin", "include", "lib64", "cuda"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("bin/nvcc"), "#!/bin/sh\nexit 1\n").unwrap();
        std::fs::write(root.join("include/cuda_runtime_api.h"), "#define CUDART_VERSION 13000\n")
            .unwrap();
        std::fs::write(root.join("lib64/libcudart_static.a"), "!<arch>\n").unwrap();
        std::fs::write(root.join("cuda/k.cu"), "extern \"C\" int k() { return 1; }\n").unwrap();
        let wrapper = dir.join("wrappers/nvcc-wrapper");
        std::fs::create_dir_all(wrapper.parent().unwrap()).unwrap();
        std::fs::write(&wrapper, "#!/bin/sh\nexit 1\n").unwrap();
        let bin = root.join("bin");
        let env =
            Env::fixed([("NVCC", wrapper.to_str().unwrap()), ("PATH", bin.to_str().unwrap())]);
        let mut cargo = Cargo::new(true);
        // The fake nvcc cannot compile: only the warning before it matters.
        let _ = Builder::new()
            .cuda_file(root.join("cuda/k.cu"))
            .out_dir(dir.join("out"))
            .build_in(&env, &mut cargo, "k");
        let warning = cargo.printed.iter().find(|line| line.starts_with("warning=")).unwrap();
        assert!(warning.contains("outside any CUDA toolkit"), "{warning}");
        let root = std::fs::canonicalize(&root).unwrap();
        assert!(
            warning.contains(&format!("CUDA 13.0 toolkit at {} (PATH", root.display())),
            "{warning}"
        );
        assert!(warning.contains("set CUDA_HOME"), "{warning}");
    }

    #[test]
    fn missing_out_dir_is_a_clear_error() {
        let mut cargo = Cargo::new(false);
        let error = Builder::new().build_in(&Env::fixed([]), &mut cargo, "k").unwrap_err();
        assert!(matches!(error, Error::MissingEnv { var: "OUT_DIR" }), "{error}");
    }
}
