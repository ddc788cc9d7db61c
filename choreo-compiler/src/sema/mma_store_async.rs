//! `mma.store.async` (spec-tier3 §5.5): an MMA store to shared memory without the barrier that
//! ends a plain one. The threads that executed the MMA (a warp, or a warpgroup for WGMMA) each
//! write their own accumulator elements; until a barrier (`sync.barrier : block;`, a named
//! barrier, an event wait) no other thread may read the tile. The program is responsible for
//! that synchronisation; this pass warns (`W1046`) when a statement after the store reads the
//! stored buffer before any synchronising statement, in source order (a heuristic: it follows
//! neither branches nor loop back edges, so it never warns about a read that a barrier on every
//! path precedes). A TMA store synchronises its issuing scope before the copy engine reads the
//! tile, so it counts as the barrier (the staged epilogue: `mma.store.async acc, s; tma.copy s
//! => …;`).

use super::Checker;
use crate::diagnostics::Diagnostic;
use crate::hir::mma::MmaOp;
use crate::hir::visit::{Visitor, Walk, walk_stmts};
use crate::hir::{BufferRef, HExpr, HExprKind, Stmt, StmtKind, Storage};
use crate::source::Span;

/// The walk: stores not yet synchronised, in source order.
#[derive(Default)]
struct AsyncStores {
    /// The store of the statement being walked (pending from the next statement on).
    current: Option<(BufferRef, Span)>,
    /// Stores that no synchronising statement followed yet.
    pending: Vec<(BufferRef, Span)>,
    /// (read, store) pairs to report.
    found: Vec<(Span, Span)>,
}

impl<'a> Visitor<'a> for AsyncStores {
    fn stmt(&mut self, s: &'a Stmt) -> Walk {
        if let Some(st) = self.current.take() {
            self.pending.push(st);
        }
        match &s.kind {
            StmtKind::Barrier(_)
            | StmtKind::RoleBarrier { .. }
            | StmtKind::NamedBarrier { .. }
            | StmtKind::EventWait(_)
            | StmtKind::Wait { .. } => self.pending.clear(),
            // A TMA store (sync or `.async`) first fences every thread's shared writes and
            // synchronises its issuing scope (the block, or the warpgroup role: spec-tier3
            // §3.3, §10.2) before the copy engine reads its source.
            StmtKind::Dma(d) if d.tma.as_ref().is_some_and(|t| t.store) => self.pending.clear(),
            StmtKind::Mma(op) => {
                if let MmaOp::Store { tile, .. } = &**op {
                    if let (HExprKind::At { buffer, .. }, Storage::Shared) =
                        (&tile.first.kind, tile.storage)
                    {
                        // A plain store is followed by its barrier, which clears it.
                        self.current = Some((*buffer, s.span));
                    }
                    // The store's own corner accesses are no reads.
                    return Walk::Skip;
                }
            }
            _ => {}
        }
        Walk::Continue
    }

    fn expr(&mut self, e: &'a HExpr) -> Walk {
        if let HExprKind::At { buffer, .. } = &e.kind {
            if let Some(k) = self.pending.iter().position(|(b, _)| b == buffer) {
                let (_, store) = self.pending.remove(k);
                self.found.push((e.span, store));
            }
        }
        Walk::Continue
    }
}

impl Checker<'_> {
    /// `W1046`: a read of a shared tile that `mma.store.async` wrote, with no synchronisation
    /// in between.
    pub(crate) fn check_async_mma_stores(&mut self, body: &[Stmt]) {
        let mut walk = AsyncStores::default();
        walk_stmts(&mut walk, body);
        for (read, store) in walk.found {
            self.diags.push(
                Diagnostic::warning(
                    "W1046",
                    read,
                    "this reads a shared tile that `mma.store.async` wrote, with no barrier in \
                     between: other threads' elements may not be written yet",
                )
                .with_label("read before any synchronisation")
                .with_secondary(store, "the asynchronous store (no trailing barrier)")
                .with_help(
                    "synchronise first (`sync.barrier : block;`, or an event), or use \
                     `mma.store`, which ends with the barrier",
                ),
            );
        }
    }
}
