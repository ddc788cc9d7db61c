//! Asynchronous TMA stores and multicast loads (spec-tier3 §3.3, §3.6).
//!
//! `f = tma.copy.async SRC_shared => DST_global; … wait f;` — the issuer commits the bulk copy
//! and goes on; `wait f` is the issuer's `cp.async.bulk.wait_group 0` followed by the scope
//! barrier (§3.3 ⚠). Until that wait the copy engine may still read the shared source, so a
//! statement between the store and its wait that provably rewrites the source (an element
//! assignment, a DMA/TMA into it, an inline-asm output) is rejected (`E0463`); so is, in a
//! loop, a rewrite earlier in the body when the store is still pending at the end of the body
//! (the next iteration's rewrite). We reject rather than insert a wait: a wait placed by the
//! compiler would silently serialise what the program meant to overlap.
//!
//! A copy out of a shared tile with another swizzle than the copy that wrote it gets `W0409`
//! (§4.3: the data comes out scrambled; element accesses of swizzled tiles are `W0407`).
//!
//! A kernel that accesses a buffer after storing into it with TMA gets `W0408`: the copy
//! engine's global writes are only guaranteed visible at the kernel's end (§3.3 ⚠).
//!
//! `….multicast` (§3.6) needs a kernel launched in clusters and a load (`E0464`); an L2
//! eviction hint with it is a syntax error (`E0337`).

use super::Checker;
use crate::diagnostics::Diagnostic;
use crate::hir::mma::MmaOp;
use crate::hir::visit::{self, Visitor, Walk};
use crate::hir::{self, BufferRef, HExpr, HExprKind, Participants, Place, Stmt, StmtKind, VarId};
use crate::source::Span;
use std::collections::BTreeMap;

fn stmt(kind: StmtKind, span: Span) -> Stmt {
    Stmt { kind, span }
}

/// The pending asynchronous stores: group local → (shared source, the store).
type Pending = BTreeMap<VarId, (BufferRef, Span)>;

/// A `wait` on a `tma.any` placeholder that no asynchronous store was bound to yet: if one is
/// bound to it later (a loop's `wait f` before its `f = tma.copy.async …`), the wait becomes a
/// store wait, issued by the role the wait is in.
#[derive(Debug, Clone)]
pub(crate) struct PlaceholderWait {
    /// The placeholder's group local.
    group: VarId,
    /// The `wait`.
    span: Span,
    /// Who waits together.
    participants: Participants,
    /// The warpgroup role at the wait (as [`hir::Tma::role`]), if in one.
    role: Option<Vec<HExpr>>,
    /// Whether every thread of that role reaches the wait.
    uniform: bool,
}

impl Checker<'_> {
    /// The wait statements of `wait f, …` (or of `after f`): TMA stores, TMA loads and DMA
    /// copies each get theirs.
    pub(crate) fn push_waits(
        &mut self,
        groups: Vec<VarId>,
        participants: Participants,
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        let stores: Vec<VarId> = self.kernel.as_ref().map_or_else(Vec::new, |k| {
            groups.iter().copied().filter(|g| k.tma_store_groups.contains(g)).collect()
        });
        let others: Vec<VarId> = groups.into_iter().filter(|g| !stores.contains(g)).collect();
        // In a warpgroup role, the role's first thread waits for its stores and the role's
        // named barrier follows (spec-tier3 §3.3, §7.1).
        let role = || -> (Option<Vec<HExpr>>, bool) {
            match self.tma_role_conditions(participants) {
                Some(role) => (Some(role), self.role_uniform()),
                None => (None, true),
            }
        };
        let (here, uniform) = role();
        if !stores.is_empty() {
            if !uniform {
                self.report_role_not_uniform(span);
            }
            out.push(stmt(
                StmtKind::TmaStoreWait { groups: stores, participants, role: here.clone() },
                span,
            ));
        }
        for &g in &others {
            if self.kernel.as_ref().is_some_and(|k| k.tma_placeholders.contains(&g)) {
                let w =
                    PlaceholderWait { group: g, span, participants, role: here.clone(), uniform };
                if let Some(k) = self.kernel.as_mut() {
                    k.placeholder_waits.push(w);
                }
            }
        }
        if !others.is_empty() {
            let (tma_groups, groups) = others
                .into_iter()
                .partition(|g| self.kernel.as_ref().is_some_and(|k| k.tma_groups.contains(g)));
            out.push(stmt(StmtKind::Wait { groups, tma_groups, participants }, span));
        }
    }

    /// `tma.copy.multicast` of a shared tile into global memory: rejected (`E0464`).
    pub(crate) fn multicast_store(
        &mut self,
        m: super::tma::Modifiers,
        span: Span,
        poison: impl FnOnce(&mut Self),
    ) {
        self.error_label(
            "E0464",
            m.multicast.unwrap_or(span),
            "`.multicast` applies to TMA loads (global -> shared); a store cannot multicast",
            "on a store",
        );
        poison(self)
    }

    /// A `.multicast` modifier at `span`: only in a kernel launched in clusters. Returns
    /// whether it is fine.
    pub(crate) fn check_multicast(&mut self, span: Span) -> bool {
        let in_cluster = self.kernel.as_ref().is_some_and(|k| k.cluster);
        if !in_cluster {
            self.diags.push(
                Diagnostic::error(
                    "E0464",
                    span,
                    "a multicast TMA load needs a kernel launched in clusters",
                )
                .with_label("not inside a `cluster` level")
                .with_help(
                    "put the block level in a cluster (`parallel c by 2 : cluster, b by N : \
                     block`), or drop `.multicast`",
                ),
            );
            return false;
        }
        if let Some(k) = self.kernel.as_mut() {
            k.multicast = true;
        }
        true
    }

    /// After a kernel body: a `wait` on a `tma.any` placeholder that an asynchronous store was
    /// bound to after it (in source order) waits for the store ([`PlaceholderWait`]): the wait
    /// statement's group moves from the mbarrier waits to a store wait before it.
    pub(crate) fn resolve_placeholder_store_waits(&mut self, body: &mut [Stmt]) {
        let Some(k) = self.kernel.as_mut() else { return };
        let waits: Vec<PlaceholderWait> = std::mem::take(&mut k.placeholder_waits)
            .into_iter()
            .filter(|w| k.tma_store_groups.contains(&w.group))
            .collect();
        if waits.is_empty() {
            return;
        }
        for w in waits.iter().filter(|w| !w.uniform) {
            self.report_role_not_uniform(w.span);
        }
        rewrite_waits(body, &waits);
    }

    /// After a kernel body: the sources of asynchronous TMA stores are not rewritten before
    /// their wait (`E0463`), and buffers stored with TMA are not read later in the kernel
    /// (`W0408`).
    pub(crate) fn check_tma_stores(&mut self, body: &[Stmt]) {
        let mut walk = StoreWalk {
            stores: self.kernel.as_ref().map(|k| k.tma_store_groups.clone()).unwrap_or_default(),
            problems: Vec::new(),
            stored: BTreeMap::new(),
            late_reads: Vec::new(),
        };
        if walk.stores.is_empty() && !has_tma_store(body) {
            return;
        }
        let mut pending = Pending::new();
        walk.stmts(body, &mut pending);
        let mut seen = std::collections::BTreeSet::new();
        for (at, store, g) in std::mem::take(&mut walk.problems) {
            if !seen.insert((at, g)) {
                continue;
            }
            let name = self.group_name(g);
            self.diags.push(
                Diagnostic::error(
                    "E0463",
                    at,
                    format!(
                        "this rewrites the source of the asynchronous TMA store '{name}' before \
                         `wait {name}`"
                    ),
                )
                .with_label("the copy engine may still be reading this buffer")
                .with_secondary(store, "the asynchronous store")
                .with_help(format!("`wait {name};` before rewriting the tile")),
            );
        }
        let mut warned = std::collections::BTreeSet::new();
        for (at, store, buffer) in std::mem::take(&mut walk.late_reads) {
            if !warned.insert(buffer) {
                continue;
            }
            self.diags.push(
                Diagnostic::warning(
                    "W0408",
                    at,
                    "this kernel reads a buffer that it stored with TMA: the copy engine's \
                     global writes are only guaranteed visible when the kernel ends",
                )
                .with_label("may read the old contents")
                .with_secondary(store, "TMA store")
                .with_help("read the stored data in a later kernel (or keep it in shared memory)"),
            );
        }
    }

    /// A copy with swizzle period `n` (0: none) from `dma.src` into `dma.dst` (and the fresh
    /// buffer `site`): `W0409` when it reads a shared buffer that a copy with another swizzle
    /// wrote (spec-tier3 §4.3: the tile comes out scrambled); records what it writes.
    pub(crate) fn check_copy_swizzle(
        &mut self,
        dma: &hir::Dma,
        site: Option<VarId>,
        n: u32,
        span: Span,
    ) {
        let Some(k) = self.kernel.as_mut() else { return };
        if dma.src.storage == hir::Storage::Shared {
            if let Some(&(w, at)) = k.copy_swizzle.get(&dma.src.buffer) {
                if w != n {
                    let name = |p: u32| {
                        if p == 0 { "no swizzle".to_string() } else { format!("`.swiz<{p}>`") }
                    };
                    self.diags.push(
                        Diagnostic::warning(
                            "W0409",
                            span,
                            format!(
                                "this copy reads the tile with {} but it was written with {}: the \
                                 data comes out scrambled",
                                name(n),
                                name(w)
                            ),
                        )
                        .with_label("reader's swizzle")
                        .with_secondary(at, "writer's swizzle")
                        .with_help("use the same `.swiz<N>` on the copy in and the copy out"),
                    );
                }
            }
        }
        let Some(k) = self.kernel.as_mut() else { return };
        if dma.dst.storage == hir::Storage::Shared {
            k.copy_swizzle.insert(dma.dst.buffer, (n, span));
            if let Some(site) = site {
                k.copy_swizzle.insert(BufferRef::Local(site), (n, span));
            }
        }
    }

    /// The name of a future from its group local.
    fn group_name(&self, g: VarId) -> String {
        let n = self.locals.get(g.index()).map_or("?", |l| l.name.as_str());
        n.strip_suffix("__group").unwrap_or(n).to_string()
    }
}

/// Moves the placeholder groups of `waits` out of the matching `wait` statements of `stmts`
/// (same span) into store waits just before them.
fn rewrite_waits(stmts: &mut [Stmt], waits: &[PlaceholderWait]) {
    for s in stmts.iter_mut() {
        match &mut s.kind {
            StmtKind::Block(body) => rewrite_waits(body, waits),
            StmtKind::InnerParallel(inner) => rewrite_waits(&mut inner.body, waits),
            StmtKind::If { then_body, else_body, .. } => {
                rewrite_waits(then_body, waits);
                rewrite_waits(else_body, waits);
            }
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => rewrite_waits(body, waits),
            StmtKind::Wait { tma_groups, .. } => {
                let mine: Vec<&PlaceholderWait> = waits
                    .iter()
                    .filter(|w| w.span == s.span && tma_groups.contains(&w.group))
                    .collect();
                let Some(first) = mine.first() else { continue };
                let groups: Vec<VarId> = mine.iter().map(|w| w.group).collect();
                tma_groups.retain(|g| !groups.contains(g));
                let store = StmtKind::TmaStoreWait {
                    groups,
                    participants: first.participants,
                    role: first.role.clone(),
                };
                // `wait f` (store) first, then what else the statement waits for.
                let rest = std::mem::replace(&mut s.kind, store);
                let empty = matches!(&rest, StmtKind::Wait { groups, tma_groups, .. }
                    if groups.is_empty() && tma_groups.is_empty());
                if !empty {
                    let span = s.span;
                    let wait = std::mem::replace(&mut s.kind, StmtKind::Block(Vec::new()));
                    s.kind = StmtKind::Block(vec![stmt(wait, span), stmt(rest, span)]);
                }
            }
            _ => {}
        }
    }
}

/// Whether `body` has a TMA store.
fn has_tma_store(body: &[Stmt]) -> bool {
    let mut found = false;
    visit::walk_stmts(
        &mut StmtHook(|s: &Stmt| {
            if let StmtKind::Dma(d) = &s.kind {
                found |= d.tma.as_ref().is_some_and(|t| t.store);
            }
        }),
        body,
    );
    found
}

struct StmtHook<F>(F);
impl<'a, F: FnMut(&'a Stmt)> Visitor<'a> for StmtHook<F> {
    fn stmt(&mut self, stmt: &'a Stmt) -> Walk {
        (self.0)(stmt);
        Walk::Continue
    }
}

/// The buffers an expression reads (element accesses).
struct Reads(Vec<BufferRef>);
impl<'a> Visitor<'a> for Reads {
    fn expr(&mut self, e: &'a HExpr) -> Walk {
        if let HExprKind::At { buffer, .. } | HExprKind::Atomic { buffer, .. } = &e.kind {
            self.0.push(*buffer);
        }
        Walk::Continue
    }
}

struct StoreWalk {
    /// The group locals of asynchronous TMA stores.
    stores: std::collections::BTreeSet<VarId>,
    /// (rewrite, store, group).
    problems: Vec<(Span, Span, VarId)>,
    /// Global buffers stored with TMA so far → the store.
    stored: BTreeMap<BufferRef, Span>,
    /// (read, store, buffer).
    late_reads: Vec<(Span, Span, BufferRef)>,
}

impl StoreWalk {
    fn stmts(&mut self, stmts: &[Stmt], pending: &mut Pending) {
        for s in stmts {
            self.stmt(s, pending);
        }
    }

    fn written(&mut self, buffer: BufferRef, at: Span, pending: &Pending) {
        for (g, (src, store)) in pending {
            if *src == buffer {
                self.problems.push((at, *store, *g));
            }
        }
    }

    /// Reads of buffers stored with TMA by a statement without nested statements.
    fn reads(&mut self, s: &Stmt) {
        if self.stored.is_empty() {
            return;
        }
        let mut reads = Reads(Vec::new());
        match &s.kind {
            StmtKind::Dma(d) => visit::walk_stmt(&mut reads, &d.element),
            _ => visit::walk_stmt(&mut reads, s),
        }
        for b in reads.0 {
            if let Some(store) = self.stored.get(&b) {
                self.late_reads.push((s.span, *store, b));
            }
        }
    }

    fn stmt(&mut self, s: &Stmt, pending: &mut Pending) {
        match &s.kind {
            StmtKind::Dma(d) => {
                match &d.tma {
                    Some(t) if t.store => {
                        // The store reads the shared tile (no late read of the global side).
                        if let (true, Some(g)) = (d.is_async, d.group) {
                            if self.stores.contains(&g) {
                                pending.insert(g, (d.src.buffer, s.span));
                            }
                        }
                        self.stored.insert(d.dst.buffer, s.span);
                        return;
                    }
                    _ => {}
                }
                self.reads(s);
                self.written(d.dst.buffer, s.span, pending);
            }
            StmtKind::TmaStoreWait { groups, .. } => {
                for g in groups {
                    pending.remove(g);
                }
            }
            StmtKind::Assign { target: Place::Elem { buffer, .. }, .. } => {
                self.reads(s);
                self.written(*buffer, s.span, pending);
            }
            // `mma.store[.async] acc, tile` into a shared tile rewrites it.
            StmtKind::Mma(op) => {
                if let MmaOp::Store { tile, .. } = &**op {
                    if let HExprKind::At { buffer, .. } = &tile.first.kind {
                        self.written(*buffer, s.span, pending);
                    }
                }
            }
            StmtKind::Asm(asm) => {
                self.reads(s);
                for o in &asm.outputs {
                    if let Place::Elem { buffer, .. } = &o.place {
                        self.written(*buffer, s.span, pending);
                    }
                }
            }
            StmtKind::Block(body) => self.stmts(body, pending),
            StmtKind::InnerParallel(inner) => self.stmts(&inner.body, pending),
            StmtKind::If { cond, then_body, else_body } => {
                self.cond_reads(cond, s.span);
                let mut other = pending.clone();
                self.stmts(then_body, pending);
                self.stmts(else_body, &mut other);
                pending.extend(other);
            }
            StmtKind::For { body, .. } => {
                // Zero, one or more iterations: twice reaches the fixed point (a store still
                // pending at the end of the body meets the rewrites at its start).
                let entry = pending.clone();
                self.stmts(body, pending);
                self.stmts(body, pending);
                pending.extend(entry);
            }
            StmtKind::While { cond, body } => {
                self.cond_reads(cond, s.span);
                let entry = pending.clone();
                self.stmts(body, pending);
                self.stmts(body, pending);
                pending.extend(entry);
            }
            _ => self.reads(s),
        }
    }

    fn cond_reads(&mut self, cond: &HExpr, span: Span) {
        if self.stored.is_empty() {
            return;
        }
        let mut reads = Reads(Vec::new());
        visit::walk_expr(&mut reads, cond);
        for b in reads.0 {
            if let Some(store) = self.stored.get(&b) {
                self.late_reads.push((span, *store, b));
            }
        }
    }
}
