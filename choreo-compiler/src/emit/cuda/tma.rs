//! TMA statements and swizzled copies (tier 3 §3, §4, §10): the kernel's tensor-map
//! parameters and mbarriers, the issue and completion of each TMA statement, the host-side
//! encoding of the maps before the launch, and the swizzled element addresses of
//! `dma.copy.swiz<N>`.
//!
//! The same text serves both dialects: `choreo.h` implements `::choreo::tma` with PTX on CUDA
//! and with a copy routine of the CPU runtime on the CPU (which completes the mbarrier like
//! the copy engine).

use super::types::cpp_elem;
use super::writer::c_escape;
use super::{Dialect, FnEmitter};
use crate::hir::{self, Dim, ElemIndex, Stmt, StmtKind};
use crate::source::Span;

/// The L2 cache policies of `.evict_first` / `.evict_last` (tier 3 §3.5).
const EVICT_FIRST: &str = "0x12F0000000000000ull";
const EVICT_LAST: &str = "0x14F0000000000000ull";

/// The TMA statements of a kernel body, in their number's order.
pub(super) fn tma_statements(body: &[Stmt]) -> Vec<(&hir::Dma, &hir::Tma, Span)> {
    fn walk<'a>(stmts: &'a [Stmt], out: &mut Vec<(&'a hir::Dma, &'a hir::Tma, Span)>) {
        for s in stmts {
            match &s.kind {
                StmtKind::Dma(d) => {
                    if let Some(t) = &d.tma {
                        out.push((d, t, s.span));
                    }
                }
                StmtKind::Block(b) => walk(b, out),
                StmtKind::InnerParallel(p) => walk(&p.body, out),
                StmtKind::If { then_body, else_body, .. } => {
                    walk(then_body, out);
                    walk(else_body, out);
                }
                StmtKind::For { body, .. } | StmtKind::While { body, .. } => walk(body, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(body, &mut out);
    out.sort_by_key(|(_, t, _)| t.index);
    out
}

/// The swizzle split of a box (tier 3 §3.4): the width in elements of a column group when
/// the box's rows are longer than the swizzle period.
fn split_width(t: &hir::Tma, swizzle: u32, size: u64) -> Option<u64> {
    let inner = *t.box_dims.last()?;
    (swizzle != 0 && inner * size > u64::from(swizzle)).then(|| u64::from(swizzle) / size)
}

impl FnEmitter<'_, '_> {
    /// The trailing kernel parameters of the kernel's tensor maps.
    pub(super) fn tma_params(&self, tree: &hir::ParallelTree) -> Vec<String> {
        (0..tree.attrs.tma_maps)
            .map(|i| format!("const __grid_constant__ CUtensorMap __choreo_tmap_{i}"))
            .collect()
    }

    /// The kernel's mbarriers (after the shared buffers of its pool) and the executing
    /// thread's phase bits, initialised before the body runs.
    pub(super) fn tma_prologue(&mut self, span: Span, tree: &hir::ParallelTree, offset: &Dim) {
        let n = tree.attrs.tma_barriers;
        if n == 0 {
            return;
        }
        let offset = self.dim_int(offset);
        self.w.line(
            span,
            &format!(
                "unsigned long long* const __choreo_tma_bar = reinterpret_cast<unsigned long long*>(__choreo_smem + {offset});"
            ),
        );
        self.w.line(span, "// The phase bit of each mbarrier this thread waits for next.");
        self.w.line(span, "[[maybe_unused]] unsigned __choreo_tma_phase = 0u;");
        self.w.line(span, "if (threadIdx.x == 0) {");
        self.w.line(
            span,
            &format!(
                "  for (int __choreo_b = 0; __choreo_b < {n}; ++__choreo_b) __choreo_mbar_init(&__choreo_tma_bar[__choreo_b], 1u);"
            ),
        );
        self.w.line(span, "  __choreo_mbar_init_fence();");
        self.w.line(span, "}");
        self.w.line(span, "__syncthreads();");
    }

    /// A TMA statement (tier 3 §3.3, §10.2): the issuer (thread 0 of the block) moves the
    /// box; a load completes the statement's (or its future's) mbarrier, which every thread
    /// waits for unless the load is asynchronous; a store is fenced, issued and read-waited.
    pub(super) fn tma_statement(
        &mut self,
        span: Span,
        dma: &hir::Dma,
        t: &hir::Tma,
        kernel: hir::KernelId,
    ) {
        self.bind_future(span, dma);
        let Some((issuer, scope_sync)) = self.tma_scope(span, t.role.as_deref(), kernel) else {
            return;
        };
        let size = t.shared.elem.size_bytes();
        let rank = t.shared.dims.len();
        let first = t.shared.element(vec![hir::arith::int_lit(0, span); rank], span);
        let shared = self.element(span, t.shared.buffer, &first);
        // Coordinates, innermost first (split into column groups when swizzled).
        let mut coords: Vec<String> = t.coords.iter().rev().map(|c| self.coord(c)).collect();
        if let (Some(w), Some(c)) = (split_width(t, dma.swizzle, size), coords.first().cloned()) {
            coords[0] = format!("({c}) % {w}");
            coords.push(format!("({c}) / {w}"));
        }
        let dims = coords.len();
        let map = format!("&__choreo_tmap_{}", t.index);
        let coord_list = coords.join(", ");
        if t.store && dma.is_async {
            return self.tma_store_async(
                span,
                &map,
                &shared,
                dims,
                &coord_list,
                &issuer,
                scope_sync.as_deref(),
            );
        }
        if t.multicast {
            if let Some(slot) = &t.event {
                let bytes: u64 = t.box_dims.iter().product::<u64>() * size;
                let call = format!(
                    "::choreo::tma::load_multicast_{dims}d(&{shared}, {map}, __choreo_bar, ::choreo::tma::cluster_mask(), {coord_list});"
                );
                return self.tma_bound_multicast(span, slot, &issuer, bytes, &call);
            }
            return self.tma_multicast(span, dma, t, &map, &shared, dims, &coord_list);
        }
        if t.store {
            self.w.line(span, "{  // TMA store (shared -> global)");
            self.w.indent += 1;
            self.w.line(span, "::choreo::tma::fence_proxy_async();");
            self.scope_sync_line(span, &scope_sync);
            self.w.line(span, &format!("if ({issuer}) {{"));
            self.w.line(
                span,
                &format!("  ::choreo::tma::store_{dims}d({map}, &{shared}, {coord_list});"),
            );
            self.w.line(span, "  ::choreo::tma::store_commit_and_wait_read();");
            self.w.line(span, "}");
            // The source may be rewritten only after the copy engine has read it.
            self.scope_sync_line(span, &scope_sync);
            self.w.indent -= 1;
            self.w.line(span, "}");
            return;
        }
        let bytes: u64 = t.box_dims.iter().product::<u64>() * size;
        if let Some(slot) = &t.event {
            let policy = match t.evict_first {
                Some(true) => EVICT_FIRST,
                Some(false) => EVICT_LAST,
                None => "0ull",
            };
            let call = format!(
                "::choreo::tma::load_{dims}d(&{shared}, {map}, __choreo_bar, {}, {policy}, {coord_list});",
                if t.evict_first.is_some() { "true" } else { "false" }
            );
            return self.tma_bound_load(span, slot, &issuer, bytes, &call);
        }
        let barrier = match dma.group.filter(|_| dma.is_async) {
            Some(g) => self.names().local(g).to_string(),
            None => t.barrier.to_string(),
        };
        let policy = match t.evict_first {
            Some(true) => EVICT_FIRST,
            Some(false) => EVICT_LAST,
            None => "0ull",
        };
        let hint = t.evict_first.is_some();
        self.w.line(
            span,
            &format!(
                "{{  // TMA load (global -> shared){}",
                if dma.is_async { ", asynchronous" } else { "" }
            ),
        );
        self.w.indent += 1;
        // Sequential semantics (tier 3 §3.3 ⚠): every thread is done with the destination
        // before the copy engine overwrites it. Its reads went through the generic proxy and
        // the copy engine writes through the async proxy: the fence orders the two (a barrier
        // alone does not).
        self.w.line(span, "::choreo::tma::fence_proxy_async();");
        self.scope_sync_line(span, &scope_sync);
        self.w.line(span, &format!("if ({issuer}) {{"));
        self.w.line(
            span,
            &format!("  __choreo_mbar_arrive_expect_tx(&__choreo_tma_bar[{barrier}], {bytes}u);"),
        );
        self.w.line(
            span,
            &format!(
                "  ::choreo::tma::load_{dims}d(&{shared}, {map}, &__choreo_tma_bar[{barrier}], {}, {policy}, {coord_list});",
                if hint { "true" } else { "false" }
            ),
        );
        if self.options.dialect == Dialect::Cpu {
            // The CPU runtime copied the box at once: complete the transaction bytes as the
            // copy engine would.
            self.w.line(
                span,
                &format!("  __choreo_mbar_complete_tx(&__choreo_tma_bar[{barrier}], {bytes}u);"),
            );
        }
        self.w.line(span, "}");
        if !dma.is_async {
            self.tma_wait_barrier(span, &barrier);
        }
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    /// Waits for the current phase of mbarrier `barrier` (an `int` expression) and flips the
    /// executing thread's phase bit of it.
    pub(super) fn tma_wait_barrier(&mut self, span: Span, barrier: &str) {
        self.w.line(
            span,
            &format!(
                "__choreo_mbar_wait(&__choreo_tma_bar[{barrier}], (__choreo_tma_phase >> {barrier}) & 1u);"
            ),
        );
        self.w.line(span, &format!("__choreo_tma_phase ^= 1u << {barrier};"));
    }

    /// A tile coordinate as an `int`.
    fn coord(&mut self, e: &hir::HExpr) -> String {
        let text = self.expr(e);
        format!("static_cast<int>({text})")
    }

    /// Before the launch of `tree`: encodes the tensor map of each of its TMA statements
    /// (tier 3 §3.4); a map the driver rejects, or whose checks fail, fails the call.
    /// Returns the launch arguments.
    pub(super) fn tma_encode(&mut self, tree: &hir::ParallelTree) -> Vec<String> {
        let mut args = Vec::new();
        for (dma, t, span) in tma_statements(&tree.body) {
            let name = format!("__choreo_tmap_{}", t.index);
            args.push(name.clone());
            let elem = t.shared.elem;
            let size = elem.size_bytes();
            let dims = self.dims_of_buffer(t.global);
            let base = self.buffer_name(t.global);
            // Innermost first.
            let mut extents: Vec<String> = dims.iter().rev().map(|d| self.dim_u64(d)).collect();
            let mut strides = Vec::new();
            let mut stride = format!("{size}ull");
            for d in dims.iter().rev().take(dims.len().saturating_sub(1)) {
                let d = self.dim_u64(d);
                stride = format!("{stride} * {d}");
                strides.push(stride.clone());
            }
            let mut boxes: Vec<String> = t.box_dims.iter().rev().map(|b| b.to_string()).collect();
            let mut checks = Vec::new();
            if let (Some(w), Some(inner)) = (split_width(t, dma.swizzle, size), extents.first()) {
                let inner = inner.clone();
                checks.push(format!("{inner} % {w}ull == 0"));
                extents[0] = format!("{w}ull");
                extents.push(format!("{inner} / {w}ull"));
                strides.push(format!("{}ull", w * size));
                let b0 = t.box_dims.last().copied().unwrap_or(w);
                boxes[0] = w.to_string();
                boxes.push((b0 / w).to_string());
            }
            let rank = extents.len();
            let location = self.db.location(span);
            self.w.line(span, &format!("alignas(64) CUtensorMap {name};"));
            self.w.line(span, "{");
            self.w.indent += 1;
            if !checks.is_empty() {
                let message = c_escape(
                    &format!(
                        "the swizzled TMA at {location} needs an inner extent of the tensor that \
                         is a multiple of {} elements",
                        split_width(t, dma.swizzle, size).unwrap_or(1)
                    ),
                    true,
                );
                self.w.line(
                    span,
                    &format!("__CHOREO_CHECK({}, \"{message}\");", checks.join(" && ")),
                );
            }
            self.w.line(
                span,
                &format!("const std::uint64_t __choreo_dims[] = {{{}}};", extents.join(", ")),
            );
            // One dummy stride keeps a rank-1 array non-empty.
            let stride_list =
                if strides.is_empty() { "0ull".to_string() } else { strides.join(", ") };
            self.w.line(
                span,
                &format!("const std::uint64_t __choreo_strides[] = {{{stride_list}}};"),
            );
            self.w.line(
                span,
                &format!("const std::uint32_t __choreo_box[] = {{{}}};", boxes.join(", ")),
            );
            let message = c_escape(&format!("the TMA at {location}"), true);
            self.w.line(
                span,
                &format!(
                    "const char* const __choreo_tma_error = ::choreo::tma::encode_tiled<{}>(&{name}, {rank}u, {base}, __choreo_dims, __choreo_strides, __choreo_box, {}u, {}u);",
                    cpp_elem(elem),
                    dma.swizzle,
                    t.promote
                ),
            );
            self.w.line(
                span,
                &format!(
                    "__CHOREO_CHECK(__choreo_tma_error == nullptr, \"{message}: %s\", __choreo_tma_error);"
                ),
            );
            self.w.indent -= 1;
            self.w.line(span, "}");
        }
        args
    }

    /// The pieces of the swizzled addresses of a whole shared buffer (tier 3 §4.2): its first
    /// element, rows and columns.
    pub(super) fn swizzle_parts(
        &mut self,
        span: Span,
        buffer: hir::BufferRef,
    ) -> (String, u64, u64) {
        let dims = self.dims_of_buffer(buffer);
        let zeros = vec![hir::arith::int_lit(0, span); dims.len()];
        let base = self.element(span, buffer, &ElemIndex::Coords(zeros));
        let cols = dims.last().and_then(Dim::as_const).unwrap_or(1).max(1);
        let total = dims.iter().map(Dim::as_const).try_fold(1u64, |a, d| d.map(|d| a * d));
        (base, total.unwrap_or(cols) / cols, cols)
    }
}

impl FnEmitter<'_, '_> {
    /// Who issues a TMA statement and how its scope synchronises (tier 3 §3.3, §7.1): thread
    /// 0 and the block barrier in block-level code; in a warpgroup role, the role's first
    /// thread and named barrier 15 over the role's threads (nothing for a one-thread role).
    /// `None` after lowering rejected the role.
    pub(super) fn tma_scope(
        &mut self,
        span: Span,
        role: Option<&[hir::HExpr]>,
        kernel: hir::KernelId,
    ) -> Option<(String, Option<String>)> {
        let Some(conditions) = role else {
            return Some(("threadIdx.x == 0".to_string(), Some("__syncthreads();".to_string())));
        };
        let r = self.role_plan(span, conditions, kernel)?;
        let sync = (r.threads > 1).then(|| {
            format!(
                "{}  // the issuing role's barrier ({} threads)",
                self.role_barrier_line(r.threads),
                r.threads
            )
        });
        Some((format!("threadIdx.x == {}", r.first), sync))
    }

    /// The plan of the role whose predicates are `conditions` (`None` after reporting a bug:
    /// lowering plans every role a statement names, or rejects it).
    fn role_plan(
        &mut self,
        span: Span,
        conditions: &[hir::HExpr],
        kernel: hir::KernelId,
    ) -> Option<crate::lower::roles::RolePlan> {
        let plan = self
            .plan
            .kernels
            .get(kernel.index())
            .and_then(|k| k.roles.iter().find(|r| r.conditions == conditions))
            .cloned();
        if plan.is_none() {
            self.bug(span, "a warpgroup role lowering did not plan");
        }
        plan
    }

    /// The role barrier (`bar.sync 15, threads`) of a role of `threads` threads.
    fn role_barrier_line(&self, threads: u64) -> String {
        self.named_barrier(
            true,
            &crate::lower::roles::ROLE_BARRIER.to_string(),
            &threads.to_string(),
        )
    }

    /// [`hir::StmtKind::RoleBarrier`]: the threads of a role (whole warps) wait for each
    /// other, e.g. after a plain `mma.store` to shared memory in the role, so that every
    /// thread of the role then reads the tile the others stored.
    pub(super) fn role_barrier(
        &mut self,
        span: Span,
        conditions: &[hir::HExpr],
        kernel: hir::KernelId,
    ) {
        let Some(r) = self.role_plan(span, conditions, kernel) else { return };
        let line = format!(
            "{}  // the role's barrier ({} threads)",
            self.role_barrier_line(r.threads),
            r.threads
        );
        self.w.line(span, &line);
    }

    fn scope_sync_line(&mut self, span: Span, sync: &Option<String>) {
        if let Some(line) = sync {
            self.w.line(span, line);
        }
    }

    /// The mbarrier of an event slot (an `unsigned long long*` expression), for a bound load
    /// or a trigger-after: the slot the operand names.
    pub(super) fn event_slot_bar(&mut self, slot: &hir::EventSlot) -> Option<String> {
        let e = self.f.events.get(slot.event.index())?.clone();
        let bars =
            format!("reinterpret_cast<unsigned long long*>({})", self.names().local(e.barriers));
        let slots = e.slots();
        let index = self.expr(slot.index.expr());
        Some(match (&slot.index, slots) {
            (hir::SlotIndex::Fixed(_), 1) => bars,
            (hir::SlotIndex::Fixed(_), _) if self.plan.proven_slots.contains(&slot.span) => {
                format!("{bars} + static_cast<int>({index})")
            }
            (hir::SlotIndex::Fixed(_), _) => {
                format!("{bars} + __choreo_event_slot(static_cast<long long>({index}), {slots})")
            }
            (hir::SlotIndex::Order(_), _) => {
                let (ty, ring_slot, _) = self.ring_order(slot);
                format!("{bars} + {ring_slot}(static_cast<{ty}>({index}), {slots})")
            }
        })
    }

    /// A TMA load bound to an event slot by `trigger … after` (tier 3 §2.5, §10.1): the
    /// issuer registers the load's bytes on the slot's mbarrier *before* issuing it, so the
    /// generation cannot complete before every bound load has landed (the trigger's arrival,
    /// after all of them, is the last one it waits for). No barrier of its own (§3.3).
    fn tma_bound_load(
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
                "if ({issuer}) {{  // TMA load (global -> shared) bound to event {}",
                name.unwrap_or_default()
            ),
        );
        self.w.indent += 1;
        self.w.line(span, &format!("unsigned long long* const __choreo_bar = {bar};"));
        self.w.line(span, &format!("__choreo_mbar_expect_tx(__choreo_bar, {bytes}u);"));
        self.w.line(span, call);
        if self.options.dialect == Dialect::Cpu {
            self.w.line(span, &format!("__choreo_mbar_complete_tx(__choreo_bar, {bytes}u);"));
        }
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    /// `trigger e after f…` (tier 3 §2.5): the issuer of the scope arrives once on the slot
    /// (a fill event's arrival count is 1); the bound loads registered their bytes already.
    pub(super) fn trigger_after(
        &mut self,
        span: Span,
        t: &hir::TriggerAfter,
        kernel: hir::KernelId,
    ) {
        let Some((issuer, _)) = self.tma_scope(span, t.role.as_deref(), kernel) else {
            return;
        };
        let name = self.f.events.get(t.slot.event.index()).map(|e| e.name.clone());
        let Some(bar) = self.event_slot_bar(&t.slot) else {
            return self.bug(span, "an unknown event");
        };
        self.w.line(
            span,
            &format!(
                "if ({issuer}) __choreo_mbar_arrive({bar});  // trigger {} after its loads",
                name.unwrap_or_default()
            ),
        );
    }
}
