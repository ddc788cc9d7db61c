//! Smoke tests of the tileflow parser: every statement kind is accepted, operator precedence
//! follows spec §4.5, each syntactic rejection has its code, errors are recovered from, deep
//! nesting is an error rather than a stack overflow, and mutated programs never panic.

use choreo_compiler::ast::{
    AssignOp, CoFunction, DeriveItem, DmaDest, Expr, ExprKind, ForeachItems, Item, Level, MmaKind,
    ParallelBinder, ReturnType, StmtKind, TypeExpr, ViewOp,
};
use choreo_compiler::diagnostics::{Diagnostic, Diagnostics, render_human};
use choreo_compiler::frontend::parse_file;
use choreo_compiler::preprocess::PreprocessOptions;
use choreo_compiler::source::SourceDb;

/// Parses `src` as a whole `.co` file.
fn parse(src: &str) -> (choreo_compiler::ast::File, Vec<Diagnostic>, SourceDb) {
    let mut db = SourceDb::new();
    let id = db.add("test.co", src);
    let mut diags = Diagnostics::new();
    let file = parse_file(&db, id, &PreprocessOptions::default(), &mut diags);
    (file, diags.into_vec(), db)
}

/// The codes of the errors reported for `src`.
fn error_codes(src: &str) -> Vec<&'static str> {
    parse(src).1.iter().filter(|d| d.is_error()).map(|d| d.code).collect()
}

/// The single `__co__` function of `src`, which must parse without errors.
fn accept(src: &str) -> CoFunction {
    let (file, diags, db) = parse(src);
    let errors: Vec<Diagnostic> = diags.into_iter().filter(|d| d.is_error()).collect();
    assert!(errors.is_empty(), "unexpected errors:\n{}\nin:\n{src}", render_human(&db, &errors));
    let mut functions = file.items.into_iter().filter_map(|i| match i {
        Item::CoFunction(f) => Some(f),
        _ => None,
    });
    let f = functions.next().expect("a __co__ function");
    assert!(functions.next().is_none(), "more than one function in:\n{src}");
    f
}

/// The statements of `body`, parsed inside a function with a few parameters.
fn stmts(body: &str) -> Vec<StmtKind> {
    let src = format!(
        "__co__ void f(f32 [8, 8] a, f32 [8, 8] &b, int n, int m, bool c, stream s) {{\n{body}\n}}\n"
    );
    accept(&src).body.stmts.into_iter().map(|s| s.kind).collect()
}

/// The one statement of `body`.
fn stmt(body: &str) -> StmtKind {
    let mut all = stmts(body);
    assert_eq!(all.len(), 1, "expected one statement in {body}");
    all.remove(0)
}

/// A fully parenthesised rendering of an expression, to check precedence.
fn sexpr(e: &Expr) -> String {
    let list = |items: &[Expr]| items.iter().map(sexpr).collect::<Vec<_>>().join(" ");
    match &e.kind {
        ExprKind::Int(lit) => lit.value.to_string(),
        ExprKind::Float(lit) => format!("{}{}", lit.value, if lit.is_f32 { "f" } else { "" }),
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::Str(s) => format!("{:?}", s.value),
        ExprKind::Null => "nullptr".into(),
        ExprKind::Wildcard => "_".into(),
        ExprKind::Ident(i) => i.name.clone(),
        ExprKind::Path(p) => {
            p.segments.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join("::")
        }
        ExprKind::Mdspan(items) => format!("[{}]", list(items)),
        ExprKind::Ituple(items) => format!("{{{}}}", list(items)),
        ExprKind::Unary { op, operand } => format!("({} {})", op.as_str(), sexpr(operand)),
        ExprKind::Binary { op, lhs, rhs } => {
            format!("({} {} {})", op.as_str(), sexpr(lhs), sexpr(rhs))
        }
        ExprKind::Ternary { cond, then_value, else_value } => {
            format!("(? {} {} {})", sexpr(cond), sexpr(then_value), sexpr(else_value))
        }
        ExprKind::UpperBound(i) => format!("(#ub {})", i.name),
        ExprKind::AddressOf(x) => format!("(addr {})", sexpr(x)),
        ExprKind::Count(x) => format!("(count {})", sexpr(x)),
        ExprKind::SizeOf(t) => format!("(sizeof {})", t.as_str()),
        ExprKind::Cdiv(a, b) => format!("(cdiv {} {})", sexpr(a), sexpr(b)),
        ExprKind::Math { func, args } => format!("({} {})", func.as_str(), list(args)),
        ExprKind::Cast { operand, .. } => format!("(cast {})", sexpr(operand)),
        ExprKind::Select { index, items } => format!("(select {} {})", sexpr(index), list(items)),
        ExprKind::Call(_) => "(call)".into(),
        ExprKind::DimSelect { base, index } => format!("(dim {} {})", sexpr(base), sexpr(index)),
        ExprKind::Index { base, index } => format!("(index {} {})", sexpr(base), sexpr(index)),
        ExprKind::Derive { base, ituple, items } => {
            let items = items
                .iter()
                .map(|i| match i {
                    DeriveItem::Dim(d) => format!("({})", sexpr(d)),
                    DeriveItem::Value(v) => sexpr(v),
                })
                .collect::<Vec<_>>()
                .join(" ");
            format!("({} {} {items})", if *ituple { "derive{}" } else { "derive[]" }, sexpr(base))
        }
        ExprKind::Span(x) => format!("(span {})", sexpr(x)),
        ExprKind::Data(x) => format!("(data {})", sexpr(x)),
        ExprKind::Mdata(x) => format!("(mdata {})", sexpr(x)),
        ExprKind::At { base, indices } => format!("(at {} {})", sexpr(base), list(indices)),
        ExprKind::View { base, op } => {
            let op = match op {
                ViewOp::Chunkat(f) => format!("chunkat {}", list(f)),
                ViewOp::Chunk { factors, at } => format!("chunk {} at {}", list(factors), list(at)),
                ViewOp::Subspan(t) | ViewOp::Modspan(t) => format!(
                    "tile {}{}{}{}",
                    list(&t.extents),
                    t.strides.as_ref().map_or(String::new(), |s| format!(" : {}", list(s))),
                    t.step.as_ref().map_or(String::new(), |s| format!(" step {}", list(s))),
                    t.at.as_ref().map_or(String::new(), |s| format!(" at {}", list(s)))
                ),
                ViewOp::Window { extents, strides, from } => format!(
                    "view {}{}{}",
                    list(extents),
                    strides.as_ref().map_or(String::new(), |s| format!(" : {}", list(s))),
                    from.as_ref().map_or(String::new(), |s| format!(" from {}", list(s)))
                ),
                ViewOp::SpanAs(items) => format!("span_as {}", list(items)),
                ViewOp::Sqz => "sqz".into(),
            };
            format!("({op} {})", sexpr(base))
        }
        ExprKind::BufferMap { base, .. } => format!("(map {})", sexpr(base)),
    }
}

/// The parenthesised form of `e` used as the value of `x = e;`.
fn expr(e: &str) -> String {
    match stmt(&format!("x = {e};")) {
        StmtKind::Assign(list) => sexpr(&list[0].value),
        other => panic!("not an assignment: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Precedence (spec §4.5)
// ---------------------------------------------------------------------------------------------

#[test]
fn bitwise_binds_tighter_than_comparison() {
    assert_eq!(expr("n & 1 == 0"), "(== (& n 1) 0)");
    assert_eq!(expr("n < m | 1"), "(< n (| m 1))");
}

#[test]
fn bitwise_operators_share_one_left_associative_level() {
    assert_eq!(expr("n | m & 3"), "(& (| n m) 3)");
    assert_eq!(expr("n ^ m | k"), "(| (^ n m) k)");
}

#[test]
fn not_is_looser_than_bitwise_and() {
    assert_eq!(expr("!b & c"), "(! (& b c))");
    assert_eq!(expr("!b && c"), "(&& (! b) c)");
    assert_eq!(expr("!a == b"), "(== (! a) b)");
    assert_eq!(expr("!a + b"), "(+ (! a) b)");
}

#[test]
fn unary_minus_and_tilde_bind_tightest() {
    assert_eq!(expr("-n * m"), "(* (neg n) m)");
    assert_eq!(expr("-n & m"), "(& (neg n) m)");
    assert_eq!(expr("~n + m"), "(+ (~ n) m)");
    assert_eq!(expr("-(a + b)"), "(neg (+ a b))");
    assert_eq!(expr("-a.at(0, 1)"), "(neg (at a 0 1))");
}

#[test]
fn minus_before_a_literal_makes_a_negative_literal() {
    assert_eq!(expr("x * -1"), "(* x -1)");
    assert_eq!(expr("a - -1"), "(- a -1)");
    assert_eq!(expr("- 2"), "-2");
    assert_eq!(expr("x-1.5f"), "(- x 1.5f)");
    assert_eq!(expr("-inf"), "-inff");
}

#[test]
fn arithmetic_levels_and_associativity() {
    assert_eq!(expr("a + b * c"), "(+ a (* b c))");
    assert_eq!(expr("a - b - c"), "(- (- a b) c)");
    assert_eq!(expr("a << 2 + 1"), "(<< a (+ 2 1))");
    assert_eq!(expr("a || b && c"), "(|| a (&& b c))");
    assert_eq!(expr("n < m == k < j"), "(== (< n m) (< k j))");
}

#[test]
fn bounded_operators_and_composition() {
    assert_eq!(expr("a #+ b #* c"), "(#+ a (#* b c))");
    assert_eq!(expr("a * b #+ c"), "(* a (#+ b c))");
    assert_eq!(expr("p # n + 1"), "(+ (# p n) 1)");
    assert_eq!(expr("q#n & m"), "(& (# q n) m)");
    assert_eq!(expr("#p + 1"), "(+ (#ub p) 1)");
    assert_eq!(expr("#p # n"), "(# (#ub p) n)");
}

#[test]
fn conditional_is_loosest_and_right_associative() {
    assert_eq!(expr("n > 0 ? m : k > 0 ? 1 : 2"), "(? (> n 0) m (? (> k 0) 1 2))");
    assert_eq!(expr("c ? a + 1 : b"), "(? c (+ a 1) b)");
}

#[test]
fn postfix_forms() {
    assert_eq!(expr("k(-1)"), "(dim k -1)");
    assert_eq!(expr("a.span(1) * 2"), "(* (dim (span a) 1) 2)");
    assert_eq!(expr("|a.span| / |f32|"), "(/ (count (span a)) (sizeof f32))");
    assert_eq!(expr("f.data.at(i, j)"), "(at (data f) i j)");
    assert_eq!(expr("stage[1][0]"), "(index (index stage 1) 0)");
    assert_eq!(expr("e.at(order++)"), "(at e (x++ order))");
    assert_eq!(expr("cdiv(n, 4) + __sqrt(x)"), "(+ (cdiv n 4) (__sqrt x))");
    assert_eq!(expr("select(k % 2, a, b)"), "(select (% k 2) a b)");
    assert_eq!(expr("__to<f32>(p) * 2.0"), "(* (cast p) 2)");
}

#[test]
fn view_chains() {
    assert_eq!(expr("a.chunkat(p, _)"), "(chunkat p _ a)");
    assert_eq!(expr("a.chunk(2, 4).at(p, q)"), "(chunk 2 4 at p q a)");
    assert_eq!(expr("a.subspan(16, 8).step(16, 4).at(p, 2)"), "(tile 16 8 step 16 4 at p 2 a)");
    assert_eq!(expr("a.view(16, 8 : 12, 3).from(17, 18)"), "(view 16 8 : 12 3 from 17 18 a)");
    assert_eq!(
        expr("q.subspan(1, 1, s, d).at(b, h, 0, 0).sqz()"),
        "(sqz (tile 1 1 s d at b h 0 0 q))"
    );
    assert_eq!(expr("f.data.span_as([6, 64]).at(0, 1)"), "(at (span_as [6 64] (data f)) 0 1)");
}

#[test]
fn derivations_and_shape_lists() {
    assert_eq!(expr("t{(2), (0)}"), "(derive{} t (2) (0))");
    match stmt("m : x.span[(1), (0), 4];") {
        StmtKind::MdspanDecl(d) => assert_eq!(sexpr(&d.value), "(derive[] (span x) (1) (0) 4)"),
        other => panic!("{other:?}"),
    }
    match stmt("f32 [sh[(1), 4], (1024)] out;") {
        StmtKind::SpannedDecl(d) => match d.shape {
            choreo_compiler::ast::Shape::List { items, .. } => {
                assert_eq!(sexpr(&items[0]), "(derive[] sh (1) 4)");
                assert_eq!(sexpr(&items[1]), "1024");
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Accepted statements
// ---------------------------------------------------------------------------------------------

#[test]
fn function_header_parameters_and_return_types() {
    let f = accept(
        "__co__ f32 [M, 4] head(global f32 [M, N] a, f32 [M] &bias, f32 [?, 4] w, \
         global s32 [??] g, f16 mdspan<2> h, int, f32 [4 * 2, (16)] k, stream s) { return a; }",
    );
    assert_eq!(f.name.name, "head");
    assert_eq!(f.params.len(), 8);
    assert!(f.params[0].global.is_some());
    assert!(f.params[1].by_ref.is_some());
    assert!(f.params[5].name.is_none());
    assert!(matches!(f.params[7].ty, TypeExpr::Stream(_)));
    assert!(matches!(f.ret, ReturnType::Type(TypeExpr::Spanned { .. })));
    let f = accept("__co__ auto g() { return 3; }");
    assert!(matches!(f.ret, ReturnType::Auto(_)));
}

#[test]
fn declarations() {
    let kinds = stmts(
        "int c = n + 1;\n mutable int i = 0, j;\n f32 acc = 0.0f;\n s32 v;\n mutable d = 1;\n\
         shared s32 flag;\n local f32 [4] buf {0.0f};\n shared f16 [64, 64] tile[2];\n\
         f32 [auto] inferred;\n sh : [4, 8];\n mdspan<2> sh2 : [sh, 8];\n ituple<3> t = {1, 2, 3};\n\
         shared event full[2], empty[2] = ready;\n event<2> e;\n frag f32 [64] rowmax {-inf};\n\
         frag mc[2][3] {0.0};\n s32 w {3};",
    );
    assert_eq!(kinds.len(), 17);
    assert!(
        matches!(&kinds[0], StmtKind::ScalarDecl(d) if d.mutable.is_none() && d.items.len() == 1)
    );
    assert!(
        matches!(&kinds[1], StmtKind::ScalarDecl(d) if d.mutable.is_some() && d.items.len() == 2)
    );
    assert!(matches!(&kinds[6], StmtKind::SpannedDecl(d) if d.items[0].init.is_some()));
    assert!(matches!(&kinds[7], StmtKind::SpannedDecl(d) if d.items[0].array_dims.len() == 1));
    assert!(matches!(&kinds[9], StmtKind::MdspanDecl(d) if d.keyword.is_none()));
    assert!(
        matches!(&kinds[12], StmtKind::EventDecl(d) if d.items.len() == 2 && d.items[1].ready.is_some())
    );
    assert!(
        matches!(&kinds[15], StmtKind::FragDecl(d) if d.elem.is_none() && d.items[0].array_dims.len() == 2)
    );
}

#[test]
fn assignments() {
    let kinds = stmts(
        "x = 1, y = 2;\n a.at(0, 1) = 3.0f;\n b.at(i, j) += a.at(i, j);\n f.data.at(0) -= 1;\n\
         mutable f32 r = call my_sum<16, f32, cdiv(N, 4), #p, x.span(1)>(f.data, |f.span|);\n\
         t2 = t{(1), (0)};\n g = select(k, f0, f1);\n v = a.view(4, 8).from(0, 0);\n acc += bias;",
    );
    assert!(matches!(&kinds[0], StmtKind::Assign(list) if list.len() == 2));
    assert!(matches!(&kinds[2], StmtKind::Assign(list) if list[0].op == AssignOp::Add));
    match &kinds[4] {
        StmtKind::ScalarDecl(d) => match &d.items[0].init {
            Some(choreo_compiler::ast::ScalarInit::Assign(Expr {
                kind: ExprKind::Call(call),
                ..
            })) => {
                assert_eq!(call.template_args.len(), 5);
                assert_eq!(call.args.len(), 2);
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn parallel_forms() {
    let kinds = stmts(
        "parallel by 4 { }\n parallel p by 4 : block { parallel q by 64 : thread { } }\n\
         parallel {x, y} by [2, 8] { }\n parallel t = {x, y} by [2, 8] : block { }\n\
         parallel p by 2, q by 16 { }\n parallel.async<s> p by 4 : block { }\n\
         parallel p by 2 : block<cooperative> { }\n\
         [[launch_bounds(256, 2)]] [[maxnreg(128)]] parallel p by 8 : block { }\n\
         parallel.async by 1 : device(cpu) { }\n parallel g by 3 : group-4, t by 128 : thread ;",
    );
    assert_eq!(kinds.len(), 10);
    let StmtKind::Parallel(p) = &kinds[5] else { panic!() };
    assert!(p.is_async.is_some());
    assert_eq!(p.stream.as_ref().map(|s| s.name.as_str()), Some("s"));
    let StmtKind::Parallel(p) = &kinds[3] else { panic!() };
    assert!(
        matches!(&p.items[0].binder, ParallelBinder::Tuple { name: Some(_), components } if components.len() == 2)
    );
    let StmtKind::Parallel(p) = &kinds[4] else { panic!() };
    assert_eq!(p.items.len(), 2);
    let StmtKind::Parallel(p) = &kinds[6] else { panic!() };
    assert!(p.items[0].level.as_ref().is_some_and(|l| l.cooperative.is_some()));
    let StmtKind::Parallel(p) = &kinds[7] else { panic!() };
    assert_eq!(p.attrs.len(), 2);
    let StmtKind::Parallel(p) = &kinds[9] else { panic!() };
    assert_eq!(p.items[0].level.as_ref().map(|l| l.level.level), Some(Level::Group4));
    assert!(p.body.stmts.iter().all(|s| matches!(s.kind, StmtKind::Empty)));
}

#[test]
fn with_foreach_and_ranges() {
    let kinds = stmts(
        "with idx = {i, j} in [4, 8] { foreach i { } foreach i, j { } foreach idx(1:) ; }\n\
         foreach k in 16 : unroll(4) { }\n foreach {m, n} in [2, 3] : unroll, vectorize(n, 4) { }\n\
         with {i, j} in [8, 8] { foreach i(1:-1), j(1:-1) a.at(i, j) = 0.0f; foreach c = i(2:) { } }\n\
         with k in 8 { foreach k(: :2) { } foreach k(0:0:2) { } }\n with a2 in 4 where a <-> b { }",
    );
    let StmtKind::Foreach(f) = &kinds[1] else { panic!() };
    assert!(matches!(&f.items, ForeachItems::Within(w) if w.len() == 1));
    assert_eq!(f.suffixes.len(), 1);
    let StmtKind::With(w) = &kinds[3] else { panic!() };
    let StmtKind::Foreach(inner) = &w.body.stmts[0].kind else { panic!() };
    let ForeachItems::Ranges(ranges) = &inner.items else { panic!() };
    let bounds = ranges[0].bounds.as_ref().expect("bounds");
    assert_eq!(bounds.lo.as_ref().map(sexpr).as_deref(), Some("1"));
    assert_eq!(bounds.hi.as_ref().map(sexpr).as_deref(), Some("-1"));
    assert!(!inner.body.braced);
    let StmtKind::Foreach(local) = &w.body.stmts[1].kind else { panic!() };
    assert!(matches!(&local.items, ForeachItems::Ranges(r) if r[0].local.is_some()));
    let StmtKind::With(w) = &kinds[4] else { panic!() };
    let StmtKind::Foreach(stepped) = &w.body.stmts[0].kind else { panic!() };
    let ForeachItems::Ranges(r) = &stepped.items else { panic!() };
    assert_eq!(r[0].bounds.as_ref().and_then(|b| b.step).map(|s| s.0.value), Some(2));
    let StmtKind::With(w) = &kinds[5] else { panic!() };
    assert_eq!(w.swaps.len(), 1);
}

#[test]
fn dangling_else_binds_to_the_inner_if() {
    let kind = stmt("if (n > 0) if (m > 0) x = 1; else x = 2;");
    let StmtKind::If { then_body, else_body, .. } = kind else { panic!() };
    assert!(else_body.is_none(), "the else belongs to the inner if");
    let StmtKind::If { else_body: inner_else, .. } = &then_body.stmts[0].kind else { panic!() };
    assert!(inner_else.is_some());
}

#[test]
fn control_flow_and_simple_statements() {
    let kinds = stmts(
        "while (r < n) { r = r + 1; break; continue; }\n if (call ready(n)) ; else { }\n\
         inthreads.async (t >= 64) { yield; }\n inthreads (t < 32) ;\n\
         apply {i, j} in acc.span { acc.at(i, j) = 0.0f; }\n return;\n { ; }\n\
         println(\"p=\", p, \" n=\", n + 1);\n print!(\"x\" \"y\");\n assert(n > 0, \"positive\");\n\
         __cpp__(R\"(int x = 0;)\");\n sync.shared;\n sync.global;\n sync.barrier : block;\n\
         sync.fence : block<global>;\n wait f0, e.at(k), full[1];\n trigger e after f0, f1;\n\
         trigger.cluster e;\n swap(f0, f1);\n rotate a, b, c;\n call bump(f.data, |f.span|);\n\
         __atomic_add(a.at(0), 1);\n __bar_sync(1, 64);\n __pragma_croq_intrinsic_prefix(\"my_\");\n\
         my_intrinsic<4>(x);\n croq::cuda::setreg_inc(240);",
    );
    assert_eq!(kinds.len(), 26);
    assert!(matches!(
        &kinds[1],
        StmtKind::If { cond: Expr { kind: ExprKind::Call(_), .. }, else_body: Some(_), .. }
    ));
    assert!(
        matches!(&kinds[8], StmtKind::Print(p) if p.compile_time && !p.newline && p.args.len() == 1)
    );
    assert!(matches!(&kinds[10], StmtKind::Cpp(s) if s.raw && s.value == "int x = 0;"));
    assert!(matches!(&kinds[14], StmtKind::Fence { storage: Some(_), .. }));
    assert!(matches!(&kinds[15], StmtKind::Wait(targets) if targets.len() == 3));
    assert!(matches!(&kinds[16], StmtKind::Trigger(t) if t.after.len() == 2));
    assert!(matches!(&kinds[19], StmtKind::Swap { rotate: true, names } if names.len() == 3));
}

#[test]
fn asm_statements() {
    let kinds = stmts(
        "__asm__ volatile(\"mov.u32 %0, %%laneid;\" : \"=r\"(lane));\n\
         asm(\"add.s32 %0, %1, %2;\" : \"=r\"(x) : \"r\"(x), \"r\"(lane));\n\
         asm(\"mov %[d], %[s];\" : [d] \"=r\"(o.at(t)) : [s] \"r\"(x) : \"memory\");\n\
         asm volatile(\"membar.cta;\" ::: \"memory\");\n asm(\"nop;\" :: \"r\"(x));",
    );
    let StmtKind::Asm(a) = &kinds[2] else { panic!() };
    assert_eq!((a.outputs.len(), a.inputs.len(), a.clobbers.len()), (1, 1, 1));
    assert!(a.outputs[0].name.is_some());
    let StmtKind::Asm(a) = &kinds[3] else { panic!() };
    assert_eq!((a.outputs.len(), a.inputs.len(), a.clobbers.len()), (0, 0, 1));
    let StmtKind::Asm(a) = &kinds[4] else { panic!() };
    assert_eq!((a.outputs.len(), a.inputs.len()), (0, 1));
}

#[test]
fn dma_statements() {
    let kinds = stmts(
        "f = dma.copy a.chunkat(p, _) => shared;\n dma.copy f.data => b.chunkat(p, _);\n\
         g = dma.copy.async a => shared;\n h = dma.copy.async a.chunkat(p, k) => buf after g;\n\
         ph = dma.any;\n x = dma.copy a => select(k % 2, bufA, bufB);\n\
         dma.pad<{1, 0}, {2, 0}, {0, 0}, -1.0f> a => shared;\n dma.transp<1, 0> a => local;\n\
         t = tma.load.async.evict_first.swiz<128> a.chunkat(p, _) => shared;\n\
         tma.copy.multicast.promote<256>.zfill s0 => b;\n dma.copy.swizzle<64> a => s1;",
    );
    let StmtKind::Dma(d) = &kinds[0] else { panic!() };
    assert!(d.future.is_some() && matches!(d.dst, DmaDest::Storage(..)));
    let StmtKind::Dma(d) = &kinds[3] else { panic!() };
    assert!(d.is_async.is_some() && d.after.is_some());
    assert!(matches!(&kinds[4], StmtKind::DmaAny { .. }));
    let StmtKind::Dma(d) = &kinds[8] else { panic!() };
    assert_eq!(d.attrs.len(), 2);
    let StmtKind::Dma(d) = &kinds[9] else { panic!() };
    assert_eq!(d.attrs.len(), 3);
}

#[test]
fn mma_statements() {
    let kinds = stmts(
        "acc = mma.fill.f32 0.0f;\n mma.fill acc, 0.0f;\n ma = mma.load.frag sa;\n\
         mb = mma.load.swiz<64>.async sb;\n mma.load sa, ma;\n mma.row.col acc, ma, mb;\n\
         q = mma.row.row.async acc, ma, mb;\n mma.row.col.sp acc, ma, mb, meta;\n\
         mma.row.col.scale acc, ma, mb, sf, 2;\n mma.store.transp acc, c;\n\
         mma.store.mask acc, c, 10, 12;\n mma.scale acc, sf, 1.0f;\n\
         [[schedule(k_tiles(1, 0))]] mma.row.col acc, ma, mb;\n\
         reduce_max(m, acc, 1);\n all_reduce_sum(v);\n copy(d, acc);",
    );
    assert_eq!(kinds.len(), 16);
    let StmtKind::Mma(m) = &kinds[6] else { panic!() };
    assert!(matches!(&m.kind, MmaKind::Exec { future: Some(_), .. }));
    let StmtKind::Mma(m) = &kinds[12] else { panic!() };
    assert!(m.schedule.is_some());
}

#[test]
fn host_regions_are_kept_in_order() {
    let (file, diags, _) = parse(
        "#include \"choreo.h\"\n__device__ float twice(float x) { return 2 * x; }\n\
         __co__ void f(f32 [4] a) { parallel p by 4 a.at(p) = 1.0f; }\n__cok__ { int k; }\n\
         int main() { return 0; }\n",
    );
    assert!(diags.iter().all(|d| !d.is_error()), "{diags:?}");
    let kinds: Vec<&str> = file
        .items
        .iter()
        .map(|i| match i {
            Item::Host(_) => "host",
            Item::Device(_) => "device",
            Item::CoFunction(_) => "co",
            Item::Cok { .. } => "cok",
        })
        .collect();
    assert_eq!(kinds, ["host", "device", "host", "co", "host", "cok", "host"]);
}

#[test]
fn spans_point_at_the_original_text_through_macros() {
    let src = "#define N 16\n__co__ void f(f32 [N] a) {\n  parallel p by N a.at(p) = 1.0f;\n}\n";
    let (file, _, db) = parse(src);
    let Some(Item::CoFunction(f)) = file.items.iter().find(|i| matches!(i, Item::CoFunction(_)))
    else {
        panic!()
    };
    let StmtKind::Parallel(p) = &f.body.stmts[0].kind else { panic!() };
    assert_eq!(db.snippet(p.items[0].bound.span), "N");
    assert_eq!(db.location(p.items[0].bound.span), "test.co:3:17");
    assert_eq!(db.snippet(f.body.stmts[0].span), "parallel p by N a.at(p) = 1.0f;");
}

// ---------------------------------------------------------------------------------------------
// Rejections
// ---------------------------------------------------------------------------------------------

/// Each snippet (the body of a function) is rejected with exactly one error of the code.
#[test]
fn syntactic_rejections_have_their_codes() {
    let cases: &[(&str, &str)] = &[
        ("x = 1 + ;", "E0301"),
        ("f32 [7 a] x;", "E0301"),
        ("s32 [] x;", "E0301"),
        ("ituple[2] t = {1, 2};", "E0301"),
        ("parallel [p] by 6 { }", "E0301"),
        ("x = a . at(0);", "E0301"),
        ("with k in 8 { foreach k(::2) { } }", "E0301"),
        ("f32 [[4, 8]] x;", "E0301"),
        ("mdspan<2> m = [4, 8];", "E0303"),
        ("ituple t : {1, 2};", "E0304"),
        ("ituple<2> t;", "E0305"),
        ("ituple t[2] = {1, 2};", "E0306"),
        ("t = [1, 2];", "E0307"),
        ("mutable f32 [4] x;", "E0308"),
        ("else x = 1;", "E0309"),
        ("parallel p by 2, p by 4 { }", "E0310"),
        ("parallel p by [5, n] { }", "E0311"),
        ("x = a[1, 2];", "E0313"),
        ("f32 [a[1][2]] x;", "E0314"),
        ("swap(f0, f1, f2);", "E0315"),
        ("rotate(f0);", "E0316"),
        ("dma.copy.swiz<16> a => shared;", "E0317"),
        ("tma.copy.promote<32> a => b;", "E0318"),
        ("dma.load a => shared;", "E0319"),
        ("tma.copy.evict_first a => b;", "E0320"),
        ("tma.load.swiz<128>.evict_last a => b;", "E0321"),
        ("tma.load.evict_first.evict_last a => b;", "E0322"),
        ("shared event e = 1;", "E0323"),
        ("trigger.block e;", "E0324"),
        ("parallel p by 4 : block(gpu) { }", "E0325"),
        ("[[schedule(k_tiles(1, 0))]] mma.fill acc, 0.0f;", "E0326"),
        ("asm goto(\"bra %l0;\" :::: done);", "E0327"),
        ("asm(\"nop;\" : : : : );", "E0328"),
        ("mma.desc a;", "E0329"),
        ("wait<0> e;", "E0329"),
        ("tma.store a => b;", "E0329"),
        ("t = tma.copy.async<e> a => shared;", "E0329"),
        ("foreach k in 4 : unroll(0) { }", "E0330"),
        ("mutable s32 x = call f(1) + 1;", "E0331"),
        ("x = 1 + call f(1);", "E0331"),
        ("with b in |a.span| { }", "E0333"),
        ("mma.row.col.async acc, a, b;", "E0334"),
        ("[[maxnreg(64)]] x = 1;", "E0335"),
        ("[[unknown(1)]] parallel p by 4 { }", "E0336"),
        ("tma.load.evict_first.multicast a => b;", "E0337"),
        ("dma.any;", "E0338"),
        ("x = 1, f = dma.copy a => shared;", "E0338"),
        ("x = 9223372036854775808;", "E0204"),
        ("x = .5;", "E0301"),
        ("x = 5.;", "E0301"),
        ("x = 'a';", "E0201"),
        ("println(\"never ends);", "E0202"),
        ("stage<2>(x);", "E0206"),
    ];
    for (body, code) in cases {
        let src = format!("__co__ void f(f32 [8] a, int n) {{\n  {body}\n}}\n");
        assert_eq!(error_codes(&src), [*code], "for `{body}`");
    }
}

#[test]
fn parameter_rejections() {
    let cases: &[(&str, &str)] = &[
        ("shared f32 [4] a", "E0312"),
        ("local f32 [4] a", "E0312"),
        ("f32 [M + 1] a", "E0332"),
        ("f32 [-5, 32] a", "E0332"),
        ("f32 d[]", "E0301"),
        ("long double x", "E0301"),
    ];
    for (param, code) in cases {
        let src = format!("__co__ void f({param}) {{ }}\n");
        assert_eq!(error_codes(&src), [*code], "for `{param}`");
    }
}

#[test]
fn recovery_reports_each_independent_error_once() {
    let src = "__co__ void f(f32 [8] a, int n) {\n\
               \x20 x = n + ;\n\
               \x20 parallel p by 8 { a.at(p) = ; }\n\
               \x20 if (n > ) { y = 1; } else { y = 2; }\n\
               \x20 z = 3;\n\
               }\n";
    let (_, diags, db) = parse(src);
    let lines: Vec<String> =
        diags.iter().filter(|d| d.is_error()).map(|d| db.location(d.primary.span)).collect();
    assert_eq!(lines, ["test.co:2:11", "test.co:3:31", "test.co:4:11"], "{diags:#?}");
}

#[test]
fn broken_header_still_reports_body_errors() {
    let codes = error_codes("__co__ void (int n) {\n  x = ;\n}\n");
    assert_eq!(codes, ["E0301", "E0301"]);
}

#[test]
fn unclosed_brace_is_one_error() {
    let codes = error_codes("__co__ void f(int n) {\n  if (n > 0) {\n    x = 1;\n}\n");
    assert_eq!(codes, ["E0114"], "only the preprocessor's 'unterminated function' error");
}

#[test]
fn lexer_error_tokens_do_not_cascade() {
    assert_eq!(error_codes("__co__ void f() {\n  x = 1 $ 2;\n  y = 3;\n}\n"), ["E0201"]);
    assert_eq!(error_codes("__co__ void f() {\n  x = 1;\n  /* open\n}\n"), ["E0114", "E0203"]);
}

// ---------------------------------------------------------------------------------------------
// Robustness
// ---------------------------------------------------------------------------------------------

#[test]
fn deep_parentheses_are_an_error_not_a_stack_overflow() {
    let depth = 100_000;
    let src = format!(
        "__co__ void f() {{\n  x = {}1{};\n  y = 2 +;\n}}\n",
        "(".repeat(depth),
        ")".repeat(depth)
    );
    assert_eq!(error_codes(&src), ["E0302", "E0301"], "the nesting error, then recovery");
}

#[test]
fn deep_braces_are_an_error_not_a_stack_overflow() {
    let depth = 100_000;
    let src =
        format!("__co__ void f() {{\n{}{}\n  y = 2 +;\n}}\n", "{".repeat(depth), "}".repeat(depth));
    assert_eq!(error_codes(&src), ["E0302", "E0301"]);
}

#[test]
fn deep_unary_and_ternary_chains_are_bounded() {
    for chain in
        ["!".repeat(50_000) + "c", "-".repeat(50_000) + "n", "c ? 1 : ".repeat(50_000) + "2"]
    {
        let src = format!("__co__ void f() {{\n  x = {chain};\n}}\n");
        assert_eq!(error_codes(&src), ["E0302"]);
    }
}

#[test]
fn moderate_nesting_is_accepted() {
    let src = format!(
        "__co__ void f() {{\n  x = {}1{};\n  {} y = 1; {}\n}}\n",
        "(".repeat(60),
        ")".repeat(60),
        "{".repeat(60),
        "}".repeat(60)
    );
    accept(&src);
}

/// A tiny deterministic PRNG (no dependencies).
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const SEEDS: &[&str] = &[
    "#define T 16\n__co__ f32 [8, 32] scale(f32 [8, 32] x, f32 k) {\n  f32 [x.span] y;\n  parallel b by 8, t by 32\n    y.at(b, t) = x.at(b, t) * k;\n  return y;\n}\n",
    "__co__ s32 [64, 32] twice(s32 [64, 32] a) {\n  s32 [a.span] out;\n  parallel p by 4 : block {\n    t = dma.copy.async a.chunkat(p, _) => shared;\n    shared s32 [t.span] acc;\n    wait t;\n    parallel c by 32 : thread\n      foreach i in 16\n        acc.at(i, c) = t.data.at(i, c) * 2;\n    sync.barrier : block;\n    dma.copy acc => out.chunkat(p, _);\n  }\n  return out;\n}\n",
    "__co__ void ops(s32 [8] out, int n, int m) {\n  parallel p by 8 {\n    bool even = n & 1 == 0;\n    s32 v = n | m & 3;\n    s32 w = (0 - n) * 2 + (n << 2);\n    out.at(p) = even ? v : w;\n    if (v > 0) { println(\"v=\", v); } else asm volatile(\"nop;\" ::: \"memory\");\n  }\n}\n",
    "__co__ void mm(f16 [64, 16] a, f32 [64, 16] &c) {\n  parallel bm by 4 : block {\n    shared f16 [16, 16] sa;\n    ma = mma.load.swiz<64>.async sa;\n    acc = mma.fill.f32 0.0f;\n    [[schedule(k_tiles(1, 0))]] mma.row.col acc, ma, ma;\n    mma.store.mask acc, c.chunkat(bm, _), 10, 12;\n    with {i, j} in [8, 8] { foreach i(1:-1), c2 = j(2:) a.at(i, c2) = __to<f32>(i); }\n  }\n}\n",
];

const FRAGMENTS: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "[[",
    ";",
    ",",
    ":",
    "::",
    "=",
    "=>",
    "<",
    ">",
    "?",
    "\"",
    "'",
    "/*",
    "//",
    "#",
    "#define X(",
    "-",
    "|",
    ".at(",
    ".span",
    "parallel",
    "by",
    "if",
    "else",
    "foreach",
    "in",
    "with",
    "dma.copy",
    "mma",
    "__co__",
    "R\"x(",
    "0x",
    "99999999999999999999",
    "1.5f",
    "inf",
    "_",
    "asm",
    "goto",
    "call",
    "\n",
    "\\",
    "group-4",
    "stage<1>(",
    "$",
];

#[test]
fn random_mutations_never_panic() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for _ in 0..2000 {
        let seed = SEEDS[rng.below(SEEDS.len())];
        let mut text = seed.as_bytes().to_vec();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(text.len() + 1);
            match rng.below(4) {
                0 => {
                    let len = rng.below(12).min(text.len() - at.min(text.len()));
                    text.drain(at..at + len);
                }
                1 => {
                    let frag = FRAGMENTS[rng.below(FRAGMENTS.len())];
                    text.splice(at..at, frag.bytes());
                }
                2 => {
                    let len = rng.below(20).min(text.len() - at.min(text.len()));
                    let piece: Vec<u8> = text[at..at + len].to_vec();
                    let to = rng.below(text.len() + 1);
                    text.splice(to..to, piece);
                }
                _ => {
                    if at < text.len() {
                        let alphabet = b" \n;{}()[]<>=+-*/%!&|^~#?:.,\"'\\azAZ09_";
                        text[at] = alphabet[rng.below(alphabet.len())];
                    }
                }
            }
        }
        let src = String::from_utf8(text).expect("ASCII stays UTF-8");
        let (_, diags, _) = parse(&src);
        for d in &diags {
            assert!(d.primary.span.end as usize <= src.len(), "span past the end: {d:?}\n{src}");
            assert!(d.primary.span.start <= d.primary.span.end);
        }
    }
}
