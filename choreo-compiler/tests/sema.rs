//! Semantic analysis (tier 1): accepted programs produce the expected checked-program facts
//! (levels, thread counts, symbols, access sets, streams, checks; kernel captures through the
//! lowering that computes them); every tier-1
//! rejection rule reports its error code at the right place; the fixture corpus is rejected
//! where it should be and never makes the checker panic.

use choreo_compiler::compile::Target;
use choreo_compiler::diagnostics::{Diagnostic, Diagnostics, render_human};
use choreo_compiler::frontend::parse_file;
use choreo_compiler::hir::{
    self, BinOp, BufferRef, Capture, CheckKind, Dim, ElemIndex, ElemTy, HExpr, HExprKind,
    InnerParallel, Level, LocalOrigin, LocalPlace, ParallelTree, ParamKind, Place, ReturnTy, Stmt,
    StmtKind, SymId, Ty,
};
use choreo_compiler::lower;
use choreo_compiler::preprocess::PreprocessOptions;
use choreo_compiler::sema;
use choreo_compiler::source::SourceDb;
use std::path::{Path, PathBuf};

// -- harness ------------------------------------------------------------------------------------

struct Checked {
    db: SourceDb,
    program: hir::Program,
    parse_errors: Vec<Diagnostic>,
    diags: Vec<Diagnostic>,
}

/// Parses and checks `src`; sema diagnostics are kept apart from the parser's.
fn run(src: &str) -> Checked {
    // A second line `// arch: sm_NN` (as in reject-sema fixtures) picks the architecture.
    let target = match src.lines().nth(1).and_then(|l| l.strip_prefix("// arch: ")) {
        Some(arch) => Target::Cuda(arch.trim().parse().expect("a known architecture")),
        None => Target::default(),
    };
    run_for(src, target)
}

fn run_for(src: &str, target: Target) -> Checked {
    let mut db = SourceDb::new();
    let id = db.add("test.co", src);
    let mut parse_diags = Diagnostics::new();
    let file = parse_file(&db, id, &PreprocessOptions::default(), &mut parse_diags);
    let mut diags = Diagnostics::new();
    let program = sema::check(&db, &file, target, &mut diags);
    let parse_errors = parse_diags.into_vec().into_iter().filter(|d| d.is_error()).collect();
    Checked { db, program, parse_errors, diags: diags.into_vec() }
}

/// The single function of an accepted program (no parse or sema error).
fn accept(src: &str) -> hir::Function {
    single_function(&accepted(src))
}

/// `src` checked, asserting that there was no parse or sema error.
fn accepted(src: &str) -> Checked {
    let c = run(src);
    assert!(c.parse_errors.is_empty(), "parse errors:\n{}", render_human(&c.db, &c.parse_errors));
    let errors: Vec<Diagnostic> = c.diags.iter().filter(|d| d.is_error()).cloned().collect();
    assert!(errors.is_empty(), "unexpected errors:\n{}\nin:\n{src}", render_human(&c.db, &errors));
    c
}

fn single_function(c: &Checked) -> hir::Function {
    let mut fs = c.program.functions().cloned().collect::<Vec<_>>();
    assert_eq!(fs.len(), 1, "expected one function");
    fs.remove(0)
}

/// The single function of an accepted program and the captures of its first kernel, as the
/// lowering computes them (the kernel parameters of the generated code).
fn accept_with_captures(src: &str) -> (hir::Function, Vec<Capture>) {
    let c = accepted(src);
    let function = single_function(&c);
    let mut diags = Diagnostics::new();
    let plan = lower::lower(
        &c.program,
        &lower::LowerOptions::new(Target::default(), lower::SymbolScope::default()),
        &mut diags,
    );
    assert!(diags.is_empty(), "lowering reported:\n{}", render_human(&c.db, &diags.into_vec()));
    let captures = plan.functions[0].kernels[0].captures.clone();
    (function, captures)
}

/// 1-based line and column of the first occurrence of `needle` in `src`.
fn at(src: &str, needle: &str) -> (usize, usize) {
    let offset = src.find(needle).unwrap_or_else(|| panic!("`{needle}` not in source"));
    let before = &src[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Asserts that `src` parses cleanly and that sema reports error `code` whose primary span
/// starts at the first occurrence of `needle`.
fn assert_rejects(src: &str, code: &str, needle: &str) {
    let c = run(src);
    assert!(c.parse_errors.is_empty(), "parse errors:\n{}", render_human(&c.db, &c.parse_errors));
    let want = at(src, needle);
    let found = c.diags.iter().filter(|d| d.is_error()).any(|d| {
        let file = c.db.file(d.primary.span.file);
        d.code == code && file.line_col(d.primary.span.start as usize) == want
    });
    assert!(
        found,
        "expected {code} at {}:{} (`{needle}`), got:\n{}\nin:\n{src}",
        want.0,
        want.1,
        render_human(&c.db, &c.diags)
    );
}

/// Defines a test asserting that `src` is rejected with `code` at `needle`.
macro_rules! reject {
    ($name:ident, $code:literal, $needle:literal, $src:expr) => {
        #[test]
        fn $name() {
            assert_rejects($src, $code, $needle);
        }
    };
}

/// The kernels of a function, in source order.
fn kernels(f: &hir::Function) -> Vec<&ParallelTree> {
    hir::kernels(&f.body)
}

/// The intra-block levels directly in `stmts`.
fn inner(stmts: &[Stmt]) -> Vec<&InnerParallel> {
    hir::nested_levels(stmts)
}

fn local_named<'a>(f: &'a hir::Function, name: &str) -> (hir::VarId, &'a hir::Local) {
    let (i, l) = f
        .locals
        .iter()
        .enumerate()
        .find(|(_, l)| l.name == name)
        .unwrap_or_else(|| panic!("no local `{name}`"));
    (hir::VarId(i as u32), l)
}

fn consts(dims: &[Dim]) -> Vec<Option<u64>> {
    dims.iter().map(Dim::as_const).collect()
}

// -- level inference and filling (spec §8.3, §22.1) -------------------------------------------

#[test]
fn lone_parallel_is_one_block_of_threads() {
    let f = accept("__co__ void f(f32 [512] a) {\n  parallel p by 512 { a.at(p) = 1.0f; }\n}\n");
    let k = kernels(&f);
    assert_eq!(k.len(), 1);
    assert!(k[0].block.implicit);
    assert_eq!(consts(&k[0].block.extents), vec![Some(1)]);
    assert_eq!(k[0].threads_per_block(), Dim::Const(512));
    let levels = inner(&k[0].body);
    assert_eq!(levels.len(), 1);
    assert_eq!(levels[0].level, Level::Thread);
    assert_eq!(consts(&levels[0].binder.extents), vec![Some(512)]);
    assert_eq!(levels[0].threads_per_instance(), Dim::Const(1));
    assert_eq!(f.kernel_count, 1);
    assert!(f.has_parallel);
}

#[test]
fn two_unannotated_levels_are_blocks_and_threads() {
    let f = accept(
        "__co__ void f(f32 [6, 64] a) {\n  parallel p by 6, q by 64 { a.at(p, q) = 0.0f; }\n}\n",
    );
    let k = kernels(&f)[0];
    assert!(!k.block.implicit);
    assert_eq!(consts(&k.block.extents), vec![Some(6)]);
    assert_eq!(k.threads_per_block(), Dim::Const(64));
    let levels = inner(&k.body);
    assert_eq!(levels[0].level, Level::Thread);
    assert_eq!(consts(&levels[0].binder.extents), vec![Some(64)]);
    let (p, pl) = local_named(&f, "p");
    assert_eq!(k.block.vars, vec![Some(p)]);
    assert!(matches!(pl.origin, LocalOrigin::ParallelIndex { level: Level::Block, sub: 0, .. }));
}

#[test]
fn block_leaf_gets_one_thread() {
    let f = accept("__co__ void f(int a) {\n  parallel p by 6 : block { println(p); }\n}\n");
    let k = kernels(&f)[0];
    assert_eq!(consts(&k.block.extents), vec![Some(6)]);
    assert_eq!(k.threads_per_block(), Dim::Const(1));
    assert!(inner(&k.body).is_empty());
}

#[test]
fn three_unannotated_levels_are_block_group_thread() {
    let f = accept(
        "__co__ void f(f32 [2, 4, 32] a) {\n  parallel x by 2, y by 4, z by 32 { a.at(x, y, z) = 1.0f; }\n}\n",
    );
    let k = kernels(&f)[0];
    assert_eq!(consts(&k.block.extents), vec![Some(2)]);
    assert_eq!(k.threads_per_block(), Dim::Const(128));
    let g = inner(&k.body);
    assert_eq!(g[0].level, Level::Group);
    assert_eq!(g[0].threads_per_instance(), Dim::Const(32));
    let t = inner(&g[0].body);
    assert_eq!(t[0].level, Level::Thread);
    assert_eq!(t[0].threads_per_instance(), Dim::Const(1));
}

#[test]
fn group_leaf_gets_a_warp_of_threads() {
    let f = accept(
        "__co__ void f(f32 [2, 4] a) {\n  parallel p by 2 : block {\n    parallel g by 4 : group { a.at(p, g) = 1.0f; }\n  }\n}\n",
    );
    let k = kernels(&f)[0];
    assert_eq!(k.threads_per_block(), Dim::Const(128));
    let g = inner(&k.body);
    assert_eq!(g[0].level, Level::Group);
    assert_eq!(g[0].threads_per_instance(), Dim::Const(32));
}

#[test]
fn unannotated_parent_of_thread_is_block() {
    let f = accept(
        "__co__ void f(f32 [4, 2, 8, 32] a) {\n  parallel {gx, gy} by [4, 2]\n    parallel {ty, tx} by [8, 32] : thread { a.at(gx, gy, ty, tx) = 1.0f; }\n}\n",
    );
    let k = kernels(&f)[0];
    assert_eq!(consts(&k.block.extents), vec![Some(4), Some(2)]);
    assert_eq!(k.threads_per_block(), Dim::Const(256));
    let t = inner(&k.body);
    assert_eq!(t[0].binder.vars.len(), 2);
    let (tx, l) = local_named(&f, "tx");
    assert_eq!(t[0].binder.vars[1], Some(tx));
    assert!(matches!(l.origin, LocalOrigin::ParallelIndex { level: Level::Thread, sub: 1, .. }));
    // Mixing annotated and unannotated levels warns.
    let c = run(
        "__co__ void f(f32 [4, 8] a) {\n  parallel p by 4 { parallel q by 8 : thread { a.at(p, q) = 1.0f; } }\n}\n",
    );
    assert!(c.diags.iter().any(|d| d.code == "W0601"));
}

#[test]
fn sibling_inner_levels_share_the_block_size() {
    let f = accept(
        "__co__ void f(f32 [2, 32] a) {\n  parallel p by 2 : block {\n    parallel {x, y} by [4, 8] : thread { a.at(p, x * 8 + y) = 1.0f; }\n    parallel t by 32 : thread { a.at(p, t) = 2.0f; }\n  }\n}\n",
    );
    let k = kernels(&f)[0];
    assert_eq!(k.threads_per_block(), Dim::Const(32));
    assert_eq!(inner(&k.body).len(), 2);
}

#[test]
fn symbolic_thread_count_gets_an_entry_check() {
    let f = accept("__co__ void f(f32 [N] a) {\n  parallel p by N { a.at(p) = 1.0f; }\n}\n");
    let k = kernels(&f)[0];
    assert_eq!(k.threads_per_block(), Dim::Sym(SymId(0)));
    assert!(f.entry_checks.iter().any(|c| matches!(
        &c.kind,
        CheckKind::MaxThreads { limit: 1024, threads } if threads.kind == HExprKind::SymDim(SymId(0))
    )));
    assert!(f.entry_checks.iter().any(|c| matches!(
        &c.kind,
        CheckKind::Positive(e) if e.kind == HExprKind::SymDim(SymId(0))
    )));
}

#[test]
fn bound_from_a_host_local_is_checked_before_the_launch() {
    let f = accept(
        "__co__ void f(f32 [64] a, int n) {\n  mutable int m = n;\n  m = m + 1;\n  parallel p by m : block { a.at(p) = 1.0f; }\n}\n",
    );
    let k = kernels(&f)[0];
    assert!(k.launch_checks.iter().any(|c| matches!(c.kind, CheckKind::Positive(_))));
    assert!(!f.entry_checks.iter().any(|c| matches!(c.kind, CheckKind::Positive(_))));
}

// -- parameters, symbols, checks (spec §7.2, §19.2) -------------------------------------------

#[test]
fn symbolic_dims_are_sorted_and_bound_from_the_first_mention() {
    let f = accept(
        "__co__ f32 [M, N] mm(f32 [M, K] a, f32 [K, N] b, f32 [M] bias) {\n  f32 [M, N] c;\n  parallel i by M : block { parallel j by N : thread { c.at(i, j) = a.at(i, 0) * b.at(0, j) + bias.at(i); } }\n  return c;\n}\n",
    );
    let names: Vec<&str> = f.sym_dims.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["K", "M", "N"]);
    let bound: Vec<(u32, u32)> =
        f.sym_dims.iter().map(|s| (s.bound_from.0.0, s.bound_from.1)).collect();
    assert_eq!(bound, [(0, 1), (0, 0), (1, 1)]);
    let consistent: Vec<(u32, u32, u32)> = f
        .entry_checks
        .iter()
        .filter_map(|c| match c.kind {
            CheckKind::SymbolConsistent { sym, param, dim } => Some((sym.0, param.0, dim)),
            _ => None,
        })
        .collect();
    assert_eq!(consistent, [(0, 1, 0), (1, 2, 0)]);
    assert_eq!(
        f.ret,
        ReturnTy::Spanned { elem: ElemTy::F32, dims: vec![Dim::Sym(SymId(1)), Dim::Sym(SymId(2))] }
    );
    let (_, c) = local_named(&f, "c");
    assert!(c.returned);
    assert_eq!(c.place, LocalPlace::GlobalBuffer);
}

#[test]
fn static_extents_get_entry_checks_with_the_spec_message() {
    let f = accept(
        "__co__ void f(f32 [8, ?] x, s32 [4] &y) {\n  parallel p by 4 { y.at(p) = 1; }\n}\n",
    );
    let c = &f.entry_checks[0];
    assert!(matches!(
        c.kind,
        CheckKind::ParamExtent { param: hir::ParamId(0), dim: 0, expected: 8 }
    ));
    assert_eq!(
        c.message,
        "shape inconsistent on the 1st parameter ('x', dim: 0): expect: 8, but got"
    );
    assert_eq!(f.params[0].dims[1], Dim::Dynamic { param: hir::ParamId(0), dim: 1 });
    assert_eq!(f.params[1].kind, ParamKind::HostInOut);
}

#[test]
fn parameter_kinds_and_unnamed_parameters() {
    let f = accept(
        "__co__ void f(global f16 [??, 4] g, f32 [4] &, int, bool b, stream s, u8 [2]) {\n  println(b);\n}\n",
    );
    let kinds: Vec<ParamKind> = f.params.iter().map(|p| p.kind).collect();
    assert_eq!(
        kinds,
        [
            ParamKind::Global,
            ParamKind::HostInOut,
            ParamKind::Scalar(ElemTy::S32),
            ParamKind::Scalar(ElemTy::Bool),
            ParamKind::Stream,
            ParamKind::HostIn
        ]
    );
    let names: Vec<&str> = f.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["g", "anon_0", "anon_1", "b", "s", "anon_2"]);
    assert_eq!(f.params[0].unbounded, [true, false]);
    assert!(!f.has_parallel);
    assert_eq!(f.kernel_count, 0);
    assert_eq!(
        f.co_signature,
        "__co__ void f(global f16 [??, 4] g, f32 [4] &, int, bool b, stream s, u8 [2])"
    );
}

// -- access sets, streams, async, captures (spec §8.5, §8.6) ---------------------------------

#[test]
fn access_sets_follow_reads_and_writes_everywhere() {
    let f = accept(
        "__co__ void f(global f32 [8] r, global f32 [8] w, global f32 [8] rw, f32 [8] unused) {\n  parallel p by 8 {\n    w.at(p) = r.at(p);\n    rw.at(p) += 1.0f;\n  }\n}\n",
    );
    let acc: Vec<(bool, bool)> = f.params.iter().map(|p| (p.access.read, p.access.write)).collect();
    assert_eq!(acc, [(true, false), (false, true), (true, true), (false, false)]);
}

#[test]
fn async_launches_and_stream_bindings() {
    let f = accept(
        "__co__ void f(global f32 [8] a, stream s0, stream s1) {\n  parallel.async<s1> p by 8 : block { a.at(p) = 1.0f; }\n  parallel<s0> q by 2, t by 4 { a.at(q * 4 + t) = 2.0f; }\n}\n",
    );
    assert!(f.is_async);
    assert_eq!(f.streams, [hir::ParamId(1), hir::ParamId(2)]);
    let k = kernels(&f);
    assert_eq!((k[0].id, k[1].id), (hir::KernelId(0), hir::KernelId(1)));
    assert_eq!(k[0].stream, Some(hir::ParamId(2)));
    assert!(k[0].is_async);
    assert_eq!(k[1].stream, Some(hir::ParamId(1)));
    assert!(!k[1].is_async);
    assert_eq!(f.kernel_count, 2);
}

#[test]
fn async_launch_with_inout_parameter_still_synchronises() {
    let f = accept("__co__ void f(f32 [8] &a) {\n  parallel.async p by 8 { a.at(p) = 1.0f; }\n}\n");
    let k = kernels(&f)[0];
    assert!(k.is_async);
}

#[test]
fn kernels_capture_only_what_they_use() {
    let (f, captures) = accept_with_captures(
        "__co__ void f(f32 [N, 4] a, f32 [N] unused, int n, int m, f32 [?] b) {\n  k = n + m;\n  mutable int r = 0;\n  f32 [N] tmp;\n  parallel p by N { tmp.at(p) = a.at(p, 0) + __to<f32>(k + r) + b.at(0); }\n}\n",
    );
    let (kv, _) = local_named(&f, "k");
    let (rv, _) = local_named(&f, "r");
    let (tmp, _) = local_named(&f, "tmp");
    let p = hir::ParamId;
    assert_eq!(
        captures,
        [
            Capture::Param(p(0)),
            Capture::Param(p(4)),
            Capture::Var(kv),
            Capture::Var(rv),
            Capture::Var(tmp),
            Capture::Sym(SymId(0)),
            Capture::Extent(p(4), 0)
        ]
    );
}

#[test]
fn host_level_dmas_of_views_padded_or_transposed_are_kernels_of_their_own() {
    // Spec §14.6: a whole-buffer copy stays a host copy; a view, `dma.pad` and `dma.transp`
    // become one-DMA kernels shared by the whole grid. `=> global` allocates the padded or
    // transposed shape.
    let f = accept(
        "__co__ void f(global f32 [16, 8] a, global f32 [16, 8] b) {\n  dma.copy a => b;\n  dma.copy a.subspan(4, 8).at(1, 0) => b.subspan(4, 8).at(0, 0);\n  p = dma.pad<{1, 0}, {2, 3}, {0, 0}, 0.0f> a => global;\n  t = dma.transp<1, 0> a => global;\n}\n",
    );
    assert!(f.has_parallel);
    assert_eq!(f.kernel_count, 3);
    assert!(f.body.iter().any(|s| matches!(s.kind, StmtKind::HostCopy { .. })));
    let ks = kernels(&f);
    assert_eq!(ks.len(), 3);
    for k in &ks {
        assert_eq!(k.origin, hir::KernelOrigin::HostDma);
        assert!(!k.is_async && k.stream.is_none());
        let [Stmt { kind: StmtKind::Dma(dma), .. }] = k.body.as_slice() else {
            panic!("a host-level DMA's kernel is that one DMA: {:?}", k.body)
        };
        assert_eq!(dma.participants, hir::Participants::Grid);
    }
    let shape = |name: &str| match &local_named(&f, name).1.ty {
        Ty::Spanned(t) => consts(&t.dims),
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(shape("p__buf"), [Some(19), Some(11)]);
    assert_eq!(shape("t__buf"), [Some(8), Some(16)]);
}

#[test]
fn host_foreach_loop_variable_is_captured_by_value() {
    let (f, captures) = accept_with_captures(
        "__co__ void rows(f32 [4, 32] a) {\n  foreach {r} in [4] {\n    parallel t by 32 { a.at(r, t) = a.at(r, t) * 2.0f; }\n  }\n}\n",
    );
    let (r, rl) = local_named(&f, "r");
    assert_eq!(rl.place, LocalPlace::HostScalar);
    assert!(captures.contains(&Capture::Var(r)));
    // the host loop: Block[Let r = 0, For r in 0..4 { launch }]
    let StmtKind::Block(b) = &f.body[0].kind else { panic!("expected a block") };
    assert!(matches!(&b[0].kind, StmtKind::Let { var, .. } if *var == r));
    let StmtKind::For { var, end, step: 1, reset: true, .. } = &b[1].kind else {
        panic!("expected a loop")
    };
    assert_eq!(*var, r);
    assert_eq!(end.kind, HExprKind::Int(4));
}

// -- types, folding, scopes ---------------------------------------------------------------------

fn let_init<'a>(f: &'a hir::Function, name: &str) -> &'a HExpr {
    let (v, _) = local_named(f, name);
    fn find(stmts: &[Stmt], v: hir::VarId) -> Option<&HExpr> {
        for s in stmts {
            match &s.kind {
                StmtKind::Let { var, init: Some(e) } if *var == v => return Some(e),
                StmtKind::Block(b) => {
                    if let Some(e) = find(b, v) {
                        return Some(e);
                    }
                }
                StmtKind::Parallel(p) => {
                    if let Some(e) = find(&p.body, v) {
                        return Some(e);
                    }
                }
                StmtKind::InnerParallel(p) => {
                    if let Some(e) = find(&p.body, v) {
                        return Some(e);
                    }
                }
                _ => {}
            }
        }
        None
    }
    find(&f.body, v).unwrap_or_else(|| panic!("no initialiser of `{name}`"))
}

#[test]
fn constant_folding_truncates_and_widens() {
    let f = accept(
        "__co__ void f(int n) {\n  a = -7 / 2;\n  b = -7 % 2;\n  c = 2147483647 + 1;\n  d = cdiv(10, 4);\n  e = |f32| * 2;\n  println(a, b, c, d, e);\n}\n",
    );
    let lit = |name: &str| {
        let e = let_init(&f, name);
        (e.kind.clone(), e.ty.clone())
    };
    assert_eq!(lit("a"), (HExprKind::Int(-3), Ty::Scalar(ElemTy::S32)));
    assert_eq!(lit("b"), (HExprKind::Int(-1), Ty::Scalar(ElemTy::S32)));
    assert_eq!(lit("c"), (HExprKind::Int(2147483648), Ty::Scalar(ElemTy::S64)));
    assert_eq!(lit("d").0, HExprKind::Int(3));
    assert_eq!(lit("e").0, HExprKind::Int(8));
}

#[test]
fn inference_uses_the_promoted_type() {
    let f = accept(
        "__co__ void f(int n, f32 k, u32 u, f16 h) {\n  x = n * k;\n  y = n + u;\n  z = h * 2.0f;\n  w = h + h;\n  println(x, y, z, w);\n}\n",
    );
    assert_eq!(local_named(&f, "x").1.ty, Ty::Scalar(ElemTy::F32));
    assert_eq!(local_named(&f, "y").1.ty, Ty::Scalar(ElemTy::U32));
    assert_eq!(local_named(&f, "z").1.ty, Ty::Scalar(ElemTy::F32));
    assert_eq!(local_named(&f, "w").1.ty, Ty::Scalar(ElemTy::F16));
    // The int operand is converted explicitly to the common type.
    let HExprKind::Binary { op: BinOp::Mul, lhs, .. } = &let_init(&f, "x").kind else { panic!() };
    assert!(matches!(lhs.kind, HExprKind::Cast { to: ElemTy::F32, implicit: true, .. }));
}

#[test]
fn bounded_values_keep_their_bounded_type() {
    let f = accept(
        "__co__ void f(s32 [4] o) {\n  parallel p by 4 {\n    int h = #p;\n    s32 v = p;\n    q = p * 2;\n    println(\"p=\", p, \" h=\", h, \" bare=\", __to<s32>(p));\n    o.at(p) = v + q;\n  }\n}\n",
    );
    assert_eq!(local_named(&f, "h").1.ty, Ty::BoundedInt);
    assert_eq!(local_named(&f, "v").1.ty, Ty::Scalar(ElemTy::S32));
    assert_eq!(local_named(&f, "q").1.ty, Ty::BoundedInt);
    let k = kernels(&f)[0];
    let t = inner(&k.body)[0];
    let print = t.body.iter().find_map(|s| match &s.kind {
        StmtKind::Print { newline: true, args } => Some(args),
        _ => None,
    });
    let tys: Vec<Ty> = print.expect("println").iter().map(|a| a.ty.clone()).collect();
    assert_eq!(
        tys,
        [
            Ty::String,
            Ty::BoundedInt,
            Ty::String,
            Ty::BoundedInt,
            Ty::String,
            Ty::Scalar(ElemTy::S32)
        ]
    );
}

#[test]
fn spec_scoping_example_is_accepted_with_lexical_scopes() {
    let f = accept(
        "__co__ void scopes(f32 [4] a, int n) {\n  x = 1;\n  mutable y = 0;\n  if (n > 0) {\n    y = 2;\n    int x = 3;\n    z = x + y;\n    println(z);\n  }\n  parallel p by 4 { a.at(p) = __to<f32>(x + y); }\n}\n",
    );
    let xs: Vec<&hir::Local> = f.locals.iter().filter(|l| l.name == "x").collect();
    assert_eq!(xs.len(), 2);
    let StmtKind::If { then_body, .. } = &f.body[2].kind else { panic!("expected if") };
    assert!(matches!(&then_body[0].kind, StmtKind::Assign { target: Place::Var(v), .. }
        if f.locals[v.0 as usize].name == "y"));
}

#[test]
fn with_and_foreach_desugar_into_loops() {
    let f = accept(
        "__co__ void inner(f32 [8, 8] a) {\n  parallel p by 1 {\n    with {i, j} in [8, 8] {\n      foreach i(1:-1), j(1:-1) { a.at(i, j) = 0.0f; }\n      foreach c = i(2:) { a.at(c, 0) = 1.0f; }\n    }\n  }\n}\n",
    );
    let t = inner(&kernels(&f)[0].body)[0];
    let StmtKind::Block(with) = &t.body[0].kind else { panic!("with block") };
    assert!(matches!(with[0].kind, StmtKind::Let { .. }));
    assert!(matches!(with[1].kind, StmtKind::Let { .. }));
    let StmtKind::Block(fe) = &with[2].kind else { panic!("foreach block") };
    let StmtKind::For { var, start, end, body, reset: true, .. } = &fe[0].kind else {
        panic!("outer loop")
    };
    assert_eq!(*var, local_named(&f, "i").0);
    assert_eq!(start.kind, HExprKind::Int(1));
    assert_eq!(end.kind, HExprKind::Int(7));
    assert!(matches!(&body[0].kind, StmtKind::For { var, .. } if *var == local_named(&f, "j").0));
    let StmtKind::Block(fe2) = &with[3].kind else { panic!("second foreach") };
    let StmtKind::For { var, start, reset: false, .. } = &fe2[0].kind else { panic!("c loop") };
    assert!(matches!(local_named(&f, "c").1.origin, LocalOrigin::RangeLocal { .. }));
    assert_eq!(*var, local_named(&f, "c").0);
    assert_eq!(start.kind, HExprKind::Int(2));
}

#[test]
fn returns_auto_scalar_and_spanned() {
    let f = accept("__co__ auto f(int n) {\n  if (n > 0) return 3;\n  return 2.0f;\n}\n");
    assert_eq!(f.ret, ReturnTy::Scalar(ElemTy::S32));
    let c = run("__co__ auto f(int n) {\n  if (n > 0) return 3;\n  return 2.5f;\n}\n");
    assert!(c.diags.iter().any(|d| d.code == "W0401"), "lossy auto return warns");
    let f = accept(
        "__co__ auto g(f32 [N, 4] a) {\n  parallel p by N { a.at(p, 0) = 1.0f; }\n  return a;\n}\n",
    );
    assert_eq!(
        f.ret,
        ReturnTy::Spanned { elem: ElemTy::F32, dims: vec![Dim::Sym(SymId(0)), Dim::Const(4)] }
    );
    assert!(f.params[0].access.read && f.params[0].access.write);
    let f = accept("__co__ auto v(int n) {\n  println(n);\n}\n");
    assert_eq!(f.ret, ReturnTy::Void);
}

#[test]
fn global_buffer_declarations_with_initialisers() {
    let f = accept(
        "__co__ f32 [M, 2] f(f32 [M] a) {\n  f32 [M, 2] out {0};\n  f32 [a.span] t;\n  parallel p by M { out.at(p, 0) = a.at(p); t.at(p) = 1.0f; }\n  return out;\n}\n",
    );
    let StmtKind::DeclBuffer { var, init: Some(init) } = &f.body[0].kind else { panic!() };
    assert_eq!(*var, local_named(&f, "out").0);
    assert_eq!(init.ty, Ty::Scalar(ElemTy::F32));
    let (_, t) = local_named(&f, "t");
    assert!(matches!(&t.ty, Ty::Spanned(s) if s.dims == vec![Dim::Sym(SymId(0))]));
    assert!(t.access.write && !t.access.read && !t.returned);
}

#[test]
fn element_access_flattens_bounded_ituples() {
    let f = accept(
        "__co__ void f(f32 [2, 8] a) {\n  parallel t = {x, y} by [2, 8] { a.at(t) = 1.0f; }\n}\n",
    );
    let th = inner(&kernels(&f)[0].body)[0];
    let StmtKind::Assign {
        target: Place::Elem { buffer: BufferRef::Param(_), index: ElemIndex::Coords(indices), .. },
        ..
    } = &th.body[0].kind
    else {
        panic!("element assignment")
    };
    let vars: Vec<&HExprKind> = indices.iter().map(|e| &e.kind).collect();
    assert_eq!(
        vars,
        [&HExprKind::Var(local_named(&f, "x").0), &HExprKind::Var(local_named(&f, "y").0)]
    );
}

#[test]
fn implicit_conversion_warnings() {
    let c = run("__co__ void f(f32 k) {\n  s32 t = k;\n  u32 u = t;\n  f32 ok = 1;\n}\n");
    let w: Vec<&str> = c.diags.iter().map(|d| d.code).collect();
    assert_eq!(w, ["W0401", "W0402"]);
}

#[test]
fn host_mutable_assigned_in_a_kernel_warns() {
    let c = run(
        "__co__ void f(f32 [4] a) {\n  mutable int r = 0;\n  parallel p by 4 { r = 1; a.at(p) = 1.0f; }\n}\n",
    );
    assert!(c.diags.iter().any(|d| d.code == "W0602" && !d.is_error()));
    assert!(!c.diags.iter().any(Diagnostic::is_error));
}

#[test]
fn maxnreg_next_to_launch_bounds_warns_and_cooperative_inner_level_warns() {
    let c = run(
        "__co__ void f(f32 [8, 32] a) {\n  [[launch_bounds(256, 2)]] [[maxnreg(128)]] parallel p by 8 : block {\n    parallel t by 32 : thread<cooperative> { a.at(p, t) = 1.0f; }\n  }\n}\n",
    );
    let codes: Vec<&str> = c.diags.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["W0603", "W0604"], "{codes:?}");
    assert!(!c.diags.iter().any(Diagnostic::is_error));
}

#[test]
fn compile_time_println_is_a_note_and_emits_no_code() {
    let c = run(
        "__co__ void f(f32 [N, 64] a, int n) {\n  s : a.span;\n  println!(\"tile \", 64 / 4, \" of \", s, \" n=\", n, \" \", {1, 2});\n  parallel p by 4 : thread { a.at(p, 0) = 1.0f; }\n}\n",
    );
    let notes: Vec<String> =
        c.diags.iter().filter(|d| d.code == "N0701").map(|d| d.message.clone()).collect();
    assert_eq!(notes, ["tile 16 of [N, 64] n=? {1, 2}"]);
    let codes: Vec<&str> = c.diags.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["W0705", "N0701"], "{codes:?}");
}

#[test]
fn unsupported_constructs_get_one_e0901_and_checking_continues() {
    let c = run(
        "__co__ void f(f32 [4] a, int n) {\n  parallel p by 4 : block {\n    sync.fence : cluster;\n    a.at(0) = 1.0f;\n    n = 2;\n  }\n}\n",
    );
    let codes: Vec<&str> = c.diags.iter().filter(|d| d.is_error()).map(|d| d.code).collect();
    assert_eq!(codes, ["E0901", "E0403"]);
}

#[test]
fn items_keep_source_order_and_host_text() {
    let c = run(
        "#include <cstdio>\n__device__ int twice(int x) { return 2 * x; }\n__co__ void f(int n) {\n  println(n);\n}\n__cok__ { int y; }\nint main() { f(1); }\n",
    );
    assert!(c.parse_errors.is_empty() && !c.diags.iter().any(Diagnostic::is_error));
    let kinds: Vec<&str> = c
        .program
        .items
        .iter()
        .map(|i| match i {
            hir::Item::Host(_) => "host",
            hir::Item::Device(_) => "device",
            hir::Item::Cok { .. } => "cok",
            hir::Item::Function(_) => "function",
        })
        .collect();
    let functions = kinds.iter().filter(|k| **k == "function").count();
    assert_eq!(functions, 1);
    assert_eq!(kinds.first(), Some(&"host"));
    assert_eq!(kinds.last(), Some(&"host"));
    assert!(kinds.contains(&"device") && kinds.contains(&"cok"));
}

#[test]
fn scalar_declaration_forms() {
    let f = accept(
        "__co__ void f(int n) {\n  mutable int c;\n  s32 v;\n  f32 acc = 0.0f;\n  int k = n + 1;\n  c = k;\n  v = c;\n  acc += 1.5f;\n  println(c, v, acc);\n}\n",
    );
    let m = |name: &str| local_named(&f, name).1.mutable;
    assert!(m("c") && m("v") && m("acc") && !m("k"));
    assert_eq!(local_named(&f, "k").1.place, LocalPlace::HostScalar);
    assert!(matches!(f.body[0].kind, StmtKind::Let { init: None, .. }));
}

fn cuda(arch: &str) -> Target {
    Target::Cuda(arch.parse().expect("known arch"))
}

/// The error codes and messages of `src` checked for `target`.
fn errors_for(src: &str, target: Target) -> Vec<(&'static str, String)> {
    let c = run_for(src, target);
    assert!(c.parse_errors.is_empty(), "{}", render_human(&c.db, &c.parse_errors));
    c.diags.iter().filter(|d| d.is_error()).map(|d| (d.code, d.message.clone())).collect()
}

const GROUP4: &str = "__co__ void f(global s32 [2, 256] a) {\n  parallel b by 2 : block {\n    parallel w by 2 : group-4, t by 128 : thread { a.at(b, w * 128 + t) = w; }\n  }\n}\n";
const CLUSTER: &str = "__co__ void f(global s32 [8] a) {\n  parallel c by 2 : cluster {\n    parallel b by 8 : block { a.at(b) = c; }\n  }\n}\n";
const SETREG: &str = "__co__ void f(global s32 [256] a) {\n  parallel b by 1 : block {\n    parallel w by 2 : group-4, t by 128 : thread {\n      inthreads.async (w == 0) { call croq::cuda::setreg_dec(40); }\n      inthreads.async (w == 1) { call croq::cuda::setreg_inc(232); a.at(t) = 1; }\n    }\n  }\n}\n";

#[test]
fn group4_cluster_and_setmaxnreg_are_gated_by_the_architecture() {
    for (src, name, min) in
        [(GROUP4, "group-4 level", "sm_90a"), (CLUSTER, "cluster level", "sm_90")]
    {
        assert_eq!(errors_for(src, cuda("sm_90a")), []);
        assert_eq!(errors_for(src, Target::Cpu), []);
        for arch in ["sm_80", "sm_86"] {
            let errors = errors_for(src, cuda(arch));
            assert_eq!(
                errors,
                [("E0805", format!("{name} is not supported by the target architecture: {arch}"))],
                "{src}"
            );
            let c = run_for(src, cuda(arch));
            let text = render_human(&c.db, &c.diags);
            assert!(text.contains(&format!("needs {min}")), "{text}");
        }
    }
    // Clusters exist on every sm_90+ architecture, warpgroups only on sm_90a.
    assert_eq!(errors_for(CLUSTER, cuda("sm_90")), []);
    assert_eq!(errors_for(CLUSTER, cuda("sm_100")), []);
    assert_eq!(errors_for(GROUP4, cuda("sm_90"))[0].0, "E0805");
    // setmaxnreg: the instruction on sm_90a, nothing below sm_90 and on the CPU, an error on
    // the other sm_90+ architectures (warpgroups are gated too there).
    let setreg = |target: Target| -> usize {
        let c = run_for(SETREG, target);
        let f = single_function(&c);
        struct Count(usize);
        impl<'a> hir::visit::Visitor<'a> for Count {
            fn stmt(&mut self, s: &'a Stmt) -> hir::visit::Walk {
                self.0 += usize::from(matches!(s.kind, StmtKind::SetMaxNReg { .. }));
                hir::visit::Walk::Continue
            }
        }
        let mut count = Count(0);
        hir::visit::walk_stmts(&mut count, &f.body);
        count.0
    };
    assert_eq!(errors_for(SETREG, cuda("sm_90a")), []);
    assert_eq!(setreg(cuda("sm_90a")), 2);
    assert_eq!(setreg(Target::Cpu), 0);
    assert_eq!(errors_for(SETREG, Target::Cpu), []);
    let setreg_only = "__co__ void f(global s32 [32] a) {\n  parallel b by 1 : block {\n    call croq::cuda::setreg_dec(40);\n    parallel t by 32 : thread { a.at(t) = 1; }\n  }\n}\n";
    assert_eq!(errors_for(setreg_only, cuda("sm_86")), []);
    assert_eq!(errors_for(setreg_only, cuda("sm_70")), []);
    for arch in ["sm_90", "sm_100", "sm_120"] {
        let errors = errors_for(setreg_only, cuda(arch));
        assert_eq!(errors.len(), 1, "{arch}: {errors:?}");
        assert_eq!(errors[0].0, "E0805");
        assert!(errors[0].1.contains("setmaxnreg requires sm_90a"), "{errors:?}");
    }
}

#[test]
fn warp_specialised_kernels_get_one_block_per_multiprocessor() {
    let c = run_for(SETREG, cuda("sm_90a"));
    let f = single_function(&c);
    let tree = f
        .body
        .iter()
        .find_map(|s| match &s.kind {
            StmtKind::Parallel(t) => Some(t.clone()),
            _ => None,
        })
        .expect("a kernel");
    let b = tree.attrs.launch_bounds.expect("launch bounds");
    assert_eq!((b.max_threads, b.min_blocks), (256, Some(1)));
    // Written launch bounds win.
    let written = SETREG
        .replace("parallel b by 1 : block", "[[launch_bounds(256, 2)]] parallel b by 1 : block");
    let c = run_for(&written, cuda("sm_90a"));
    let f = single_function(&c);
    let b = f
        .body
        .iter()
        .find_map(|s| match &s.kind {
            StmtKind::Parallel(t) => t.attrs.launch_bounds,
            _ => None,
        })
        .expect("launch bounds");
    assert_eq!((b.max_threads, b.min_blocks), (256, Some(2)));
}

#[test]
fn cluster_levels_carry_their_binder() {
    let c = run_for(CLUSTER, cuda("sm_90a"));
    let f = single_function(&c);
    let tree = f
        .body
        .iter()
        .find_map(|s| match &s.kind {
            StmtKind::Parallel(t) => Some(t.clone()),
            _ => None,
        })
        .expect("a kernel");
    let cluster = tree.cluster.expect("a cluster level");
    assert_eq!(cluster.extents, [hir::Dim::Const(2)]);
    assert!(cluster.vars[0].is_some());
}

#[test]
fn a_misplaced_cluster_item_draws_its_error_and_no_level_warning() {
    let src = "__co__ void f(s32 [8] &o) {\n  parallel b by 8 : block, c by 2 : cluster {\n    \
               o.at(b) = 1;\n  }\n}\n";
    assert_rejects(src, "E0619", "c by 2");
    let c = run_for(src, cuda("sm_90a"));
    let codes: Vec<&str> = c.diags.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["E0619"], "{}", render_human(&c.db, &c.diags));
}

#[test]
fn setmaxnreg_under_a_condition_that_splits_a_warpgroup_warns() {
    let roles = |pred: &str| {
        format!(
            "__co__ void f(global s32 [256] a) {{\n  parallel p by 1 : block {{\n    parallel w by 2 \
             : group-4, t by 128 : thread {{\n      inthreads.async ({pred}) {{\n        call \
             croq::cuda::setreg_dec(40);\n        a.at(w * 128 + t) = 1;\n      }}\n    }}\n  }}\n}}\n"
        )
    };
    let w0605 = |src: &str| {
        let c = run_for(src, cuda("sm_90a"));
        let errors: Vec<_> = c.diags.iter().filter(|d| d.is_error()).collect();
        assert!(errors.is_empty(), "{}", render_human(&c.db, &c.diags));
        c.diags.iter().filter(|d| d.code == "W0605").count()
    };
    assert_eq!(w0605(&roles("w == 0")), 0, "whole warpgroups: no warning");
    assert_eq!(w0605(&roles("w == 0 && t < 32")), 1, "one warp of a warpgroup");
}

// -- rejections: names, declarations, types ---------------------------------------------------

reject!(undeclared_name, "E0401", "y + 1", "__co__ void f(int n) {\n  x = y + 1;\n}\n");
reject!(
    redeclared_in_same_scope,
    "E0402",
    "a = 2",
    "__co__ void f(int n) {\n  int a = 1;\n  int a = 2;\n}\n"
);
reject!(
    redeclared_in_binder_body,
    "E0402",
    "p = 3",
    "__co__ void f(int n) {\n  parallel p by 4 { int p = 3; }\n}\n"
);
reject!(param_local_clash, "E0402", "b = 1", "__co__ void f(int b) {\n  int b = 1;\n}\n");
reject!(symbol_named_like_local, "E0402", "M = 1", "__co__ void f(f32 [M] a) {\n  int M = 1;\n}\n");
reject!(
    immutable_reassigned,
    "E0403",
    "c = 2",
    "__co__ void f(int n) {\n  int c = 1;\n  c = 2;\n}\n"
);
reject!(
    outer_immutable_reassigned_by_bare_assignment,
    "E0403",
    "x = 3",
    "__co__ void f(int n) {\n  x = 1;\n  if (n > 0) { x = 3; println(x); }\n}\n"
);
reject!(parameter_reassigned, "E0403", "n = 3", "__co__ void f(int n) {\n  n = 3;\n}\n");
reject!(
    bounded_reassigned,
    "E0403",
    "p = 3",
    "__co__ void f(int n) {\n  parallel p by 4 { p = 3; }\n}\n"
);
reject!(int_without_initialiser, "E0404", "x;", "__co__ void f(int n) {\n  int x;\n}\n");
reject!(bool_without_initialiser, "E0404", "b;", "__co__ void f(int n) {\n  bool b;\n}\n");
reject!(untyped_mutable, "E0405", "d;", "__co__ void f(int n) {\n  mutable d;\n}\n");
reject!(bool_from_int, "E0406", "0;", "__co__ void f(int n) {\n  bool b = 0;\n}\n");
reject!(not_on_int, "E0407", "!n", "__co__ void f(int n) {\n  b = !n;\n}\n");
reject!(and_on_ints, "E0407", "n && m", "__co__ void f(int n, int m) {\n  b = n && m;\n}\n");
reject!(not_over_bitand, "E0407", "!b & c", "__co__ void f(bool b, bool c) {\n  d = !b & c;\n}\n");
reject!(shift_by_variable, "E0408", "k;", "__co__ void f(int n, int k) {\n  x = n << k;\n}\n");
reject!(float_remainder, "E0409", "x % 2.0f", "__co__ void f(f32 x) {\n  y = x % 2.0f;\n}\n");
reject!(
    float_remainder_assign,
    "E0409",
    "a.at(p) %=",
    "__co__ void f(f32 [4] a) {\n  parallel p by 4 { a.at(p) %= 2.0f; }\n}\n"
);
reject!(constant_division_by_zero, "E0410", "4 / 0", "__co__ void f(int n) {\n  x = 4 / 0;\n}\n");
reject!(
    constant_cdiv_by_zero,
    "E0410",
    "cdiv(n, 0)",
    "__co__ void f(int n) {\n  x = cdiv(n, 0);\n}\n"
);
reject!(f16_with_bf16, "E0411", "h + b", "__co__ void f(f16 h, bf16 b) {\n  x = h + b;\n}\n");
reject!(string_variable, "E0412", "\"abc\"", "__co__ void f(int n) {\n  s = \"abc\";\n}\n");
reject!(
    pointer_variable,
    "E0412",
    "&v",
    "__co__ void f(s32 [4] o) {\n  parallel p by 4 { s32 v = p; q = &v; o.at(p) = v; }\n}\n"
);
reject!(
    spanned_reassigned,
    "E0413",
    "b = a",
    "__co__ void f(f32 [8] a) {\n  f32 [8] b;\n  b = a;\n}\n"
);
reject!(
    type_changing_reassignment,
    "E0413",
    "true",
    "__co__ void f(int n) {\n  mutable int x = 0;\n  x = true;\n}\n"
);
reject!(
    float_index,
    "E0414",
    "1.5f",
    "__co__ void f(f32 [4] a) {\n  parallel p by 4 { a.at(1.5f) = 0.0f; }\n}\n"
);
reject!(float_extent, "E0414", "2.0", "__co__ void f(int n) {\n  f32 [2.0] b;\n}\n");
reject!(
    ituple_where_integer_required,
    "E0406",
    "k;",
    "__co__ void f(int n) {\n  with k in 8 { int h = k; }\n}\n"
);
reject!(
    mutable_in_mdspan,
    "E0416",
    "n, 2]",
    "__co__ void f(int x) {\n  mutable int n = 4;\n  m : [n, 2];\n}\n"
);
reject!(
    mutable_in_ituple,
    "E0416",
    "n, 2}",
    "__co__ void f(int x) {\n  mutable int n = 4;\n  t = {n, 2};\n}\n"
);
reject!(
    mutable_in_buffer_extent,
    "E0416",
    "n, 2] b",
    "__co__ void f(int x) {\n  mutable int n = 4;\n  f32 [n, 2] b;\n}\n"
);
reject!(
    bounded_current_value_as_extent,
    "E0416",
    "i]",
    "__co__ void f(int x) {\n  foreach i in 8 { foreach j in [i] { println(j); } }\n}\n"
);
reject!(
    rank_mismatch,
    "E0417",
    "t + u",
    "__co__ void f(int x) {\n  t = {1, 2};\n  u = {1, 2, 3};\n  v = t + u;\n}\n"
);
reject!(
    mdspan_plus_mdspan,
    "E0418",
    "a.span + b.span",
    "__co__ void f(f32 [2, 2] a, f32 [2, 2] b) {\n  m : a.span + b.span;\n}\n"
);
reject!(zero_extent, "E0419", "0]", "__co__ void f(int x) {\n  f32 [4, 0] b;\n}\n");
reject!(
    rank_annotation_mismatch,
    "E0420",
    "<1>",
    "__co__ void f(int x) {\n  mdspan<1> m : [4, 8];\n}\n"
);
reject!(
    mdspan_bound_with_equals,
    "E0421",
    "m = a.span",
    "__co__ void f(f32 [4, 8] a) {\n  m = a.span;\n}\n"
);
reject!(
    ituple_bound_with_colon,
    "E0421",
    "a.span / a.span",
    "__co__ void f(f32 [4, 8] a) {\n  m : a.span / a.span;\n}\n"
);
reject!(
    dimension_out_of_range,
    "E0422",
    "2)",
    "__co__ void f(f32 [4, 8] a) {\n  x = a.span(2);\n}\n"
);
reject!(span_of_scalar, "E0423", "n.span", "__co__ void f(int n) {\n  m : n.span;\n}\n");
reject!(
    wrong_index_count,
    "E0424",
    "a.at(p, 0, 0)",
    "__co__ void f(f32 [4, 4] a) {\n  parallel p by 4 { a.at(p, 0, 0) = 1.0f; }\n}\n"
);
reject!(host_element_read, "E0425", "a.at(0)", "__co__ void f(f32 [4] a) {\n  x = a.at(0);\n}\n");
reject!(
    host_element_write,
    "E0425",
    "a.at(1)",
    "__co__ void f(f32 [4] a) {\n  a.at(1) = 1.0f;\n}\n"
);
reject!(
    at_on_scalar,
    "E0426",
    "n.at",
    "__co__ void f(int n) {\n  parallel p by 4 { x = n.at(p); }\n}\n"
);
reject!(upper_bound_of_scalar, "E0427", "#n", "__co__ void f(int n) {\n  x = #n;\n}\n");
reject!(
    cast_of_spanned_data,
    "E0428",
    "a);",
    "__co__ void f(f32 [4] a) {\n  x = __to<f32>(a);\n}\n"
);
reject!(math_arity, "E0429", "__max(x)", "__co__ void f(f32 x) {\n  y = __max(x);\n}\n");
reject!(
    buffer_initialiser_not_scalar,
    "E0430",
    "{1, 2}",
    "__co__ void f(int x) {\n  f32 [4] b {{1, 2}};\n}\n"
);
reject!(
    global_buffer_inside_parallel,
    "E0431",
    "g;",
    "__co__ void f(int x) {\n  parallel p by 4 { f32 [4] g; }\n}\n"
);
reject!(global_scalar, "E0432", "global", "__co__ void f(int x) {\n  global s32 g;\n}\n");
reject!(shared_on_host, "E0433", "shared", "__co__ void f(int x) {\n  shared f32 [8] s;\n}\n");
reject!(ternary_arms, "E0434", "c ? 1 : true", "__co__ void f(bool c) {\n  x = c ? 1 : true;\n}\n");
reject!(
    constant_index_out_of_bounds,
    "E0436",
    "8)",
    "__co__ void f(f32 [8] a) {\n  parallel p by 4 { a.at(8) = 1.0f; }\n}\n"
);

// -- rejections: parameters and returns -------------------------------------------------------

reject!(scalar_by_reference, "E0501", "&n", "__co__ void f(int &n) {\n  println(n);\n}\n");
reject!(
    global_by_reference,
    "E0502",
    "&g",
    "__co__ void f(global f32 [4] &g) {\n  println(1);\n}\n"
);
reject!(unbounded_not_global, "E0503", "??", "__co__ void f(f32 [??] a) {\n  println(1);\n}\n");
reject!(zero_parameter_extent, "E0504", "0,", "__co__ void f(f32 [0, 32] a) {\n  println(1);\n}\n");
reject!(
    negative_parameter_extent,
    "E0504",
    "3 - 8",
    "__co__ void f(f32 [3 - 8, 32] a) {\n  println(1);\n}\n"
);
reject!(
    symbol_named_like_parameter,
    "E0506",
    "M]",
    "__co__ void f(int M, f32 [M] a) {\n  println(1);\n}\n"
);
reject!(unknown_return_symbol, "E0507", "K]", "__co__ f32 [K] f(f32 [M] a) {\n  return a;\n}\n");
reject!(dynamic_return_extent, "E0508", "?]", "__co__ f32 [?] f(f32 [4] a) {\n  return a;\n}\n");
reject!(missing_return, "E0509", "f(int", "__co__ int f(int n) {\n  println(n);\n}\n");
reject!(return_in_void, "E0510", "return;", "__co__ void f(int n) {\n  return;\n}\n");
reject!(
    return_in_parallel,
    "E0511",
    "return 1",
    "__co__ int f(int n) {\n  parallel p by 4 { return 1; }\n  return 0;\n}\n"
);
reject!(return_ituple, "E0512", "t;", "__co__ auto f(int n) {\n  t = {1, 2};\n  return t;\n}\n");
reject!(
    return_type_inconsistent,
    "E0513",
    "b;\n}",
    "__co__ f32 [32, 64] f(f32 [64, 32] a) {\n  f32 [64, 32] b;\n  return b;\n}\n"
);
reject!(
    return_spanned_from_scalar_function,
    "E0514",
    "a;",
    "__co__ int f(f32 [4] a) {\n  return a;\n}\n"
);
reject!(stream_by_reference, "E0515", "&s", "__co__ void f(stream &s) {\n  println(1);\n}\n");
reject!(stream_as_value, "E0516", "s + 1", "__co__ void f(stream s) {\n  x = s + 1;\n}\n");

// -- rejections: parallel-by ----------------------------------------------------------------------

reject!(
    non_integer_bound,
    "E0601",
    "2.0f",
    "__co__ void f(int n) {\n  parallel p by 2.0f { println(p); }\n}\n"
);
reject!(
    non_positive_bound,
    "E0602",
    "0 - 5",
    "__co__ void f(int n) {\n  parallel p by 0 - 5 { println(p); }\n}\n"
);
reject!(
    names_bounds_mismatch,
    "E0603",
    "{x, y}",
    "__co__ void f(int n) {\n  parallel {x, y} by [4] { println(x); }\n}\n"
);
reject!(
    too_many_subdims,
    "E0604",
    "{a, b, c, d}",
    "__co__ void f(int n) {\n  parallel {a, b, c, d} by [2, 2, 2, 2] { println(a); }\n}\n"
);
reject!(
    async_inner_level,
    "E0605",
    ".async q",
    "__co__ void f(int n) {\n  parallel p by 2 : block { parallel.async q by 4 : thread { println(q); } }\n}\n"
);
reject!(
    uninferrable_level,
    "E0606",
    "p by 2 {",
    "__co__ void f(int n) {\n  parallel p by 2 { parallel q by 4 : block { println(q); } }\n}\n"
);
reject!(
    block_inside_block,
    "E0607",
    "q by 4 : block",
    "__co__ void f(int n) {\n  parallel p by 2 : block { parallel q by 4 : block { println(q); } }\n}\n"
);
reject!(
    block_inside_thread,
    "E0607",
    "q by 4 : block",
    "__co__ void f(int n) {\n  parallel p by 2 : thread { parallel q by 4 : block { println(q); } }\n}\n"
);
reject!(
    too_many_levels,
    "E0608",
    "d by 2",
    "__co__ void f(int n) {\n  parallel a by 2, b by 2, c by 32, d by 2 { println(d); }\n}\n"
);
reject!(
    too_many_threads,
    "E0609",
    "parallel p by 2048",
    "__co__ void f(int n) {\n  parallel p by 2048 { println(p); }\n}\n"
);
reject!(
    too_many_threads_over_levels,
    "E0609",
    "parallel b",
    "__co__ void f(int n) {\n  parallel b by 2 : block { parallel g by 8 : group { parallel t by 160 : thread { println(t); } } }\n}\n"
);
reject!(
    group_threads_not_multiple_of_32,
    "E0610",
    "g by 4 : group",
    "__co__ void f(int n) {\n  parallel p by 2 : block { parallel g by 4 : group { parallel t by 16 : thread { println(t); } } }\n}\n"
);
reject!(
    sibling_thread_mismatch,
    "E0611",
    "u by 64",
    "__co__ void f(int n) {\n  parallel p by 2 : block {\n    parallel t by 32 : thread { println(t); }\n    parallel u by 64 : thread { println(u); }\n  }\n}\n"
);
reject!(
    stream_on_thread_level,
    "E0612",
    "s> p",
    "__co__ void f(stream s) {\n  parallel<s> p by 8 { println(p); }\n}\n"
);
reject!(
    stream_on_inner_level,
    "E0612",
    "s> q",
    "__co__ void f(stream s) {\n  parallel p by 2 : block { parallel<s> q by 8 : thread { println(q); } }\n}\n"
);
reject!(
    stream_binding_to_non_stream,
    "E0613",
    "n> p",
    "__co__ void f(int n) {\n  parallel<n> p by 8 : block { println(p); }\n}\n"
);
reject!(
    ituple_bound,
    "E0614",
    "t {",
    "__co__ void f(int n) {\n  t = {2, 4};\n  parallel p by t { println(p); }\n}\n"
);
reject!(
    term_level,
    "E0615",
    "term",
    "__co__ void f(int n) {\n  parallel p by 2 : term { println(p); }\n}\n"
);
reject!(
    per_thread_inner_bound,
    "E0616",
    "c : thread",
    "__co__ void f(int n) {\n  parallel p by 2 : block { int c = p + 1; parallel q by c : thread { println(q); } }\n}\n"
);

// -- rejections: control flow, print, sync -------------------------------------------------------

reject!(
    foreach_over_parallel_variable,
    "E0701",
    "p {",
    "__co__ void f(int n) {\n  parallel p by 4 { foreach p { println(p); } }\n}\n"
);
reject!(
    foreach_over_scalar,
    "E0701",
    "c {",
    "__co__ void f(int n) {\n  s32 c = 1;\n  foreach c { println(c); }\n}\n"
);
reject!(
    with_names_rank_mismatch,
    "E0702",
    "{i, j} in [2, 3, 4]",
    "__co__ void f(int n) {\n  with {i, j} in [2, 3, 4] { println(i); }\n}\n"
);
reject!(
    with_underscore,
    "E0703",
    "_ in",
    "__co__ void f(int n) {\n  with _ in 8 { println(n); }\n}\n"
);
reject!(
    duplicate_foreach_local,
    "E0704",
    "c = j",
    "__co__ void f(int n) {\n  with {i, j} in [4, 4] { foreach c = i(1:), c = j(1:) { println(c); } }\n}\n"
);
reject!(
    break_outside_loop,
    "E0705",
    "break",
    "__co__ void f(int n) {\n  if (n > 0) { break; }\n}\n"
);
reject!(
    continue_outside_loop,
    "E0705",
    "continue",
    "__co__ void f(int n) {\n  parallel p by 4 { continue; }\n}\n"
);
reject!(
    break_in_kernel_inside_host_loop,
    "E0705",
    "break",
    "__co__ void f(int n) {\n  mutable int i = 0;\n  while (i < n) { parallel p by 4 { break; } i = i + 1; }\n}\n"
);
reject!(
    break_in_inner_level_inside_device_loop,
    "E0705",
    "break",
    "__co__ void f(int n) {\n  parallel p by 2 : block {\n    foreach i in 4 { parallel t by 32 : thread { break; } }\n  }\n}\n"
);
reject!(
    int_while_condition,
    "E0706",
    "i)",
    "__co__ void f(int n) {\n  mutable int i = 3;\n  while (i) { i = i - 1; }\n}\n"
);
reject!(
    float_range_offset,
    "E0707",
    "0.5f",
    "__co__ void f(int n) {\n  with {i} in [8] { foreach i(0.5f:) { println(i); } }\n}\n"
);
reject!(
    mdspan_if_condition,
    "E0708",
    "a.span)",
    "__co__ void f(f32 [4] a) {\n  if (a.span) println(1);\n}\n"
);
reject!(
    zero_range_step,
    "E0709",
    "0)",
    "__co__ void f(int n) {\n  with {i} in [8] { foreach i(1:0:0) { println(i); } }\n}\n"
);
reject!(print_spanned_data, "E0710", "a);", "__co__ void f(f32 [4] a) {\n  println(a);\n}\n");
reject!(sync_shared_on_host, "E0711", "sync.shared", "__co__ void f(int n) {\n  sync.shared;\n}\n");

// -- not supported --------------------------------------------------------------------------------

reject!(
    local_events_are_declared_in_device_code,
    "E0466",
    "local",
    "__co__ void f(int n) {\n  local event e;\n  parallel p by 2 : block { println(n); }\n}\n"
);
reject!(
    while_on_a_shared_event_is_rejected,
    "E0467",
    "e)",
    "__co__ void f(s32 [2] &o) {\n  parallel p by 2 : block {\n    shared event e = ready;\n    while (e) { o.at(p) = 1; }\n  }\n}\n"
);
reject!(
    with_where_is_out_of_scope,
    "E0902",
    "a <-> b",
    "__co__ void f(int n) {\n  with a in 4, b in 4 where a <-> b { println(n); }\n}\n"
);

// -- the fixture corpus ----------------------------------------------------------------------------

fn fixtures(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(fixtures(&p));
        } else if p.extension().is_some_and(|x| x == "co") {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn fixture_dir(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(sub)
}

#[test]
fn every_reject_sema_fixture_parses_and_is_rejected_by_sema() {
    let files = fixtures(&fixture_dir("reject-sema"));
    assert!(files.len() >= 30, "the reject-sema corpus is missing ({} files)", files.len());
    let mut failures = Vec::new();
    for path in &files {
        let src = std::fs::read_to_string(path).expect("readable fixture");
        // A second header line `// arch: sm_NN` names the architecture to check for.
        let target = src
            .lines()
            .nth(1)
            .and_then(|l| l.strip_prefix("// arch: "))
            .map_or(Target::default(), |a| cuda(a.trim()));
        let c = run_for(&src, target);
        if !c.parse_errors.is_empty() {
            failures.push(format!("{}: parse errors", path.display()));
        } else if !c.diags.iter().any(Diagnostic::is_error) {
            failures.push(format!("{}: accepted", path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn parse_fixtures_pass_sema_or_only_hit_unsupported_constructs() {
    // Tier-1 fixtures must be accepted outright. All other positive fixtures may only be
    // rejected as "not supported" (E0901/E0902), without follow-up errors; the documented
    // exceptions are sema rejections by design (see the fixtures' README).
    let exceptions = [
        ("prec_not_vs_bitand.co", "E0407"),
        ("oos_constructs.co", "E0615"),
        // The grammar's `[auto]` shape parses; sema has nothing to infer it from.
        ("t2_spanned_auto_shape.co", "E0435"),
        // TMA is checked now: the modifier showcase issues asynchronous loads it never waits.
        ("t3_tma_modifiers.co", "E0453"),
        // `select` among elements of arrays of shared buffers (views) is not supported.
        ("t3_warp_specialized.co", "E0457"),
        // `__to<s32>` of sub-byte integers parses; spec-tier3 §8 forbids it (assignment
        // converts instead).
        ("t3_subbyte_types.co", "E0428"),
        // `while (e)` on a shared event: spec-tier3 §2.4 ⚠, rejected by design (event
        // predicates need a local or global event).
        ("t3_event_misc.co", "E0471"),
        ("t3_event_misc.co", "E0467"),
        // The MMA showcase runs in a warp (`: group`): `mma.load VIEW, frag` is WGMMA's
        // (spec-tier3 §5.2), and `mma.load.swiz<64>` of a tile an unswizzled copy filled makes
        // the copy swizzled (§4.3), which its 32-byte rows cannot be (E0461).
        ("t3_mma_variants.co", "E1012"),
        ("t3_mma_variants.co", "E0461"),
        // Upstream-like WGMMA programs fill their operand tiles with unswizzled copies: we
        // require a swizzle for WGMMA shared operands (spec-tier3 §10.3 ⚠, E1024).
        ("t3_mma_schedule_wgmma.co", "E1024"),
        ("t3_warp_specialized.co", "E1024"),
        // The fragment showcase reduces and iterates a 16x16x16 accumulator, which is WMMA:
        // its layout is opaque (spec-tier3 §6.1, E1031), so the reduced fragment gets no
        // layout for `all_reduce_sum` (E1038).
        ("t3_fragments.co", "E1031"),
        ("t3_fragments.co", "E1038"),
        // …and it declares accumulator arrays that no MMA executes (E1016).
        ("t3_fragments.co", "E1016"),
        // The sparse/scaled showcase runs in a warp: its 16x16 sparse f16 shape has no
        // instruction (E1005), its second `.sp` has no metadata (E1046, the implicit `_mdata`
        // form, spec-tier3 §5.4 ⚠), block scale needs WGMMA accumulators (E1055) and f32
        // factors, not f8_ue8m0 (E1054).
        ("t3_mma_sparse_scale.co", "E1005"),
        ("t3_mma_sparse_scale.co", "E1054"),
        ("t3_mma_sparse_scale.co", "E1046"),
        ("t3_mma_sparse_scale.co", "E1055"),
    ];
    let mut failures = Vec::new();
    let files = fixtures(&fixture_dir("parse"));
    assert!(files.len() >= 100, "the parse corpus is missing ({} files)", files.len());
    for path in files {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let src = std::fs::read_to_string(&path).expect("readable fixture");
        let c = run(&src);
        if !c.parse_errors.is_empty() {
            continue; // the parser's tests own these
        }
        let tier1 = name.starts_with("t1_");
        let bad: Vec<Diagnostic> = c
            .diags
            .iter()
            .filter(|d| d.is_error())
            .filter(|d| tier1 || !matches!(d.code, "E0901" | "E0902"))
            .filter(|d| !exceptions.contains(&(name.as_str(), d.code)))
            .cloned()
            .collect();
        if !bad.is_empty() {
            failures.push(format!("{name}:\n{}", render_human(&c.db, &bad)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn no_fixture_makes_sema_panic() {
    let files = fixtures(&fixture_dir(""));
    assert!(!files.is_empty());
    for path in files {
        let src = std::fs::read_to_string(&path).unwrap_or_default();
        let result = std::panic::catch_unwind(|| run(&src));
        assert!(result.is_ok(), "sema panicked on {}", path.display());
    }
}

#[test]
fn mutated_programs_never_make_sema_panic() {
    // Deletes/duplicates random byte ranges of valid fixtures (tiny xorshift, no deps).
    let seeds: Vec<String> = fixtures(&fixture_dir("parse"))
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..600 {
        let base = &seeds[(next() as usize) % seeds.len()];
        let bytes = base.as_bytes();
        if bytes.is_empty() {
            continue;
        }
        let a = (next() as usize) % bytes.len();
        let b = (a + (next() as usize) % 24).min(bytes.len());
        let mut m = bytes[..a].to_vec();
        if round % 2 == 0 {
            m.extend_from_slice(&bytes[b..]);
        } else {
            m.extend_from_slice(&bytes[a..b]);
            m.extend_from_slice(&bytes[a..]);
        }
        let src = String::from_utf8_lossy(&m).into_owned();
        let result = std::panic::catch_unwind(|| run(&src));
        assert!(result.is_ok(), "sema panicked on a mutation (round {round}):\n{src}");
    }
}

// -- fp8 ------------------------------------------------------------------------------------------

/// Semantic analysis of the fp8 element types `f8_e4m3` (`f8`) and `f8_e5m2` (tier 2, spec
/// §5.1, §5.7): accepted wherever an element type is, arithmetic computed in f32, conversion
/// warnings only for values an fp8 type cannot hold exactly, atomics refused, and the other
/// narrow types still rejected as tier 3.
mod fp8 {
    use super::*;

    /// The error codes of `src`, in order (asserting that it parses).
    fn error_codes(src: &str) -> Vec<&'static str> {
        let c = run(src);
        assert!(
            c.parse_errors.is_empty(),
            "parse errors:\n{}",
            render_human(&c.db, &c.parse_errors)
        );
        c.diags.iter().filter(|d| d.is_error()).map(|d| d.code).collect()
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
    fn tf32_stays_tier_3_and_the_other_narrow_types_are_accepted() {
        for (t, where_) in [
            ("f8_ue4m3", "param"),
            ("f8_ue8m0", "cast"),
            ("f6_e2m3", "buffer"),
            ("f4_e2m1", "scalar"),
            ("tf32", "param"),
            ("s4", "buffer"),
            ("bin1", "scalar"),
            ("u6", "param"),
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
            if t == "tf32" {
                assert!(
                    errors.len() == 1
                        && errors[0].code == "E0901"
                        && errors[0].message.contains(&format!("element type '{t}'"))
                        && errors[0].message.contains("(tier 3)"),
                    "{t} ({where_}):\n{}",
                    render_human(&c.db, &c.diags)
                );
            } else {
                assert!(errors.is_empty(), "{t} ({where_}):\n{}", render_human(&c.db, &c.diags));
            }
        }
    }

    #[test]
    fn narrow_float_casts_need_sm_90_but_not_on_the_cpu() {
        use choreo_compiler::target::Arch;
        for t in ["f8_ue4m3", "f8_ue8m0", "f6_e2m3", "f6_e3m2", "f4_e2m1"] {
            let src = format!(
                "__co__ void f(f32 [4] a, {t} [4] &o) {{\n  parallel p by 4 {{ o.at(p) = __to<{t}>(a.at(p)); }}\n}}\n"
            );
            for (target, ok) in [
                (Target::Cuda("sm_86".parse::<Arch>().unwrap()), false),
                (Target::Cuda("sm_89".parse::<Arch>().unwrap()), false),
                (Target::Cuda("sm_90".parse::<Arch>().unwrap()), true),
                (Target::Cuda("sm_120".parse::<Arch>().unwrap()), true),
                (Target::Cpu, true),
            ] {
                let c = run_for(&src, target);
                let errors: Vec<&Diagnostic> = c.diags.iter().filter(|d| d.is_error()).collect();
                if ok {
                    assert!(
                        errors.is_empty(),
                        "{t} on {target}:\n{}",
                        render_human(&c.db, &c.diags)
                    );
                } else {
                    assert!(
                        errors.len() == 1
                            && errors[0].code == "E0805"
                            && errors[0].message.contains(&format!("'{t}'"))
                            && errors[0].message.contains("sm_90"),
                        "{t} on {target}:\n{}",
                        render_human(&c.db, &c.diags)
                    );
                }
            }
            // The fp8 types of tier 2 and assignment conversions need no particular arch.
            let assign = format!(
                "__co__ void f(f32 [4] a, {t} [4] &o) {{\n  parallel p by 4 {{ o.at(p) = a.at(p); }}\n}}\n"
            );
            let c = run_for(&assign, Target::Cuda("sm_80".parse::<Arch>().unwrap()));
            assert!(!c.diags.iter().any(Diagnostic::is_error), "{t} assignment on sm_80");
        }
    }

    #[test]
    fn sub_byte_stores_and_exact_narrow_constants_do_not_warn() {
        let c = run(
            "__co__ void f(s4 [4] &a, f4_e2m1 [4] &b, f8_ue8m0 [4] &m) {\n  parallel p by 4 {\n    a.at(p) = -8;\n    b.at(p) = 1.5;\n    m.at(p) = 0.25;\n  }\n}\n",
        );
        assert!(c.diags.is_empty(), "{}", render_human(&c.db, &c.diags));
        let c = run(
            "__co__ void f(s4 [4] &a, f4_e2m1 [4] &b, f8_ue8m0 [4] &m) {\n  parallel p by 4 {\n    a.at(p) = 8;\n    b.at(p) = 1.25;\n    m.at(p) = 0;\n  }\n}\n",
        );
        let warned = c.diags.iter().filter(|d| d.code == "W0401").count();
        // s4 = 8 wraps to -8 without a warning: sub-byte conversions have no explicit form.
        assert_eq!(warned, 2, "{}", render_human(&c.db, &c.diags));
    }
}

#[test]
fn swizzle_warnings() {
    // `.swiz` without a period: no swizzle (W0406).
    let c = accepted(
        "__co__ void f(f32 [16, 32] a, f32 [16, 32] &o) {\n  parallel p by 1 : block {\n    shared f32 [16, 32] t;\n    tma.load.swiz a => t;\n    tma.copy t => o;\n  }\n}\n",
    );
    let codes: Vec<&str> = c.diags.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["W0406"]);
    // Element access of a swizzled tile: once per buffer (W0407), not for the copies.
    let c = accepted(
        "__co__ void f(f32 [16, 32] a, f32 [16, 32] &o) {\n  parallel p by 1 : block {\n    shared f32 [16, 32] t;\n    tma.load.swiz<64> a => t;\n    parallel i by 32 : thread { t.at(0, i) = t.at(1, i) + t.at(2, i); }\n    tma.copy.swiz<64> t => o;\n  }\n}\n",
    );
    let codes: Vec<&str> = c.diags.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["W0407"]);
    let c = accepted(
        "__co__ void f(f32 [16, 32] a, f32 [16, 32] &o) {\n  parallel p by 1 : block {\n    g = dma.copy.swiz<64> a => shared;\n    dma.copy.swiz<64> g.data => o;\n  }\n}\n",
    );
    assert!(c.diags.is_empty(), "{}", render_human(&c.db, &c.diags));
}

#[test]
fn copy_swizzle_disagreement_and_tma_stored_reads_warn() {
    // A tile loaded with `.swiz<128>` and stored without swizzle (W0409); the same swizzle on
    // both sides does not warn (tier 3 §4.3).
    let c = accepted(
        "__co__ void f(f32 [16, 32] a, f32 [16, 32] &o) {\n  parallel p by 1 : block {\n    shared f32 [16, 32] t;\n    tma.load.swiz<128> a => t;\n    tma.copy t => o;\n  }\n}\n",
    );
    let codes: Vec<&str> = c.diags.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["W0409"]);
    let c = accepted(
        "__co__ void f(f32 [16, 32] a, f32 [16, 32] &o) {\n  parallel p by 1 : block {\n    shared f32 [16, 32] t;\n    dma.copy a => t;\n    dma.copy.swiz<64> t => o;\n  }\n}\n",
    );
    let codes: Vec<&str> = c.diags.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["W0409"]);
    // A kernel that reads what it stored with TMA (W0408, once per buffer); reading it in a
    // later kernel does not warn.
    let c = accepted(
        "__co__ void f(f32 [16, 32] a, f32 [16, 32] &o, f32 [2] &r) {\n  parallel p by 1 : block {\n    shared f32 [16, 32] t;\n    tma.load a => t;\n    tma.copy t => o;\n    r.at(0) = o.at(0, 0);\n    r.at(1) = o.at(1, 0);\n  }\n  parallel q by 1 : block {\n    r.at(1) = o.at(2, 0);\n  }\n}\n",
    );
    let codes: Vec<&str> = c.diags.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["W0408"]);
}

#[test]
fn tma_futures_carry_their_mbarrier() {
    let f = accept(
        "__co__ void f(f32 [64, 32] a, f32 [64] &o) {\n  parallel p by 1 : block {\n    f0 = tma.load.async a.subspan(16, 32).at(0, 0) => shared;\n    f1 = tma.any;\n    foreach {k} in [3] {\n      f1 = tma.load.async a.subspan(16, 32).at(k + 1, 0) => shared;\n      wait f0;\n      parallel t by 16 : thread { o.at(k * 16 + t) = f0.data.at(t, 0); }\n      sync.barrier : block;\n      swap(f0, f1);\n    }\n    wait f0;\n  }\n}\n",
    );
    let k = kernels(&f)[0];
    // f0's load, the placeholder f1, and the load in the loop (whose own barrier is unused:
    // it completes f1's).
    assert_eq!(k.attrs.tma_barriers, 3);
    assert_eq!(k.attrs.tma_maps, 2);
}

#[test]
fn a_fill_event_with_an_explicit_count_other_than_one_warns() {
    let src = "__co__ void f(f32 [128, 64] x, f32 [128, 64] &y) {\n  parallel p by 1 : block {\n    \
               shared event<2> full[2];\n    shared event empty[2] = ready;\n    \
               shared f32 [32, 64] tin[2];\n    parallel w by 2 : group-4, t by 128 : thread {\n      \
               inthreads.async (w == 0) {\n        foreach {k} in [4] {\n          wait empty.at(k);\n          \
               f = tma.load.async x.subspan(32, 64).at(k, 0) => tin[k % 2];\n          \
               trigger full.at(k) after f;\n        }\n      }\n      \
               inthreads.async (w == 1) {\n        foreach {k} in [4] {\n          wait full.at(k);\n          \
               y.at(k * 32 + t / 4, t % 4) = tin[k % 2].at(t / 4, t % 4);\n          \
               trigger empty.at(k);\n        }\n      }\n    }\n  }\n}\n";
    let c = accepted(src);
    let codes: Vec<&str> = c.diags.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["W0472"], "{}", render_human(&c.db, &c.diags));
    // Without the count: no warning.
    let c = accepted(&src.replace("event<2>", "event"));
    assert!(c.diags.is_empty(), "{}", render_human(&c.db, &c.diags));
}

/// The swizzles of the DMA statements of a function, in source order.
fn dma_swizzles(f: &hir::Function) -> Vec<u32> {
    struct Dmas(Vec<u32>);
    impl<'a> hir::visit::Visitor<'a> for Dmas {
        fn stmt(&mut self, s: &'a Stmt) -> hir::visit::Walk {
            if let StmtKind::Dma(d) = &s.kind {
                self.0.push(d.swizzle);
            }
            hir::visit::Walk::Continue
        }
    }
    let mut v = Dmas(Vec::new());
    hir::visit::walk_stmts(&mut v, &f.body);
    v.0
}

#[test]
fn mma_load_swizzle_is_inherited_by_unswizzled_copies() {
    // An unswizzled DMA (before the load) and TMA (in a loop, before and after) inherit the
    // `.swiz<N>` of the `mma.load` that reads their tile: a note at each, the HIR copy swizzled.
    let src = "__co__ void f(f16 [16, 32] a, f16 [16, 64] b, f32 [16, 8] &c) {\n  parallel p by 1 : block {\n    shared f16 [16, 64] sb;\n    tma.load b => sb;\n    parallel w by 1 : group {\n      sa = dma.copy a => shared;\n      acc = mma.fill.f32 0.0f;\n      fa = mma.load.swiz<64> sa.data.subspan(16, 16).at(0, 0);\n      fb = mma.load.swiz<128> sb.subspan(16, 8).at(0, 0);\n      mma.row.col acc, fa, fb;\n      fc = mma.load sb.subspan(16, 8).at(0, 1);\n      mma.row.col acc, fa, fc;\n      mma.store acc, c;\n    }\n    tma.load b => sb;\n  }\n}\n";
    let c = accepted(src);
    let codes: Vec<&str> = c.diags.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["N0473", "N0473", "N0473"], "{}", render_human(&c.db, &c.diags));
    assert!(c.diags[0].message.contains("inferred DMA swizzle '64'"), "{}", c.diags[0].message);
    assert_eq!(dma_swizzles(&single_function(&c)), [128, 64, 128]);
    // Element accesses see the physical bytes: W0407 once, at the first (here before the load).
    let src = "__co__ void f(f16 [16, 32] a, f16 [16, 8] b, f32 [16, 8] &c, f16 [2] &o) {\n  parallel p by 1 : block {\n    parallel w by 1 : group {\n      shared f16 [16, 32] sa;\n      dma.copy a => sa;\n      o.at(0) = sa.at(0, 1);\n      acc = mma.fill.f32 0.0f;\n      fa = mma.load.swiz<64> sa.subspan(16, 16).at(0, 0);\n      fb = mma.load b;\n      mma.row.col acc, fa, fb;\n      mma.store acc, c;\n      o.at(1) = sa.at(1, 1);\n    }\n  }\n}\n";
    let c = accepted(src);
    let codes: Vec<&str> = c.diags.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["N0473", "W0407"], "{}", render_human(&c.db, &c.diags));
    // An unswizzled copy out of the tile after the load reads it scrambled (W0409).
    let src = "__co__ void f(f16 [16, 32] a, f16 [16, 8] b, f32 [16, 8] &c, f16 [16, 32] &o) {\n  parallel p by 1 : block {\n    parallel w by 1 : group {\n      shared f16 [16, 32] sa;\n      dma.copy a => sa;\n      acc = mma.fill.f32 0.0f;\n      fa = mma.load.swiz<64> sa.subspan(16, 16).at(0, 0);\n      fb = mma.load b;\n      mma.row.col acc, fa, fb;\n      mma.store acc, c;\n      dma.copy sa => o;\n    }\n  }\n}\n";
    let c = accepted(src);
    let codes: Vec<&str> = c.diags.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["N0473", "W0409"], "{}", render_human(&c.db, &c.diags));
}

#[test]
fn mma_load_swizzle_inheritance_conflicts_are_errors() {
    let codes = |src: &str| -> Vec<&'static str> {
        run(src).diags.iter().filter(|d| d.is_error()).map(|d| d.code).collect()
    };
    // Two loads of one tile asking for different swizzles.
    let two = "__co__ void f(f16 [16, 64] a, f16 [16, 8] b, f32 [16, 8] &c) {\n  parallel p by 1 : block {\n    parallel w by 1 : group {\n      sa = dma.copy a => shared;\n      acc = mma.fill.f32 0.0f;\n      fb = mma.load b;\n      fa = mma.load.swiz<128> sa.data.subspan(16, 16).at(0, 0);\n      mma.row.col acc, fa, fb;\n      fx = mma.load.swiz<64> sa.data.subspan(16, 16).at(0, 1);\n      mma.row.col acc, fx, fb;\n      mma.store acc, c;\n    }\n  }\n}\n";
    let c = run(two);
    let e: Vec<&Diagnostic> = c.diags.iter().filter(|d| d.is_error()).collect();
    assert_eq!(e.len(), 1, "{}", render_human(&c.db, &c.diags));
    assert_eq!(e[0].code, "E1019");
    // No copy filled the tile at all: still E1019.
    assert_eq!(
        codes(
            "__co__ void f(f16 [16, 8] b, f32 [16, 8] &c) {\n  parallel p by 1 : block {\n    parallel w by 1 : group {\n      shared f16 [16, 32] sa;\n      acc = mma.fill.f32 0.0f;\n      fa = mma.load.swiz<64> sa.subspan(16, 16).at(0, 0);\n      fb = mma.load b;\n      mma.row.col acc, fa, fb;\n      mma.store acc, c;\n    }\n  }\n}\n"
        ),
        ["E1019"]
    );
    // The inheriting copy's rows are not a multiple of the period (E0461, at the copy).
    assert_eq!(
        codes(
            "__co__ void f(f16 [16, 16] a, f16 [16, 8] b, f32 [16, 8] &c) {\n  parallel p by 1 : block {\n    parallel w by 1 : group {\n      sa = dma.copy a => shared;\n      acc = mma.fill.f32 0.0f;\n      fa = mma.load.swiz<64> sa.data;\n      fb = mma.load b;\n      mma.row.col acc, fa, fb;\n      mma.store acc, c;\n    }\n  }\n}\n"
        ),
        ["E0461"]
    );
    // A transposing copy cannot inherit (E0461).
    assert_eq!(
        codes(
            "__co__ void f(f16 [32, 16] a, f16 [16, 8] b, f32 [16, 8] &c) {\n  parallel p by 1 : block {\n    parallel w by 1 : group {\n      sa = dma.transp<1, 0> a => shared;\n      acc = mma.fill.f32 0.0f;\n      fa = mma.load.swiz<64> sa.data.subspan(16, 16).at(0, 0);\n      fb = mma.load b;\n      mma.row.col acc, fa, fb;\n      mma.store acc, c;\n    }\n  }\n}\n"
        ),
        ["E0461"]
    );
}

#[test]
fn step_statements_are_compound_assignments() {
    // `o++;` `++o;` `o--;` `--o;` are `o += 1;` / `o -= 1;` on a mutable integer local.
    let f = accept(
        "__co__ void f(s32 [8] &out) {\n  parallel p by 8 {\n    mutable int i = 0;\n    i++;\n    ++i;\n    i--, --i, i++;\n    out.at(p) = i;\n  }\n}\n",
    );
    let mut ops = Vec::new();
    struct Ops<'o>(&'o mut Vec<hir::AssignOp>);
    impl<'a> hir::visit::Visitor<'a> for Ops<'_> {
        fn stmt(&mut self, s: &'a Stmt) -> hir::visit::Walk {
            if let StmtKind::Assign { target: Place::Var(_), op, value } = &s.kind {
                if matches!(value.kind, HExprKind::Int(1)) {
                    self.0.push(*op);
                }
            }
            hir::visit::Walk::Continue
        }
    }
    hir::visit::walk_stmts(&mut Ops(&mut ops), &f.body);
    use hir::AssignOp::{Add, Sub};
    assert_eq!(ops, [Add, Add, Sub, Sub, Add]);
    // Not a mutable integer variable: E0477 (immutable: E0403); a value: E0478.
    for (src, code) in [
        ("mutable f32 x = 0.0f;\n    x++;", "E0477"),
        ("out.at(p)--;", "E0477"),
        ("n++;", "E0477"),
        ("i = 1;\n    i++;", "E0403"),
        ("mutable int i = 0;\n    out.at(p) = i++;", "E0478"),
        ("mutable int i = 0;\n    out.at(++i) = 1;", "E0478"),
    ] {
        let c = run(&format!(
            "__co__ void f(s32 [8] &out, s32 n) {{\n  parallel p by 8 {{\n    {src}\n  }}\n}}\n"
        ));
        let codes: Vec<&str> = c.diags.iter().filter(|d| d.is_error()).map(|d| d.code).collect();
        assert_eq!(codes, [code], "{src}: {}", render_human(&c.db, &c.diags));
    }
}

#[test]
fn trigger_cluster_after_binds_multicast_loads() {
    // The multicast load gets the event slot; the event is a cluster fill event.
    let src = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/codegen/trigger_cluster_after.co"),
    )
    .expect("fixture");
    let f = accept(&src);
    let full = f.events.iter().find(|e| e.name == "full").expect("event full");
    assert!(full.cluster.is_some());
    assert!(full.triggers.iter().all(|t| t.fill));
    let empty = f.events.iter().find(|e| e.name == "empty").expect("event empty");
    assert!(empty.cluster.is_some() && empty.triggers.iter().all(|t| !t.fill));
    struct Loads(Vec<(bool, bool)>);
    impl<'a> hir::visit::Visitor<'a> for Loads {
        fn stmt(&mut self, s: &'a Stmt) -> hir::visit::Walk {
            if let StmtKind::Dma(d) = &s.kind {
                if let Some(t) = &d.tma {
                    self.0.push((t.multicast, t.event.is_some()));
                }
            }
            hir::visit::Walk::Continue
        }
    }
    let mut loads = Loads(Vec::new());
    hir::visit::walk_stmts(&mut loads, &f.body);
    assert_eq!(loads.0, [(true, true)]);
    // The wrong kind of load either way (E0479), and no follow-up "not waited" error.
    for (trigger, load) in
        [("trigger.cluster", "tma.load.async"), ("trigger", "tma.load.async.multicast")]
    {
        let c = run(&format!(
            "__co__ void f(f32 [64, 64] w, f32 [4, 64] &y) {{\n  parallel {{c}} by [2] : cluster, b by 4 : block {{\n    shared event full;\n    shared f32 [16, 64] tile;\n    f = {load} w.subspan(16, 64).at(0, 0) => tile;\n    {trigger} full after f;\n    wait full;\n    parallel t by 64 : thread {{ y.at(b, t) = tile.at(0, t); }}\n  }}\n}}\n"
        ));
        let codes: Vec<&str> = c.diags.iter().filter(|d| d.is_error()).map(|d| d.code).collect();
        assert_eq!(codes, ["E0479"], "{trigger} / {load}: {}", render_human(&c.db, &c.diags));
    }
}

#[test]
fn async_mma_store_reads_warn_until_a_barrier() {
    // `mma.store.async` to shared leaves out the barrier (spec-tier3 §5.5): a read of the tile
    // before any synchronisation warns (W1046), once per store; after `sync.barrier` it does
    // not, nor after a plain `mma.store`.
    let program = |store: &str, sync: &str| {
        format!(
            "__co__ void f(f16 [16, 16] a, f16 [16, 8] b, f32 [64] &o) {{\n  parallel p by 1 : block {{\n    shared f32 [16, 8] s;\n    parallel w by 2 : group {{\n      acc = mma.fill.f32 0.0f;\n      fa = mma.load a;\n      fb = mma.load b;\n      mma.row.col acc, fa, fb;\n      {store} acc, s;\n    }}\n    {sync}\n    parallel i by 64 : thread {{ o.at(i) = s.at(i / 8, i % 8) + s.at(0, 0); }}\n  }}\n}}\n"
        )
    };
    let c = accepted(&program("mma.store.async", ""));
    let codes: Vec<&str> = c.diags.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["W1046"], "{}", render_human(&c.db, &c.diags));
    let c = accepted(&program("mma.store.async", "sync.barrier : block;"));
    assert!(c.diags.is_empty(), "{}", render_human(&c.db, &c.diags));
    let c = accepted(&program("mma.store", ""));
    assert!(c.diags.is_empty(), "{}", render_human(&c.db, &c.diags));
    // The async store emits no barrier; the plain one does.
    let barriers = |src: &str| {
        let f = single_function(&accepted(src));
        let mut n = 0;
        hir::visit::walk_stmts(&mut CountBarriers(&mut n), &f.body);
        n
    };
    assert_eq!(barriers(&program("mma.store.async", "")), 0);
    assert_eq!(barriers(&program("mma.store", "")), 1);
}

struct CountBarriers<'n>(&'n mut usize);

impl<'a> hir::visit::Visitor<'a> for CountBarriers<'_> {
    fn stmt(&mut self, s: &'a hir::Stmt) -> hir::visit::Walk {
        if matches!(s.kind, hir::StmtKind::Barrier(_)) {
            *self.0 += 1;
        }
        hir::visit::Walk::Continue
    }
}

#[test]
fn sparse_wgmma_is_checked_and_needs_sm90a() {
    // In a warpgroup, `.sp` is a sparse WGMMA (wgmma.mma_async.sp): f16 K 32, N 64, metadata
    // u8 [64, 4]; one instruction, the metadata fragment gets role E.
    let src = "__co__ void f(f16 [64, 16] a, f16 [64, 32] b, u8 [64, 4] m, f32 [64, 64] &c) {\n  parallel p by 1 : block {\n    ga = dma.copy.swiz<32> a => shared;\n    gb = dma.copy.swiz<64> b => shared;\n    parallel w by 1 : group-4, t by 128 : thread {\n      acc = mma.fill.f32 0.0f;\n      fe = mma.load m;\n      mma.row.row.sp acc, ga.data, gb.data, fe;\n      mma.store acc, c;\n    }\n  }\n}\n";
    let f = accept(src);
    let meta = f.frags.iter().find(|g| g.name == "fe").expect("the metadata fragment");
    assert_eq!(meta.role, Some(hir::mma::MmaRole::E));
    let sel = meta.selected.expect("selected");
    assert!(sel.config.sparse && sel.config.k == 32 && sel.config.n == 64);
    // On plain sm_90 the group-4 level and the WGMMA are both refused.
    let c = run_for(src, Target::Cuda("sm_90".parse().expect("arch")));
    let codes: Vec<&str> = c.diags.iter().filter(|d| d.is_error()).map(|d| d.code).collect();
    assert!(codes.contains(&"E1005"), "{}", render_human(&c.db, &c.diags));
    assert!(c.diags.iter().any(|d| d.message.contains("WGMMA requires sm_90a")));
}

struct StoreWaits<'w>(&'w mut Vec<(usize, bool)>);

impl<'a> hir::visit::Visitor<'a> for StoreWaits<'_> {
    fn stmt(&mut self, s: &'a hir::Stmt) -> hir::visit::Walk {
        match &s.kind {
            hir::StmtKind::TmaStoreWait { groups, role, .. } => {
                self.0.push((groups.len(), role.is_some()));
            }
            hir::StmtKind::Wait { tma_groups, .. } => {
                assert!(tma_groups.is_empty(), "an mbarrier wait on a store's future");
            }
            _ => {}
        }
        hir::visit::Walk::Continue
    }
}

#[test]
fn tma_any_placeholder_bound_to_a_store_in_a_role() {
    // spec-tier3 §3.3, §7.1: `fo = tma.any;` then, in the loop, `wait fo;` before
    // `fo = tma.copy.async …`: the wait (in source order before the binding) and the one after
    // the loop are both store waits of the consumer role (no mbarrier wait), issued by it.
    let program = |pre_wait: &str| {
        format!(
            "__co__ void f(f32 [M, 64] x, f32 [M, 64] &y) {{\n  parallel bm by cdiv(M, 64) : block {{\n    shared event full[2], empty[2] = ready;\n    shared f32 [32, 64] tin[2];\n    shared f32 [32, 64] tout;\n    parallel w by 2 : group-4, t by 128 : thread {{\n      inthreads.async (w == 0 && t == 0) {{\n        foreach {{k}} in [2] {{\n          wait empty.at(k);\n          f = tma.load.async x.subspan(32, 64).at(bm * 2 + k, 0) => tin[k % 2];\n          trigger full.at(k) after f;\n        }}\n      }}\n      inthreads.async (w == 1) {{\n        fo = tma.any;\n        foreach {{k}} in [2] {{\n          wait full.at(k);\n          {pre_wait}\n          foreach {{i}} in [16] {{ tout.at(t / 4, (t % 4) * 16 + i) = tin[k % 2].at(t / 4, (t % 4) * 16 + i) * 2.0f; }}\n          trigger empty.at(k);\n          fo = tma.copy.async tout => y.subspan(32, 64).at(bm * 2 + k, 0);\n        }}\n        wait fo;\n      }}\n    }}\n  }}\n}}\n"
        )
    };
    let f = accept(&program("wait fo;"));
    let mut waits = Vec::new();
    hir::visit::walk_stmts(&mut StoreWaits(&mut waits), &f.body);
    assert_eq!(waits, [(1, true), (1, true)]);
    // Without the wait in the loop, the next iteration rewrites the store's source (E0463)
    // and re-issues the store before it was waited for (E0453).
    let c = run(&program(""));
    let codes: Vec<&str> = c.diags.iter().filter(|d| d.is_error()).map(|d| d.code).collect();
    assert!(codes.contains(&"E0463"), "{}", render_human(&c.db, &c.diags));
    // A wait that only some threads of the role reach is refused (E0475).
    let c = run(&program("if (t < 64) { wait fo; }"));
    let codes: Vec<&str> = c.diags.iter().filter(|d| d.is_error()).map(|d| d.code).collect();
    assert!(codes.contains(&"E0475"), "{}", render_human(&c.db, &c.diags));
}

#[test]
fn a_tma_store_synchronises_an_async_mma_store() {
    // W1046 is not given when a TMA store (which fences and synchronises its scope before the
    // copy engine reads) reads the tile that `mma.store.async` wrote; a DMA copy out of it is.
    let program = |copy: &str| {
        format!(
            "__co__ void f(f16 [16, 16] a, f16 [16, 8] b, f32 [16, 8] &o) {{\n  parallel p by 1 : block {{\n    shared f32 [16, 8] s;\n    parallel w by 1 : group {{\n      acc = mma.fill.f32 0.0f;\n      fa = mma.load a;\n      fb = mma.load b;\n      mma.row.col acc, fa, fb;\n      mma.store.async acc, s;\n    }}\n    {copy} s => o;\n  }}\n}}\n"
        )
    };
    let c = accepted(&program("tma.copy"));
    assert!(c.diags.is_empty(), "{}", render_human(&c.db, &c.diags));
    let c = accepted(&program("dma.copy"));
    let codes: Vec<&str> = c.diags.iter().map(|d| d.code).collect();
    assert_eq!(codes, ["W1046"], "{}", render_human(&c.db, &c.diags));
}
