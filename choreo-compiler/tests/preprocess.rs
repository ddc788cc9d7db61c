//! Tests of the preprocessor and island splitter (spec §1.1, §2.1, §3).

use choreo_compiler::diagnostics::{Diagnostic, Diagnostics, Severity};
use choreo_compiler::preprocess::{Expanded, PreprocessOptions, Preprocessed, Region, preprocess};
use choreo_compiler::source::{FileId, SourceDb, Span};

struct Run {
    db: SourceDb,
    file: FileId,
    out: Preprocessed,
    diags: Diagnostics,
}

fn run(src: &str) -> Run {
    run_with(src, &[])
}

fn run_with(src: &str, defines: &[(&str, Option<&str>)]) -> Run {
    let mut db = SourceDb::new();
    let file = db.add("t.co", src);
    let options = PreprocessOptions {
        defines: defines.iter().map(|(n, v)| (n.to_string(), v.map(str::to_string))).collect(),
    };
    let mut diags = Diagnostics::new();
    let out = preprocess(&db, file, &options, &mut diags);
    check_invariants(src, &out);
    Run { db, file, out, diags }
}

/// Properties every result must have, whatever the input.
fn check_invariants(src: &str, out: &Preprocessed) {
    let mut at = 0u32;
    for region in &out.regions {
        let span = region.span();
        assert_eq!(span.start, at, "regions must tile the file: {:?}", out.regions);
        assert!(span.end > span.start, "empty region {region:?}");
        at = span.end;
        if let Region::CoFunction { text, .. } = region {
            let mut prev = None;
            for seg in &text.segments {
                assert!(prev.is_none_or(|p| seg.out_start > p), "segments must be strictly sorted");
                assert!((seg.out_start as usize) < text.text.len(), "segment past the end");
                prev = Some(seg.out_start);
                assert!(seg.origin.start >= span.start && seg.origin.end <= span.end);
            }
            if let Some(first) = text.segments.first() {
                assert_eq!(first.out_start, 0);
            }
            // Verbatim pieces are exact copies of their origin.
            for (k, seg) in text.segments.iter().enumerate() {
                if seg.verbatim {
                    let end =
                        text.segments.get(k + 1).map_or(text.text.len(), |n| n.out_start as usize);
                    assert_eq!(&text.text[seg.out_start as usize..end], &src[seg.origin.range()]);
                }
            }
        }
    }
    assert_eq!(at as usize, src.len(), "regions must cover the whole file");
}

impl Run {
    fn kinds(&self) -> Vec<&'static str> {
        self.out
            .regions
            .iter()
            .map(|r| match r {
                Region::Host { .. } => "host",
                Region::CoFunction { .. } => "co",
                Region::Device { .. } => "device",
                Region::Cok { .. } => "cok",
            })
            .collect()
    }

    fn snippets(&self) -> Vec<&str> {
        self.out.regions.iter().map(|r| self.db.snippet(r.span())).collect()
    }

    fn co(&self, index: usize) -> &Expanded {
        self.out
            .regions
            .iter()
            .filter_map(|r| match r {
                Region::CoFunction { text, .. } => Some(text),
                _ => None,
            })
            .nth(index)
            .expect("no such __co__ function")
    }

    fn co_text(&self, index: usize) -> &str {
        &self.co(index).text
    }

    fn codes(&self) -> Vec<&'static str> {
        self.diags.as_slice().iter().map(|d| d.code).collect()
    }

    fn diag(&self, code: &str) -> &Diagnostic {
        self.diags
            .as_slice()
            .iter()
            .find(|d| d.code == code)
            .unwrap_or_else(|| panic!("no {code} in {:?}", self.diags.as_slice()))
    }

    fn snippet(&self, span: Span) -> &str {
        self.db.snippet(span)
    }

    fn offset_of(&self, needle: &str) -> usize {
        self.db.file(self.file).text().find(needle).expect("needle not in source")
    }

    fn assert_clean(&self) {
        assert!(self.diags.is_empty(), "unexpected diagnostics: {:?}", self.diags.as_slice());
    }
}

/// Collapses whitespace so expectations can ignore spacing.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

// ----------------------------------------------------------------------------------------------
// Region splitting
// ----------------------------------------------------------------------------------------------

#[test]
fn host_only_file_is_one_verbatim_host_region() {
    let src = "#include <cstdio>\nint main() { return 0; }\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.kinds(), ["host"]);
    assert_eq!(r.snippets(), [src]);
}

#[test]
fn co_function_runs_from_keyword_to_closing_brace() {
    let src = "int x;\n__co__ void f(f32 [4] a) {\n  parallel p by 4 { a.at(p) = 1.0f; }\n}\nint main() {}\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.kinds(), ["host", "co", "host"]);
    let snippets = r.snippets();
    assert_eq!(snippets[0], "int x;\n");
    assert!(snippets[1].starts_with("__co__ void f") && snippets[1].ends_with("1.0f; }\n}"));
    assert_eq!(r.co_text(0), snippets[1], "no macros: the text is the source");
    assert_eq!(snippets[2], "\nint main() {}\n");
}

#[test]
fn braces_in_strings_chars_and_comments_do_not_count() {
    let src = "__co__ void f() {\n  print(\"}}\");\n  // }\n  /* } { */\n  if (x) { y = '}'; }\n  __cpp__(R\"x(})x\");\n}\nint tail;\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.kinds(), ["co", "host"]);
    assert_eq!(r.snippets()[1], "\nint tail;\n");
}

#[test]
fn triggers_in_host_comments_and_strings_do_not_fire() {
    let src = "// __co__ void a() {}\n/* __co__ void b() {} */\nconst char* s = \"__co__ void c() {}\";\nauto r = R\"d(__co__ void e() {})d\";\nchar q = '_';\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.kinds(), ["host"]);
}

#[test]
fn triggers_must_be_whole_identifiers() {
    let src = "int my__co__x = 1; int __co__y; int __device__z; int x__cok__;\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.kinds(), ["host"]);
}

#[test]
fn text_after_the_closing_brace_on_the_same_line_is_host() {
    let src = "__co__ void f() { }  int after = 1;\n";
    let r = run(src);
    assert_eq!(r.kinds(), ["co", "host"]);
    assert_eq!(r.snippets(), ["__co__ void f() { }", "  int after = 1;\n"]);
}

#[test]
fn several_functions_and_regions_in_order() {
    let src = "__device__ int g(int x) { return x; }\n__co__ void a() {}\n__cok__ { __device__ void h() {} }\n__co__ void b() { if (1) {} }\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.kinds(), ["device", "host", "co", "host", "cok", "host", "co", "host"]);
}

#[test]
fn device_definition_is_captured_through_its_matching_brace() {
    let src = "__device__ float twice(float x) {\n  if (x > 0) { return 2 * x; }\n  return x;\n}\nint h;\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.kinds(), ["device", "host"]);
    assert!(r.snippets()[0].ends_with("return x;\n}"));
}

#[test]
fn device_declaration_ends_at_semicolon_and_initializer_at_its_semicolon() {
    let src = "__co_device__ int f(int);\n__device__ int table[] = {1, 2, 3};\nint h;\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.kinds(), ["device", "host", "device", "host"]);
    assert_eq!(r.snippets()[0], "__co_device__ int f(int);");
    assert_eq!(r.snippets()[2], "__device__ int table[] = {1, 2, 3};");
}

#[test]
fn device_inside_host_braces_is_not_a_file_scope_declaration() {
    let src = "struct S {\n  __device__ int get() const { return 1; }\n};\nvoid h() { int t[] = {1}; __device__ x; }\n__device__ int top();\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.kinds(), ["host", "device", "host"]);
    assert_eq!(r.snippets()[1], "__device__ int top();");
}

#[test]
fn namespace_and_extern_c_braces_keep_file_scope() {
    let src = "namespace a::b {\n__device__ int f();\n}\nextern \"C\" {\n__device__ int g();\n}\ninline namespace v1 { struct T { __device__ int m(); }; }\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.kinds(), ["host", "device", "host", "device", "host"]);
    assert_eq!(r.snippets()[3], "__device__ int g();");
}

#[test]
fn cok_block_records_its_body() {
    let src = "__cok__ /* kernels */ {\n__device__ int k() { return 0; }\n}\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.kinds(), ["cok", "host"]);
    let Region::Cok { span, body } = &r.out.regions[0] else { panic!("not cok") };
    assert!(r.snippet(*span).starts_with("__cok__") && r.snippet(*span).ends_with('}'));
    assert_eq!(r.snippet(*body), "\n__device__ int k() { return 0; }\n");
}

#[test]
fn cok_without_a_brace_is_an_error() {
    let r = run("__cok__ int x;\n");
    assert_eq!(r.codes(), ["E0115"]);
    assert_eq!(r.snippet(r.diag("E0115").primary.span), "__cok__");
    assert_eq!(r.kinds(), ["host"]);
}

#[test]
fn unterminated_regions_are_located_errors() {
    let r = run("int a;\n__co__ void f() {\n  if (x) {\n}\n");
    assert_eq!(r.codes(), ["E0114"]);
    assert_eq!(r.snippet(r.diag("E0114").primary.span), "__co__");
    assert_eq!(r.kinds(), ["host", "co"]);

    let r = run("__device__ void g() {\n");
    assert_eq!(r.codes(), ["E0116"]);
    assert_eq!(r.kinds(), ["device"]);

    let r = run("__cok__ {\n");
    assert_eq!(r.codes(), ["E0115"]);
}

// ----------------------------------------------------------------------------------------------
// Directives and conditionals
// ----------------------------------------------------------------------------------------------

#[test]
fn host_directives_stay_in_host_text() {
    let src = "#include \"choreo.h\"\n#include <vector>\n#define N 4\n#pragma once\n#if N > 2\nint a;\n#endif\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.snippets(), [src]);
}

#[test]
fn object_like_macro_expands_in_co_function_but_not_in_host() {
    let src = "#define TILE 16\nint host = TILE;\n__co__ void k(f32 [TILE] a) { parallel t by TILE {} }\n";
    let r = run(src);
    r.assert_clean();
    assert!(r.snippets()[0].contains("int host = TILE;"));
    assert_eq!(r.co_text(0), "__co__ void k(f32 [16] a) { parallel t by 16 {} }");
}

#[test]
fn define_without_body_means_one() {
    let r = run("#define FLAG\n__co__ void f() { x = FLAG; }\n");
    r.assert_clean();
    assert_eq!(r.co_text(0), "__co__ void f() { x = 1; }");
}

#[test]
fn command_line_defines() {
    let src = "__co__ void f() { a = N; b = ON; c = TWICE(3); }\n";
    let r = run_with(src, &[("N", Some("8")), ("ON", None), ("TWICE(x)", Some("((x) * 2)"))]);
    r.assert_clean();
    assert_eq!(r.co_text(0), "__co__ void f() { a = 8; b = 1; c = ((3) * 2); }");

    let r = run_with("int x;\n", &[("1BAD", Some("2"))]);
    assert_eq!(r.codes(), ["E0107"]);
}

#[test]
fn undef_removes_a_macro() {
    let r = run("#define N 4\n#undef N\n__co__ void f() { x = N; }\n");
    r.assert_clean();
    assert_eq!(r.co_text(0), "__co__ void f() { x = N; }");
}

#[test]
fn if_elif_else_in_co_function_keeps_line_structure() {
    let src = "#define TILE 16\n#define HALF(x) ((x) / 2)\n__co__ void k(f32 [64] a) {\n#if TILE > 8\n  parallel t by HALF(TILE) : thread { a.at(t) = 1.0f; }\n#elif TILE > 4\n  mid;\n#else\n  parallel t by TILE : thread { a.at(t) = 2.0f; }\n#endif\n}\n";
    let r = run(src);
    r.assert_clean();
    let text = r.co_text(0);
    assert_eq!(
        text,
        "__co__ void k(f32 [64] a) {\n\n  parallel t by ((16) / 2) : thread { a.at(t) = 1.0f; }\n\n\n\n\n\n}"
    );
    let source_lines = r.snippets()[1].lines().count();
    assert_eq!(text.lines().count(), source_lines, "one output line per source line");
}

#[test]
fn ifdef_ifndef_and_defined_forms() {
    let src = "#define A\n__co__ void f() {\n#ifdef A\n a1;\n#endif\n#ifndef A\n a2;\n#endif\n#if defined B || defined(A)\n a3;\n#endif\n#if !defined(A)\n a4;\n#endif\n}\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(squash(r.co_text(0)), "__co__ void f() { a1; a3; }");
}

#[test]
fn if_expressions_evaluate_like_c() {
    let cases: &[(&str, bool)] = &[
        ("1 + 2 * 3 == 7", true),
        ("(1 + 2) * 3 == 9", true),
        ("10 / 3 == 3 && 10 % 3 == 1", true),
        ("2 < 3 && 3 <= 3 && 4 > 3 && 4 >= 5", false),
        ("1 != 1 || 0", false),
        ("!0 && !!5", true),
        ("-1 < 0", true),
        ("0x10 == 16 && 010 == 8 && 0b11 == 3 && 1'000 == 1000 && 5u == 5", true),
        ("1 << 4 == 16 && (255 & 15) == 15 && (1 | 2) == 3 && (6 ^ 3) == 5", true),
        ("'A' == 65", true),
        ("UNKNOWN == 0 && UNKNOWN + 1 == 1", true),
        ("N * 2 == 8", true),
        ("1 ? 2 : 0", true),
        ("0 ? 1 : 0", false),
        ("true && !false", true),
        ("1 and not 0", true),
    ];
    for (expr, expected) in cases {
        let src = format!(
            "#define N 4\n__co__ void f() {{\n#if {expr}\n yes;\n#else\n no;\n#endif\n}}\n"
        );
        let r = run(&src);
        r.assert_clean();
        let want = if *expected { "yes;" } else { "no;" };
        assert!(r.co_text(0).contains(want), "#if {expr} should be {expected}: {}", r.co_text(0));
    }
}

#[test]
fn division_by_zero_in_if_is_a_located_error_unless_short_circuited() {
    let src = "#if 1 / (2 - 2)\nint a;\n#endif\n";
    let r = run(src);
    assert_eq!(r.codes(), ["E0106"]);
    assert_eq!(r.snippet(r.diag("E0106").primary.span), "1 / (2 - 2)");

    let r = run("#if 0 && 1 / 0\n#endif\n#if 1 || 1 % 0\n#endif\n#if 1 ? 2 : 1 / 0\n#endif\n");
    r.assert_clean();
}

#[test]
fn elif_after_a_taken_branch_is_not_evaluated() {
    let r = run("#if 1\nint a;\n#elif 1 / 0\nint b;\n#elif garbage (\n#endif\n");
    r.assert_clean();
    let r = run("#if 0\n#elif 2 > 1\nint a;\n#elif 1 / 0\n#endif\n");
    r.assert_clean();
}

#[test]
fn function_like_macros_and_defined_in_if() {
    let src = "#define TWICE(x) ((x) * 2)\n__co__ void f() {\n#if TWICE(3) == 6 && defined TWICE\n  yes;\n#endif\n}\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(squash(r.co_text(0)), "__co__ void f() { yes; }");
}

#[test]
fn directives_missing_their_macro_name() {
    let r = run("#ifdef\n#endif\n#ifndef 3\n#endif\n#undef\n");
    assert_eq!(r.codes(), ["E0121", "E0121", "E0121"]);
    assert_eq!(r.snippet(r.diags.as_slice()[2].primary.span), "#undef");
}

#[test]
fn malformed_defines() {
    let r = run("#define\n#define 3 x\n#define F(a, a) a\n#define G(a\n#define defined 1\n");
    assert_eq!(r.codes(), ["E0107"; 5]);
    assert_eq!(r.snippet(r.diags.as_slice()[1].primary.span), "3");
    assert_eq!(r.snippet(r.diags.as_slice()[2].primary.span), "a");
}

#[test]
fn malformed_if_expressions_are_errors() {
    for expr in ["", "1 +", "(1", "1 2", "\"s\"", "F(2)", "1.5", "defined"] {
        let r = run(&format!("#if {expr}\n#endif\n"));
        assert_eq!(r.codes(), ["E0105"], "#if {expr}");
    }
}

#[test]
fn missing_endif_points_at_the_opening_directive() {
    let r = run("int a;\n#if 1\nint b;\n");
    assert_eq!(r.codes(), ["E0102"]);
    let d = r.diag("E0102");
    assert_eq!(d.message, "missing '#endif'");
    assert_eq!(r.snippet(d.primary.span), "#if 1");

    let r = run("__co__ void f() {\n#ifdef X\n}\n#endif\n");
    assert_eq!(r.codes(), ["E0114"], "the excluded brace does not close the function");

    let r = run("__co__ void f() {\n#if 1\n}\n#endif\n");
    assert_eq!(r.codes(), ["E0102", "E0103"]);
    assert_eq!(r.snippet(r.diag("E0102").primary.span), "#if 1");
}

#[test]
fn redundant_endif_else_elif_are_errors() {
    let r = run("#endif\n#else\n#elif 1\n");
    assert_eq!(r.codes(), ["E0103", "E0103", "E0103"]);
    assert_eq!(r.snippet(r.diags.as_slice()[1].primary.span), "#else");

    let r = run("#if 0\n#else\n#else\n#elif 1\n#endif\n");
    assert_eq!(r.codes(), ["E0104", "E0104"]);
}

#[test]
fn error_directive_is_reported_only_when_live() {
    let src =
        "int a;\n#if 0\n#error not this one\n#endif\n#error tile size must be a power of two\n";
    let r = run(src);
    assert_eq!(r.codes(), ["E0101"]);
    let d = r.diag("E0101");
    assert_eq!(d.message, "tile size must be a power of two");
    assert_eq!(r.db.location(d.primary.span), "t.co:5:1");
    assert_eq!(r.snippet(d.primary.span), "#error tile size must be a power of two");
}

#[test]
fn error_directive_inside_co_function() {
    let r = run("__co__ void f() {\n#if 1\n  #error bad config\n#endif\n}\n");
    assert_eq!(r.codes(), ["E0101"]);
    assert_eq!(r.db.location(r.diag("E0101").primary.span), "t.co:3:3");
    assert_eq!(r.co_text(0), "__co__ void f() {\n\n\n\n}");
}

#[test]
fn warning_directive_is_a_warning() {
    let r = run("#warning check this\n");
    assert_eq!(r.codes(), ["W0101"]);
    assert_eq!(r.diag("W0101").severity, Severity::Warning);
    assert_eq!(r.diag("W0101").message, "check this");
}

#[test]
fn line_directives_are_recorded_and_validated() {
    let src = "#line 100 \"gen.co\"\nint a;\n__co__ void f() {\n#line 7\n}\n";
    let r = run(src);
    r.assert_clean();
    let lines = &r.out.line_directives;
    assert_eq!(lines.len(), 2);
    assert_eq!((lines[0].line, lines[0].file.as_deref()), (100, Some("gen.co")));
    assert_eq!(lines[0].applies_from as usize, r.offset_of("int a;"));
    assert_eq!((lines[1].line, lines[1].file.as_deref()), (7, None));

    for bad in ["#line", "#line x", "#line 5 6", "#line 99999999999"] {
        let r = run(&format!("{bad}\n"));
        assert_eq!(r.codes(), ["E0119"], "{bad}");
    }
}

#[test]
fn include_is_passed_through_in_host_but_rejected_in_co() {
    let r = run("#include \"a.h\"\n");
    r.assert_clean();
    let r = run("__co__ void f() {\n#include \"a.h\"\n}\n");
    assert_eq!(r.codes(), ["E0118"]);
}

#[test]
fn intrinsic_pragmas() {
    let src = "#pragma croq intrinsic prefix __nv_\n#pragma croq intrinsic namespace cute::arch\n#pragma croq intrinsic prefix __nv_\n__co__ void f() {\n  #pragma croq intrinsic prefix my_\n  my_call(1);\n}\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.out.intrinsic_prefixes, ["__nv_"]);
    assert_eq!(r.out.intrinsic_namespaces, ["cute::arch"]);
    let text = r.co_text(0);
    assert_eq!(
        text,
        "__co__ void f() {\n__pragma_croq_intrinsic_prefix(\"my_\");\n  my_call(1);\n}"
    );
    let at = text.find("__pragma").unwrap();
    let origin = r.co(0).origin(at..at + 8);
    assert_eq!(r.snippet(origin), "#pragma croq intrinsic prefix my_");
}

#[test]
fn malformed_and_unknown_pragmas() {
    let r = run("#pragma croq intrinsic prefix\n#pragma croq intrinsic bogus x\n");
    assert_eq!(r.codes(), ["E0117", "E0117"]);
    let r = run("#pragma croq something\n#pragma unroll\n");
    assert_eq!(r.codes(), ["W0104"]);
    let r = run("__co__ void f() {\n#pragma unroll 4\n  x;\n}\n");
    assert_eq!(r.codes(), ["W0102"]);
    assert_eq!(r.co_text(0), "__co__ void f() {\n\n  x;\n}");
}

#[test]
fn continuation_lines_in_define_and_comments_in_directives() {
    let src = "#define SUM(a, b) \\\n  ((a) + \\\n   (b)) /* comment */\n__co__ void f() { x = SUM(1, 2); }\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.co_text(0), "__co__ void f() { x = ((1) + (2)); }");
}

#[test]
fn comments_hide_directives_in_excluded_text() {
    let src = "#if 0\n/*\n#endif\n*/\n#endif\nint live;\n";
    let r = run(src);
    r.assert_clean();
}

#[test]
fn hash_lines_in_tileflow_that_are_not_directives_are_text() {
    let src = "__co__ void f() {\n  foreach i in\n    #p { }\n}\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.co_text(0), r.snippets()[0]);
}

#[test]
fn conditional_nesting_limit() {
    let depth = 300;
    let src = format!("{}{}", "#if 1\n".repeat(depth), "#endif\n".repeat(depth));
    let r = run(&src);
    assert_eq!(r.codes(), ["E0113"]);
}

#[test]
fn has_include_is_zero_with_a_warning_when_a_co_function_depends_on_it() {
    let src = "#if __has_include(<cuda_fp8.h>)\n__co__ void f() {}\n#endif\n";
    let r = run(src);
    assert_eq!(r.codes(), ["W0103"]);
    assert_eq!(r.kinds(), ["host"], "evaluated as 0: the function is dropped");
    let r = run("#if __has_include(<x.h>)\nint only_host;\n#endif\n");
    r.assert_clean();
}

// ----------------------------------------------------------------------------------------------
// Macro expansion
// ----------------------------------------------------------------------------------------------

#[test]
fn object_like_macros_reach_a_fixed_point() {
    let mut src = String::new();
    for k in 0..31 {
        src.push_str(&format!("#define M{k} M{}\n", k + 1));
    }
    src.push_str("#define M31 42\n__co__ void f() { x = M0; }\n");
    let r = run(&src);
    r.assert_clean();
    assert_eq!(r.co_text(0), "__co__ void f() { x = 42; }");
}

#[test]
fn more_than_32_rounds_is_a_located_error() {
    let mut src = String::new();
    for k in 0..40 {
        src.push_str(&format!("#define M{k} M{}\n", k + 1));
    }
    src.push_str("__co__ void f() { x = M0; }\n");
    let r = run(&src);
    assert_eq!(r.codes(), ["E0109"]);
    assert_eq!(r.snippet(r.diag("E0109").primary.span), "M0");
}

#[test]
fn a_macro_is_not_expanded_inside_its_own_expansion() {
    let src = "#define X X + 1\n#define A B\n#define B A\n__co__ void f() { x = X; y = A; }\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.co_text(0), "__co__ void f() { x = X + 1; y = A; }");
}

#[test]
fn function_like_macros_nest() {
    let src = "#define ADD(a, b) ((a) + (b))\n#define SQ(x) ((x) * (x))\n#define N 3\n__co__ void f() { y = ADD(SQ(N), ADD(1, SQ(2))); z = SQ (N); }\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(
        r.co_text(0),
        "__co__ void f() { y = ((((3) * (3))) + (((1) + (((2) * (2)))))); z = ((3) * (3)); }"
    );
}

#[test]
fn argument_splitting_respects_parentheses_brackets_and_strings() {
    let src = "#define FIRST(a, b) a\n#define ONE(x) [x]\n__co__ void f() { p = FIRST((1, 2), 3); q = FIRST(\"a,b\", 4); r = ONE([M, N]); s = FIRST(',', 5); }\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.co_text(0), "__co__ void f() { p = (1, 2); q = \"a,b\"; r = [[M, N]]; s = ','; }");
}

#[test]
fn function_like_name_without_parentheses_is_not_an_invocation() {
    let r = run("#define F(x) x\n__co__ void f() { y = F; }\n");
    r.assert_clean();
    assert_eq!(r.co_text(0), "__co__ void f() { y = F; }");
}

#[test]
fn wrong_argument_count_and_unterminated_invocation() {
    let r = run("#define F(a, b) a\n__co__ void f() { y = F(1); }\n");
    assert_eq!(r.codes(), ["E0110"]);
    assert_eq!(r.snippet(r.diag("E0110").primary.span), "F(1)");
    assert_eq!(r.diag("E0110").message, "macro 'F' expects 2 arguments, but 1 was given");

    let r = run("#define F(a) a\n__co__ void f() {\n y = F(1;\n#if 1\n#endif\n}\n");
    assert_eq!(r.codes(), ["E0111"]);
    assert_eq!(r.snippet(r.diag("E0111").primary.span), "F");
}

#[test]
fn variadic_macros() {
    let src = "#define CALL(f, ...) f(__VA_ARGS__)\n__co__ void g() { CALL(h, 1, 2); CALL(k); }\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.co_text(0), "__co__ void g() { h(1, 2); k(); }");
}

#[test]
fn gnu_named_variadic_macros() {
    let src =
        "#define LOG(fmt, args...) print(fmt, args)\n__co__ void g() { LOG(\"%d %d\", a, b); }\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.co_text(0), "__co__ void g() { print(\"%d %d\", a, b); }");
}

#[test]
fn exponential_argument_doubling_stops_quickly_with_one_error() {
    let depth = 60;
    let src = format!(
        "#define D(x) x x\n__co__ void f() {{ y = {}1{}; z = 2; }}\n",
        "D(".repeat(depth),
        ")".repeat(depth)
    );
    let start = std::time::Instant::now();
    let r = run(&src);
    assert!(start.elapsed().as_secs_f64() < 5.0, "took {:?}", start.elapsed());
    assert_eq!(r.codes(), ["E0120"]);
    assert!(r.co_text(0).ends_with("z = 2; }"), "text after the failed invocation is kept");
}

#[test]
fn invalid_command_line_macro_names() {
    for name in ["", "1X", "A B", "F(x", "A=B"] {
        let r = run_with("int x;\n", &[(name, Some("1"))]);
        assert_eq!(r.codes(), ["E0107"], "-D{name}");
    }
}

#[test]
fn no_expansion_in_strings_comments_or_numbers() {
    let src = "#define N 4\n#define f 9\n__co__ void g() { print(\"N=\", N); // N\n /* N */ x = 1.5f; y = 0x1f; c = 'N'; }\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(
        r.co_text(0),
        "__co__ void g() { print(\"N=\", 4); // N\n /* N */ x = 1.5f; y = 0x1f; c = 'N'; }"
    );
}

#[test]
fn dotted_keywords_are_never_expanded() {
    let src = "#define at 3\n#define span 7\n#define GET(t, at) t.at(at)\n__co__ void f() { x.at(i) = y.span(0) + at; z = GET(w, 1); }\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.co_text(0), "__co__ void f() { x.at(i) = y.span(0) + 3; z = w.at(1); }");
}

#[test]
fn function_in_excluded_host_conditional_is_dropped() {
    let src =
        "#if 0\n__co__ void dead() { parse error here( }\n#else\n__co__ void live() {}\n#endif\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.kinds(), ["host", "co", "host"]);
    assert!(r.snippets()[0].contains("__co__ void dead()"), "kept verbatim in the host text");
    assert_eq!(r.co_text(0), "__co__ void live() {}");
}

#[test]
fn macros_defined_in_a_function_do_not_leak_into_the_next() {
    let src = "#define G 1\n__co__ void a() {\n#define L 2\n#undef G\n x = L + G;\n}\n__co__ void b() { y = L + G; }\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(squash(r.co_text(0)), "__co__ void a() { x = 2 + G; }");
    assert_eq!(r.co_text(1), "__co__ void b() { y = L + 1; }");
}

#[test]
fn host_defines_apply_only_to_later_functions() {
    let src = "__co__ void a() { x = N; }\n#define N 5\n__co__ void b() { x = N; }\n#undef N\n#define N 6\n__co__ void c() { x = N; }\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.co_text(0), "__co__ void a() { x = N; }");
    assert_eq!(r.co_text(1), "__co__ void b() { x = 5; }");
    assert_eq!(r.co_text(2), "__co__ void c() { x = 6; }");
}

#[test]
fn redefinition_rules() {
    let r = run("#define F(x) x\n#define F(y) y + 1\n");
    assert_eq!(r.codes(), ["E0108"]);
    let d = r.diag("E0108");
    assert_eq!(r.snippet(d.primary.span), "F");
    assert_eq!(r.db.location(d.secondary[0].span), "t.co:1:9");

    let r = run(
        "#define F(x) (x)\n#define F(x)   (x)\n#define N 1\n#define N 2\n__co__ void f() { a = N; }\n",
    );
    r.assert_clean();
    assert_eq!(r.co_text(0), "__co__ void f() { a = 2; }");

    let r = run("#define F(x) x\n__co__ void f() {\n#define F 3\n}\n");
    assert_eq!(r.codes(), ["E0108"]);
}

#[test]
fn token_pasting_and_stringising_are_rejected_in_tileflow() {
    let r = run("__co__ void f() {\n#define CAT(a, b) a ## b\n}\n");
    assert_eq!(r.codes(), ["E0112"]);
    assert_eq!(r.snippet(r.diag("E0112").primary.span), "##");

    let src = "#define STR(x) #x\nconst char* s = STR(host);\n__co__ void f() { print(STR(x)); }\n";
    let r = run(src);
    assert_eq!(r.codes(), ["E0112"], "host definition is fine; the tileflow use is not");
    assert_eq!(r.snippet(r.diag("E0112").primary.span), "STR(x)");

    // In an object-like macro `#` is Choreo's upper-bound operator.
    let r = run("#define UB #p\n__co__ void f() { x = UB; }\n");
    r.assert_clean();
    assert_eq!(r.co_text(0), "__co__ void f() { x = #p; }");
}

#[test]
fn oversized_and_deeply_nested_expansions_are_errors() {
    let mut src = String::new();
    for k in 0..20 {
        src.push_str(&format!("#define E{k} E{} E{}\n", k + 1, k + 1));
    }
    src.push_str(&format!("#define E20 {}\n", "w ".repeat(500)));
    src.push_str("__co__ void f() { x = E0; }\n");
    let r = run(&src);
    assert_eq!(r.codes(), ["E0120"]);

    let depth = 200;
    let src = format!(
        "#define F(x) x\n__co__ void f() {{ y = {}1{}; }}\n",
        "F(".repeat(depth),
        ")".repeat(depth)
    );
    let r = run(&src);
    assert_eq!(r.codes(), ["E0122"]);
}

// ----------------------------------------------------------------------------------------------
// Origin mapping
// ----------------------------------------------------------------------------------------------

#[test]
fn origins_of_tokens_before_inside_and_after_an_expansion() {
    let src = "#define N 64\n__co__ void f(f32 [N] a) { x = N + 1; }\n";
    let r = run(src);
    let e = r.co(0);
    assert_eq!(e.text, "__co__ void f(f32 [64] a) { x = 64 + 1; }");
    let out = |needle: &str| e.text.find(needle).unwrap();
    // Before: byte-exact.
    let f32_at = out("f32");
    assert_eq!(r.snippet(e.origin(f32_at..f32_at + 3)), "f32");
    // Inside: the whole invocation.
    let n_at = out("64");
    let origin = e.origin(n_at..n_at + 2);
    assert_eq!(r.snippet(origin), "N");
    assert_eq!(origin.start as usize, r.offset_of("[N]") + 1);
    assert_eq!(
        r.snippet(e.origin(n_at + 1..n_at + 2)),
        "N",
        "part of an expansion maps to all of it"
    );
    // Right after: byte-exact again, including the closing bracket next to the expansion.
    assert_eq!(r.snippet(e.origin(n_at + 2..n_at + 3)), "]");
    let a_at = out("a)");
    assert_eq!(r.snippet(e.origin(a_at..a_at + 1)), "a");
    let one_at = out("1;");
    assert_eq!(r.snippet(e.origin(one_at..one_at + 2)), "1;");
    // A range covering verbatim text and an expansion covers both.
    let x_at = out("x =");
    assert_eq!(r.snippet(e.origin(x_at..x_at + 6)), "x = N");
}

#[test]
fn origins_at_boundaries_empty_ranges_and_past_the_end() {
    let src = "#define W(x) x\n__co__ void f() {\n  W(\n    3);\n  y;\n}\n";
    let r = run(src);
    r.assert_clean();
    let e = r.co(0);
    assert_eq!(
        e.text, "__co__ void f() {\n  3\n;\n  y;\n}",
        "a multi-line invocation keeps its newline"
    );
    let three = e.text.find('3').unwrap();
    assert_eq!(r.snippet(e.origin(three..three + 1)), "W(\n    3)");
    // Empty range at the start of the expansion: the invocation; right after it: a point.
    assert_eq!(r.snippet(e.origin(three..three)), "W(\n    3)");
    let semi = e.text.find(';').unwrap();
    let p = e.origin(semi..semi);
    assert!(p.is_empty());
    assert_eq!(p.start as usize, r.offset_of("3);") + 2);
    // `y` keeps its own line.
    let y = e.text.find('y').unwrap();
    assert_eq!(r.db.location(e.origin(y..y + 1)), "t.co:5:3");
    // End of text and beyond.
    let end = e.origin(e.text.len()..e.text.len() + 10);
    assert_eq!(end.start as usize, r.offset_of("}\n") + 1);
}

#[test]
fn origins_across_removed_directive_lines() {
    let src = "__co__ void f() {\n#define K 2\n  a = K;\n#if 0\n  dead;\n#endif\n  b;\n}\n";
    let r = run(src);
    r.assert_clean();
    let e = r.co(0);
    let b_at = e.text.find("b;").unwrap();
    assert_eq!(r.db.location(e.origin(b_at..b_at + 2)), "t.co:7:3");
    let a_at = e.text.find("a =").unwrap();
    assert_eq!(r.db.location(e.origin(a_at..a_at + 1)), "t.co:3:3");
    // Every output line starts on the same source line.
    for (k, line) in e.text.split('\n').enumerate() {
        let start = line.as_ptr() as usize - e.text.as_ptr() as usize;
        let origin = e.origin(start..start);
        let (src_line, _) = r.db.file(r.file).line_col(origin.start as usize);
        assert_eq!(src_line, k + 1, "output line {k}: {line:?}");
    }
}

// ----------------------------------------------------------------------------------------------
// Robustness
// ----------------------------------------------------------------------------------------------

const VALID: &str = "#include \"choreo.h\"\n#define TILE 16\n#define HALF(x) ((x) / 2)\n#pragma croq intrinsic prefix __nv_\n__device__ float twice(float v) { return 2 * v; }\n__cok__ { __device__ int one() { return 1; } }\n__co__ f32 [64] k(f32 [64] a, s32 n) {\n#if TILE > 8 && defined(HALF)\n  parallel t by HALF(TILE) : thread { a.at(t) = 1.0f; }\n#elif 0\n  x;\n#else\n  parallel t by TILE { a.at(t) = 2.0f; }\n#endif\n  // comment with } and \"\n  print(\"{ %d\", n); __cpp__(R\"x(})x\");\n  return a;\n}\nint main() { return 0; }\n";

#[test]
fn random_mutations_never_panic() {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let alphabet: &[u8] = b"#{}()[];,\"'/*\\\n _aN01x.<>=!&|+-%?:R";
    let words: &[&str] = &[
        "#if ",
        "#endif",
        "#else",
        "#elif ",
        "#define ",
        "#undef ",
        "__co__",
        "__cok__",
        "__device__",
        "defined",
        "HALF(",
        "TILE",
        "/*",
        "*/",
        "R\"x(",
        ")x\"",
        "#error ",
        "##",
        "#line ",
        "\\\n",
    ];
    for _ in 0..2000 {
        let mut bytes = VALID.as_bytes().to_vec();
        for _ in 0..1 + next() % 6 {
            let at = (next() as usize) % (bytes.len() + 1);
            match next() % 4 {
                0 if !bytes.is_empty() => {
                    let end = (at + (next() as usize) % 8).min(bytes.len());
                    bytes.drain(at.min(end)..end);
                }
                1 => bytes.insert(at, alphabet[(next() as usize) % alphabet.len()]),
                2 => {
                    let w = words[(next() as usize) % words.len()];
                    bytes.splice(at..at, w.bytes());
                }
                _ => {
                    if at < bytes.len() {
                        bytes[at] = alphabet[(next() as usize) % alphabet.len()];
                    }
                }
            }
        }
        let src = String::from_utf8_lossy(&bytes).into_owned();
        let r = run(&src);
        // Every origin lookup stays inside the file.
        for region in &r.out.regions {
            if let Region::CoFunction { text, .. } = region {
                for k in [0, text.text.len() / 2, text.text.len()] {
                    let span = text.origin(k..(k + 3).min(text.text.len()));
                    assert!(span.end as usize <= src.len());
                }
            }
        }
        for d in r.diags.as_slice() {
            assert!(d.primary.span.end as usize <= src.len(), "{d:?}");
        }
    }
}

#[test]
fn non_ascii_text_and_byte_order_mark_are_handled() {
    let src = "\u{feff}#define N 2\n// ünïcödé }\n__co__ void f() { print(\"é}\"); x = N; }\nconst char* s = \"日本\";\n";
    let r = run(src);
    r.assert_clean();
    assert_eq!(r.kinds(), ["host", "co", "host"]);
    assert_eq!(r.co_text(0), "__co__ void f() { print(\"é}\"); x = 2; }");
}

#[test]
fn crlf_line_endings() {
    let src = "#define N 4 \\\r\n  + 1\r\n#error crlf message\r\n__co__ void f() {\r\n#if N == 5\r\n  yes;\r\n#endif\r\n}\r\n";
    let r = run(src);
    assert_eq!(r.codes(), ["E0101"]);
    assert_eq!(r.diag("E0101").message, "crlf message");
    assert_eq!(r.co_text(0), "__co__ void f() {\r\n\n  yes;\r\n\n}");
}

#[test]
fn a_large_file_preprocesses_in_linear_time() {
    let header = "#define N 64\n#define ADD(a, b) ((a) + (b))\n";
    let unit = "__co__ void f(f32 [N] a) {\n#if N > 8\n  parallel p by N { a.at(p) = ADD(p, 1); }\n#else\n  x;\n#endif\n}\n// host text with \"strings\" and __device__ words\nint helper(int v) { return v * 2; }\n";
    let units = 50_000 / unit.lines().count() + 1;
    let src = format!("{header}{}", unit.repeat(units));
    let mut db = SourceDb::new();
    let file = db.add("big.co", src.as_str());
    let mut diags = Diagnostics::new();
    let start = std::time::Instant::now();
    let out = preprocess(&db, file, &PreprocessOptions::default(), &mut diags);
    let elapsed = start.elapsed();
    assert!(diags.is_empty(), "{:?}", diags.as_slice());
    let functions = out.regions.iter().filter(|r| matches!(r, Region::CoFunction { .. })).count();
    assert_eq!(functions, units);
    check_invariants(&src, &out);
    // Release builds take a few milliseconds; the bound only catches super-linear behaviour in
    // unoptimised test builds.
    assert!(elapsed.as_secs_f64() < 3.0, "took {elapsed:?}");
}

// -- the global `main` of the host text ------------------------------------------------------

/// The lines (1-based) and the text of every recorded `main` definition.
fn mains(src: &str) -> Vec<(usize, String)> {
    let r = run(src);
    r.out
        .main_definitions
        .iter()
        .map(|s| (r.db.file(r.file).line_col(s.start as usize).0, src[s.range()].to_string()))
        .collect()
}

#[test]
fn records_the_definition_of_the_global_main() {
    assert_eq!(
        mains("// int main() {}\nint main(int argc, char** argv) {\n  return main2();\n}\n"),
        [(2, "main".to_string())]
    );
    assert_eq!(mains("auto main() -> int { return 0; }\n"), [(1, "main".to_string())]);
    assert_eq!(mains("extern \"C\" { int main(void) { return 0; } }\n"), [(1, "main".to_string())]);
    // After a __co__ function, a device declaration and a __cok__ block.
    assert_eq!(
        mains(
            "__co__ void f() {}\n__device__ int g() { return 1; }\n__cok__ { }\nint main() {\n  return 0;\n}\n"
        ),
        [(4, "main".to_string())]
    );
}

#[test]
fn other_mains_are_left_alone() {
    // A declaration, a string, a namespace member, a member function, a call, a directive,
    // a raw string, an excluded region.
    for src in [
        "int main();\n",
        "const char* s = \"main() {\";\n",
        "namespace a { int main() { return 0; } }\n",
        "struct S { int main() { return 0; } };\n",
        "int f() { return main(); }\n",
        "#define X int main() {\n",
        "const char* s = R\"(int main() {)\";\n",
        "#if 0\nint main() { return 0; }\n#endif\n",
        "int x = a.main();\n",
        "int y = ::main;\n",
    ] {
        assert_eq!(mains(src), [], "{src:?}");
    }
}
