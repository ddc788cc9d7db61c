//! The Choreo translator: `.co` source → checked program → CUDA C++ (`.cu`) and Rust wrappers.
//!
//! The pipeline is one module per stage (see `shared/design.md` §2):
//! `source` → `preprocess` → `lexer` → `parser` (→ `ast`) → `sema` → `lower` → `emit`.
//!
//! The library does no I/O and spawns nothing: [`compile::compile`] takes source text and
//! returns the outputs and diagnostics. The `choreoc` binary (`src/main.rs` and its `src/cli/`
//! modules) owns the command line, the files and nvcc; build scripts use `choreo-build`.

pub mod ast;
pub mod compile;
pub mod diagnostics;
pub mod dump;
pub mod emit;
pub mod frontend;
pub mod hir;
pub mod lexer;
pub mod lower;
pub mod parser;
pub mod preprocess;
pub mod sema;
pub mod source;
pub mod target;
pub mod token;
