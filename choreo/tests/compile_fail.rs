//! Compile-fail tests: the borrow checker enforces the runtime's safety rules.

#[test]
fn safety_rules_are_compile_errors() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/compile_fail/*.rs");
}
