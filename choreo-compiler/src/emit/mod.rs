//! Code generation: the checked program plus its lowered plan → output text.
//!
//! [`cuda`] writes the `.cu` file (design §3), [`cpu`] the same C++ for the host compiler and
//! the CPU runtime, [`rust`] the safe wrappers. This module holds what
//! several emitters and the compile API share: the output mode ([`OutputMode`]).

pub mod cpu;
pub mod cuda;
pub mod rust;

/// Whether the generated `.cu` is a library or a whole program (design §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OutputMode {
    /// For linking into another program (the `build.rs` path): a host `main` function defined
    /// in the `.co` file is renamed to `__choreo_unused_main_<scope>` (see
    /// [`crate::lower::SymbolScope::renamed_main`]).
    #[default]
    Library,
    /// A complete program (`choreoc build`): the host text is kept as written, `main` included.
    Standalone,
}
