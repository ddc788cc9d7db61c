//! Compile-fail tests of the generated wrappers' borrow rules (design §4), on real wrappers
//! generated from `co/*.co` (`choreo_tests::co`): a `Pending` keeps what the device writes and
//! what its completion writes borrowed; element types and ranks are part of the signatures;
//! one tensor cannot be both input and output; a tensor whose buffer was moved out cannot be
//! passed (the "already-moved tensor" of the bad-input checks, see `bad_input.rs`); an
//! unused guard is flagged.
//!
//! trybuild builds the cases in its own target directory; the build script runs in stub mode
//! there (`CHOREO_NVCC=skip`): the wrappers' signatures are the same, and no nvcc run is
//! needed. Update the `.stderr` files with `TRYBUILD=overwrite` and review them.

#[test]
fn wrapper_borrow_rules() {
    // SAFETY: this is the only test of this binary, so no other thread reads the environment
    // while it is changed; trybuild's cargo inherits it.
    unsafe { std::env::set_var("CHOREO_NVCC", "skip") };
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/compile_fail/*.rs");
}
