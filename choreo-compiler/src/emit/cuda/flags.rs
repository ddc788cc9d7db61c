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

impl FnEmitter<'_, '_> {
    /// A global event's `trigger`/`wait` (spec-tier3 §2.4): device code sets or waits for and
    /// clears the flag byte (elected: thread 0 of the block, between block barriers); host code
    /// sets it with `cudaMemset`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn global_flag(
        &mut self,
        span: crate::source::Span,
        wait: bool,
        flags: crate::hir::BufferRef,
        slot: &crate::hir::HExpr,
        slots: u32,
        elected: bool,
        host: bool,
    ) {
        let base = self.buffer_name(flags);
        let index = self.expr(slot);
        if host {
            if wait {
                return self.bug(span, "a host wait of a global event");
            }
            self.w.line(
                span,
                &format!(
                    "__CHOREO_CHECK(static_cast<long long>({index}) >= 0 && static_cast<long long>({index}) < {slots}, \"global event slot out of range\");"
                ),
            );
            self.w.line(
                span,
                &format!(
                    "{{ unsigned char* const __choreo_flag = reinterpret_cast<unsigned char*>({base}) + static_cast<long long>({index}); __CHOREO_TRY(__frame.device_data() ? cudaMemset(__choreo_flag, 1, 1) : (*__choreo_flag = 1, cudaSuccess)); }}  // trigger of a global event"
                ),
            );
            return;
        }
        let call = if wait { "__choreo_gflag_wait" } else { "__choreo_gflag_set" };
        let text = format!(
            "{call}(reinterpret_cast<unsigned char*>({base}) + __choreo_event_slot(static_cast<long long>({index}), {slots}));  // {} of a global event",
            if wait { "wait" } else { "trigger" }
        );
        if !elected {
            return self.w.line(span, &text);
        }
        // The block's writes happen before the trigger; its reads after the wait.
        if !wait {
            self.w.line(span, "__syncthreads();");
        }
        self.w.line(span, &format!("if (threadIdx.x == 0) {text}"));
        if wait {
            self.w.line(span, "__syncthreads();");
        }
    }
}
