//! Shared events (spec-tier3 §2): declarations, `trigger` and `wait`.
//!
//! A `shared event` is, per slot, a generation counter of the block: a generation completes
//! when its arrival count of threads have triggered the slot, and `wait` blocks a thread until
//! the generation it expects has completed. Each slot becomes an mbarrier (lowering and the
//! emitters); this module checks the statements and records what lowering needs: the slots'
//! storage, the per-thread phase bits of plain waits, and for every `trigger` the conditions
//! under which a thread executes it (the arrival count, §2.7, is computed from them where the
//! kernel's shape is known).
//!
//! `local` events and `while (e)` are in `events_local`, `trigger.cluster` in
//! `events_cluster`. Not yet supported (E0901): `global` events and `trigger … after` futures
//! (TMA completion).

use super::scope::Symbol;
use super::{Checker, Region};
use crate::ast::{self, ExprKind};
use crate::diagnostics::Diagnostic;
use crate::hir::arith::const_int;
use crate::hir::visit::for_each_expr_mut;
use crate::hir::{
    Dim, ElemTy, Event, EventId, EventSlot, HExpr, HExprKind, KernelId, LocalOrigin, LocalPlace,
    SlotIndex, SpannedTy, Stmt, StmtKind, Storage, TriggerSite, Ty,
};
use crate::source::Span;

/// The most slots one event declaration may have: each thread keeps the phases of a
/// declarator's slots in one 64-bit word.
const MAX_EVENT_SLOTS: u64 = 64;
/// The largest arrival count of an mbarrier phase (PTX: 2^20 − 1).
const MAX_ARRIVALS: i128 = (1 << 20) - 1;

fn stmt(kind: StmtKind, span: Span) -> Stmt {
    Stmt { kind, span }
}

impl Checker<'_> {
    /// `[storage] event[<N>] a, b[4] = ready, …;` (spec-tier3 §2.1).
    pub(crate) fn check_event_decl(&mut self, d: &ast::EventDecl, span: Span, out: &mut Vec<Stmt>) {
        let storage = d.storage.map(|(s, _)| s);
        let storage_span = d.storage.map_or(span, |(_, s)| s);
        let ok = match (storage, &self.region) {
            (Some(ast::Storage::Shared), Region::Device(_)) => true,
            (Some(ast::Storage::Shared), Region::Host) => {
                self.error_label(
                    "E0470",
                    storage_span,
                    "shared event can only be declared at device side.",
                    "host code",
                );
                false
            }
            (Some(ast::Storage::Local), _) => return self.check_local_event_decl(d, span, out),
            (Some(ast::Storage::Global), _) => return self.check_global_event_decl(d, span, out),
            (None, _) => {
                self.error_label(
                    "E0470",
                    span,
                    "an event declaration needs a storage: `shared event e;`",
                    "no storage",
                );
                false
            }
        };
        let ok = ok && self.event_decl_placement_ok(span);
        self.require(span, crate::target::Feature::SharedEvents);
        let arrivals = d.arrivals.as_ref().and_then(|(n, nspan)| {
            let v = n.value;
            if v <= 0 || v > MAX_ARRIVALS {
                self.error_label(
                    "E0470",
                    *nspan,
                    format!(
                        "the arrival count of an event must be in [1, {MAX_ARRIVALS}], not {v}"
                    ),
                    "out of range",
                );
                None
            } else {
                Some(v as u32)
            }
        });
        for item in &d.items {
            let dims = self.event_dims(item);
            // A misplaced declaration still declares the event (no cascade of "not an event"
            // errors), but emits nothing.
            let (Some(dims), Some(kernel)) = (dims, self.current_kernel()) else {
                self.declare_poisoned(&item.name);
                continue;
            };
            // The mbarriers: a shared buffer of the kernel's pool.
            let words = (ElemTy::U64, Storage::Shared, LocalPlace::SharedBuffer);
            let EventStorage { slots, slot_words: barriers, phases } =
                self.event_storage(item, &dims, "bars", words);
            let ready = item.ready.is_some();
            let init_bits: u64 = if !ready {
                0
            } else if slots == 64 {
                u64::MAX
            } else {
                (1u64 << slots) - 1
            };
            let id = EventId(self.events.len() as u32);
            self.events.push(Event {
                name: item.name.name.clone(),
                span: item.span,
                kernel,
                dims,
                ready,
                arrivals,
                barriers,
                phases,
                triggers: Vec::new(),
                cluster: None,
                local: false,
                global: false,
            });
            self.declare_symbol(&item.name, Symbol::Event(id));
            if !ok {
                continue;
            }
            out.push(stmt(StmtKind::DeclBuffer { var: barriers, init: None }, item.span));
            out.push(stmt(StmtKind::EventInit(id), item.span));
            let init = HExpr {
                kind: HExprKind::Int(i128::from(init_bits)),
                ty: Ty::Scalar(ElemTy::U64),
                span: item.span,
            };
            out.push(stmt(StmtKind::Let { var: phases, init: Some(init) }, item.span));
        }
    }

    /// The per-slot words of an event declared by `item` (`<name>_<suffix>`: a buffer of one
    /// `elem` per slot in `storage`) and its phase bits (`<name>_phases`: bit i is the parity
    /// slot i's next plain wait expects; only shared events declare and use them).
    pub(crate) fn event_storage(
        &mut self,
        item: &ast::EventItem,
        dims: &[u32],
        suffix: &str,
        (elem, storage, place): (ElemTy, Storage, LocalPlace),
    ) -> EventStorage {
        let slots: u64 = dims.iter().map(|&d| u64::from(d)).product();
        let name = &item.name.name;
        let slot_words = self.new_local(
            &format!("{name}_{suffix}"),
            item.name.span,
            Ty::Spanned(SpannedTy { elem, dims: vec![Dim::Const(slots)], storage }),
            place,
            false,
            LocalOrigin::Decl,
        );
        let phases = self.new_local(
            &format!("{name}_phases"),
            item.name.span,
            Ty::Scalar(ElemTy::U64),
            LocalPlace::DeviceScalar,
            true,
            LocalOrigin::Decl,
        );
        EventStorage { slots, slot_words, phases }
    }

    /// The kernel being checked.
    pub(crate) fn current_kernel(&self) -> Option<KernelId> {
        match self.region {
            Region::Device(_) if self.kernel_count > 0 => Some(KernelId(self.kernel_count - 1)),
            _ => None,
        }
    }

    /// Events are declared where every thread of the block passes exactly once: not inside an
    /// `inthreads` (spec-tier3 §2.1) and not inside a loop (the initialisation synchronises the
    /// block and must not restart a barrier others still wait on).
    pub(crate) fn event_decl_placement_ok(&mut self, span: Span) -> bool {
        if self.inthreads_depth > 0 {
            self.error_label(
                "E0470",
                span,
                "the event should not be declared inside a inthreads block.",
                "inside inthreads",
            );
            return false;
        }
        if self.loop_depth > 0 {
            self.error_label(
                "E0470",
                span,
                "an event cannot be declared inside a loop",
                "inside a loop",
            );
            return false;
        }
        true
    }

    /// The array extents of one declarator: positive constants, at most [`MAX_EVENT_SLOTS`]
    /// slots in all.
    pub(crate) fn event_dims(&mut self, item: &ast::EventItem) -> Option<Vec<u32>> {
        let mut dims = Vec::with_capacity(item.dims.len());
        for d in &item.dims {
            let e = self.check_int(d, "an event array dimension");
            match const_int(&e) {
                Some(v) if v > 0 && v as u64 <= MAX_EVENT_SLOTS => dims.push(v as u32),
                _ if matches!(e.ty, Ty::Error) => return None,
                _ => {
                    self.error_label(
                        "E0470",
                        d.span,
                        format!(
                            "an event array dimension must be a constant in [1, {MAX_EVENT_SLOTS}]"
                        ),
                        "not a constant in range",
                    );
                    return None;
                }
            }
        }
        let slots: u64 = dims.iter().map(|&d| u64::from(d)).product();
        if slots > MAX_EVENT_SLOTS {
            self.error_label(
                "E0470",
                item.span,
                format!(
                    "an event array may have at most {MAX_EVENT_SLOTS} slots; '{}' has {slots}",
                    item.name.name
                ),
                "too many slots",
            );
            return None;
        }
        Some(dims)
    }

    /// `trigger e, …;` (spec-tier3 §2.2).
    pub(crate) fn check_trigger(&mut self, t: &ast::Trigger, span: Span, out: &mut Vec<Stmt>) {
        if t.targets.iter().any(|x| self.names_global_event(x)) {
            return self.global_event_stmt(
                &t.targets,
                t.cluster.or(t.after.first().map(|a| a.span)),
                false,
                span,
                out,
            );
        }
        // Every form below is device code only.
        if !self.in_device() {
            self.error_label(
                "E0471",
                span,
                "`trigger` is only allowed inside a parallel-by",
                "host code",
            );
            return;
        }
        if let (Some(c), true) = (t.cluster, t.after.is_empty()) {
            return self.check_cluster_trigger(t, c, span, out);
        }
        if let Some(c) = t.cluster {
            return self.check_cluster_trigger_after(t, c, span, out);
        }
        if !t.after.is_empty() {
            if !self.bound_loads_match(t, false, out) {
                return;
            }
            return self.check_trigger_after(t, span, out);
        }
        let mut slots = Vec::with_capacity(t.targets.len());
        let mut failed = false;
        for target in &t.targets {
            match self.event_slot(target, "trigger") {
                Some(slot) => slots.push(slot),
                None => failed = true,
            }
        }
        if failed || !self.plain_trigger_ok(&slots) {
            self.order_updates.clear();
            self.mark_event_errors(&t.targets);
            return;
        }
        self.record_trigger(&slots, span);
        out.push(stmt(StmtKind::Trigger(slots.clone()), span));
        self.flush_order_updates(&slots, out);
    }

    /// The bookkeeping of a `trigger` (plain or `.cluster`) of `slots` at `span`: the warning
    /// outside `inthreads` and the trigger sites (§2.7).
    pub(crate) fn record_trigger(&mut self, slots: &[EventSlot], span: Span) {
        // A local event's flag is the triggering thread's own: no arrival count, no warning.
        let slots: Vec<EventSlot> = slots
            .iter()
            .filter(|s| !self.events.get(s.event.index()).is_some_and(|e| e.local))
            .cloned()
            .collect();
        if slots.is_empty() {
            return;
        }
        if self.inthreads_depth == 0 {
            self.warn(
                "W0470",
                span,
                "Be careful to trigger event outside inthreads block: every thread arrives",
                "every thread of the block triggers here",
            );
        }
        let conditions: Vec<HExpr> =
            self.inthreads_conditions.iter().map(|c| self.through_device_inits(c)).collect();
        for slot in &slots {
            let index = match &slot.index {
                SlotIndex::Fixed(e) => Some(self.through_device_inits(e)),
                SlotIndex::Order(_) => None,
            };
            if let Some(e) = self.events.get_mut(slot.event.index()) {
                e.triggers.push(TriggerSite {
                    span,
                    slot: index,
                    conditions: conditions.clone(),
                    fill: false,
                });
            }
        }
    }

    /// Whether a `wait` operand names an event (rather than a future).
    pub(crate) fn names_event(&self, e: &ast::Expr) -> bool {
        self.event_named(e).is_some()
    }

    /// After an error in a `trigger`: no "never waited"/"never triggered" follows for the
    /// events it names.
    pub(crate) fn mark_event_errors(&mut self, targets: &[ast::Expr]) {
        for target in targets {
            if let Some(id) = self.event_named(target) {
                self.events_with_errors.insert(id);
            }
        }
    }

    /// The event an operand names (`e`, `e[i]…`, `e.at(k)`), if it names one.
    pub(crate) fn event_named(&self, e: &ast::Expr) -> Option<EventId> {
        match &e.kind {
            ExprKind::Ident(id) => match self.scopes.lookup(&id.name) {
                Some(Symbol::Event(ev)) => Some(*ev),
                _ => None,
            },
            ExprKind::Index { base, .. } | ExprKind::At { base, .. } => self.event_named(base),
            _ => None,
        }
    }

    /// `wait` on events: each operand one slot (spec-tier3 §2.2).
    pub(crate) fn check_event_wait(
        &mut self,
        targets: &[ast::Expr],
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        if targets.iter().any(|x| self.names_global_event(x)) {
            return self.global_event_stmt(targets, None, true, span, out);
        }
        if !self.in_device() {
            self.error_label(
                "E0471",
                span,
                "`wait` on an event is only allowed inside a parallel-by",
                "host code",
            );
            return;
        }
        // The events named count as waited even when an operand is wrong (no "never waited"
        // after the error).
        for target in targets {
            if let Some(id) = self.event_named(target) {
                self.waited_events.insert(id);
            }
        }
        let mut slots = Vec::with_capacity(targets.len());
        for target in targets {
            match self.event_slot(target, "wait") {
                Some(slot) => slots.push(slot),
                None => {
                    self.order_updates.clear();
                    return;
                }
            }
        }
        out.push(stmt(StmtKind::EventWait(slots.clone()), span));
        self.flush_order_updates(&slots, out);
    }

    /// The slot a `trigger`/`wait` operand names: `e`, `e[i]…`, `e.at(k)`.
    pub(crate) fn event_slot(&mut self, target: &ast::Expr, what: &str) -> Option<EventSlot> {
        let span = target.span;
        let mut indices: Vec<&ast::Expr> = Vec::new();
        let mut base = target;
        let mut order: Option<&ast::Expr> = None;
        if let ExprKind::At { base: b, indices: ix } = &base.kind {
            if ix.len() != 1 {
                self.error_label(
                    "E0471",
                    span,
                    "'.at(order)' takes exactly one order",
                    format!("{} given", ix.len()),
                );
                return None;
            }
            order = ix.first();
            base = b;
        }
        while let ExprKind::Index { base: b, index } = &base.kind {
            indices.push(index);
            base = b;
        }
        indices.reverse();
        let id = match &base.kind {
            ExprKind::Ident(name) => match self.scopes.lookup(&name.name).cloned() {
                Some(Symbol::Event(id)) => id,
                Some(_) => {
                    self.error_label(
                        "E0471",
                        base.span,
                        format!("{what} a non-event type: '{}' is not an event", name.name),
                        "not an event",
                    );
                    return None;
                }
                None => {
                    self.undeclared(name);
                    return None;
                }
            },
            _ => {
                self.error_label(
                    "E0471",
                    base.span,
                    format!("{what} a non-event type"),
                    "not an event",
                );
                return None;
            }
        };
        let event = self.events.get(id.index())?.clone();
        if let (Some(_), true) = (order, event.local || event.global) {
            self.error_label(
                "E0466",
                span,
                "'.at(order)' applies to shared event rings; a local or global event's slots are \
                 flags",
                "a local or global event",
            );
            return None;
        }
        if let Some(order) = order {
            if !indices.is_empty() || event.dims.is_empty() {
                let message = if event.dims.is_empty() {
                    "'.at(order)' requires an event array."
                } else {
                    "'.at(order)' applies to the whole event array, not to a slot"
                };
                self.error_label("E0471", span, message, "not a one-dimensional event array");
                return None;
            }
            if event.dims.len() != 1 {
                self.error_label(
                    "E0471",
                    span,
                    "'.at(order)' requires a one-dimensional event array.",
                    format!("'{}' has {} dimensions", event.name, event.dims.len()),
                );
                return None;
            }
            let (k, _) = self.event_order(order)?;
            if matches!(k.ty, Ty::Error) {
                return None;
            }
            if !k.ty.is_integer() {
                self.error_label(
                    "E0471",
                    order.span,
                    "event order must be an integer expression.",
                    "not an integer",
                );
                return None;
            }
            if const_int(&k).is_some_and(|v| v < 0) {
                self.error_label(
                    "E0471",
                    order.span,
                    "an event order cannot be negative",
                    "negative",
                );
                return None;
            }
            return Some(EventSlot { event: id, index: SlotIndex::Order(k), span });
        }
        if indices.len() != event.dims.len() {
            let message = if event.dims.is_empty() {
                format!("'{}' is a single event: it has no slots to index", event.name)
            } else {
                format!(
                    "'{}' is an event array of {} dimension(s): name one slot (`{}[i]`) or use \
                     `.at(order)`",
                    event.name,
                    event.dims.len(),
                    event.name
                )
            };
            self.error_label("E0471", span, message, format!("{} index(es) given", indices.len()));
            return None;
        }
        // The linear slot, row-major; constant indices are checked here, others at run time.
        let mut linear: Option<HExpr> = None;
        for (ix, &extent) in indices.iter().zip(&event.dims) {
            let was = std::mem::replace(&mut self.in_event_order, true);
            let e = self.check_int(ix, "an event index");
            self.in_event_order = was;
            if matches!(e.ty, Ty::Error) {
                return None;
            }
            if let Some(v) = const_int(&e) {
                if v < 0 || v >= i128::from(extent) {
                    self.error_label(
                        "E0471",
                        ix.span,
                        format!("event index {v} is out of range [0, {extent})"),
                        "out of range",
                    );
                    return None;
                }
            }
            linear = Some(match linear {
                None => e,
                Some(prev) => match (const_int(&prev), const_int(&e)) {
                    (Some(a), Some(b)) => int(a * i128::from(extent) + b, span),
                    _ => {
                        let scaled =
                            binary(crate::hir::BinOp::Mul, prev, int(i128::from(extent), span));
                        binary(crate::hir::BinOp::Add, scaled, e)
                    }
                },
            });
        }
        let linear = linear.unwrap_or_else(|| int(0, span));
        Some(EventSlot { event: id, index: SlotIndex::Fixed(linear), span })
    }

    /// `e` with immutable device scalars replaced by their initial values (what a trigger's
    /// conditions are evaluated through).
    pub(crate) fn through_device_inits(&self, e: &HExpr) -> HExpr {
        let mut out = e.clone();
        // Bounded: an initial value only refers to locals declared before it.
        for _ in 0..64 {
            let mut changed = false;
            for_each_expr_mut(&mut out, &mut |x| {
                if let HExprKind::Var(v) = &x.kind {
                    let immutable = self.locals.get(v.index()).is_some_and(|l| !l.mutable);
                    if let (true, Some(init)) = (immutable, self.device_inits.get(v)) {
                        *x = init.clone();
                        changed = true;
                    }
                }
            });
            if !changed {
                break;
            }
        }
        out
    }

    /// After the function: every triggered event is waited somewhere (spec-tier3 §2.7), and a
    /// waited event that nothing triggers can only pass its `ready` generation.
    pub(crate) fn check_events_used(&mut self) {
        for (i, e) in self.events.iter().enumerate() {
            let id = EventId(i as u32);
            // A local event's flag is consumed by `while` as well as by `wait`.
            if self.events_with_errors.contains(&id) || e.local || e.global {
                continue;
            }
            let waited = self.waited_events.contains(&id);
            if !e.triggers.is_empty() && !waited {
                self.diags.push(
                    Diagnostic::error(
                        "E0472",
                        e.span,
                        format!("some asyncs are not explicitly waited: {}.", e.name),
                    )
                    .with_label("triggered, never waited")
                    .with_help("wait for the event where its data is used, or remove the trigger"),
                );
            } else if e.triggers.is_empty() && waited {
                self.diags.push(
                    Diagnostic::warning(
                        "W0471",
                        e.span,
                        format!("event '{}' is waited but never triggered", e.name),
                    )
                    .with_label("no trigger")
                    .with_note(if e.ready {
                        "only the first wait of each slot passes (`ready`); a second one never returns"
                    } else {
                        "a wait of an event nothing triggers never returns"
                    }),
                );
            }
        }
    }
}

fn int(v: i128, span: Span) -> HExpr {
    HExpr { kind: HExprKind::Int(v), ty: Ty::Scalar(ElemTy::S32), span }
}

fn binary(op: crate::hir::BinOp, lhs: HExpr, rhs: HExpr) -> HExpr {
    let span = lhs.span;
    HExpr {
        kind: HExprKind::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) },
        ty: Ty::Scalar(ElemTy::S32),
        span,
    }
}

/// What [`Checker::event_storage`] declared for an event.
pub(crate) struct EventStorage {
    /// The number of slots (the product of the dimensions).
    pub(crate) slots: u64,
    /// One word per slot: the mbarriers of a shared event, the flags of a local or global one.
    pub(crate) slot_words: crate::hir::VarId,
    /// The phase bits (declared and used by shared events only).
    pub(crate) phases: crate::hir::VarId,
}
