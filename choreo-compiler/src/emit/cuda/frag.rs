//! Fragment operations (spec-tier3 §6.2): the statements of [`crate::hir::frag::FragOp`],
//! rendered as calls of `frag_ops.cuh` (pasted only into files that use them). Shaped
//! fragments are `local` buffers and `apply` is an ordinary loop, rendered elsewhere.

use super::FnEmitter;
use crate::hir::frag::{FragOp, RowLayout};
use crate::hir::mma::MmaOp;
use crate::hir::visit::{Visitor, Walk};
use crate::hir::{AssignOp, HExpr, HExprKind, Stmt, StmtKind};
use crate::source::Span;

/// The fragment-operation library.
pub(super) const FRAG_OPS: &str = include_str!("frag_ops.cuh");

/// `__choreo_frag_<hash of the library text>`, `_cpu` for the CPU dialect.
pub(super) fn frag_namespace(cpu: bool) -> String {
    super::support::library_namespace("frag", super::support::fnv1a([FRAG_OPS]), cpu)
}

/// Whether statements use the library: a fragment operation, or a layout coordinate (`apply`).
pub(super) fn uses_frag_ops(body: &[Stmt]) -> bool {
    struct Find(bool);
    impl<'a> Visitor<'a> for Find {
        fn stmt(&mut self, s: &'a Stmt) -> Walk {
            if let StmtKind::Mma(op) = &s.kind {
                if matches!(**op, MmaOp::Frag(_)) {
                    self.0 = true;
                }
            }
            Walk::Continue
        }
        fn expr(&mut self, e: &'a HExpr) -> Walk {
            if let HExprKind::Call { callee, .. } = &e.kind {
                if callee.starts_with("CHOREO_FRAG_NS::") {
                    self.0 = true;
                }
            }
            Walk::Continue
        }
    }
    let mut f = Find(false);
    crate::hir::visit::walk_stmts(&mut f, body);
    f.0
}

const NS: &str = "CHOREO_FRAG_NS";

impl FnEmitter<'_, '_> {
    pub(super) fn frag_op(&mut self, span: Span, op: &FragOp) {
        let line = match op {
            FragOp::Unpack { acc, buf, regs } => {
                let l = self.frag_lvalue(acc);
                let b = self.names().local(*buf).to_string();
                format!("{NS}::unpack({l}, {b}, {regs});")
            }
            FragOp::Pack { acc, buf, regs } => {
                let l = self.frag_lvalue(acc);
                let b = self.names().local(*buf).to_string();
                format!("{NS}::pack({l}, {b}, {regs});")
            }
            FragOp::Copy { dst, src, regs } => {
                let d = self.names().local(*dst).to_string();
                let s = self.names().local(*src).to_string();
                format!("{NS}::copy({d}, {s}, {regs});")
            }
            FragOp::Reduce { max, dst, src, regs, rows } => {
                let d = self.names().local(*dst).to_string();
                let s = self.names().local(*src).to_string();
                let l = match rows {
                    RowLayout::Wgmma => 0,
                    RowLayout::Sync => 1,
                };
                format!("{NS}::reduce<{max}, {l}>({d}, {s}, {regs});")
            }
            FragOp::ToA { afrag, buf, c0, k } => {
                let a = self.frag_lvalue(afrag);
                let b = self.names().local(*buf).to_string();
                let c = self.expr(c0);
                // 16-bit operands are the accumulator layout's own registers; tf32 and 8-bit
                // ones come from the other lanes of the quad (frag_ops.cuh).
                let sixteen = match self.f.local(*buf).map(|l| &l.ty) {
                    Some(crate::hir::Ty::Spanned(t)) => t.elem.size_bytes() == 2,
                    _ => true,
                };
                let f = if sixteen { "to_afrag" } else { "to_afrag_quad" };
                format!("{NS}::{f}<{k}>({a}, {b}, {c});")
            }
            FragOp::Update { buf, op, value } => {
                let b = self.names().local(*buf).to_string();
                let regs = match self.f.local(*buf).map(|l| &l.ty) {
                    Some(crate::hir::Ty::Spanned(t)) => {
                        t.dims.first().and_then(crate::hir::Dim::as_const).unwrap_or(1)
                    }
                    _ => 1,
                };
                let code = match op {
                    AssignOp::Add => 0,
                    AssignOp::Sub => 1,
                    AssignOp::Mul => 2,
                    _ => 3,
                };
                let v = self.expr(value);
                format!("{NS}::update<{code}>({b}, {regs}, {v});")
            }
            FragOp::AllReduce { buf } => {
                let b = self.names().local(*buf).to_string();
                format!("{NS}::all_reduce_sum({b});")
            }
        };
        self.w.line(span, &line);
    }
}
