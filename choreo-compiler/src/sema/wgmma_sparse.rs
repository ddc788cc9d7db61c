//! Sparse WGMMA (spec-tier3 §5.3 table G's `.sp` rows, §5.4 "Sparse", §10.3): in a warpgroup,
//! `mma.row.row.sp acc, A, B, e;` is `wgmma.mma_async.sp`: A the 2:4-compressed `[64, K/2]`
//! values and B the `[N, K]` operand, both direct shared views that a swizzled copy filled
//! (SS mode, K-major), and `e = mma.load META…;` the metadata, a `u8 [64, K/8]` nibble stream
//! (the layout of `sema::mma_sparse`). f16 → f16/f32 and bf16 → f32 have a logical K of 32 per
//! instruction, e4m3 → f16/f32 64; a K that is a multiple of it is split into several
//! instructions. Synchronous only (no `.async`, no `[[schedule]]`).
//!
//! Codes: `E1056` (not `row.row`), `E1057` (B's swizzle narrower than one instruction's K).

use super::Checker;
use super::mma_sparse::SparseExec;
use crate::ast::{self, MmaLayout};
use crate::diagnostics::Diagnostic;
use crate::hir::mma::{MmaOp, MmaRole, MmaSelected};
use crate::hir::{ElemTy, Stmt, StmtKind};
use crate::target::mma::{MmaConfig, MmaFamily, MmaType, Selection, select};

/// The logical K of one sparse WGMMA instruction for operands of `t` (16-bit: 32, fp8: 64).
fn sparse_atom_k(t: MmaType) -> u64 {
    match t {
        MmaType::E4m3 | MmaType::E5m2 | MmaType::S8 | MmaType::U8 => 64,
        MmaType::Tf32 => 16,
        _ => 32,
    }
}

impl Checker<'_> {
    /// `mma.row.row.sp acc, A, B, e;` in a warpgroup.
    pub(crate) fn check_wg_sparse_exec(
        &mut self,
        x: &SparseExec,
        future: Option<&ast::Ident>,
        [acc, a, b]: [&ast::Expr; 3],
        meta: Option<&ast::Expr>,
        out: &mut Vec<Stmt>,
    ) {
        if future.is_some() {
            return self.unsupported(
                x.span,
                "an asynchronous sparse WGMMA (a sparse WGMMA waits for its instructions)",
                3,
            );
        }
        let ok = self.wg_place_ok(x.span);
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
            return;
        }
        let Some(meta) = meta else {
            self.diags.push(
                Diagnostic::error(
                    "E1046",
                    x.sp,
                    "sparse MMA needs its metadata operand: `mma.row.row.sp acc, a, b, e;`",
                )
                .with_label("no metadata operand")
                .with_help(
                    "load the metadata (`u8 [64, K/8]`) with `e = mma.load META;` and pass it as \
                     the fourth operand; the implicit `<A>_mdata` variable is not supported",
                ),
            );
            return;
        };
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
            self.error_label(
                "E1002",
                x.span,
                format!(
                    "MMA: matrix shapes do not match: `a'([{}, {}]) v.s. `b'([{}, {}]).",
                    ad[0], ad[1], bd[0], bd[1]
                ),
                format!("K is {ka} for the compressed A ([M, K/2]) and {kb} for B"),
            );
            return;
        }
        if kb % 4 != 0 {
            self.error_label(
                "E1048",
                x.span,
                "Sparse MMA requires K dimension to be a multiple of 4.",
                format!("K is {kb}"),
            );
            return;
        }
        let st = self.frag_states[acc.frag.index()].clone();
        if st.failed {
            return;
        }
        if !st.filled {
            let name = self.frags[acc.frag.index()].name.clone();
            self.error_label(
                "E1010",
                x.span,
                format!(
                    "the accumulator `{name}' of a WGMMA must be made by `mma.fill` or `frag` \
                     (WGMMA accumulators are not loaded from memory)"
                ),
                "not a filled accumulator",
            );
            return;
        }
        if let Some(s) = st.acc_shape {
            if s != [m, n] {
                self.error_label(
                    "E1002",
                    x.span,
                    format!(
                        "MMA: matrix shapes do not match: the accumulator was [{}, {}] in an \
                         earlier MMA, here [{m}, {n}].",
                        s[0], s[1]
                    ),
                    "accumulator shape",
                );
                return;
            }
        }
        let (a_elem, b_elem) = (ao.tile.elem, bo.tile.elem);
        {
            let f = &mut self.frags[acc.frag.index()];
            if !f.explicit_elem {
                f.elem = a_elem;
                f.explicit_elem = true;
            }
        }
        let c_elem = self.frags[acc.frag.index()].elem;
        let ta = super::mma::mma_type(a_elem, true);
        let at = sparse_atom_k(ta);
        if matches!(ta, MmaType::E4m3 | MmaType::E5m2) {
            // The register layout of 8-bit metadata (one K-64 chunk per instruction) did not
            // match the hardware on an H200 (e2e 189, kept in tests/pending/).
            return self.unsupported(
                x.span,
                "sparse WGMMA of fp8 operands (f16 and bf16 sparse WGMMA are supported)",
                3,
            );
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
        let arch = self.target.arch().map_or("cpu".to_string(), |a| a.sm().to_string());
        match select(&config, self.target.arch()) {
            Selection::Selected(MmaFamily::Wgmma) => {}
            Selection::TooOld { family: MmaFamily::Wgmma, .. } => {
                self.diags.push(
                    Diagnostic::error(
                        "E1005",
                        x.span,
                        format!("WGMMA requires sm_90a (MMA [{config}] on SM_{arch})"),
                    )
                    .with_label("a sparse warpgroup MMA")
                    .with_help("build for sm_90a (`--arch sm_90a`)"),
                );
                return;
            }
            _ => {
                self.diags.push(
                    Diagnostic::error(
                        "E1005",
                        x.span,
                        format!(
                            "MMA [{config}] is not support by current architecture(SM_{arch})."
                        ),
                    )
                    .with_label("no sparse WGMMA instruction has this configuration")
                    .with_help(
                        "a sparse warpgroup MMA is `wgmma.mma_async.sp`: M = 64, f16 → f16/f32 \
                         or bf16 → f32 with K 32, e4m3 → f16/f32 with K 64 per instruction, N ∈ \
                         {8, 16, 32, 64, 96, 128, 192, 256} (spec-tier3 §5.3 table G)",
                    ),
                );
                return;
            }
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
        let want = [m, ka / 8];
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
            return;
        }
        let selected = MmaSelected { family: MmaFamily::Wgmma, config };
        for (f, role, what) in
            [(&e, MmaRole::E, "the sparse metadata"), (&acc, MmaRole::C, "the accumulator")]
        {
            let frag = &self.frags[f.frag.index()];
            let same_k = role != MmaRole::E || frag.extent_k == ka;
            if let (Some(r), Some(s)) = (frag.role, frag.selected) {
                if r != role || s != selected || !same_k {
                    let (name, decl) = (frag.name.clone(), frag.span);
                    self.diags.push(
                        Diagnostic::error(
                            "E1006",
                            x.span,
                            format!(
                                "fragment `{name}' is the {} of an MMA [{}] and here {what} of \
                                 [{config}]",
                                r.name(),
                                s.config
                            ),
                        )
                        .with_label("a second role or configuration")
                        .with_secondary(decl, "declared here")
                        .with_help("a fragment has one role and configuration: make another one"),
                    );
                    return;
                }
            }
        }
        let frag = &mut self.frags[e.frag.index()];
        frag.role = Some(MmaRole::E);
        frag.selected = Some(selected);
        frag.k_major = true;
        frag.extent_k = ka;
        let frag = &mut self.frags[acc.frag.index()];
        frag.role = Some(MmaRole::C);
        frag.selected = Some(selected);
        frag.k_major = true;
        self.frag_states[acc.frag.index()].acc_shape = Some([m, n]);
        if ok {
            let op = MmaOp::WgSparseExec {
                acc,
                a: Box::new(ao),
                b: Box::new(bo),
                meta: e,
                atoms: ka / at,
                atom_k: at,
            };
            out.push(Stmt { kind: StmtKind::Mma(Box::new(op)), span: x.span });
        }
    }
}
