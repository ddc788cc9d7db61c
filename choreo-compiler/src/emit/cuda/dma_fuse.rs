//! Consecutive `cp.async` DMAs as one loop and one copy group.
//!
//! A tiled kernel usually issues its copies in pairs: the next A tile and the next B tile
//! (`ga = dma.copy.async …; gb = dma.copy.async …; … wait ga, gb;`). Emitted one by one, each
//! DMA is its own loop over its box and commits its own `cp.async` group. When the copies
//! have the same participants and the same box, one loop can issue both: each iteration
//! copies one chunk of every DMA, and the copies of the run commit as one group. On the
//! H200 that is what the hand-written mma.sync GEMM does, and what its Choreo twin needed to
//! match it: the hand twin rebuilt with the separate order (all of A's copies, a commit, all
//! of B's, a commit) drops from 256 to 239 TFLOP/s at 8192³ (docs/performance.md).
//!
//! Fusing the groups is only free when no `wait` names one future of the run without the
//! others (a wait then waits for all of them: correct, but it could stall on a copy the
//! program meant to overlap). So a run is fused only when every `wait` of the function names
//! all of its futures or none, and nothing else reads their group locals (`swap`/`rotate`
//! move groups between futures: such runs stay apart).
//!
//! The CPU backend has no `cp.async` (its copies complete at issue), so it never fuses.

use super::FnEmitter;
use super::body::wide_box;
use crate::hir::visit::{Visitor, Walk, walk_stmts};
use crate::hir::{self, HExpr, HExprKind, Stmt, StmtKind, VarId};
use crate::lower::vector::{VectorCopy, dma_vector};

/// A run of statements that [`FnEmitter::fused_dmas`] emits as one copy: the DMAs and the
/// declarations between them (their futures' group and data locals).
struct DmaRun<'s> {
    /// How many statements of the list the run takes.
    len: usize,
    /// Its DMAs, in order.
    dmas: Vec<&'s hir::Dma>,
    /// The span of each DMA's statement.
    spans: Vec<crate::source::Span>,
}

impl FnEmitter<'_, '_> {
    /// Emits the run of fusable DMAs at the start of `stmts` as one loop and one copy group,
    /// and returns how many statements it took (0: no run starts here).
    pub(super) fn fused_dmas(&mut self, stmts: &[Stmt], kernel: hir::KernelId) -> usize {
        let Some(run) = self.dma_run(stmts) else { return 0 };
        let first = run.dmas[0];
        let span = run.spans[0];
        // The wide copy's run-time tests, one per DMA; a DMA that may not copy wide at all
        // (a row not a multiple of the vector) keeps the run apart.
        let vector = dma_vector(first, true);
        let mut tests = Vec::new();
        if let Some(v) = vector {
            for (dma, span) in run.dmas.iter().zip(&run.spans) {
                match self.vector_condition(*span, dma, v) {
                    Some(test) => tests.push(test),
                    None => return 0,
                }
            }
        }
        // Committed to the fusion from here on.
        for s in &stmts[..run.len] {
            if matches!(s.kind, StmtKind::Let { .. }) {
                self.stmt(s, super::Region::Device(kernel));
            }
        }
        if self.warp_reads {
            self.converge_warp_reads(span);
        }
        for (dma, span) in run.dmas.iter().zip(&run.spans) {
            self.bind_future(*span, dma);
        }
        let (tid, threads) = self.dma_participants(first, kernel);
        let (extents, count) = self.int_extents(&first.extents);
        let element_loop = |this: &mut Self| {
            this.dma_loop(span, &run.dmas, &tid, &threads, &extents, &count, None, |this, k| {
                let dma = run.dmas[k];
                match this.cp_async_plan(dma).and_then(|c| c.element) {
                    Some(bytes) => this.cp_async_element(&dma.element, bytes),
                    None => this.stmt(&dma.element, super::Region::Device(kernel)),
                }
            });
        };
        match vector {
            Some(v) => {
                // Each copy's test, in parentheses (a versioned one is `__choreo_vec || (…)`).
                let conditions: Vec<String> = tests
                    .into_iter()
                    .map(|t| self.versioned_condition(t))
                    .filter(|c| !c.is_empty())
                    .map(|c| format!("({c})"))
                    .collect();
                let (wide, wide_count) = wide_box(first, &extents, &count, v);
                self.wide_or_elements(
                    span,
                    &conditions.join(" && "),
                    |this| {
                        this.dma_loop(
                            span,
                            &run.dmas,
                            &tid,
                            &threads,
                            &wide,
                            &wide_count,
                            Some(v.elems),
                            |this, k| this.vector_element(&run.dmas[k].element, v, true),
                        )
                    },
                    element_loop,
                );
            }
            None => element_loop(self),
        }
        self.w.line(span, "::__choreo_cp_async_commit();");
        let groups: Vec<String> = run
            .dmas
            .iter()
            .filter_map(|d| d.group)
            .map(|g| self.names().local(g).to_string())
            .collect();
        self.w.line(span, &format!("{} = ++__choreo_groups;", groups[0]));
        for g in &groups[1..] {
            self.w.line(span, &format!("{g} = {};", groups[0]));
        }
        run.len
    }

    /// The run of fusable DMAs at the start of `stmts`, if one starts there: two or more
    /// asynchronous `cp.async` copies (no TMA, no swizzle) with the same participants, box
    /// and vector width, whose futures every `wait` of the function names all or none of, with
    /// nothing between them but declarations with a constant initialiser or none (their
    /// futures' group and data locals). Those declarations move ahead of the run's copies,
    /// which is safe: a copy cannot refer to a local declared after it.
    fn dma_run<'s>(&self, stmts: &'s [Stmt]) -> Option<DmaRun<'s>> {
        let fusable = |dma: &hir::Dma| {
            dma.is_async
                && dma.tma.is_none()
                && dma.swizzle == 0
                && dma.group.is_some()
                && self.cp_async_plan(dma).is_some()
        };
        let mut run = DmaRun { len: 0, dmas: Vec::new(), spans: Vec::new() };
        let mut lets = 0;
        for s in stmts {
            match &s.kind {
                StmtKind::Let { init, .. } if init.as_ref().is_none_or(is_literal) => lets += 1,
                StmtKind::Dma(dma) if fusable(dma) => {
                    if let Some(first) = run.dmas.first() {
                        let same = first.participants == dma.participants
                            && first.extents == dma.extents
                            && same_vector(first, dma);
                        if !same {
                            break;
                        }
                    }
                    run.dmas.push(dma);
                    run.spans.push(s.span);
                    run.len += lets + 1;
                    lets = 0;
                }
                _ => break,
            }
        }
        // Declarations count only before a DMA of the run (trailing ones are left out).
        if run.dmas.len() < 2 {
            return None;
        }
        let groups: Vec<VarId> = run.dmas.iter().filter_map(|d| d.group).collect();
        waited_together(&self.f.body, &groups).then_some(run)
    }
}

/// Whether `a` and `b` copy wide by the same vector (or both element by element).
fn same_vector(a: &hir::Dma, b: &hir::Dma) -> bool {
    let width = |d: &hir::Dma| dma_vector(d, true).map(|v: VectorCopy| v.elems);
    width(a) == width(b)
}

/// A literal initialiser (a future's group local starts at 0): moving its declaration ahead
/// of the run's earlier DMAs changes nothing.
fn is_literal(e: &HExpr) -> bool {
    matches!(e.kind, HExprKind::Int(_) | HExprKind::Float(..) | HExprKind::Bool(_))
}

/// Whether every `wait` in `body` names all of `groups` or none, and nothing but the DMAs that
/// set them and those waits uses them.
fn waited_together(body: &[Stmt], groups: &[VarId]) -> bool {
    struct Uses<'g> {
        groups: &'g [VarId],
        apart: bool,
    }
    impl<'a> Visitor<'a> for Uses<'_> {
        fn stmt(&mut self, stmt: &'a Stmt) -> Walk {
            let named = |list: &[VarId]| self.groups.iter().filter(|g| list.contains(g)).count();
            match &stmt.kind {
                StmtKind::Wait { groups, .. } => {
                    let n = named(groups);
                    self.apart |= n != 0 && n != self.groups.len();
                }
                StmtKind::Rotate { groups, .. } | StmtKind::TmaStoreWait { groups, .. } => {
                    self.apart |= named(groups) != 0;
                }
                _ => {}
            }
            Walk::Continue
        }

        fn expr(&mut self, expr: &'a HExpr) -> Walk {
            if let HExprKind::Var(v) = &expr.kind {
                self.apart |= self.groups.contains(v);
            }
            Walk::Continue
        }
    }
    let mut uses = Uses { groups, apart: false };
    walk_stmts(&mut uses, body);
    !uses.apart
}
