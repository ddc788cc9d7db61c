//! The wording and placement of diagnostics: counts agree with their nouns ("1 argument"),
//! C spellings of built-ins get the Choreo name as a hint, a missing `;` is reported where it
//! belongs, and every diagnostic labels its location (the fixture corpus checks the latter for
//! every reject fixture; here for the diagnostics made by this file's programs).

use choreo_compiler::compile::{CompileOptions, compile};
use choreo_compiler::diagnostics::{Diagnostic, count, count_as, render_human};
use choreo_compiler::source::SourceDb;
use choreo_compiler::token::choreo_spelling;

/// Every diagnostic of compiling `src`, and the text they render to.
fn diagnose(src: &str) -> (Vec<Diagnostic>, String) {
    let mut db = SourceDb::new();
    let file = db.add("test.co", src);
    let diags = compile(&db, file, &CompileOptions::default()).diagnostics;
    let rendered = render_human(&db, &diags);
    for d in &diags {
        assert!(!d.primary.message.is_empty(), "{} has no label:\n{rendered}", d.code);
    }
    (diags, rendered)
}

/// The (line, column) where `d` starts in `src`, both from 1.
fn line_col(src: &str, d: &Diagnostic) -> (usize, usize) {
    let before = &src[..d.primary.span.start as usize];
    (before.matches('\n').count() + 1, before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1)
}

#[test]
fn counts_agree_with_their_nouns() {
    assert_eq!(count(1, "argument"), "1 argument");
    assert_eq!(count(0, "argument"), "0 arguments");
    assert_eq!(count(3, "argument"), "3 arguments");
    assert_eq!(count_as(1, "index", "indices"), "1 index");
    assert_eq!(count_as(2, "index", "indices"), "2 indices");

    let src = "__co__ void f(f32 [16] a, f32 [16] &o) {\n  parallel p by 16 : thread {\n    \
               o.at(p) = __sqrt(a.at(p), a.at(p));\n  }\n}\n";
    let (_, text) = diagnose(src);
    assert!(text.contains("'__sqrt' expects 1 argument but got 2"), "{text}");
    let src = "__co__ void f(f32 [16, 4] a, f32 [16] &o) {\n  parallel p by 16 : thread {\n    \
               o.at(p) = a.at(p);\n  }\n}\n";
    let (_, text) = diagnose(src);
    assert!(text.contains("(rank: 2) with 1 index"), "{text}");
    let src = "__co__ void f(s32 [4] &c) {\n  parallel p by 4 : thread {\n    \
               __atomic_add(c.at(p));\n  }\n}\n";
    let (_, text) = diagnose(src);
    assert!(text.contains("'__atomic_add' expects 2 arguments but got 1"), "{text}");
}

#[test]
fn c_spellings_of_built_ins_get_the_choreo_name() {
    for (c, choreo) in [
        ("fmax", "__max"),
        ("fmaxf", "__max"),
        ("max", "__max"),
        ("fminf", "__min"),
        ("min", "__min"),
        ("sqrtf", "__sqrt"),
        ("sqrt", "__sqrt"),
        ("expf", "__exp"),
        ("exp", "__exp"),
        ("exp2f", "__exp2f"),
        ("logf", "__log"),
        ("abs", "__fabs"),
        ("fabsf", "__fabs"),
        ("tanhf", "__tanh"),
        ("fma", "__fmaf"),
        ("atomicAdd", "__atomic_add"),
    ] {
        assert_eq!(choreo_spelling(c), Some(choreo), "{c}");
    }
    for other in ["foo", "f", "__max", "_max", "expo", "x"] {
        assert_eq!(choreo_spelling(other), None, "{other}");
    }

    // Called with arguments that cannot be a selection index: a syntax error at the name.
    let src = "__co__ void f(f32 [16] a, f32 [16] &o) {\n  parallel p by 16 : thread {\n    \
               f32 x = a.at(p);\n    o.at(p) = fmaxf(x, 0.0f);\n  }\n}\n";
    let (diags, text) = diagnose(src);
    assert_eq!(diags.len(), 1, "{text}");
    assert_eq!((diags[0].code, line_col(src, &diags[0])), ("E0301", (4, 15)), "{text}");
    assert_eq!(diags[0].help.as_deref(), Some("Choreo spells it `__max`"), "{text}");

    // As a statement of its own.
    let src =
        "__co__ void f(s32 [4] &c) {\n  parallel p by 4 {\n    atomicAdd(c.at(0), 1);\n  }\n}\n";
    let (diags, text) = diagnose(src);
    assert_eq!(diags.len(), 1, "{text}");
    assert_eq!((diags[0].code, line_col(src, &diags[0])), ("E0301", (3, 5)), "{text}");
    assert_eq!(diags[0].help.as_deref(), Some("Choreo spells it `__atomic_add`"), "{text}");

    // `expf(x)` parses as a selection `expf(x)`; sema finds no `expf`.
    let src = "__co__ void f(f32 [16] a, f32 [16] &o) {\n  parallel p by 16 : thread {\n    \
               f32 x = a.at(p);\n    o.at(p) = expf(x);\n  }\n}\n";
    let (diags, text) = diagnose(src);
    assert_eq!(diags.len(), 1, "{text}");
    assert_eq!((diags[0].code, line_col(src, &diags[0])), ("E0401", (4, 15)), "{text}");
    assert_eq!(diags[0].help.as_deref(), Some("Choreo spells it `__exp`"), "{text}");

    // A declared name that happens to be spelt like a C function is not second-guessed.
    let src = "__co__ void f(f32 [4, 8] a, f32 [4] &o) {\n  max : a.span;\n  \
               parallel p by 4 : thread {\n    o.at(p) = max(1);\n  }\n}\n";
    let (diags, text) = diagnose(src);
    assert!(
        diags.iter().all(|d| d.help.as_deref().is_none_or(|h| !h.contains("spells"))),
        "{text}"
    );
}

#[test]
fn a_missing_semicolon_is_reported_after_the_previous_token() {
    let src = "__co__ void f(f32 [16] a, f32 [16] &o) {\n  parallel p by 16 : thread {\n    \
               f32 y = a.at(p)\n    o.at(p) = y;\n  }\n}\n";
    let (diags, text) = diagnose(src);
    assert_eq!(diags.len(), 1, "{text}");
    let d = &diags[0];
    assert_eq!((d.code, d.message.as_str()), ("E0301", "syntax error, missing ';'"), "{text}");
    // Right after `a.at(p)` on line 3, not at `o` on line 4.
    assert_eq!(line_col(src, d), (3, 20), "{text}");
    assert_eq!(d.primary.message, "expected ';' here");
    assert_eq!(d.secondary.len(), 1, "{text}");
    assert_eq!(d.secondary[0].message, "unexpected identifier 'o'");

    // `5.`: the advice about floating literals wins.
    let src = "__co__ void f(f32 [16] &o) {\n  parallel p by 16 : thread {\n    \
               o.at(p) = 5.;\n  }\n}\n";
    let (diags, text) = diagnose(src);
    assert!(diags.iter().any(|d| d.help.as_deref().is_some_and(|h| h.contains("5.0"))), "{text}");
}

#[test]
fn a_bad_token_in_a_macro_reports_once_however_often_it_expands() {
    // `D12` expands to 4096 copies of the malformed literal `1D3`: one error (at the macro's
    // use, with the expansion in a note), not 4096 (the fuzzer found a 2^16-fold case that took
    // seconds to print).
    let mut src = String::from("#define D0 1D3\n");
    for i in 1..=12 {
        src.push_str(&format!("#define D{i} D{} D{}\n", i - 1, i - 1));
    }
    src.push_str("__co__ void f(f32 [4] a) {\n  parallel p by 4 : thread { a.at(p) = D12; }\n}\n");
    let (diags, text) = diagnose(&src);
    let malformed: Vec<&Diagnostic> = diags.iter().filter(|d| d.code == "E0205").collect();
    assert_eq!(malformed.len(), 1, "{text}");
    assert_eq!(line_col(&src, malformed[0]), (15, 40), "{text}");
}
