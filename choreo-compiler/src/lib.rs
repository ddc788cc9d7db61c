//! The Choreo translator: `.co` source → checked program → lowered plan → CUDA C++ (`.cu`) and
//! Rust wrappers (`.rs`), as one pure call: [`compile::compile`].
//!
//! The pipeline is one module per stage, each taking one type and giving one type (the
//! repository's `ARCHITECTURE.md` has the map and its invariants):
//! `source` → `preprocess` → `lexer` → `parser` (→ `ast`) → `sema` (→ `hir`) → `lower`
//! (→ `lower::Plan`, for a [`target::Target`]) → `emit::cuda` / `emit::rust`.
//!
//! The library does no I/O and spawns nothing: [`compile::compile`] takes source text and
//! returns the outputs and diagnostics. The `choreoc` binary (`src/main.rs` and its `src/cli/`
//! modules) owns the command line, the files and nvcc; build scripts use `choreo-build`.

pub mod ast;
pub mod compile;
pub mod diagnostics;
pub mod dump;
pub mod emit;
pub mod explain;
pub mod frontend;
pub mod hir;
pub mod lexer;
pub mod lower;
pub mod parser;
pub mod preprocess;
/// The runtime sources that generated code needs, as text: `choreo.h` (CUDA and CPU), and for
/// the CPU backend `choreo_cpu.h` and `choreo_cpu_runtime.cpp`.
pub mod runtime {
    pub use crate::compile::{CHOREO_CPU_H, CHOREO_CPU_RUNTIME_CPP, CHOREO_H};
}
pub mod sema;
pub mod source;
pub mod target;
pub mod token;
