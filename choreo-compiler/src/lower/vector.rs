//! Wide DMA copies: when a DMA moves whole rows of contiguous elements, each participant
//! copies 4, 8 or 16 bytes at a time (one `cp.async` of 16, 8 or 4 bytes, whatever the element
//! type; or one `uint4`/`uint2` load and store) instead of one element.
//!
//! [`dma_vector`] decides what the code of a DMA can know statically: the element statement is
//! a plain copy, the innermost dimension is contiguous in both views and its extent is a
//! multiple of the vector. What only the run time knows — that the two base pointers and the
//! box's first elements are aligned to the vector, and that the rows of both buffers are
//! multiples of it — the generated code tests before choosing the wide loop (a uniform
//! branch); the element loop remains for everything else. Under those conditions the vector of
//! elements starting at a multiple of its width never straddles a row end, so checking the
//! bounds of its first element checks all of them.

use crate::hir::{AssignOp, Dim, Dma, ElemTy, HExprKind, Layout, Place, StmtKind, Storage, View};

/// How a DMA copies wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VectorCopy {
    /// Elements per copy.
    pub elems: u64,
    /// Bytes per copy (16 or 8; also 4 for `cp.async`).
    pub bytes: u64,
}

/// The widest copy a DMA can use, if any (see the module documentation); `cp_async`: the
/// copy is asynchronous and lowered to `cp.async` (16 bytes through `cp.async.cg`, 8 and 4
/// through `cp.async.ca`).
pub fn dma_vector(dma: &Dma, cp_async: bool) -> Option<VectorCopy> {
    let StmtKind::Assign { target: Place::Elem { .. }, op: AssignOp::Assign, value } =
        &dma.element.kind
    else {
        return None;
    };
    if !dma.plain || !matches!(value.kind, HExprKind::At { .. }) || dma.src.elem != dma.dst.elem {
        return None;
    }
    let local = |v: &View| v.storage == Storage::Local;
    if local(&dma.src) || local(&dma.dst) || dma.src.elem == ElemTy::Bool {
        return None;
    }
    let size = dma.src.elem.size_bytes();
    let innermost = dma.extents.last().and_then(Dim::as_const)?;
    let widths: &[u64] = if cp_async { &[16, 8, 4] } else { &[16, 8] };
    widths.iter().find_map(|&bytes| {
        let elems = bytes.checked_div(size).filter(|n| *n > 1 && n * size == bytes)?;
        let fits = innermost % elems == 0
            && contiguous_innermost(&dma.src, dma.extents.len())
            && contiguous_innermost(&dma.dst, dma.extents.len());
        fits.then_some(VectorCopy { elems, bytes })
    })
}

/// Whether the innermost dimension of a `rank`-dimensional box moves through consecutive
/// elements of the view's buffer.
fn contiguous_innermost(v: &View, rank: usize) -> bool {
    if v.dims.len() != rank || rank == 0 {
        return false;
    }
    match &v.layout {
        Layout::Coords { origin, map } => {
            map.last().is_some_and(|b| *b as usize + 1 == origin.len())
        }
        Layout::Flat { strides, .. } => {
            strides.last().is_some_and(|s| matches!(s.kind, HExprKind::Int(1)))
        }
    }
}
