//! Block-scaled MMA (spec-tier3 §5.4 "Block scale"), on WGMMA accumulators only:
//!
//! - `mma.row.row.scale acc, a, b, SA, sb;` computes `acc[i][j] += (a·b)[i][j]·SA(i)·sb`: the
//!   WGMMA runs into a hidden zeroed accumulator `T` of the same configuration, then each
//!   thread adds its registers of `T`, scaled by the `SA` entry of the register's row (the
//!   WGMMA_ACC layout gives it) and `sb`, to `acc` ([`MmaOp::Scale`]).
//! - `mma.scale acc, SA, sb;` does the same for the sum of the plain (synchronous) WGMMA
//!   executions on `acc` that precede it in the same statement list (back to the previous
//!   statement that names `acc` otherwise): those are redirected into a hidden `T`, declared
//!   and zeroed before the first of them.
//!
//! `SA` is an f32 `[M, 1]` or `[1, M]` view of global or shared memory (`E1053`, `E1054`), `sb`
//! a numeric scalar, converted to f32; the accumulator must be a float accumulator of WGMMA
//! (`E1052`, `E1055`); `mma.scale` needs such executions (`E1051`).

use super::wgmma::WgExec;
use super::{Checker, Val};
use crate::ast::{self, MmaLayout};
use crate::diagnostics::Diagnostic;
use crate::hir::frag::FragOp;
use crate::hir::mma::{Frag, FragId, FragRef, MmaOp, MmaRole, MmaTile};
use crate::hir::{ElemTy, HExpr, Stmt, StmtKind};
use crate::source::Span;
use crate::target::mma::MmaFamily;

/// A block-scaled execution statement.
pub(crate) struct ScaledExec<'x> {
    /// The operands' suffix.
    pub(crate) layout: MmaLayout,
    /// The statement.
    pub(crate) span: Span,
    /// The `.scale` keyword.
    pub(crate) sp: Span,
    /// Whether it may be emitted (its place is right).
    pub(crate) ok: bool,
    /// A `[[schedule(…)]]` attribute on it.
    pub(crate) schedule: Option<&'x ast::Attribute>,
}

fn mma_stmt(op: MmaOp, span: Span) -> Stmt {
    Stmt { kind: StmtKind::Mma(Box::new(op)), span }
}

/// Whether `op` names fragment `f` (any element of it).
fn names(op: &MmaOp, f: FragId) -> bool {
    let refs: Vec<&FragRef> = match op {
        MmaOp::Decl(id) => return *id == f,
        MmaOp::Fill { frag, .. } | MmaOp::Update { frag, .. } => vec![frag],
        MmaOp::Load { frag, .. } | MmaOp::Store { frag, .. } => vec![frag],
        MmaOp::Exec { acc, a, b } => vec![acc, a, b],
        MmaOp::SparseExec { acc, a, b, meta } => vec![acc, a, b, meta],
        MmaOp::WgSparseExec { acc, a, meta, .. } => match a {
            crate::hir::mma::WgA::Regs(r) => vec![acc, r, meta],
            crate::hir::mma::WgA::Shared(_) => vec![acc, meta],
        },
        MmaOp::WgExec { acc, a, .. } => match a {
            crate::hir::mma::WgA::Regs(r) => vec![acc, r],
            crate::hir::mma::WgA::Shared(_) => vec![acc],
        },
        MmaOp::WgWait { acc, .. } => vec![acc],
        MmaOp::Scale { acc, tmp, .. } => vec![acc, tmp],
        // Fragment operations reach accumulators by unpacking them into registers (and
        // packing back): `apply`, reductions and copies of `acc` name it there.
        MmaOp::Frag(op) => match &**op {
            FragOp::Unpack { acc, .. } | FragOp::Pack { acc, .. } => vec![acc],
            FragOp::ToA { afrag, .. } => vec![afrag],
            FragOp::Reduce { .. }
            | FragOp::AllReduce { .. }
            | FragOp::Copy { .. }
            | FragOp::Update { .. } => Vec::new(),
        },
    };
    refs.iter().any(|r| r.frag == f)
}

impl Checker<'_> {
    /// `SA` and `sb` of a block scale, for an accumulator of `m` rows: the tile and the
    /// dimension along M, and the scalar. `None` after reporting.
    fn scale_operands(
        &mut self,
        view: &ast::Expr,
        value: &ast::Expr,
        m: Option<u64>,
    ) -> Option<(MmaTile, usize, HExpr)> {
        let v = self.check_data(view, "an MMA scale");
        let sb = self.check_expr(value);
        let tile = v.and_then(|v| self.mma_tile(v, view.span, "scale", false, None));
        let sb = match sb {
            // Any numeric scalar, converted to f32 (`2` as well as `2.0f`).
            Val::Scalar(e) if e.ty.scalar().is_some_and(|t| t != ElemTy::Bool) => Some(e),
            Val::Error => None,
            other => {
                self.error_label(
                    "E1054",
                    value.span,
                    format!(
                        "the block scale `sb` must be a scalar, but got '{}'",
                        other.describe()
                    ),
                    "not a numeric scalar",
                );
                None
            }
        };
        let tile = tile?;
        if tile.elem != ElemTy::F32 {
            self.error_label(
                "E1054",
                view.span,
                format!("the block scale `SA` must be f32 data, not {}", tile.elem.as_str()),
                "not f32",
            );
            return None;
        }
        let m_dim = match (tile.dims, m) {
            ([d, 1], Some(m)) if d == m => 0,
            ([1, d], Some(m)) if d == m => 1,
            (_, None) => 0,
            (d, Some(m)) => {
                self.error_label(
                    "E1053",
                    view.span,
                    "MMA scale A must have shape [M, 1] or [1, M].",
                    format!("[{}, {}] for M = {m}", d[0], d[1]),
                );
                return None;
            }
        };
        Some((tile, m_dim, sb?))
    }

    /// The accumulator's rows if it is a float WGMMA accumulator; reports `E1052` (not an
    /// accumulator) or `E1055` (not WGMMA, or integral) otherwise.
    fn scaled_acc_rows(&mut self, acc: &FragRef, span: Span) -> Option<u64> {
        let f = &self.frags[acc.frag.index()];
        let (name, role, sel, elem) = (f.name.clone(), f.role, f.selected, f.elem);
        match (role, sel) {
            (Some(MmaRole::C), Some(s)) if s.family == MmaFamily::Wgmma && elem != ElemTy::S32 => {
                Some(s.config.m)
            }
            (Some(MmaRole::C), Some(s)) => {
                let what = if s.family == MmaFamily::Wgmma {
                    "an integer WGMMA accumulator".to_string()
                } else {
                    format!("a {} accumulator", s.family.name())
                };
                self.diags.push(
                    Diagnostic::error(
                        "E1055",
                        span,
                        format!(
                            "block-scaled MMA applies to float WGMMA accumulators, and `{name}' \
                             is {what}"
                        ),
                    )
                    .with_label("not a float WGMMA accumulator")
                    .with_help(
                        "execute it in a `: group-4` level with an f16/f32 accumulator \
                         (spec-tier3 §5.4), or scale with `acc *= s` on the whole fragment",
                    ),
                );
                None
            }
            // An accumulator whose execution failed: reported there.
            (None, _) if self.mma_failed => None,
            _ => {
                self.error_label(
                    "E1052",
                    span,
                    "Only accumulator fragments can be used in mma.scale.",
                    format!("`{name}' is not the accumulator of a WGMMA execution"),
                );
                None
            }
        }
    }

    /// A hidden accumulator of `acc`'s configuration (no name in scope).
    fn hidden_acc(&mut self, acc: &FragRef) -> FragRef {
        let id = FragId(u32::try_from(self.frags.len()).unwrap_or(u32::MAX));
        let src = &self.frags[acc.frag.index()];
        let frag =
            Frag { name: format!("{}_scale_tmp", src.name), array_dims: Vec::new(), ..src.clone() };
        self.frags.push(frag);
        let mut st = self.frag_states[acc.frag.index()].clone();
        st.stores.clear();
        st.pending = None;
        st.filled = true;
        self.frag_states.push(st);
        FragRef { frag: id, index: Vec::new() }
    }

    /// `mma.<a>.<b>.scale acc, a, b, SA, sb;`
    pub(crate) fn check_scaled_exec(
        &mut self,
        x: &ScaledExec<'_>,
        [acc, a, b]: [&ast::Expr; 3],
        view: &ast::Expr,
        value: &ast::Expr,
        out: &mut Vec<Stmt>,
    ) {
        if !self.in_warpgroup() {
            self.diags.push(
                Diagnostic::error(
                    "E1055",
                    x.sp,
                    "block-scaled MMA (`.scale`) applies to WGMMA accumulators, not to a warp's \
                     WMMA or mma.sync",
                )
                .with_label("`.scale` outside a warpgroup")
                .with_help("execute it in a `: group-4` level (spec-tier3 §5.4)"),
            );
            return;
        }
        let schedule = match x.schedule.map(|a| (&a.kind, a.span)) {
            Some((ast::AttributeKind::Schedule(list), at)) => Some((list.as_slice(), at)),
            _ => None,
        };
        let wg = WgExec {
            layout: x.layout,
            span: x.span,
            ok: x.ok,
            is_async: false,
            future: &None,
            schedule,
        };
        let mut exec = Vec::new();
        self.check_wg_exec(&wg, acc, a, b, &mut exec);
        let acc_ref = exec.iter().find_map(|s| match &s.kind {
            StmtKind::Mma(op) => match &**op {
                MmaOp::WgExec { acc, .. } => Some(acc.clone()),
                _ => None,
            },
            _ => None,
        });
        let Some(acc_ref) = acc_ref else {
            // Reported (or not emitted): check the scale operands anyway.
            let _ = self.scale_operands(view, value, None);
            return;
        };
        let Some(m) = self.scaled_acc_rows(&acc_ref, x.span) else { return };
        let Some((tile, m_dim, sb)) = self.scale_operands(view, value, Some(m)) else { return };
        let tmp = self.hidden_acc(&acc_ref);
        out.push(mma_stmt(MmaOp::Decl(tmp.frag), x.span));
        let zero = crate::sema::fold::int_lit(0, x.span);
        out.push(mma_stmt(MmaOp::Fill { frag: tmp.clone(), value: zero }, x.span));
        for mut s in exec {
            if let StmtKind::Mma(op) = &mut s.kind {
                if let MmaOp::WgExec { acc, .. } = &mut **op {
                    *acc = tmp.clone();
                }
            }
            out.push(s);
        }
        let op = MmaOp::Scale { acc: acc_ref, tmp, scale: Box::new(tile), m_dim, sb };
        out.push(mma_stmt(op, x.span));
    }

    /// `mma.scale acc, SA, sb;`
    pub(crate) fn check_mma_scale(
        &mut self,
        frag: &ast::Expr,
        view: &ast::Expr,
        value: &ast::Expr,
        span: Span,
        ok: bool,
        out: &mut Vec<Stmt>,
    ) {
        let Some(acc) = self.frag_ref(frag, false, "the scaled accumulator") else {
            let _ = self.scale_operands(view, value, None);
            return;
        };
        let Some(m) = self.scaled_acc_rows(&acc, frag.span) else {
            let _ = self.scale_operands(view, value, None);
            return;
        };
        let Some((tile, m_dim, sb)) = self.scale_operands(view, value, Some(m)) else { return };
        // The synchronous WGMMAs on exactly this accumulator since the last other statement
        // that names the fragment.
        let mut execs = Vec::new();
        for (k, s) in out.iter().enumerate().rev() {
            let StmtKind::Mma(op) = &s.kind else { continue };
            match &**op {
                MmaOp::WgExec { acc: a, wait: true, .. } if *a == acc => execs.push(k),
                op if names(op, acc.frag) => break,
                _ => {}
            }
        }
        let Some(&first) = execs.last() else {
            self.diags.push(
                Diagnostic::error(
                    "E1051",
                    span,
                    "mma.scale requires a preceding plain WGMMA exec in the same scope.",
                )
                .with_label("no execution on this accumulator to scale")
                .with_help(
                    "execute `mma.row.row acc, a, b;` earlier in the same statement list, or \
                     use `mma.row.row.scale acc, a, b, SA, sb;`",
                ),
            );
            return;
        };
        if !ok {
            return;
        }
        let tmp = self.hidden_acc(&acc);
        for &k in &execs {
            if let StmtKind::Mma(op) = &mut out[k].kind {
                if let MmaOp::WgExec { acc: a, .. } = &mut **op {
                    *a = tmp.clone();
                }
            }
        }
        let at = out[first].span;
        let zero = crate::sema::fold::int_lit(0, at);
        out.insert(first, mma_stmt(MmaOp::Fill { frag: tmp.clone(), value: zero }, at));
        out.insert(first, mma_stmt(MmaOp::Decl(tmp.frag), at));
        out.push(mma_stmt(MmaOp::Scale { acc, tmp, scale: Box::new(tile), m_dim, sb }, span));
    }
}
