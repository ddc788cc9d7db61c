//! The arrival count of each slot of each shared event (spec-tier3 §2.7): how many threads
//! of a block arrive on it per generation.
//!
//! `event<N>` says it. Otherwise the count is the number of threads that execute some `trigger`
//! of the event: sema recorded, per trigger, the predicates of the enclosing `inthreads`
//! (through immutable locals), and here every thread of the block evaluates them with its own
//! parallel indices. That needs a block of constant shape and predicates on intra-block
//! indices and constants only; anything else asks for `event<N>` (`E0812`).

use super::KernelPlan;
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::hir::arith::{fold_compare, fold_int_binary};
use crate::hir::visit::{self, Walk};
use crate::hir::{self, BinOp, ElemTy, HExpr, HExprKind, Stmt, StmtKind, UnOp, VarId};
use std::collections::HashMap;

/// Blocks larger than this are not enumerated (the CUDA limit is 1024 threads).
const MAX_ENUMERATED_THREADS: u64 = 1024;

/// How a thread's index of one intra-block level is computed from its linear thread number.
pub(super) struct IndexOf {
    threads_per_instance: u64,
    /// The extents of the level's sub-dimensions.
    extents: Vec<u64>,
    /// Which sub-dimension the local is.
    sub: usize,
}

impl IndexOf {
    fn value(&self, thread: u64) -> i128 {
        let instance = thread / self.threads_per_instance.max(1);
        let below: u64 = self.extents[self.sub + 1..].iter().product();
        let extent = self.extents[self.sub].max(1);
        i128::from(instance / below.max(1) % extent)
    }
}

/// The arrival count of every slot of every event of `f`, indexed by [`hir::EventId`] and
/// slot.
pub(super) fn arrival_counts(
    f: &hir::Function,
    kernels: &[KernelPlan],
    diags: &mut Diagnostics,
) -> Vec<Vec<u32>> {
    let trees = hir::kernels(&f.body);
    f.events
        .iter()
        .map(|e| {
            let tree = trees.iter().find(|t| t.id == e.kernel);
            // A fill event (`trigger … after`, spec-tier3 §2.7): the issuer's one arrival.
            if e.triggers.iter().any(|t| t.fill) {
                return vec![e.arrivals.unwrap_or(1); e.slots() as usize];
            }
            let participation = match (tree, kernels.get(e.kernel.index())) {
                (Some(tree), Some(plan)) if !e.triggers.is_empty() => participation(e, tree, plan),
                _ => None,
            };
            // `trigger.cluster` (§2.6): every triggering thread of every block of the cluster
            // arrives on each block's slot.
            let blocks = match (e.cluster, kernels.get(e.kernel.index())) {
                (Some(_), Some(plan)) => plan.cluster.as_ref().map_or(1, |c| c.size()),
                _ => 1,
            };
            let participation =
                participation.map(|p| p.into_iter().map(|c| c * blocks).collect::<Vec<u64>>());
            match (e.arrivals, participation) {
                (Some(n), Some(p)) => {
                    if let Some(&other) = p.iter().find(|&&c| c != u64::from(n) && c != 0) {
                        diags.push(
                            Diagnostic::warning(
                                "W0801",
                                e.span,
                                format!(
                                    "event '{}' is declared with {n} arrivals per generation, \
                                     but {other} threads trigger it",
                                    e.name
                                ),
                            )
                            .with_label("explicit arrival count")
                            .with_note(
                                "a generation completes after exactly the declared number of \
                                 arrivals",
                            ),
                        );
                    }
                    vec![n; e.slots() as usize]
                }
                (Some(n), None) => vec![n; e.slots() as usize],
                // A slot nothing triggers keeps count 1 (its waits are reported by sema).
                (None, Some(p)) => p.iter().map(|&c| c.max(1) as u32).collect(),
                (None, None) if e.triggers.is_empty() => vec![1; e.slots() as usize],
                (None, None) => {
                    diags.push(
                        Diagnostic::error(
                            "E0812",
                            e.span,
                            format!("cannot tell how many threads trigger event '{}'", e.name),
                        )
                        .with_label("arrival count unknown")
                        .with_note(
                            "the count is computed when the block has a constant number of \
                             threads and every `trigger` of the event is under `inthreads` \
                             predicates on thread-level indices and constants",
                        )
                        .with_help(format!(
                            "write the count of arrivals per generation: `shared event<N> {}`",
                            e.name
                        )),
                    );
                    vec![1; e.slots() as usize]
                }
            }
        })
        .collect()
}

/// Per slot, the number of threads of a block that execute some trigger of `e` on it, when it
/// can be told. A trigger whose slot is a function of the thread's indices counts for that
/// slot; one whose slot changes otherwise (a ring order, an index computed from a loop
/// variable) counts for every slot: each such thread arrives once per generation of each.
fn participation(e: &hir::Event, tree: &hir::ParallelTree, plan: &KernelPlan) -> Option<Vec<u64>> {
    let threads = plan.threads_per_block.as_const()?;
    if threads > MAX_ENUMERATED_THREADS {
        return None;
    }
    let indices = level_indices(tree, plan)?;
    let slots = e.slots() as usize;
    let mut counts = vec![0u64; slots];
    let mut triggers = vec![false; slots];
    for thread in 0..threads {
        let mut env = Env { indices: &indices, thread };
        triggers.iter_mut().for_each(|t| *t = false);
        for site in &e.triggers {
            let mut all = true;
            for c in &site.conditions {
                if env.eval(c)? == 0 {
                    all = false;
                    break;
                }
            }
            if all {
                // A slot that depends on more than the thread's indices (a loop variable,
                // data) may be any slot over the kernel: the thread counts for each.
                match site.slot.as_ref().and_then(|s| env.eval(s)) {
                    Some(s) => {
                        if let Some(t) = usize::try_from(s).ok().and_then(|s| triggers.get_mut(s)) {
                            *t = true;
                        }
                    }
                    None => triggers.iter_mut().for_each(|t| *t = true),
                }
            }
        }
        for (count, &t) in counts.iter_mut().zip(&triggers) {
            *count += u64::from(t);
        }
    }
    Some(counts)
}

/// The intra-block parallel indices of a kernel, when every level has constant extents.
pub(super) fn level_indices(
    tree: &hir::ParallelTree,
    plan: &KernelPlan,
) -> Option<HashMap<VarId, IndexOf>> {
    struct Levels<'p> {
        plan: &'p KernelPlan,
        out: HashMap<VarId, IndexOf>,
        ok: bool,
    }
    impl<'a> visit::Visitor<'a> for Levels<'_> {
        fn stmt(&mut self, s: &'a Stmt) -> Walk {
            if let StmtKind::InnerParallel(inner) = &s.kind {
                let tpi = self
                    .plan
                    .levels
                    .get(inner.id.index())
                    .and_then(|l| l.threads_per_instance.as_const());
                let extents: Option<Vec<u64>> =
                    inner.binder.extents.iter().map(|d| d.as_const()).collect();
                match (tpi, extents) {
                    (Some(tpi), Some(extents)) => {
                        for (sub, v) in inner.binder.vars.iter().enumerate() {
                            if let Some(v) = v {
                                self.out.insert(
                                    *v,
                                    IndexOf {
                                        threads_per_instance: tpi,
                                        extents: extents.clone(),
                                        sub,
                                    },
                                );
                            }
                        }
                    }
                    _ => self.ok = false,
                }
            }
            Walk::Continue
        }
    }
    let mut levels = Levels { plan, out: HashMap::new(), ok: true };
    visit::walk_stmts(&mut levels, &tree.body);
    levels.ok.then_some(levels.out)
}

/// One thread's view of the predicates: its intra-block indices.
pub(super) struct Env<'i> {
    pub(super) indices: &'i HashMap<VarId, IndexOf>,
    pub(super) thread: u64,
}

impl Env<'_> {
    /// The integer value of `e` in this thread (bools as 0/1), when it only involves constants
    /// and intra-block indices.
    pub(super) fn eval(&mut self, e: &HExpr) -> Option<i128> {
        let ty = e.ty.scalar().unwrap_or(ElemTy::S32);
        Some(match &e.kind {
            HExprKind::Int(v) => *v,
            HExprKind::Bool(b) => i128::from(*b),
            HExprKind::Var(v) => self.indices.get(v)?.value(self.thread),
            HExprKind::Unary { op, operand } => {
                let x = self.eval(operand)?;
                match op {
                    UnOp::Not => i128::from(x == 0),
                    UnOp::Neg => -x,
                    UnOp::BitNot => !x,
                }
            }
            HExprKind::Binary { op: BinOp::And, lhs, rhs } => {
                i128::from(self.eval(lhs)? != 0 && self.eval(rhs)? != 0)
            }
            HExprKind::Binary { op: BinOp::Or, lhs, rhs } => {
                i128::from(self.eval(lhs)? != 0 || self.eval(rhs)? != 0)
            }
            HExprKind::Binary { op, lhs, rhs } => {
                let (a, b) = (self.eval(lhs)?, self.eval(rhs)?);
                if let Some(c) = fold_compare(*op, a, b) {
                    i128::from(c)
                } else {
                    let operand_ty = lhs.ty.scalar().unwrap_or(ty);
                    fold_int_binary(*op, a, b, operand_ty).ok()??.0
                }
            }
            HExprKind::Ternary { cond, then_value, else_value } => {
                if self.eval(cond)? != 0 {
                    self.eval(then_value)?
                } else {
                    self.eval(else_value)?
                }
            }
            HExprKind::Cdiv(a, b) => {
                let (a, b) = (self.eval(a)?, self.eval(b)?);
                if b <= 0 {
                    return None;
                }
                (a + b - 1).div_euclid(b)
            }
            HExprKind::Cast { to, operand, .. } if to.is_int() || *to == ElemTy::Bool => {
                self.eval(operand)?
            }
            _ => return None,
        })
    }
}
