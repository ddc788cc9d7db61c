//! Sparse WGMMA (spec-tier3 §5.3 table G's `.sp` rows, §5.4 "Sparse", §10.3): in a warpgroup,
//! `mma.row.row.sp acc, A, B, e;` is `wgmma.mma_async.sp`: A the 2:4-compressed `[64, K/2]`
//! values and B the `[N, K]` operand, both direct shared views that a swizzled copy filled
//! (SS mode, K-major), and `e = mma.load META…;` the metadata, a `u8 [64, K/8]` nibble stream
//! (the layout of `sema::mma_sparse`). f16 → f16/f32 and bf16 → f32 have a logical K of 32 per
//! instruction, e4m3 → f16/f32 64; a K that is a multiple of it is split into several
//! instructions. `q = mma.row.row.sp.async acc, A, B, e;` is asynchronous: the future
//! bookkeeping of a dense one (`Checker::wg_issue_async`, waited by `wait q;` =
//! `wgmma.wait_group n`). No `[[schedule]]`.
//!
//! Codes: `E1056` (not `row.row`), `E1057` (B's swizzle narrower than one instruction's K).

use super::Checker;
use super::mma_sparse::SparseExec;
use super::wgmma::WgRole;
use crate::ast::{self, MmaLayout};
use crate::diagnostics::Diagnostic;
use crate::hir::mma::{MmaOp, MmaRole, MmaSelected};
use crate::hir::{Stmt, StmtKind};
use crate::target::mma::{MmaConfig, MmaFamily, MmaType};

/// The logical K of one sparse WGMMA instruction for operands of `t` (16-bit: 32, fp8: 64).
fn sparse_atom_k(t: MmaType) -> u64 {
    match t {
        MmaType::E4m3 | MmaType::E5m2 | MmaType::S8 | MmaType::U8 => 64,
        MmaType::Tf32 => 16,
        _ => 32,
    }
}

impl Checker<'_> {
    /// `[q =] mma.row.row.sp[.async] acc, A, B, e;` in a warpgroup (`future`: q of an
    /// asynchronous one).
    pub(crate) fn check_wg_sparse_exec(
        &mut self,
        x: &SparseExec,
        future: Option<&ast::Ident>,
        [acc, a, b]: [&ast::Expr; 3],
        meta: Option<&ast::Expr>,
        out: &mut Vec<Stmt>,
    ) {
        let Some((ok, meta)) = self.sparse_preamble(x, meta, true) else { return };
        if x.layout != MmaLayout::RowRow {
            self.diags.push(
                Diagnostic::error(
                    "E1056",
                    x.span,
                    format!(
                        "the operands of a sparse WGMMA must be K-major (`mma.row.row.sp`), not \
                         `{}`",
                        x.layout.as_str()
                    ),
                )
                .with_label("an MN-major operand of a sparse WGMMA")
                .with_help(
                    "store A's compressed values as [64, K/2] and B as [N, K] and write \
                     `mma.row.row.sp acc, a, b, e;`",
                ),
            );
            return;
        }
        let accr = self.frag_ref(acc, false, "the accumulator");
        let ar = if self.names_frag(a) {
            let _ = self.frag_ref(a, false, "operand A");
            self.unsupported(
                a.span,
                "a sparse WGMMA with A in registers (RS mode): name the compressed shared view",
                3,
            );
            None
        } else {
            self.wg_operand(a, "A", false)
        };
        let br = self.wg_operand(b, "B", false);
        let er = self.meta_ref(meta);
        let (Some(acc), Some(ao), Some(bo), Some(e)) = (accr, ar, br, er) else { return };
        let (ad, bd) = (ao.tile.dims, bo.tile.dims);
        let (m, ka) = (ad[0], 2 * ad[1]);
        let (n, kb) = (bd[0], bd[1]);
        if ka != kb {
            let label = format!("K is {ka} for the compressed A ([M, K/2]) and {kb} for B");
            return self.k_mismatch(x.span, [ad, bd], label);
        }
        if !self.sparse_k_ok(x.span, kb) {
            return;
        }
        if !self.wg_acc_ready(&acc, x.span, [m, n]) {
            return;
        }
        let (a_elem, b_elem) = (ao.tile.elem, bo.tile.elem);
        let c_elem = self.acc_elem_or(&acc, a_elem);
        let ta = super::mma::mma_type(a_elem, true);
        let at = sparse_atom_k(ta);
        let config = MmaConfig {
            a: ta,
            b: super::mma::mma_type(b_elem, true),
            c: super::mma::mma_type(c_elem, false),
            m,
            n,
            k: if ka % at == 0 { at } else { ka },
            sparse: true,
        };
        if !self.wg_select(
            &config,
            x.span,
            ("a sparse warpgroup MMA", "no sparse WGMMA instruction has this configuration"),
            "a sparse warpgroup MMA is `wgmma.mma_async.sp`: M = 64, f16 → f16/f32 or bf16 → f32 \
             with K 32, e4m3 → f16/f32 with K 64 per instruction, N ∈ {8, 16, 32, 64, 96, 128, \
             192, 256} (spec-tier3 §5.3 table G)",
        ) {
            return;
        }
        // One instruction reads `at` elements of K from each row of B: they must lie in one
        // swizzle row (the descriptor has no K stride for a swizzled K-major operand).
        let need = at * b_elem.size_bytes();
        if u64::from(bo.tile.swizzle) < need {
            self.diags.push(
                Diagnostic::error(
                    "E1057",
                    b.span,
                    format!(
                        "operand B of a sparse WGMMA must be filled with a swizzle of at least \
                         {need} bytes, not {}: one instruction reads {at} elements of K ({need} \
                         bytes) per row",
                        bo.tile.swizzle
                    ),
                )
                .with_label("the swizzle rows are narrower than one instruction's K")
                .with_help(format!("copy B with `.swiz<{}>` (or `.swiz<128>`)", need.max(64))),
            );
            return;
        }
        // The metadata: u8 [64, K/8] over the whole logical K.
        if !self.sparse_meta_ok(&e, meta, [m, ka / 8]) {
            return;
        }
        let selected = MmaSelected { family: MmaFamily::Wgmma, config };
        let fits = self.frags[e.frag.index()].extent_k == ka;
        let e_role = WgRole { role: MmaRole::E, what: "the sparse metadata", fits, make: "make" };
        let c_role = WgRole { role: MmaRole::C, what: "the accumulator", fits: true, make: "make" };
        if !self.wg_role_ok(&e, x.span, selected, &e_role, "")
            || !self.wg_role_ok(&acc, x.span, selected, &c_role, "")
        {
            return;
        }
        self.take_role(&e, MmaRole::E, selected, true, Some(ka));
        self.wg_take_acc(&acc, selected, [m, n]);
        if x.is_async.is_some() {
            self.wg_issue_async(future, x.span, &acc);
        }
        if ok {
            let op = MmaOp::WgSparseExec {
                acc,
                a: Box::new(ao),
                b: Box::new(bo),
                meta: e,
                atoms: ka / at,
                atom_k: at,
                wait: x.is_async.is_none(),
            };
            out.push(Stmt { kind: StmtKind::Mma(Box::new(op)), span: x.span });
        }
    }
}
