//! Warp-specialised TMA pipelines (spec-tier3 §2.3, §2.5, §3.3, §7): TMA issued by a
//! warpgroup role, `trigger e after f0, f1, …` (event-bound TMA loads), and increments in ring
//! orders (`e.at(o++)`).
//!
//! - **Roles.** A TMA statement in thread-level code under an `inthreads` whose predicates
//!   depend on intra-block indices (`inthreads.async (w == 0)` at a `group-4` level) is issued
//!   by the role: its first thread arms and issues, every thread of the role takes part in
//!   completion, and the barriers the statement implies cover the role only (`bar.sync 15`).
//!   Which threads the predicates select is worked out by lowering (`lower::roles`, `E0475`
//!   unless they are whole warpgroups or a single thread); here the predicates are recorded
//!   ([`hir::Tma::role`]) and the tile's coordinates must be the same in every thread of the
//!   role (no intra-block index in them).
//! - **`trigger e after f…`.** The futures' loads, issued before the trigger in the same
//!   block, complete the event's slot instead of their own mbarrier ([`hir::Tma::event`]);
//!   the futures are consumed (no `wait`), and the event is a fill event (one arrival per
//!   generation: the issuer's). Errors are `E0476`.
//! - **Incremented orders.** `e.at(o++)`, `e.at(++o)`, `e.at(o--)`, `e.at(--o)` on a mutable
//!   integer local: slot and phase come from one evaluation and the update follows the
//!   statement (C semantics: the statement may not use `o` in another operand). Other
//!   increments are statements of their own (`o++;`, sema/steps.rs), `E0478` as values, or
//!   `E0471` (nested in an order).

use super::Checker;
use super::scope::Symbol;
use crate::ast::{self, ExprKind};
use crate::diagnostics::Diagnostic;
use crate::hir::visit::{self, Walk};
use crate::hir::{
    AssignOp, ElemTy, EventSlot, HExpr, HExprKind, Layout, LocalOrigin, Participants, Place, Stmt,
    StmtKind, TriggerSite, Ty, VarId, View,
};
use crate::source::Span;
use std::collections::BTreeSet;

/// What happened last to an asynchronous TMA future of the kernel being checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FutureUse {
    /// Its load was issued (and nothing consumed it since).
    Issued,
    /// `wait f` waited for it.
    Waited(Span),
    /// `trigger e after f` bound it to an event.
    Bound(Span),
}

impl Checker<'_> {
    /// The role that issues a TMA statement with participants `participants`: `Ok(None)` in
    /// block-level code, `Ok(Some(predicates))` in thread-level code under a
    /// warpgroup-selecting `inthreads`, `Err(false)` elsewhere (the caller reports `E0460`).
    /// In a role, the views must not depend on intra-block indices (also `E0460`, reported
    /// here: `Err(true)`).
    pub(crate) fn tma_role(
        &mut self,
        participants: Participants,
        views: &[&View],
        span: Span,
    ) -> Result<Option<Vec<HExpr>>, bool> {
        let role = match participants {
            Participants::Block => None,
            p => match self.tma_role_conditions(p) {
                Some(role) => Some(role),
                None => return Err(false),
            },
        };
        if role.is_some() {
            if !self.role_uniform_here(span) {
                return Err(true);
            }
            for v in views.iter().copied() {
                let Layout::Coords { origin, .. } = &v.layout else { continue };
                if let Some(index) = origin.iter().find_map(|e| self.intra_block_index_in(e)) {
                    self.error_label(
                        "E0460",
                        span,
                        format!(
                            "TMA is block-wise that parallel variable `{index} can not be used \
                             as indices/tiling-factors."
                        ),
                        "the tile must be the same in every thread of the issuing role",
                    );
                    return Err(true);
                }
            }
        }
        Ok(role)
    }

    /// The predicates of the warpgroup role that code with participants `participants` runs
    /// in (thread-level code under a warpgroup-selecting `inthreads`, outermost first, through
    /// immutable locals), if it is in one.
    pub(crate) fn tma_role_conditions(&self, participants: Participants) -> Option<Vec<HExpr>> {
        let in_role = participants == Participants::Thread
            && self.kernel.as_ref().is_some_and(|k| k.group4_depth > 0)
            && self.inthreads_conditions.iter().any(|c| self.selects_level_instances(c));
        in_role.then(|| {
            self.inthreads_conditions.iter().map(|c| self.through_device_inits(c)).collect()
        })
    }

    /// In a warpgroup role: whether every thread of the role reaches the statement at `span`,
    /// i.e. no `if`/`while` on an intra-block index encloses it inside the role's `inthreads`
    /// (its issuer might skip it while the others wait). `E0475` otherwise.
    pub(crate) fn role_uniform_here(&mut self, span: Span) -> bool {
        if self.role_uniform() {
            return true;
        }
        self.report_role_not_uniform(span);
        false
    }

    /// Whether no `if`/`while` on an intra-block index encloses the code being checked inside
    /// its role's `inthreads` (as [`Checker::role_uniform_here`], without reporting).
    pub(crate) fn role_uniform(&self) -> bool {
        let selecting_inthreads =
            self.inthreads_conditions.iter().filter(|c| self.selects_level_instances(c)).count();
        self.selecting_conditions as usize <= selecting_inthreads
    }

    /// `E0475` at `span`: a role's TMA statement that only some of its threads reach.
    pub(crate) fn report_role_not_uniform(&mut self, span: Span) {
        self.diags.push(
            Diagnostic::error(
                "E0475",
                span,
                "a TMA statement or trigger-after of a warpgroup role must be reached by every \
                 thread of the role: this one is under an `if`/`while` on a thread index",
            )
            .with_label("only some threads of the role get here")
            .with_help(
                "move it out of the condition (the role's first thread issues it for the role), \
                 or select the threads with the role's `inthreads` predicate",
            ),
        );
    }

    /// The name and level of an intra-block parallel index `e` depends on (through immutable
    /// locals), as the spec's message writes it (`w'(group-4)`), if any.
    fn intra_block_index_in(&self, e: &HExpr) -> Option<String> {
        let mut found = None;
        visit::for_each_expr(e, |x| {
            if let HExprKind::Var(v) = &x.kind {
                if let Some(l) = self.locals.get(v.index()) {
                    match &l.origin {
                        LocalOrigin::ParallelIndex { level, .. }
                            if *level != crate::hir::Level::Block =>
                        {
                            found.get_or_insert_with(|| format!("{}'({})", l.name, level.as_str()));
                        }
                        _ => {
                            if let Some(n) =
                                self.device_inits.get(v).and_then(|i| self.intra_block_index_in(i))
                            {
                                found.get_or_insert(n);
                            }
                        }
                    }
                }
            }
            Walk::Continue
        });
        found
    }

    /// Notes that the asynchronous TMA load of group local `g` was issued.
    pub(crate) fn note_tma_issue(&mut self, g: VarId) {
        if let Some(k) = self.kernel.as_mut() {
            k.future_uses.insert(g, FutureUse::Issued);
        }
    }

    /// `wait` on the futures `names` (group locals `groups`): a future bound to an event by
    /// `trigger … after` was consumed (`E0476`). Returns whether all are fine.
    pub(crate) fn note_future_waits(&mut self, names: &[ast::Ident], groups: &[VarId]) -> bool {
        let mut ok = true;
        for (id, g) in names.iter().zip(groups) {
            let used = self.kernel.as_ref().and_then(|k| k.future_uses.get(g).copied());
            if let Some(FutureUse::Bound(at)) = used {
                self.diags.push(
                    Diagnostic::error(
                        "E0476",
                        id.span,
                        format!(
                            "future '{}' was consumed by `trigger … after`: its load completes \
                             the event, not the future",
                            id.name
                        ),
                    )
                    .with_label("waits a consumed future")
                    .with_secondary(at, "bound to the event here")
                    .with_help("wait the event the load is bound to"),
                );
                ok = false;
                continue;
            }
            if let Some(k) = self.kernel.as_mut() {
                k.future_uses.insert(*g, FutureUse::Waited(id.span));
            }
        }
        ok
    }

    /// An event order `k` of `.at(k)`: the order value, and for `o++`/`++o`/`o--`/`--o` the
    /// update of `o` that follows the statement (`None` after an error, reported).
    pub(crate) fn event_order(&mut self, order: &ast::Expr) -> Option<(HExpr, Option<VarId>)> {
        let (op, operand) = match &order.kind {
            ExprKind::Unary { op, operand }
                if matches!(
                    op,
                    ast::UnaryOp::PreInc
                        | ast::UnaryOp::PreDec
                        | ast::UnaryOp::PostInc
                        | ast::UnaryOp::PostDec
                ) =>
            {
                (*op, operand)
            }
            _ => {
                let was = std::mem::replace(&mut self.in_event_order, true);
                let k = self.check_scalar(order, "an event order");
                self.in_event_order = was;
                return Some((k, None));
            }
        };
        let ExprKind::Ident(id) = &operand.kind else {
            self.order_update_misplaced(order.span);
            return None;
        };
        let var = match self.scopes.lookup(&id.name).cloned() {
            Some(Symbol::Local(v)) => v,
            None => {
                self.undeclared(id);
                return None;
            }
            Some(_) => {
                self.not_an_order_variable(id);
                return None;
            }
        };
        let local = self.locals.get(var.index())?;
        if !local.mutable
            || !local.ty.is_integer()
            || !matches!(local.place, crate::hir::LocalPlace::DeviceScalar)
        {
            self.not_an_order_variable(id);
            return None;
        }
        let ty = local.ty.clone();
        let value = HExpr { kind: HExprKind::Var(var), ty: ty.clone(), span: operand.span };
        let delta: i128 = match op {
            ast::UnaryOp::PreInc | ast::UnaryOp::PostInc => 1,
            _ => -1,
        };
        let k = match op {
            ast::UnaryOp::PreInc | ast::UnaryOp::PreDec => HExpr {
                kind: HExprKind::Binary {
                    op: crate::hir::BinOp::Add,
                    lhs: Box::new(value),
                    rhs: Box::new(HExpr {
                        kind: HExprKind::Int(delta),
                        ty: ty.clone(),
                        span: order.span,
                    }),
                },
                ty,
                span: order.span,
            },
            _ => value,
        };
        let update = Stmt {
            kind: StmtKind::Assign {
                target: Place::Var(var),
                op: if delta > 0 { AssignOp::Add } else { AssignOp::Sub },
                value: HExpr {
                    kind: HExprKind::Int(1),
                    ty: Ty::Scalar(ElemTy::S32),
                    span: order.span,
                },
            },
            span: order.span,
        };
        self.order_updates.push((var, update, order.span));
        Some((k, Some(var)))
    }

    fn not_an_order_variable(&mut self, id: &ast::Ident) {
        self.error_label(
            "E0471",
            id.span,
            format!(
                "an event order update needs a mutable integer variable of the thread: '{}' is \
                 not one",
                id.name
            ),
            "not a mutable integer local",
        );
    }

    /// `E0471` for an increment nested in an event order or index.
    pub(crate) fn order_update_misplaced(&mut self, span: Span) {
        self.diags.push(
            Diagnostic::error(
                "E0471",
                span,
                "an event order update must be the direct '.at' argument (`e.at(o++)`)",
            )
            .with_label("nested update")
            .with_help("update the order separately: `e.at(o + 1)` … `o += 1;`"),
        );
    }

    /// After a `trigger`/`wait` statement: the order updates of its operands follow it. An
    /// incremented variable may not be used by another operand (its value there would depend
    /// on the order of evaluation), `E0471`.
    pub(crate) fn flush_order_updates(&mut self, slots: &[EventSlot], out: &mut Vec<Stmt>) {
        let updates = std::mem::take(&mut self.order_updates);
        for (var, update, span) in updates {
            let uses = slots.iter().filter(|s| mentions(s.index.expr(), var)).count();
            if uses > 1 {
                let name = self.locals.get(var.index()).map_or("?", |l| l.name.as_str());
                self.error_label(
                    "E0471",
                    span,
                    format!(
                        "'{name}' is incremented in an event order and used by another operand \
                         of the same statement"
                    ),
                    "updated here",
                );
            }
            out.push(update);
        }
    }

    /// `trigger e after f0, f1, …;` (spec-tier3 §2.5).
    pub(crate) fn check_trigger_after(
        &mut self,
        t: &ast::Trigger,
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        let fail = |this: &mut Self, at: Span, message: String, label: &str| {
            this.error_label("E0476", at, message, label.to_string());
        };
        let [target] = t.targets.as_slice() else {
            fail(
                self,
                span,
                "trigger-after requires exactly one shared event (the futures complete one \
                 generation of one slot)"
                    .to_string(),
                "several events",
            );
            return self.trigger_after_failed(t);
        };
        let Some(slot) = self.event_slot(target, "trigger") else {
            self.order_updates.clear();
            return self.trigger_after_failed(t);
        };
        let incremented = self.order_updates.len();
        if incremented > 0 && t.after.len() > 1 {
            fail(
                self,
                target.span,
                "an incremented event order cannot be shared by multiple trigger-after \
                 dependencies (the loads are armed with the order before it is updated)"
                    .to_string(),
                "incremented order",
            );
            self.order_updates.clear();
            return self.trigger_after_failed(t);
        }
        // The futures: named asynchronous TMA loads, issued before in this block.
        let mut groups: Vec<VarId> = Vec::new();
        let mut loads: Vec<usize> = Vec::new();
        let mut ok = true;
        for f in &t.after {
            let ExprKind::Ident(id) = &f.kind else {
                fail(
                    self,
                    f.span,
                    "trigger-after requires a named future.".to_string(),
                    "not a name",
                );
                ok = false;
                continue;
            };
            let sym = match self.scopes.lookup(&id.name).cloned() {
                Some(Symbol::Future(sym)) => sym,
                None => {
                    self.undeclared(id);
                    ok = false;
                    continue;
                }
                // A name poisoned by an earlier error: already reported.
                Some(Symbol::Local(v))
                    if self.locals.get(v.index()).is_some_and(|l| l.ty == Ty::Error) =>
                {
                    ok = false;
                    continue;
                }
                Some(_) => {
                    fail(
                        self,
                        f.span,
                        format!("trigger-after requires a named future: '{}' is not one.", id.name),
                        "not a future",
                    );
                    ok = false;
                    continue;
                }
            };
            let Some(g) = sym.group else {
                fail(
                    self,
                    f.span,
                    format!("trigger-after dependency must be asynchronous: '{}' is not.", id.name),
                    "a synchronous future",
                );
                ok = false;
                continue;
            };
            if !self.is_tma_group(g) {
                self.diags.push(
                    Diagnostic::error(
                        "E0476",
                        f.span,
                        format!(
                            "trigger-after requires native completion-event binding; use an \
                             explicit wait followed by a direct trigger: '{}' is a \
                             `dma.copy.async` future",
                            id.name
                        ),
                    )
                    .with_label("no completion event to bind")
                    .with_help(format!("`wait {}; trigger …;`", id.name)),
                );
                ok = false;
                continue;
            }
            let used = self.kernel.as_ref().and_then(|k| k.future_uses.get(&g).copied());
            match used {
                Some(FutureUse::Waited(at)) => {
                    self.diags.push(
                        Diagnostic::error(
                            "E0476",
                            f.span,
                            format!(
                                "trigger-after cannot bind future '{}' after it was explicitly \
                                 waited",
                                id.name
                            ),
                        )
                        .with_label("already waited")
                        .with_secondary(at, "waited here")
                        .with_help("trigger the event directly after the wait, or drop the wait"),
                    );
                    ok = false;
                    continue;
                }
                Some(FutureUse::Bound(at)) => {
                    self.diags.push(
                        Diagnostic::error(
                            "E0476",
                            f.span,
                            format!(
                                "trigger-after consumes future '{}' more than once; publish an \
                                 event for multiple consumers.",
                                id.name
                            ),
                        )
                        .with_label("consumed again")
                        .with_secondary(at, "consumed here"),
                    );
                    ok = false;
                    continue;
                }
                _ => {}
            }
            if groups.contains(&g) {
                fail(
                    self,
                    f.span,
                    format!(
                        "trigger-after consumes future '{}' more than once; publish an event for \
                         multiple consumers.",
                        id.name
                    ),
                    "named twice",
                );
                ok = false;
                continue;
            }
            // Its load: the latest TMA load of this block into the future.
            let found = out.iter().rposition(
                |s| matches!(&s.kind, StmtKind::Dma(d) if d.group == Some(g) && d.tma.is_some()),
            );
            let Some(at) = found else {
                // A load that had an error (reported) is not in the block.
                let issued = self.kernel.as_ref().is_some_and(|k| k.future_uses.contains_key(&g));
                if !issued && self.diags.has_errors() {
                    ok = false;
                    continue;
                }
                fail(
                    self,
                    f.span,
                    format!(
                        "trigger-after binds the load of '{}' issued before it in the same \
                         block; this block has none",
                        id.name
                    ),
                    "no load of this future in this block",
                );
                ok = false;
                continue;
            };
            groups.push(g);
            loads.push(at);
        }
        if !ok {
            self.order_updates.clear();
            return self.trigger_after_failed(t);
        }
        // The loads are armed on the slot where they are: nothing between them and the
        // trigger may change the order's variables.
        let vars = vars_of(slot.index.expr());
        if let Some(first) = loads.iter().min() {
            let assigned = assigned_vars(&out[*first..]);
            if let Some(v) = vars.iter().find(|v| assigned.contains(v)) {
                let name = self.locals.get(v.index()).map_or("?", |l| l.name.as_str()).to_string();
                fail(
                    self,
                    target.span,
                    format!(
                        "'{name}' changes between a bound load and its trigger-after: the load \
                         is armed on the slot the order names where the load is"
                    ),
                    "order changed after the load",
                );
                self.order_updates.clear();
                return self.trigger_after_failed(t);
            }
        }
        let role = loads.first().and_then(|&i| match &out[i].kind {
            StmtKind::Dma(d) => d.tma.as_ref().map(|t| t.role.clone()),
            _ => None,
        });
        let role = role.flatten();
        if role.is_some() && !self.role_uniform_here(span) {
            return self.trigger_after_failed(t);
        }
        for &i in &loads {
            if let StmtKind::Dma(d) = &mut out[i].kind {
                if let Some(tma) = d.tma.as_mut() {
                    tma.event = Some(slot.clone());
                }
            }
        }
        for g in &groups {
            if let Some(k) = self.kernel.as_mut() {
                k.future_uses.insert(*g, FutureUse::Bound(span));
            }
        }
        let conditions: Vec<HExpr> =
            self.inthreads_conditions.iter().map(|c| self.through_device_inits(c)).collect();
        if let Some(e) = self.events.get_mut(slot.event.index()) {
            e.triggers.push(TriggerSite { span, slot: None, conditions, fill: true });
        }
        out.push(Stmt {
            kind: StmtKind::TriggerAfter(Box::new(crate::hir::TriggerAfter {
                slot: slot.clone(),
                futures: groups,
                role,
            })),
            span,
        });
        self.flush_order_updates(std::slice::from_ref(&slot), out);
    }

    /// After an error in a `trigger … after`: no follow-up "never waited" for its events, nor
    /// "not waited" for its futures.
    pub(crate) fn trigger_after_failed(&mut self, t: &ast::Trigger) {
        self.mark_event_errors(&t.targets);
        for f in &t.after {
            if let ExprKind::Ident(id) = &f.kind {
                if let Some(Symbol::Future(sym)) = self.scopes.lookup(&id.name).cloned() {
                    if let (Some(g), Some(k)) = (sym.group, self.kernel.as_mut()) {
                        k.silenced_futures.insert(g);
                    }
                }
            }
        }
    }

    /// After the function: a fill event (bound by `trigger … after`) is triggered only that
    /// way — its generation is one arrival of the issuer plus the loads' bytes (`E0476`).
    pub(crate) fn check_fill_events(&mut self) {
        let mut problems = Vec::new();
        let mut counts = Vec::new();
        for e in &self.events {
            if let (Some(n), Some(f)) = (e.arrivals, e.triggers.iter().find(|t| t.fill)) {
                if n != 1 {
                    counts.push((e.name.clone(), e.span, f.span, n));
                }
            }
            let fill = e.triggers.iter().find(|t| t.fill);
            let plain = e.triggers.iter().find(|t| !t.fill);
            if let (Some(f), Some(p)) = (fill, plain) {
                problems.push((e.name.clone(), p.span, f.span));
            }
        }
        for (name, decl, fill, n) in counts {
            self.diags.push(
                Diagnostic::warning(
                    "W0472",
                    decl,
                    format!(
                        "fill event '{name}' is declared with {n} arrivals per generation, but \
                         `trigger … after` arrives once (the TMA issuer)"
                    ),
                )
                .with_label("explicit arrival count")
                .with_secondary(fill, "bound to TMA loads here")
                .with_note("a generation completes after exactly the declared number of arrivals")
                .with_help(format!("declare it `shared event {name}` (count 1)")),
            );
        }
        for (name, plain, fill) in problems {
            self.diags.push(
                Diagnostic::error(
                    "E0476",
                    plain,
                    format!(
                        "event '{name}' is triggered with and without `after`: a fill event's \
                         generation is one arrival of the TMA issuer"
                    ),
                )
                .with_label("a plain trigger of a fill event")
                .with_secondary(fill, "bound to TMA loads here")
                .with_help("use another event for the plain trigger"),
            );
        }
    }
}

/// Whether `e` mentions local `v`.
fn mentions(e: &HExpr, v: VarId) -> bool {
    vars_of(e).contains(&v)
}

/// The locals `e` mentions.
fn vars_of(e: &HExpr) -> BTreeSet<VarId> {
    let mut out = BTreeSet::new();
    visit::for_each_expr(e, |x| {
        if let HExprKind::Var(v) = &x.kind {
            out.insert(*v);
        }
        Walk::Continue
    });
    out
}

/// The locals assigned in `stmts` (at any depth).
fn assigned_vars(stmts: &[Stmt]) -> BTreeSet<VarId> {
    struct Assigned(BTreeSet<VarId>);
    impl<'a> visit::Visitor<'a> for Assigned {
        fn stmt(&mut self, s: &'a Stmt) -> Walk {
            if let StmtKind::Assign { target: Place::Var(v), .. } = &s.kind {
                self.0.insert(*v);
            }
            Walk::Continue
        }
    }
    let mut a = Assigned(BTreeSet::new());
    visit::walk_stmts(&mut a, stmts);
    a.0
}
