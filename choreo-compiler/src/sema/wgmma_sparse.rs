//! Sparse WGMMA (spec-tier3 §5.3 table G's `.sp` rows, §5.4 "Sparse", §10.3): in a warpgroup,
//! `mma.row.row.sp acc, A, B, e;` is `wgmma.mma_async.sp`: A the 2:4-compressed `[64, K/2]`
//! values and B the `[N, K]` operand, both direct shared views that a swizzled copy filled
//! (SS mode, K-major), or A in registers (RS mode, f16/bf16/e4m3/e5m2): a fragment
//! `mma.load`ed from the compressed `[64, K/2]` view (or a 16-bit accumulator-layout one),
//! whose compressed columns per instruction (16 of a 16-bit type, 32 of an 8-bit one) have the
//! dense RS layout of their element size (spec-tier3 §10.3), and
//! `e = mma.load META…;` the metadata, a `u8 [64, K/8]` nibble stream
//! (the layout of `sema::mma_sparse`). f16 → f16/f32 and bf16 → f32 have a logical K of 32 per
//! instruction, e4m3 → f16/f32 64; a K that is a multiple of it is split into several
//! instructions. `q = mma.row.row.sp.async acc, A, B, e;` is asynchronous: the future
//! bookkeeping of a dense one (`Checker::wg_issue_async`, waited by `wait q;` =
//! `wgmma.wait_group n`). No `[[schedule]]`.
//!
//! Codes: `E1056` (not `row.row`), `E1057` (B's swizzle narrower than one instruction's K),
//! `E1073` (a register A operand that is not `[64, 16·n]`, 8-bit: `[64, 32·n]`).

use super::Checker;
use super::mma_sparse::SparseExec;
use super::wgmma::WgRole;
use crate::ast::{self, MmaLayout};
use crate::diagnostics::Diagnostic;
use crate::hir::mma::{FragRef, MmaOp, MmaRole, MmaSelected, WgA};
use crate::hir::{Stmt, StmtKind};
use crate::source::Span;
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
        // A: the compressed values as a direct shared view (SS) or in registers (RS: a
        // fragment `mma.load`ed from the compressed view, or an accumulator-layout one of a
        // 16-bit or e4m3 type), with its extents and element type.
        let ar = if let Some(shaped) = self.wg_shaped_a(a, true, out) {
            shaped
        } else if self.names_frag(a) {
            self.wg_register_a(a, x.span)
        } else {
            self.wg_operand(a, "A", false)
                .map(|o| (o.tile.dims, o.tile.elem, WgA::Shared(Box::new(o))))
        };
        let br = self.wg_operand(b, "B", false);
        let er = self.meta_ref(meta);
        let (Some(acc), Some((ad, a_elem, ao)), Some(bo), Some(e)) = (accr, ar, br, er) else {
            return;
        };
        if let WgA::Regs(f) = &ao {
            if !self.sparse_rs_shape_ok(f, a.span, ad, a_elem.size_bytes()) {
                return;
            }
        }
        let bd = bo.tile.dims;
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
        let b_elem = bo.tile.elem;
        let c_elem = self.acc_elem_or(&acc, a_elem);
        let ta = super::mma::mma_type(a_elem, true);
        let at = sparse_atom_k(ta);
        let regs = matches!(ao, WgA::Regs(_));
        if regs && !matches!(ta, MmaType::F16 | MmaType::Bf16 | MmaType::E4m3 | MmaType::E5m2) {
            // The RS form exists in PTX for tf32 (and integer types have no sparse WGMMA
            // here at all): say so before the selection would. e5m2 goes on to the selection,
            // which rejects it as it does in SS mode.
            self.error_label(
                "E0901",
                a.span,
                format!(
                    "not supported yet (tier 3): a sparse WGMMA with a register A operand (RS \
                     mode) of {}: only f16, bf16 and e4m3",
                    ta.name()
                ),
                "a sparse A operand in registers of an unsupported type",
            );
            return;
        }
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
        if let WgA::Regs(f) = &ao {
            // Each instruction reads the 4 registers of a dense RS atom: 16 compressed columns
            // (K 32) of a 16-bit type, 32 (K 64) of an 8-bit one.
            let frag = &self.frags[f.frag.index()];
            let fits = frag.k_major && (frag.role.is_none() || frag.extent_k == ad[1]);
            let a_role = WgRole { role: MmaRole::A, what: "operand A", fits, make: "load" };
            if !self.wg_role_ok(f, x.span, selected, &a_role, "") {
                return;
            }
            self.take_role(f, MmaRole::A, selected, true, Some(ad[1]));
        }
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
                a: ao,
                b: Box::new(bo),
                meta: e,
                atoms: ka / at,
                atom_k: at,
                wait: x.is_async.is_none(),
            };
            out.push(Stmt { kind: StmtKind::Mma(Box::new(op)), span: x.span });
        }
    }

    /// The register A operand of a sparse WGMMA holds `[64, atom·n]` compressed values: n
    /// instructions of 4 registers each, atom = 16 columns of 16-bit elements or 32 of 8-bit ones
    /// (`E1073`).
    fn sparse_rs_shape_ok(
        &mut self,
        f: &FragRef,
        span: Span,
        [m, kc]: [u64; 2],
        bytes: u64,
    ) -> bool {
        let (atom, k) = if bytes == 1 { (32, 64) } else { (16, 32) };
        if m == 64 && kc > 0 && kc % atom == 0 {
            return true;
        }
        let name = self.frags[f.frag.index()].name.clone();
        let decl = self.frags[f.frag.index()].span;
        self.diags.push(
            Diagnostic::error(
                "E1073",
                span,
                format!(
                    "the register A operand `{name}' of a sparse WGMMA must hold [64, {atom}·n] \
                     compressed values ({atom} per instruction of logical K {k} for {}-bit \
                     elements), but it is [{m}, {kc}]",
                    8 * bytes
                ),
            )
            .with_label("a register A operand of the wrong shape")
            .with_secondary(decl, "loaded here")
            .with_help(format!(
                "load the compressed view [64, K/2] of A (K a multiple of {k}), e.g. \
                 `fa = mma.load sa.chunkat(_, k);` with chunks of {atom}·n columns"
            )),
        );
        false
    }
}
