//! Sparse MMA (spec-tier3 §5.4 "Sparse"): `mma.row.<b>.sp acc, a, b, e;` of a warp, with `a`
//! the 2:4-compressed `[M, K/2]` values of A, `b` the dense `[N, K]` (`row.row`) or `[K, N]`
//! (`row.col`) operand, and `e = mma.load META` the metadata: `u8 [M, K/8]`, a little-endian
//! nibble stream along K (byte `k/8`, low nibble for `k mod 8` in 0..3, high for 4..7; nibble
//! `i0 | i1 << 2`, the positions `i0 < i1` of the two kept values of that group of four).
//!
//! Selection uses table S's `.sp` rows (`mma.sp.sync` m16n8k16 / m16n8k32, f16 → f16/f32 and
//! bf16 → f32, sm_80; m16n8k64 e4m3/e5m2 (any mix) → f32, sm_90). In a warpgroup the statement
//! is a sparse WGMMA (`sema::wgmma_sparse`). The reference's implicit metadata (a variable
//! `<A>_mdata`) is not supported at all (`E1046`).

use super::Checker;
use crate::ast::{self, MmaLayout};
use crate::diagnostics::Diagnostic;
use crate::hir::mma::{FragRef, MmaOp, MmaRole};
use crate::hir::{ElemTy, Stmt, StmtKind};
use crate::source::Span;
use crate::target::mma::MmaFamily;

/// What a sparse execution statement says besides its operands.
pub(crate) struct SparseExec {
    /// The operands' suffix.
    pub(crate) layout: MmaLayout,
    /// The statement.
    pub(crate) span: Span,
    /// The `.sp` keyword.
    pub(crate) sp: Span,
    /// `.async` after it, if written (a sparse WGMMA only).
    pub(crate) is_async: Option<Span>,
    /// The span of a `[[schedule(…)]]` attribute on it, if any.
    pub(crate) schedule: Option<Span>,
}

impl Checker<'_> {
    /// `mma.<a>.<b>.sp acc, a, b[, e];` (spec-tier3 §5.4).
    pub(crate) fn check_sparse_exec(
        &mut self,
        x: &SparseExec,
        future: Option<&ast::Ident>,
        [acc, a, b]: [&ast::Expr; 3],
        meta: Option<&ast::Expr>,
        out: &mut Vec<Stmt>,
    ) {
        let before = self.diags.error_count();
        self.sparse_exec(x, future, [acc, a, b], meta, out);
        if self.diags.error_count() > before {
            self.mma_failed = true;
        }
    }

    fn sparse_exec(
        &mut self,
        x: &SparseExec,
        future: Option<&ast::Ident>,
        [acc, a, b]: [&ast::Expr; 3],
        meta: Option<&ast::Expr>,
        out: &mut Vec<Stmt>,
    ) {
        if self.in_warpgroup() {
            // An asynchronous one declares its future (a synchronous one's name is poisoned,
            // as for a dense WGMMA).
            let future = match (x.is_async, future) {
                (Some(_), f) => f,
                (None, Some(f)) => {
                    self.declare_poisoned(f);
                    None
                }
                (None, None) => None,
            };
            let before = self.diags.error_count();
            self.check_wg_sparse_exec(x, future, [acc, a, b], meta, out);
            return self.wg_future_after(future, before);
        }
        if let Some(f) = future {
            self.declare_poisoned(f);
        }
        if let Some(s) = x.is_async {
            return self.unsupported(
                s,
                "an asynchronous sparse MMA of a warp (only a sparse WGMMA may be `.async`)",
                3,
            );
        }
        let Some((ok, meta)) = self.sparse_preamble(x, meta, false) else { return };
        if matches!(x.layout, MmaLayout::ColRow | MmaLayout::ColCol) {
            self.error_label(
                "E1049",
                x.span,
                format!(
                    "a sparse MMA's compressed A must be K-major (`row.*`), not `{}`",
                    x.layout.as_str()
                ),
                "`col` A with `.sp`",
            );
            return;
        }
        let accr = self.frag_ref(acc, false, "the accumulator");
        let ar = self.frag_ref(a, false, "operand A");
        let br = self.frag_ref(b, false, "operand B");
        let er = self.meta_ref(meta);
        let (Some(acc), Some(a), Some(b), Some(e)) = (accr, ar, br, er) else { return };
        // The logical K, from B.
        if let Some(bd) = self.frag_states[b.frag.index()].loaded {
            let k = if x.layout == MmaLayout::RowRow { bd[1] } else { bd[0] };
            if !self.sparse_k_ok(x.span, k) {
                return;
            }
        }
        if !self.check_exec(x.layout, &acc, &a, &b, x.span, true) {
            return;
        }
        let Some(sel) = self.frags[acc.frag.index()].selected else { return };
        let c = sel.config;
        if sel.family != MmaFamily::MmaSync {
            // check_exec reports every other family (WGMMA in a warp: E1020).
            return;
        }
        // The metadata: u8 [M, K/8].
        if !self.sparse_meta_ok(&e, meta, [c.m, c.k / 8]) {
            return;
        }
        let frag = &self.frags[e.frag.index()];
        if frag.role.is_some_and(|r| r != MmaRole::E) || frag.selected.is_some_and(|s| s != sel) {
            let (name, decl) = (frag.name.clone(), frag.span);
            self.diags.push(
                Diagnostic::error(
                    "E1006",
                    x.span,
                    format!(
                        "fragment `{name}' already has another role or configuration and here \
                         is the sparse metadata of [{c}]"
                    ),
                )
                .with_label("a second role or configuration")
                .with_secondary(decl, "declared here")
                .with_help("a fragment has one role and configuration: load another one"),
            );
            return;
        }
        let frag = &mut self.frags[e.frag.index()];
        frag.role = Some(MmaRole::E);
        frag.selected = Some(sel);
        frag.k_major = true;
        if ok {
            let op = MmaOp::SparseExec { acc, a, b, meta: e };
            out.push(Stmt { kind: StmtKind::Mma(Box::new(op)), span: x.span });
        }
    }

    /// What every sparse execution checks first, in a warp (`wg` false) or a warpgroup: its
    /// place (reported by `mma_place_ok` / `wg_place_ok`), no `[[schedule]]` (`E1050`) and a
    /// metadata operand (`E1046`). Whether it may be emitted and the metadata operand, `None`
    /// after reporting.
    pub(crate) fn sparse_preamble<'e>(
        &mut self,
        x: &SparseExec,
        meta: Option<&'e ast::Expr>,
        wg: bool,
    ) -> Option<(bool, &'e ast::Expr)> {
        let ok = if wg { self.wg_place_ok(x.span) } else { self.mma_place_ok(x.span) };
        if let Some(at) = x.schedule {
            self.diags.push(
                Diagnostic::error(
                    "E1050",
                    at,
                    "[[schedule(k_tiles(...))]] does not apply to a sparse MMA (`.sp`)",
                )
                .with_label("a K schedule on a sparse execution")
                .with_help("remove the attribute (spec-tier3 §5.4: not with `.sp`)"),
            );
            return None;
        }
        let Some(meta) = meta else {
            let rows = if wg { "64" } else { "M" };
            self.diags.push(
                Diagnostic::error(
                    "E1046",
                    x.sp,
                    "sparse MMA needs its metadata operand: `mma.row.row.sp acc, a, b, e;`",
                )
                .with_label("no metadata operand")
                .with_help(format!(
                    "load the metadata (`u8 [{rows}, K/8]`) with `e = mma.load META;` and pass it \
                     as the fourth operand; the implicit `<A>_mdata` variable is not supported"
                )),
            );
            return None;
        };
        Some((ok, meta))
    }

    /// The logical K of a sparse execution is a multiple of 4 (`E1048`).
    pub(crate) fn sparse_k_ok(&mut self, span: Span, k: u64) -> bool {
        if k % 4 != 0 {
            self.error_label(
                "E1048",
                span,
                "Sparse MMA requires K dimension to be a multiple of 4.",
                format!("K is {k}"),
            );
            return false;
        }
        true
    }

    /// The metadata fragment `e` (the operand `meta`) was loaded from a `u8 [want]` view
    /// (`E1047`).
    pub(crate) fn sparse_meta_ok(&mut self, e: &FragRef, meta: &ast::Expr, want: [u64; 2]) -> bool {
        let (elem, dims) = {
            let f = &self.frags[e.frag.index()];
            (f.elem, self.frag_states[e.frag.index()].loaded)
        };
        if elem != ElemTy::U8 || dims != Some(want) {
            let got = dims.map_or_else(String::new, |d| format!(" [{}, {}]", d[0], d[1]));
            self.error_label(
                "E1047",
                meta.span,
                format!(
                    "the metadata of this sparse MMA must be loaded from a u8 [{}, {}] view, but \
                     it is {}{got}",
                    want[0],
                    want[1],
                    elem.as_str()
                ),
                "metadata of the wrong type or shape",
            );
            return false;
        }
        true
    }

    /// The metadata operand: a fragment that `mma.load` filled (`E1047`).
    pub(crate) fn meta_ref(&mut self, e: &ast::Expr) -> Option<FragRef> {
        let is_frag = match &e.kind {
            ast::ExprKind::Ident(id) => {
                matches!(self.scopes.lookup(&id.name), Some(super::scope::Symbol::Frag(_)))
            }
            _ => false,
        };
        let what = if self.in_warpgroup() { "sparse WGMMA" } else { "sparse MMA" };
        if !is_frag {
            let _ = self.check_expr(e);
            self.error_label(
                "E1047",
                e.span,
                format!("{what} metadata must be loaded into a register with mma.load before use"),
                "not a metadata fragment",
            );
            return None;
        }
        let f = self.frag_ref(e, false, "the sparse metadata")?;
        let st = &self.frag_states[f.frag.index()];
        if st.failed {
            return None;
        }
        if st.loaded.is_none() || st.filled {
            self.error_label(
                "E1047",
                e.span,
                format!("{what} metadata must be loaded into a register with mma.load before use"),
                "a filled fragment, not loaded metadata",
            );
            return None;
        }
        Some(f)
    }
}
