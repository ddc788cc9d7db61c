//! CPU emission: checked program + lowered plan → one `.cpp` file for the host's C++ compiler.
//!
//! The CPU backend renders the text of the CUDA emitter in its CPU [`Dialect`]: host code,
//! kernels, launches and the `extern "C"` entry are the same C++, compiled against
//! `choreo_cpu.h` (included by `choreo.h` when `__CHOREO_CPU__` is defined), which supplies the
//! CUDA types, qualifiers, intrinsics and runtime API on top of the CPU runtime
//! (`choreo_cpu_runtime.cpp`: streams as worker threads, blocks on a thread pool, the threads
//! of a block as a loop or, in kernels whose threads synchronise, as fibres). Sharing the
//! renderer keeps the two backends from drifting apart: a construct renders once, and the few
//! places where CUDA syntax has no C++ equivalent ask the dialect (see [`Dialect`]).

use super::OutputMode;
use super::cuda::{CudaOptions, Dialect, emit_cuda};
use crate::diagnostics::Diagnostics;
use crate::hir;
use crate::lower::Plan;
use crate::source::{FileId, SourceDb};
use crate::target::Arch;

/// What the CPU emitter needs to know besides the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuOptions {
    /// Library (rename `main`) or standalone program.
    pub mode: OutputMode,
    /// Whether to emit the runtime checks of spec §19.2.
    pub runtime_checks: bool,
}

/// Writes the `.cpp` text of a checked file lowered for [`crate::target::Target::Cpu`].
pub fn emit_cpu(
    db: &SourceDb,
    file: FileId,
    program: &hir::Program,
    plan: &Plan,
    options: &CpuOptions,
    diags: &mut Diagnostics,
) -> String {
    let options = CudaOptions {
        // Not read in the CPU dialect beyond what `Target::Cpu` already decided in lowering.
        arch: Arch::default(),
        mode: options.mode,
        runtime_checks: options.runtime_checks,
        dialect: Dialect::Cpu,
    };
    emit_cuda(db, file, program, plan, &options, diags)
}
