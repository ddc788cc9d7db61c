//! Swizzle inheritance (spec-tier3 §4.3): `mma.load.swiz<N>` declares the layout of the shared
//! tile it reads. When the `dma.copy`/`tma.load` (synchronous or asynchronous) that filled that
//! buffer had no swizzle, the copy inherits N: a note (`N0473`) at the copy names N and the
//! `mma.load`, the copy is checked as if written `.swiz<N>` (whole rows of a multiple of N
//! bytes, a whole buffer for a DMA, a TMA part aligned to 8·N bytes, the extra tensor-map
//! dimension of the column groups), the kernel's shared pool is aligned to 8·N, and after the
//! kernel is checked its HIR copy statements get `swizzle = N` ([`patch`]).
//!
//! Every unswizzled copy into the buffer inherits, the ones before the `mma.load` and the ones
//! after it (a prologue copy and the copy of a loop). Conflicts stay errors (`E1019`): a second
//! `mma.load.swiz<M>` of the buffer with M ≠ N (the first one fixed the copy's swizzle), or a
//! copy with an explicit other swizzle. Element accesses of the buffer see the physical,
//! swizzled bytes: `W0407` (the one of explicitly swizzled buffers) at the first of them,
//! whether it comes before or after the `mma.load`; an unswizzled copy out of the buffer
//! written after the `mma.load` gets `W0409` (it reads the tile scrambled).

use super::Checker;
use crate::diagnostics::Diagnostic;
use crate::hir::{self, BufferRef, Layout, Stmt, StmtKind, View};
use crate::source::Span;
use std::collections::BTreeMap;

/// An unswizzled copy into a shared buffer: what inheriting a swizzle must check.
#[derive(Debug, Clone)]
pub(crate) struct PlainFill {
    /// The copy statement.
    pub(crate) span: Span,
    /// Its shared side (the destination).
    pub(crate) shared: View,
    /// Whether it is a plain copy of a tile of the same shape (no padding, transposition).
    pub(crate) plain: bool,
    /// For a TMA load: the box (every dimension of the root tensor) and the element size.
    pub(crate) tma: Option<(Vec<u64>, u64)>,
}

/// The most dimensions of a tensor map (as in sema/tma.rs).
const MAX_RANK: usize = 5;

impl Checker<'_> {
    /// Records a copy (built, `dma`) that wrote a shared buffer without swizzle; when the
    /// buffer already inherited a swizzle from an `mma.load`, the copy inherits it too.
    pub(crate) fn record_plain_fill(
        &mut self,
        dma: &hir::Dma,
        site: Option<hir::VarId>,
        span: Span,
    ) {
        if dma.swizzle != 0 || dma.dst.storage != hir::Storage::Shared {
            return;
        }
        if dma.tma.as_ref().is_some_and(|t| t.store) {
            return;
        }
        let fill = PlainFill {
            span,
            shared: dma.dst.clone(),
            plain: dma.plain && dma.src.dims == dma.dst.dims,
            tma: dma.tma.as_ref().map(|t| (t.box_dims.clone(), dma.src.elem.size_bytes())),
        };
        let mut keys = vec![dma.dst.buffer];
        if let Some(site) = site {
            keys.push(BufferRef::Local(site));
        }
        let Some(k) = self.kernel.as_mut() else { return };
        let inherited = keys.iter().find_map(|b| k.inherited_swizzle.get(b).copied());
        for b in &keys {
            k.plain_fills.entry(*b).or_default().push(fill.clone());
        }
        if let Some((n, load)) = inherited {
            if self.inherit_into(&fill, n, load) {
                if let Some(k) = self.kernel.as_mut() {
                    for b in &keys {
                        k.copy_swizzle.insert(*b, (n, span));
                    }
                }
            }
        }
    }

    /// `mma.load.swiz<n>` (at `load`) of shared `buffer`, which no swizzled copy filled: the
    /// unswizzled copies into it inherit `n`. `Some(n)` when they do; `None` when no copy
    /// filled the buffer (the caller reports `E1019`) or after reporting.
    pub(crate) fn inherit_swizzle(
        &mut self,
        buffer: BufferRef,
        n: u32,
        load: Span,
    ) -> Option<Option<u32>> {
        let k = self.kernel.as_ref()?;
        let fills = k.plain_fills.get(&buffer).cloned().unwrap_or_default();
        if fills.is_empty() {
            return None;
        }
        let mut ok = true;
        for fill in &fills {
            ok &= self.inherit_into(fill, n, load);
        }
        if !ok {
            return Some(None);
        }
        let last = fills.last().map(|f| f.span).unwrap_or(load);
        if let Some(k) = self.kernel.as_mut() {
            k.inherited_swizzle.insert(buffer, (n, load));
            k.copy_swizzle.insert(buffer, (n, last));
            k.swizzled.entry(buffer).or_insert(false);
        }
        // An element access before the `mma.load` (one after it warns when checked).
        let earlier = self.kernel.as_ref().and_then(|k| k.element_access.get(&buffer).copied());
        if let Some(at) = earlier {
            self.element_of_swizzled(buffer, at);
        }
        Some(Some(n))
    }

    /// Checks that `fill` can be swizzled with period `n` and records the patch (a note at the
    /// copy); `false` after reporting.
    fn inherit_into(&mut self, fill: &PlainFill, n: u32, load: Span) -> bool {
        self.diags.push(
            Diagnostic::note(
                "N0473",
                fill.span,
                format!("inferred DMA swizzle '{n}' from the mma.load that reads this tile"),
            )
            .with_label(format!("copies as if written `.swiz<{n}>`"))
            .with_secondary(load, format!("mma.load.swiz<{n}>"))
            .with_help("write the swizzle on the copy to make it explicit"),
        );
        let fail = |this: &mut Self, message: String, label: &str| {
            this.diags.push(
                Diagnostic::error("E0461", fill.span, message)
                    .with_label(label.to_string())
                    .with_secondary(load, format!("mma.load.swiz<{n}> asks for the swizzle")),
            );
            false
        };
        match &fill.tma {
            None if !fill.plain => {
                return fail(
                    self,
                    format!(
                        "this copy cannot inherit the swizzle '{n}' of the mma.load: a swizzled \
                         copy moves a tile as it is (no padding or transposition, same shapes)"
                    ),
                    "not a plain copy",
                );
            }
            None => {}
            Some((box_dims, size)) => {
                let split = box_dims.last().is_some_and(|c| c * size > u64::from(n));
                if box_dims.len() + usize::from(split) > MAX_RANK {
                    return fail(
                        self,
                        format!(
                            "this TMA cannot inherit the swizzle '{n}' of the mma.load: its \
                             tensor would need {} dimensions (one more for the swizzle's column \
                             groups; at most {MAX_RANK})",
                            box_dims.len() + 1
                        ),
                        "too many dimensions",
                    );
                }
                if let Some(stride) = self.part_stride(&fill.shared) {
                    let align = 8 * u64::from(n);
                    if stride % align != 0 {
                        return fail(
                            self,
                            format!(
                                "this TMA cannot inherit the swizzle '{n}' of the mma.load: a \
                                 swizzled tile must start at a multiple of {align} bytes; tiles \
                                 of this buffer start at multiples of {stride} bytes"
                            ),
                            "shared tile not aligned to the swizzle pattern",
                        );
                    }
                }
            }
        }
        if !self.check_swizzle(n, &fill.shared, fill.tma.is_some(), fill.span) {
            return false;
        }
        if let Some(k) = self.kernel.as_mut() {
            k.swizzle_patches.insert(fill.span, n);
        }
        true
    }

    /// For a view that is a part of its shared buffer (a slot of a ring): the byte stride at
    /// which such parts start (the first dimension, from the innermost, where the view does
    /// not cover the buffer). `None` for the whole buffer.
    fn part_stride(&self, shared: &View) -> Option<u64> {
        let Layout::Coords { map, .. } = &shared.layout else { return None };
        let sdims = self.buffer_dims(shared.buffer);
        let mut sbox = vec![1u64; sdims.len()];
        for (k, b) in map.iter().enumerate() {
            if let (Some(slot), Some(d)) = (sbox.get_mut(*b as usize), shared.dims.get(k)) {
                *slot = d.as_const().unwrap_or(0);
            }
        }
        let mut stride = shared.elem.size_bytes();
        for (t, full) in sbox.iter().zip(&sdims).rev() {
            let full = full.as_const()?;
            if *t != full {
                return Some(stride);
            }
            stride *= full;
        }
        None
    }

    /// Records the first element access of each buffer (an inherited swizzle warns there).
    pub(crate) fn note_element_access(&mut self, buffer: BufferRef, span: Span) {
        if let Some(k) = self.kernel.as_mut() {
            k.element_access.entry(buffer).or_insert(span);
        }
    }
}

/// Sets the inherited swizzles (by copy statement) in a checked kernel body.
pub(crate) fn patch(stmts: &mut [Stmt], patches: &BTreeMap<Span, u32>) {
    if patches.is_empty() {
        return;
    }
    for s in stmts {
        match &mut s.kind {
            StmtKind::Dma(d) => {
                if let Some(&n) = patches.get(&s.span) {
                    if d.swizzle == 0 {
                        d.swizzle = n;
                    }
                }
            }
            StmtKind::Block(body) | StmtKind::While { body, .. } | StmtKind::For { body, .. } => {
                patch(body, patches)
            }
            StmtKind::If { then_body, else_body, .. } => {
                patch(then_body, patches);
                patch(else_body, patches);
            }
            StmtKind::InnerParallel(inner) => patch(&mut inner.body, patches),
            StmtKind::Parallel(tree) => patch(&mut tree.body, patches),
            _ => {}
        }
    }
}
