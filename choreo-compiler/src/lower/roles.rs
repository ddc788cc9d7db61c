//! The warpgroup roles that issue TMA statements (spec-tier3 §3.3, §7.1): which threads of a
//! block the predicates of a role (`inthreads.async (w == 0)` at a `group-4` level) select,
//! its issuer (the first of them) and its size (the count of its barrier).
//!
//! Every thread of the block evaluates the predicates with its own intra-block indices (as
//! for the arrival counts of events, `lower::events`). A role must be whole warpgroups (128
//! consecutive threads from a multiple of 128) or a single thread; its barrier (the barriers
//! the statements imply: the wait before a load overwrites its tile, the TMA-store prologue,
//! the wait for its asynchronous stores) is named barrier 15, reserved for it (sema rejects a
//! user `__bar_*` on 15), so at most one role of a kernel may need it. Anything else is
//! `E0475`.

use super::KernelPlan;
use super::events::{Env, level_indices};
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::hir::visit::{self, Walk};
use crate::hir::{self, HExpr, Stmt, StmtKind};
use crate::source::Span;

/// Threads of a warpgroup.
const WARPGROUP: u64 = 128;
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

/// A role's use in a kernel body: the predicates, where, and whether the statement needs the
/// role's barrier.
struct Use<'a> {
    conditions: &'a [HExpr],
    span: Span,
    barrier: bool,
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
                            self.0.push(Use { conditions: c, span: s.span, barrier });
                        }
                    }
                }
                StmtKind::TriggerAfter(t) => {
                    if let Some(c) = &t.role {
                        self.0.push(Use { conditions: c, span: s.span, barrier: false });
                    }
                }
                // The role's first thread waits for its stores, its barrier follows.
                StmtKind::TmaStoreWait { role: Some(c), .. } => {
                    self.0.push(Use { conditions: c, span: s.span, barrier: true });
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
    let mut barrier_user: Option<(usize, Span)> = None;
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
                    diags.push(error(
                        u.span,
                        "cannot tell which threads issue this TMA: the block needs a constant \
                         shape and the `inthreads` predicates must use intra-block indices and \
                         constants only"
                            .to_string(),
                        "issuing role unknown",
                    ));
                    return Vec::new();
                };
                let first = selected.first().copied().unwrap_or(0);
                let threads = selected.len() as u64;
                let whole = threads > 0
                    && (threads == 1
                        || (threads % WARPGROUP == 0
                            && selected.chunks(WARPGROUP as usize).all(|c| {
                                c[0] % WARPGROUP == 0 && c.windows(2).all(|w| w[1] == w[0] + 1)
                            })));
                if !whole {
                    diags.push(error(
                        u.span,
                        format!(
                            "a TMA in an `inthreads` is issued by a warpgroup role: the \
                             predicates must select whole warpgroups (or one thread); these \
                             select {threads} thread(s)"
                        ),
                        "not whole warpgroups",
                    ));
                    return Vec::new();
                }
                roles.push(RolePlan { conditions: u.conditions.to_vec(), first, threads });
                roles.len() - 1
            }
        };
        let needs = u.barrier && roles.get(index).is_some_and(|r| r.threads > 1);
        if needs {
            match barrier_user {
                Some((other, other_span)) if other != index => {
                    diags.push(
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
                        ),
                    );
                    return roles;
                }
                Some(_) => {}
                None => barrier_user = Some((index, u.span)),
            }
        }
    }
    roles
}

fn error(span: Span, message: String, label: &str) -> Diagnostic {
    Diagnostic::error("E0475", span, message).with_label(label.to_string())
}
