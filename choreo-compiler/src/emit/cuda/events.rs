//! Shared events (spec-tier3 §2) as mbarriers (§10.1): one per slot, in the kernel's shared
//! pool; `trigger` arrives, `wait` waits for the parity of the generation the thread expects.
//! The primitives (`__choreo_mbar_*`) are in the support library, for both dialects.

use super::FnEmitter;
use crate::hir::{Event, EventId, EventSlot, SlotIndex};
use crate::source::Span;

impl FnEmitter<'_, '_> {
    /// The mbarriers of an event as `unsigned long long*`.
    fn event_bars(&self, id: EventId) -> Option<String> {
        let e = self.f.events.get(id.index())?;
        let bars = self.names().local(e.barriers);
        Some(format!("reinterpret_cast<unsigned long long*>({bars})"))
    }

    /// Thread 0 initialises every slot with the event's arrival count; the block then
    /// synchronises so that no thread arrives or waits on an uninitialised barrier.
    pub(super) fn event_init(&mut self, span: Span, id: EventId) {
        let (Some(e), Some(bars)) = (self.f.events.get(id.index()), self.event_bars(id)) else {
            return self.bug(span, "an unknown event");
        };
        let slots = e.slots();
        let counts = self
            .plan
            .event_arrivals
            .get(id.index())
            .cloned()
            .unwrap_or_else(|| vec![1; slots as usize]);
        let name = e.name.clone();
        let e_cluster = e.cluster.is_some();
        let uniform = counts.windows(2).all(|w| w[0] == w[1]);
        let first = counts.first().copied().unwrap_or(1);
        let what = if uniform {
            format!("{first} arrival(s) per generation")
        } else {
            "arrivals per generation by slot".to_string()
        };
        self.w.line(
            span,
            &format!(
                "if (threadIdx.x == 0) {{  // shared event {name}: {slots} mbarrier(s), {what}"
            ),
        );
        self.w.indent += 1;
        if slots == 1 {
            self.w.line(span, &format!("__choreo_mbar_init({bars}, {first}u);"));
        } else if uniform {
            self.w.line(
                span,
                &format!(
                    "for (int __choreo_s = 0; __choreo_s < {slots}; ++__choreo_s) __choreo_mbar_init({bars} + __choreo_s, {first}u);"
                ),
            );
        } else {
            for (s, c) in counts.iter().enumerate() {
                self.w.line(span, &format!("__choreo_mbar_init({bars} + {s}, {c}u);"));
            }
        }
        self.w.line(span, "__choreo_mbar_init_fence();");
        self.w.indent -= 1;
        self.w.line(span, "}");
        self.w.line(span, "__syncthreads();");
        if e_cluster {
            // Other blocks arrive on these barriers: all are initialised before any arrives.
            self.w.line(span, &format!("// {name} is triggered by every block of the cluster"));
            let barrier = self.cluster_barrier();
            self.w.line(span, &barrier);
        }
    }

    /// The slot index of an operand, checked against the slot count when it is not a
    /// constant (a wrong index traps instead of touching another barrier).
    /// An index the bounds analysis proved valid (`FunctionPlan::proven_slots`) is used as
    /// it is; a proven ring order is converted to an unsigned type ([`Self::ring_order`]).
    pub(super) fn event_slot_index(&mut self, slot: &EventSlot, slots: u32) -> String {
        let e = self.expr(slot.index.expr());
        let proven = self.plan.proven_slots.contains(&slot.span);
        match (&slot.index, slot.index.expr().kind.clone()) {
            (SlotIndex::Fixed(_), crate::hir::HExprKind::Int(_)) => e,
            (SlotIndex::Fixed(_), _) if proven => format!("static_cast<int>({e})"),
            (SlotIndex::Fixed(_), _) => {
                format!("__choreo_event_slot(static_cast<long long>({e}), {slots})")
            }
            (SlotIndex::Order(_), _) => {
                let (ty, _, _) = self.ring_order(slot);
                format!("static_cast<{ty}>({e})")
            }
        }
    }

    /// How a ring order `e.at(k)` selects its slot: `(the C++ type of k, the slot function,
    /// the parity function)`. An order the bounds analysis proved non-negative uses the
    /// unchecked unsigned functions (for a power-of-two ring a mask and a shift; the order's
    /// own width when it is a 32-bit value), any other the checked ones (a negative order
    /// traps).
    pub(super) fn ring_order(
        &self,
        slot: &EventSlot,
    ) -> (&'static str, &'static str, &'static str) {
        if !self.plan.proven_slots.contains(&slot.span) {
            return ("long long", "__choreo_event_ring_slot", "__choreo_event_ring_parity");
        }
        let narrow = matches!(
            slot.index.expr().ty,
            crate::hir::Ty::BoundedInt | crate::hir::Ty::Scalar(crate::hir::ElemTy::S32)
        );
        let ty = if narrow { "unsigned" } else { "unsigned long long" };
        (ty, "__choreo_event_ring_slot_nn", "__choreo_event_ring_parity_nn")
    }

    /// The event of an operand, its mbarriers and the slot index text.
    fn event_operand(&mut self, slot: &EventSlot) -> Option<(Event, String, String)> {
        let (Some(e), Some(bars)) =
            (self.f.events.get(slot.event.index()).cloned(), self.event_bars(slot.event))
        else {
            self.bug(slot.span, "an unknown event");
            return None;
        };
        let index = self.event_slot_index(slot, e.slots());
        Some((e, bars, index))
    }

    pub(super) fn event_trigger(&mut self, slot: &EventSlot) {
        let span = slot.span;
        if self.f.events.get(slot.event.index()).is_some_and(|e| e.local) {
            return self.flag_op(slot, "__choreo_flag_set", "trigger");
        }
        let Some((e, bars, index)) = self.event_operand(slot) else { return };
        let slots = e.slots();
        // `trigger.cluster`: on the slot of every block of the cluster (spec-tier3 §2.6).
        let (arrive, what) = match e.cluster {
            Some(_) => ("__choreo_mbar_arrive_cluster", "trigger.cluster"),
            None => ("__choreo_mbar_arrive", "trigger"),
        };
        if self.fence_triggers {
            // Without the fence the next tile of a ring can land before this thread's reads
            // of the slot are done (see `KernelPlan::fence_triggers`).
            self.w.line(span, "::choreo::tma::fence_proxy_async();");
        }
        let text = match slot.index {
            SlotIndex::Fixed(_) if slots == 1 => format!("{arrive}({bars});"),
            SlotIndex::Fixed(_) => format!("{arrive}({bars} + {index});"),
            SlotIndex::Order(_) => {
                let (_, ring_slot, _) = self.ring_order(slot);
                format!("{arrive}({bars} + {ring_slot}({index}, {slots}));")
            }
        };
        self.w.line(span, &format!("{text}  // {what} {}", e.name));
    }

    pub(super) fn event_wait(&mut self, slot: &EventSlot) {
        let span = slot.span;
        if self.f.events.get(slot.event.index()).is_some_and(|e| e.local) {
            return self.flag_op(slot, "__choreo_flag_wait", "wait");
        }
        let Some((e, bars, index)) = self.event_operand(slot) else { return };
        let slots = e.slots();
        let phases = self.names().local(e.phases).to_string();
        // A cluster event's waits acquire at cluster scope (spec-tier3 §2.6 ⚠).
        let wait =
            if e.cluster.is_some() { "__choreo_mbar_wait_cluster" } else { "__choreo_mbar_wait" };
        match slot.index {
            SlotIndex::Fixed(_) => {
                // This thread's parity for the slot, toggled by every wait.
                let (at, bit) = if slots == 1 {
                    (bars.clone(), "1ull".to_string())
                } else {
                    (format!("{bars} + {index}"), format!("(1ull << {index})"))
                };
                self.w.line(
                    span,
                    &format!(
                        "{{ const unsigned long long __choreo_bit = {bit}; {wait}({at}, ({phases} & __choreo_bit) != 0); {phases} ^= __choreo_bit; }}  // wait {}",
                        e.name
                    ),
                );
            }
            SlotIndex::Order(_) => {
                // Slot k mod N, generation k / N: its parity, inverted for `ready` (whose
                // generation 0 counts as complete).
                let ready = u32::from(e.ready);
                let (ty, ring_slot, parity) = self.ring_order(slot);
                self.w.line(
                    span,
                    &format!(
                        "{{ const {ty} __choreo_k = {index}; {wait}({bars} + {ring_slot}(__choreo_k, {slots}), {parity}(__choreo_k, {slots}) ^ {ready}u); }}  // wait {}.at(…)",
                        e.name
                    ),
                );
            }
        }
    }
}
