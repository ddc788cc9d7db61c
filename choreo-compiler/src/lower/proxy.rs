//! Which shared buffers of a kernel its threads touch through the generic proxy.
//!
//! The copy engine (TMA) and WGMMA's shared-memory operands go through the async proxy; the
//! threads' own loads and stores (element accesses, copies by threads, `ldmatrix`, `mma.store`,
//! addresses passed to calls or asm) through the generic proxy. Between the two, only
//! `fence.proxy.async` orders memory (PTX memory model; spec-tier3 §10.2, §10.3). A buffer that
//! no thread ever touches through the generic proxy needs no such fence: in the Choreo GEMM the
//! rings are filled by TMA and read by WGMMA only, and fencing every k-step in 256 threads was
//! measurable.
//!
//! The walk is conservative: every access of a buffer counts as generic except a TMA
//! statement's own (its element loop is only its meaning) and a WGMMA's direct operands. What
//! the walk does not know is generic.

use crate::hir::mma::{FragRef, MmaOp, WgA};
use crate::hir::visit::{self, Visitor, Walk};
use crate::hir::{BufferRef, Stmt, StmtKind, VarId};
use std::collections::BTreeSet;

/// The shared-memory proxies of one kernel body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SharedProxies {
    /// Buffers (declared in the function) some thread reads or writes through the generic
    /// proxy.
    pub generic: BTreeSet<VarId>,
    /// Buffers some TMA load fills (the async proxy writes them).
    pub tma_filled: BTreeSet<VarId>,
}

impl SharedProxies {
    /// Whether `buffer` is touched through the generic proxy (parameters always count: they
    /// are not shared memory, and nothing is lost by answering conservatively).
    pub fn generic(&self, buffer: BufferRef) -> bool {
        match buffer {
            BufferRef::Local(v) => self.generic.contains(&v),
            BufferRef::Param(_) => true,
        }
    }

    /// Whether a thread's generic accesses may precede a TMA load into the same buffer: then a
    /// trigger that hands a slot back to a load's issuer must fence first.
    pub fn generic_before_tma(&self) -> bool {
        self.tma_filled.iter().any(|v| self.generic.contains(v))
    }
}

/// The proxies of the shared buffers that `body` (a kernel body) uses.
pub(super) fn shared_proxies(body: &[Stmt]) -> SharedProxies {
    let mut walk = ProxyWalk(SharedProxies::default());
    visit::walk_stmts(&mut walk, body);
    walk.0
}

struct ProxyWalk(SharedProxies);

impl ProxyWalk {
    /// A fragment's indices are ordinary expressions (they may read buffers).
    fn frag(&mut self, f: &FragRef) {
        for i in &f.index {
            visit::walk_expr(self, i);
        }
    }
}

impl<'a> Visitor<'a> for ProxyWalk {
    fn stmt(&mut self, s: &'a Stmt) -> Walk {
        match &s.kind {
            StmtKind::Dma(d) => match &d.tma {
                Some(t) => {
                    if let (false, BufferRef::Local(v)) = (t.store, t.shared.buffer) {
                        self.0.tma_filled.insert(v);
                    }
                    // The coordinates and the role's predicates are computed by threads; the
                    // element loop is only the copy's meaning.
                    let slot = t.event.as_ref().map(|e| e.index.expr());
                    for e in t.coords.iter().chain(t.role.iter().flatten()).chain(slot) {
                        visit::walk_expr(self, e);
                    }
                    Walk::Skip
                }
                None => Walk::Continue,
            },
            StmtKind::Mma(op) => {
                let MmaOp::WgExec { acc, a, b, .. } = op.as_ref() else { return Walk::Continue };
                self.frag(acc);
                let mut operands = vec![b.as_ref()];
                match a {
                    WgA::Shared(o) => operands.push(o),
                    WgA::Regs(f) => self.frag(f),
                }
                // The descriptors' addresses and strides are computed by the threads; the
                // operands themselves are read by the async proxy.
                for o in operands {
                    for e in o.tile.strides.iter().chain([&o.k_stride]) {
                        visit::walk_expr(self, e);
                    }
                }
                Walk::Skip
            }
            _ => Walk::Continue,
        }
    }

    fn buffer(&mut self, buffer: BufferRef) {
        if let BufferRef::Local(v) = buffer {
            self.0.generic.insert(v);
        }
    }
}
