//! Exhaustive walkers over the checked program.
//!
//! Every pass that looks for something inside statements or expressions goes through
//! [`walk_stmts`] / [`walk_expr`] with a [`Visitor`] instead of writing its own recursion.
//! The walkers match every statement, expression and dimension kind without a wildcard arm,
//! so a node kind added to the HIR does not compile until the walkers say what is inside it;
//! a pass then sees the new node's expressions and nested statements without being changed.
//!
//! A visitor's hooks are called before the node's children; returning [`Walk::Skip`] from
//! [`Visitor::stmt`] or [`Visitor::expr`] leaves that node's children out (e.g. a pass that
//! stops at kernel boundaries).

use super::mma::{FragRef, MmaOp, MmaTile};
use super::{BufferRef, Check, CheckKind, Dim, HExpr, HExprKind, Place, Stmt, StmtKind};

/// Whether a walker descends into a node's children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walk {
    /// Visit the children.
    Continue,
    /// Leave the children out.
    Skip,
}

/// Hooks of a walk; each has a default that does nothing and continues.
pub trait Visitor<'a> {
    /// A statement, before its expressions and nested statements.
    fn stmt(&mut self, stmt: &'a Stmt) -> Walk {
        let _ = stmt;
        Walk::Continue
    }

    /// An expression, before its operands.
    fn expr(&mut self, expr: &'a HExpr) -> Walk {
        let _ = expr;
        Walk::Continue
    }

    /// An extent (of a parallel level, a returned mdspan, a buffer accessed), before the
    /// expression of a [`Dim::Expr`].
    fn dim(&mut self, dim: &'a Dim) {
        let _ = dim;
    }

    /// A buffer whose elements are accessed (read by [`HExprKind::At`] or written through
    /// [`Place::Elem`]).
    fn buffer(&mut self, buffer: BufferRef) {
        let _ = buffer;
    }
}

/// Walks `stmts` in order (see [`walk_stmt`]).
pub fn walk_stmts<'a, V: Visitor<'a> + ?Sized>(v: &mut V, stmts: &'a [Stmt]) {
    for s in stmts {
        walk_stmt(v, s);
    }
}

/// Walks one statement: the hook, then its expressions, extents and buffers, then its nested
/// statements (a kernel's and an inner level's body included), in source order.
pub fn walk_stmt<'a, V: Visitor<'a> + ?Sized>(v: &mut V, s: &'a Stmt) {
    if v.stmt(s) == Walk::Skip {
        return;
    }
    match &s.kind {
        StmtKind::Let { var: _, init } => {
            if let Some(e) = init {
                walk_expr(v, e);
            }
        }
        StmtKind::DeclBuffer { var: _, init } => {
            if let Some(e) = init {
                walk_expr(v, e);
            }
        }
        StmtKind::Assign { target, op: _, value } => {
            walk_place(v, target);
            walk_expr(v, value);
        }
        StmtKind::Block(body) => walk_stmts(v, body),
        StmtKind::If { cond, then_body, else_body } => {
            walk_expr(v, cond);
            walk_stmts(v, then_body);
            walk_stmts(v, else_body);
        }
        StmtKind::While { cond, body } => {
            walk_expr(v, cond);
            walk_stmts(v, body);
        }
        StmtKind::For { var: _, start, end, step: _, reset: _, unroll: _, body } => {
            walk_expr(v, start);
            walk_expr(v, end);
            walk_stmts(v, body);
        }
        StmtKind::Break
        | StmtKind::Continue
        | StmtKind::Yield
        | StmtKind::SyncGlobal
        | StmtKind::Barrier(_)
        | StmtKind::Fence(_) => {}
        StmtKind::Assert { cond, message: _ } => walk_expr(v, cond),
        StmtKind::Print { newline: _, args } => {
            for a in args {
                walk_expr(v, a);
            }
        }
        StmtKind::Return(value) => {
            if let Some(e) = value {
                walk_expr(v, e);
            }
        }
        StmtKind::Parallel(tree) => {
            for d in &tree.block.extents {
                walk_dim(v, d);
            }
            for c in &tree.launch_checks {
                walk_check(v, c);
            }
            walk_stmts(v, &tree.body);
        }
        StmtKind::InnerParallel(inner) => {
            for d in &inner.binder.extents {
                walk_dim(v, d);
            }
            walk_stmts(v, &inner.body);
        }
        StmtKind::Check(check) => walk_check(v, check),
        StmtKind::Dma(dma) => {
            for d in &dma.extents {
                walk_dim(v, d);
            }
            walk_stmt(v, &dma.element);
        }
        StmtKind::Wait { groups: _, tma_groups: _, participants: _ }
        | StmtKind::TmaStoreWait { groups: _, participants: _, role: _ }
        | StmtKind::RoleBarrier { role: _ }
        | StmtKind::Rotate { futures: _, groups: _ } => {}
        StmtKind::HostCopy { src, dst, count } => {
            v.buffer(*src);
            v.buffer(*dst);
            walk_dim(v, count);
        }
        StmtKind::Eval(e) => walk_expr(v, e),
        StmtKind::Cpp(_) => {}
        StmtKind::Asm(asm) => {
            for o in &asm.outputs {
                walk_place(v, &o.place);
            }
            for i in &asm.inputs {
                walk_expr(v, &i.value);
            }
        }
        StmtKind::NamedBarrier { sync: _, id, threads } => {
            walk_expr(v, id);
            walk_expr(v, threads);
        }
        StmtKind::EventInit(_) => {}
        StmtKind::GlobalFlag { wait: _, flags, slot, slots: _, elected: _ } => {
            v.buffer(*flags);
            walk_expr(v, slot);
        }
        StmtKind::Trigger(slots) | StmtKind::EventWait(slots) => {
            for slot in slots {
                walk_expr(v, slot.index.expr());
            }
        }
        StmtKind::TriggerAfter(t) => walk_expr(v, t.slot.index.expr()),
        StmtKind::SetMaxNReg { inc: _, regs: _ } => {}
        StmtKind::Mma(op) => walk_mma(v, op),
    }
}

/// Walks the expressions of an MMA statement: fragment indices, values, and the tiles' base
/// addresses, strides and corner accesses.
pub fn walk_mma<'a, V: Visitor<'a> + ?Sized>(v: &mut V, op: &'a MmaOp) {
    let frag = |v: &mut V, f: &'a FragRef| {
        for i in &f.index {
            walk_expr(v, i);
        }
    };
    let tile = |v: &mut V, t: &'a MmaTile| {
        walk_expr(v, &t.base);
        for s in &t.strides {
            walk_expr(v, s);
        }
        walk_expr(v, &t.first);
        walk_expr(v, &t.last);
    };
    match op {
        MmaOp::Decl(_) => {}
        MmaOp::Fill { frag: f, value } | MmaOp::Update { frag: f, op: _, value } => {
            frag(v, f);
            walk_expr(v, value);
        }
        MmaOp::Load { frag: f, tile: t } => {
            frag(v, f);
            tile(v, t);
        }
        MmaOp::Exec { acc, a, b } => {
            frag(v, acc);
            frag(v, a);
            frag(v, b);
        }
        MmaOp::SparseExec { acc, a, b, meta } => {
            frag(v, acc);
            frag(v, a);
            frag(v, b);
            frag(v, meta);
        }
        MmaOp::WgSparseExec { acc, a, b, meta, atoms: _, atom_k: _, wait: _ } => {
            frag(v, acc);
            frag(v, meta);
            let ops = match a {
                crate::hir::mma::WgA::Shared(o) => vec![o.as_ref(), b.as_ref()],
                crate::hir::mma::WgA::Regs(f) => {
                    frag(v, f);
                    vec![b.as_ref()]
                }
            };
            for o in ops {
                tile(v, &o.tile);
                walk_expr(v, &o.k_stride);
            }
        }
        MmaOp::Scale { acc, tmp, scale, m_dim: _, sb } => {
            frag(v, acc);
            frag(v, tmp);
            tile(v, scale);
            walk_expr(v, sb);
        }
        MmaOp::WgWait { acc, pending: _ } => frag(v, acc),
        MmaOp::Frag(op) => match op.as_ref() {
            crate::hir::frag::FragOp::Unpack { acc, .. }
            | crate::hir::frag::FragOp::Pack { acc, .. } => frag(v, acc),
            crate::hir::frag::FragOp::Update { value, .. } => walk_expr(v, value),
            crate::hir::frag::FragOp::ToA { afrag, c0, .. } => {
                frag(v, afrag);
                walk_expr(v, c0);
            }
            _ => {}
        },
        MmaOp::WgExec { acc, a, b, atoms: _, atom_k: _, wait: _, order: _ } => {
            frag(v, acc);
            let mut ops = vec![b.as_ref()];
            match a {
                crate::hir::mma::WgA::Shared(o) => ops.push(o),
                crate::hir::mma::WgA::Regs(f) => frag(v, f),
            }
            for o in ops {
                tile(v, &o.tile);
                walk_expr(v, &o.k_stride);
            }
        }
        MmaOp::Store { frag: f, tile: t, transpose: _, rows, cols } => {
            frag(v, f);
            tile(v, t);
            for e in rows.iter().chain(cols) {
                walk_expr(v, e);
            }
        }
    }
}

/// Walks an assignment target: the buffer and the index expressions of an element.
pub fn walk_place<'a, V: Visitor<'a> + ?Sized>(v: &mut V, place: &'a Place) {
    match place {
        Place::Var(_) => {}
        Place::Elem { buffer, index, id: _ } => {
            v.buffer(*buffer);
            for i in index.exprs() {
                walk_expr(v, i);
            }
        }
    }
}

/// Walks the expressions of a runtime check.
pub fn walk_check<'a, V: Visitor<'a> + ?Sized>(v: &mut V, check: &'a Check) {
    match &check.kind {
        CheckKind::ParamExtent { .. } | CheckKind::SymbolConsistent { .. } => {}
        CheckKind::Positive(e) => walk_expr(v, e),
        CheckKind::MaxThreads { threads, limit: _ } => walk_expr(v, threads),
        CheckKind::MultipleOf { value, factor: _ } => walk_expr(v, value),
    }
}

/// Walks an extent: the hook, then the expression of a [`Dim::Expr`].
pub fn walk_dim<'a, V: Visitor<'a> + ?Sized>(v: &mut V, d: &'a Dim) {
    v.dim(d);
    match d {
        Dim::Const(_) | Dim::Sym(_) | Dim::Dynamic { .. } => {}
        Dim::Expr(e) => walk_expr(v, e),
    }
}

/// Walks an expression: the hook, then its operands (the extents of an mdspan value and the
/// buffer of an element access included).
pub fn walk_expr<'a, V: Visitor<'a> + ?Sized>(v: &mut V, e: &'a HExpr) {
    if v.expr(e) == Walk::Skip {
        return;
    }
    match &e.kind {
        HExprKind::Int(_)
        | HExprKind::Float(_)
        | HExprKind::Bool(_)
        | HExprKind::Str(_)
        | HExprKind::Var(_)
        | HExprKind::Param(_)
        | HExprKind::SymDim(_)
        | HExprKind::ParamExtent { .. }
        | HExprKind::Null
        | HExprKind::Error => {}
        HExprKind::Unary { op: _, operand }
        | HExprKind::Cast { to: _, operand, implicit: _ }
        | HExprKind::CppCast { cpp_type: _, operand } => walk_expr(v, operand),
        HExprKind::Binary { op: _, lhs, rhs } | HExprKind::Cdiv(lhs, rhs) => {
            walk_expr(v, lhs);
            walk_expr(v, rhs);
        }
        HExprKind::Select { index, options } => {
            walk_expr(v, index);
            for o in options {
                walk_expr(v, o);
            }
        }
        HExprKind::Ternary { cond, then_value, else_value } => {
            walk_expr(v, cond);
            walk_expr(v, then_value);
            walk_expr(v, else_value);
        }
        HExprKind::At { buffer, index, id: _ } | HExprKind::Address { buffer, index } => {
            v.buffer(*buffer);
            for i in index.exprs() {
                walk_expr(v, i);
            }
        }
        HExprKind::Atomic { op: _, buffer, index, id: _, args } => {
            v.buffer(*buffer);
            for i in index.exprs() {
                walk_expr(v, i);
            }
            for a in args {
                walk_expr(v, a);
            }
        }
        HExprKind::Call { callee: _, targs: _, args } => {
            for a in args {
                walk_expr(v, a);
            }
        }
        HExprKind::Math { func: _, args } | HExprKind::Ituple(args) => {
            for a in args {
                walk_expr(v, a);
            }
        }
        HExprKind::Mdspan(dims) => {
            for d in dims {
                walk_dim(v, d);
            }
        }
    }
}

/// A [`Visitor`] made of one closure over expressions (for passes that only look at
/// expressions, e.g. "does this use a per-thread value").
pub struct ExprVisitor<F>(pub F);

impl<'a, F: FnMut(&'a HExpr) -> Walk> Visitor<'a> for ExprVisitor<F> {
    fn expr(&mut self, expr: &'a HExpr) -> Walk {
        (self.0)(expr)
    }
}

/// Calls `f` on `e` and every sub-expression, in pre-order (extents of mdspan values
/// included); `f` returning [`Walk::Skip`] leaves that node's operands out.
pub fn for_each_expr<'a>(e: &'a HExpr, f: impl FnMut(&'a HExpr) -> Walk) {
    walk_expr(&mut ExprVisitor(f), e);
}

/// Calls `f` on `e`, then on every operand of what `f` left there, in pre-order (extents of
/// mdspan values included): the walker of passes that rewrite expressions in place.
pub fn for_each_expr_mut(e: &mut HExpr, f: &mut dyn FnMut(&mut HExpr)) {
    f(e);
    match &mut e.kind {
        HExprKind::Int(_)
        | HExprKind::Float(_)
        | HExprKind::Bool(_)
        | HExprKind::Str(_)
        | HExprKind::Var(_)
        | HExprKind::Param(_)
        | HExprKind::SymDim(_)
        | HExprKind::ParamExtent { .. }
        | HExprKind::Null
        | HExprKind::Error => {}
        HExprKind::Unary { operand, .. }
        | HExprKind::Cast { operand, .. }
        | HExprKind::CppCast { operand, .. } => for_each_expr_mut(operand, f),
        HExprKind::Binary { lhs, rhs, .. } | HExprKind::Cdiv(lhs, rhs) => {
            for_each_expr_mut(lhs, f);
            for_each_expr_mut(rhs, f);
        }
        HExprKind::Select { index, options } => {
            for_each_expr_mut(index, f);
            for o in options {
                for_each_expr_mut(o, f);
            }
        }
        HExprKind::Ternary { cond, then_value, else_value } => {
            for_each_expr_mut(cond, f);
            for_each_expr_mut(then_value, f);
            for_each_expr_mut(else_value, f);
        }
        HExprKind::At { index, .. } | HExprKind::Address { index, .. } => {
            for a in index.exprs_mut() {
                for_each_expr_mut(a, f);
            }
        }
        HExprKind::Atomic { index, args, .. } => {
            for a in index.exprs_mut() {
                for_each_expr_mut(a, f);
            }
            for a in args {
                for_each_expr_mut(a, f);
            }
        }
        HExprKind::Call { args, .. } => {
            for a in args {
                for_each_expr_mut(a, f);
            }
        }
        HExprKind::Math { args, .. } | HExprKind::Ituple(args) => {
            for a in args {
                for_each_expr_mut(a, f);
            }
        }
        HExprKind::Mdspan(dims) => {
            for d in dims {
                if let Dim::Expr(x) = d {
                    for_each_expr_mut(x, f);
                }
            }
        }
    }
}
