//! The barrier after a plain `mma.store` to shared memory (spec-tier3 §5.5, §7.1, issue 15).
//!
//! A plain store to shared ends with a barrier so that every thread may read the tile next.
//! In block-level code every thread of the block gets there: the block barrier. Under an
//! `inthreads` that selects some threads of the block (a warpgroup role of a
//! warp-specialised kernel, the consumers of a producer/consumer pipeline) the other threads
//! never come, so a block barrier would deadlock; there the barrier is the role's
//! ([`StmtKind::RoleBarrier`]: named barrier 15 over the threads the role's predicates select,
//! planned by `lower::roles` like the barrier of a role's TMA statements). That barrier only
//! orders the role's threads, so:
//!
//! - `E1066`: a plain store under an `if`/`while` on an intra-block index (outside a role, or
//!   inside one, where only some of the role's threads come) has no barrier that fits;
//! - `E1067`: the stored tile must not be accessed by threads outside the role (under an
//!   `inthreads`/`if`/`while` that selects other threads): the role's barrier does not order
//!   their accesses. (Accesses in code every thread of the block runs are not checked here:
//!   after an `inthreads.async` nothing synchronises the block, as for any write of a role.)
//!
//! Both suggest `mma.store.async` and a synchronisation the program controls (an event, a
//! named barrier).

use super::Checker;
use crate::diagnostics::Diagnostic;
use crate::hir::mma::MmaOp;
use crate::hir::visit::{self, Visitor, Walk};
use crate::hir::{BarrierScope, BufferRef, HExpr, HExprKind, Stmt, StmtKind, same_expr};
use crate::source::Span;

/// A plain `mma.store` to shared memory in a warpgroup role.
#[derive(Debug, Clone)]
pub(crate) struct RoleStore {
    /// The stored buffer.
    pub(crate) buffer: BufferRef,
    /// The predicates of the `inthreads` around it, outermost first (as written).
    pub(crate) conditions: Vec<HExpr>,
    /// The statement.
    pub(crate) span: Span,
}

/// The help of `E1066` and `E1067`.
const HELP: &str = "store with `mma.store.async` and synchronise the threads that read the tile \
                    yourself (an event, or a `__bar_sync` with a barrier number of your own)";

impl Checker<'_> {
    /// The barrier that follows a plain `mma.store` of `buffer` to shared memory at `span`:
    /// the block's, or the role's inside a warpgroup role (`E1066` where neither fits).
    pub(crate) fn mma_store_barrier(&mut self, buffer: Option<BufferRef>, span: Span) -> Stmt {
        let barrier = |kind| Stmt { kind, span };
        if self.selecting_conditions == 0 {
            return barrier(StmtKind::Barrier(BarrierScope::Block));
        }
        let in_role = self.inthreads_conditions.iter().any(|c| self.selects_level_instances(c));
        if !in_role || !self.role_uniform() {
            self.diags.push(
                Diagnostic::error(
                    "E1066",
                    span,
                    "a plain `mma.store` to shared memory ends with a barrier of the threads that \
                     run it, but only some threads of the block or of its `inthreads` role get \
                     here: an `if`/`while` on an intra-block index encloses it",
                )
                .with_label("a barrier here would wait for threads that never come")
                .with_help(format!(
                    "{HELP}; or run the MMA in an `inthreads` role (no `if`/`while` on a thread \
                     index inside it), whose threads the barrier then counts"
                )),
            );
            // Never emitted (the program has an error); keeps `W1046` quiet.
            return barrier(StmtKind::Barrier(BarrierScope::Block));
        }
        if let Some(buffer) = buffer {
            self.role_stores.push(RoleStore {
                buffer,
                conditions: self.inthreads_conditions.clone(),
                span,
            });
        }
        let role = self.inthreads_conditions.iter().map(|c| self.through_device_inits(c)).collect();
        barrier(StmtKind::RoleBarrier { role })
    }

    /// `E1067`: a tile that a plain `mma.store` wrote in a role, accessed by other threads.
    pub(crate) fn check_role_mma_stores(&mut self, body: &[Stmt]) {
        if self.role_stores.is_empty() {
            return;
        }
        let stores = std::mem::take(&mut self.role_stores);
        let mut roles: Vec<HExpr> = Vec::new();
        let mut role = |c: &HExpr| {
            role_of(&roles, c).unwrap_or_else(|| {
                roles.push(c.clone());
                roles.len() - 1
            })
        };
        let keys: Vec<Vec<usize>> =
            stores.iter().map(|s| s.conditions.iter().map(&mut role).collect()).collect();
        let mut walk = Accesses {
            checker: self,
            stores: &stores,
            keys: &keys,
            roles: &roles,
            conds: Vec::new(),
            span: None,
            access: None,
            found: vec![None; stores.len()],
        };
        visit::walk_stmts(&mut walk, body);
        let found = walk.found;
        for (store, access) in stores.iter().zip(found) {
            let Some(access) = access else { continue };
            self.diags.push(
                Diagnostic::error(
                    "E1067",
                    store.span,
                    "this plain `mma.store` to shared memory is in an `inthreads` role and ends \
                     with the role's barrier, but threads outside the role access the tile: \
                     that barrier does not order their accesses",
                )
                .with_label("the role's threads store the tile")
                .with_secondary(access, "accessed here by other threads")
                .with_help(HELP),
            );
        }
    }
}

/// The index of condition `e` in `roles`, the distinct conditions of the stores' `inthreads`
/// (compared without spans, so that two `inthreads` with the same predicate count as the same
/// role).
fn role_of(roles: &[HExpr], e: &HExpr) -> Option<usize> {
    roles.iter().position(|r| same_expr(r, e))
}

/// The walk: the conditions around each statement, and the first access of each role store's
/// buffer by other threads.
struct Accesses<'c, 'k> {
    checker: &'c Checker<'k>,
    stores: &'c [RoleStore],
    /// Per store: the roles ([`role_of`]) of the conditions of its `inthreads`.
    keys: &'c [Vec<usize>],
    /// The distinct conditions of the stores' `inthreads`.
    roles: &'c [HExpr],
    /// The `if`/`while` conditions around the statement walked: role (`None`: the predicate of
    /// no store's `inthreads`), whether it selects instances of an intra-block level, whether
    /// the statement is in its `then` part.
    conds: Vec<(Option<usize>, bool, bool)>,
    /// The statement walked.
    span: Option<Span>,
    /// The element access walked (its `buffer` hook comes right after its `expr` hook).
    access: Option<Span>,
    /// Per store: the first access by other threads.
    found: Vec<Option<Span>>,
}

impl<'a> Visitor<'a> for Accesses<'_, '_> {
    fn stmt(&mut self, s: &'a Stmt) -> Walk {
        self.span = Some(s.span);
        self.access = None;
        match &s.kind {
            StmtKind::If { cond, then_body, else_body } => {
                visit::walk_expr(self, cond);
                let k = role_of(self.roles, cond);
                let selects = self.checker.selects_level_instances(cond);
                for (body, then) in [(then_body, true), (else_body, false)] {
                    self.conds.push((k, selects, then));
                    visit::walk_stmts(self, body);
                    self.conds.pop();
                }
                Walk::Skip
            }
            StmtKind::While { cond, body } => {
                visit::walk_expr(self, cond);
                let selects = self.checker.selects_level_instances(cond);
                let k = role_of(self.roles, cond);
                self.conds.push((k, selects, false));
                visit::walk_stmts(self, body);
                self.conds.pop();
                Walk::Skip
            }
            // The store's own tile is no access by other threads.
            StmtKind::Mma(op) if matches!(**op, MmaOp::Store { .. }) => {
                if self.stores.iter().any(|r| r.span == s.span) {
                    return Walk::Skip;
                }
                Walk::Continue
            }
            _ => Walk::Continue,
        }
    }

    fn expr(&mut self, e: &'a HExpr) -> Walk {
        if let HExprKind::At { .. } | HExprKind::Address { .. } | HExprKind::Atomic { .. } = e.kind
        {
            self.access = Some(e.span);
        }
        Walk::Continue
    }

    fn buffer(&mut self, buffer: BufferRef) {
        let here = self.access.take().or(self.span);
        let selected = self.conds.iter().any(|(_, selects, _)| *selects);
        if !selected {
            return;
        }
        for (i, store) in self.stores.iter().enumerate() {
            if store.buffer != buffer || self.found[i].is_some() {
                continue;
            }
            let inside = self.keys[i]
                .iter()
                .all(|k| self.conds.iter().any(|(c, _, then)| *then && *c == Some(*k)));
            if !inside {
                self.found[i] = here;
            }
        }
    }
}
