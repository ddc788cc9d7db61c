//! Semantic analysis of the fp8 element types `f8_e4m3` (`f8`) and `f8_e5m2` (tier 2, spec
//! §5.1, §5.7): accepted wherever an element type is, arithmetic computed in f32, conversion
//! warnings only for values an fp8 type cannot hold exactly, atomics refused, and the other
//! narrow types still rejected as tier 3.

use choreo_compiler::compile::Target;
use choreo_compiler::diagnostics::{Diagnostic, Diagnostics, render_human};
use choreo_compiler::frontend::parse_file;
use choreo_compiler::hir::{self, ElemTy, Ty};
use choreo_compiler::preprocess::PreprocessOptions;
use choreo_compiler::sema;
use choreo_compiler::source::SourceDb;

struct Checked {
    db: SourceDb,
    program: hir::Program,
    diags: Vec<Diagnostic>,
}

/// Parses and checks `src` (asserting that it parses).
fn run(src: &str) -> Checked {
    let mut db = SourceDb::new();
    let id = db.add("test.co", src);
    let mut parse_diags = Diagnostics::new();
    let file = parse_file(&db, id, &PreprocessOptions::default(), &mut parse_diags);
    let parse_errors: Vec<Diagnostic> =
        parse_diags.into_vec().into_iter().filter(Diagnostic::is_error).collect();
    assert!(parse_errors.is_empty(), "parse errors:\n{}", render_human(&db, &parse_errors));
    let mut diags = Diagnostics::new();
    let program = sema::check(&db, &file, Target::default(), &mut diags);
    Checked { db, program, diags: diags.into_vec() }
}

/// The error codes of `src`, in order.
fn error_codes(src: &str) -> Vec<&'static str> {
    run(src).diags.iter().filter(|d| d.is_error()).map(|d| d.code).collect()
}

/// The single function of `src`, asserting that it has no error.
fn accept(src: &str) -> hir::Function {
    let c = run(src);
    let errors: Vec<Diagnostic> = c.diags.iter().filter(|d| d.is_error()).cloned().collect();
    assert!(errors.is_empty(), "unexpected errors:\n{}\nin:\n{src}", render_human(&c.db, &errors));
    let functions: Vec<hir::Function> = c.program.functions().cloned().collect();
    assert_eq!(functions.len(), 1, "expected one function");
    functions.into_iter().next().expect("one function")
}

/// The type of the local named `name`.
fn local_type(f: &hir::Function, name: &str) -> Ty {
    let local = f.locals.iter().find(|l| l.name == name);
    local.unwrap_or_else(|| panic!("no local `{name}`")).ty.clone()
}

/// The lines (1-based) of the `W0401` warnings of `src`.
fn lossy_warning_lines(src: &str) -> Vec<usize> {
    let c = run(src);
    c.diags
        .iter()
        .filter(|d| d.code == "W0401")
        .map(|d| {
            let file = c.db.file(d.primary.span.file);
            file.line_col(d.primary.span.start as usize).0
        })
        .collect()
}

#[test]
fn fp8_is_accepted_in_parameters_buffers_scalars_casts_and_returns() {
    let f = accept(
        "__co__ f8_e4m3 f(f8_e4m3 [4] a, f8 [4] &b, global f8_e5m2 [4] c, f8_e5m2 k) {\n\
         \x20 f8_e5m2 [4] tmp;\n\
         \x20 parallel p by 1 : block {\n\
         \x20   shared f8_e4m3 [4] s {0.5f};\n\
         \x20   shared f8_e5m2 one;\n\
         \x20   parallel t by 4 : thread {\n\
         \x20     local f8_e4m3 [2] l {1};\n\
         \x20     v = a.at(t);\n\
         \x20     s.at(t) = v;\n\
         \x20     tmp.at(t) = __to<f8_e5m2>(__to<f32>(c.at(t)) + __to<f32>(l.at(0)));\n\
         \x20     b.at(t) = __to<f8_e4m3>(s.at(t));\n\
         \x20     inthreads (t == 0) { one = k; }\n\
         \x20   }\n\
         \x20 }\n\
         \x20 return __to<f8_e4m3>(k);\n\
         }\n",
    );
    assert_eq!(f.params[0].elem, Some(ElemTy::F8E4m3));
    assert_eq!(f.params[1].elem, Some(ElemTy::F8E4m3), "`f8` is `f8_e4m3`");
    assert_eq!(f.params[2].elem, Some(ElemTy::F8E5m2));
    assert_eq!(local_type(&f, "v"), Ty::Scalar(ElemTy::F8E4m3), "an element keeps its type");
    assert_eq!(f.ret, hir::ReturnTy::Scalar(ElemTy::F8E4m3));
}

#[test]
fn fp8_arithmetic_is_computed_in_f32() {
    let f = accept(
        "__co__ void f(f8_e4m3 [4] a, f8_e5m2 [4] b, f16 [4] h, f64 [4] d) {\n\
         \x20 parallel p by 4 {\n\
         \x20   sum = a.at(p) + b.at(p);\n\
         \x20   same = a.at(p) * a.at(p);\n\
         \x20   neg = -a.at(p);\n\
         \x20   with_int = a.at(p) * 3;\n\
         \x20   with_half = h.at(p) * a.at(p);\n\
         \x20   with_double = a.at(p) * d.at(p);\n\
         \x20   root = __sqrt(b.at(p));\n\
         \x20   larger = __max(a.at(p), b.at(p));\n\
         \x20   picked = p > 1 ? a.at(p) : a.at(0);\n\
         \x20   less = a.at(p) < b.at(p);\n\
         \x20 }\n\
         }\n",
    );
    for name in ["sum", "same", "neg", "with_int", "with_half", "root", "larger", "picked"] {
        assert_eq!(local_type(&f, name), Ty::Scalar(ElemTy::F32), "`{name}`");
    }
    assert_eq!(local_type(&f, "with_double"), Ty::Scalar(ElemTy::F64));
    assert_eq!(local_type(&f, "less"), Ty::Scalar(ElemTy::Bool));
}

#[test]
fn only_values_an_fp8_type_cannot_hold_warn() {
    let src = "__co__ void f(f8_e4m3 [4] &a, f8_e5m2 [4] &b, f32 x) {\n\
               \x20 parallel p by 4 {\n\
               \x20   a.at(p) = 448;\n\
               \x20   a.at(p) = 0.001953125;\n\
               \x20   a.at(p) = -13;\n\
               \x20   b.at(p) = 57344;\n\
               \x20   b.at(p) = 0.0000152587890625;\n\
               \x20   f16 h = a.at(p);\n\
               \x20   f32 w = b.at(p);\n\
               \x20   a.at(p) = 449;\n\
               \x20   a.at(p) = 17;\n\
               \x20   b.at(p) = 9;\n\
               \x20   a.at(p) = 0.1f;\n\
               \x20   a.at(p) = x;\n\
               \x20   b.at(p) = a.at(p);\n\
               \x20   a.at(p) = h;\n\
               \x20 }\n\
               }\n";
    // Lines 3-9 are exact (448 and 2^-9 in e4m3, -13 = -1.625 * 2^3, 57344 and 2^-16 in e5m2;
    // every fp8 value is an f16 and an f32); lines 10-16 are not.
    assert_eq!(lossy_warning_lines(src), (10..=16).collect::<Vec<_>>());
}

#[test]
fn atomics_on_fp8_elements_are_refused() {
    let src = "__co__ void f(global f8_e4m3 [4] a) {\n\
               \x20 parallel p by 4 { __atomic_add(a.at(0), 1.0f); }\n\
               }\n";
    assert_eq!(error_codes(src), ["E0455"]);
}

#[test]
fn fp8_has_no_remainder_or_bitwise_operators() {
    let remainder = "__co__ void f(f8_e4m3 [4] &a) {\n\
                     \x20 parallel p by 4 { f32 r = a.at(p) % 2; }\n\
                     }\n";
    assert_eq!(error_codes(remainder), ["E0409"]);
    let bitwise = "__co__ void f(f8_e4m3 [4] &a) {\n\
                   \x20 parallel p by 4 { f32 r = a.at(p) & 2; }\n\
                   }\n";
    assert_eq!(error_codes(bitwise), ["E0407"]);
}

#[test]
fn the_other_narrow_types_stay_tier_3() {
    for (t, where_) in [
        ("f8_ue4m3", "param"),
        ("f8_ue8m0", "cast"),
        ("f6_e2m3", "buffer"),
        ("f4_e2m1", "scalar"),
        ("tf32", "param"),
        ("s4", "buffer"),
        ("bin1", "scalar"),
    ] {
        let src = match where_ {
            "param" => format!("__co__ void f({t} [4] a) {{}}\n"),
            "cast" => format!(
                "__co__ void f(f32 [4] &a) {{\n  parallel p by 4 {{ x = __to<{t}>(a.at(p)); }}\n\
                 }}\n"
            ),
            "buffer" => format!("__co__ void f() {{\n  {t} [4] b;\n}}\n"),
            _ => format!("__co__ void f() {{\n  {t} x;\n}}\n"),
        };
        let c = run(&src);
        let errors: Vec<&Diagnostic> = c.diags.iter().filter(|d| d.is_error()).collect();
        assert!(
            errors.len() == 1
                && errors[0].code == "E0901"
                && errors[0].message.contains(&format!("element type '{t}'"))
                && errors[0].message.contains("(tier 3)"),
            "{t} ({where_}):\n{}",
            render_human(&c.db, &c.diags)
        );
    }
}
