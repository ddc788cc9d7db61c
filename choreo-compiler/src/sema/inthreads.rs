//! `inthreads` / `inthreads.async` (spec §10): a block of code that only some threads run.
//!
//! The predicate must be *strictly divergent*: a comparison of a value that depends on a
//! parallel index (directly, or through immutable locals computed from one) with a value that
//! is the same for every thread (constants, parameters, symbolic dimensions, immutable host
//! values), or `&&`/`||` of such comparisons. `inthreads` becomes `if (pred) { body }`
//! followed by a barrier of the block (none for `.async`, and none for an `inthreads` inside
//! another: only the outermost synchronises), so every thread of the block must reach an
//! outermost non-async `inthreads`.
//!
//! Which threads an `inthreads` selects matters to the DMAs inside it (spec §14.5): a
//! predicate that depends on the index of an intra-block level (a `group` index, say) may run
//! the body in some instances of that level and not in others, so a DMA shared by the threads
//! of one instance must synchronise them without a block barrier ([`Checker::participants`]).

use super::{Checker, Region};
use crate::ast;
use crate::diagnostics::Diagnostic;
use crate::hir::visit::{self, Walk};
use crate::hir::{
    BarrierScope, BinOp, ElemTy, HExpr, HExprKind, Level, LocalOrigin, LocalPlace, Stmt, StmtKind,
    Ty, UnOp,
};
use crate::source::Span;

/// What an operand of a predicate comparison depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dependence {
    /// The same value in every thread.
    Uniform,
    /// A parallel index (or a value computed from one).
    Divergent,
    /// Something that may change or differ per thread in other ways (mutable or per-thread
    /// values, data).
    Unusable,
}

impl Checker<'_> {
    /// `inthreads[.async] (pred) { body }`.
    pub(crate) fn check_inthreads(
        &mut self,
        is_async: Option<Span>,
        pred: &ast::Expr,
        body: &ast::Block,
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        if !matches!(self.region, Region::Device(_)) {
            self.error_label(
                "E0452",
                span,
                "inthreads can not be declared in global scope.",
                "host code",
            );
            return;
        }
        if let (Some(_), Some(k)) = (is_async, self.kernel.as_mut()) {
            k.register_roles |= k.group4_depth > 0;
        }
        if let (Some(a), true) = (is_async, self.inthreads_depth > 0) {
            self.error_label(
                "E0452",
                a,
                "inner inthreads can not be declared as async.",
                "inside another inthreads",
            );
        }
        let cond = self.check_scalar(pred, "an inthreads predicate");
        if !matches!(cond.ty, Ty::Error) {
            if cond.ty != Ty::Scalar(ElemTy::Bool) {
                self.error_label(
                    "E0452",
                    pred.span,
                    format!(
                        "requires a predication expression but got '{}'.",
                        super::types::ty_name(&cond.ty)
                    ),
                    "not a condition",
                );
            } else if !self.strictly_divergent(&cond) {
                self.error_label(
                    "E0452",
                    pred.span,
                    "inthreads' predicate must be strictly divergent.",
                    "every comparison must set a parallel index against a value every thread \
                     shares",
                );
            }
        }
        let splits = self.selects_level_instances(&cond);
        let splits_warpgroups = self.splits_warpgroups(&cond);
        self.inthreads_depth += 1;
        self.selecting_conditions += u32::from(splits);
        self.warpgroup_splits += u32::from(splits_warpgroups);
        self.inthreads_conditions.push(cond.clone());
        let then_body = self.check_block_scoped(body);
        self.inthreads_conditions.pop();
        self.warpgroup_splits -= u32::from(splits_warpgroups);
        self.selecting_conditions -= u32::from(splits);
        self.inthreads_depth -= 1;
        out.push(Stmt { kind: StmtKind::If { cond, then_body, else_body: Vec::new() }, span });
        // Only the outermost `inthreads` synchronises the block: an inner one runs in the
        // threads the outer one selected, so a block barrier there would wait for threads
        // that never come (the outer one's barrier, if any, covers the inner one's writes).
        // Under an `if`/`while` on an intra-block index, though, the block barrier would wait
        // for the threads the condition leaves out (`E1069`).
        if is_async.is_none() && self.inthreads_depth == 0 {
            if self.selecting_conditions > 0 {
                self.diags.push(
                    Diagnostic::error(
                        "E1069",
                        pred.span,
                        "a synchronous `inthreads` ends with a barrier of the whole block, but \
                         an `if`/`while` on an intra-block index around it lets only some \
                         threads of the block get here",
                    )
                    .with_label("the block barrier after this `inthreads` would wait for threads that never come")
                    .with_help(
                        "write `inthreads.async` and synchronise the threads that read its \
                         results yourself (an event, or a `__bar_sync` with a barrier number of \
                         your own), or make the enclosing condition the `inthreads` predicate",
                    ),
                );
            }
            out.push(Stmt { kind: StmtKind::Barrier(BarrierScope::Block), span });
        }
    }

    /// Whether a predicate is a strictly divergent condition (see the module doc).
    fn strictly_divergent(&self, e: &HExpr) -> bool {
        match &e.kind {
            HExprKind::Binary { op: BinOp::And | BinOp::Or, lhs, rhs } => {
                self.strictly_divergent(lhs) && self.strictly_divergent(rhs)
            }
            HExprKind::Unary { op: UnOp::Not, operand } => self.strictly_divergent(operand),
            HExprKind::Binary {
                op: BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne,
                lhs,
                rhs,
            } => matches!(
                (self.dependence(lhs), self.dependence(rhs)),
                (Dependence::Divergent, Dependence::Uniform)
                    | (Dependence::Uniform, Dependence::Divergent)
            ),
            _ => false,
        }
    }

    /// Whether a predicate depends on the index of an intra-block level (directly or through
    /// immutable locals computed from one): then it may hold in some instances of that level
    /// and not in others. (A predicate on block indices holds in all threads of a block or in
    /// none.)
    pub(crate) fn selects_level_instances(&self, e: &HExpr) -> bool {
        let mut found = false;
        visit::for_each_expr(e, |x| {
            if let HExprKind::Var(v) = &x.kind {
                found |= match self.locals.get(v.index()) {
                    Some(l) => match &l.origin {
                        LocalOrigin::ParallelIndex { level, .. } => *level != Level::Block,
                        _ => self
                            .device_inits
                            .get(v)
                            .is_some_and(|i| self.selects_level_instances(i)),
                    },
                    None => false,
                };
            }
            Walk::Continue
        });
        found
    }

    /// Whether a condition may hold in some threads of a warpgroup and not in others: it
    /// depends on the index of a `group` or `thread` level (directly or through immutable
    /// locals computed from one), on a mutable local, or on data, calls or atomics. (Block and
    /// `group-4` indices, and `foreach` indices, are the same in all threads of a warpgroup.)
    /// Also decides whether a WGMMA operand view is warpgroup-uniform (`E1029`).
    pub(crate) fn splits_warpgroups(&self, e: &HExpr) -> bool {
        let mut found = false;
        visit::for_each_expr(e, |x| {
            found |= match &x.kind {
                HExprKind::Var(v) => match self.locals.get(v.index()) {
                    Some(l) => match &l.origin {
                        // Every thread that reaches a `foreach`/`with` runs the same iterations
                        // (its bounds are shape dimensions): its indices, and the locals of a
                        // ranged `foreach`, are the same in all threads of a warpgroup.
                        LocalOrigin::WithIndex { .. } | LocalOrigin::RangeLocal { .. } => false,
                        LocalOrigin::ParallelIndex { level, .. } => {
                            matches!(level, Level::Group | Level::Thread)
                        }
                        _ if l.mutable => true,
                        _ => match l.place {
                            LocalPlace::DeviceScalar => {
                                self.device_inits.get(v).is_none_or(|i| self.splits_warpgroups(i))
                            }
                            _ => false,
                        },
                    },
                    None => false,
                },
                HExprKind::At { .. } | HExprKind::Call { .. } | HExprKind::Atomic { .. } => true,
                _ => false,
            };
            Walk::Continue
        });
        found
    }

    /// What a value depends on.
    fn dependence(&self, e: &HExpr) -> Dependence {
        let mut dep = Dependence::Uniform;
        visit::for_each_expr(e, |x| {
            let here = match &x.kind {
                HExprKind::Var(v) => match self.locals.get(v.index()) {
                    Some(l) if l.mutable => Dependence::Unusable,
                    Some(l) => match l.place {
                        LocalPlace::ParallelIndex => Dependence::Divergent,
                        LocalPlace::DeviceScalar => match self.device_inits.get(v) {
                            Some(init) => self.dependence(init),
                            None => Dependence::Unusable,
                        },
                        LocalPlace::HostScalar => Dependence::Uniform,
                        _ => Dependence::Unusable,
                    },
                    None => Dependence::Unusable,
                },
                // Data, and what C++ code or an atomic gives back, may differ per thread
                // (an `inthreads` on `call lane_id()` would split a warp, one on an atomic's
                // old value every group of threads).
                HExprKind::At { .. }
                | HExprKind::Call { .. }
                | HExprKind::Atomic { .. }
                | HExprKind::Error => Dependence::Unusable,
                _ => Dependence::Uniform,
            };
            dep = match (dep, here) {
                (Dependence::Unusable, _) | (_, Dependence::Unusable) => Dependence::Unusable,
                (Dependence::Divergent, _) | (_, Dependence::Divergent) => Dependence::Divergent,
                _ => Dependence::Uniform,
            };
            Walk::Continue
        });
        dep
    }
}
