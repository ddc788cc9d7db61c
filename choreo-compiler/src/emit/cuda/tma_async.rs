//! Asynchronous TMA stores and multicast TMA loads (spec-tier3 §3.3, §3.6, §10.2).
//!
//! A `tma.copy.async` store is fenced and issued like a synchronous one, then committed as a
//! bulk group without waiting; its `wait` is the issuer's `cp.async.bulk.wait_group 0` and the
//! scope's barrier. In a warpgroup role (spec-tier3 §7.1) the issuer is the role's first
//! thread and the barriers are the role's named barrier, for the store and for its wait. A multicast load waits for the whole cluster first (every block is done
//! with the destination and has its mbarrier initialised: the ⚠ of §3.6), each block arms its
//! own mbarrier with the tile's bytes, and cluster rank 0 issues with the mask of every block
//! of the cluster. A multicast load bound to an event by `trigger.cluster e after f`
//! (spec-tier3 §2.5, §2.6) arms the event's slot in every block instead, and rank 0's copy
//! completes the bytes on that slot in every block; no cluster barrier (the event protocol of
//! the pipeline orders the re-use of the slot, and the event's slots were initialised in
//! every block before the body).

use super::{Dialect, FnEmitter};
use crate::hir::{self, Participants};
use crate::source::Span;

impl FnEmitter<'_, '_> {
    /// `f = tma.copy.async SRC => DST;`: fenced, synchronised, issued and committed (by
    /// `issuer`, after `scope_sync`: [`FnEmitter::tma_scope`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn tma_store_async(
        &mut self,
        span: Span,
        map: &str,
        shared: &str,
        dims: usize,
        coords: &str,
        issuer: &str,
        scope_sync: Option<&str>,
    ) {
        self.w.line(span, "{  // TMA store (shared -> global), asynchronous");
        self.w.indent += 1;
        self.w.line(span, "::choreo::tma::fence_proxy_async();");
        if let Some(sync) = scope_sync {
            self.w.line(span, sync);
        }
        self.w.line(span, &format!("if ({issuer}) {{"));
        self.w.line(span, &format!("  ::choreo::tma::store_{dims}d({map}, &{shared}, {coords});"));
        self.w.line(span, "  ::choreo::tma::store_commit();");
        self.w.line(span, "}");
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    /// `wait f` of asynchronous TMA stores: the issuer's bulk copies have completed, then the
    /// scope synchronises (spec-tier3 §3.3 ⚠): the block's first thread and `p`, or the
    /// role's first thread and its named barrier.
    pub(super) fn tma_store_wait(
        &mut self,
        span: Span,
        p: Participants,
        role: Option<&[hir::HExpr]>,
        kernel: hir::KernelId,
    ) {
        if role.is_none() {
            self.w.line(
                span,
                "if (threadIdx.x == 0) ::choreo::tma::store_wait_all();  // TMA stores",
            );
            return self.participants_sync(span, p, kernel);
        }
        let Some((issuer, sync)) = self.tma_scope(span, role, kernel) else { return };
        self.w.line(
            span,
            &format!("if ({issuer}) ::choreo::tma::store_wait_all();  // the role's TMA stores"),
        );
        if let Some(sync) = sync {
            self.w.line(span, &sync);
        }
    }

    /// A multicast TMA load (sync or async).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn tma_multicast(
        &mut self,
        span: Span,
        dma: &hir::Dma,
        t: &hir::Tma,
        map: &str,
        shared: &str,
        dims: usize,
        coords: &str,
    ) {
        let size = t.shared.elem.size_bytes();
        let bytes: u64 = t.box_dims.iter().product::<u64>() * size;
        let barrier = match dma.group.filter(|_| dma.is_async) {
            Some(g) => self.names().local(g).to_string(),
            None => t.barrier.to_string(),
        };
        self.w.line(
            span,
            &format!(
                "{{  // TMA load (global -> shared), multicast to every block of the cluster{}",
                if dma.is_async { ", asynchronous" } else { "" }
            ),
        );
        self.w.indent += 1;
        // Every block of the cluster is done with the destination (and its mbarrier is
        // initialised) before rank 0 writes into it; the fence orders this thread's generic
        // reads of it before the copy engine's (async proxy) writes.
        self.w.line(span, "::choreo::tma::fence_proxy_async();");
        let barrier_text = self.cluster_barrier();
        self.w.line(span, &barrier_text);
        self.w.line(span, "if (threadIdx.x == 0) {");
        self.w.line(
            span,
            &format!("  __choreo_mbar_arrive_expect_tx(&__choreo_tma_bar[{barrier}], {bytes}u);"),
        );
        self.w.line(span, "  if (__choreo_cta_rank == 0)");
        self.w.line(
            span,
            &format!(
                "    ::choreo::tma::load_multicast_{dims}d(&{shared}, {map}, &__choreo_tma_bar[{barrier}], ::choreo::tma::cluster_mask(), {coords});"
            ),
        );
        if self.options.dialect == Dialect::Cpu {
            self.w.line(span, "  // (the CPU's multicast completes every block's mbarrier)");
        }
        self.w.line(span, "}");
        if !dma.is_async {
            self.tma_wait_barrier(span, &barrier);
        }
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    /// A multicast TMA load bound to an event slot (`trigger.cluster e after f`): the issuer
    /// of every block arms its own slot with the tile's bytes; rank 0's issuer also issues the
    /// multicast (`call`, which names `__choreo_bar`), completing the slot in every block.
    pub(super) fn tma_bound_multicast(
        &mut self,
        span: Span,
        slot: &hir::EventSlot,
        issuer: &str,
        bytes: u64,
        call: &str,
    ) {
        let name = self.f.events.get(slot.event.index()).map(|e| e.name.clone());
        let Some(bar) = self.event_slot_bar(slot) else {
            return self.bug(span, "an unknown event");
        };
        self.w.line(
            span,
            &format!(
                "if ({issuer}) {{  // TMA load (global -> shared), multicast, bound to event {} in every block",
                name.unwrap_or_default()
            ),
        );
        self.w.indent += 1;
        self.w.line(span, &format!("unsigned long long* const __choreo_bar = {bar};"));
        self.w.line(span, &format!("__choreo_mbar_expect_tx(__choreo_bar, {bytes}u);"));
        self.w.line(span, "if (__choreo_cta_rank == 0) {");
        self.w.line(span, &format!("  {call}"));
        if self.options.dialect == Dialect::Cpu {
            self.w.line(span, "  // (the CPU's multicast completes every block's slot)");
        }
        self.w.line(span, "}");
        self.w.indent -= 1;
        self.w.line(span, "}");
    }
}
