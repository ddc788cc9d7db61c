//! Statements (spec §4.2–§4.4, §6, §7.3, §9, §11.2, §15, §16).

use super::fold;
use super::scope::Symbol;
use super::types;
use super::{Checker, Region, RetState, Val};
use crate::ast::{self, ExprKind, StmtKind as A};
use crate::diagnostics::Diagnostic;
use crate::hir::visit::{self, Walk};
use crate::hir::{
    self, AssignOp, BarrierScope, BufferRef, Check, CheckKind, Dim, ElemTy, FenceScope, HExpr,
    HExprKind, LocalOrigin, LocalPlace, Place, ReturnTy, SpannedTy, Stmt, StmtKind, Storage, Ty,
    Unroll, VarId,
};
use crate::source::Span;

/// Whether any parallel-by or DMA occurs anywhere in `stmts`, i.e. the function works on device
/// data (spec §7.4 step 4).
pub(crate) fn contains_parallel(stmts: &[ast::Stmt]) -> bool {
    stmts.iter().any(|s| match &s.kind {
        // A host-level DMA copies device data (a device-to-device copy or a kernel).
        A::Parallel(_) | A::Dma(_) => true,
        A::Block(b)
        | A::While { body: b, .. }
        | A::Inthreads { body: b, .. }
        | A::Apply { body: b, .. } => contains_parallel(&b.stmts),
        A::With(w) => contains_parallel(&w.body.stmts),
        A::Foreach(f) => contains_parallel(&f.body.stmts),
        A::If { then_body, else_body, .. } => {
            contains_parallel(&then_body.stmts)
                || else_body.as_ref().is_some_and(|b| contains_parallel(&b.stmts))
        }
        _ => false,
    })
}

pub(crate) fn hir_assign_op(op: ast::AssignOp) -> AssignOp {
    match op {
        ast::AssignOp::Assign => AssignOp::Assign,
        ast::AssignOp::Add => AssignOp::Add,
        ast::AssignOp::Sub => AssignOp::Sub,
        ast::AssignOp::Mul => AssignOp::Mul,
        ast::AssignOp::Div => AssignOp::Div,
        ast::AssignOp::Rem => AssignOp::Rem,
    }
}

fn stmt(kind: StmtKind, span: Span) -> Stmt {
    Stmt { kind, span }
}

impl Checker<'_> {
    /// Checks statements in the current scope.
    pub(crate) fn check_stmts(&mut self, stmts: &[ast::Stmt]) -> Vec<Stmt> {
        let mut out = Vec::with_capacity(stmts.len());
        for s in stmts {
            self.check_stmt(s, &mut out);
        }
        out
    }

    /// Checks a block in a scope of its own.
    pub(crate) fn check_block_scoped(&mut self, block: &ast::Block) -> Vec<Stmt> {
        self.scopes.push();
        let out = self.check_stmts(&block.stmts);
        self.scopes.pop();
        out
    }

    /// Declares a name in the innermost scope, reporting a clash (`E0402`).
    pub(crate) fn declare_symbol(&mut self, name: &ast::Ident, sym: Symbol) {
        if let Some(prev) = self.scopes.declared_here(&name.name) {
            self.diags.push(
                Diagnostic::error(
                    "E0402",
                    name.span,
                    format!("symbol `{}' has been declared already.", name.name),
                )
                .with_label("declared again here")
                .with_secondary(prev, "first declared here"),
            );
        } else if let Some(s) = self.sym_names.get(&name.name).copied() {
            let prev = self.syms.get(s.index()).map(|s| s.span);
            let mut d = Diagnostic::error(
                "E0402",
                name.span,
                format!("symbol `{}' has been declared already.", name.name),
            )
            .with_label("a symbolic dimension has this name");
            if let Some(prev) = prev {
                d = d.with_secondary(prev, "symbolic dimension introduced here");
            }
            self.diags.push(d);
        }
        self.scopes.declare(&name.name, sym, name.span);
    }

    /// Declares `name` as a local of unknown type after an unsupported construct, so that
    /// later uses do not cascade into "used before declaration" errors.
    pub(crate) fn declare_poisoned(&mut self, name: &ast::Ident) {
        let place = self.scalar_place();
        let var = self.new_local(&name.name, name.span, Ty::Error, place, true, LocalOrigin::Decl);
        if self.scopes.declared_here(&name.name).is_none() {
            self.scopes.declare(&name.name, Symbol::Local(var), name.span);
        }
    }

    fn check_stmt(&mut self, s: &ast::Stmt, out: &mut Vec<Stmt>) {
        let span = s.span;
        match &s.kind {
            A::Empty => {}
            A::Block(b) => {
                let body = self.check_block_scoped(b);
                out.push(stmt(StmtKind::Block(body), span));
            }
            A::MdspanDecl(d) => self.check_mdspan_decl(d),
            A::ItupleDecl(d) => self.check_ituple_decl(d),
            A::ScalarDecl(d) => self.check_scalar_decl(d, out),
            A::SpannedDecl(d) => self.check_spanned_decl(d, out),
            A::Assign(list) => {
                for a in list {
                    self.check_assignment(a, out);
                }
            }
            A::Print(p) => {
                if p.compile_time {
                    return self.compile_time_print(&p.args, p.newline, span);
                }
                let args = p.args.iter().filter_map(|a| self.print_arg(a)).collect();
                out.push(stmt(StmtKind::Print { newline: p.newline, args }, span));
            }
            A::Return(value) => {
                if let Some(s) = self.check_return(value.as_ref(), span) {
                    out.push(s);
                }
            }
            A::Break | A::Continue => {
                let word = if matches!(s.kind, A::Break) { "break" } else { "continue" };
                if self.loop_depth == 0 {
                    self.error_label(
                        "E0705",
                        span,
                        format!("unable to {word} outside a loop."),
                        "not inside `foreach` or `while`",
                    );
                    return;
                }
                let kind = if word == "break" { StmtKind::Break } else { StmtKind::Continue };
                out.push(stmt(kind, span));
            }
            A::If { cond, then_body, else_body } => {
                let c = self.check_expr_as(cond, Some(ElemTy::Bool));
                let c = match c {
                    Val::Scalar(e) => e,
                    Val::Error => Self::error_expr(cond.span),
                    other => {
                        self.error_label(
                            "E0708",
                            cond.span,
                            format!(
                                "The if-condition can not be evaluated: expect a scalar but got \
                                 '{}'.",
                                other.describe()
                            ),
                            "not a scalar condition",
                        );
                        Self::error_expr(cond.span)
                    }
                };
                // Like an `inthreads`, an `if` on an intra-block index runs its arms in some
                // instances of the level and not in others (see `Checker::participants`).
                let selects = self.in_device() && self.selects_level_instances(&c);
                let splits = self.in_device() && self.splits_warpgroups(&c);
                self.selecting_conditions += u32::from(selects);
                self.warpgroup_splits += u32::from(splits);
                let then_body = self.check_block_scoped(then_body);
                let else_body =
                    else_body.as_ref().map(|b| self.check_block_scoped(b)).unwrap_or_default();
                self.warpgroup_splits -= u32::from(splits);
                self.selecting_conditions -= u32::from(selects);
                out.push(stmt(StmtKind::If { cond: c, then_body, else_body }, span));
            }
            A::While { cond, body } => {
                let c = if self.names_event(cond) {
                    self.event_condition(cond)
                } else {
                    self.check_scalar(cond, "a `while` condition")
                };
                if !matches!(c.ty, Ty::Error | Ty::Scalar(ElemTy::Bool)) {
                    self.error_label(
                        "E0706",
                        cond.span,
                        format!(
                            "requires an event predication expression but got '{}'.",
                            types::ty_name(&c.ty)
                        ),
                        "not a bool condition",
                    );
                }
                let selects = self.in_device() && self.selects_level_instances(&c);
                let splits = self.in_device() && self.splits_warpgroups(&c);
                self.selecting_conditions += u32::from(selects);
                self.warpgroup_splits += u32::from(splits);
                self.loop_depth += 1;
                let body = self.check_block_scoped(body);
                self.loop_depth -= 1;
                self.warpgroup_splits -= u32::from(splits);
                self.selecting_conditions -= u32::from(selects);
                out.push(stmt(StmtKind::While { cond: c, body }, span));
            }
            A::With(w) => self.check_with(w, span, out),
            A::Foreach(f) => self.check_foreach(f, span, out),
            A::Parallel(p) => {
                if let Some(s) = self.check_parallel(p, span) {
                    out.push(s);
                }
            }
            A::Sync(storage, sspan) => match (storage, self.in_device()) {
                (ast::Storage::Global, false) => out.push(stmt(StmtKind::SyncGlobal, span)),
                (ast::Storage::Shared, true) => {
                    self.warn(
                        "W0702",
                        *sspan,
                        "'sync.shared' is deprecated: it is `sync.barrier : block;`",
                        "deprecated",
                    );
                    out.push(stmt(StmtKind::Barrier(BarrierScope::Block), span));
                }
                (ast::Storage::Global, true) => self.error_label(
                    "E0711",
                    span,
                    "`sync.global` waits for the device and is only allowed in host code (use \
                     `sync.barrier : block;` or `sync.fence : device;` in a kernel)",
                    "inside a parallel-by",
                ),
                (ast::Storage::Shared, false) => self.error_label(
                    "E0711",
                    span,
                    "`sync.shared` is only allowed inside a parallel-by",
                    "host code",
                ),
                (ast::Storage::Local, _) => {
                    self.out_of_scope(*sspan, "`sync.local` (unsupported synchronization)")
                }
            },
            A::Barrier(level) => self.check_barrier(level, span, out),
            A::Fence { level, storage: _ } => {
                // The storage qualifier is accepted and changes nothing (spec §15).
                let scope = match level.level {
                    ast::Level::Thread | ast::Level::Group | ast::Level::Group4 => {
                        Some(FenceScope::Block)
                    }
                    ast::Level::Block | ast::Level::Device => Some(FenceScope::Device),
                    ast::Level::Cluster | ast::Level::Term => None,
                };
                if !self.in_device() {
                    self.error_label(
                        "E0711",
                        span,
                        "`sync.fence` is only allowed inside a parallel-by",
                        "host code",
                    );
                } else if let Some(scope) = scope {
                    out.push(stmt(StmtKind::Fence(scope), span));
                } else if level.level == ast::Level::Cluster {
                    self.unsupported(level.span, "`sync.fence : cluster`", 3);
                } else {
                    self.out_of_scope(level.span, "`sync.fence : term`");
                }
            }
            A::FragDecl(d) => self.check_frag_decl(d, span, out),
            A::EventDecl(d) => self.check_event_decl(d, span, out),
            A::Dma(d) => self.check_dma(d, span, out),
            A::DmaAny { engine, name } => self.check_dma_any(name, *engine, span, out),
            A::Mma(m) => self.check_mma(m, span, out),
            A::FragOp(op) => self.check_frag_op(op, span, out),
            A::Wait(targets) => self.check_wait(targets, span, out),
            A::Trigger(t) => self.check_trigger(t, span, out),
            A::Call(c) => self.check_call_stmt(c, span, out),
            A::Assert { cond, message } => self.check_assert(cond, &message.value, span, out),
            A::Swap { rotate, names } => self.check_swap(*rotate, names, span, out),
            A::Cpp(text) => self.check_cpp(&text.value, span, out),
            A::Yield => {
                if self.in_device() {
                    out.push(stmt(StmtKind::Yield, span));
                } else {
                    self.error_label(
                        "E0705",
                        span,
                        "unable to yield outside the parallel-by block(s).",
                        "host code",
                    );
                }
            }
            // The parser scoped the registration: the calls it allows arrive as `call`s.
            A::IntrinsicPragma { .. } => {}
            A::Asm(a) => self.check_asm(a, span, out),
            A::Inthreads { is_async, pred, body } => {
                self.check_inthreads(*is_async, pred, body, span, out)
            }
            A::Apply { names, target, body } => self.check_apply(names, target, body, span, out),
        }
    }

    /// `assert(cond, "message")` (spec §19.1): decided here when the condition is a
    /// constant, checked at run time otherwise.
    fn check_assert(&mut self, cond: &ast::Expr, message: &str, span: Span, out: &mut Vec<Stmt>) {
        let c = self.check_scalar(cond, "an assertion");
        if matches!(c.ty, Ty::Error) {
            return;
        }
        if c.ty.scalar() != Some(ElemTy::Bool) && !c.ty.is_integer() {
            self.error_label(
                "E0708",
                cond.span,
                format!(
                    "the assertion can not be evaluated: expect a bool or integer but got '{}'",
                    types::ty_name(&c.ty)
                ),
                "not a condition",
            );
            return;
        }
        match (&c.kind, fold::const_int(&c)) {
            (HExprKind::Bool(true), _) => {}
            (_, Some(v)) if v != 0 => {}
            (HExprKind::Bool(false), _) | (_, Some(_)) => {
                self.error_label(
                    "E0713",
                    span,
                    format!("choreo assertion abort: {message}"),
                    "statically false",
                );
            }
            _ => {
                let cond = if c.ty.scalar() == Some(ElemTy::Bool) {
                    c
                } else {
                    let zero = fold::int_lit(0, cond.span);
                    HExpr {
                        kind: HExprKind::Binary {
                            op: hir::BinOp::Ne,
                            lhs: Box::new(c),
                            rhs: Box::new(HExpr { ty: Ty::Scalar(ElemTy::S64), ..zero }),
                        },
                        ty: Ty::Scalar(ElemTy::Bool),
                        span: cond.span,
                    }
                };
                out.push(stmt(StmtKind::Assert { cond, message: message.to_string() }, span));
            }
        }
    }

    /// `sync.barrier : level;` (spec §15).
    fn check_barrier(&mut self, level: &ast::LevelRef, span: Span, out: &mut Vec<Stmt>) {
        if !self.in_device() {
            self.error_label(
                "E0711",
                span,
                format!(
                    "`sync.barrier : {}` is only allowed inside a parallel-by",
                    level.level.as_str()
                ),
                "host code",
            );
            return;
        }
        let scope = match level.level {
            ast::Level::Thread | ast::Level::Group => BarrierScope::Warp,
            // Blocks waiting for each other, in the block-level body of a cooperative kernel
            // (spec §8.9); the threads of one block, anywhere else.
            ast::Level::Block
                if self.region == Region::Device(hir::Level::Block) && self.cooperative() =>
            {
                BarrierScope::Grid
            }
            ast::Level::Block => BarrierScope::Block,
            // Blocks of one cluster waiting for each other (spec-tier3 §1.2).
            ast::Level::Cluster if self.kernel.as_ref().is_some_and(|k| k.cluster) => {
                BarrierScope::Cluster
            }
            ast::Level::Cluster => {
                return self.error_label(
                    "E0619",
                    level.span,
                    "sync.barrier : cluster requires an enclosing 'parallel : cluster' level",
                    "not in a kernel launched in clusters",
                );
            }
            ast::Level::Group4 => {
                let what = format!("`sync.barrier : {}`", level.level.as_str());
                return self.unsupported(level.span, &what, 3);
            }
            ast::Level::Device if self.cooperative() => BarrierScope::Grid,
            ast::Level::Device => {
                return self.error_label(
                    "E0711",
                    level.span,
                    "sync.barrier : device requires an enclosing 'parallel : block <cooperative>' \
                     scope.",
                    "not in a cooperative kernel",
                );
            }
            ast::Level::Term => return self.out_of_scope(level.span, "`sync.barrier : term`"),
        };
        out.push(stmt(StmtKind::Barrier(scope), span));
    }

    // -- declarations -----------------------------------------------------------------------

    fn check_scalar_decl(&mut self, d: &ast::ScalarDecl, out: &mut Vec<Stmt>) {
        if let Some((storage, sspan)) = d.storage {
            match (storage, self.in_device()) {
                (ast::Storage::Global, _) => {
                    self.error_label(
                        "E0432",
                        sspan,
                        "a global scalar is not supported (declare it without `global`)",
                        "global scalar",
                    );
                }
                (_, false) => {
                    let name = d.items.first().map(|i| i.name.name.clone()).unwrap_or_default();
                    self.error_label(
                        "E0433",
                        sspan,
                        format!(
                            "{} variable '{name}` must be declared inside parallel-by.",
                            storage.as_str()
                        ),
                        "host code",
                    );
                    return;
                }
                (ast::Storage::Shared, true) => {
                    self.check_shared_scalars(d, out);
                    return;
                }
                // A `local` scalar is what a scalar in a kernel is anyway: per thread.
                (ast::Storage::Local, true) => {}
            }
        }
        let declared = d.ty.map(|(t, s)| (t, types::scalar_from_ast(t), s));
        if let Some((_, t, s)) = declared {
            if !self.implemented_elem(t, s) {
                return;
            }
        }
        let mutable = match declared {
            Some((ast::ScalarType::Elem(_), _, _)) => true,
            _ => d.mutable.is_some(),
        };
        for item in &d.items {
            let init_expr = match &item.init {
                Some(ast::ScalarInit::Assign(e)) | Some(ast::ScalarInit::Brace(e)) => Some(e),
                None => None,
            };
            let init_val =
                init_expr.map(|e| (self.check_expr_as(e, declared.map(|(_, t, _)| t)), e.span));
            let name = &item.name.name;
            let (ty, init) = match (declared, init_val) {
                (None, None) => {
                    self.error_label(
                        "E0405",
                        item.name.span,
                        format!("unable to deduce the type of `{name}'"),
                        "no type and no initialiser",
                    );
                    (Ty::Error, None)
                }
                (Some((ast::ScalarType::Int | ast::ScalarType::Bool, t, _)), None) if !mutable => {
                    self.error_label(
                        "E0404",
                        item.name.span,
                        format!("`{name}' must be initialized"),
                        "no initialiser",
                    );
                    (Ty::Scalar(t), None)
                }
                (Some((_, t, _)), None) => (Ty::Scalar(t), None),
                (declared, Some((v, vspan))) => {
                    let e = match v {
                        Val::Scalar(e) => e,
                        Val::Error => Self::error_expr(vspan),
                        Val::Str(_) => {
                            self.error_label(
                                "E0412",
                                vspan,
                                "string variables are not supported yet.",
                                "a string",
                            );
                            Self::error_expr(vspan)
                        }
                        other => {
                            let want = declared
                                .map_or("mutable".to_string(), |(_, t, _)| t.as_str().to_string());
                            self.error_label(
                                "E0406",
                                vspan,
                                format!(
                                    "`{name}' is declared as \"{want}\" but initialized as \"{}\"",
                                    other.describe()
                                ),
                                "not a scalar",
                            );
                            Self::error_expr(vspan)
                        }
                    };
                    match declared {
                        Some((kw, t, _)) => {
                            let keep_bounded =
                                !mutable && kw == ast::ScalarType::Int && e.ty.is_bounded();
                            let converted = self.convert_or_report(e, t, name, vspan);
                            let ty = if keep_bounded { Ty::BoundedInt } else { Ty::Scalar(t) };
                            (ty, Some(converted))
                        }
                        None => {
                            let ty = match &e.ty {
                                Ty::BoundedInt if mutable => Ty::Scalar(ElemTy::S32),
                                t => t.clone(),
                            };
                            let e = if matches!(ty, Ty::Scalar(ElemTy::S32)) && e.ty.is_bounded() {
                                HExpr { ty: ty.clone(), ..e }
                            } else {
                                e
                            };
                            (ty, Some(e))
                        }
                    }
                }
            };
            let place = self.scalar_place();
            let var = self.new_local(name, item.name.span, ty, place, mutable, LocalOrigin::Decl);
            if let (LocalPlace::DeviceScalar, false, Some(init)) = (place, mutable, &init) {
                self.device_inits.insert(var, init.clone());
            }
            if !mutable {
                if let Some(init) = &init {
                    if matches!(
                        init.kind,
                        HExprKind::Int(_) | HExprKind::Float(_) | HExprKind::Bool(_)
                    ) {
                        self.consts.insert(var, init.clone());
                    }
                }
            }
            self.declare_symbol(&item.name, Symbol::Local(var));
            out.push(stmt(StmtKind::Let { var, init }, item.span));
        }
    }

    /// `shared T x, y;` in a kernel: one scalar per block, no initialiser (spec §11.1).
    fn check_shared_scalars(&mut self, d: &ast::ScalarDecl, out: &mut Vec<Stmt>) {
        let declared = d.ty.map(|(t, s)| (types::scalar_from_ast(t), s));
        let Some((elem, tspan)) = declared else {
            let Some(span) = d.items.first().map(|i| i.name.span) else { return };
            self.error_label(
                "E0405",
                span,
                "a shared scalar needs a type (e.g. `shared s32 count;`)",
                "no type",
            );
            return;
        };
        if !self.implemented_elem(elem, tspan) {
            return;
        }
        for item in &d.items {
            if let Some(init) = &item.init {
                let span = match init {
                    ast::ScalarInit::Assign(e) | ast::ScalarInit::Brace(e) => e.span,
                };
                self.error_label(
                    "E0444",
                    span,
                    "initialization is not supported for shared variables",
                    "assign it in the kernel instead",
                );
            }
            let var = self.new_local(
                &item.name.name,
                item.name.span,
                Ty::Scalar(elem),
                LocalPlace::SharedScalar,
                true,
                LocalOrigin::Decl,
            );
            self.declare_symbol(&item.name, Symbol::Local(var));
            out.push(stmt(StmtKind::Let { var, init: None }, item.span));
        }
    }

    /// Converts for an initialisation/assignment, reporting incompatible kinds (`E0406`).
    pub(crate) fn convert_or_report(
        &mut self,
        e: HExpr,
        to: ElemTy,
        name: &str,
        span: Span,
    ) -> HExpr {
        if matches!(e.ty, Ty::Error) {
            return e;
        }
        let from = types::ty_name(&e.ty);
        match self.convert(e, to) {
            Some(c) => c,
            None => {
                self.error_label(
                    "E0406",
                    span,
                    format!(
                        "`{name}' is declared as \"{}\" but initialized as \"{from}\"",
                        to.as_str()
                    ),
                    "incompatible type",
                );
                Self::error_expr(span)
            }
        }
    }

    fn check_spanned_decl(&mut self, d: &ast::SpannedDecl, out: &mut Vec<Stmt>) {
        let first_name = d.items.first().map(|i| i.name.name.clone()).unwrap_or_default();
        let storage = match d.storage {
            Some((ast::Storage::Shared, _)) => Storage::Shared,
            Some((ast::Storage::Local, _)) => Storage::Local,
            _ => Storage::Global,
        };
        if let (Some((_, sspan)), false) = (d.storage, storage == Storage::Global) {
            if !self.in_device() {
                self.error_label(
                    "E0433",
                    sspan,
                    format!(
                        "{} variable '{first_name}` must be declared inside parallel-by.",
                        storage.as_str()
                    ),
                    "host code",
                );
                return;
            }
        } else if self.in_device() {
            let span = d.items.first().map_or(d.elem_span, |i| i.name.span);
            self.error_label(
                "E0431",
                span,
                format!("global variable '{first_name}` mustn't be declared inside parallel-by."),
                "inside a parallel-by",
            );
            return;
        }
        let elem = types::elem_from_token(d.elem);
        if !self.implemented_elem(elem, d.elem_span) {
            return;
        }
        let dims = match &d.shape {
            ast::Shape::List { span, items } => self.check_shape_list(items, *span),
            ast::Shape::Auto(span) => {
                // The grammar has `elem [auto] name` (spec §4.3, "shape inferred; rare") but
                // no rule says what from: a declaration has no initialiser that carries a
                // shape (`{v}` is a value). Rather than guess, ask for the extents.
                self.diags.push(
                    Diagnostic::error(
                        "E0435",
                        *span,
                        "a buffer declared with `[auto]` has nothing to infer its shape from",
                    )
                    .with_label("no shape to infer")
                    .with_help(
                        "write the extents (`f32 [M, N] buf;`); to get a buffer shaped like \
                         some data, copy the data into it: `f = dma.copy src => shared;`",
                    ),
                );
                None
            }
        };
        let Some(dims) = dims else {
            for item in &d.items {
                self.declare_poisoned(&item.name);
            }
            return;
        };
        let shape_span = match &d.shape {
            ast::Shape::List { span, .. } | ast::Shape::Auto(span) => *span,
        };
        if storage == Storage::Local && dims.iter().any(|d| d.as_const().is_none()) {
            self.error_label(
                "E0443",
                shape_span,
                format!(
                    "the shape of local buffer '{first_name}' must be known at compile time \
                     (a local buffer is a per-thread array)"
                ),
                "not constant",
            );
            for item in &d.items {
                self.declare_poisoned(&item.name);
            }
            return;
        }
        for item in &d.items {
            let Some(array) = self.array_dims(&item.array_dims) else {
                self.declare_poisoned(&item.name);
                continue;
            };
            let init = match &item.init {
                None => None,
                Some(e) => match self.check_expr(e) {
                    Val::Scalar(x) => {
                        if matches!(x.ty, Ty::Error) {
                            None
                        } else {
                            Some(self.convert_or_report(x, elem, &item.name.name, e.span))
                        }
                    }
                    Val::Error => None,
                    _ => {
                        self.error_label(
                            "E0430",
                            e.span,
                            format!(
                                "'{}' is declared as a span but has an initialization value \
                                 which is not of scalar type",
                                item.name.name
                            ),
                            "not a scalar",
                        );
                        None
                    }
                },
            };
            // Derived extents must be positive (spec §19.2): checked at entry when they only
            // depend on the parameters, else before the launch (shared buffers) or at the
            // declaration (global buffers).
            for (i, dim) in dims.iter().enumerate() {
                if let Dim::Expr(e) = dim {
                    let check = Check {
                        kind: CheckKind::Positive((**e).clone()),
                        message: format!(
                            "the extent {i} of '{}' must be greater than 0",
                            item.name.name
                        ),
                        span: e.span,
                    };
                    if Self::entry_evaluable(e) {
                        self.entry_checks.push(check);
                    } else if let Some(kernel) = self.kernel.as_mut() {
                        kernel.launch_checks.push(check);
                    } else {
                        out.push(stmt(StmtKind::Check(check), item.span));
                    }
                }
            }
            let place = match storage {
                Storage::Shared => LocalPlace::SharedBuffer,
                Storage::Local => LocalPlace::LocalBuffer,
                Storage::Global | Storage::Host => LocalPlace::GlobalBuffer,
            };
            let mut all_dims = array.clone();
            all_dims.extend(dims.iter().cloned());
            let ty = Ty::Spanned(SpannedTy { elem, dims: all_dims, storage });
            let var = self.new_local(
                &item.name.name,
                item.name.span,
                ty,
                place,
                false,
                LocalOrigin::Decl,
            );
            if let Some(local) = self.locals.get_mut(var.index()) {
                local.array_dims = array.len() as u32;
            }
            self.declare_symbol(&item.name, Symbol::Local(var));
            out.push(stmt(StmtKind::DeclBuffer { var, init }, item.span));
        }
    }

    /// The dimensions of a spanned array (`buf[2][3]`): positive compile-time integers
    /// (`E0442`); empty for a plain buffer.
    fn array_dims(&mut self, items: &[ast::Expr]) -> Option<Vec<Dim>> {
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let e = self.check_int(item, "an array dimension");
            match fold::const_int(&e) {
                Some(v) if v > 0 => out.push(Dim::Const(v as u64)),
                Some(v) => {
                    self.error_label(
                        "E0442",
                        item.span,
                        format!("The array dimensions should be greater than 0, but got {v}."),
                        "not positive",
                    );
                    return None;
                }
                None if matches!(e.ty, Ty::Error) => return None,
                None => {
                    self.error_label(
                        "E0442",
                        item.span,
                        format!(
                            "The array dimensions should be static (compile-time known), but got \
                             '{}'.",
                            self.text(item.span)
                        ),
                        "not constant",
                    );
                    return None;
                }
            }
        }
        Some(out)
    }

    // -- assignments ------------------------------------------------------------------------

    fn check_assignment(&mut self, a: &ast::Assignment, out: &mut Vec<Stmt>) {
        if let Some(at) = a.step {
            if !self.step_target_ok(a, at) {
                return;
            }
        }
        if self.check_shaped_update(a, out) {
            return;
        }
        if self.check_frag_update(a, out) {
            return;
        }
        let op = hir_assign_op(a.op);
        match &a.target.kind {
            ExprKind::Ident(id) => self.assign_name(id, op, a, out),
            ExprKind::At { base, indices } => {
                let Some((buffer, index, elem)) = self.check_at(base, indices, a.target.span)
                else {
                    let _ = self.check_expr(&a.value);
                    return;
                };
                if !self.in_device() {
                    self.error_label(
                        "E0425",
                        a.target.span,
                        "element access is only allowed inside a parallel-by",
                        "element write in host code",
                    );
                }
                self.mark_access(buffer, op != AssignOp::Assign, true);
                self.element_of_swizzled(buffer, a.target.span);
                let v = self.check_expr_as(&a.value, Some(elem));
                let v = self.expect_scalar(v, a.value.span, "an assigned value");
                let Some(value) = self.assigned_value(v, elem, op, a, "element") else { return };
                let id = self.next_access();
                out.push(stmt(
                    StmtKind::Assign { target: Place::Elem { buffer, index, id }, op, value },
                    a.span,
                ));
            }
            ExprKind::Data(_) | ExprKind::View { .. } | ExprKind::Index { .. } => {
                let _ = self.check_expr(&a.target);
                let _ = self.check_expr(&a.value);
                if op == AssignOp::Assign {
                    self.error_label(
                        "E0413",
                        a.target.span,
                        "spanned data can not be assigned as a whole (assign elements with \
                         `.at(…)`, or copy with `dma.copy`)",
                        "whole-data assignment",
                    );
                } else {
                    self.out_of_scope(a.span, "whole-array arithmetic on spanned data");
                }
            }
            _ => {
                self.error_label(
                    "E0413",
                    a.target.span,
                    "the left side of an assignment must be a name or an element access",
                    "not assignable",
                );
            }
        }
    }

    /// Type-checks the value of an assignment to a scalar place of type `to`.
    fn assigned_value(
        &mut self,
        v: HExpr,
        to: ElemTy,
        op: AssignOp,
        a: &ast::Assignment,
        what: &str,
    ) -> Option<HExpr> {
        if matches!(v.ty, Ty::Error) {
            return None;
        }
        let from = v.ty.scalar()?;
        if op == AssignOp::Assign {
            let from_name = types::ty_name(&v.ty);
            return match self.convert(v, to) {
                Some(c) => Some(c),
                None => {
                    self.error_label(
                        "E0406",
                        a.value.span,
                        format!(
                            "type inconsistent: assign {from_name} to {what} of type {}.",
                            to.as_str()
                        ),
                        "incompatible type",
                    );
                    None
                }
            };
        }
        if to == ElemTy::Bool || from == ElemTy::Bool {
            self.error_label(
                "E0407",
                a.span,
                format!(
                    "in operation \"{}\": unable to apply to the types ({} vs. {})",
                    op.as_str(),
                    to.as_str(),
                    from.as_str()
                ),
                "invalid operands",
            );
            return None;
        }
        if op == AssignOp::Rem && (to.is_float() || from.is_float()) {
            self.error_label(
                "E0409",
                a.span,
                format!(
                    "in operation \"%=\": unable to apply to floating-point types ({} vs. {})",
                    to.as_str(),
                    from.as_str()
                ),
                "`%=` needs integer operands",
            );
            return None;
        }
        if let types::Promoted::HalfMix = types::promote(to, from) {
            self.error_label(
                "E0411",
                a.span,
                format!(
                    "unexpect floating-point types in promote: {} and {}",
                    to.as_str(),
                    from.as_str()
                ),
                "f16 and bf16 cannot be mixed",
            );
            return None;
        }
        if matches!(op, AssignOp::Div | AssignOp::Rem) && fold::const_int(&v) == Some(0) {
            self.div_by_zero(a.value.span);
            return None;
        }
        Some(v)
    }

    fn assign_name(
        &mut self,
        id: &ast::Ident,
        op: AssignOp,
        a: &ast::Assignment,
        out: &mut Vec<Stmt>,
    ) {
        let found = self.scopes.lookup_with_span(&id.name).map(|(s, sp)| (s.clone(), sp));
        let Some((sym, decl_span)) = found else {
            if op != AssignOp::Assign {
                let _ = self.check_expr(&a.value);
                self.undeclared(id);
                return;
            }
            self.declare_by_inference(id, &a.value, a.span, out);
            return;
        };
        let immutable = |this: &mut Self| {
            this.diags.push(
                Diagnostic::error(
                    "E0403",
                    id.span,
                    format!("only mutables can be re-assigned ({}).", id.name),
                )
                .with_label("immutable")
                .with_secondary(decl_span, "declared here")
                .with_help("declare it `mutable`, or declare a new name with a type"),
            );
        };
        match sym {
            Symbol::Local(v) => {
                let Some(local) = self.locals.get(v.index()).cloned() else { return };
                if let Ty::Spanned(t) = &local.ty {
                    let _ = self.check_expr(&a.value);
                    if op == AssignOp::Assign {
                        self.error_label(
                            "E0413",
                            id.span,
                            format!(
                                "`{}' of type \"{}\" can not be re-assigned.",
                                id.name,
                                types::ty_name(&Ty::Spanned(t.clone()))
                            ),
                            "spanned data cannot be re-assigned",
                        );
                    } else {
                        self.out_of_scope(a.span, "whole-array arithmetic on spanned data");
                    }
                    return;
                }
                if !local.mutable {
                    let _ = self.check_expr(&a.value);
                    immutable(self);
                    return;
                }
                let Some(to) = local.ty.scalar() else {
                    let _ = self.check_expr(&a.value);
                    return;
                };
                if self.in_device() && local.place == LocalPlace::HostScalar {
                    self.warn(
                        "W0602",
                        a.span,
                        format!(
                            "'{}' is a host variable: the assignment changes a per-thread copy \
                             and the host value is unchanged after the launch",
                            id.name
                        ),
                        "assigns a per-thread copy",
                    );
                }
                let v_val = self.check_expr_as(&a.value, Some(to));
                let value = match v_val {
                    Val::Scalar(e) => e,
                    Val::Error => return,
                    other => {
                        self.error_label(
                            "E0413",
                            a.value.span,
                            format!(
                                "`{}' of type \"mutable {}\" can not be re-assigned as \"{}\"",
                                id.name,
                                to.as_str(),
                                other.describe()
                            ),
                            "different kind",
                        );
                        return;
                    }
                };
                if op == AssignOp::Assign
                    && (to == ElemTy::Bool) != (value.ty.scalar() == Some(ElemTy::Bool))
                    && !matches!(value.ty, Ty::Error)
                {
                    self.error_label(
                        "E0413",
                        a.value.span,
                        format!(
                            "`{}' of type \"mutable {}\" can not be re-assigned as \"{}\"",
                            id.name,
                            to.as_str(),
                            types::ty_name(&value.ty)
                        ),
                        "type-changing re-assignment",
                    );
                    return;
                }
                let Some(value) = self.assigned_value(value, to, op, a, "variable") else {
                    return;
                };
                out.push(stmt(StmtKind::Assign { target: Place::Var(v), op, value }, a.span));
            }
            Symbol::Param(p) => {
                let _ = self.check_expr(&a.value);
                let spanned = self.params.get(p.index()).is_some_and(|p| p.is_spanned());
                if spanned && op == AssignOp::Assign {
                    self.error_label(
                        "E0413",
                        id.span,
                        format!("`{}' is spanned data and can not be re-assigned.", id.name),
                        "spanned data cannot be re-assigned",
                    );
                } else if spanned {
                    self.out_of_scope(a.span, "whole-array arithmetic on spanned data");
                } else {
                    immutable(self);
                }
            }
            Symbol::Sym(_) | Symbol::Shape(_) | Symbol::Tuple { .. } => {
                let _ = self.check_expr(&a.value);
                immutable(self);
            }
            Symbol::Event(_) => {
                let _ = self.check_expr(&a.value);
                self.error_label(
                    "E0471",
                    id.span,
                    format!("'{}' is an event and cannot be assigned: use `trigger`", id.name),
                    "an event",
                );
            }
            Symbol::MmaFuture(_) => {
                let _ = self.check_expr(&a.value);
                immutable(self);
            }
            Symbol::Frag(_) => {
                let _ = self.check_expr(&a.value);
                self.error_label(
                    "E1015",
                    id.span,
                    format!(
                        "'{}' is an MMA fragment: it is filled with `mma.fill`, loaded with \
                         `mma.load` or updated with `op=` and a scalar",
                        id.name
                    ),
                    "a fragment",
                );
            }
            Symbol::Future(_) => {
                let _ = self.check_expr(&a.value);
                self.error_label(
                    "E0413",
                    id.span,
                    format!(
                        "the future '{}' can only be re-bound by a DMA (and only when it was \
                         declared with `dma.any`)",
                        id.name
                    ),
                    "not a DMA",
                );
            }
            Symbol::View(_) => {
                let _ = self.check_expr(&a.value);
                if op == AssignOp::Assign {
                    self.error_label(
                        "E0413",
                        id.span,
                        format!("`{}' is a view and can not be re-assigned.", id.name),
                        "a view cannot be re-assigned",
                    );
                } else {
                    self.out_of_scope(a.span, "whole-array arithmetic on spanned data");
                }
            }
        }
    }

    /// `x = <address>`: there are no pointer variables (`E0412`); `x` is poisoned.
    fn pointer_variable(&mut self, id: &ast::Ident, value: Span) {
        self.error_label("E0412", value, "pointer variables are not supported.", "an address");
        self.declare_poisoned(id);
    }

    /// `x = e` with no visible `x`: declares an immutable `x` of the value's type (spec §4.4).
    fn declare_by_inference(
        &mut self,
        id: &ast::Ident,
        value: &ast::Expr,
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        // `&v` of a scalar is rejected here, before its address is formed.
        if matches!(value.kind, ExprKind::AddressOf(_)) {
            return self.pointer_variable(id, value.span);
        }
        if let ExprKind::Select { index, items } = &value.kind {
            match self.select_data(index, items, value.span, out) {
                Some(view) => self.bind_view(id, view, out),
                None => self.declare_poisoned(id),
            }
            return;
        }
        match self.check_expr(value) {
            Val::Scalar(e) if matches!(e.ty, Ty::Pointer(_)) => {
                self.pointer_variable(id, value.span)
            }
            Val::Scalar(e) => {
                let ty = e.ty.clone();
                let place = self.scalar_place();
                let var = self.new_local(&id.name, id.span, ty, place, false, LocalOrigin::Decl);
                if place == LocalPlace::DeviceScalar {
                    self.device_inits.insert(var, e.clone());
                }
                if matches!(e.kind, HExprKind::Int(_) | HExprKind::Float(_) | HExprKind::Bool(_)) {
                    self.consts.insert(var, e.clone());
                }
                self.declare_symbol(id, Symbol::Local(var));
                out.push(stmt(StmtKind::Let { var, init: Some(e) }, span));
            }
            Val::Tuple { items, bounded } => {
                self.declare_symbol(id, Symbol::Tuple { items, bounded });
            }
            Val::Shape(dims) => {
                self.error_label(
                    "E0421",
                    span,
                    "must use ':' to initialize a mdspan.",
                    "an mdspan value bound with `=`",
                );
                self.declare_symbol(id, Symbol::Shape(dims));
            }
            Val::Buffer(buffer, ty) => {
                let view = hir::View::whole(buffer, &ty, value.span);
                self.bind_view(id, view, out);
            }
            Val::View(view) => self.bind_view(id, view, out),
            Val::Future(_) => {
                self.error_label(
                    "E0450",
                    value.span,
                    "a future can not be bound to another name (bind its data: `x = f.data;`)",
                    "a future",
                );
                self.declare_poisoned(id);
            }
            Val::Array(..) => {
                self.error_label(
                    "E0442",
                    value.span,
                    "an array of buffers can not be bound to a new name (bind one of its buffers)",
                    "an array",
                );
                self.declare_poisoned(id);
            }
            Val::Str(_) => {
                self.error_label(
                    "E0412",
                    value.span,
                    "string variables are not supported yet.",
                    "a string",
                );
            }
            Val::Stream(_) => {
                self.error_label(
                    "E0516",
                    value.span,
                    "a stream can only be used to bind a parallel-by (`parallel<s>`)",
                    "stream used as a value",
                );
            }
            Val::Error => {
                // Declare a poisoned local so later uses do not cascade.
                let place = self.scalar_place();
                let var =
                    self.new_local(&id.name, id.span, Ty::Error, place, false, LocalOrigin::Decl);
                self.declare_symbol(id, Symbol::Local(var));
            }
        }
    }

    // -- print, return ------------------------------------------------------------------------

    /// `print!(…)` / `println!(…)` (spec §16): printed by the compiler, as a note at the
    /// statement; emits no code. A value only known at run time prints as `?`, with a warning.
    fn compile_time_print(&mut self, args: &[ast::Expr], newline: bool, span: Span) {
        let mut text = String::new();
        for a in args {
            let value = self.check_expr(a);
            let printed = match &value {
                Val::Str(s) => Some(s.clone()),
                Val::Scalar(e) => match (&e.kind, fold::const_int(e)) {
                    (HExprKind::Bool(b), _) => Some(b.to_string()),
                    (HExprKind::Float(f), _) => Some(format!("{f:.6}")),
                    (_, Some(v)) if e.ty.is_bounded() => Some(format!("{{{v}}}")),
                    (_, Some(v)) => Some(v.to_string()),
                    _ => None,
                },
                Val::Tuple { items, .. } => items
                    .iter()
                    .map(|e| fold::const_int(e).map(|v| v.to_string()))
                    .collect::<Option<Vec<_>>>()
                    .map(|items| format!("{{{}}}", items.join(", "))),
                Val::Shape(dims) => dims
                    .iter()
                    .map(|d| match d {
                        Dim::Const(c) => Some(c.to_string()),
                        Dim::Sym(s) => self.syms.get(s.index()).map(|s| s.name.clone()),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()
                    .map(|dims| format!("[{}]", dims.join(", "))),
                Val::Error => Some("?".to_string()),
                other => {
                    self.error_label(
                        "E0710",
                        a.span,
                        format!(
                            "the argument of type '{}' is not supported for printing.",
                            other.describe()
                        ),
                        "cannot be printed",
                    );
                    Some("?".to_string())
                }
            };
            match printed {
                Some(p) => text.push_str(&p),
                None => {
                    self.warn(
                        "W0705",
                        a.span,
                        format!(
                            "compile-time evaluation of type '{}' is impossible: `{}` is only \
                             known at run time",
                            value.describe(),
                            self.text(a.span)
                        ),
                        "only known at run time",
                    );
                    text.push('?');
                }
            }
        }
        let label = if newline { "println!" } else { "print!" };
        self.diags.push(Diagnostic::note("N0701", span, text).with_label(label));
    }

    fn print_arg(&mut self, a: &ast::Expr) -> Option<HExpr> {
        let span = a.span;
        match self.check_expr(a) {
            Val::Str(s) => Some(HExpr { kind: HExprKind::Str(s), ty: Ty::String, span }),
            Val::Scalar(e) => (!matches!(e.ty, Ty::Error)).then_some(e),
            Val::Tuple { items, bounded } => {
                let rank = items.len() as u32;
                let ty = if bounded { Ty::BoundedItuple(rank) } else { Ty::Ituple(rank) };
                Some(HExpr { kind: HExprKind::Ituple(items), ty, span })
            }
            Val::Shape(dims) => {
                let rank = dims.len() as u32;
                Some(HExpr { kind: HExprKind::Mdspan(dims), ty: Ty::Mdspan(rank), span })
            }
            Val::Error => None,
            other => {
                self.error_label(
                    "E0710",
                    span,
                    format!(
                        "the argument of type '{}' is not supported for printing.",
                        other.describe()
                    ),
                    "cannot be printed",
                );
                None
            }
        }
    }

    fn check_return(&mut self, value: Option<&ast::Expr>, span: Span) -> Option<Stmt> {
        self.saw_return = true;
        if self.in_device() {
            self.error_label(
                "E0511",
                span,
                "unable to return inside the parallel-by block(s).",
                "inside a parallel-by",
            );
            if let Some(v) = value {
                let _ = self.check_expr(v);
            }
            return None;
        }
        if matches!(self.ret, RetState::Void) {
            self.error_label(
                "E0510",
                span,
                format!("return statement found in void function '{}`.", self.fn_name),
                "the function returns `void`",
            );
            if let Some(v) = value {
                let _ = self.check_expr(v);
            }
            return None;
        }
        let Some(value) = value else {
            match &self.ret {
                RetState::Auto(None) => self.ret = RetState::Auto(Some(ReturnTy::Void)),
                RetState::Auto(Some(ReturnTy::Void)) => {}
                _ => {
                    self.error_label(
                        "E0514",
                        span,
                        format!("non-void function '{}` must return a value.", self.fn_name),
                        "no value",
                    );
                    return None;
                }
            }
            return Some(stmt(StmtKind::Return(None), span));
        };
        let expected = match &self.ret {
            RetState::Declared(t) => Some(t.clone()),
            RetState::Auto(t) => t.clone(),
            RetState::RankOnly { elem, dims: Some(dims), .. } => {
                Some(ReturnTy::Spanned { elem: *elem, dims: dims.clone() })
            }
            RetState::RankOnly { elem, rank, dims: None } => {
                // The first return fixes the extents; the rank stands in for them.
                Some(ReturnTy::Spanned { elem: *elem, dims: vec![Dim::Const(0); *rank] })
            }
            RetState::Void => None,
        };
        let v = self.check_expr(value);
        let unsupported_kind = |this: &mut Self, what: String| {
            this.error_label(
                "E0512",
                value.span,
                format!("returning value with type '{what}' is not supported."),
                "cannot be returned",
            );
        };
        match v {
            Val::Error => None,
            Val::Scalar(e) => {
                let direct_bounded = matches!(&e.kind, HExprKind::Var(v)
                    if self.locals.get(v.index()).is_some_and(|l| !matches!(l.origin, LocalOrigin::Decl)));
                if direct_bounded {
                    unsupported_kind(self, types::ty_name(&e.ty));
                    return None;
                }
                let t = e.ty.scalar()?;
                let target = match expected {
                    None => {
                        self.ret = RetState::Auto(Some(ReturnTy::Scalar(t)));
                        t
                    }
                    Some(ReturnTy::Scalar(r)) => r,
                    Some(other) => {
                        self.return_mismatch(&other, &types::ty_name(&e.ty), value.span);
                        return None;
                    }
                };
                let from = types::ty_name(&e.ty);
                let Some(c) = self.convert(e, target) else {
                    self.error_label(
                        "E0514",
                        value.span,
                        format!("return type inconsistent: {} vs. {from}", target.as_str()),
                        "incompatible type",
                    );
                    return None;
                };
                Some(stmt(StmtKind::Return(Some(c)), span))
            }
            Val::Buffer(buffer, t) => {
                let actual = Ty::Spanned(t.clone());
                match expected {
                    None => {
                        self.ret = RetState::Auto(Some(ReturnTy::Spanned {
                            elem: t.elem,
                            dims: t.dims.clone(),
                        }));
                    }
                    Some(ReturnTy::Spanned { elem, dims }) => {
                        let rank_only = matches!(self.ret, RetState::RankOnly { dims: None, .. });
                        let static_mismatch = dims.len() != t.dims.len()
                            || !rank_only && dims.iter().zip(t.dims.iter()).any(
                                |(a, b)| matches!((a, b), (Dim::Const(x), Dim::Const(y)) if x != y),
                            );
                        if elem != t.elem || static_mismatch {
                            let declared =
                                Ty::Spanned(SpannedTy { elem, dims, storage: Storage::Host });
                            self.error_label(
                                "E0513",
                                value.span,
                                format!(
                                    "return type inconsistent: {} vs. {}",
                                    types::ty_name(&declared),
                                    types::ty_name(&actual)
                                ),
                                "returned data differs from the return type",
                            );
                            return None;
                        }
                        if rank_only {
                            if let RetState::RankOnly { dims, .. } = &mut self.ret {
                                *dims = Some(t.dims.clone());
                            }
                        }
                    }
                    Some(other) => {
                        self.return_mismatch(&other, &types::ty_name(&actual), value.span);
                        return None;
                    }
                }
                self.mark_access(buffer, true, false);
                let kind = match buffer {
                    BufferRef::Param(p) => HExprKind::Param(p),
                    BufferRef::Local(v) => {
                        if let Some(l) = self.locals.get_mut(v.index()) {
                            l.returned = true;
                        }
                        HExprKind::Var(v)
                    }
                };
                Some(stmt(
                    StmtKind::Return(Some(HExpr { kind, ty: actual, span: value.span })),
                    span,
                ))
            }
            other => {
                unsupported_kind(self, other.describe());
                None
            }
        }
    }

    fn return_mismatch(&mut self, expected: &ReturnTy, actual: &str, span: Span) {
        let want = match expected {
            ReturnTy::Void => "void".to_string(),
            ReturnTy::Scalar(t) => t.as_str().to_string(),
            ReturnTy::Spanned { elem, dims } => types::ty_name(&Ty::Spanned(SpannedTy {
                elem: *elem,
                dims: dims.clone(),
                storage: Storage::Host,
            })),
        };
        self.error_label(
            "E0514",
            span,
            format!("return type inconsistent: {want} vs. {actual}"),
            "does not match the return type",
        );
    }

    // -- with / foreach -------------------------------------------------------------------------

    /// Declares the binders of one `with`/`foreach … in` item; returns the component locals.
    fn declare_within(&mut self, w: &ast::Within, lets: &mut Vec<Stmt>) -> Vec<VarId> {
        let dims = self.check_with_bound(&w.bound);
        let place = self.scalar_place();
        let underscore = |this: &mut Self, span: Span| {
            this.error_label(
                "E0703",
                span,
                "_ is not allowed as a with variable. Can only be used in chunkat.",
                "`_` binder",
            );
        };
        let mut comps = Vec::new();
        match &w.binder {
            ast::WithBinder::Name(id) => {
                if id.name == "_" {
                    underscore(self, id.span);
                }
                let dims = dims.unwrap_or_else(|| vec![Dim::Const(1)]);
                for (i, d) in dims.iter().enumerate() {
                    let name = format!("{}_{i}", id.name);
                    let v = self.new_local(
                        &name,
                        id.span,
                        Ty::BoundedInt,
                        place,
                        false,
                        LocalOrigin::WithIndex { upper: d.clone() },
                    );
                    comps.push(v);
                }
                let t = self.new_local(
                    &id.name,
                    id.span,
                    Ty::BoundedItuple(comps.len() as u32),
                    LocalPlace::Expanded,
                    false,
                    LocalOrigin::Tuple { components: comps.clone() },
                );
                self.declare_symbol(id, Symbol::Local(t));
            }
            ast::WithBinder::Tuple { name, components } => {
                let dims = match dims {
                    Some(d) if d.len() == components.len() => d,
                    Some(d) => {
                        self.error_label(
                            "E0702",
                            w.span,
                            format!(
                                "un-matched with-matcher-count({}) and mdspan rank({}).",
                                components.len(),
                                d.len()
                            ),
                            "names and rank differ",
                        );
                        vec![Dim::Const(1); components.len()]
                    }
                    None => vec![Dim::Const(1); components.len()],
                };
                for (c, d) in components.iter().zip(dims) {
                    if c.name == "_" {
                        underscore(self, c.span);
                    }
                    let v = self.new_local(
                        &c.name,
                        c.span,
                        Ty::BoundedInt,
                        place,
                        false,
                        LocalOrigin::WithIndex { upper: d },
                    );
                    self.declare_symbol(c, Symbol::Local(v));
                    comps.push(v);
                }
                if let Some(n) = name {
                    let t = self.new_local(
                        &n.name,
                        n.span,
                        Ty::BoundedItuple(comps.len() as u32),
                        LocalPlace::Expanded,
                        false,
                        LocalOrigin::Tuple { components: comps.clone() },
                    );
                    self.declare_symbol(n, Symbol::Local(t));
                }
            }
        }
        for v in &comps {
            lets.push(stmt(
                StmtKind::Let { var: *v, init: Some(fold::int_lit(0, w.span)) },
                w.span,
            ));
        }
        comps
    }

    fn check_with(&mut self, w: &ast::With, span: Span, out: &mut Vec<Stmt>) {
        if let Some((a, _)) = w.swaps.first() {
            self.out_of_scope(a.span, "`with … where a <-> b`");
        }
        self.scopes.push();
        let mut body = Vec::new();
        for item in &w.items {
            self.declare_within(item, &mut body);
        }
        body.extend(self.check_stmts(&w.body.stmts));
        self.scopes.pop();
        out.push(stmt(StmtKind::Block(body), span));
    }

    fn check_foreach(&mut self, f: &ast::Foreach, span: Span, out: &mut Vec<Stmt>) {
        let mut unroll = None;
        for s in &f.suffixes {
            match s {
                ast::LoopSuffix::Unroll { factor: None, span: s } => {
                    unroll = Some((Unroll::Full, *s))
                }
                ast::LoopSuffix::Unroll { factor: Some((n, nspan)), .. } => {
                    match u32::try_from(n.value).ok().filter(|n| *n > 0) {
                        Some(n) => unroll = Some((Unroll::Factor(n), *nspan)),
                        None => self.error_label(
                            "E0714",
                            *nspan,
                            "unroll factor must be a positive integer",
                            "not a positive factor",
                        ),
                    }
                }
                // A request the compiler may ignore (spec §9.1): nvcc vectorises what it can.
                ast::LoopSuffix::Vectorize { .. } => {}
            }
        }
        self.scopes.push();
        let mut prefix = Vec::new();
        // (var, start, end, step, reset) per loop, outer first.
        let mut loops: Vec<(VarId, HExpr, HExpr, u64, bool)> = Vec::new();
        match &f.items {
            ast::ForeachItems::Within(items) => {
                for item in items {
                    let comps = self.declare_within(item, &mut prefix);
                    for c in comps {
                        let end = self.upper_expr(c, item.span);
                        loops.push((c, fold::int_lit(0, item.span), end, 1, true));
                    }
                }
            }
            ast::ForeachItems::Ranges(ranges) => {
                let mut locals_seen: Vec<String> = Vec::new();
                for r in ranges {
                    self.foreach_range(r, &mut loops, &mut locals_seen);
                }
            }
        }
        self.loop_depth += 1;
        let mut body = self.check_stmts(&f.body.stmts);
        self.loop_depth -= 1;
        self.scopes.pop();
        // A factor unrolls the innermost loop; a full unroll, the whole nest.
        let innermost = loops.len().saturating_sub(1);
        if let Some((Unroll::Factor(n), nspan)) = unroll {
            if let Some((_, start, end, step, _)) = loops.last() {
                let trips = fold::const_int(end)
                    .zip(fold::const_int(start))
                    .map(|(e, s)| ((e - s).max(0) + *step as i128 - 1) / *step as i128);
                if let Some(trips) = trips.filter(|t| i128::from(n) > *t) {
                    self.error_label(
                        "E0714",
                        nspan,
                        format!(
                            "unroll factor {n} is larger than the trip count {trips} of the loop"
                        ),
                        "too large",
                    );
                }
            }
        }
        for (i, (var, start, end, step, reset)) in loops.into_iter().enumerate().rev() {
            let unroll = match unroll {
                Some((Unroll::Full, _)) => Some(Unroll::Full),
                Some((factor, _)) if i == innermost => Some(factor),
                _ => None,
            };
            body = vec![stmt(StmtKind::For { var, start, end, step, reset, unroll, body }, span)];
        }
        prefix.extend(body);
        out.push(stmt(StmtKind::Block(prefix), span));
    }

    /// The upper bound of a bounded local as an s32 expression.
    fn upper_expr(&mut self, v: VarId, span: Span) -> HExpr {
        match self.upper_of(v) {
            Some(d) => super::shapes::dim_to_expr(&d, span),
            None => fold::int_lit(1, span),
        }
    }

    fn foreach_range(
        &mut self,
        r: &ast::Range,
        loops: &mut Vec<(VarId, HExpr, HExpr, u64, bool)>,
        locals_seen: &mut Vec<String>,
    ) {
        let id = &r.var;
        let sym = self.scopes.lookup(&id.name).cloned();
        let comps: Vec<VarId> = match sym {
            None => {
                self.undeclared(id);
                return;
            }
            Some(Symbol::Local(v)) => {
                let origin = self.locals.get(v.index()).map(|l| l.origin.clone());
                let comps = match origin {
                    Some(LocalOrigin::Tuple { components }) => components,
                    _ => vec![v],
                };
                let first_origin =
                    comps.first().and_then(|c| self.locals.get(c.index())).map(|l| &l.origin);
                match first_origin {
                    Some(LocalOrigin::WithIndex { .. }) => comps,
                    Some(LocalOrigin::ParallelIndex { .. }) => {
                        self.error_label(
                            "E0701",
                            id.span,
                            format!(
                                "expect the bounded variable '{}' to be declared by 'within' \
                                 block instead of 'parallel-by' block.",
                                id.name
                            ),
                            "a parallel variable",
                        );
                        return;
                    }
                    _ => {
                        let ty = self
                            .locals
                            .get(v.index())
                            .map(|l| types::ty_name(&l.ty))
                            .unwrap_or_default();
                        self.error_label(
                            "E0701",
                            id.span,
                            format!(
                                "expect a bounded type for iteration variable '{}' but got \
                                 '{ty}'.",
                                id.name
                            ),
                            "not a `with` variable",
                        );
                        return;
                    }
                }
            }
            Some(other) => {
                let what = match other {
                    Symbol::Param(p) => self
                        .params
                        .get(p.index())
                        .map(|p| types::ty_name(&p.ty()))
                        .unwrap_or_default(),
                    Symbol::Sym(_) => "s32".to_string(),
                    Symbol::Shape(d) => format!("mdspan<{}>", d.len()),
                    Symbol::Tuple { items, .. } => format!("ituple<{}>", items.len()),
                    Symbol::View(v) => format!("a view of rank {}", v.dims.len()),
                    Symbol::Future(_) => "future".to_string(),
                    Symbol::Event(_) => "event".to_string(),
                    Symbol::Frag(_) => "MMA fragment".to_string(),
                    Symbol::MmaFuture(_) => "MMA future".to_string(),
                    Symbol::Local(_) => String::new(),
                };
                self.error_label(
                    "E0701",
                    id.span,
                    format!(
                        "expect a bounded type for iteration variable '{}' but got '{what}'.",
                        id.name
                    ),
                    "not a `with` variable",
                );
                return;
            }
        };
        let (lo, hi, step) = match &r.bounds {
            None => (None, None, 1u64),
            Some(b) => {
                let offset = |this: &mut Self, e: &Option<ast::Expr>| -> Option<HExpr> {
                    let e = e.as_ref()?;
                    let v = this.check_scalar(e, "a range offset");
                    if matches!(v.ty, Ty::Error) {
                        return None;
                    }
                    if !v.ty.is_integer() {
                        this.error_label(
                            "E0707",
                            e.span,
                            format!(
                                "a range offset requires an integer but got '{}'",
                                types::ty_name(&v.ty)
                            ),
                            "not an integer",
                        );
                        return None;
                    }
                    Some(v)
                };
                let lo = offset(self, &b.lo);
                let hi = offset(self, &b.hi);
                let step = match b.step {
                    None => 1,
                    Some((lit, s)) => {
                        if lit.value <= 0 {
                            self.error_label(
                                "E0709",
                                s,
                                format!(
                                    "the step of a range must be a positive integer, got {}",
                                    lit.value
                                ),
                                "invalid step",
                            );
                            1
                        } else {
                            if lit.value > 1 {
                                self.warn(
                                    "W0701",
                                    s,
                                    "upstream choreo ignores the step of a range; this \
                                     implementation honours it",
                                    "the step",
                                );
                            }
                            u64::try_from(lit.value).unwrap_or(1)
                        }
                    }
                };
                (lo, hi, step)
            }
        };
        let make = |this: &mut Self, c: VarId| -> (HExpr, HExpr) {
            let start = lo.clone().unwrap_or_else(|| fold::int_lit(0, r.span));
            let upper = this.upper_expr(c, r.span);
            let end = match &hi {
                Some(h) => {
                    let e = this.scalar_binary(
                        crate::hir::BinOp::Add,
                        upper,
                        h.clone(),
                        r.span,
                        false,
                        r.span,
                    );
                    HExpr { ty: Ty::Scalar(ElemTy::S32), ..e }
                }
                None => upper,
            };
            let start = HExpr {
                ty: if start.ty.is_bounded() { Ty::Scalar(ElemTy::S32) } else { start.ty.clone() },
                ..start
            };
            (start, end)
        };
        match &r.local {
            Some(local) => {
                if local.name == "_" {
                    self.error_label(
                        "E0703",
                        local.span,
                        "_ is not allowed as an iteration variable.",
                        "`_` binder",
                    );
                    return;
                }
                if locals_seen.contains(&local.name) {
                    self.error_label(
                        "E0704",
                        local.span,
                        format!("duplicate foreach local '{}'", local.name),
                        "declared twice in this foreach",
                    );
                    return;
                }
                locals_seen.push(local.name.clone());
                if comps.len() != 1 {
                    self.error_label(
                        "E0701",
                        id.span,
                        format!(
                            "'{}' has {} components; `c = v(…)` needs a bounded integer",
                            id.name,
                            comps.len()
                        ),
                        "not a bounded integer",
                    );
                    return;
                }
                let of = comps[0];
                let place = self.scalar_place();
                let c = self.new_local(
                    &local.name,
                    local.span,
                    Ty::BoundedInt,
                    place,
                    false,
                    LocalOrigin::RangeLocal { of },
                );
                self.declare_symbol(local, Symbol::Local(c));
                let (start, end) = make(self, of);
                loops.push((c, start, end, step, false));
            }
            None => {
                for c in comps {
                    let (start, end) = make(self, c);
                    loops.push((c, start, end, step, true));
                }
            }
        }
    }
}

impl Checker<'_> {
    /// Marks the positivity check of a non-constant extent, hoisted to entry when possible.
    pub(crate) fn positive_check(&mut self, e: HExpr, message: String, span: Span) {
        if fold::const_int(&e).is_some() {
            return;
        }
        let check = Check { kind: CheckKind::Positive(e.clone()), message, span };
        if Self::entry_evaluable(&e) {
            if !self.entry_checks.contains(&check) {
                self.entry_checks.push(check);
            }
        } else if let Some(k) = self.kernel.as_mut() {
            k.launch_checks.push(check);
        }
    }

    /// Whether `e` can be computed on the host before a launch (no per-thread values, no
    /// element reads).
    pub(crate) fn host_computable(&self, e: &HExpr) -> bool {
        let mut ok = true;
        visit::for_each_expr(e, |x| {
            match &x.kind {
                HExprKind::At { .. } => ok = false,
                HExprKind::Var(v) if self.is_per_thread(*v) => ok = false,
                _ => {}
            }
            Walk::Continue
        });
        ok
    }
}
