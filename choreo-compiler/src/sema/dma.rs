//! DMA, futures and waits (spec §5.6, §14): `dma.copy`/`.pad`/`.transp` (sync and `.async`),
//! `=> shared`/`local`/`global`, `after`, `dma.any`, `wait`, `swap`/`rotate`, `f.data`,
//! `f.span`, host-level DMA.
//!
//! A DMA in a kernel becomes a [`hir::Dma`]: a loop over the copied box whose iteration
//! assigns one destination element. The element expressions are ordinary element accesses of
//! the buffers underneath the two views, so the bounds analysis proves (or checks) every
//! element a DMA touches like any other access. A DMA into a fresh buffer (`=> shared`)
//! declares that buffer just before itself; its future is a pointer to it, so that `swap`
//! and the re-binding of a placeholder exchange buffers at run time. A DMA in host code is a
//! device copy of whole buffers, or a kernel of its own whose one statement is such a loop,
//! shared by the whole grid (see [`Checker::host_dma`]).

use super::fold;
use super::scope::{FutureData, FutureSym, Symbol};
use super::{Checker, Region, Val};
use crate::ast::{self, ExprKind};
use crate::diagnostics::Diagnostic;
use crate::hir::{
    self, AssignOp, BinOp, Binder, Check, CheckKind, Dim, ElemTy, FutureBind, HExpr, HExprKind,
    KernelAttrs, KernelId, KernelOrigin, Level, LocalOrigin, LocalPlace, MathFn, ParallelTree,
    Participants, Place, SpannedTy, Stmt, StmtKind, Storage, Ty, VarId, View, arith,
};
use crate::source::Span;
use std::collections::{BTreeMap, BTreeSet};

fn stmt(kind: StmtKind, span: Span) -> Stmt {
    Stmt { kind, span }
}

/// The storage names of spec §14.2 (host parameters are device copies in global memory).
fn storage_name(s: Storage) -> &'static str {
    s.as_str()
}

/// What a DMA does to the elements (after its configuration was checked).
enum Transfer {
    Copy,
    Pad { low: Vec<HExpr>, high: Vec<HExpr>, value: HExpr },
    Transpose(Vec<usize>),
}

impl Checker<'_> {
    // -- futures as values ----------------------------------------------------------------

    /// The data view of a future.
    pub(crate) fn future_view(&mut self, f: &FutureSym, span: Span) -> Option<View> {
        match &f.data {
            FutureData::View(v) => Some(v.clone()),
            FutureData::Pointer(var) => match self.locals.get(var.index()).map(|l| l.ty.clone()) {
                Some(Ty::Spanned(t)) => Some(View::whole(hir::BufferRef::Local(*var), &t, span)),
                _ => {
                    let name =
                        self.locals.get(var.index()).map(|l| l.name.clone()).unwrap_or_default();
                    self.error_label(
                        "E0450",
                        span,
                        format!(
                            "the placeholder '{name}' has no data yet: a DMA must be bound to it \
                             first"
                        ),
                        "no data",
                    );
                    None
                }
            },
        }
    }

    /// `f.data` (spec §14.4).
    pub(crate) fn check_future_data(&mut self, base: &ast::Expr, span: Span) -> Val {
        match self.check_expr(base) {
            Val::Future(f) => match self.future_view(&f, span) {
                Some(v) => self.data_val(v),
                None => Val::Error,
            },
            Val::Error => Val::Error,
            other => {
                self.error_label(
                    "E0450",
                    base.span,
                    format!("'.data' requires a future but got '{}'", other.describe()),
                    "not a future",
                );
                Val::Error
            }
        }
    }

    // -- DMA ------------------------------------------------------------------------------

    /// `[f =] dma.op[.async] src => dst [after g];` (spec §14.1).
    pub(crate) fn check_dma(&mut self, d: &ast::DmaStmt, span: Span, out: &mut Vec<Stmt>) {
        let poison = |this: &mut Self| {
            if let Some(f) = &d.future {
                if this.scopes.lookup(&f.name).is_none() {
                    this.declare_poisoned(f);
                }
            }
        };
        let tma = d.engine == ast::DmaEngine::Tma;
        if tma && !self.tma_available(span) {
            return poison(self);
        }
        let Some(mods) = self.dma_modifiers(d) else { return poison(self) };
        let is_async = d.is_async.is_some();
        if is_async && d.future.is_none() {
            self.error_label(
                "E0448",
                span,
                "forbid to associated async dma without a named future or a named event.",
                "an asynchronous DMA needs a future: `f = dma.copy.async …`",
            );
            return;
        }
        let src = match &d.src.kind {
            ExprKind::Select { index, items } => self.select_data(index, items, d.src.span, out),
            _ => self.check_data(&d.src, "a DMA source"),
        };
        let Some(src) = src else { return poison(self) };
        let transfer = if tma || mods.swizzle != 0 {
            match (&d.op, tma) {
                (ast::DmaOp::Copy, _) | (ast::DmaOp::Load, true) => Transfer::Copy,
                _ => {
                    self.error_label(
                        "E0451",
                        d.op_span,
                        "a TMA or swizzled copy moves a tile as it is (`tma.load`, `tma.copy`, \
                         `dma.copy`): no padding or transposition",
                        "not a plain copy",
                    );
                    return poison(self);
                }
            }
        } else {
            match self.transfer(&d.op, d.op_span, &src) {
                Some(t) => t,
                None => return poison(self),
            }
        };
        if !self.in_device() {
            if tma || mods.swizzle != 0 {
                self.error_label(
                    "E0460",
                    span,
                    "TMA and swizzled copies move tiles between global and shared memory inside \
                     a parallel-by",
                    "host code",
                );
                return poison(self);
            }
            return self.host_dma(d, src, &transfer, span, out);
        }
        // The destination: a fresh buffer or existing data.
        let fresh = match &d.dst {
            ast::DmaDest::Storage(storage, sspan) => Some((*storage, *sspan)),
            ast::DmaDest::Expr(_) => None,
        };
        let (dst, site) = match (&d.dst, fresh) {
            (_, Some((ast::Storage::Global, sspan))) => {
                self.error_label(
                    "E0449",
                    sspan,
                    "`global' can not be DMA destination inside parallel-by (global memory is \
                     allocated in host code)",
                    "inside a parallel-by",
                );
                return poison(self);
            }
            (_, Some((storage, sspan))) => {
                let storage =
                    if storage == ast::Storage::Local { Storage::Local } else { Storage::Shared };
                let dims = transfer_dims(&transfer, &src.dims, span);
                if storage == Storage::Local && dims.iter().any(|d| d.as_const().is_none()) {
                    self.error_label(
                        "E0443",
                        sspan,
                        "a DMA into `local` needs a source whose shape is known at compile time \
                         (a local buffer is a per-thread array)",
                        "not constant",
                    );
                    return poison(self);
                }
                if storage == Storage::Shared && !self.one_instance_per_block() {
                    // A shared buffer is the block's: every instance of the level would copy
                    // into the same one, each its own data.
                    self.diags.push(
                        Diagnostic::error(
                            "E0459",
                            sspan,
                            "a DMA `=> shared` in the body of a `group` level with several \
                             instances per block gives them all the same buffer",
                        )
                        .with_label("one buffer per block, shared by every instance")
                        .with_help(
                            "declare the tiles in block-level code with a dimension per \
                             instance (`shared f32 [4, 64] tiles;` for `parallel w by 4 : \
                             group`) and copy into `tiles.chunkat(w, _)`",
                        ),
                    );
                    return poison(self);
                }
                let name = d.future.as_ref().map_or("dma", |f| f.name.as_str()).to_string();
                let buffer = self.declare_site_buffer(&name, src.elem, dims, storage, span, out);
                let ty = self.locals.get(buffer.index()).map(|l| l.ty.clone());
                let Some(Ty::Spanned(t)) = ty else { return };
                (View::whole(hir::BufferRef::Local(buffer), &t, span), Some(buffer))
            }
            (ast::DmaDest::Expr(e), None) => {
                let dst = match &e.kind {
                    ExprKind::Select { index, items } => {
                        self.select_data(index, items, e.span, out)
                    }
                    _ => self.check_data(e, "a DMA destination"),
                };
                match dst {
                    Some(v) => (v, None),
                    None => return poison(self),
                }
            }
            (ast::DmaDest::Storage(..), None) => return,
        };
        if !self.dma_types_agree(&src, &dst, &transfer, span, dest_span(&d.dst)) {
            return poison(self);
        }
        // Directions (spec §14.2; tier 3 §3.1 for TMA).
        let global = |s: Storage| matches!(s, Storage::Host | Storage::Global);
        let store = tma && src.storage == Storage::Shared && global(dst.storage);
        let load = global(src.storage) && dst.storage == Storage::Shared;
        if tma && !(load || (store && d.op == ast::DmaOp::Copy)) {
            self.error_label(
                "E0445",
                span,
                format!(
                    "GPU does not allow the TMA {} ({} -> {}).",
                    if d.op == ast::DmaOp::Load { "load" } else { "copy" },
                    storage_name(src.storage),
                    storage_name(dst.storage)
                ),
                "TMA loads global memory into shared memory (`tma.load`) and stores shared \
                 memory into global memory (`tma.copy`)",
            );
            return poison(self);
        }
        if tma && store && mods.multicast.is_some() {
            return self.multicast_store(mods, span, poison);
        }
        if !tma
            && mods.swizzle != 0
            && dst.storage != Storage::Shared
            && src.storage != Storage::Shared
        {
            self.error_label(
                "E0461",
                span,
                "a swizzled `dma.copy` must copy into (or out of) shared memory",
                "no shared side",
            );
            return poison(self);
        }
        let allowed = if is_async && tma {
            true
        } else if is_async {
            global(src.storage) && dst.storage == Storage::Shared
        } else {
            !(global(src.storage) && global(dst.storage))
        };
        if !allowed {
            self.error_label(
                "E0445",
                span,
                format!(
                    "GPU does not allow the {} copy ({} -> {}).",
                    if is_async { "async" } else { "sync" },
                    storage_name(src.storage),
                    storage_name(dst.storage)
                ),
                if is_async {
                    "an asynchronous DMA copies global memory into shared memory"
                } else {
                    "a kernel cannot copy global memory to global memory with a DMA"
                },
            );
            return poison(self);
        }
        // `after g`: the DMA starts once g has completed.
        if let Some(g) = &d.after {
            if let Some(groups) = self.waited_groups(std::slice::from_ref(g), true) {
                if !groups.is_empty() {
                    let participants = self.participants(Storage::Shared);
                    self.push_waits(groups, participants, g.span, out);
                }
            }
        }
        // The mbarrier of a TMA load (an asynchronous one's future carries it).
        let barrier = (tma && !store).then(|| self.new_tma_barrier());
        // The future.
        let (bind, group) = match (&d.future, site) {
            (None, _) => (None, None),
            (Some(name), site) => {
                match self.bind_future(name, &dst, site, is_async, barrier, out) {
                    Some(b) => b,
                    None => return,
                }
            }
        };
        // A future's buffer is written through the future (a re-bound placeholder may hold
        // another DMA's buffer after a `swap`).
        let dst = match bind {
            Some(b) => match self.locals.get(b.future.index()).map(|l| l.ty.clone()) {
                Some(Ty::Spanned(t)) => View::whole(hir::BufferRef::Local(b.future), &t, span),
                _ => dst,
            },
            None => dst,
        };
        let participants = self.participants(dst.storage);
        let info = if tma {
            let (g, sh) = if store { (&dst, &src) } else { (&src, &dst) };
            match self.tma_info(g, sh, store, mods, participants, span) {
                Some(mut t) => {
                    if let Some(b) = barrier {
                        t.barrier = b;
                    }
                    Some(Box::new(t))
                }
                None => return,
            }
        } else {
            if mods.swizzle != 0 {
                let shared = if dst.storage == Storage::Shared { &dst } else { &src };
                let shared = shared.clone();
                if !self.check_swizzle(mods.swizzle, &shared, false, span) {
                    return;
                }
                if src.dims.iter().zip(&dst.dims).any(|(a, b)| a != b) {
                    self.error_label(
                        "E0461",
                        span,
                        "a swizzled copy needs source and destination tiles of the same shape",
                        "different shapes",
                    );
                    return;
                }
            }
            None
        };
        if let (true, true, Some(g)) = (tma && store, is_async, group) {
            if let Some(k) = self.kernel.as_mut() {
                k.tma_store_groups.insert(g);
            }
        }
        let Some(dma) = self.dma_loop(src, dst, &transfer, is_async, participants, span) else {
            return;
        };
        let swizzle = mods.swizzle;
        if swizzle != 0 && dma.dst.storage == Storage::Shared {
            self.note_swizzled(dma.dst.buffer);
            if let Some(site) = site {
                self.note_swizzled(hir::BufferRef::Local(site));
            }
        }
        if let (true, Some(g)) = (tma && is_async, group) {
            self.note_tma_issue(g);
        }
        self.check_copy_swizzle(&dma, site, swizzle, span);
        let dma = hir::Dma { bind, group, tma: info, swizzle, ..dma };
        self.record_plain_fill(&dma, site, span);
        out.push(stmt(StmtKind::Dma(Box::new(dma)), span));
    }

    /// The checked configuration of a DMA.
    fn transfer(&mut self, op: &ast::DmaOp, span: Span, src: &View) -> Option<Transfer> {
        let rank = src.dims.len();
        match op {
            ast::DmaOp::Copy => Some(Transfer::Copy),
            ast::DmaOp::Load => {
                self.error_label(
                    "E0451",
                    span,
                    "`.load` is a TMA operation (use `dma.copy`)",
                    "not a DMA operation",
                );
                None
            }
            ast::DmaOp::Pad(cfg) => {
                let mut lists = Vec::new();
                for (what, items) in [("low", &cfg.low), ("high", &cfg.high), ("mid", &cfg.mid)] {
                    let mut out = Vec::new();
                    for item in items {
                        match self.check_expr(item) {
                            Val::Tuple { items, .. } => out.extend(items),
                            v => out.push(self.expect_int(v, item.span, "a padding")),
                        }
                    }
                    if out.len() != rank {
                        self.error_label(
                            "E0451",
                            span,
                            format!(
                                "DMA PAD statement has a rank mismatch: {} != {rank}.",
                                out.len()
                            ),
                            format!("{what} padding of the wrong rank"),
                        );
                        return None;
                    }
                    for e in &out {
                        match fold::const_int(e) {
                            Some(v) if v >= 0 => {}
                            _ => {
                                self.error_label(
                                    "E0451",
                                    e.span,
                                    "a padding must be a non-negative integer constant",
                                    "not a non-negative constant",
                                );
                                return None;
                            }
                        }
                    }
                    lists.push(out);
                }
                if lists[2].iter().any(|e| fold::const_int(e) != Some(0)) {
                    self.error_label(
                        "E0451",
                        span,
                        "dma.pad with pad_mid is not supported on the CUDA target (must set \
                         pad_mid to 0).",
                        "interior padding",
                    );
                    return None;
                }
                let value = self.check_scalar(&cfg.value, "the padding value");
                let value = self.convert(value, src.elem)?;
                let mut lists = lists.into_iter();
                let (low, high) = (lists.next()?, lists.next()?);
                Some(Transfer::Pad { low, high, value })
            }
            ast::DmaOp::Transp(perm) => {
                let p: Vec<usize> = perm.iter().map(|(l, _)| l.value.max(-1) as usize).collect();
                let mut sorted = p.clone();
                sorted.sort_unstable();
                if sorted != (0..rank).collect::<Vec<_>>() {
                    self.error_label(
                        "E0451",
                        span,
                        format!(
                            "the transpose layout is invalid: expected a permutation of 0..{rank}"
                        ),
                        "not a permutation of the dimensions",
                    );
                    return None;
                }
                Some(Transfer::Transpose(p))
            }
        }
    }

    /// Element types and ranks of a DMA's source and destination (`E0446`, `E0447`), the
    /// shape of existing data a `dma.pad`/`dma.transp` writes (`E0458`), and a warning when
    /// the copied box is not a prefix of one of them (`W0405`). `dst_span` is the destination
    /// as written.
    fn dma_types_agree(
        &mut self,
        src: &View,
        dst: &View,
        t: &Transfer,
        span: Span,
        dst_span: Span,
    ) -> bool {
        if src.elem != dst.elem {
            self.error_label(
                "E0446",
                span,
                format!(
                    "DMA statement contains a type mismatch: the element types of the 'from'({}) \
                     and 'to'({}) are inconsistent.",
                    src.elem.as_str(),
                    dst.elem.as_str()
                ),
                "different element types",
            );
            return false;
        }
        if src.dims.len() != dst.dims.len() {
            self.error_label(
                "E0447",
                span,
                format!(
                    "DMA statement has a rank mismatch between 'from' and 'to': {} != {}.",
                    src.dims.len(),
                    dst.dims.len()
                ),
                "different ranks",
            );
            return false;
        }
        let want = transfer_dims(t, &src.dims, span);
        if !matches!(t, Transfer::Copy) {
            // A padded or transposed copy writes its whole result: existing data must have
            // that shape (where both are known; otherwise the common corner is written).
            let differs = want.iter().zip(&dst.dims).enumerate().find_map(|(k, (a, b))| {
                match (a.as_const(), b.as_const()) {
                    (Some(a), Some(b)) if a != b => Some((k, a, b)),
                    _ => None,
                }
            });
            if let Some((k, want, got)) = differs {
                let (op, result) = match t {
                    Transfer::Pad { .. } => ("dma.pad", "padded"),
                    _ => ("dma.transp", "transposed"),
                };
                self.diags.push(
                    Diagnostic::error(
                        "E0458",
                        dst_span,
                        format!(
                            "the destination of this {op} has extent {got} in dimension {k}, but \
                             the {result} source has {want}"
                        ),
                    )
                    .with_label(format!("extent {got} in dimension {k}"))
                    .with_secondary(span, format!("the {result} source has extent {want} there"))
                    .with_help(format!(
                        "copy into data of the {result} shape, or let the DMA allocate it \
                         (`=> global` on the host, `=> shared`/`=> local` in a kernel)"
                    )),
                );
                return false;
            }
        }
        let (mut smaller, mut larger) = (false, false);
        for (a, b) in want.iter().zip(&dst.dims) {
            if let (Some(a), Some(b)) = (a.as_const(), b.as_const()) {
                smaller |= a < b;
                larger |= a > b;
            }
        }
        if smaller && larger {
            self.warn(
                "W0405",
                span,
                "the DMA's source and destination shapes differ and neither holds the other: \
                 only their common corner (from the origin) is copied",
                "only the common corner is copied",
            );
        }
        true
    }

    /// Declares the buffer a DMA allocates (`=> shared`, `=> local`).
    fn declare_site_buffer(
        &mut self,
        name: &str,
        elem: ElemTy,
        dims: Vec<Dim>,
        storage: Storage,
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> VarId {
        let place = if storage == Storage::Local {
            LocalPlace::LocalBuffer
        } else {
            LocalPlace::SharedBuffer
        };
        let ty = Ty::Spanned(SpannedTy { elem, dims, storage });
        let var =
            self.new_local(&format!("{name}__buf"), span, ty, place, false, LocalOrigin::Decl);
        out.push(stmt(StmtKind::DeclBuffer { var, init: None }, span));
        var
    }

    /// Binds the future `name` to a DMA's destination: a new future, or the re-binding of a
    /// placeholder. Returns the DMA's bind and group.
    fn bind_future(
        &mut self,
        name: &ast::Ident,
        dst: &View,
        site: Option<VarId>,
        is_async: bool,
        barrier: Option<u32>,
        out: &mut Vec<Stmt>,
    ) -> Option<(Option<FutureBind>, Option<VarId>)> {
        let existing = match self.scopes.lookup(&name.name).cloned() {
            Some(Symbol::Future(f)) if f.placeholder => Some(f),
            Some(_) if self.scopes.declared_here(&name.name).is_some() => {
                // A duplicate declaration (E0402, reported by declare_symbol).
                self.declare_symbol(name, Symbol::Local(VarId(u32::MAX)));
                return None;
            }
            _ => None,
        };
        if let Some(f) = existing {
            // An asynchronous TMA store bound to a `tma.any` placeholder (spec-tier3 §3.3): the
            // future names the store's bulk group (no buffer, no mbarrier), so a loop can wait
            // for the previous iteration's store before rewriting its source.
            let tma_placeholder = f.group.filter(|g| self.is_tma_group(*g));
            if let (None, true, Some(g)) = (site, is_async, tma_placeholder) {
                if barrier.is_none() && matches!(dst.storage, Storage::Host | Storage::Global) {
                    return Some((None, Some(g)));
                }
            }
            // Re-binding a placeholder: it must get a buffer of its type.
            let (FutureData::Pointer(ptr), Some(site)) = (&f.data, site) else {
                self.error_label(
                    "E0450",
                    name.span,
                    format!(
                        "the placeholder '{}' can only be bound to a DMA into a new buffer (`=> \
                         shared` or `=> local`)",
                        name.name
                    ),
                    "not a DMA into a new buffer",
                );
                return None;
            };
            let want = self.locals.get(site.index()).map(|l| l.ty.clone());
            let have = self.locals.get(ptr.index()).map(|l| l.ty.clone());
            match (&have, &want) {
                (Some(Ty::Error), Some(w)) => {
                    if let Some(l) = self.locals.get_mut(ptr.index()) {
                        l.ty = w.clone();
                    }
                }
                (Some(h), Some(w)) if h == w => {}
                (Some(h), Some(w)) => {
                    self.error_label(
                        "E0450",
                        name.span,
                        format!(
                            "'{}' holds {} but this DMA gives it {}",
                            name.name,
                            super::types::ty_name(h),
                            super::types::ty_name(w)
                        ),
                        "a different data type",
                    );
                    return None;
                }
                _ => return None,
            }
            let group = if is_async { f.group } else { None };
            let tma_group = group.is_some_and(|g| self.is_tma_group(g));
            if group.is_some() && tma_group != barrier.is_some() {
                self.error_label(
                    "E0450",
                    name.span,
                    format!(
                        "the placeholder '{}' is a {} future but this is a {} statement",
                        name.name,
                        if tma_group { "TMA (`tma.any`)" } else { "DMA (`dma.any`)" },
                        if barrier.is_some() { "TMA" } else { "DMA" }
                    ),
                    "a different engine",
                );
                return None;
            }
            return Some((Some(FutureBind { future: *ptr, buffer: site, first: false }), group));
        }
        // A new future.
        let group = match (is_async, barrier) {
            (false, _) => None,
            (true, None) => Some(self.new_group_local(&name.name, name.span, 0, out)),
            (true, Some(b)) => {
                let g = self.new_group_local(&name.name, name.span, i128::from(b), out);
                if let Some(k) = self.kernel.as_mut() {
                    k.tma_groups.insert(g);
                }
                Some(g)
            }
        };
        let (data, bind) = match site {
            Some(site) => {
                let ty = self.locals.get(site.index()).map_or(Ty::Error, |l| l.ty.clone());
                let ptr = self.new_local(
                    &name.name,
                    name.span,
                    ty,
                    LocalPlace::Future,
                    true,
                    LocalOrigin::Future { group },
                );
                out.push(stmt(StmtKind::Let { var: ptr, init: None }, name.span));
                let bind = FutureBind { future: ptr, buffer: site, first: true };
                (FutureData::Pointer(ptr), Some(bind))
            }
            None => (FutureData::View(dst.clone()), None),
        };
        self.declare_symbol(name, Symbol::Future(FutureSym { data, group, placeholder: false }));
        Some((bind, group))
    }

    /// Whether the group local `g` is a TMA future's (it holds an mbarrier number).
    pub(crate) fn is_tma_group(&self, g: VarId) -> bool {
        self.kernel.as_ref().is_some_and(|k| k.tma_groups.contains(&g))
    }

    /// A future's copy-group local (`int`, `init` (0) until its DMA commits; a TMA future's
    /// holds the number of its mbarrier).
    fn new_group_local(
        &mut self,
        name: &str,
        span: Span,
        init: i128,
        out: &mut Vec<Stmt>,
    ) -> VarId {
        let var = self.new_local(
            &format!("{name}__group"),
            span,
            Ty::Scalar(ElemTy::S32),
            LocalPlace::DeviceScalar,
            true,
            LocalOrigin::Decl,
        );
        out.push(stmt(StmtKind::Let { var, init: Some(fold::int_lit(init, span)) }, span));
        var
    }

    /// Who executes a DMA into `dst` here, or waits for one (spec §14.5).
    ///
    /// Inside `inthreads`, only the threads the predicates select take part. They are still
    /// whole groups of participants, because a predicate may only use what is in scope and
    /// the same for every thread of such a group (`strictly_divergent`: parallel indices,
    /// immutable locals computed from them, values every thread shares; never data, mutable
    /// or per-thread values, calls or atomics):
    /// - in block-level code the only parallel indices in scope are the block's, and the
    ///   locals in scope were computed from them and from shared values: a predicate holds in
    ///   all threads of a block or in none, so the block's threads share the DMA and its
    ///   block barrier as outside `inthreads`;
    /// - in the body of an intra-block level `l`, the indices in scope are those of `l` and of
    ///   the levels around it (levels nest strictly downwards, E0607, so no index of a level
    ///   inside `l` is in scope), and all threads of an instance of `l` share them: the
    ///   instance's threads run the DMA together or not at all. When a predicate depends on an
    ///   intra-block index, other instances may skip it, so the participants are a
    ///   [`Participants::SelectedInstance`], which lowering synchronises without a block
    ///   barrier (or rejects, E0810); with predicates on block indices only, the whole block
    ///   agrees and the usual level synchronisation stays correct;
    /// - in thread-level code, and for `local` destinations, each thread copies alone.
    ///
    /// An `if` or `while` whose condition depends on an intra-block index selects instances
    /// the same way and is counted with the `inthreads` (`selecting_conditions`). (Other
    /// conditions are not checked: like outside `inthreads`, a DMA under a condition that
    /// differs between the threads of its participant group is the program's error.)
    /// Whether the code being checked runs once per block: block-level code, or the body of
    /// intra-block levels whose extents (all of them, nested) multiply to the constant 1.
    /// Thread-level code counts as once per block here when its group levels do: its DMAs are
    /// per thread (see [`Checker::participants`]).
    fn one_instance_per_block(&self) -> bool {
        if !matches!(self.region, Region::Device(Level::Group | Level::Group4)) {
            return true;
        }
        self.level_extents.iter().flatten().all(|d| d.as_const() == Some(1))
    }

    pub(crate) fn participants(&self, dst: Storage) -> Participants {
        if dst == Storage::Local {
            return Participants::Thread;
        }
        match self.region {
            Region::Device(Level::Block) => Participants::Block,
            Region::Device(Level::Thread) | Region::Host => Participants::Thread,
            Region::Device(Level::Group | Level::Group4) => match self.level_stack.last() {
                None => Participants::Block,
                Some(l) if self.selecting_conditions > 0 => Participants::SelectedInstance(*l),
                Some(l) => Participants::Level(*l),
            },
        }
    }

    /// The loop of a DMA: index locals over the copied box and the element assignment.
    fn dma_loop(
        &mut self,
        src: View,
        dst: View,
        t: &Transfer,
        is_async: bool,
        participants: Participants,
        span: Span,
    ) -> Option<hir::Dma> {
        // The box: the destination's extents for pad (every element of it is written: the
        // ones outside the source get the padding value), the common corner of source and
        // destination for a copy and a transposition (source dimension perm[d] for d).
        let extents: Vec<Dim> = match t {
            Transfer::Copy => {
                src.dims.iter().zip(&dst.dims).map(|(a, b)| dim_min(a, b, span)).collect()
            }
            Transfer::Transpose(perm) => dst
                .dims
                .iter()
                .zip(perm)
                .map(|(d, p)| src.dims.get(*p).map_or_else(|| d.clone(), |s| dim_min(s, d, span)))
                .collect(),
            Transfer::Pad { .. } => dst.dims.clone(),
        };
        let indices: Vec<VarId> = (0..extents.len())
            .map(|k| {
                self.new_local(
                    &format!("dma_i{k}"),
                    span,
                    Ty::BoundedInt,
                    LocalPlace::DeviceScalar,
                    false,
                    LocalOrigin::Decl,
                )
            })
            .collect();
        let var = |v: VarId| HExpr { kind: HExprKind::Var(v), ty: Ty::BoundedInt, span };
        let at = |this: &mut Self, view: &View, idx: Vec<HExpr>| {
            this.mark_access(view.buffer, true, false);
            let id = this.next_access();
            HExpr {
                kind: HExprKind::At { buffer: view.buffer, index: view.element(idx, span), id },
                ty: Ty::Scalar(view.elem),
                span,
            }
        };
        let value = match t {
            Transfer::Copy => at(self, &src, indices.iter().map(|v| var(*v)).collect()),
            Transfer::Transpose(perm) => {
                // Destination dimension d is source dimension perm[d].
                let mut idx = vec![fold::int_lit(0, span); perm.len()];
                for (d, p) in perm.iter().enumerate() {
                    idx[*p] = var(indices[d]);
                }
                at(self, &src, idx)
            }
            Transfer::Pad { low, value, .. } => {
                let mut inside: Option<HExpr> = None;
                let mut idx = Vec::with_capacity(low.len());
                for ((v, lo), extent) in indices.iter().zip(low).zip(&src.dims) {
                    let i = self.scalar_binary(BinOp::Sub, var(*v), lo.clone(), span, false, span);
                    let ge = self.scalar_binary(
                        BinOp::Ge,
                        i.clone(),
                        fold::int_lit(0, span),
                        span,
                        false,
                        span,
                    );
                    let lt = self.scalar_binary(
                        BinOp::Lt,
                        i.clone(),
                        extent.to_expr(span),
                        span,
                        false,
                        span,
                    );
                    let both = self.scalar_binary(BinOp::And, ge, lt, span, false, span);
                    inside = Some(match inside {
                        None => both,
                        Some(acc) => self.scalar_binary(BinOp::And, acc, both, span, false, span),
                    });
                    idx.push(i);
                }
                let read = at(self, &src, idx);
                let cond = inside.unwrap_or(HExpr {
                    kind: HExprKind::Bool(true),
                    ty: Ty::Scalar(ElemTy::Bool),
                    span,
                });
                HExpr {
                    kind: HExprKind::Ternary {
                        cond: Box::new(cond),
                        then_value: Box::new(read),
                        else_value: Box::new(value.clone()),
                    },
                    ty: Ty::Scalar(src.elem),
                    span,
                }
            }
        };
        self.mark_access(dst.buffer, false, true);
        let id = self.next_access();
        let target = Place::Elem {
            buffer: dst.buffer,
            index: dst.element(indices.iter().map(|v| var(*v)).collect(), span),
            id,
        };
        let element = stmt(StmtKind::Assign { target, op: AssignOp::Assign, value }, span);
        Some(hir::Dma {
            plain: matches!(t, Transfer::Copy),
            src,
            dst,
            indices,
            extents,
            element,
            is_async,
            participants,
            bind: None,
            group: None,
            tma: None,
            swizzle: 0,
        })
    }

    /// A DMA in host code (spec §14.6). A plain copy between whole buffers is a device-to-device
    /// copy ([`StmtKind::HostCopy`]); any other — of views, padded, transposed — is a kernel
    /// of its own whose threads share the DMA's loop ([`hir::KernelOrigin::HostDma`]),
    /// launched in program order like a synchronous parallel-by, its accesses proven or
    /// checked like every kernel's. `=> global` allocates a buffer shaped like the (padded or
    /// transposed) source.
    fn host_dma(
        &mut self,
        d: &ast::DmaStmt,
        src: View,
        t: &Transfer,
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        let whole = |this: &Self, v: &View| v.is_whole(&this.buffer_dims(v.buffer));
        let (dst, dst_span) = match &d.dst {
            ast::DmaDest::Storage(ast::Storage::Global, sspan) => {
                let name = d.future.as_ref().map_or("dma", |f| f.name.as_str()).to_string();
                let dims = transfer_dims(t, &src.dims, span);
                // Extents computed from the source's (a view's) must be positive, like those
                // of a declared buffer: checked at entry when they only depend on the
                // parameters, else right here. (Padding a positive extent keeps it positive.)
                for (i, dim) in dims.iter().enumerate() {
                    let from = match t {
                        Transfer::Transpose(perm) => perm.get(i).copied().unwrap_or(i),
                        Transfer::Copy | Transfer::Pad { .. } => i,
                    };
                    if !matches!(src.dims.get(from), Some(Dim::Expr(_))) {
                        continue;
                    }
                    let Dim::Expr(e) = dim else { continue };
                    let check = Check {
                        kind: CheckKind::Positive((**e).clone()),
                        message: format!(
                            "the extent {i} of the buffer that '{name}' allocates must be \
                             greater than 0"
                        ),
                        span: e.span,
                    };
                    if Self::entry_evaluable(e) {
                        if !self.entry_checks.contains(&check) {
                            self.entry_checks.push(check);
                        }
                    } else {
                        out.push(stmt(StmtKind::Check(check), span));
                    }
                }
                let ty = SpannedTy { elem: src.elem, dims, storage: Storage::Global };
                let var = self.new_local(
                    &format!("{name}__buf"),
                    span,
                    Ty::Spanned(ty.clone()),
                    LocalPlace::GlobalBuffer,
                    false,
                    LocalOrigin::Decl,
                );
                out.push(stmt(StmtKind::DeclBuffer { var, init: None }, span));
                (View::whole(hir::BufferRef::Local(var), &ty, span), *sspan)
            }
            ast::DmaDest::Storage(storage, sspan) => {
                self.error_label(
                    "E0449",
                    *sspan,
                    format!(
                        "`{}' can not be DMA destination outside parallel-by.",
                        storage.as_str()
                    ),
                    "host code",
                );
                return;
            }
            ast::DmaDest::Expr(e) => match self.check_data(e, "a DMA destination") {
                Some(v) => (v, e.span),
                None => return,
            },
        };
        if !self.dma_types_agree(&src, &dst, t, span, dst_span) {
            return;
        }
        if let Some(f) = &d.future {
            self.declare_symbol(
                f,
                Symbol::Future(FutureSym {
                    data: FutureData::View(dst.clone()),
                    group: None,
                    placeholder: false,
                }),
            );
        }
        if matches!(t, Transfer::Copy) && whole(self, &src) && whole(self, &dst) {
            let count = |dims: &[Dim]| arith::dim_product(dims, span);
            let (sc, dc) = (count(&src.dims), count(&dst.dims));
            let n = match (sc.as_const(), dc.as_const()) {
                (Some(a), Some(b)) => Dim::Const(a.min(b)),
                _ if sc == dc => sc,
                _ => dim_min(&sc, &dc, span),
            };
            self.mark_access(src.buffer, true, false);
            self.mark_access(dst.buffer, false, true);
            out.push(stmt(StmtKind::HostCopy { src: src.buffer, dst: dst.buffer, count: n }, span));
            return;
        }
        // A kernel of its own: its threads share the loop over the box.
        let id = KernelId(self.kernel_count);
        self.kernel_count += 1;
        self.has_parallel = true;
        let Some(dma) = self.dma_loop(src, dst, t, false, Participants::Grid, span) else {
            return;
        };
        let tree = ParallelTree {
            id,
            origin: KernelOrigin::HostDma,
            span,
            is_async: false,
            stream: None,
            block: Binder {
                vars: vec![None],
                tuple: None,
                extents: vec![Dim::Const(1)],
                implicit: true,
            },
            body: vec![stmt(StmtKind::Dma(Box::new(dma)), span)],
            launch_checks: Vec::new(),
            attrs: KernelAttrs::default(),
            cluster: None,
        };
        out.push(stmt(StmtKind::Parallel(Box::new(tree)), span));
    }

    /// `f = dma.any;` (spec §5.6): a future whose data a later DMA provides.
    pub(crate) fn check_dma_any(
        &mut self,
        name: &ast::Ident,
        engine: ast::DmaEngine,
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        let tma = engine == ast::DmaEngine::Tma;
        if tma && !self.tma_available(span) {
            return self.declare_poisoned(name);
        }
        if !self.in_device() {
            self.error_label(
                "E0450",
                span,
                "a placeholder future is only allowed inside a parallel-by",
                "host code",
            );
            return self.declare_poisoned(name);
        }
        let group = if tma {
            let b = self.new_tma_barrier();
            let g = self.new_group_local(&name.name, name.span, i128::from(b), out);
            if let Some(k) = self.kernel.as_mut() {
                k.tma_groups.insert(g);
                k.tma_placeholders.insert(g);
            }
            Some(g)
        } else {
            Some(self.new_group_local(&name.name, name.span, 0, out))
        };
        let ptr = self.new_local(
            &name.name,
            name.span,
            Ty::Error,
            LocalPlace::Future,
            true,
            LocalOrigin::Future { group },
        );
        out.push(stmt(StmtKind::Let { var: ptr, init: None }, span));
        self.declare_symbol(
            name,
            Symbol::Future(FutureSym { data: FutureData::Pointer(ptr), group, placeholder: true }),
        );
    }

    /// The group locals of futures to wait for (`None` after an error). `after` allows a
    /// synchronous future (nothing to wait for).
    fn waited_groups(&mut self, targets: &[ast::Ident], after: bool) -> Option<Vec<VarId>> {
        let mut groups = Vec::new();
        let mut ok = true;
        for id in targets {
            match self.scopes.lookup(&id.name).cloned() {
                Some(Symbol::Future(f)) => match f.group {
                    Some(g) => groups.push(g),
                    None if after => {}
                    None => {
                        self.error_label(
                            "E0450",
                            id.span,
                            format!("non-async future '{}` can not be waited.", id.name),
                            "a synchronous DMA is complete when it returns",
                        );
                        ok = false;
                    }
                },
                // A name poisoned by an earlier error: already reported.
                Some(Symbol::Local(v))
                    if self.locals.get(v.index()).is_some_and(|l| l.ty == Ty::Error) =>
                {
                    ok = false;
                }
                Some(_) => {
                    self.error_label(
                        "E0450",
                        id.span,
                        format!(
                            "'{}' is not a future (only futures and events can be waited)",
                            id.name
                        ),
                        "not a future",
                    );
                    ok = false;
                }
                None => {
                    self.undeclared(id);
                    ok = false;
                }
            }
        }
        ok.then_some(groups)
    }

    /// `wait f, …;` (spec §14.3).
    pub(crate) fn check_wait(&mut self, targets: &[ast::Expr], span: Span, out: &mut Vec<Stmt>) {
        // The futures of asynchronous WGMMAs (spec-tier3 §5.4), then the others.
        if targets.iter().any(|t| self.names_mma_future(t)) {
            let mut rest = Vec::new();
            for t in targets {
                if self.names_mma_future(t) {
                    self.check_mma_wait(t, span, out);
                } else {
                    rest.push(t.clone());
                }
            }
            if !rest.is_empty() {
                self.check_wait(&rest, span, out);
            }
            return;
        }
        // Events and futures may be mixed; each run of one kind is waited in order.
        if targets.iter().any(|t| self.names_event(t)) {
            let mut rest = targets;
            while let Some(first) = rest.first() {
                let events = self.names_event(first);
                let n = rest.iter().take_while(|t| self.names_event(t) == events).count();
                let (run, tail) = rest.split_at(n);
                if events {
                    self.check_event_wait(run, span, out);
                } else {
                    self.check_future_wait(run, span, out);
                }
                rest = tail;
            }
            return;
        }
        self.check_future_wait(targets, span, out);
    }

    /// `wait f, …;` on futures (spec §14.3).
    fn check_future_wait(&mut self, targets: &[ast::Expr], span: Span, out: &mut Vec<Stmt>) {
        let mut names = Vec::new();
        for t in targets {
            match &t.kind {
                ExprKind::Ident(id) => names.push(id.clone()),
                _ => {
                    self.unsupported(t.span, "waiting for events", 3);
                    return;
                }
            }
        }
        if !self.in_device() {
            self.error_label(
                "E0711",
                span,
                "`wait` is only allowed inside a parallel-by (a DMA in host code is synchronous)",
                "host code",
            );
            return;
        }
        if let Some(groups) = self.waited_groups(&names, false) {
            if !self.note_future_waits(&names, &groups) {
                return;
            }
            let participants = self.participants(Storage::Shared);
            self.push_waits(groups, participants, span, out);
        }
    }

    /// `swap(a, b)` / `rotate(a, b, …)` (spec §14.3).
    pub(crate) fn check_swap(
        &mut self,
        rotate: bool,
        names: &[ast::Ident],
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        if !rotate && names.len() != 2 {
            self.error_label(
                "E0450",
                span,
                "Builtin function 'swap' accept exact two parameters.",
                crate::diagnostics::count(names.len(), "name"),
            );
            return;
        }
        if names.len() < 2 {
            self.error_label(
                "E0450",
                span,
                "'rotate' needs at least two futures",
                crate::diagnostics::count(names.len(), "name"),
            );
            return;
        }
        let what = if rotate { "rotate" } else { "swap" };
        let mut futures = Vec::new();
        let mut groups = Vec::new();
        let mut first: Option<(Ty, Option<usize>, bool)> = None;
        for id in names {
            let depth = self.scopes.declaring_depth(&id.name);
            let f = match self.scopes.lookup(&id.name).cloned() {
                Some(Symbol::Future(f)) => f,
                Some(_) => {
                    self.error_label(
                        "E0450",
                        id.span,
                        format!("'{}' is not a future: {what} exchanges futures", id.name),
                        "not a future",
                    );
                    return;
                }
                None => {
                    self.undeclared(id);
                    return;
                }
            };
            let FutureData::Pointer(ptr) = f.data else {
                self.error_label(
                    "E0450",
                    id.span,
                    format!(
                        "'{}' is the future of a DMA into existing data: {what} exchanges \
                         futures of DMAs into new buffers (`=> shared`)",
                        id.name
                    ),
                    "not exchangeable",
                );
                return;
            };
            let ty = self.locals.get(ptr.index()).map_or(Ty::Error, |l| l.ty.clone());
            match &first {
                None => first = Some((ty.clone(), depth, f.group.is_some())),
                Some((t0, d0, async0)) => {
                    let kind0 = groups.first().is_some_and(|g| self.is_tma_group(*g));
                    let kind = f.group.is_some_and(|g| self.is_tma_group(g));
                    if *t0 != ty || *async0 != f.group.is_some() || kind0 != kind {
                        self.error_label(
                            "E0450",
                            id.span,
                            format!(
                                "rotate/swap data of different types: '{}' is {}",
                                id.name,
                                super::types::ty_name(&ty)
                            ),
                            "a different type",
                        );
                        return;
                    }
                    if *d0 != depth {
                        self.error_label(
                            "E0450",
                            id.span,
                            "swapping values defined in different scopes is forbidden",
                            "declared in another scope",
                        );
                        return;
                    }
                }
            }
            futures.push(ptr);
            groups.extend(f.group);
        }
        if groups.len() != futures.len() {
            groups.clear();
        }
        out.push(stmt(StmtKind::Rotate { futures, groups }, span));
    }

    /// Every asynchronous DMA of a kernel must be waited on every path before the kernel
    /// ends, and before its future is bound to another asynchronous DMA (`E0453`, spec §14.3:
    /// "some asyncs are not explicitly waited"): a copy nobody waits for may land after its
    /// buffer was reused.
    pub(crate) fn check_waits(&mut self, body: &[Stmt], kernel: Span) {
        /// The pending copies: group local → the DMA that issued it.
        type Pending = BTreeMap<VarId, Span>;
        let locals = &self.locals;
        let name = |g: VarId| {
            let n = locals.get(g.index()).map_or("?", |l| l.name.as_str());
            n.strip_suffix("__group").unwrap_or(n).to_string()
        };
        fn walk(stmts: &[Stmt], pending: &mut Pending, problems: &mut Vec<(Span, VarId, bool)>) {
            for s in stmts {
                match &s.kind {
                    StmtKind::Dma(dma) if dma.is_async => {
                        if let Some(g) = dma.group {
                            if pending.contains_key(&g) {
                                problems.push((s.span, g, true));
                            }
                            pending.insert(g, s.span);
                        }
                    }
                    StmtKind::Wait { groups, tma_groups, .. } => {
                        for g in groups.iter().chain(tma_groups) {
                            pending.remove(g);
                        }
                    }
                    // A future bound to an event is consumed (spec-tier3 §2.5).
                    StmtKind::TriggerAfter(t) => {
                        for g in &t.futures {
                            pending.remove(g);
                        }
                    }
                    StmtKind::TmaStoreWait { groups, .. } => {
                        for g in groups {
                            pending.remove(g);
                        }
                    }
                    StmtKind::Rotate { groups, .. } if groups.len() > 1 => {
                        // a <- b <- … <- a: the pending copy of b is now a's.
                        let before: Vec<Option<Span>> =
                            groups.iter().map(|g| pending.get(g).copied()).collect();
                        for (i, g) in groups.iter().enumerate() {
                            match before[(i + 1) % groups.len()] {
                                Some(span) => pending.insert(*g, span),
                                None => pending.remove(g),
                            };
                        }
                    }
                    StmtKind::Block(body) => walk(body, pending, problems),
                    StmtKind::InnerParallel(inner) => walk(&inner.body, pending, problems),
                    StmtKind::If { then_body, else_body, .. } => {
                        let mut other = pending.clone();
                        walk(then_body, pending, problems);
                        walk(else_body, &mut other, problems);
                        pending.extend(other);
                    }
                    StmtKind::For { body, .. } | StmtKind::While { body, .. } => {
                        // Zero, one or more iterations: twice reaches the fixed point of a set
                        // that only grows by the body's own DMAs.
                        let entry = pending.clone();
                        walk(body, pending, problems);
                        walk(body, pending, problems);
                        pending.extend(entry);
                    }
                    _ => {}
                }
            }
        }
        let mut pending = Pending::new();
        let mut problems = Vec::new();
        walk(body, &mut pending, &mut problems);
        // Futures of a `trigger … after` that had an error were meant to be consumed.
        if let Some(k) = self.kernel.as_ref() {
            pending.retain(|g, _| !k.silenced_futures.contains(g));
            problems.retain(|(_, g, _)| !k.silenced_futures.contains(g));
        }
        let mut seen = BTreeSet::new();
        for (span, g, reissued) in problems {
            if !seen.insert((span, g)) {
                continue;
            }
            self.diags.push(
                Diagnostic::error(
                    "E0453",
                    span,
                    format!(
                        "the asynchronous DMA of '{}' is issued again before its previous copy was \
                         waited",
                        name(g)
                    ),
                )
                .with_label("the previous copy into this buffer may still be in flight")
                .with_help(format!("`wait {};` before issuing it again", name(g))),
            );
            let _ = reissued;
        }
        if !pending.is_empty() {
            let names: Vec<String> = pending.keys().map(|g| format!("'{}'", name(*g))).collect();
            let first = pending.values().next().copied().unwrap_or(kernel);
            let mut d = Diagnostic::error(
                "E0453",
                first,
                format!("some asyncs are not explicitly waited: {}", names.join(", ")),
            )
            .with_label("an asynchronous DMA that no `wait` follows on some path");
            for (g, span) in pending.iter().skip(1) {
                d = d.with_secondary(*span, format!("'{}' is not waited either", name(*g)));
            }
            let first_name = pending.keys().next().map(|g| name(*g)).unwrap_or_default();
            self.diags.push(d.with_help(format!(
                "`wait {first_name};` before its data is used, and before the kernel ends"
            )));
        }
    }
}

/// The span of a DMA's destination as written.
fn dest_span(d: &ast::DmaDest) -> Span {
    match d {
        ast::DmaDest::Storage(_, span) => *span,
        ast::DmaDest::Expr(e) => e.span,
    }
}

/// The extents of a DMA's result: the source's, padded or permuted.
fn transfer_dims(t: &Transfer, src: &[Dim], span: Span) -> Vec<Dim> {
    match t {
        Transfer::Copy => src.to_vec(),
        Transfer::Transpose(perm) => perm.iter().map(|p| src[*p].clone()).collect(),
        Transfer::Pad { low, high, .. } => src
            .iter()
            .zip(low.iter().zip(high))
            .map(|(d, (l, h))| {
                let pad = fold::const_int(l).unwrap_or(0) + fold::const_int(h).unwrap_or(0);
                match d.as_const() {
                    Some(c) => Dim::Const(c + pad as u64),
                    None => {
                        Dim::from_expr(arith::add(d.to_expr(span), fold::int_lit(pad, span), span))
                    }
                }
            })
            .collect(),
    }
}

/// The smaller of two extents.
fn dim_min(a: &Dim, b: &Dim, span: Span) -> Dim {
    match (a.as_const(), b.as_const()) {
        (Some(x), Some(y)) => Dim::Const(x.min(y)),
        _ if a == b => a.clone(),
        _ => Dim::Expr(Box::new(HExpr {
            kind: HExprKind::Math {
                func: MathFn::Min,
                args: vec![a.to_expr(span), b.to_expr(span)],
            },
            ty: Ty::Scalar(ElemTy::S32),
            span,
        })),
    }
}
