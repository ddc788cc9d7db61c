//! Front-end throughput: preprocess, lex + parse, and semantic analysis of a generated
//! ~50,000-line `.co` file (many `__co__` functions of mixed tier-1 constructs with host C++
//! code and preprocessor use between them).
//!
//! `cargo bench -p choreo-compiler --bench parse` (release). Plain timing with
//! `std::time::Instant`: a warm-up run, then the median (and minimum) of several runs per stage,
//! reported as lines/s and MB/s of the whole file. "lex only" is included in "lex+parse" (which
//! runs, like `frontend::parse_file`, on one big-stack parser thread per file). Options:
//! `--runs N` (default 9), `--lines N` (approximate size of the generated file, default 50000).
//! The generated program must be free of errors, so every stage does its full work; the
//! benchmark stops otherwise.
//! `CHOREO_BENCH_WRITE=path` also writes the generated file there.

use choreo_compiler::ast;
use choreo_compiler::diagnostics::{Diagnostics, render_human};
use choreo_compiler::lexer::{self, IntrinsicNames};
use choreo_compiler::preprocess::{self, PreprocessOptions, Preprocessed, Region};
use choreo_compiler::sema;
use choreo_compiler::source::{FileId, SourceDb};
use choreo_compiler::target::Target;
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

fn main() {
    let mut runs = 9usize;
    let mut target_lines = 50_000usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => runs = args.next().and_then(|v| v.parse().ok()).unwrap_or(runs).max(1),
            "--lines" => {
                target_lines = args.next().and_then(|v| v.parse().ok()).unwrap_or(target_lines)
            }
            // `cargo bench` passes `--bench`; other flags are ignored.
            _ => {}
        }
    }

    let source = generate(target_lines);
    if let Ok(path) = std::env::var("CHOREO_BENCH_WRITE") {
        // For looking at the input: `CHOREO_BENCH_WRITE=/tmp/gen.co cargo bench …`.
        std::fs::write(&path, &source).expect("writable CHOREO_BENCH_WRITE path");
    }
    let lines = source.lines().count();
    let bytes = source.len();
    let functions = source.matches("__co__ ").count();
    let mut db = SourceDb::new();
    let file = db.add("bench/generated.co", source);
    println!(
        "input: {lines} lines, {:.2} MB, {functions} __co__ functions; {runs} runs after a warm-up",
        bytes as f64 / 1e6
    );

    // Correctness of the input, once: no error anywhere.
    let pre = run_preprocess(&db, file);
    let ast = run_lex_parse(&pre);
    let mut diags = Diagnostics::new();
    let program = sema::check(&db, &ast, Target::default(), &mut diags);
    let parsed = ast.items.iter().filter(|i| matches!(i, ast::Item::CoFunction(_))).count();
    if diags.has_errors() || parsed != functions {
        let errors: Vec<_> = diags.into_vec().into_iter().filter(|d| d.is_error()).collect();
        eprint!("{}", render_human(&db, &errors));
        panic!("the generated program must check cleanly ({parsed} of {functions} parsed)");
    }
    black_box(program);

    let pre_times = time(runs, || black_box(run_preprocess(&db, file)));
    let lex_times = time(runs, || black_box(run_lex(&pre)));
    let parse_times = time(runs, || black_box(run_lex_parse(&pre)));
    let sema_times = time(runs, || {
        let mut diags = Diagnostics::new();
        black_box(sema::check(&db, &ast, Target::default(), &mut diags))
    });
    let total: Vec<Duration> =
        (0..runs).map(|i| pre_times[i] + parse_times[i] + sema_times[i]).collect();

    println!(
        "{:<12} {:>10} {:>10} {:>14} {:>10}",
        "stage", "median ms", "min ms", "lines/s", "MB/s"
    );
    for (stage, times) in [
        ("preprocess", &pre_times),
        ("(lex only)", &lex_times),
        ("lex+parse", &parse_times),
        ("sema", &sema_times),
        ("all three", &total),
    ] {
        let median = median(times);
        let min = times.iter().min().copied().unwrap_or_default();
        let secs = median.as_secs_f64().max(1e-9);
        println!(
            "{stage:<12} {:>10.2} {:>10.2} {:>14.0} {:>10.2}",
            median.as_secs_f64() * 1e3,
            min.as_secs_f64() * 1e3,
            lines as f64 / secs,
            bytes as f64 / 1e6 / secs
        );
    }
}

fn run_preprocess(db: &SourceDb, file: FileId) -> Preprocessed {
    let mut diags = Diagnostics::new();
    preprocess::preprocess(db, file, &PreprocessOptions::default(), &mut diags)
}

/// Lexing and parsing of every `__co__` function, as `frontend::parse_file` does after
/// preprocessing.
fn run_lex_parse(pre: &Preprocessed) -> ast::File {
    let mut diags = Diagnostics::new();
    choreo_compiler::frontend::parse_preprocessed(pre, &mut diags)
}

/// Lexing alone, to tell it apart from parsing; returns the token count.
fn run_lex(pre: &Preprocessed) -> usize {
    let mut diags = Diagnostics::new();
    let intrinsics = IntrinsicNames::from_preprocessed(pre);
    let mut tokens = 0;
    for region in &pre.regions {
        if let Region::CoFunction { text, .. } = region {
            tokens += lexer::lex(text, &intrinsics, &mut diags).len();
        }
    }
    tokens
}

/// One warm-up call, then `runs` timed calls.
fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> Vec<Duration> {
    drop(f());
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            let out = f();
            let elapsed = start.elapsed();
            drop(out);
            elapsed
        })
        .collect()
}

fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

// -- the generated program ------------------------------------------------------------------

/// A `.co` file of about `target_lines` lines: a header of includes and macros, then rounds of
/// kernels (one of each shape below, names and sizes varied by the round) with host code
/// between them.
fn generate(target_lines: usize) -> String {
    let mut out = String::new();
    out.push_str(
        "// Generated for the front-end benchmark: tier-1 kernels with host code between them.\n\
         #include <cstdio>\n#include <vector>\n#include \"choreo.h\"\n\n\
         #define TILE 32\n#define WIDTH(n) ((n) * TILE)\n#define SCALE 2.0f\n\n\
         #ifndef BENCH_LEVEL\n#define BENCH_LEVEL 1\n#endif\n\n",
    );
    let mut round = 0usize;
    while out.lines().count() < target_lines {
        let r = round;
        let n = 8 + (r % 8) * 8; // 8..64
        let blocks = 2 + r % 6;
        for kernel in KERNELS {
            kernel(&mut out, r, n, blocks);
        }
        host_code(&mut out, r, n);
        round += 1;
    }
    out
}

type Kernel = fn(&mut String, usize, usize, usize);

const KERNELS: [Kernel; 8] = [
    saxpy,
    blocked_2d,
    control_flow,
    with_foreach,
    shapes,
    host_scalars,
    stream_launch,
    reductions,
];

fn saxpy(out: &mut String, r: usize, n: usize, _blocks: usize) {
    let _ = write!(
        out,
        "// y = a * x + y over {n} elements.\n\
         __co__ void saxpy_{r}(f32 [{n}] &y, f32 [{n}] x, f32 a) {{\n\
         \x20 parallel p by {n} {{\n\
         \x20   y.at(p) = a * x.at(p) + y.at(p);\n\
         \x20 }}\n\
         }}\n\n"
    );
}

fn blocked_2d(out: &mut String, r: usize, n: usize, blocks: usize) {
    let _ = write!(
        out,
        "__co__ void blocked_{r}(f32 [{blocks}, {n}] &out, f32 [{blocks}, {n}] src, int bias) {{\n\
         \x20 parallel b by {blocks} : block {{\n\
         \x20   parallel t by {n} : thread {{\n\
         \x20     f32 v = src.at(b, t);\n\
         \x20     mutable f32 acc = v * SCALE;\n\
         \x20     if (t % 2 == 0) {{\n\
         \x20       acc = acc + __to<f32>(bias);\n\
         \x20     }} else {{\n\
         \x20       acc = acc - 1.0f;\n\
         \x20     }}\n\
         \x20     out.at(b, t) = acc;\n\
         \x20   }}\n\
         \x20 }}\n\
         }}\n\n"
    );
}

fn control_flow(out: &mut String, r: usize, n: usize, _blocks: usize) {
    let _ = write!(
        out,
        "__co__ void collatz_{r}(s32 [{n}] &steps, s32 [{n}] start) {{\n\
         \x20 parallel p by {n} {{\n\
         \x20   mutable s32 v = start.at(p);\n\
         \x20   mutable s32 count = 0;\n\
         \x20   while (v != 1) {{\n\
         \x20     if (count >= 1000) break;\n\
         \x20     count += 1;\n\
         \x20     if (v % 2 == 0) {{\n\
         \x20       v = v / 2;\n\
         \x20       continue;\n\
         \x20     }}\n\
         \x20     v = 3 * v + 1;\n\
         \x20   }}\n\
         \x20   foreach {{k}} in [10] {{\n\
         \x20     if (k == 3) continue;\n\
         \x20     if (k > 7) break;\n\
         \x20     count = count + (k & 1);\n\
         \x20   }}\n\
         \x20   steps.at(p) = count;\n\
         \x20 }}\n\
         }}\n\n"
    );
}

fn with_foreach(out: &mut String, r: usize, _n: usize, _blocks: usize) {
    let _ = write!(
        out,
        "__co__ void grid_{r}(f32 [8, 8] &a) {{\n\
         \x20 parallel p by 1 {{\n\
         \x20   with idx = {{i, j}} in [8, 8] {{\n\
         \x20     foreach i, j {{ a.at(i, j) = 1.0f; }}\n\
         \x20     foreach i(1:-1), j(1:-1) {{ a.at(i, j) = 0.0f; }}\n\
         \x20     foreach idx {{ a.at(idx) = a.at(idx) + 1.0f; }}\n\
         \x20   }}\n\
         \x20   foreach k in 8 {{ a.at(k, k) = 5.0f; }}\n\
         \x20   foreach {{m}} in [8] {{\n\
         \x20     with {{c}} in [8] {{\n\
         \x20       foreach c(0:0:2) {{ a.at(m, c) = a.at(m, c) * 2.0f; }}\n\
         \x20     }}\n\
         \x20   }}\n\
         \x20 }}\n\
         }}\n\n"
    );
}

fn shapes(out: &mut String, r: usize, n: usize, blocks: usize) {
    let _ = write!(
        out,
        "__co__ void shapes_{r}(s32 [{blocks}, {n}] &o) {{\n\
         \x20 mdspan<2> sh : [{blocks}, {n}];\n\
         \x20 ituple<2> t = {{{blocks}, {n}}};\n\
         \x20 rows = sh(0);\n\
         \x20 cols = t(1);\n\
         \x20 parallel {{x, y}} by [{blocks}, {n}] {{\n\
         \x20   s32 flat = x * cols + y;\n\
         \x20   o.at(x, y) = flat % rows + (flat >> 1) - (y << 2);\n\
         \x20 }}\n\
         }}\n\n"
    );
}

fn host_scalars(out: &mut String, r: usize, n: usize, _blocks: usize) {
    let _ = write!(
        out,
        "__co__ void capture_{r}(f32 [{n}] &a, int count, f32 k) {{\n\
         \x20 base = count * 2;\n\
         \x20 mutable f32 scale = k;\n\
         \x20 scale = scale + 1.0f;\n\
         #if BENCH_LEVEL > 0\n\
         \x20 parallel p by {n} {{\n\
         \x20   a.at(p) = a.at(p) * scale + __to<f32>(base);\n\
         \x20 }}\n\
         #else\n\
         \x20 parallel p by {n} {{ a.at(p) = 0.0f; }}\n\
         #endif\n\
         }}\n\n"
    );
}

fn stream_launch(out: &mut String, r: usize, n: usize, blocks: usize) {
    let _ = write!(
        out,
        "__co__ void scale_{r}(f32 [{blocks}, {n}] &d, stream s) {{\n\
         \x20 parallel<s> q by {blocks} : block {{\n\
         \x20   parallel t by {n} : thread {{\n\
         \x20     d.at(q, t) = d.at(q, t) * SCALE;\n\
         \x20   }}\n\
         \x20 }}\n\
         }}\n\n"
    );
}

fn reductions(out: &mut String, r: usize, n: usize, _blocks: usize) {
    let _ = write!(
        out,
        "__co__ f32 [{n}] squares_{r}(f32 [{n}] x) {{\n\
         \x20 f32 [{n}] result;\n\
         \x20 parallel p by {n} {{\n\
         \x20   f32 v = x.at(p);\n\
         \x20   result.at(p) = v * v + (v > 0.0f ? 1.0f : 0.0f);\n\
         \x20 }}\n\
         \x20 return result;\n\
         }}\n\n"
    );
}

/// Host C++ between the kernels: a helper and a driver that uses the runtime API.
fn host_code(out: &mut String, r: usize, n: usize) {
    let _ = write!(
        out,
        "static float checksum_{r}(const std::vector<float>& v) {{\n\
         \x20 float s = 0.0f;\n\
         \x20 for (float x : v) {{ s += x; }}\n\
         \x20 return s;\n\
         }}\n\n\
         void drive_{r}() {{\n\
         \x20 std::vector<float> x({n}, 1.0f), y({n}, 2.0f);\n\
         \x20 auto xs = choreo::make_spanview<1>(x.data(), {{{n}}});\n\
         \x20 auto ys = choreo::make_spanview<1>(y.data(), {{{n}}});\n\
         \x20 saxpy_{r}(ys, xs, 3.0f);\n\
         \x20 std::printf(\"round {r}: %f\\n\", checksum_{r}(y));\n\
         }}\n\n"
    );
}
