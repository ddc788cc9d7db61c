//! Host values captured by a kernel (spec §8.5–§8.6): everything the kernel body reads from
//! the host — parameters, host locals, symbolic dimensions, anonymous extents — including the
//! extents needed to index captured buffers and to compute inner-level indices.

use super::Checker;
use crate::hir::{
    BufferRef, Capture, Dim, HExpr, HExprKind, LocalPlace, ParamId, ParamKind, Place, Stmt,
    StmtKind, VarId,
};
use std::collections::BTreeSet;

struct Collector<'c, 'a> {
    ch: &'c Checker<'a>,
    set: BTreeSet<Capture>,
}

impl Collector<'_, '_> {
    fn param(&mut self, p: ParamId) {
        let Some(param) = self.ch.params.get(p.index()) else { return };
        if param.kind == ParamKind::Stream {
            return;
        }
        if self.set.insert(Capture::Param(p)) {
            for d in &param.dims {
                self.dim(d);
            }
        }
    }

    fn var(&mut self, v: VarId) {
        let Some(local) = self.ch.locals.get(v.index()) else { return };
        match local.place {
            LocalPlace::HostScalar => {
                self.set.insert(Capture::Var(v));
            }
            LocalPlace::GlobalBuffer => {
                let first = self.set.insert(Capture::Var(v));
                if let (true, crate::hir::Ty::Spanned(t)) = (first, &local.ty) {
                    for d in &t.dims {
                        self.dim(d);
                    }
                }
            }
            _ => {}
        }
    }

    fn buffer(&mut self, b: BufferRef) {
        match b {
            BufferRef::Param(p) => self.param(p),
            BufferRef::Local(v) => self.var(v),
        }
    }

    fn dim(&mut self, d: &Dim) {
        match d {
            Dim::Const(_) => {}
            Dim::Sym(s) => {
                self.set.insert(Capture::Sym(*s));
            }
            Dim::Dynamic { param, dim } => {
                self.set.insert(Capture::Extent(*param, *dim));
            }
            Dim::Expr(e) => self.expr(e),
        }
    }

    fn expr(&mut self, e: &HExpr) {
        match &e.kind {
            HExprKind::Param(p) => self.param(*p),
            HExprKind::Var(v) => self.var(*v),
            HExprKind::SymDim(s) => {
                self.set.insert(Capture::Sym(*s));
            }
            HExprKind::ParamExtent { param, dim } => {
                self.set.insert(Capture::Extent(*param, *dim));
            }
            HExprKind::At { buffer, indices } => {
                self.buffer(*buffer);
                for i in indices {
                    self.expr(i);
                }
            }
            HExprKind::Unary { operand, .. }
            | HExprKind::Cast { operand, .. }
            | HExprKind::CppCast { operand, .. } => self.expr(operand),
            HExprKind::Binary { lhs, rhs, .. } | HExprKind::Cdiv(lhs, rhs) => {
                self.expr(lhs);
                self.expr(rhs);
            }
            HExprKind::Ternary { cond, then_value, else_value } => {
                self.expr(cond);
                self.expr(then_value);
                self.expr(else_value);
            }
            HExprKind::Math { args, .. } | HExprKind::Ituple(args) => {
                for a in args {
                    self.expr(a);
                }
            }
            HExprKind::Mdspan(dims) => {
                for d in dims {
                    self.dim(d);
                }
            }
            HExprKind::Int(_)
            | HExprKind::Float(_)
            | HExprKind::Bool(_)
            | HExprKind::Str(_)
            | HExprKind::Error => {}
        }
    }

    fn stmts(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match &s.kind {
            StmtKind::Let { init, .. } | StmtKind::DeclBuffer { init, .. } => {
                if let Some(e) = init {
                    self.expr(e);
                }
            }
            StmtKind::Assign { target, value, .. } => {
                match target {
                    Place::Var(v) => self.var(*v),
                    Place::Elem { buffer, indices } => {
                        self.buffer(*buffer);
                        for i in indices {
                            self.expr(i);
                        }
                    }
                }
                self.expr(value);
            }
            StmtKind::Block(b) => self.stmts(b),
            StmtKind::If { cond, then_body, else_body } => {
                self.expr(cond);
                self.stmts(then_body);
                self.stmts(else_body);
            }
            StmtKind::While { cond, body } => {
                self.expr(cond);
                self.stmts(body);
            }
            StmtKind::For { var, start, end, body, .. } => {
                self.var(*var);
                self.expr(start);
                self.expr(end);
                self.stmts(body);
            }
            StmtKind::Print { args, .. } => {
                for a in args {
                    self.expr(a);
                }
            }
            StmtKind::Return(Some(e)) => self.expr(e),
            StmtKind::InnerParallel(p) => {
                for d in &p.binder.extents {
                    self.dim(d);
                }
                self.dim(&p.stride);
                self.stmts(&p.body);
            }
            StmtKind::Parallel(p) => self.stmts(&p.body),
            StmtKind::Return(None)
            | StmtKind::Break
            | StmtKind::Continue
            | StmtKind::Check(_)
            | StmtKind::SyncGlobal
            | StmtKind::SyncBlock => {}
        }
    }
}

/// The captures of a kernel body, in the order documented on
/// [`crate::hir::ParallelTree::captures`].
pub(crate) fn captures(ch: &Checker<'_>, body: &[Stmt]) -> Vec<Capture> {
    let mut c = Collector { ch, set: BTreeSet::new() };
    c.stmts(body);
    c.set.into_iter().collect()
}
