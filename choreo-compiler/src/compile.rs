//! The top-level compile API: preprocess → parse → sema → lower → emit, as one call. No I/O,
//! no processes: finding nvcc and running it belong to the `choreoc` binary and `choreo-build`.
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
use crate::emit::cpu::{CpuOptions, emit_cpu};
use crate::emit::cuda::{CudaOptions, Dialect, emit_cuda};
use crate::emit::rust::{RustOptions, emit_rust};
use crate::frontend::parse_file;
use crate::hir;
pub use crate::lower::SymbolScope;
use crate::lower::{LowerOptions, Plan, lower};
use crate::preprocess::PreprocessOptions;
use crate::sema;
use crate::source::{FileId, SourceDb};

pub use crate::emit::OutputMode;
pub use crate::target::{Arch, Target, UnknownArch};

/// The runtime header that generated code includes (`include/choreo.h` of this crate, shipped
/// in its package). `choreoc build` and `choreo-build` write it next to the `.cu` files they
/// compile, so it works from any directory.
pub const CHOREO_H: &str = include_str!("../include/choreo.h");

/// The CPU backend's runtime header (`include/choreo_cpu.h`): the CUDA surface for host C++
/// compilers and the C API of the CPU runtime; `choreo.h` includes it under `__CHOREO_CPU__`.
pub const CHOREO_CPU_H: &str = include_str!("../include/choreo_cpu.h");

/// The CPU runtime (`include/choreo_cpu_runtime.cpp`): streams, events, memory, the block pool
/// and fibres behind the C API of `choreo_cpu.h`; compiled once per program that runs kernels
/// on the CPU.
pub const CHOREO_CPU_RUNTIME_CPP: &str = include_str!("../include/choreo_cpu_runtime.cpp");

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
    /// Whether the Rust wrappers call the CUDA entries (the kernels are compiled by nvcc;
    /// default true).
    pub cuda_wrappers: bool,
    /// Whether the Rust wrappers call the CPU entries (the kernels are compiled for the CPU
    /// too; default false). With neither, the wrappers are stubs that return
    /// `Err(choreo::Error::NotBuilt)`.
    pub cpu_wrappers: bool,
    /// Where the file's external symbols live ([`SymbolScope`]); `None`: the file's stem.
    /// `choreo-build` passes (package, version, library, module), so files and crates linked
    /// together never define the same symbol.
    pub symbol_scope: Option<SymbolScope>,
    /// Whether element accesses that are not proven in bounds are checked at run time
    /// (default true). Without the checks, the Rust wrapper of a function with such accesses is
    /// an `unsafe fn`.
    pub bounds_checks: bool,
}

impl Default for CompileOptions {
    fn default() -> CompileOptions {
        CompileOptions {
            defines: Vec::new(),
            target: Target::default(),
            mode: OutputMode::Library,
            runtime_checks: true,
            cuda_wrappers: true,
            cpu_wrappers: false,
            symbol_scope: None,
            bounds_checks: true,
        }
    }
}

/// The result of [`compile`]: every output of the file.
#[derive(Debug, Clone)]
pub struct Compilation {
    /// The `.cu` text for a CUDA target; `None` when an error was reported or the target is
    /// the CPU.
    pub cu: Option<String>,
    /// The `.cpp` text for the CPU target (C++17 for the host compiler with the CPU runtime,
    /// [`CHOREO_CPU_H`]); `None` when an error was reported or the target is CUDA.
    pub cpp: Option<String>,
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
        Compilation { cu: None, cpp: None, rs: None, program, plan, diagnostics: diags.into_vec() }
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
    let after_parse = diags.len();
    let program = sema::check(db, &ast, opts.target, &mut diags);
    diags.note_macro_expansions(after_parse, &ast.macro_expansions);
    if diags.has_errors() {
        return Compilation::failed(Some(program), None, diags);
    }
    let scope = match &opts.symbol_scope {
        Some(scope) => scope.clone(),
        None => SymbolScope::for_file_name(db.file(file).name()),
    };
    let lowering = LowerOptions {
        target: opts.target,
        scope,
        bounds_checks: opts.bounds_checks,
        runtime_checks: opts.runtime_checks,
    };
    let after_sema = diags.len();
    let plan = lower(&program, &lowering, &mut diags);
    diags.note_macro_expansions(after_sema, &ast.macro_expansions);
    if diags.has_errors() {
        return Compilation::failed(Some(program), Some(plan), diags);
    }
    let (cu, cpp) = match opts.target {
        Target::Cuda(arch) => {
            let options = CudaOptions {
                arch,
                mode: opts.mode,
                runtime_checks: opts.runtime_checks,
                dialect: Dialect::Cuda,
            };
            (Some(emit_cuda(db, file, &program, &plan, &options, &mut diags)), None)
        }
        Target::Cpu => {
            let options = CpuOptions { mode: opts.mode, runtime_checks: opts.runtime_checks };
            (None, Some(emit_cpu(db, file, &program, &plan, &options, &mut diags)))
        }
    };
    if diags.has_errors() {
        return Compilation::failed(Some(program), Some(plan), diags);
    }
    let rust_options = RustOptions {
        cuda: opts.cuda_wrappers,
        cpu: opts.cpu_wrappers,
        module_doc_source: db.file(file).name().to_string(),
    };
    let rs = emit_rust(db, &program, &plan, &rust_options);
    Compilation {
        cu,
        cpp,
        rs: Some(rs),
        program: Some(program),
        plan: Some(plan),
        diagnostics: diags.into_vec(),
    }
}
