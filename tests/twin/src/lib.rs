//! A kernel crate for the symbol tests of `choreo-tests` (`tests/symbols.rs`): its
//! `affine` has the name, library (`co_kernels`) and module (`affine`) of a function of
//! choreo-tests, with other parameters and another result. Both link into one test binary;
//! each call must reach its own kernel.

/// The generated wrappers of `co/*.co`.
pub mod kernels {
    choreo::include_kernels!("co_kernels");
}
