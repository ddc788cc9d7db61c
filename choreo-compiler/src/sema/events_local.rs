//! `local` events and `while (e)` (spec-tier3 §2.4).
//!
//! A `local event e;` (or `e[4]`, `= ready` per declarator) is, per slot, a per-thread flag:
//! initially clear (`ready`: set); `trigger e` sets the executing thread's flag, `wait e` spins
//! until it is set, then clears it, and `while (e) { … }` loops while it is set. We do not elect
//! one thread of the unit (the reference does, followed by the unit's barrier): a flag set by
//! an elected thread would be invisible to the others' `while (e)`. Only the owning thread can
//! set a local flag, so a `wait` of a clear flag can never return; it spins with the poll limit
//! of mbarrier waits and then traps (the CPU backend yields between polls and traps sooner).
//!
//! `while` takes a bool condition or a local (or global) event; a shared event there is rejected
//! (§2.4 ⚠: "event predicates require a local or global event", `E0467`). An arrival count
//! `event<N>` or a ring operand `.at(k)` on a local event is `E0466`, as is a local event in
//! host code.

use super::events::EventStorage;
use super::scope::Symbol;
use super::{Checker, Region};
use crate::ast;
use crate::hir::{
    self, ElemIndex, ElemTy, Event, EventId, HExpr, HExprKind, LocalPlace, SlotIndex, Stmt,
    StmtKind, Storage, Ty,
};
use crate::source::Span;

impl Checker<'_> {
    /// `local event a, b[4] = ready, …;`.
    pub(crate) fn check_local_event_decl(
        &mut self,
        d: &ast::EventDecl,
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        let mut ok = true;
        if matches!(self.region, Region::Host) {
            let at = d.storage.map_or(span, |(_, s)| s);
            self.error_label(
                "E0466",
                at,
                "local event can only be declared at device side.",
                "host code",
            );
            ok = false;
        }
        if let Some((_, nspan)) = &d.arrivals {
            self.error_label(
                "E0466",
                *nspan,
                "an arrival count applies to shared events; a local event is a flag",
                "arrival count of a local event",
            );
            ok = false;
        }
        let ok = ok && self.event_decl_placement_ok(span);
        for item in &d.items {
            let dims = self.event_dims(item);
            // A misplaced declaration still declares the event (no cascade of "not an event"
            // errors), but emits nothing.
            let (Some(dims), Some(kernel)) = (dims, self.current_kernel()) else {
                self.declare_poisoned(&item.name);
                continue;
            };
            let words = (ElemTy::Bool, Storage::Local, LocalPlace::LocalBuffer);
            let EventStorage { slot_words: flags, phases, .. } =
                self.event_storage(item, &dims, "flags", words);
            let ready = item.ready.is_some();
            let id = EventId(self.events.len() as u32);
            self.events.push(Event {
                name: item.name.name.clone(),
                span: item.span,
                kernel,
                dims,
                ready,
                arrivals: None,
                barriers: flags,
                phases,
                triggers: Vec::new(),
                cluster: None,
                local: true,
                global: false,
            });
            self.declare_symbol(&item.name, Symbol::Event(id));
            if !ok {
                continue;
            }
            let init = HExpr {
                kind: HExprKind::Bool(ready),
                ty: Ty::Scalar(ElemTy::Bool),
                span: item.span,
            };
            out.push(Stmt {
                kind: StmtKind::DeclBuffer { var: flags, init: Some(init) },
                span: item.span,
            });
        }
    }

    /// The condition of `while (e)` on an event: the executing thread's flag of a local event
    /// (`E0467` for a shared one).
    pub(crate) fn event_condition(&mut self, cond: &ast::Expr) -> HExpr {
        let error = HExpr { kind: HExprKind::Error, ty: Ty::Error, span: cond.span };
        if !self.in_device() {
            self.error_label(
                "E0467",
                cond.span,
                "an event predicate is only allowed inside a parallel-by",
                "host code",
            );
            return error;
        }
        let Some(slot) = self.event_slot(cond, "while") else { return error };
        let Some(e) = self.events.get(slot.event.index()).cloned() else { return error };
        if !e.local && !e.global {
            self.waited_events.insert(slot.event);
            self.diags.push(
                crate::diagnostics::Diagnostic::error(
                    "E0467",
                    cond.span,
                    "event predicates require a local or global event",
                )
                .with_label(format!("'{}' is a shared event", e.name))
                .with_help(
                    "test a `local event` flag, or wait for the shared event (`wait e;`) and loop \
                     on a bool",
                ),
            );
            return error;
        }
        let SlotIndex::Fixed(index) = slot.index else { return error };
        if e.global {
            // The byte another block, kernel or the host sets: read through a device fence in
            // the loop (`wait` clears it).
            let id = self.next_access();
            return HExpr {
                kind: HExprKind::Binary {
                    op: hir::BinOp::Ne,
                    lhs: Box::new(HExpr {
                        kind: HExprKind::At {
                            buffer: hir::BufferRef::Local(e.barriers),
                            index: ElemIndex::Coords(vec![index]),
                            id,
                        },
                        ty: Ty::Scalar(ElemTy::U8),
                        span: cond.span,
                    }),
                    rhs: Box::new(HExpr {
                        kind: HExprKind::Int(0),
                        ty: Ty::Scalar(ElemTy::U8),
                        span: cond.span,
                    }),
                },
                ty: Ty::Scalar(ElemTy::Bool),
                span: cond.span,
            };
        }
        let id = self.next_access();
        HExpr {
            kind: HExprKind::At {
                buffer: hir::BufferRef::Local(e.barriers),
                index: ElemIndex::Coords(vec![index]),
                id,
            },
            ty: Ty::Scalar(ElemTy::Bool),
            span: cond.span,
        }
    }
}
