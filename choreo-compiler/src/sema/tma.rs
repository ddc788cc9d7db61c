//! TMA statements and swizzle (tier 3 §3, §4): the modifiers of `tma.load`/`tma.copy` and of
//! `dma.copy.swiz<N>`, the static rules of §3.2, and what a TMA statement needs besides its
//! element loop ([`hir::Tma`]: the root tensor, the box, the tile coordinates, the shared
//! side, hints).
//!
//! A TMA statement is a DMA statement (sema/dma.rs builds its element loop, future and
//! destination buffer the same way); this module only decides whether the copy engine can
//! move it and with which descriptor.

use super::Checker;
use crate::ast;
use crate::hir::{self, Dim, Layout, Participants, View};
use crate::source::Span;

/// The checked modifiers of a DMA or TMA statement.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Modifiers {
    /// `.swiz<N>` (0: none).
    pub(crate) swizzle: u32,
    /// `.evict_first` (`Some(true)`) / `.evict_last` (`Some(false)`).
    pub(crate) evict_first: Option<bool>,
    /// `.promote<B>` (0: not written).
    pub(crate) promote: u32,
    /// `.multicast`, where written.
    pub(crate) multicast: Option<Span>,
}

/// The most dimensions a tensor map has.
const MAX_RANK: usize = 5;

impl Checker<'_> {
    /// The modifiers of a DMA (`.swiz<N>` only) or TMA statement; `None` after an error.
    pub(crate) fn dma_modifiers(&mut self, d: &ast::DmaStmt) -> Option<Modifiers> {
        let tma = d.engine == ast::DmaEngine::Tma;
        let mut m = Modifiers::default();
        for attr in &d.attrs {
            match attr.kind {
                ast::DmaAttrKind::Swizzle(Some(n)) => m.swizzle = n,
                ast::DmaAttrKind::Swizzle(None) => self.warn(
                    "W0406",
                    attr.span,
                    "`.swiz` without a period means no swizzle",
                    "no swizzle",
                ),
                ast::DmaAttrKind::EvictFirst if tma => m.evict_first = Some(true),
                ast::DmaAttrKind::EvictLast if tma => m.evict_first = Some(false),
                ast::DmaAttrKind::Promote(b) if tma => m.promote = b,
                // Tiles of the same shape: nothing to fill (tiles of different shapes are
                // rejected below).
                ast::DmaAttrKind::Zfill if tma => {}
                ast::DmaAttrKind::Multicast if tma => m.multicast = Some(attr.span),
                _ => {
                    self.unsupported(attr.span, "this DMA modifier (`.zfill`, `.sp`, …)", 3);
                    return None;
                }
            }
        }
        // (An eviction hint with `.multicast` is a syntax error, E0337.)
        if let Some(at) = m.multicast {
            if !self.check_multicast(at) {
                return None;
            }
        }
        Some(m)
    }

    /// Whether the target has TMA (`E0805` otherwise, with the spec's message).
    pub(crate) fn tma_available(&mut self, span: Span) -> bool {
        if self.target.has_tma() {
            return true;
        }
        let arch = match self.target {
            crate::target::Target::Cuda(a) => a.to_string(),
            crate::target::Target::Cpu => "cpu".to_string(),
        };
        self.diags.push(
            crate::diagnostics::Diagnostic::error(
                "E0805",
                span,
                format!("TMA is not supported by current architecture: {arch}."),
            )
            .with_label("needs sm_90")
            .with_help("compile for sm_90a (or sm_90), or copy with `dma.copy`"),
        );
        false
    }

    /// A swizzle of a copy into (or out of) the shared buffer of `shared` (tier 3 §4.2): the
    /// tile's rows must be whole multiples of the period, and the view the whole buffer (for
    /// a TMA, `part_ok`: a contiguous part whose start the caller checked to be aligned to
    /// 8·N bytes, where the pattern restarts, e.g. one slot `ring[s]` of a ring of tiles).
    /// Returns whether it is fine.
    pub(crate) fn check_swizzle(
        &mut self,
        n: u32,
        shared: &View,
        part_ok: bool,
        span: Span,
    ) -> bool {
        let dims = self.buffer_dims(shared.buffer);
        let inner = dims.last().and_then(Dim::as_const);
        let bytes = inner.map(|c| c * shared.elem.size_bytes());
        let fail = |this: &mut Self, message: String, label: &str| {
            this.error_label("E0461", span, message, label.to_string());
            false
        };
        let Some(bytes) = bytes else {
            return fail(
                self,
                "a swizzled shared tile needs a row length known at compile time".to_string(),
                "symbolic row length",
            );
        };
        if bytes % u64::from(n) != 0 {
            return fail(
                self,
                format!(
                    "a `.swiz<{n}>` tile needs rows of a multiple of {n} bytes; this one has \
                     rows of {bytes} bytes"
                ),
                "rows not a multiple of the swizzle period",
            );
        }
        if !part_ok && !shared.is_whole(&dims) {
            return fail(
                self,
                "a swizzled copy moves a whole shared buffer (the swizzle pattern is laid over \
                 the buffer)"
                    .to_string(),
                "part of a shared buffer",
            );
        }
        if let Some(k) = self.kernel.as_mut() {
            k.swizzle = k.swizzle.max(n);
        }
        true
    }

    /// The descriptor side of a TMA statement (tier 3 §3.2, §3.4): `global` is the view of
    /// the root tensor, `shared` the shared tile; `E0460` when the copy engine cannot move it.
    pub(crate) fn tma_info(
        &mut self,
        global: &View,
        shared: &View,
        store: bool,
        m: Modifiers,
        participants: Participants,
        span: Span,
    ) -> Option<hir::Tma> {
        let fail = |this: &mut Self, message: String, label: &str| {
            this.error_label("E0460", span, message, label.to_string());
            None
        };
        let role = match self.tma_role(participants, &[global, shared], span) {
            Ok(role) => role,
            Err(true) => return None,
            Err(false) => {
                return fail(
                    self,
                    "TMA is block-wise: a TMA statement must be in block-level code (not in \
                     the body of a `group`, `group-4` or `thread` level, whose indices cannot \
                     be used as indices or tiling factors), or issued by a warpgroup role (an \
                     `inthreads` selecting warpgroups at a `group-4` level)"
                        .to_string(),
                    "not in block-level code or a warpgroup role",
                );
            }
        };
        if global.elem.is_subbyte_int() {
            return fail(
                self,
                format!("TMA does not move sub-byte integers ({})", global.elem.as_str()),
                "sub-byte element type",
            );
        }
        let size = global.elem.size_bytes();
        // The box along every dimension of the root tensor, and the tile's coordinates.
        let Layout::Coords { origin, map } = &global.layout else {
            return fail(
                self,
                "this view of the global tensor is not a box of it (a reshaped `span_as` view or \
                 explicit strides); TMA moves boxes (`chunkat`, `subspan(..).at(..)`, `view(..).from(..)`)"
                    .to_string(),
                "not a box of the tensor",
            );
        };
        let rank = origin.len();
        let mut box_dims = vec![1u64; rank];
        for (k, b) in map.iter().enumerate() {
            let (Some(slot), Some(d)) = (box_dims.get_mut(*b as usize), global.dims.get(k)) else {
                return None;
            };
            match d.as_const() {
                Some(c) => *slot = c,
                None => {
                    return fail(
                        self,
                        "TMA box shape must be host-computable; it depends on a value known \
                         only when the kernel runs or on a symbolic dimension"
                            .to_string(),
                        "box extent not a compile-time constant",
                    );
                }
            }
        }
        let split = m.swizzle != 0 && box_dims.last().is_some_and(|c| c * size > m.swizzle as u64);
        if rank == 0 || rank + usize::from(split) > MAX_RANK {
            return fail(
                self,
                format!(
                    "a TMA tensor has 1 to {MAX_RANK} dimensions; this one has {}{}",
                    rank + usize::from(split),
                    if split { " (one more for the swizzle's column groups)" } else { "" }
                ),
                "too many dimensions",
            );
        }
        if let Some(b) = box_dims.iter().find(|b| **b > 256 || **b == 0) {
            return fail(
                self,
                format!("a TMA box extent must be between 1 and 256; this box has {b}"),
                "box extent out of range",
            );
        }
        let inner = box_dims.last().copied().unwrap_or(1) * size;
        if inner % 16 != 0 {
            return fail(
                self,
                format!(
                    "GPU TMA requires boxDim[0] * elementSizeInBits be aligned to 128 bits: the \
                     tile's inner extent is {inner} bytes"
                ),
                "inner extent not a multiple of 16 bytes",
            );
        }
        // The shared side: a dense, aligned run of its buffer, of the tile's shape.
        let sdims = self.buffer_dims(shared.buffer);
        let Layout::Coords { map: smap, .. } = &shared.layout else {
            return fail(
                self,
                "the shared side of a TMA must be a box of a shared buffer".to_string(),
                "not a box",
            );
        };
        let mut sbox = vec![1u64; sdims.len()];
        for (k, b) in smap.iter().enumerate() {
            if let (Some(slot), Some(d)) = (sbox.get_mut(*b as usize), shared.dims.get(k)) {
                *slot = d.as_const().unwrap_or(0);
            }
        }
        let sconst: Option<Vec<u64>> = sdims.iter().map(Dim::as_const).collect();
        let Some(sconst) = sconst else {
            return fail(
                self,
                "the shared buffer of a TMA needs a shape known at compile time".to_string(),
                "symbolic shared shape",
            );
        };
        // From the innermost dimension: whole extents, then one partial one, then ones.
        let mut partial = false;
        let mut stride = size;
        let mut align_stride = None;
        for (b, (t, full)) in sbox.iter().zip(&sconst).enumerate().rev() {
            if partial && *t != 1 {
                return fail(
                    self,
                    "the shared side of a TMA must be contiguous (whole rows of its buffer)"
                        .to_string(),
                    "not contiguous in shared memory",
                );
            }
            if t != full && !partial {
                partial = true;
            }
            if *t != *full && align_stride.is_none() {
                align_stride = Some((b, stride));
            }
            stride *= full;
        }
        let tile: u64 = box_dims.iter().product();
        let stile: u64 = sbox.iter().product();
        let squeeze = |v: &[u64]| v.iter().copied().filter(|x| *x != 1).collect::<Vec<_>>();
        if squeeze(&box_dims) != squeeze(&sbox) || tile != stile {
            return fail(
                self,
                format!(
                    "the global tile {:?} and the shared tile {:?} of a TMA have different \
                     shapes (zero-filling copies between them are not supported yet)",
                    box_dims, sbox
                ),
                "tiles of different shapes",
            );
        }
        let align = if m.swizzle != 0 { 8 * u64::from(m.swizzle) } else { 128 };
        if let Some((_, stride)) = align_stride {
            if stride % align != 0 {
                return fail(
                    self,
                    format!(
                        "the shared side of a TMA must start at a multiple of {align} bytes; \
                         tiles of this buffer start at multiples of {stride} bytes"
                    ),
                    "shared tile not aligned",
                );
            }
        }
        if m.swizzle != 0 && !self.check_swizzle(m.swizzle, shared, true, span) {
            return None;
        }
        let index = self.kernel.as_mut().map_or(0, |k| {
            k.tma_maps += 1;
            k.tma_maps - 1
        });
        Some(hir::Tma {
            store,
            index,
            global: global.buffer,
            box_dims,
            coords: origin.clone(),
            shared: shared.clone(),
            evict_first: m.evict_first,
            promote: if m.promote == 0 { 128 } else { m.promote },
            // Set by the caller for a load.
            barrier: 0,
            role,
            // Set by a `trigger … after` that binds the load.
            event: None,
            multicast: m.multicast.is_some(),
        })
    }

    /// A new mbarrier of the kernel being checked (its number).
    pub(crate) fn new_tma_barrier(&mut self) -> u32 {
        self.kernel.as_mut().map_or(0, |k| {
            k.tma_barriers += 1;
            k.tma_barriers - 1
        })
    }

    /// Notes that a swizzled copy wrote `buffer` (tier 3 §4.3).
    pub(crate) fn note_swizzled(&mut self, buffer: hir::BufferRef) {
        if let Some(k) = self.kernel.as_mut() {
            k.swizzled.entry(buffer).or_insert(false);
        }
    }

    /// An element access of `buffer` at `span`: `W0407` the first time it reaches a buffer a
    /// swizzled copy wrote (tier 3 §4.3: element access sees the physical bytes).
    pub(crate) fn element_of_swizzled(&mut self, buffer: hir::BufferRef, span: Span) {
        self.note_element_access(buffer, span);
        let Some(warned) = self.kernel.as_mut().and_then(|k| k.swizzled.get_mut(&buffer)) else {
            return;
        };
        if std::mem::replace(warned, true) {
            return;
        }
        self.diags.push(
            crate::diagnostics::Diagnostic::warning(
                "W0407",
                span,
                "this buffer was written by a swizzled copy: an element access sees its \
                 physical (swizzled) layout, not the logical one",
            )
            .with_label("reads or writes the swizzled layout")
            .with_help(
                "copy the tile out with the same `.swiz<N>` to get the logical layout, or load \
                 it without swizzle when threads read it element by element",
            ),
        );
    }
}
