//! The warpgroup roles that issue TMA statements (spec-tier3 §3.3, §7.1) or synchronise after
//! a plain `mma.store` to shared memory ([`StmtKind::RoleBarrier`]): which threads of a block
//! the predicates of a role (`inthreads.async (w == 0)` at a `group-4` level) select, its
//! issuer (the first of them) and its size (the count of its barrier).
//!
//! Every thread of the block evaluates the predicates with its own intra-block indices (as
//! for the arrival counts of events, `lower::events`). A role that issues TMA must be whole
//! warpgroups (128 consecutive threads from a multiple of 128) or a single thread; a role
//! that only needs its barrier (after an `mma.store`) must be whole warps (`bar.sync` counts
//! warps). Its barrier (the barriers the statements imply: the wait before a load overwrites
//! its tile, the TMA-store prologue, the wait for its asynchronous stores, the barrier after
//! a plain `mma.store` to shared) is named barrier 15, reserved for it (sema rejects a user
//! `__bar_*` on 15, and `lower::instances` numbers its barriers from 14 down), so at most one
//! role of a kernel may need it. Anything else is `E0475` for TMA statements, `E1068` for the
//! barrier of an `mma.store`.

use super::KernelPlan;
use super::events::{Env, level_indices};
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::hir::visit::{self, Walk};
use crate::hir::{self, HExpr, Stmt, StmtKind};
use crate::source::Span;

/// Threads of a warpgroup.
const WARPGROUP: u64 = 128;
/// Threads of a warp.
const WARP: u64 = 32;
/// The named barrier of a role (`bar.sync 15, threads`).
pub const ROLE_BARRIER: u32 = 15;

/// A role of a kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct RolePlan {
    /// Its predicates ([`hir::Tma::role`]).
    pub conditions: Vec<HExpr>,
    /// The issuer: the role's first thread (`threadIdx.x`).
    pub first: u64,
    /// How many threads it has (1, or a multiple of 128).
    pub threads: u64,
}

/// A role's use in a kernel body: the predicates, where, whether the statement needs the
/// role's barrier, and whether it is a TMA statement (else a [`StmtKind::RoleBarrier`]).
struct Use<'a> {
    conditions: &'a [HExpr],
    span: Span,
    barrier: bool,
    tma: bool,
}

/// The roles of a kernel, with `E0475` for those that are not whole warpgroups or one thread,
/// or when two need the role barrier.
pub(super) fn plan(
    tree: &hir::ParallelTree,
    plan: &KernelPlan,
    diags: &mut Diagnostics,
) -> Vec<RolePlan> {
    struct Uses<'a>(Vec<Use<'a>>);
    impl<'a> visit::Visitor<'a> for Uses<'a> {
        fn stmt(&mut self, s: &'a Stmt) -> Walk {
            match &s.kind {
                StmtKind::Dma(d) => {
                    if let Some(t) = &d.tma {
                        if let Some(c) = &t.role {
                            // An event-bound load needs no barrier (the events order it).
                            let barrier = t.event.is_none();
                            self.0.push(Use { conditions: c, span: s.span, barrier, tma: true });
                        }
                    }
                }
                StmtKind::TriggerAfter(t) => {
                    if let Some(c) = &t.role {
                        let u = Use { conditions: c, span: s.span, barrier: false, tma: true };
                        self.0.push(u);
                    }
                }
                // The role's first thread waits for its stores, its barrier follows.
                StmtKind::TmaStoreWait { role: Some(c), .. } => {
                    self.0.push(Use { conditions: c, span: s.span, barrier: true, tma: true });
                }
                StmtKind::RoleBarrier { role } => {
                    self.0.push(Use { conditions: role, span: s.span, barrier: true, tma: false });
                }
                _ => {}
            }
            Walk::Continue
        }
    }
    let mut uses = Uses(Vec::new());
    visit::walk_stmts(&mut uses, &tree.body);
    if uses.0.is_empty() {
        return Vec::new();
    }
    let mut roles: Vec<RolePlan> = Vec::new();
    // The threads each role selects, in order.
    let mut selections: Vec<Vec<u64>> = Vec::new();
    let mut barrier_user: Option<(usize, Span, bool)> = None;
    let block = plan.threads_per_block.as_const();
    let indices = level_indices(tree, plan);
    for u in &uses.0 {
        let known = roles.iter().position(|r| r.conditions == u.conditions);
        let index = match known {
            Some(i) => i,
            None => {
                let selected = match (block, &indices) {
                    (Some(n), Some(indices)) if n <= 1024 => {
                        let mut out = Vec::new();
                        let mut ok = true;
                        for thread in 0..n {
                            let mut env = Env { indices, thread };
                            let mut all = true;
                            for c in u.conditions {
                                match env.eval(c) {
                                    Some(0) => {
                                        all = false;
                                        break;
                                    }
                                    Some(_) => {}
                                    None => {
                                        ok = false;
                                        break;
                                    }
                                }
                            }
                            if !ok {
                                break;
                            }
                            if all {
                                out.push(thread);
                            }
                        }
                        ok.then_some(out)
                    }
                    _ => None,
                };
                let Some(selected) = selected else {
                    diags.push(if u.tma {
                        error(
                            u.span,
                            "cannot tell which threads issue this TMA: the block needs a \
                             constant shape and the `inthreads` predicates must use intra-block \
                             indices and constants only"
                                .to_string(),
                            "issuing role unknown",
                        )
                    } else {
                        store_error(
                            u.span,
                            "cannot tell which threads run this `mma.store` to shared memory, \
                             whose barrier must count them: the block needs a constant shape and \
                             the `inthreads` predicates must use intra-block indices and \
                             constants only"
                                .to_string(),
                            "role unknown",
                        )
                    });
                    return Vec::new();
                };
                let first = selected.first().copied().unwrap_or(0);
                let threads = selected.len() as u64;
                roles.push(RolePlan { conditions: u.conditions.to_vec(), first, threads });
                selections.push(selected);
                roles.len() - 1
            }
        };
        let (Some(threads), Some(selected)) =
            (roles.get(index).map(|r| r.threads), selections.get(index))
        else {
            return roles;
        };
        if u.tma && !(threads == 1 || whole(selected, WARPGROUP)) {
            diags.push(error(
                u.span,
                format!(
                    "a TMA in an `inthreads` is issued by a warpgroup role: the predicates must \
                     select whole warpgroups (or one thread); these select {threads} thread(s)"
                ),
                "not whole warpgroups",
            ));
            return Vec::new();
        }
        if !u.tma && !whole(selected, WARP) {
            diags.push(store_error(
                u.span,
                format!(
                    "the barrier after this `mma.store` to shared memory counts the threads of \
                     its role, a named barrier of whole warps: the `inthreads` predicates select \
                     {threads} thread(s), not whole warps"
                ),
                "not whole warps",
            ));
            return Vec::new();
        }
        let needs = u.barrier && threads > 1;
        if needs {
            match barrier_user {
                // Two roles of the same threads (`inthreads` blocks with the same predicate)
                // share the barrier: the same warps reach it with the same count.
                Some((other, other_span, other_tma))
                    if selections.get(other) != selections.get(index) =>
                {
                    diags.push(if u.tma && other_tma {
                        Diagnostic::error(
                            "E0475",
                            u.span,
                            "two warpgroup roles of one kernel issue TMA statements that \
                             synchronise their role (a synchronous or unbound load, a store): \
                             only one role may, on the reserved named barrier 15",
                        )
                        .with_label("a second role's barrier")
                        .with_secondary(other_span, "the first role's")
                        .with_help(
                            "bind the producer's loads to events (`trigger full after f`), or \
                             issue the other role's copies from one role",
                        )
                    } else {
                        Diagnostic::error(
                            "E1068",
                            u.span,
                            "two `inthreads` roles of one kernel, of different threads, \
                             synchronise their role (a plain `mma.store` to shared memory, a \
                             synchronous or unbound TMA load, a TMA store): only one role may, \
                             on the reserved named barrier 15",
                        )
                        .with_label("a second role's barrier")
                        .with_secondary(other_span, "the first role's")
                        .with_help(format!("run both in one role, or {STORE_HELP}"))
                    });
                    return roles;
                }
                Some(_) => {}
                None => barrier_user = Some((index, u.span, u.tma)),
            }
        }
    }
    roles
}

/// Whether `selected` (ascending thread numbers) is whole groups of `size` threads: chunks
/// of `size` consecutive threads from a multiple of `size`.
fn whole(selected: &[u64], size: u64) -> bool {
    !selected.is_empty()
        && (selected.len() as u64) % size == 0
        && selected
            .chunks(size as usize)
            .all(|c| c[0] % size == 0 && c.windows(2).all(|w| w[1] == w[0] + 1))
}

/// The help of `E1068`.
const STORE_HELP: &str = "store with `mma.store.async` and synchronise the threads that read \
     the tile yourself (an event, or a `__bar_sync` with a barrier number of your own)";

fn store_error(span: Span, message: String, label: &str) -> Diagnostic {
    Diagnostic::error("E1068", span, message).with_label(label.to_string()).with_help(STORE_HELP)
}

fn error(span: Span, message: String, label: &str) -> Diagnostic {
    Diagnostic::error("E0475", span, message).with_label(label.to_string())
}
