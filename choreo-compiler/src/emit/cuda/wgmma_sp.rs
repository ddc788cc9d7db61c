//! Sparse WGMMA statements (spec-tier3 §5.4 "Sparse", §10.3): the metadata load and the
//! execution (SS, or RS with A's compressed values in a `wg_afrag`), rendered as calls of
//! `wgmma_sp.cuh` (pasted into files that execute a sparse WGMMA) and of the per-(operation,
//! N) instructions `SpMma<Op, N>` that `wgmma_n` writes.

use super::FnEmitter;
use crate::hir::HExprKind;
use crate::hir::mma::{FragRef, MmaTile, WgA, WgOperand};
use crate::source::Span;

/// The library's operation namespace (`mma.cuh`, `wgmma_ops.cuh`, `wgmma_sp.cuh`).
const NS: &str = "CHOREO_MMA_NS";

impl FnEmitter<'_, '_> {
    /// `e = mma.load META…;` of a sparse WGMMA's metadata (`u8 [64, K/8]`).
    pub(super) fn wg_sp_meta_load(
        &mut self,
        span: Span,
        l: &str,
        tile: &MmaTile,
        [base, s0, s1]: [&str; 3],
    ) -> Option<String> {
        let (n, sbase, rows, cols) = if tile.swizzle == 0 {
            (0, base.to_string(), 0, 0)
        } else {
            let HExprKind::At { buffer, .. } = &tile.first.kind else {
                self.bug(span, "an MMA tile without its first access");
                return None;
            };
            let (sbase, rows, cols) = self.swizzle_parts(span, *buffer);
            (tile.swizzle, format!("&{sbase}"), rows, cols)
        };
        Some(format!(
            "{NS}::wg_sp_meta_load<{n}>({l}, {NS}::wg_thread(), {base}, {s0}, {s1}, {sbase}, \
             {rows}u, {cols}u);"
        ))
    }

    /// A sparse WGMMA: fence the accumulator registers (and the operands' generic writes),
    /// issue one `wgmma.mma_async.sp` per K atom (SS: A's descriptor advanced by K/2
    /// compressed elements; RS: the atom's 4 registers of A; B's descriptor advanced by K, the
    /// atom's metadata register), commit and, for a synchronous one (`wait`), wait for all (an
    /// asynchronous one is waited by its `wait q;`, `MmaOp::WgWait`).
    pub(super) fn wg_sparse_exec(
        &mut self,
        span: Span,
        acc: &FragRef,
        (a, b): (&WgA, &WgOperand),
        meta: &FragRef,
        [atoms, atom_k]: [u64; 2],
        wait: bool,
    ) {
        let f = self.f.frags[acc.frag.index()].clone();
        let Some(sel) = f.selected else {
            return self.bug(span, "a sparse WGMMA accumulator without a configuration");
        };
        let c = sel.config;
        let l = self.frag_lvalue(acc);
        let e = self.frag_lvalue(meta);
        let Some(db) = self.wg_desc(span, b, atom_k, "__choreo_kt") else { return };
        let (operands, mode, da, issue) = match a {
            WgA::Shared(a) => {
                let Some(da) = self.wg_desc(span, a, atom_k / 2, "__choreo_kt") else { return };
                (
                    vec![a.as_ref(), b],
                    "SS",
                    Some(da),
                    format!("{NS}::wg_sp_mma({l}, __choreo_da, __choreo_db, {e}, __choreo_kt);"),
                )
            }
            WgA::Regs(fa) => {
                let fa = self.frag_lvalue(fa);
                (
                    vec![b],
                    "RS",
                    None,
                    format!("{NS}::wg_sp_rs({l}, {fa}, __choreo_kt, __choreo_db, {e});"),
                )
            }
        };
        let guards: Vec<String> =
            operands.iter().filter_map(|o| self.tile_guard(&o.tile)).collect();
        let head = format!(
            "{{  // sparse WGMMA m64n{}k{atom_k} x {atoms} ({mode}{}), {}(c) += {}(a, 2:4) * {}(b)",
            c.n,
            if wait { "" } else { ", async" },
            c.c.name(),
            c.a.name(),
            c.b.name()
        );
        self.wg_open(span, &guards, &head);
        self.wg_fence_operands(span, &operands, &l);
        self.w.line(
            span,
            &format!("for (int __choreo_kt = 0; __choreo_kt < {atoms}; ++__choreo_kt) {{"),
        );
        if let Some(da) = da {
            self.w.line(span, &format!("  const std::uint64_t __choreo_da = {da};"));
        }
        for line in [
            format!("  const std::uint64_t __choreo_db = {db};"),
            format!("  {issue}"),
            "}".to_string(),
        ] {
            self.w.line(span, &line);
        }
        self.wg_close(span, &l, wait);
    }
}
