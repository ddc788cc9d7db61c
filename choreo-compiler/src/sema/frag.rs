//! Shaped fragments and fragment operations (spec-tier3 §6): `frag T [shape] name {init};`,
//! `apply`, `reduce_max`/`reduce_sum`, `all_reduce_sum`, `copy`.
//!
//! A shaped fragment is backed by a per-thread `local` buffer (see [`crate::hir::frag`]); its
//! layout (§6.1) is inferred at its first use that decides one: the layout of the accumulator
//! it is copied from or to or iterated with (WGMMA_ACC, SYNC_ACC), REPLICATED_1D for a 1-D
//! fragment reduced from or written in an `apply` over a 2-D one, UNIFORM otherwise (also for
//! fragments no operation constrains, at the end of the function). A later use that needs
//! another layout is `E1032`. The buffer's extent (the registers of one thread) is set when
//! the layout is.
//!
//! Inside `apply {i, j} in x.span { … }` the loop runs over the thread's registers r; `i` and
//! `j` are computed from the layout; `f.at(i, j)` of a fragment of the iterated layout is
//! register r, `v.at(i)` of a REPLICATED_1D fragment the register of r's row. Accumulators are
//! copied to a buffer before the loop and back after it.
//!
//! Codes: E1031 WMMA layouts are opaque; E1032 inconsistent layout; E1033 element access of a
//! fragment outside `apply` or not with its binders; E1034 bad shaped declaration; E1035
//! reduction axis; E1036 no layout to iterate or reduce; E1037/E1038 `all_reduce_sum`;
//! E1039 shapes differ; E1040 not a fragment.

use std::collections::HashMap;

use super::Checker;
use super::scope::Symbol;
use crate::ast::{self, ExprKind};
use crate::diagnostics::Diagnostic;
use crate::hir::arith as fold;
use crate::hir::frag::{FragOp, RowLayout};
use crate::hir::mma::{FragId, FragRef, MmaOp, MmaRole, WgA};
use crate::hir::{
    BufferRef, Dim, ElemIndex, ElemTy, HExpr, HExprKind, LocalOrigin, LocalPlace, SpannedTy, Stmt,
    StmtKind, Storage, TemplateArg, Ty, Unroll, VarId,
};
use crate::source::Span;
use crate::target::mma::MmaFamily;

/// A fragment layout (spec-tier3 §6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// 64×N over the 128 threads of a warpgroup.
    WgAcc { n: u64 },
    /// 16×8 over the 32 lanes of a warp.
    SyncAcc,
    /// A 1-D fragment of the rows of a 2-D one of the given row layout: two registers per
    /// thread (its two rows), four copies of each row.
    Rep(RowLayout),
    /// Flat row-major element `r·T + t`.
    Uniform { threads: u64 },
    /// WMMA accumulators: opaque.
    Wmma,
}

impl Layout {
    /// The registers (elements) a thread holds of a fragment of `size` elements.
    fn regs(self, size: u64) -> u64 {
        match self {
            Layout::WgAcc { n } => n / 2,
            Layout::SyncAcc => 4,
            Layout::Rep(_) => 2,
            Layout::Uniform { threads } => size.div_ceil(threads).max(1),
            Layout::Wmma => 0,
        }
    }

    fn name(self) -> String {
        match self {
            Layout::WgAcc { n } => format!("WGMMA_ACC (64x{n})"),
            Layout::SyncAcc => "SYNC_ACC (16x8)".into(),
            Layout::Rep(RowLayout::Wgmma) => "REPLICATED_1D (of WGMMA_ACC rows)".into(),
            Layout::Rep(RowLayout::Sync) => "REPLICATED_1D (of SYNC_ACC rows)".into(),
            Layout::Uniform { threads } => format!("UNIFORM ({threads} threads)"),
            Layout::Wmma => "WMMA (opaque)".into(),
        }
    }

    /// Template code of the layout for `frag_ops.cuh`: 0 WGMMA_ACC, 1 SYNC_ACC, 2/3
    /// REPLICATED_1D of WGMMA/SYNC rows, 4 UNIFORM.
    fn code(self) -> i128 {
        match self {
            Layout::WgAcc { .. } => 0,
            Layout::SyncAcc => 1,
            Layout::Rep(RowLayout::Wgmma) => 2,
            Layout::Rep(RowLayout::Sync) => 3,
            Layout::Uniform { .. } | Layout::Wmma => 4,
        }
    }

    fn rows(self) -> Option<RowLayout> {
        match self {
            Layout::WgAcc { .. } => Some(RowLayout::Wgmma),
            Layout::SyncAcc => Some(RowLayout::Sync),
            _ => None,
        }
    }
}

/// A shaped fragment.
#[derive(Debug, Clone)]
pub(crate) struct Shaped {
    name: String,
    elem: ElemTy,
    shape: Vec<u64>,
    /// The threads of the declaring scope (128 in a warpgroup, 32 in a warp).
    threads: u64,
    layout: Option<(Layout, Span)>,
}

/// One fragment an operation names: an accumulator or a shaped fragment.
#[derive(Debug, Clone)]
enum Named {
    Acc(FragRef, FragId),
    Shaped(VarId),
}

/// The `apply` being checked.
#[derive(Debug, Clone)]
struct ApplyCtx {
    layout: Layout,
    shape: Vec<u64>,
    binders: Vec<String>,
    reg: VarId,
    /// Accumulators copied to buffers around the loop.
    accs: Vec<(FragId, FragRef, VarId, u64)>,
}

/// What the fragment checks remember about a function.
#[derive(Debug, Default)]
pub(crate) struct FragSema {
    shaped: HashMap<VarId, Shaped>,
    apply: Option<ApplyCtx>,
}

fn stmt(kind: StmtKind, span: Span) -> Stmt {
    Stmt { kind, span }
}

fn frag_stmt(op: FragOp, span: Span) -> Stmt {
    stmt(StmtKind::Mma(Box::new(MmaOp::Frag(Box::new(op)))), span)
}

fn s32(kind: HExprKind, span: Span) -> HExpr {
    HExpr { kind, ty: Ty::Scalar(ElemTy::S32), span }
}

/// `CHOREO_FRAG_NS::name<targs…>(args…)` (s32).
fn helper(name: &str, targs: &[i128], args: Vec<HExpr>, span: Span) -> HExpr {
    s32(
        HExprKind::Call {
            callee: format!("CHOREO_FRAG_NS::{name}"),
            targs: targs.iter().map(|v| TemplateArg::Int(*v)).collect(),
            args,
        },
        span,
    )
}

impl Checker<'_> {
    fn frag_threads(&self) -> u64 {
        if self.kernel.as_ref().is_some_and(|k| k.group4_depth > 0) { 128 } else { 32 }
    }

    /// `frag T [shape] a, b {v};` (spec-tier3 §6.1).
    pub(crate) fn check_shaped_frag_decl(
        &mut self,
        d: &ast::FragDecl,
        shape: &ast::Shape,
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        let ok = self.frag_place_ok(span);
        let dims = match shape {
            ast::Shape::List { span, items } => self.check_shape_list(items, *span),
            ast::Shape::Auto(s) => {
                self.error_label(
                    "E1034",
                    *s,
                    "a shaped fragment needs a constant shape",
                    "`[auto]`",
                );
                None
            }
        };
        let shape_span = match shape {
            ast::Shape::List { span, .. } | ast::Shape::Auto(span) => *span,
        };
        let consts: Option<Vec<u64>> =
            dims.as_ref().and_then(|d| d.iter().map(Dim::as_const).collect());
        let shape_ok = match &consts {
            Some(c) if (1..=2).contains(&c.len()) && c.iter().product::<u64>() <= 16384 => true,
            Some(_) | None if dims.is_none() => false,
            _ => {
                self.error_label(
                    "E1034",
                    shape_span,
                    "a shaped fragment has one or two constant extents (at most 16384 elements)",
                    "not a constant 1-D or 2-D shape",
                );
                false
            }
        };
        let elem = match d.elem {
            Some((t, _)) => super::types::elem_from_token(t),
            None => {
                self.error_label(
                    "E1034",
                    span,
                    "a shaped fragment needs an element type (`frag f32 [64] m;`)",
                    "no element type",
                );
                ElemTy::F32
            }
        };
        for item in &d.items {
            if !item.array_dims.is_empty() {
                self.error_label(
                    "E1034",
                    item.span,
                    "a shaped fragment cannot be an array",
                    "array dimensions",
                );
            }
            if !(ok && shape_ok && item.array_dims.is_empty()) {
                self.declare_poisoned(&item.name);
                continue;
            }
            let shape = consts.clone().unwrap_or_default();
            let ty =
                Ty::Spanned(SpannedTy { elem, dims: vec![Dim::Const(1)], storage: Storage::Local });
            let var = self.new_local(
                &item.name.name,
                item.name.span,
                ty,
                LocalPlace::LocalBuffer,
                false,
                LocalOrigin::Decl,
            );
            self.declare_symbol(&item.name, Symbol::Local(var));
            let threads = self.frag_threads();
            self.frag_sema.shaped.insert(
                var,
                Shaped { name: item.name.name.clone(), elem, shape, threads, layout: None },
            );
            let init = match &item.init {
                Some(e) => match self.check_expr(e) {
                    super::Val::Scalar(v) if v.ty.scalar().is_some_and(|t| t != ElemTy::Bool) => {
                        self.convert(v, elem)
                    }
                    super::Val::Error => None,
                    _ => {
                        self.error_label(
                            "E1034",
                            e.span,
                            "a fragment is initialised with a numeric scalar",
                            "not a numeric scalar",
                        );
                        None
                    }
                },
                None => None,
            };
            out.push(stmt(StmtKind::DeclBuffer { var, init }, item.span));
        }
    }

    /// Fragment operations are where MMA statements are: a warp's or a warpgroup's body.
    fn frag_place_ok(&mut self, span: Span) -> bool {
        if self.kernel.as_ref().is_some_and(|k| k.group4_depth > 0) {
            return true;
        }
        if matches!(self.region, super::Region::Device(crate::hir::Level::Group)) {
            return true;
        }
        self.error_label(
            "E1001",
            span,
            "fragments belong to a warp or a warpgroup: they must be in the body of a `: group` \
             or `: group-4` parallel level",
            "not directly inside a `: group` or `: group-4` level",
        );
        false
    }

    /// The layout of an accumulator, once its execution is known (`E1036` before).
    fn acc_layout(&mut self, id: FragId, span: Span) -> Option<Layout> {
        let f = self.frags.get(id.index())?.clone();
        let layout = match (f.selected, f.role) {
            (Some(sel), Some(MmaRole::C)) => match sel.family {
                MmaFamily::Wgmma => Some(Layout::WgAcc { n: sel.config.n }),
                MmaFamily::MmaSync if sel.config.m == 16 && sel.config.n == 8 => {
                    Some(Layout::SyncAcc)
                }
                MmaFamily::Wmma => Some(Layout::Wmma),
                MmaFamily::MmaSync => None,
            },
            _ => None,
        };
        if layout.is_none() {
            self.diags.push(
                Diagnostic::error(
                    "E1036",
                    span,
                    format!(
                        "the fragment layout of `{}' is not known here: only accumulators of an \
                         earlier WGMMA or m16n8 mma.sync execution (and WMMA ones, opaque) have one",
                        f.name
                    ),
                )
                .with_label("no inferred fragment layout")
                .with_secondary(f.span, "declared here")
                .with_help("execute the MMA on the accumulator before this statement"),
            );
        }
        layout
    }

    fn acc_shape(&self, id: FragId) -> Vec<u64> {
        self.frags
            .get(id.index())
            .and_then(|f| f.selected)
            .map(|s| vec![s.config.m, s.config.n])
            .unwrap_or_default()
    }

    /// The fragment an operand of a fragment operation names (`E1040` otherwise).
    fn named_frag(&mut self, e: &ast::Expr, what: &str) -> Option<Named> {
        if let ExprKind::Ident(id) = &e.kind {
            match self.scopes.lookup(&id.name).cloned() {
                Some(Symbol::Local(v)) if self.frag_sema.shaped.contains_key(&v) => {
                    return Some(Named::Shaped(v));
                }
                Some(Symbol::Frag(_)) => {}
                None => {
                    self.undeclared(id);
                    return None;
                }
                Some(_) => {
                    self.error_label(
                        "E1040",
                        e.span,
                        format!("{what} must be a fragment, but `{}' is not one", id.name),
                        "not a fragment",
                    );
                    return None;
                }
            }
        } else if !matches!(e.kind, ExprKind::Index { .. }) {
            self.error_label(
                "E1040",
                e.span,
                format!("{what} must be a fragment"),
                "not a fragment",
            );
            return None;
        }
        let r = self.frag_ref(e, false, what)?;
        let id = r.frag;
        Some(Named::Acc(r, id))
    }

    /// Gives a shaped fragment a layout or checks that it has it (`E1032`).
    fn fix_layout(&mut self, var: VarId, layout: Layout, span: Span) -> bool {
        let Some(s) = self.frag_sema.shaped.get(&var).cloned() else { return false };
        match s.layout {
            Some((l, _)) if l == layout => true,
            Some((l, at)) => {
                self.diags.push(
                    Diagnostic::error(
                        "E1032",
                        span,
                        format!(
                            "the fragment layout of `{}' cannot be inferred consistently: this \
                             use needs {}, but it is {}",
                            s.name,
                            layout.name(),
                            l.name()
                        ),
                    )
                    .with_label("needs another layout")
                    .with_secondary(at, "the layout was fixed here")
                    .with_help("use a separate fragment for each layout (spec-tier3 §6.1)"),
                );
                false
            }
            None => {
                let regs = layout.regs(s.shape.iter().product());
                if let Some(local) = self.locals.get_mut(var.index()) {
                    if let Ty::Spanned(t) = &mut local.ty {
                        t.dims = vec![Dim::Const(regs)];
                    }
                }
                if let Some(sh) = self.frag_sema.shaped.get_mut(&var) {
                    sh.layout = Some((layout, span));
                }
                true
            }
        }
    }

    /// The layout of a shaped fragment, UNIFORM when nothing fixed one yet.
    fn shaped_layout(&mut self, var: VarId, span: Span) -> Layout {
        let s = self.frag_sema.shaped[&var].clone();
        match s.layout {
            Some((l, _)) => l,
            None => {
                let l = Layout::Uniform { threads: s.threads };
                self.fix_layout(var, l, span);
                l
            }
        }
    }

    /// A fresh per-thread buffer of `regs` elements of `elem`, declared into `out`.
    fn frag_temp(&mut self, elem: ElemTy, regs: u64, span: Span, out: &mut Vec<Stmt>) -> VarId {
        let ty = Ty::Spanned(SpannedTy {
            elem,
            dims: vec![Dim::Const(regs.max(1))],
            storage: Storage::Local,
        });
        let var = self.new_local(
            "__frag_tmp",
            span,
            ty,
            LocalPlace::LocalBuffer,
            false,
            LocalOrigin::Decl,
        );
        out.push(stmt(StmtKind::DeclBuffer { var, init: None }, span));
        var
    }

    fn acc_elem(&self, id: FragId) -> ElemTy {
        self.frags.get(id.index()).map(|f| f.elem).unwrap_or(ElemTy::F32)
    }

    /// `reduce_max`, `reduce_sum`, `all_reduce_sum`, `copy` (spec-tier3 §6.2).
    pub(crate) fn check_frag_op(&mut self, op: &ast::FragOp, span: Span, out: &mut Vec<Stmt>) {
        if !self.frag_place_ok(span) {
            return;
        }
        match op {
            ast::FragOp::ReduceMax { dst, src, axis } => {
                self.check_reduce(true, dst, src, axis, span, out)
            }
            ast::FragOp::ReduceSum { dst, src, axis } => {
                self.check_reduce(false, dst, src, axis, span, out)
            }
            ast::FragOp::AllReduceSum(v) => self.check_all_reduce(v, span, out),
            ast::FragOp::Copy { dst, src } => self.check_frag_copy(dst, src, span, out),
        }
    }

    fn check_reduce(
        &mut self,
        max: bool,
        dst: &ast::Expr,
        src: &ast::Expr,
        axis: &(crate::token::IntLit, Span),
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        let d = self.named_frag(dst, "the destination of a reduction");
        let s = self.named_frag(src, "the source of a reduction");
        if axis.0.value != 1 {
            self.error_label(
                "E1035",
                axis.1,
                "frag.reduce currently only supports dim=1 (column reduction).",
                "not dimension 1",
            );
            return;
        }
        let (Some(d), Some(s)) = (d, s) else { return };
        let Named::Shaped(dvar) = d else {
            self.error_label(
                "E1040",
                dst.span,
                "the destination of a reduction must be a 1-D shaped fragment (`frag f32 [M] m;`)",
                "an accumulator",
            );
            return;
        };
        // The source's layout and registers.
        let mut block = Vec::new();
        let (layout, shape, sbuf) = match &s {
            Named::Acc(r, id) => {
                let Some(l) = self.acc_layout(*id, src.span) else { return };
                let shape = self.acc_shape(*id);
                (l, shape, Err((r.clone(), *id)))
            }
            Named::Shaped(v) => {
                let l = self.shaped_layout(*v, src.span);
                (l, self.frag_sema.shaped[v].shape.clone(), Ok(*v))
            }
        };
        let rows = match layout {
            Layout::Wmma => {
                self.wmma_opaque(src.span, "a reduction");
                return;
            }
            l => match l.rows() {
                Some(r) => r,
                None => {
                    self.diags.push(
                        Diagnostic::error(
                            "E1036",
                            src.span,
                            format!(
                                "a reduction reads a 2-D fragment of an accumulator layout \
                                 (WGMMA_ACC or SYNC_ACC), but this one is {}",
                                l.name()
                            ),
                        )
                        .with_label("no row layout")
                        .with_help(
                            "reduce an accumulator, or a fragment copied from one \
                             (`copy(f, acc);`)",
                        ),
                    );
                    return;
                }
            },
        };
        let dshape = self.frag_sema.shaped[&dvar].shape.clone();
        if dshape.len() != 1 || shape.first() != dshape.first() {
            self.error_label(
                "E1039",
                dst.span,
                format!(
                    "the destination of a row reduction of a {shape:?} fragment must be a 1-D \
                     fragment of {} elements, but it is {dshape:?}",
                    shape.first().copied().unwrap_or(0)
                ),
                "shapes differ",
            );
            return;
        }
        if !self.fix_layout(dvar, Layout::Rep(rows), dst.span) {
            return;
        }
        let regs = layout.regs(shape.iter().product());
        let src_var = match sbuf {
            Ok(v) => v,
            Err((r, id)) => {
                let elem = self.acc_elem(id);
                let t = self.frag_temp(elem, regs, span, &mut block);
                block.push(frag_stmt(FragOp::Unpack { acc: r, buf: t, regs }, span));
                t
            }
        };
        block.push(frag_stmt(FragOp::Reduce { max, dst: dvar, src: src_var, regs, rows }, span));
        out.push(stmt(StmtKind::Block(block), span));
    }

    fn wmma_opaque(&mut self, span: Span, what: &str) {
        self.diags.push(
            Diagnostic::error("E1031", span, "fragment layout of a WMMA accumulator is opaque")
                .with_label(format!("{what} needs the element positions"))
                .with_help(
                    "on WMMA accumulators only `frag op= scalar` works; use an mma.sync (16x8) or \
                 WGMMA accumulator for element-wise work (spec-tier3 §6.1)",
                ),
        );
    }

    fn check_all_reduce(&mut self, v: &ast::Expr, span: Span, out: &mut Vec<Stmt>) {
        let Some(n) = self.named_frag(v, "the operand of all_reduce_sum") else { return };
        let Named::Shaped(var) = n else {
            self.error_label(
                "E1037",
                v.span,
                "all_reduce_sum requires a replicated 1D fragment layout.",
                "an accumulator",
            );
            return;
        };
        match self.frag_sema.shaped[&var].layout {
            Some((Layout::Rep(_), _)) => {
                out.push(frag_stmt(FragOp::AllReduce { buf: var }, span));
            }
            Some((l, at)) => self.diags.push(
                Diagnostic::error(
                    "E1037",
                    v.span,
                    "all_reduce_sum requires a replicated 1D fragment layout.",
                )
                .with_label(format!("its layout is {}", l.name()))
                .with_secondary(at, "the layout was fixed here"),
            ),
            None => self.diags.push(
                Diagnostic::error(
                    "E1038",
                    v.span,
                    "all_reduce_sum requires an inferred fragment layout.",
                )
                .with_label("no operation fixed the layout of this fragment yet")
                .with_help(
                    "write it in an `apply` over a 2-D accumulator, or reduce into it \
                     (`reduce_sum(v, acc, 1);`), first",
                ),
            ),
        }
    }

    fn check_frag_copy(
        &mut self,
        dst: &ast::Expr,
        src: &ast::Expr,
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        let d = self.named_frag(dst, "the destination of copy");
        let s = self.named_frag(src, "the source of copy");
        let (Some(d), Some(s)) = (d, s) else { return };
        let shape_of = |this: &Self, n: &Named| match n {
            Named::Acc(_, id) => this.acc_shape(*id),
            Named::Shaped(v) => this.frag_sema.shaped[v].shape.clone(),
        };
        let mut block = Vec::new();
        // Layouts: an accumulator's decides; two shaped fragments share one.
        let layout = match (&d, &s) {
            (Named::Acc(_, id), _) | (_, Named::Acc(_, id)) => {
                let Some(l) = self.acc_layout(*id, span) else { return };
                l
            }
            (Named::Shaped(a), Named::Shaped(b)) => {
                match (self.frag_sema.shaped[a].layout, self.frag_sema.shaped[b].layout) {
                    (Some((l, _)), _) | (None, Some((l, _))) => l,
                    (None, None) => self.shaped_layout(*a, dst.span),
                }
            }
        };
        if let (Named::Acc(_, a), Named::Acc(_, b)) = (&d, &s) {
            let la = self.acc_layout(*a, dst.span);
            if la != Some(layout)
                || layout == Layout::Wmma && self.acc_shape(*a) != self.acc_shape(*b)
            {
                self.error_label(
                    "E1032",
                    span,
                    "copy between accumulators of different layouts",
                    "layouts differ",
                );
                return;
            }
        }
        let (ds, ss) = (shape_of(self, &d), shape_of(self, &s));
        if ds != ss {
            self.error_label(
                "E1039",
                span,
                format!("copy needs fragments of one shape, but got {ds:?} and {ss:?}"),
                "shapes differ",
            );
            return;
        }
        if layout == Layout::Wmma
            && (matches!(d, Named::Shaped(_)) || matches!(s, Named::Shaped(_)))
        {
            self.wmma_opaque(span, "a copy between a WMMA accumulator and a shaped fragment");
            return;
        }
        for (n, e) in [(&d, dst), (&s, src)] {
            if let Named::Shaped(v) = n {
                if !self.fix_layout(*v, layout, e.span) {
                    return;
                }
            }
        }
        let regs = match layout {
            Layout::Wmma => 0,
            l => l.regs(ds.iter().product()),
        };
        match (d, s) {
            (Named::Shaped(dv), Named::Shaped(sv)) => {
                block.push(frag_stmt(FragOp::Copy { dst: dv, src: sv, regs }, span))
            }
            (Named::Shaped(dv), Named::Acc(r, _)) => {
                block.push(frag_stmt(FragOp::Unpack { acc: r, buf: dv, regs }, span))
            }
            (Named::Acc(r, _), Named::Shaped(sv)) => {
                block.push(frag_stmt(FragOp::Pack { acc: r, buf: sv, regs }, span))
            }
            (Named::Acc(dr, _), Named::Acc(sr, sid)) => {
                if layout == Layout::Wmma {
                    self.wmma_opaque(span, "a copy between WMMA accumulators");
                    return;
                }
                let elem = self.acc_elem(sid);
                let t = self.frag_temp(elem, regs, span, &mut block);
                block.push(frag_stmt(FragOp::Unpack { acc: sr, buf: t, regs }, span));
                block.push(frag_stmt(FragOp::Pack { acc: dr, buf: t, regs }, span));
            }
        }
        out.push(stmt(StmtKind::Block(block), span));
    }

    /// `apply {i, j} in x.span { … }` (spec-tier3 §6.2).
    pub(crate) fn check_apply(
        &mut self,
        names: &[ast::Ident],
        target: &ast::Ident,
        body: &ast::Block,
        span: Span,
        out: &mut Vec<Stmt>,
    ) {
        if !self.frag_place_ok(span) {
            return;
        }
        if self.frag_sema.apply.is_some() {
            self.error_label("E1033", span, "`apply` cannot be nested", "inside another apply");
            return;
        }
        let target_expr = ast::Expr { kind: ExprKind::Ident(target.clone()), span: target.span };
        let Some(named) = self.named_frag(&target_expr, "the iterated fragment") else { return };
        let (layout, shape) = match &named {
            Named::Acc(_, id) => {
                let Some(l) = self.acc_layout(*id, target.span) else { return };
                (l, self.acc_shape(*id))
            }
            Named::Shaped(v) => {
                let l = self.shaped_layout(*v, target.span);
                (l, self.frag_sema.shaped[v].shape.clone())
            }
        };
        if layout == Layout::Wmma {
            self.wmma_opaque(target.span, "`apply`");
            return;
        }
        if names.len() != shape.len() {
            self.error_label(
                "E1039",
                span,
                format!(
                    "apply over a fragment of rank {} binds {} name(s)",
                    shape.len(),
                    names.len()
                ),
                "wrong number of indices",
            );
            return;
        }
        let size: u64 = shape.iter().product();
        let regs = layout.regs(size);
        let mut outer = Vec::new();
        self.scopes.push();
        let reg = self.new_local(
            "__frag_r",
            span,
            Ty::BoundedInt,
            LocalPlace::DeviceScalar,
            false,
            LocalOrigin::WithIndex { upper: Dim::Const(regs.max(1)) },
        );
        let rexpr = s32(HExprKind::Var(reg), span);
        let threads = match layout {
            Layout::WgAcc { .. } | Layout::Rep(RowLayout::Wgmma) => 128,
            Layout::SyncAcc | Layout::Rep(RowLayout::Sync) => 32,
            Layout::Uniform { threads } => threads,
            Layout::Wmma => 32,
        };
        let cols = if shape.len() == 2 { shape[1] } else { 1 };
        let mut lets = Vec::new();
        for (k, n) in names.iter().enumerate() {
            let place = LocalPlace::DeviceScalar;
            let var = self.new_local(
                &n.name,
                n.span,
                Ty::Scalar(ElemTy::S32),
                place,
                false,
                LocalOrigin::Decl,
            );
            self.declare_symbol(n, Symbol::Local(var));
            let init = helper(
                "index",
                &[layout.code(), k as i128, cols as i128, threads as i128],
                vec![rexpr.clone()],
                n.span,
            );
            lets.push(stmt(StmtKind::Let { var, init: Some(init) }, n.span));
        }
        self.frag_sema.apply = Some(ApplyCtx {
            layout,
            shape: shape.clone(),
            binders: names.iter().map(|n| n.name.clone()).collect(),
            reg,
            accs: Vec::new(),
        });
        self.loop_depth += 1;
        let inner = self.check_block_scoped(body);
        self.loop_depth -= 1;
        self.scopes.pop();
        let ctx = self.frag_sema.apply.take();
        let Some(ctx) = ctx else { return };
        for (_, r, buf, n) in &ctx.accs {
            outer.push(stmt(StmtKind::DeclBuffer { var: *buf, init: None }, span));
            outer.push(frag_stmt(FragOp::Unpack { acc: r.clone(), buf: *buf, regs: *n }, span));
        }
        let mut body = lets;
        if let Layout::Uniform { .. } = layout {
            let cond = HExpr {
                kind: HExprKind::Binary {
                    op: crate::hir::BinOp::Lt,
                    lhs: Box::new(helper(
                        "index",
                        &[layout.code(), 2, cols as i128, threads as i128],
                        vec![rexpr.clone()],
                        span,
                    )),
                    rhs: Box::new(fold::int_lit(size as i128, span)),
                },
                ty: Ty::Scalar(ElemTy::Bool),
                span,
            };
            body = vec![stmt(
                StmtKind::If {
                    cond,
                    then_body: {
                        let mut b = body;
                        b.extend(inner);
                        b
                    },
                    else_body: Vec::new(),
                },
                span,
            )];
        } else {
            body.extend(inner);
        }
        outer.push(stmt(StmtKind::Let { var: reg, init: Some(fold::int_lit(0, span)) }, span));
        outer.push(stmt(
            StmtKind::For {
                var: reg,
                start: fold::int_lit(0, span),
                end: fold::int_lit(regs as i128, span),
                step: 1,
                reset: false,
                unroll: Some(Unroll::Full),
                body,
            },
            span,
        ));
        for (_, r, buf, n) in &ctx.accs {
            outer.push(frag_stmt(FragOp::Pack { acc: r.clone(), buf: *buf, regs: *n }, span));
        }
        out.push(stmt(StmtKind::Block(outer), span));
    }

    /// `x.at(…)` of a fragment `x` (inside `apply`): the buffer element it is, or `None`
    /// when `base` names no fragment (an ordinary element access). `Some(None)` after
    /// reporting.
    #[allow(clippy::type_complexity)]
    pub(crate) fn frag_element(
        &mut self,
        base: &ast::Expr,
        indices: &[ast::Expr],
        span: Span,
    ) -> Option<Option<(BufferRef, ElemIndex, ElemTy)>> {
        let ExprKind::Ident(id) = &base.kind else { return None };
        let named = match self.scopes.lookup(&id.name).cloned() {
            Some(Symbol::Local(v)) if self.frag_sema.shaped.contains_key(&v) => Named::Shaped(v),
            Some(Symbol::Frag(f)) => Named::Acc(FragRef { frag: f, index: Vec::new() }, f),
            _ => return None,
        };
        Some(self.frag_element_of(named, &id.name, indices, span))
    }

    fn frag_element_of(
        &mut self,
        named: Named,
        name: &str,
        indices: &[ast::Expr],
        span: Span,
    ) -> Option<(BufferRef, ElemIndex, ElemTy)> {
        let Some(ctx) = self.frag_sema.apply.clone() else {
            self.error_label(
                "E1033",
                span,
                format!("the elements of fragment `{name}' can only be accessed inside `apply`"),
                "fragment element outside apply",
            );
            return None;
        };
        if let Named::Acc(_, f) = &named {
            // A pending asynchronous WGMMA (E1028, like every other use of the accumulator).
            if self.frag_states.get(f.index()).is_some_and(|s| s.pending.is_some()) {
                let e = ast::Expr {
                    kind: ExprKind::Ident(ast::Ident { name: name.to_string(), span }),
                    span,
                };
                let _ = self.frag_ref(&e, false, "the accumulator");
                return None;
            }
            if self.frags.get(f.index()).is_some_and(|f| !f.array_dims.is_empty()) {
                self.error_label(
                    "E1033",
                    span,
                    "an element of a fragment array cannot be accessed in `apply`",
                    "a fragment array",
                );
                return None;
            }
        }
        if ctx.layout == Layout::Wmma {
            self.wmma_opaque(span, "an element access");
            return None;
        }
        // The indices must be the binders (the element the iteration is at).
        let binders_ok = indices.len() <= ctx.binders.len()
            && indices
                .iter()
                .zip(&ctx.binders)
                .all(|(e, b)| matches!(&e.kind, ExprKind::Ident(i) if &i.name == b));
        let (shape, elem) = match &named {
            Named::Acc(_, f) => (self.acc_shape(*f), self.acc_elem(*f)),
            Named::Shaped(v) => {
                let s = &self.frag_sema.shaped[v];
                (s.shape.clone(), s.elem)
            }
        };
        if !binders_ok || indices.len() != shape.len() {
            self.error_label(
                "E1033",
                span,
                format!(
                    "inside `apply`, fragment `{name}' is accessed at the element the iteration \
                     is at: `{name}.at({})`",
                    ctx.binders[..shape.len().min(ctx.binders.len())].join(", ")
                ),
                "not the apply's indices",
            );
            return None;
        }
        let r = s32(HExprKind::Var(ctx.reg), span);
        // Same shape: the same layout, register r. A 1-D fragment of the rows of a 2-D
        // accumulator layout: REPLICATED_1D, the register of r's row.
        let (layout, index) = if shape == ctx.shape {
            (ctx.layout, r)
        } else if shape.len() == 1 && ctx.shape.len() == 2 && shape[0] == ctx.shape[0] {
            let Some(rows) = ctx.layout.rows() else {
                self.diags.push(
                    Diagnostic::error(
                        "E1032",
                        span,
                        format!(
                            "fragment `{name}' is not layout-compatible with the iterated \
                             fragment ({}): only 2-D accumulator layouts have replicated rows",
                            ctx.layout.name()
                        ),
                    )
                    .with_label("incompatible fragment"),
                );
                return None;
            };
            // WGMMA_ACC: (r % 4) / 2; SYNC_ACC: r / 2 (frag_ops.cuh `row_reg`), as arithmetic
            // that bounds checking can prove in range.
            let bin = |op, lhs: HExpr, v: i128| {
                s32(
                    HExprKind::Binary {
                        op,
                        lhs: Box::new(lhs),
                        rhs: Box::new(fold::int_lit(v, span)),
                    },
                    span,
                )
            };
            let row = match rows {
                RowLayout::Wgmma => bin(crate::hir::BinOp::Rem, r, 4),
                RowLayout::Sync => r,
            };
            (Layout::Rep(rows), bin(crate::hir::BinOp::Div, row, 2))
        } else {
            self.error_label(
                "E1032",
                span,
                format!(
                    "fragment `{name}' ({shape:?}) is not layout-compatible with the iterated \
                     fragment ({:?})",
                    ctx.shape
                ),
                "incompatible fragment",
            );
            return None;
        };
        match named {
            Named::Shaped(v) => {
                if !self.fix_layout(v, layout, span) {
                    return None;
                }
                Some((BufferRef::Local(v), ElemIndex::Coords(vec![index]), elem))
            }
            Named::Acc(r, f) => {
                let l = self.acc_layout(f, span)?;
                if l != layout {
                    self.error_label(
                        "E1032",
                        span,
                        "this accumulator is not layout-compatible with the iterated fragment",
                        "incompatible fragment",
                    );
                    return None;
                }
                let regs = l.regs(shape.iter().product());
                let apply = self.frag_sema.apply.as_mut()?;
                let buf = match apply.accs.iter().find(|(id, ..)| *id == f) {
                    Some((_, _, b, _)) => *b,
                    None => {
                        let ty = Ty::Spanned(SpannedTy {
                            elem,
                            dims: vec![Dim::Const(regs)],
                            storage: Storage::Local,
                        });
                        let b = self.new_local(
                            "__frag_acc",
                            span,
                            ty,
                            LocalPlace::LocalBuffer,
                            false,
                            LocalOrigin::Decl,
                        );
                        if let Some(a) = self.frag_sema.apply.as_mut() {
                            a.accs.push((f, r, b, regs));
                        }
                        b
                    }
                };
                Some((BufferRef::Local(buf), ElemIndex::Coords(vec![index]), elem))
            }
        }
    }

    /// Operand A of a WGMMA from a shaped fragment (RS mode, spec-tier3 §5.4): `p` or
    /// `p.chunkat(_, k)` of a `[64, N]` fragment of a WGMMA A type (16-bit f16/bf16, f32 read
    /// as tf32, 8-bit e4m3/e5m2/s8/u8), which then has the WGMMA_ACC layout; the operand's K is
    /// a multiple of the type's instruction K (16, 8, 32).
    /// Declares the operand registers and fills them into `out`. `None` when `a` names no
    /// shaped fragment; `Some(None)` after reporting.
    #[allow(clippy::type_complexity)]
    pub(crate) fn wg_shaped_a(
        &mut self,
        a: &ast::Expr,
        a_row: bool,
        out: &mut Vec<Stmt>,
    ) -> Option<Option<([u64; 2], ElemTy, WgA)>> {
        let (base, chunk) = match &a.kind {
            ExprKind::View { base, op: ast::ViewOp::Chunkat(args) } => (base.as_ref(), Some(args)),
            _ => (a, None),
        };
        let ExprKind::Ident(id) = &base.kind else { return None };
        let Some(Symbol::Local(var)) = self.scopes.lookup(&id.name).cloned() else { return None };
        let sh = self.frag_sema.shaped.get(&var)?.clone();
        Some(self.wg_shaped_a_of(var, &sh, chunk.map(|c| c.as_slice()), a, a_row, out))
    }

    fn wg_shaped_a_of(
        &mut self,
        var: VarId,
        sh: &Shaped,
        chunk: Option<&[ast::Expr]>,
        a: &ast::Expr,
        a_row: bool,
        out: &mut Vec<Stmt>,
    ) -> Option<([u64; 2], ElemTy, WgA)> {
        let rs_error = |this: &mut Self, span: Span, msg: String, label: &str| {
            this.diags.push(
                Diagnostic::error("E1041", span, msg).with_label(label.to_string()).with_help(
                    "RS mode reads a `[64, N]` fragment copied from a WGMMA accumulator \
                     (`frag f16 [64, N] p; copy(p, s);`, or bf16, f32 for tf32, e4m3, e5m2, s8, \
                     u8) as `mma.row.<b> acc, p.chunkat(_, k), B;` with N / (k's extent) a \
                     multiple of the instruction's K: 16 for 16-bit, 8 for tf32, 32 for 8-bit \
                     types (spec-tier3 §5.4)",
                ),
            );
        };
        // The WGMMA A types and the instruction's K for each: 16-bit operands are the
        // accumulator's own registers (`to_afrag`), tf32 and 8-bit ones are gathered from the
        // quad's lanes (`to_afrag_quad`).
        let atom = matches!(
            sh.elem,
            ElemTy::F16
                | ElemTy::Bf16
                | ElemTy::F32
                | ElemTy::F8E4m3
                | ElemTy::F8E5m2
                | ElemTy::S8
                | ElemTy::U8
        )
        .then(|| super::wgmma::atom_k(super::mma::mma_type(sh.elem, true)));
        let (cols, atom) = match (sh.shape.as_slice(), atom) {
            ([64, c], Some(atom)) => (*c, atom),
            _ => {
                rs_error(
                    self,
                    a.span,
                    format!(
                        "fragment `{}' ({} {:?}) cannot be the register A operand of a WGMMA: an \
                         A operand from a fragment must be a [64, N] fragment of a WGMMA A type \
                         (f16, bf16, f32 read as tf32, f8_e4m3, f8_e5m2, s8 or u8)",
                        sh.name,
                        super::types::ty_name(&Ty::Scalar(sh.elem)),
                        sh.shape
                    ),
                    "not a [64, N] fragment of a WGMMA A type",
                );
                return None;
            }
        };
        if !a_row {
            rs_error(
                self,
                a.span,
                if atom == 16 {
                    "a fragment operand A is K-major: use `mma.row.row` or `mma.row.col`".into()
                } else {
                    // tf32 and 8-bit WGMMAs take no MN-major B either (E1022).
                    format!(
                        "a fragment operand A is K-major, and WGMMAs of {} take only K-major \
                         operands: use `mma.row.row`",
                        rs_type_name(sh.elem)
                    )
                },
                "a fragment as an M-major A operand",
            );
            return None;
        }
        let (c0, k) = match chunk {
            None if cols % atom == 0 => (fold::int_lit(0, a.span), cols),
            None => {
                rs_error(
                    self,
                    a.span,
                    format!(
                        "the register A operand `{}' has {cols} columns, not a multiple of {atom} \
                         (the K of one {} instruction)",
                        sh.name,
                        rs_type_name(sh.elem)
                    ),
                    "not a whole number of instructions",
                );
                return None;
            }
            Some(args) => {
                let ok_shape = args.len() == 2 && matches!(args[0].kind, ExprKind::Wildcard);
                let idx =
                    if ok_shape { Some(self.check_int(&args[1], "a chunk index")) } else { None };
                let parts = idx.as_ref().and_then(|i| match &i.kind {
                    HExprKind::Var(v) => self.upper_of(*v).and_then(|d| d.as_const()),
                    _ => None,
                });
                match (idx, parts) {
                    (Some(i), Some(p)) if p > 0 && cols % p == 0 && (cols / p) % atom == 0 => {
                        let k = cols / p;
                        let c0 = s32(
                            HExprKind::Binary {
                                op: crate::hir::BinOp::Mul,
                                lhs: Box::new(i),
                                rhs: Box::new(fold::int_lit(k as i128, a.span)),
                            },
                            a.span,
                        );
                        (c0, k)
                    }
                    _ => {
                        rs_error(
                            self,
                            a.span,
                            format!(
                                "the register A operand `{}.chunkat(_, k)' must split the {cols} \
                                 columns by a bounded index `k` into chunks of a multiple of \
                                 {atom} (the K of one {} instruction)",
                                sh.name,
                                rs_type_name(sh.elem)
                            ),
                            "not a supported chunk",
                        );
                        return None;
                    }
                }
            }
        };
        if !self.fix_layout(var, Layout::WgAcc { n: cols }, a.span) {
            return None;
        }
        let id = FragId(u32::try_from(self.frags.len()).unwrap_or(u32::MAX));
        self.frags.push(crate::hir::mma::Frag {
            name: format!("{}_a", sh.name),
            span: a.span,
            elem: sh.elem,
            array_dims: Vec::new(),
            role: None,
            selected: None,
            k_major: true,
            explicit_elem: false,
            extent_k: 0,
        });
        let st = super::mma::FragState { loaded: Some([64, k]), ..Default::default() };
        self.frag_states.push(st);
        let afrag = FragRef { frag: id, index: Vec::new() };
        out.push(stmt(StmtKind::Mma(Box::new(MmaOp::Decl(id))), a.span));
        out.push(frag_stmt(FragOp::ToA { afrag: afrag.clone(), buf: var, c0, k }, a.span));
        Some(([64, k], sh.elem, WgA::Regs(afrag)))
    }

    /// `frag op= scalar` (spec-tier3 §5.6) when `target` names a shaped fragment: whether it
    /// did.
    pub(crate) fn check_shaped_update(&mut self, a: &ast::Assignment, out: &mut Vec<Stmt>) -> bool {
        let ExprKind::Ident(id) = &a.target.kind else { return false };
        let Some(Symbol::Local(var)) = self.scopes.lookup(&id.name).cloned() else { return false };
        if !self.frag_sema.shaped.contains_key(&var) {
            return false;
        }
        let op = super::stmt::hir_assign_op(a.op);
        let value = self.check_expr(&a.value);
        let Some((op, value)) = self.fragment_update(a, op, value) else { return true };
        if self.frag_place_ok(a.span) {
            out.push(frag_stmt(FragOp::Update { buf: var, op, value }, a.span));
        }
        true
    }

    /// Gives every shaped fragment no operation constrained the UNIFORM layout.
    pub(crate) fn finish_frags(&mut self) {
        let vars: Vec<VarId> = self.frag_sema.shaped.keys().copied().collect();
        for v in vars {
            let span = self.locals.get(v.index()).map(|l| l.span);
            if let Some(span) = span {
                let _ = self.shaped_layout(v, span);
            }
        }
    }
}

/// The A type of an RS-mode WGMMA whose operand has elements `e` (f32 is read as tf32).
fn rs_type_name(e: ElemTy) -> String {
    match e {
        ElemTy::F32 => "tf32".to_string(),
        e => super::types::ty_name(&Ty::Scalar(e)),
    }
}
