//! The Choreo translator: `.co` source → checked program → CUDA C++ (`.cu`) and Rust wrappers.
//!
//! The pipeline is one module per stage (see `shared/design.md` §2):
//! `source` → `preprocess` → `lexer` → `parser` (→ `ast`) → `sema` → `lower` → `emit`.

pub mod diagnostics;
pub mod preprocess;
pub mod source;
