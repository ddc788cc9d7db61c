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

use super::Checker;
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
        if !self.kernel.as_ref().is_some_and(|k| k.cluster) {
            self.diags.push(
                Diagnostic::error(
                    "E0465",
                    at,
                    "`trigger.cluster` needs a kernel launched in clusters",
                )
                .with_label("not inside a `cluster` level")
                .with_help(
                    "put the block level in a cluster (`parallel c by 2 : cluster, b by N : \
                     block`), or use a plain `trigger`",
                ),
            );
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
}
