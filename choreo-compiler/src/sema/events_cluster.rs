//! `trigger.cluster e;` (spec-tier3 §2.6): a shared event whose generations count arrivals
//! from every block of the cluster.
//!
//! Each thread that executes `trigger.cluster e` arrives on slot `e` of every block of its
//! cluster, its own included (`mapa` + a remote `mbarrier.arrive.release.cluster`). The ⚠ of
//! §2.6 is followed: every waiting thread waits, with cluster-scope acquire. Arrivals come
//! from each triggering thread rather than one elected thread per warpgroup, so the arrival
//! count (§2.7) is the number of threads of a block that trigger the event times the cluster
//! size (or the written `event<N>`, the total per generation). An event is triggered either
//! with `trigger.cluster` only or never with it (`E0465`), and only in a kernel launched in
//! clusters (`E0465`).
//!
//! `trigger.cluster e after f…` binds multicast TMA loads (§3.6) to slot `e` of every block
//! of the cluster: see [`Checker::check_cluster_trigger_after`].

use super::Checker;
use super::scope::Symbol;
use crate::ast;
use crate::diagnostics::Diagnostic;
use crate::hir::{EventSlot, Stmt, StmtKind};
use crate::source::Span;

impl Checker<'_> {
    /// `trigger.cluster e, …;` (no `after`), in device code (`check_trigger` checked).
    pub(crate) fn check_cluster_trigger(
        &mut self,
        t: &ast::Trigger,
        at: Span,
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        if !self.in_cluster_kernel(at, "trigger") {
            self.mark_event_errors(&t.targets);
            return;
        }
        let mut slots = Vec::with_capacity(t.targets.len());
        let mut failed = false;
        for target in &t.targets {
            match self.event_slot(target, "trigger") {
                Some(slot) => slots.push(slot),
                None => failed = true,
            }
        }
        if failed {
            self.order_updates.clear();
            self.mark_event_errors(&t.targets);
            return;
        }
        for slot in &slots {
            let Some(e) = self.events.get(slot.event.index()) else { continue };
            if e.local {
                self.error_label(
                    "E0465",
                    slot.span,
                    format!(
                        "'{}' is a local event: `trigger.cluster` needs a shared event",
                        e.name
                    ),
                    "a local event",
                );
                self.order_updates.clear();
                self.mark_event_errors(&t.targets);
                return;
            }
            if e.cluster.is_none() && !e.triggers.is_empty() {
                let (name, first) = (e.name.clone(), e.triggers[0].span);
                self.diags.push(
                    Diagnostic::error(
                        "E0465",
                        slot.span,
                        format!(
                            "event '{name}' is triggered with both `trigger` and `trigger.cluster`"
                        ),
                    )
                    .with_label("cluster trigger")
                    .with_secondary(first, "plain trigger")
                    .with_note(
                        "a generation counts the arrivals of one kind: of the block's threads, or \
                         of the threads of every block of the cluster",
                    )
                    .with_help("use a second event for the other kind"),
                );
                self.order_updates.clear();
                self.mark_event_errors(&t.targets);
                return;
            }
        }
        for slot in &slots {
            if let Some(e) = self.events.get_mut(slot.event.index()) {
                e.cluster.get_or_insert(span);
            }
        }
        self.record_trigger(&slots, span);
        out.push(Stmt { kind: StmtKind::Trigger(slots.clone()), span });
        self.flush_order_updates(&slots, out);
    }

    /// `trigger.cluster e after f0, …;` (spec-tier3 §2.5 + §2.6), in device code: the futures
    /// are multicast TMA loads (`E0479` otherwise) whose bytes land in every block of the
    /// cluster. Each block's issuer arms its own slot `e` with the tile bytes, cluster rank 0
    /// issues the multicast with the slot's mbarrier (the copy engine completes the bytes on
    /// the slot at the same offset in every block), and each block's issuer arrives once on its
    /// own slot at the trigger: the event is a fill event (count 1, §2.7) whose waits acquire
    /// at cluster scope, and its slots are initialised in every block before any multicast.
    pub(crate) fn check_cluster_trigger_after(
        &mut self,
        t: &ast::Trigger,
        at: Span,
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        if !self.in_cluster_kernel(at, "trigger … after") {
            self.trigger_after_failed(t);
            return;
        }
        if !self.bound_loads_match(t, true, out) {
            return;
        }
        let before = out.len();
        self.check_trigger_after(t, span, out);
        let bound = out[before..].iter().find_map(|s| match &s.kind {
            StmtKind::TriggerAfter(a) => Some(a.slot.event),
            _ => None,
        });
        if let Some(e) = bound.and_then(|id| self.events.get_mut(id.index())) {
            e.cluster.get_or_insert(span);
        }
    }

    /// The futures of `trigger[.cluster] e after f…` name multicast TMA loads exactly when the
    /// trigger is `.cluster` (`cluster`): a block's own load cannot complete the slots of the
    /// other blocks, and a multicast completes the slot of every block (`E0479`). Futures that
    /// name no TMA load of this block are left to `check_trigger_after`. Returns whether it
    /// is fine.
    pub(crate) fn bound_loads_match(
        &mut self,
        t: &ast::Trigger,
        cluster: bool,
        out: &[Stmt],
    ) -> bool {
        for f in &t.after {
            let ast::ExprKind::Ident(id) = &f.kind else { continue };
            let Some(Symbol::Future(sym)) = self.scopes.lookup(&id.name) else { continue };
            let Some(g) = sym.group else { continue };
            let load = out.iter().rev().find_map(|s| match &s.kind {
                StmtKind::Dma(d) if d.group == Some(g) => {
                    d.tma.as_ref().map(|t| (t.multicast, s.span))
                }
                _ => None,
            });
            let Some((multicast, load)) = load else { continue };
            if multicast == cluster {
                continue;
            }
            let name = id.name.clone();
            let d = if cluster {
                Diagnostic::error(
                    "E0479",
                    f.span,
                    format!(
                        "`trigger.cluster … after` binds multicast TMA loads: the bytes of \
                         '{name}', a load of this block only, cannot complete the event in the \
                         other blocks of the cluster"
                    ),
                )
                .with_label("not a multicast load")
                .with_secondary(load, "loaded here")
                .with_help(format!(
                    "load with `tma.load.async.multicast`, or bind it to this block's slot with \
                     a plain `trigger … after {name}` (or `wait {name}; trigger.cluster …;`)"
                ))
            } else {
                Diagnostic::error(
                    "E0479",
                    f.span,
                    format!(
                        "'{name}' is a multicast TMA load: its bytes complete the event in every \
                         block of the cluster, bind it with `trigger.cluster … after`"
                    ),
                )
                .with_label("a multicast load")
                .with_secondary(load, "loaded here")
                .with_help(format!("`trigger.cluster … after {name};`"))
            };
            self.diags.push(d);
            self.order_updates.clear();
            self.trigger_after_failed(t);
            return false;
        }
        true
    }

    /// A plain `trigger` of `slots`: none of them is an event triggered with `trigger.cluster`
    /// (`E0465`). Returns whether it is fine.
    pub(crate) fn plain_trigger_ok(&mut self, slots: &[EventSlot]) -> bool {
        for slot in slots {
            let Some(e) = self.events.get(slot.event.index()) else { continue };
            if let Some(first) = e.cluster {
                let name = e.name.clone();
                self.diags.push(
                    Diagnostic::error(
                        "E0465",
                        slot.span,
                        format!(
                            "event '{name}' is triggered with both `trigger` and `trigger.cluster`"
                        ),
                    )
                    .with_label("plain trigger")
                    .with_secondary(first, "cluster trigger")
                    .with_help("use a second event for the other kind"),
                );
                return false;
            }
        }
        true
    }

    /// Whether the kernel being checked is launched in clusters, as `trigger.cluster` needs;
    /// reports `E0465` (with the plain form `plain` as the alternative) otherwise.
    fn in_cluster_kernel(&mut self, at: Span, plain: &str) -> bool {
        if self.kernel.as_ref().is_some_and(|k| k.cluster) {
            return true;
        }
        self.diags.push(
            Diagnostic::error("E0465", at, "`trigger.cluster` needs a kernel launched in clusters")
                .with_label("not inside a `cluster` level")
                .with_help(format!(
                    "put the block level in a cluster (`parallel c by 2 : cluster, b by N : \
                     block`), or use a plain `{plain}`"
                )),
        );
        false
    }
}
