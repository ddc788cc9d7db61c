//! Local events (spec-tier3 §2.4): a per-thread `bool` flag per slot (a local buffer declared
//! with the event); `trigger` sets the executing thread's flag, `wait` spins until it is set
//! and clears it (`__choreo_flag_*` in the support library). `while (e)` reads the flag as an
//! element of that buffer.

use super::FnEmitter;
use crate::hir::EventSlot;

impl FnEmitter<'_, '_> {
    /// `call(&flags[slot]);  // what e` for a local event's slot.
    pub(super) fn flag_op(&mut self, slot: &EventSlot, call: &str, what: &str) {
        let span = slot.span;
        let Some(e) = self.f.events.get(slot.event.index()).cloned() else {
            return self.bug(span, "an unknown event");
        };
        let flags = self.names().local(e.barriers).to_string();
        let index = self.event_slot_index(slot, e.slots());
        self.w.line(span, &format!("{call}(&{flags}[{index}]);  // {what} {}", e.name));
    }
}
