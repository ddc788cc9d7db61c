//! The Choreo translator: `.co` source → checked program → CUDA C++ (`.cu`) and Rust wrappers.
//!
//! The pipeline is one module per stage (see `shared/design.md` §2):
//! `source` → `preprocess` → `lexer` → `parser` (→ `ast`) → `sema` → `lower` → `emit`.

pub mod diagnostics;
pub mod preprocess;
pub mod source;
pub mod hir;
pub mod ast;
pub mod lexer;
pub mod token;
pub mod parser;
pub mod frontend;
pub mod dump;
pub mod sema;
pub mod lower;
pub mod emit;
