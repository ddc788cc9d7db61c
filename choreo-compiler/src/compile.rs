//! The top-level compile API: preprocess → parse → sema → lower → emit, as one call, plus
//! nvcc discovery and the `choreoc emit-cu` / `choreoc build` subcommands.
//!
//! ```no_run
//! use choreo_compiler::compile::{compile, CompileOptions};
//! use choreo_compiler::source::SourceDb;
//!
//! let mut db = SourceDb::new();
//! let file = db.add("kernels/scale.co", std::fs::read_to_string("kernels/scale.co").unwrap());
//! let out = compile(&db, file, &CompileOptions::default());
//! match out.cu {
//!     Some(cu) => std::fs::write("scale.cu", cu).unwrap(),
//!     None => eprint!("{}", choreo_compiler::diagnostics::render_human(&db, &out.diagnostics)),
//! }
//! ```

use crate::diagnostics::{Diagnostic, Diagnostics, Severity};
use crate::emit::cuda::{CudaOptions, emit_cuda};
use crate::emit::rust::{RustOptions, emit_rust};
use crate::frontend::parse_file;
use crate::hir;
use crate::lower::{Plan, lower};
use crate::preprocess::PreprocessOptions;
use crate::sema;
use crate::source::{FileId, SourceDb, Span};
use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

pub use crate::emit::OutputMode;
pub use crate::target::{Arch, Target, UnknownArch};

/// The runtime header that generated code includes, as shipped by the `choreo` crate. The CLI
/// writes it next to the `.cu` files it compiles, so it works from any directory.
pub const CHOREO_H: &str = include_str!("../../choreo/include/choreo.h");

/// Options of one compilation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileOptions {
    /// `-D` definitions for the Choreo preprocessor: `(name, value)`; `None` means `1`.
    pub defines: Vec<(String, Option<String>)>,
    /// What the code is for (default: CUDA `sm_90a`).
    pub target: Target,
    /// Library (a host `main` is renamed) or standalone program.
    pub mode: OutputMode,
    /// Whether the generated code runs the runtime checks of spec §19.2 (default true).
    pub runtime_checks: bool,
    /// Whether the Rust wrappers are stubs that return `Err(choreo::Error::NotBuilt)` (a build
    /// that compiles no kernels) instead of calling the `extern "C"` entries (default false).
    pub stub_wrappers: bool,
}

impl Default for CompileOptions {
    fn default() -> CompileOptions {
        CompileOptions {
            defines: Vec::new(),
            target: Target::default(),
            mode: OutputMode::Library,
            runtime_checks: true,
            stub_wrappers: false,
        }
    }
}

/// The result of [`compile`]: every output of the file.
#[derive(Debug, Clone)]
pub struct Compilation {
    /// The `.cu` text (CUDA targets); `None` exactly when an error was reported.
    pub cu: Option<String>,
    /// The Rust wrapper module (items only; see [`crate::emit::rust`]); `None` exactly when an
    /// error was reported.
    pub rs: Option<String>,
    /// The checked program, when the file got as far as semantic analysis (it may contain
    /// error nodes when `diagnostics` has errors).
    pub program: Option<hir::Program>,
    /// The lowered plan (kernels, launches, streams, memory, entry ABI), when semantic analysis
    /// reported no error.
    pub plan: Option<Plan>,
    /// Every diagnostic, errors and warnings, in the order the stages reported them.
    pub diagnostics: Vec<Diagnostic>,
}

impl Compilation {
    /// Whether an error was reported.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(|d| d.severity == Severity::Error)
    }

    fn failed(
        program: Option<hir::Program>,
        plan: Option<Plan>,
        diags: Diagnostics,
    ) -> Compilation {
        Compilation { cu: None, rs: None, program, plan, diagnostics: diags.into_vec() }
    }
}

/// Translates one `.co` file of `db`: the device code for `opts.target` and the Rust wrappers.
/// Never panics on any input; the output is byte-identical for identical input, options and
/// file name. Does no I/O and spawns no process.
///
/// Semantic analysis runs only when preprocessing and parsing reported no error (it would
/// mostly report consequences of the syntax errors), and code generation only when semantic
/// analysis and lowering reported none.
pub fn compile(db: &SourceDb, file: FileId, opts: &CompileOptions) -> Compilation {
    let mut diags = Diagnostics::new();
    let pre = PreprocessOptions { defines: opts.defines.clone() };
    let ast = parse_file(db, file, &pre, &mut diags);
    if diags.has_errors() {
        return Compilation::failed(None, None, diags);
    }
    let program = sema::check(db, &ast, opts.target, &mut diags);
    if diags.has_errors() {
        return Compilation::failed(Some(program), None, diags);
    }
    let plan = lower(&program, opts.target, &mut diags);
    if diags.has_errors() {
        return Compilation::failed(Some(program), Some(plan), diags);
    }
    let cu = match opts.target {
        Target::Cuda(arch) => {
            let options =
                CudaOptions { arch, mode: opts.mode, runtime_checks: opts.runtime_checks };
            emit_cuda(db, file, &program, &plan, &options, &mut diags)
        }
        Target::Cpu => {
            let span =
                program.functions().next().map_or(Span { file, start: 0, end: 0 }, |f| f.span);
            diags.push(
                Diagnostic::error("E0806", span, "the CPU target has no code generator yet")
                    .with_label("cannot be compiled for the CPU")
                    .with_help("compile for a CUDA architecture (`--arch sm_90a`)"),
            );
            String::new()
        }
    };
    if diags.has_errors() {
        return Compilation::failed(Some(program), Some(plan), diags);
    }
    let rust_options = RustOptions {
        stub: opts.stub_wrappers,
        module_doc_source: db.file(file).name().to_string(),
    };
    let rs = emit_rust(&program, &plan, &rust_options);
    Compilation {
        cu: Some(cu),
        rs: Some(rs),
        program: Some(program),
        plan: Some(plan),
        diagnostics: diags.into_vec(),
    }
}

// ---------------------------------------------------------------------------------------------
// nvcc
// ---------------------------------------------------------------------------------------------

/// Where [`find_nvcc`] looked, for the message when nothing was found.
pub const NVCC_SEARCH_ORDER: &str = "--nvcc PATH, $NVCC, $CUDA_HOME/bin/nvcc, $CUDA_PATH/bin/nvcc, \
    nvcc on PATH, ~/.cache/choreo/cuda-13.0/nvidia/cu13/bin/nvcc (installed by ci/install-cuda)";

/// Finds nvcc: `explicit` (`--nvcc`), `$NVCC`, `$CUDA_HOME/bin/nvcc`, `$CUDA_PATH/bin/nvcc`,
/// `nvcc` on `PATH`, then the toolkit that `ci/install-cuda` caches in
/// `~/.cache/choreo/cuda-13.0/nvidia/cu13` (honouring `$CHOREO_CUDA_CACHE` and
/// `$XDG_CACHE_HOME` like that script). An explicit path or `$NVCC` that does not exist is an
/// error rather than a reason to look further.
pub fn find_nvcc(explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = explicit {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(format!("--nvcc {}: no such file", p.display()))
        };
    }
    if let Some(p) = std::env::var_os("NVCC").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("NVCC={}: no such file", p.display()))
        };
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            let p = Path::new(&root).join("bin").join("nvcc");
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join("nvcc");
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    let cache = std::env::var_os("CHOREO_CUDA_CACHE").map(PathBuf::from).or_else(|| {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
        Some(base.join("choreo").join("cuda-13.0"))
    });
    if let Some(cache) = cache {
        let p = cache.join("nvidia").join("cu13").join("bin").join("nvcc");
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(format!(
        "nvcc (the CUDA compiler) was not found; looked at: {NVCC_SEARCH_ORDER}. \
         Install the CUDA toolkit or run ci/install-cuda"
    ))
}

/// The toolkit root of an nvcc path (`<root>/bin/nvcc` → `<root>`).
fn toolkit_root(nvcc: &Path) -> Option<PathBuf> {
    let bin = nvcc.parent()?;
    Some(bin.parent().unwrap_or(bin).to_path_buf())
}

/// The nvcc arguments for compiling `cu` with `choreo.h` from `include_dir`, without the
/// output arguments: `-std=c++17 -O2 -gencode arch=…,code=… -I include_dir`, plus `-L` for a
/// toolkit whose static runtime is in `lib/` (pip-wheel layout), which nvcc does not search.
pub fn nvcc_base_args(nvcc: &Path, arch: Arch, include_dir: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "-std=c++17".into(),
        "-O2".into(),
        "-gencode".into(),
        arch.gencode().into(),
        "-I".into(),
        include_dir.as_os_str().to_owned(),
    ];
    if let Some(root) = toolkit_root(nvcc) {
        let lib = root.join("lib");
        if lib.join("libcudart_static.a").is_file() && !root.join("lib64").exists() {
            let mut flag = OsString::from("-L");
            flag.push(lib.as_os_str());
            args.push(flag);
        }
    }
    args
}

// ---------------------------------------------------------------------------------------------
// CLI subcommands (wired into main.rs)
// ---------------------------------------------------------------------------------------------

/// Options of `choreoc emit-cu` and `choreoc build`.
#[derive(Debug, Clone, Default)]
struct CliOptions {
    file: Option<PathBuf>,
    output: Option<PathBuf>,
    defines: Vec<(String, Option<String>)>,
    arch: Option<Arch>,
    nvcc: Option<PathBuf>,
    no_runtime_checks: bool,
    standalone: bool,
    extra: Vec<OsString>,
}

const EMIT_CU_USAGE: &str = "Usage: choreoc emit-cu FILE.co [-D NAME[=VALUE]]... [--arch sm_90a] \
     [--standalone] [--no-runtime-checks] [-o OUT.cu]";
const BUILD_USAGE: &str = "Usage: choreoc build FILE.co -o EXE [--arch sm_90a] [-D NAME[=VALUE]]... \
     [--nvcc PATH] [--no-runtime-checks] [-- EXTRA NVCC FLAGS...]";

/// Help text of `choreoc emit-cu`.
pub const EMIT_CU_HELP: &str = "choreoc emit-cu: translate one .co file and print the .cu\n\n\
Usage: choreoc emit-cu FILE.co [OPTIONS]\n\nOptions:\n\
  -D NAME[=VALUE]        predefine a macro for the Choreo preprocessor (VALUE defaults to 1)\n\
  --arch ARCH            target architecture: sm_70 sm_75 sm_80 sm_86 sm_89 sm_90 sm_90a sm_100\n\
                         sm_120 (default sm_90a)\n\
  --standalone           keep the host main() (a whole program; default: library mode, which\n\
                         renames a host main() to __choreo_unused_main)\n\
  --no-runtime-checks    leave out the entry and launch checks of the generated code\n\
  -o OUT.cu              write the .cu to OUT.cu instead of stdout\n\
  -h, --help             print this help\n\n\
Exit status: 0 translated (warnings may be printed), 1 errors reported, 2 usage or I/O error.\n";

/// Help text of `choreoc build`.
pub const BUILD_HELP: &str = "choreoc build: translate one .co file as a whole program and compile it with nvcc\n\n\
Usage: choreoc build FILE.co -o EXE [OPTIONS] [-- EXTRA NVCC FLAGS...]\n\nOptions:\n\
  -o EXE                 the executable to write (required)\n\
  -D NAME[=VALUE]        predefine a macro for the Choreo preprocessor (VALUE defaults to 1)\n\
  --arch ARCH            target architecture (default sm_90a)\n\
  --nvcc PATH            the nvcc to use (default: $NVCC, $CUDA_HOME, $CUDA_PATH, PATH, the\n\
                         ci/install-cuda cache)\n\
  --no-runtime-checks    leave out the entry and launch checks of the generated code\n\
  -h, --help             print this help\n\n\
The .cu and choreo.h are written to a temporary directory, which is removed on success.\n\
Exit status: 0 built, 1 errors in the .co file or nvcc failed, 2 usage or I/O error.\n";

fn parse_cli(args: &[OsString], build: bool) -> Result<CliOptions, String> {
    let mut o = CliOptions::default();
    let mut i = 0;
    let value = |args: &[OsString], i: &mut usize, flag: &str| -> Result<OsString, String> {
        let v = args.get(*i).cloned().ok_or_else(|| format!("'{flag}' needs a value"))?;
        *i += 1;
        Ok(v)
    };
    while let Some(arg) = args.get(i) {
        i += 1;
        let text = arg.to_string_lossy().to_string();
        if text == "--" {
            if !build {
                return Err("'--' (extra nvcc flags) is only accepted by 'choreoc build'".into());
            }
            o.extra.extend(args[i..].iter().cloned());
            break;
        } else if text == "-o" {
            o.output = Some(PathBuf::from(value(args, &mut i, "-o")?));
        } else if let Some(rest) = text.strip_prefix("-D") {
            let def = if rest.is_empty() {
                value(args, &mut i, "-D")?.to_string_lossy().to_string()
            } else {
                rest.to_string()
            };
            let (name, v) = match def.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (def.clone(), None),
            };
            if name.trim().is_empty() {
                return Err(format!("invalid macro definition '-D{def}': the name is missing"));
            }
            o.defines.push((name, v));
        } else if text == "--arch" || text.starts_with("--arch=") {
            let v = match text.strip_prefix("--arch=") {
                Some(v) => v.to_string(),
                None => value(args, &mut i, "--arch")?.to_string_lossy().to_string(),
            };
            o.arch = Some(v.parse::<Arch>().map_err(|e| e.to_string())?);
        } else if build && (text == "--nvcc" || text.starts_with("--nvcc=")) {
            o.nvcc = Some(match text.strip_prefix("--nvcc=") {
                Some(v) => PathBuf::from(v),
                None => PathBuf::from(value(args, &mut i, "--nvcc")?),
            });
        } else if text == "--no-runtime-checks" {
            o.no_runtime_checks = true;
        } else if !build && text == "--standalone" {
            o.standalone = true;
        } else if text.starts_with('-') && text != "-" {
            return Err(format!("unknown option '{text}'"));
        } else if o.file.is_some() {
            return Err("only one input file is accepted".into());
        } else {
            o.file = Some(PathBuf::from(arg));
        }
    }
    if o.file.is_none() {
        return Err("no input file given".into());
    }
    if build && o.output.is_none() {
        return Err("'-o EXE' is required".into());
    }
    Ok(o)
}

fn usage_error(message: &str, usage: &str) -> i32 {
    eprintln!("error: {message}\n\n{usage}");
    2
}

/// Reads and translates the file of `o`; prints diagnostics to stderr. `Err(status)` when it
/// cannot continue.
fn translate_for_cli(o: &CliOptions, mode: OutputMode) -> Result<String, i32> {
    let Some(path) = o.file.as_ref() else { return Err(2) };
    let text = match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => {
                eprintln!(
                    "error: cannot read '{}': is not valid UTF-8 (invalid byte at offset {})",
                    path.display(),
                    e.utf8_error().valid_up_to()
                );
                return Err(2);
            }
        },
        Err(e) => {
            eprintln!("error: cannot read '{}': {e}", path.display());
            return Err(2);
        }
    };
    let mut db = SourceDb::new();
    let file = db.add(path.display().to_string(), text);
    let opts = CompileOptions {
        defines: o.defines.clone(),
        target: Target::Cuda(o.arch.unwrap_or_default()),
        mode,
        runtime_checks: !o.no_runtime_checks,
        stub_wrappers: false,
    };
    let result = compile(&db, file, &opts);
    if !result.diagnostics.is_empty() {
        let rendered = crate::diagnostics::render_human(&db, &result.diagnostics);
        let _ = std::io::stderr().write_all(rendered.as_bytes());
    }
    match result.cu {
        Some(cu) => Ok(cu),
        None => {
            let errors = result.diagnostics.iter().filter(|d| d.is_error()).count();
            let plural = if errors == 1 { "" } else { "s" };
            eprintln!("error: {errors} error{plural} reported in {}", path.display());
            Err(1)
        }
    }
}

/// `choreoc emit-cu FILE.co [-D…] [--arch sm_90a] [--standalone] [--no-runtime-checks] [-o
/// OUT.cu]`: prints the `.cu` (library mode unless `--standalone`) on stdout. Returns the exit status (0, 1 errors, 2 usage/I/O).
pub fn cli_emit_cu(args: &[OsString]) -> i32 {
    if args.iter().take_while(|a| *a != "--").any(|a| a == "-h" || a == "--help") {
        print!("{EMIT_CU_HELP}");
        return 0;
    }
    let o = match parse_cli(args, false) {
        Ok(o) => o,
        Err(e) => return usage_error(&e, EMIT_CU_USAGE),
    };
    let mode = if o.standalone { OutputMode::Standalone } else { OutputMode::Library };
    let cu = match translate_for_cli(&o, mode) {
        Ok(cu) => cu,
        Err(status) => return status,
    };
    match &o.output {
        Some(out) => {
            if let Err(e) = std::fs::write(out, cu) {
                eprintln!("error: cannot write '{}': {e}", out.display());
                return 2;
            }
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(cu.as_bytes());
            let _ = stdout.flush();
        }
    }
    0
}

/// `choreoc build FILE.co -o EXE [--arch sm_90a] [-D…] [--nvcc PATH] [-- extra nvcc flags]`:
/// translates in standalone mode (keeping `main`), writes the `.cu` and `choreo.h` into a fresh
/// temporary directory and runs `nvcc -std=c++17 -O2 -gencode arch=compute_XX,code=sm_XX -I
/// <dir> -cudart static FILE.cu -o EXE <extra>`. Returns the exit status.
pub fn cli_build(args: &[OsString]) -> i32 {
    if args.iter().take_while(|a| *a != "--").any(|a| a == "-h" || a == "--help") {
        print!("{BUILD_HELP}");
        return 0;
    }
    let o = match parse_cli(args, true) {
        Ok(o) => o,
        Err(e) => return usage_error(&e, BUILD_USAGE),
    };
    let nvcc = match find_nvcc(o.nvcc.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let cu = match translate_for_cli(&o, OutputMode::Standalone) {
        Ok(cu) => cu,
        Err(status) => return status,
    };
    let (Some(input), Some(output)) = (o.file.as_ref(), o.output.as_ref()) else { return 2 };
    let dir = match make_temp_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: cannot create a temporary directory: {e}");
            return 2;
        }
    };
    let stem = input.file_stem().map_or_else(|| "main".into(), |s| s.to_string_lossy().to_string());
    let cu_path = dir.join(format!("{stem}.cu"));
    if let Err(e) =
        std::fs::write(&cu_path, &cu).and_then(|()| std::fs::write(dir.join("choreo.h"), CHOREO_H))
    {
        eprintln!("error: cannot write into '{}': {e}", dir.display());
        let _ = std::fs::remove_dir_all(&dir);
        return 2;
    }
    let mut cmd = Command::new(&nvcc);
    cmd.args(nvcc_base_args(&nvcc, o.arch.unwrap_or_default(), &dir));
    cmd.arg("-cudart").arg("static").arg(&cu_path).arg("-o").arg(output).args(&o.extra);
    match cmd.status() {
        Ok(s) if s.success() => {
            let _ = std::fs::remove_dir_all(&dir);
            0
        }
        Ok(s) => {
            eprintln!(
                "error: nvcc failed ({s}); the generated sources are kept in {}",
                dir.display()
            );
            1
        }
        Err(e) => {
            eprintln!("error: cannot run '{}': {e}", nvcc.display());
            let _ = std::fs::remove_dir_all(&dir);
            2
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn cli_options_parse() {
        let o = parse_cli(&args(&["a.co", "-DX=2", "-D", "Y", "--arch", "sm_80", "-o", "e"]), true)
            .unwrap();
        assert_eq!(o.file, Some(PathBuf::from("a.co")));
        assert_eq!(o.defines, vec![("X".into(), Some("2".into())), ("Y".into(), None)]);
        assert_eq!(o.arch.map(|a| a.to_string()).as_deref(), Some("sm_80"));
        let o = parse_cli(&args(&["a.co", "-o", "e", "--", "-lineinfo", "-G"]), true).unwrap();
        assert_eq!(o.extra, args(&["-lineinfo", "-G"]));
        assert!(parse_cli(&args(&["a.co"]), true).is_err());
        assert!(parse_cli(&args(&["a.co", "--arch", "sm_1"]), false).is_err());
        assert!(parse_cli(&args(&["a.co", "b.co"]), false).is_err());
        assert!(parse_cli(&args(&["a.co", "--", "-G"]), false).is_err());
        assert!(parse_cli(&args(&["a.co", "--nvcc", "x"]), false).is_err());
    }

    #[test]
    fn explicit_nvcc_must_exist() {
        assert!(find_nvcc(Some(Path::new("/nonexistent/nvcc"))).is_err());
    }
}
