//! MMA statements and accumulator fragments (spec-tier3 §5.1–§5.3, §5.5, §5.6): `mma.fill`,
//! `mma.load`, `mma.<a>.<b>`, `mma.store[.transp|.mask]`, `frag acc[2][3] {v};` and
//! `frag op= scalar`.
//!
//! Fragments live in [`Checker::frags`] (then [`hir::Function::frags`]); a name denotes one
//! through [`Symbol::Frag`]. The role of a fragment and its configuration are fixed by the
//! first execution that names it; instruction selection is `target::mma::select` (tables W,
//! G, S). Rules that need the whole function (an accumulator never executed, a store whose
//! tile does not fit the accumulator) run in [`Checker::finish_mma`].

use super::scope::Symbol;
use super::wgmma::WgExec;
use super::{Checker, Region, Val, fold, types};
use crate::ast::{self, ExprKind, MmaExecVariant, MmaKind, MmaLayout, MmaStoreVariant};
use crate::diagnostics::Diagnostic;
use crate::hir::mma::{Frag, FragId, FragRef, MmaOp, MmaRole, MmaSelected, MmaTile};
use crate::hir::{
    AssignOp, BinOp, ElemTy, HExpr, HExprKind, Level, Stmt, StmtKind, Storage, Ty, View,
};
use crate::source::Span;
use crate::target::mma::{MmaConfig, MmaFamily, MmaType, Selection, select};

/// What sema remembers about a fragment besides its HIR entry.
#[derive(Debug, Clone, Default)]
pub(crate) struct FragState {
    /// The extents of the view an `mma.load` read into it.
    pub(crate) loaded: Option<[u64; 2]>,
    /// Whether the loaded view's second dimension has unit stride (WMMA needs it for the
    /// dimension its `ldm` does not describe).
    pub(crate) unit_inner: bool,
    /// Whether an `mma.fill` (or `frag` declaration) made it.
    pub(crate) filled: bool,
    /// `(M, N)` of its accumulator role, once executed.
    pub(crate) acc_shape: Option<[u64; 2]>,
    /// Stores of it to check at the end.
    pub(crate) stores: Vec<StoreCheck>,
    /// The span of a fill of it (to report a fill of an operand).
    pub(crate) fill_span: Option<Span>,
    /// Whether it was loaded from a swizzled shared tile.
    pub(crate) swizzled: bool,
    /// Whether the statement that declared it had an error (no follow-up errors then).
    pub(crate) failed: bool,
    /// The asynchronous WGMMA computing it, not waited yet (an index of
    /// `Checker::wg_futures`): the accumulator is untouchable until then.
    pub(crate) pending: Option<usize>,
}

/// A store whose fit is checked when the accumulator's shape is known.
#[derive(Debug, Clone)]
pub(crate) struct StoreCheck {
    dims: [u64; 2],
    transpose: bool,
    unit_inner: bool,
    elem: ElemTy,
    span: Span,
}

fn stmt(kind: StmtKind, span: Span) -> Stmt {
    Stmt { kind, span }
}

fn mma_stmt(op: MmaOp, span: Span) -> Stmt {
    stmt(StmtKind::Mma(Box::new(op)), span)
}

/// The configuration type of an element type (`f32` operands mean tf32).
pub(crate) fn mma_type(t: ElemTy, operand: bool) -> MmaType {
    match t {
        ElemTy::F16 => MmaType::F16,
        ElemTy::Bf16 => MmaType::Bf16,
        ElemTy::Tf32 => MmaType::Tf32,
        ElemTy::F32 if operand => MmaType::Tf32,
        ElemTy::F32 => MmaType::F32,
        ElemTy::F64 => MmaType::F64,
        ElemTy::S8 => MmaType::S8,
        ElemTy::U8 => MmaType::U8,
        ElemTy::S32 => MmaType::S32,
        ElemTy::F8E4m3 => MmaType::E4m3,
        ElemTy::F8E5m2 => MmaType::E5m2,
        _ => MmaType::Other,
    }
}

impl Checker<'_> {
    /// Whether the statements being checked are inside a `group-4` level: MMA there is WGMMA.
    pub(crate) fn in_warpgroup(&self) -> bool {
        self.kernel.as_ref().is_some_and(|k| k.group4_depth > 0)
    }

    /// Whether MMA statements may be here: the body of a warp (`: group`) level, or, for
    /// WGMMA, a warpgroup's (`E1020`). Reports `E1001` otherwise.
    pub(crate) fn mma_place_ok(&mut self, span: Span) -> bool {
        if self.in_warpgroup() {
            return self.wg_place_ok(span);
        }
        match self.region {
            Region::Device(Level::Group) => true,
            _ => {
                self.diags.push(
                    Diagnostic::error(
                        "E1001",
                        span,
                        "MMA statements are executed by a warp: they must be in the body of a \
                         `: group` parallel level",
                    )
                    .with_label("not directly inside a `: group` level")
                    .with_help("put the statement in `parallel … : group { … }`"),
                );
                false
            }
        }
    }

    fn new_frag(&mut self, name: &ast::Ident, elem: Option<ElemTy>, dims: Vec<u64>) -> FragId {
        let id = FragId(u32::try_from(self.frags.len()).unwrap_or(u32::MAX));
        self.frags.push(Frag {
            name: name.name.clone(),
            span: name.span,
            elem: elem.unwrap_or(ElemTy::F32),
            array_dims: dims,
            role: None,
            selected: None,
            k_major: true,
            explicit_elem: elem.is_some(),
            extent_k: 0,
        });
        self.frag_states.push(FragState::default());
        self.declare_symbol(name, Symbol::Frag(id));
        id
    }

    /// The fragment an expression names: `acc`, `acc[i][j]`; `whole`: a whole array may be
    /// named (else `E1007`). `None` after reporting.
    pub(crate) fn frag_ref(&mut self, e: &ast::Expr, whole: bool, what: &str) -> Option<FragRef> {
        let mut indices = Vec::new();
        let mut base = e;
        while let ExprKind::Index { base: inner, index } = &base.kind {
            indices.push(index.as_ref());
            base = inner;
        }
        indices.reverse();
        let id = match &base.kind {
            ExprKind::Ident(id) => match self.scopes.lookup(&id.name).cloned() {
                Some(Symbol::Frag(f)) => f,
                None => {
                    self.undeclared(id);
                    return None;
                }
                Some(_) => return self.not_a_frag(e, what),
            },
            _ => return self.not_a_frag(e, what),
        };
        if let Some(q) = self.frag_states.get(id.index()).and_then(|s| s.pending) {
            let (name, at) = (self.wg_futures[q].name.clone(), self.wg_futures[q].span);
            self.diags.push(
                Diagnostic::error(
                    "E1028",
                    e.span,
                    format!(
                        "accumulator `{}' is computed by the asynchronous MMA '{name}', which is \
                         not waited yet",
                        self.text(base.span)
                    ),
                )
                .with_label("used while the MMA may still write it")
                .with_secondary(at, "the asynchronous MMA")
                .with_help(format!("`wait {name};` first (spec-tier3 §5.4)")),
            );
            return None;
        }
        let dims = self.frags.get(id.index()).map(|f| f.array_dims.clone()).unwrap_or_default();
        if indices.len() > dims.len() {
            self.error_label(
                "E1007",
                e.span,
                format!(
                    "fragment `{}' has {} array dimension(s) but {} index(es) were given",
                    self.text(base.span),
                    dims.len(),
                    indices.len()
                ),
                "too many indices",
            );
            return None;
        }
        if indices.len() < dims.len() && !whole {
            self.error_label(
                "E1007",
                e.span,
                "Cannot use the whole fragment array in mma exec operation.",
                "a whole fragment array",
            );
            return None;
        }
        let mut index = Vec::with_capacity(indices.len());
        for (k, ix) in indices.iter().enumerate() {
            let i = self.check_int(ix, "a fragment array index");
            if matches!(i.ty, Ty::Error) {
                return None;
            }
            if let Some(v) = fold::const_int(&i) {
                if v < 0 || v as u64 >= dims[k] {
                    self.error_label(
                        "E1008",
                        ix.span,
                        format!(
                            "index {v} is out of bounds of the {} dimension of fragment array \
                             `{}', where the valid range is [0, {})",
                            super::ordinal(k + 1),
                            self.text(base.span),
                            dims[k]
                        ),
                        "out of bounds",
                    );
                    return None;
                }
            }
            index.push(i);
        }
        Some(FragRef { frag: id, index })
    }

    fn not_a_frag<T>(&mut self, e: &ast::Expr, what: &str) -> Option<T> {
        // A view as an operand is WGMMA's direct shared operand.
        let v = self.check_expr(e);
        match v {
            Val::Error => {}
            Val::Buffer(..) | Val::View(_) | Val::Future(_) if what.starts_with("operand") => {
                self.diags.push(
                    Diagnostic::error(
                        "E1009",
                        e.span,
                        "direct shared-memory operands are only valid for WGMMA; use mma.load \
                         for WMMA/mma.sync operands.",
                    )
                    .with_label("spanned data as an MMA operand")
                    .with_help("load it first: `x = mma.load VIEW;`"),
                );
            }
            other => {
                let got = other.describe();
                self.error_label(
                    "E1010",
                    e.span,
                    format!("expect {what} to be an MMA fragment, but got '{got}'"),
                    "not a fragment",
                );
            }
        }
        None
    }

    /// A memory tile for an MMA load or store: a rank-2 view of global or shared memory with
    /// constant extents (`E1003`, `E1014`). `last` overrides the last element's indices.
    pub(crate) fn mma_tile(
        &mut self,
        view: View,
        span: Span,
        what: &str,
        write: bool,
        last: Option<[HExpr; 2]>,
    ) -> Option<MmaTile> {
        let dims: Vec<Option<u64>> = view.dims.iter().map(|d| d.as_const()).collect();
        let [Some(d0), Some(d1)] = dims[..] else {
            let got = view.dims.iter().map(types::dim_name).collect::<Vec<_>>().join(", ");
            self.error_label(
                "E1003",
                span,
                format!(
                    "Expect `{}' to be a matrix with fixed size, but got: [{got}].",
                    self.text(span)
                ),
                "not a rank-2 view with constant extents",
            );
            return None;
        };
        if view.storage == Storage::Local || d0 == 0 || d1 == 0 {
            self.error_label(
                "E1014",
                span,
                format!(
                    "the tile of an MMA {what} must be a non-empty view of global or shared memory"
                ),
                "local (per-thread) data",
            );
            return None;
        }
        let base_dims = self.buffer_dims(view.buffer);
        let (_, strides) = super::views::flat_layout(&view, &base_dims, span);
        let [s0, s1] = <[HExpr; 2]>::try_from(strides).ok()?;
        let first_index = view.element(vec![fold::int_lit(0, span), fold::int_lit(0, span)], span);
        let last_index = view.element(
            last.map_or_else(
                || vec![fold::int_lit(d0 as i128 - 1, span), fold::int_lit(d1 as i128 - 1, span)],
                |l| l.to_vec(),
            ),
            span,
        );
        self.mark_access(view.buffer, !write, write);
        let ty = Ty::Scalar(view.elem);
        let first_id = self.next_access();
        let last_id = self.next_access();
        Some(MmaTile {
            base: HExpr {
                kind: HExprKind::Address { buffer: view.buffer, index: first_index.clone() },
                ty: ty.clone(),
                span,
            },
            strides: [s0, s1],
            dims: [d0, d1],
            storage: view.storage,
            elem: view.elem,
            first: HExpr {
                kind: HExprKind::At { buffer: view.buffer, index: first_index, id: first_id },
                ty: ty.clone(),
                span,
            },
            last: HExpr {
                kind: HExprKind::At { buffer: view.buffer, index: last_index, id: last_id },
                ty,
                span,
            },
            swizzle: 0,
        })
    }

    /// The swizzle an `mma.load` reads its tile with (spec-tier3 §4.3): the one of the copy
    /// that filled the shared buffer; an explicit `.swiz<N>` must agree with it (`E1019`; ours,
    /// upstream only warns); an unswizzled copy inherits an explicit `.swiz<N>`.
    /// `None` after reporting.
    fn load_swizzle(&mut self, t: &MmaTile, attr: Option<&ast::DmaAttr>) -> Option<u32> {
        let HExprKind::At { buffer, .. } = &t.first.kind else { return Some(0) };
        let copy = self
            .kernel
            .as_ref()
            .and_then(|k| k.copy_swizzle.get(buffer).copied())
            .filter(|(n, _)| *n != 0 && t.storage == Storage::Shared);
        let explicit = match attr.map(|a| (a.kind, a.span)) {
            Some((ast::DmaAttrKind::Swizzle(Some(n)), s)) if n != 0 => Some((n, s)),
            _ => None,
        };
        // An unswizzled copy inherits the load's swizzle (sema/swizzle_infer.rs).
        if let (Some((n, s)), None, Storage::Shared) = (explicit, copy, t.storage) {
            if let Some(inherited) = self.inherit_swizzle(*buffer, n, s) {
                return inherited;
            }
        }
        match (explicit, copy) {
            (None, None) => Some(0),
            (None, Some((n, _))) => Some(n),
            (Some((n, _)), Some((c, _))) if n == c => Some(n),
            (Some((n, s)), copy) => {
                let message = match copy {
                    Some((c, _)) => format!(
                        "explicit mma.load swizzle '{n}' conflicts with the swizzle '{c}' of the \
                         copy that filled this tile"
                    ),
                    None => format!(
                        "mma.load.swiz<{n}> reads a tile that no swizzled copy into shared \
                         memory filled"
                    ),
                };
                let mut d = Diagnostic::error("E1019", s, message)
                    .with_label("the swizzle of the load")
                    .with_help(
                        "fill the shared tile with `dma.copy.swiz<N>` (or `tma.load.swiz<N>`) \
                         and load it with the same N, or without `.swiz`",
                    );
                if let Some((_, at)) = copy {
                    d = d.with_secondary(at, "the copy that filled it");
                }
                let first = self.kernel.as_ref().and_then(|k| k.inherited_swizzle.get(buffer));
                if let Some(&(c, at)) = first {
                    d = d.with_secondary(at, format!("this mma.load gave the copy swizzle '{c}'"));
                }
                self.diags.push(d);
                None
            }
        }
    }

    /// `frag acc[2][3] {v};` / `frag.f32 acc[2] {v};` (spec-tier3 §5.2).
    pub(crate) fn check_frag_decl(&mut self, d: &ast::FragDecl, span: Span, out: &mut Vec<Stmt>) {
        let before = self.diags.error_count();
        self.check_frag_items(d, span, out);
        if self.diags.error_count() > before {
            self.mma_failed = true;
        }
    }

    fn check_frag_items(&mut self, d: &ast::FragDecl, span: Span, out: &mut Vec<Stmt>) {
        if let Some(shape) = &d.shape {
            return self.check_shaped_frag_decl(d, shape, span, out);
        }
        let ok = self.mma_place_ok(span);
        let elem = d.elem.map(|(t, _)| types::elem_from_token(t));
        for item in &d.items {
            let mut dims = Vec::new();
            for e in &item.array_dims {
                let v = self.check_int(e, "a fragment array extent");
                match fold::const_int(&v) {
                    Some(n) if n > 0 && n <= 64 => dims.push(n as u64),
                    _ if matches!(v.ty, Ty::Error) => dims.push(1),
                    _ => {
                        self.error_label(
                            "E1011",
                            e.span,
                            "a fragment array extent must be a constant in [1, 64]",
                            "not a constant in [1, 64]",
                        );
                        dims.push(1);
                    }
                }
            }
            let id = self.new_frag(&item.name, elem, dims);
            if !ok {
                continue;
            }
            out.push(mma_stmt(MmaOp::Decl(id), item.span));
            if let Some(init) = &item.init {
                if let Some(value) = self.fill_value(init) {
                    self.frag_states[id.index()].filled = true;
                    self.frag_states[id.index()].fill_span = Some(item.span);
                    let frag = FragRef { frag: id, index: Vec::new() };
                    out.push(mma_stmt(MmaOp::Fill { frag, value }, item.span));
                }
            } else {
                self.frag_states[id.index()].filled = true;
                self.frag_states[id.index()].fill_span = Some(item.span);
            }
        }
    }

    /// A fill value: a scalar (`E1004`).
    fn fill_value(&mut self, e: &ast::Expr) -> Option<HExpr> {
        match self.check_expr(e) {
            Val::Scalar(v) if v.ty.scalar().is_some_and(|t| t != ElemTy::Bool) => Some(v),
            Val::Error => None,
            _ => {
                self.error_label(
                    "E1004",
                    e.span,
                    "Expect a scalar value for MMA fill.",
                    "not a numeric scalar",
                );
                None
            }
        }
    }

    /// Every MMA statement. After an error in one, the whole-function rules stay quiet (their
    /// findings would follow from it).
    pub(crate) fn check_mma(&mut self, m: &ast::MmaStmt, span: Span, out: &mut Vec<Stmt>) {
        let before = self.diags.error_count();
        self.check_mma_stmt(m, span, out);
        if self.diags.error_count() > before {
            self.mma_failed = true;
        }
    }

    fn check_mma_stmt(&mut self, m: &ast::MmaStmt, span: Span, out: &mut Vec<Stmt>) {
        let wg_exec = self.in_warpgroup() && matches!(m.kind, MmaKind::Exec { .. });
        let sparse =
            matches!(&m.kind, MmaKind::Exec { variant: MmaExecVariant::Sparse { .. }, .. });
        if m.schedule.is_some() && !wg_exec && !sparse {
            self.unsupported(span, "`[[schedule(k_tiles(…))]]` outside a WGMMA execution", 3);
        }
        if let (MmaKind::Exec { future, layout, variant, acc, a, b }, true) = (&m.kind, sparse) {
            let MmaExecVariant::Sparse { span: sp, is_async, metadata } = variant else { return };
            let exec = super::mma_sparse::SparseExec {
                layout: *layout,
                span,
                sp: *sp,
                is_async: *is_async,
                schedule: m.schedule.as_ref().map(|a| a.span),
            };
            return self.check_sparse_exec(
                &exec,
                future.as_ref(),
                [acc, a, b],
                metadata.as_ref(),
                out,
            );
        }
        let ok = self.mma_place_ok(span);
        match &m.kind {
            MmaKind::FillNew { name, elem, value } => {
                let existing = match self.scopes.lookup(&name.name) {
                    Some(Symbol::Frag(f)) if self.scopes.declared_here(&name.name).is_none() => {
                        Some(*f)
                    }
                    _ => None,
                };
                let value = self.fill_value(value);
                let id = match existing {
                    Some(f) => f,
                    None => {
                        let id = self.new_frag(
                            name,
                            elem.map(|(t, _)| types::elem_from_token(t)),
                            vec![],
                        );
                        if ok {
                            out.push(mma_stmt(MmaOp::Decl(id), span));
                        }
                        id
                    }
                };
                self.frag_states[id.index()].filled = true;
                self.frag_states[id.index()].fill_span.get_or_insert(span);
                if let (true, Some(value)) = (ok, value) {
                    let frag = FragRef { frag: id, index: Vec::new() };
                    out.push(mma_stmt(MmaOp::Fill { frag, value }, span));
                }
            }
            MmaKind::Fill { frag, value } => {
                let f = self.frag_ref(frag, true, "the filled value");
                let value = self.fill_value(value);
                let (Some(f), Some(value)) = (f, value) else { return };
                if self.frag_states[f.frag.index()].loaded.is_some()
                    && !self.frag_states[f.frag.index()].filled
                {
                    self.frag_states[f.frag.index()].fill_span.get_or_insert(span);
                }
                if ok {
                    out.push(mma_stmt(MmaOp::Fill { frag: f, value }, span));
                }
            }
            MmaKind::LoadNew { name, frag: _, swizzle, is_async: _, src } => {
                let view = self.check_data(src, "an MMA load");
                let mut tile = view.and_then(|v| self.mma_tile(v, src.span, "load", false, None));
                if let Some(t) = tile.as_mut() {
                    match self.load_swizzle(t, swizzle.as_ref()) {
                        Some(n) => t.swizzle = n,
                        None => tile = None,
                    }
                }
                let elem = tile.as_ref().map(|t| t.elem);
                let id = self.new_frag(name, elem, vec![]);
                self.frags[id.index()].explicit_elem = true;
                let Some(tile) = tile else {
                    self.frag_states[id.index()].failed = true;
                    return;
                };
                let st = &mut self.frag_states[id.index()];
                st.loaded = Some(tile.dims);
                st.unit_inner = fold::const_int(&tile.strides[1]) == Some(1);
                st.swizzled = tile.swizzle != 0;
                if ok {
                    out.push(mma_stmt(MmaOp::Decl(id), span));
                    let frag = FragRef { frag: id, index: Vec::new() };
                    out.push(mma_stmt(MmaOp::Load { frag, tile: Box::new(tile) }, span));
                }
            }
            MmaKind::Load { src, frag } => {
                let _ = self.check_expr(src);
                let _ = frag;
                self.error_label(
                    "E1012",
                    span,
                    "mma.loadR is only supported for WGMMA.",
                    "loads into an existing fragment",
                );
            }
            MmaKind::Exec { future, layout, variant, acc, a, b } => {
                if self.in_warpgroup() {
                    if let MmaExecVariant::Plain | MmaExecVariant::Async(_) = variant {
                        let is_async = matches!(variant, MmaExecVariant::Async(_));
                        let schedule = match m.schedule.as_ref().map(|a| &a.kind) {
                            Some(ast::AttributeKind::Schedule(list)) => Some((
                                list.as_slice(),
                                m.schedule.as_ref().map_or(span, |a| a.span),
                            )),
                            _ => None,
                        };
                        let mut wg =
                            WgExec { layout: *layout, span, ok, is_async, future, schedule };
                        wg.future = if is_async { future } else { &None };
                        if !is_async {
                            if let Some(f) = future {
                                self.declare_poisoned(f);
                            }
                        }
                        return self.check_wg_exec(&wg, acc, a, b, out);
                    }
                }
                if let Some(f) = future {
                    self.declare_poisoned(f);
                }
                match variant {
                    MmaExecVariant::Plain => {}
                    MmaExecVariant::Async(s) => {
                        return self.unsupported(*s, "asynchronous MMA (WGMMA `.async`)", 3);
                    }
                    MmaExecVariant::Sparse { .. } => return,
                    MmaExecVariant::Scale { span: sp, view, value } => {
                        let schedule = m.schedule.as_ref();
                        let x = super::mma_scale::ScaledExec {
                            layout: *layout,
                            span,
                            sp: *sp,
                            ok,
                            schedule,
                        };
                        return self.check_scaled_exec(&x, [acc, a, b], view, value, out);
                    }
                }
                let acc = self.frag_ref(acc, false, "the accumulator");
                let a = self.frag_ref(a, false, "operand A");
                let b = self.frag_ref(b, false, "operand B");
                let (Some(acc), Some(a), Some(b)) = (acc, a, b) else { return };
                if self.check_exec(*layout, &acc, &a, &b, span, false) && ok {
                    out.push(mma_stmt(MmaOp::Exec { acc, a, b }, span));
                }
            }
            MmaKind::Store { variant, frag, dst } => {
                let f = self.frag_ref(frag, false, "the stored value");
                let view = self.check_data(dst, "an MMA store");
                // `.async` (spec-tier3 §5.5): no trailing barrier; see mma_store_async.rs.
                let is_async = matches!(variant, MmaStoreVariant::Async(_));
                let (transpose, mask) = match variant {
                    MmaStoreVariant::Plain | MmaStoreVariant::Async(_) => (false, None),
                    MmaStoreVariant::Transp(_) => (true, None),
                    MmaStoreVariant::Mask { rows, cols, .. } => {
                        let r = self.check_int(rows, "an MMA store row guard");
                        let c =
                            cols.as_ref().map(|c| self.check_int(c, "an MMA store column guard"));
                        (false, Some((r, c)))
                    }
                };
                let (Some(f), Some(view)) = (f, view) else { return };
                let (rows, cols) = match mask {
                    Some((r, c)) => (Some(r), c),
                    None => (None, None),
                };
                // The last element written: the mask's corner inside the tile.
                let dims: Vec<Option<u64>> = view.dims.iter().map(|d| d.as_const()).collect();
                let last = match (&dims[..], &rows) {
                    ([Some(d0), Some(d1)], Some(_)) => {
                        let corner = |this: &mut Self, g: &Option<HExpr>, d: u64| match g {
                            Some(g) => {
                                let lim = fold::int_lit(d as i128, span);
                                let lt = this.scalar_binary(
                                    BinOp::Lt,
                                    g.clone(),
                                    lim.clone(),
                                    span,
                                    false,
                                    span,
                                );
                                let m = HExpr {
                                    kind: HExprKind::Ternary {
                                        cond: Box::new(lt),
                                        then_value: Box::new(g.clone()),
                                        else_value: Box::new(lim),
                                    },
                                    ty: Ty::Scalar(ElemTy::S32),
                                    span,
                                };
                                this.scalar_binary(
                                    BinOp::Sub,
                                    m,
                                    fold::int_lit(1, span),
                                    span,
                                    false,
                                    span,
                                )
                            }
                            None => fold::int_lit(d as i128 - 1, span),
                        };
                        let (g0, g1) = if transpose { (&cols, &rows) } else { (&rows, &cols) };
                        let c0 = corner(self, g0, *d0);
                        let c1 = corner(self, g1, *d1);
                        Some([c0, c1])
                    }
                    _ => None,
                };
                let storage = view.storage;
                let Some(tile) = self.mma_tile(view, dst.span, "store", true, last) else {
                    return;
                };
                let unit = fold::const_int(&tile.strides[1]) == Some(1);
                let stored = match &tile.first.kind {
                    HExprKind::At { buffer, .. } => Some(*buffer),
                    _ => None,
                };
                self.frag_states[f.frag.index()].stores.push(StoreCheck {
                    dims: tile.dims,
                    transpose,
                    unit_inner: unit,
                    elem: tile.elem,
                    span,
                });
                if ok {
                    out.push(mma_stmt(
                        MmaOp::Store { frag: f, tile: Box::new(tile), transpose, rows, cols },
                        span,
                    ));
                    if storage == Storage::Shared && !is_async {
                        // The block's barrier, or the role's in an `inthreads` role
                        // (`sema::mma_store_role`).
                        let barrier = self.mma_store_barrier(stored, span);
                        out.push(barrier);
                    }
                }
            }
            MmaKind::Scale { frag, view, value } => {
                self.check_mma_scale(frag, view, value, span, ok, out);
            }
        }
    }

    /// `E1005`: no instruction of the target has `config`; `label` and `help` say which
    /// family was looked for.
    pub(crate) fn no_mma_config(
        &mut self,
        config: &MmaConfig,
        span: Span,
        label: &str,
        help: &str,
    ) {
        let arch = self.target.arch().map_or("cpu".to_string(), |a| a.sm().to_string());
        self.diags.push(
            Diagnostic::error(
                "E1005",
                span,
                format!("MMA [{config}] is not support by current architecture(SM_{arch})."),
            )
            .with_label(label)
            .with_help(help),
        );
    }

    /// Whether the accumulator `acc` of an MMA of `[m, n]` has the shape of its earlier MMAs
    /// (`E1002`).
    pub(crate) fn acc_same_shape(&mut self, acc: &FragRef, span: Span, [m, n]: [u64; 2]) -> bool {
        if let Some(s) = self.frag_states[acc.frag.index()].acc_shape {
            if s != [m, n] {
                self.error_label(
                    "E1002",
                    span,
                    format!(
                        "MMA: matrix shapes do not match: the accumulator was [{}, {}] in an \
                         earlier MMA, here [{m}, {n}].",
                        s[0], s[1]
                    ),
                    "accumulator shape",
                );
                return false;
            }
        }
        true
    }

    /// `E1002` for operands A and B (extents `ad`, `bd`) of different K; `label` says how K was
    /// read from them.
    pub(crate) fn k_mismatch(&mut self, span: Span, [ad, bd]: [[u64; 2]; 2], label: String) {
        self.error_label(
            "E1002",
            span,
            format!(
                "MMA: matrix shapes do not match: `a'([{}, {}]) v.s. `b'([{}, {}]).",
                ad[0], ad[1], bd[0], bd[1]
            ),
            label,
        );
    }

    /// The element type of an accumulator: the declared one, else (set here) A's.
    pub(crate) fn acc_elem_or(&mut self, acc: &FragRef, a_elem: ElemTy) -> ElemTy {
        let f = &mut self.frags[acc.frag.index()];
        if !f.explicit_elem {
            f.elem = a_elem;
            f.explicit_elem = true;
        }
        f.elem
    }

    /// `mma.<a>.<b> acc, a, b;`: shapes, types, selection, roles. Whether it is well formed.
    pub(crate) fn check_exec(
        &mut self,
        layout: MmaLayout,
        acc: &FragRef,
        a: &FragRef,
        b: &FragRef,
        span: Span,
        sparse: bool,
    ) -> bool {
        let (a_row, b_row) = match layout {
            MmaLayout::RowRow => (true, true),
            MmaLayout::RowCol => (true, false),
            MmaLayout::ColRow => (false, true),
            MmaLayout::ColCol => (false, false),
        };
        let operand = |this: &mut Self, f: &FragRef, what: &str| -> Option<[u64; 2]> {
            let st = &this.frag_states[f.frag.index()];
            match st.loaded {
                Some(d) if !st.filled => Some(d),
                _ if st.failed => None,
                _ => {
                    let name = this.frags[f.frag.index()].name.clone();
                    this.error_label(
                        "E1010",
                        span,
                        format!(
                            "{what} `{name}' of an MMA must be a fragment loaded with `mma.load`"
                        ),
                        "not a loaded operand",
                    );
                    None
                }
            }
        };
        let (Some(ad), Some(bd)) = (operand(self, a, "operand A"), operand(self, b, "operand B"))
        else {
            return false;
        };
        // §5.1: A is [M, K] (row) or [K, M] (col); B is [N, K] (row) or [K, N] (col).
        let (m, ka) = if a_row { (ad[0], ad[1]) } else { (ad[1], ad[0]) };
        // A sparse A is 2:4-compressed: its K is half the logical one.
        let ka = if sparse { 2 * ka } else { ka };
        let (n, kb) = if b_row { (bd[0], bd[1]) } else { (bd[1], bd[0]) };
        if ka != kb {
            let label = format!("K is {ka} for A and {kb} for B ({})", layout.as_str());
            self.k_mismatch(span, [ad, bd], label);
            return false;
        }
        let acc_state = self.frag_states[acc.frag.index()].clone();
        if acc_state.failed {
            return false;
        }
        if let Some(ld) = acc_state.loaded.filter(|_| !acc_state.filled) {
            if ld != [m, n] {
                self.error_label(
                    "E1002",
                    span,
                    format!(
                        "MMA: matrix shapes do not match: the accumulator is [{}, {}] but the \
                         operands make [{m}, {n}].",
                        ld[0], ld[1]
                    ),
                    "accumulator shape",
                );
                return false;
            }
        } else if !acc_state.filled {
            let name = self.frags[acc.frag.index()].name.clone();
            self.error_label(
                "E1010",
                span,
                format!(
                    "the accumulator `{name}' must be made by `mma.fill`, `frag` or `mma.load`"
                ),
                "not an accumulator",
            );
            return false;
        }
        if !self.acc_same_shape(acc, span, [m, n]) {
            return false;
        }
        let a_elem = self.frags[a.frag.index()].elem;
        let b_elem = self.frags[b.frag.index()].elem;
        let c_elem = self.acc_elem_or(acc, a_elem);
        let config = MmaConfig {
            a: mma_type(a_elem, true),
            b: mma_type(b_elem, true),
            c: mma_type(c_elem, false),
            m,
            n,
            k: ka,
            sparse,
        };
        let family = match select(&config, self.target.arch()) {
            Selection::Selected(f) => f,
            Selection::TooOld { family, min_sm, specific } => {
                let arch = self.target.arch().map_or("cpu".to_string(), |a| a.sm().to_string());
                let message = if family == MmaFamily::Wgmma {
                    format!("WGMMA requires sm_90a (MMA [{config}] on SM_{arch})")
                } else {
                    format!("MMA [{config}] is not support by current architecture(SM_{arch}).")
                };
                self.diags.push(
                    Diagnostic::error("E1005", span, message)
                        .with_label(format!(
                            "{} needs sm_{min_sm}{}",
                            family.name(),
                            if specific { "a" } else { "" }
                        ))
                        .with_help(format!(
                            "build for sm_{min_sm}{} or newer, or use a configuration of the \
                         target (spec-tier3 §5.3)",
                            if specific { "a" } else { "" }
                        )),
                );
                return false;
            }
            Selection::NoConfig => {
                self.no_mma_config(
                    &config,
                    span,
                    "no MMA instruction has this configuration",
                    "see spec-tier3 §5.3 for the configurations of WMMA, WGMMA and mma.sync",
                );
                return false;
            }
        };
        match family {
            MmaFamily::Wgmma => {
                self.diags.push(
                    Diagnostic::error(
                        "E1020",
                        span,
                        format!(
                            "MMA [{config}] selects WGMMA, which a warpgroup executes with its operands in \
                             shared memory, not a warp with `mma.load`ed fragments"
                        ),
                    )
                    .with_label("this configuration selects WGMMA (spec-tier3 §5.3)")
                    .with_help(
                        "execute it in a `: group-4` level with direct shared operands \
                         (`mma.row.row acc, sa, sb;`), or use a WMMA/mma.sync shape (M = 8, 16 \
                         or 32)",
                    ),
                );
                return false;
            }
            MmaFamily::MmaSync
                if config.a == MmaType::F16 && (config.m, config.n, config.k) == (8, 8, 4) =>
            {
                self.unsupported(span, "mma.sync m8n8k4 (the sm_70 quad-pair layout)", 3);
                return false;
            }
            MmaFamily::Wmma => {
                // WMMA reads and writes memory with a row pitch: the other dimension must be
                // contiguous.
                for (f, what) in [(a, "operand A"), (b, "operand B"), (acc, "the accumulator")] {
                    let st = &self.frag_states[f.frag.index()];
                    if st.loaded.is_some() && !st.filled && st.swizzled {
                        self.error_label(
                            "E1013",
                            span,
                            format!(
                                "WMMA cannot read {what} from a swizzled tile (its loads take a \
                                 row pitch); mma.sync gathers swizzled tiles"
                            ),
                            "WMMA operand from a swizzled tile",
                        );
                        return false;
                    }
                    if st.loaded.is_some() && !st.filled && !st.unit_inner {
                        self.error_label(
                            "E1013",
                            span,
                            format!(
                                "WMMA loads {what} with a row pitch: the view's last dimension \
                                 must be contiguous"
                            ),
                            "WMMA operand with a strided last dimension",
                        );
                        return false;
                    }
                }
            }
            MmaFamily::MmaSync => {}
        }
        let selected = MmaSelected { family, config };
        for (f, role, k_major) in
            [(a, MmaRole::A, a_row), (b, MmaRole::B, b_row), (acc, MmaRole::C, true)]
        {
            let frag = &self.frags[f.frag.index()];
            let conflict = match (frag.role, frag.selected) {
                (Some(r), Some(s)) => r != role || s != selected || frag.k_major != k_major,
                _ => false,
            };
            if conflict {
                let prev = frag.selected.map(|s| s.config.to_string()).unwrap_or_default();
                let prev_role = frag.role.map_or("", MmaRole::name);
                let name = frag.name.clone();
                let decl = frag.span;
                self.diags.push(
                    Diagnostic::error(
                        "E1006",
                        span,
                        format!(
                            "fragment `{name}' is the {prev_role} of an MMA [{prev}] and here \
                             the {} of [{config}]{}",
                            role.name(),
                            if role != MmaRole::C {
                                format!(" ({})", layout.as_str())
                            } else {
                                String::new()
                            }
                        ),
                    )
                    .with_label("a second role or configuration")
                    .with_secondary(decl, "declared here")
                    .with_help(
                        "a fragment has one role and configuration: load or fill another one",
                    ),
                );
                return false;
            }
            let frag = &mut self.frags[f.frag.index()];
            frag.role = Some(role);
            frag.selected = Some(selected);
            frag.k_major = k_major;
        }
        self.frag_states[acc.frag.index()].acc_shape = Some([m, n]);
        true
    }

    /// `frag op= scalar` (spec-tier3 §5.6) when `target` names a fragment: whether it did.
    pub(crate) fn check_frag_update(&mut self, a: &ast::Assignment, out: &mut Vec<Stmt>) -> bool {
        let mut base = &a.target;
        while let ExprKind::Index { base: inner, .. } = &base.kind {
            base = inner;
        }
        let ExprKind::Ident(id) = &base.kind else { return false };
        if !matches!(self.scopes.lookup(&id.name), Some(Symbol::Frag(_))) {
            return false;
        }
        let op = super::stmt::hir_assign_op(a.op);
        let Some(f) = self.frag_ref(&a.target, true, "the updated value") else {
            let _ = self.check_expr(&a.value);
            return true;
        };
        let value = self.check_expr(&a.value);
        let Some((op, value)) = self.fragment_update(a, op, value) else { return true };
        if self.mma_place_ok(a.span) {
            out.push(mma_stmt(MmaOp::Update { frag: f, op, value }, a.span));
        }
        true
    }

    /// The operator and scalar of `frag op= value` (spec-tier3 §5.6), for every kind of
    /// fragment: `+= -= *= /=` and a numeric scalar, else `E1015` (`None` after reporting, or
    /// for an operand already in error).
    pub(crate) fn fragment_update(
        &mut self,
        a: &ast::Assignment,
        op: AssignOp,
        value: Val,
    ) -> Option<(AssignOp, HExpr)> {
        if !matches!(op, AssignOp::Add | AssignOp::Sub | AssignOp::Mul | AssignOp::Div) {
            self.error_label(
                "E1015",
                a.span,
                format!(
                    "a fragment can only be updated with `+=`, `-=`, `*=` or `/=` and a scalar \
                     (`{}` is not one)",
                    op.as_str()
                ),
                "not a fragment update",
            );
            return None;
        }
        match value {
            Val::Scalar(v) if v.ty.scalar().is_some_and(|t| t != ElemTy::Bool) => Some((op, v)),
            Val::Error => None,
            other => {
                self.error_label(
                    "E1015",
                    a.value.span,
                    format!("a fragment is updated with a scalar, but got '{}'", other.describe()),
                    "not a numeric scalar",
                );
                None
            }
        }
    }

    /// The rules that need the whole function: every fragment executed, fills of
    /// accumulators only, stores of accumulators whose tile fits.
    pub(crate) fn finish_mma(&mut self) {
        self.finish_wg_futures();
        for (k, st) in self.frag_states.clone().iter().enumerate() {
            let frag = self.frags[k].clone();
            let Some(role) = frag.role else {
                if self.mma_failed {
                    continue;
                }
                if st.filled {
                    self.diags.push(
                        Diagnostic::error(
                            "E1016",
                            frag.span,
                            format!("the MMA operation of `{}' cannot be executed.", frag.name),
                        )
                        .with_label("an accumulator no MMA executes with")
                        .with_help("use it as the accumulator of an `mma.<a>.<b>` statement"),
                    );
                } else if st.loaded.is_some() {
                    self.diags.push(
                        Diagnostic::error(
                            "E1016",
                            frag.span,
                            format!(
                                "fragment `{}' is loaded but no MMA uses it, so its role is \
                                 unknown",
                                frag.name
                            ),
                        )
                        .with_label("loaded, never executed with")
                        .with_help("use it as an operand or accumulator of an `mma.<a>.<b>`"),
                    );
                }
                continue;
            };
            if role != MmaRole::C {
                if let Some(s) = st.fill_span {
                    self.error_label(
                        "E1017",
                        s,
                        "Only the acc of mma operation can be used in fill op.",
                        format!("`{}' is {}", frag.name, role.name()),
                    );
                }
                if let Some(s) = st.stores.first() {
                    self.error_label(
                        "E1017",
                        s.span,
                        format!(
                            "only accumulators can be stored, but `{}' is {}",
                            frag.name,
                            role.name()
                        ),
                        "stores an operand fragment",
                    );
                }
                continue;
            }
            let Some([m, n]) = st.acc_shape else { continue };
            let wmma = frag.selected.is_some_and(|s| s.family == MmaFamily::Wmma);
            for s in &st.stores {
                let StoreCheck { dims, transpose, unit_inner: unit, elem, span } = s;
                // WMMA has f16 and f32 accumulators of the K = 16 shapes only (tf32's 16x16x8 is
                // f32 alone): a store converts between those two through the other fragment.
                let k16 = frag.selected.is_some_and(|s| s.config.k == 16);
                let convertible = *elem == frag.elem
                    || (k16
                        && matches!(
                            (frag.elem, *elem),
                            (ElemTy::F32, ElemTy::F16) | (ElemTy::F16, ElemTy::F32)
                        ));
                let want = if *transpose { [n, m] } else { [m, n] };
                if dims[0] > want[0] || dims[1] > want[1] {
                    self.error_label(
                        "E1018",
                        *span,
                        format!(
                            "the store's tile [{}, {}] is larger than the accumulator{} [{}, {}]",
                            dims[0],
                            dims[1],
                            if *transpose { " transposed" } else { "" },
                            want[0],
                            want[1]
                        ),
                        "larger than the accumulator",
                    );
                } else if wmma && !convertible {
                    self.error_label(
                        "E1013",
                        *span,
                        format!(
                            "a WMMA accumulator of {} can only be stored to {} data (or, for K = \
                             16, f16/f32 from f32/f16), not {}",
                            frag.elem.as_str(),
                            frag.elem.as_str(),
                            elem.as_str()
                        ),
                        "WMMA store of another element type",
                    );
                } else if wmma && !unit {
                    self.error_label(
                        "E1013",
                        *span,
                        "WMMA stores with a row pitch: the view's last dimension must be \
                         contiguous",
                        "WMMA store with a strided last dimension",
                    );
                } else if *dims != want {
                    self.warn(
                        "W1001",
                        *span,
                        format!(
                            "the store's tile [{}, {}] is smaller than the accumulator [{}, {}]: \
                             only its part is written",
                            dims[0], dims[1], want[0], want[1]
                        ),
                        "masked automatically",
                    );
                }
            }
        }
    }
}
