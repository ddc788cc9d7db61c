//! `global` events (spec-tier3 §2.4): declared in host code, a zeroed device byte per slot
//! that the host wrapper allocates (a global `u8` buffer of the function, so kernels capture it
//! like any other).
//!
//! In device code `trigger g` makes the thread's earlier writes visible device-wide and sets
//! the byte; `wait g` spins until it is set, then clears it — so each trigger releases one
//! waiter. In block-level code one thread of the block does it for the block (the reference's
//! elected thread), after a block barrier for `trigger` and before one for `wait`; in
//! thread-level code each executing thread does it itself; inside a `group`/`group-4` level
//! (whose instances would each need their own election) it is rejected. In host code
//! `trigger g` sets the byte with `cudaMemset`; a host `wait` is rejected, as are `event<N>`,
//! `.at(order)`, `trigger.cluster`/`after`, and a `global event` in device code (`E0466`).
//! `while (g)` tests the byte ([`Checker::event_condition`]).

use super::events::EventStorage;
use super::scope::Symbol;
use super::{Checker, Region};
use crate::ast;
use crate::hir::{
    self, ElemTy, Event, EventId, HExpr, HExprKind, KernelId, LocalPlace, Participants, SlotIndex,
    Stmt, StmtKind, Storage, Ty,
};
use crate::source::Span;

impl Checker<'_> {
    /// `global event g, h[2], …;` (host code).
    pub(crate) fn check_global_event_decl(
        &mut self,
        d: &ast::EventDecl,
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        let mut ok = true;
        if !matches!(self.region, Region::Host) {
            let at = d.storage.map_or(span, |(_, s)| s);
            self.error_label(
                "E0466",
                at,
                "global event can only be declared at host side.",
                "device code",
            );
            ok = false;
        }
        if let Some((_, nspan)) = &d.arrivals {
            self.error_label(
                "E0466",
                *nspan,
                "an arrival count applies to shared events; a global event is a flag",
                "arrival count of a global event",
            );
            ok = false;
        }
        for item in &d.items {
            if let Some(r) = item.ready {
                self.error_label(
                    "E0466",
                    r,
                    "a global event starts clear (`= ready` applies to shared and local events)",
                    "`ready` on a global event",
                );
                ok = false;
            }
            let Some(dims) = self.event_dims(item) else {
                self.declare_poisoned(&item.name);
                continue;
            };
            let words = (ElemTy::U8, Storage::Global, LocalPlace::GlobalBuffer);
            let EventStorage { slot_words: flags, phases, .. } =
                self.event_storage(item, &dims, "flags", words);
            let id = EventId(self.events.len() as u32);
            self.events.push(Event {
                name: item.name.name.clone(),
                span: item.span,
                // No kernel of its own: every kernel of the function may use it.
                kernel: KernelId(u32::MAX),
                dims,
                ready: false,
                arrivals: None,
                barriers: flags,
                phases,
                triggers: Vec::new(),
                cluster: None,
                local: false,
                global: true,
            });
            self.declare_symbol(&item.name, Symbol::Event(id));
            if !ok {
                continue;
            }
            let zero =
                HExpr { kind: HExprKind::Int(0), ty: Ty::Scalar(ElemTy::U8), span: item.span };
            out.push(Stmt {
                kind: StmtKind::DeclBuffer { var: flags, init: Some(zero) },
                span: item.span,
            });
        }
    }

    /// Whether an operand names a global event.
    pub(crate) fn names_global_event(&self, e: &ast::Expr) -> bool {
        self.event_named(e).and_then(|id| self.events.get(id.index())).is_some_and(|e| e.global)
    }

    /// `trigger` (`wait`) of operands one of which is a global event; `modifier` is the span
    /// of a `.cluster` or an `after` (rejected).
    pub(crate) fn global_event_stmt(
        &mut self,
        targets: &[ast::Expr],
        modifier: Option<Span>,
        wait: bool,
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        let what = if wait { "wait" } else { "trigger" };
        for target in targets {
            if let Some(id) = self.event_named(target) {
                self.waited_events.insert(id);
            }
        }
        if let Some(at) = modifier {
            self.error_label(
                "E0466",
                at,
                "a global event is triggered with a plain `trigger` (no `.cluster`, no `after`)",
                "not for a global event",
            );
            return;
        }
        let host = matches!(self.region, Region::Host);
        if host && wait {
            self.error_label(
                "E0466",
                span,
                "a global event cannot be waited on the host",
                "host wait",
            );
            return;
        }
        let elected = match self.participants(Storage::Shared) {
            _ if host => false,
            Participants::Block => true,
            Participants::Thread => false,
            _ => {
                self.error_label(
                    "E0466",
                    span,
                    format!(
                        "a global event is {what}ed in block-level code (by one thread for the \
                         block) or by single threads, not by the instances of a `group` level"
                    ),
                    "inside a group level",
                );
                return;
            }
        };
        for target in targets {
            if !self.names_global_event(target) {
                self.error_label(
                    "E0466",
                    target.span,
                    format!("a `{what}` of a global event names global events only"),
                    "not a global event",
                );
                return;
            }
            let Some(slot) = self.event_slot(target, what) else { return };
            let Some(e) = self.events.get(slot.event.index()).cloned() else { return };
            let SlotIndex::Fixed(index) = slot.index else { return };
            out.push(Stmt {
                kind: StmtKind::GlobalFlag {
                    wait,
                    flags: hir::BufferRef::Local(e.barriers),
                    slot: index,
                    slots: e.slots(),
                    elected,
                },
                span,
            });
        }
    }
}
