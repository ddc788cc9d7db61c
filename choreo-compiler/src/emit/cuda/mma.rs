//! MMA statements (spec-tier3 §5): declarations, fills, loads, executions, stores and updates
//! of fragments, rendered as calls of the MMA support library (`mma.cuh`, pasted into files
//! that use MMA). Both dialects render the same calls; the library has a GPU and a CPU body.

use super::FnEmitter;
use super::support::{fnv1a, library_namespace};
use super::types::cpp_elem;
use crate::hir::mma::{Frag, FragRef, MmaOp, MmaRole, MmaTile, WgA, WgOperand};
use crate::hir::{AssignOp, ElemTy, HExprKind, Storage};
use crate::lower::align;
use crate::source::Span;
use crate::target::mma::{MmaConfig, MmaFamily};

/// The MMA support library (pasted only into files that use MMA).
pub(super) const MMA_SUPPORT: &str = include_str!("mma.cuh");

/// The WGMMA device library (pasted only into files that execute WGMMA).
pub(super) const WGMMA_LIBRARY: &str = include_str!("wgmma.cuh");

/// The WGMMA statements of generated code (after both libraries).
pub(super) const WGMMA_OPS: &str = include_str!("wgmma_ops.cuh");

/// The sparse WGMMA library (pasted only into files that execute a sparse WGMMA).
pub(super) const WGMMA_SPARSE: &str = include_str!("wgmma_sp.cuh");

/// The hash of everything a file that executes WGMMA may paste into the WGMMA namespace (and,
/// by `wgmma_ops.cuh` and `wgmma_sp.cuh`, the MMA one): the three library texts and every
/// instruction `wgmma_n` can write.
fn wgmma_hash() -> u64 {
    static HASH: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *HASH.get_or_init(|| {
        let generated = super::wgmma_n::every_instruction();
        let libraries = [WGMMA_LIBRARY, WGMMA_OPS, WGMMA_SPARSE];
        fnv1a(libraries.into_iter().chain(generated.iter().map(String::as_str)))
    })
}

/// `__choreo_wgmma_<hash of the library texts and instructions>`, `_cpu` for the CPU dialect.
pub(super) fn wgmma_namespace(cpu: bool) -> String {
    library_namespace("wgmma", wgmma_hash(), cpu)
}

/// The WGMMA library's operation tag of a configuration (`F32F16F16`: `dtype.atype.btype`).
fn wgmma_op(c: &MmaConfig) -> String {
    format!("{WG}::{}", super::wgmma_n::tag_of(c))
}

/// `__choreo_mma_<hash of the library text>`, `_cpu` for the CPU dialect. A file that executes
/// WGMMA (`wgmma`) adds to the namespace what the WGMMA libraries define in it: its hash covers
/// theirs.
pub(super) fn mma_namespace(cpu: bool, wgmma: bool) -> String {
    let hash = if wgmma {
        fnv1a([MMA_SUPPORT, &format!("{:016x}", wgmma_hash())])
    } else {
        fnv1a([MMA_SUPPORT])
    };
    library_namespace("mma", hash, cpu)
}

const NS: &str = "CHOREO_MMA_NS";
const WG: &str = "CHOREO_WGMMA_NS";
const LANE: &str = "(static_cast<int>(threadIdx.x) & 31)";

/// The C++ element type of a fragment: f32 (tf32) operands are `float`.
fn frag_elem(f: &Frag) -> &'static str {
    match (f.role, f.elem) {
        (Some(MmaRole::A | MmaRole::B), ElemTy::F32 | ElemTy::Tf32) => "float",
        (_, ElemTy::S32) => "std::int32_t",
        (_, ElemTy::S8) => "std::int8_t",
        (_, ElemTy::U8) => "std::uint8_t",
        (_, e) => cpp_elem(e),
    }
}

/// Whether a fragment's operands are tf32 (rounded with `cvt.rna` when loaded).
fn is_tf32(f: &Frag) -> bool {
    matches!(f.role, Some(MmaRole::A | MmaRole::B)) && matches!(f.elem, ElemTy::F32 | ElemTy::Tf32)
}

impl FnEmitter<'_, '_> {
    fn frag_name(&self, r: &FragRef) -> String {
        let f = &self.f.frags[r.frag.index()];
        format!("__choreo_frag{}_{}", r.frag.0, f.name)
    }

    /// `name[i][j]`, with indices the compiler could not prove in range checked.
    pub(super) fn frag_lvalue(&mut self, r: &FragRef) -> String {
        let mut text = self.frag_name(r);
        let dims = self.f.frags[r.frag.index()].array_dims.clone();
        for (i, d) in r.index.iter().zip(dims) {
            match crate::hir::arith::const_int(i) {
                Some(v) => text.push_str(&format!("[{v}]")),
                None => {
                    let e = self.expr(i);
                    text.push_str(&format!("[{NS}::idx({e}, {d})]"));
                }
            }
        }
        text
    }

    /// The fragment's C++ type, or `None` (reported) when it has no role.
    fn frag_type(&mut self, span: Span, f: &Frag) -> Option<String> {
        let (Some(role), Some(sel)) = (f.role, f.selected) else {
            self.bug(span, "an MMA fragment without a role");
            return None;
        };
        let c = sel.config;
        let (m, n, k) = (c.m, c.n, c.k);
        let t = frag_elem(f);
        let km = f.k_major;
        Some(match (sel.family, role) {
            // A sparse A holds the compressed [M, K/2] values.
            (MmaFamily::MmaSync, MmaRole::A) if c.sparse => {
                format!("{NS}::sync_frag<0, {m}, {n}, {}, {t}>", k / 2)
            }
            (MmaFamily::MmaSync, MmaRole::E) => format!("{NS}::sp_meta<{m}, {k}>"),
            (MmaFamily::MmaSync, MmaRole::A) => format!("{NS}::sync_frag<0, {m}, {n}, {k}, {t}>"),
            (MmaFamily::MmaSync, MmaRole::B) => format!("{NS}::sync_frag<1, {m}, {n}, {k}, {t}>"),
            (MmaFamily::MmaSync, MmaRole::C) => format!("{NS}::sync_frag<2, {m}, {n}, {k}, {t}>"),
            (MmaFamily::Wmma, MmaRole::A) => format!("{NS}::wmma_a<{m}, {n}, {k}, {t}, {km}>"),
            (MmaFamily::Wmma, MmaRole::B) => format!("{NS}::wmma_b<{m}, {n}, {k}, {t}, {km}>"),
            (MmaFamily::Wmma, MmaRole::C) => format!("{NS}::wmma_c<{m}, {n}, {k}, {t}>"),
            (MmaFamily::Wgmma, MmaRole::C) => format!("{NS}::wg_acc<{}, {n}>", wgmma_op(&c)),
            (MmaFamily::Wgmma, MmaRole::A) => {
                format!("{NS}::wg_afrag<{}, {}>", f.extent_k, f.elem.size_bytes())
            }
            (MmaFamily::Wgmma, MmaRole::E) => format!("{NS}::wg_sp_meta<{}, {k}>", f.extent_k),
            _ => {
                self.bug(span, "an MMA fragment of an unsupported family or role");
                return None;
            }
        })
    }

    /// The condition under which a tile is inside its buffer (its first and last elements'
    /// accesses), if any check is needed.
    pub(super) fn tile_guard(&mut self, t: &MmaTile) -> Option<String> {
        let mut parts = Vec::new();
        for e in [&t.first, &t.last] {
            if let HExprKind::At { buffer, index, id } = &e.kind {
                if let Some(g) = self.bounds_guard(*id, *buffer, index) {
                    parts.push(g);
                }
            }
        }
        (!parts.is_empty()).then(|| parts.join(" && "))
    }

    /// Runs `body` for every fragment `r` names (a whole array: every element).
    fn each_frag(&mut self, span: Span, r: &FragRef, body: impl Fn(&str) -> String) {
        let dims = self.f.frags[r.frag.index()].array_dims.clone();
        let mut lvalue = self.frag_lvalue(r);
        let rest = &dims[r.index.len()..];
        for (k, d) in rest.iter().enumerate() {
            self.w.line(
                span,
                &format!("for (int __choreo_fi{k} = 0; __choreo_fi{k} < {d}; ++__choreo_fi{k}) {{"),
            );
            self.w.indent += 1;
            lvalue.push_str(&format!("[__choreo_fi{k}]"));
        }
        self.w.line(span, &body(&lvalue));
        for _ in rest {
            self.w.indent -= 1;
            self.w.line(span, "}");
        }
    }

    pub(super) fn mma(&mut self, span: Span, op: &MmaOp) {
        match op {
            MmaOp::Decl(id) => {
                let f = self.f.frags[id.index()].clone();
                let Some(ty) = self.frag_type(span, &f) else { return };
                let dims: String = f.array_dims.iter().map(|d| format!("[{d}]")).collect();
                let name = format!("__choreo_frag{}_{}", id.0, f.name);
                self.w.line(span, &format!("{ty} {name}{dims};"));
            }
            MmaOp::Fill { frag, value } => {
                let v = self.expr(value);
                self.each_frag(span, frag, |l| format!("{NS}::fill({l}, {v});"));
            }
            MmaOp::Update { frag, op, value } => {
                let v = self.expr(value);
                let code = match op {
                    AssignOp::Add => 0,
                    AssignOp::Sub => 1,
                    AssignOp::Mul => 2,
                    _ => 3,
                };
                self.each_frag(span, frag, |l| format!("{NS}::update<{code}>({l}, {v});"));
            }
            MmaOp::Load { frag, tile } => self.mma_load(span, frag, tile),
            MmaOp::Frag(op) => self.frag_op(span, op),
            MmaOp::Exec { acc, a, b } => {
                let f = self.f.frags[acc.frag.index()].clone();
                let (c, a, b) = (self.frag_lvalue(acc), self.frag_lvalue(a), self.frag_lvalue(b));
                let line = match f.selected.map(|s| s.family) {
                    Some(MmaFamily::Wmma) => format!("{NS}::wmma_mma({c}, {a}, {b});"),
                    _ => format!("{NS}::sync_mma({c}, {a}, {b}, {LANE});"),
                };
                self.w.line(span, &line);
            }
            MmaOp::SparseExec { acc, a, b, meta } => {
                let (c, a, b) = (self.frag_lvalue(acc), self.frag_lvalue(a), self.frag_lvalue(b));
                let e = self.frag_lvalue(meta);
                self.w.line(span, &format!("{NS}::sp_mma({c}, {a}, {b}, {e}, {LANE});"));
            }
            MmaOp::Scale { acc, tmp, scale, m_dim, sb } => {
                self.wg_scale(span, acc, tmp, scale, *m_dim, sb)
            }
            MmaOp::WgSparseExec { acc, a, b, meta, atoms, atom_k, wait } => {
                self.wg_sparse_exec(span, acc, (a, b), meta, [*atoms, *atom_k], *wait);
            }
            MmaOp::WgExec { acc, a, b, atoms, atom_k, wait, order } => {
                self.wg_exec(span, acc, (a, b), [*atoms, *atom_k], *wait, order.as_deref());
            }
            MmaOp::WgWait { acc, pending } => {
                let l = self.frag_lvalue(acc);
                self.w.line(span, &format!("{WG}::fence_operands({l}.r);"));
                self.w.line(span, &format!("{WG}::wait_group<{pending}>();"));
                self.w.line(span, &format!("{WG}::fence_operands({l}.r);"));
            }
            MmaOp::Store { frag, tile, transpose, rows, cols } => {
                let f = self.f.frags[frag.frag.index()].clone();
                let Some(sel) = f.selected else {
                    return self.bug(span, "an MMA store of an accumulator without a role");
                };
                let (m, n) = (sel.config.m, sel.config.n);
                let l = self.frag_lvalue(frag);
                let base = self.expr(&tile.base);
                let (s0, s1) = (self.expr(&tile.strides[0]), self.expr(&tile.strides[1]));
                let mut guard = self.tile_guard(tile);
                // A mask that selects nothing writes nothing (and checks nothing).
                let masks: Vec<String> =
                    rows.iter().chain(cols).map(|g| format!("({}) > 0", self.expr(g))).collect();
                if !masks.is_empty() {
                    let m = masks.join(" && ");
                    guard = Some(match guard {
                        Some(g) => format!("{m} && {g}"),
                        None => m,
                    });
                }
                // Accumulator coordinates: (m, n) at tile (m, n), or (n, m) transposed.
                let (sm, sn, tr, tc) = if *transpose {
                    (&s1, &s0, tile.dims[1], tile.dims[0])
                } else {
                    (&s0, &s1, tile.dims[0], tile.dims[1])
                };
                let lim = |this: &mut Self, g: &Option<crate::hir::HExpr>, whole: u64| match g {
                    Some(g) => {
                        let g = this.expr(g);
                        format!("{NS}::imin({g}, {whole})")
                    }
                    None => whole.to_string(),
                };
                let whole = rows.is_none() && cols.is_none() && tr >= m && tc >= n;
                let rows = lim(self, rows, m.min(tr));
                let cols = lim(self, cols, n.min(tc));
                let line = match sel.family {
                    MmaFamily::Wmma if whole => {
                        format!("{NS}::wmma_store<{transpose}>({l}, {LANE}, {base}, {s0});")
                    }
                    // A masked WMMA store stages the accumulator in shared memory (mma.cuh).
                    MmaFamily::Wmma => format!(
                        "{NS}::wmma_store_mask<{transpose}, {}>({l}, {LANE}, {base}, {s0}, \
                         {rows}, {cols});",
                        self.kernel_warps
                    ),
                    MmaFamily::Wgmma => format!(
                        "{NS}::wg_store({l}, {NS}::wg_thread(), {base}, {sm}, {sn}, {rows}, \
                         {cols});"
                    ),
                    MmaFamily::MmaSync => format!(
                        "{NS}::sync_store({l}, {LANE}, {base}, {sm}, {sn}, {rows}, {cols});"
                    ),
                };
                match guard {
                    Some(g) => self.w.line(span, &format!("if ({g}) {line}")),
                    None => self.w.line(span, &line),
                }
            }
        }
    }

    fn mma_load(&mut self, span: Span, frag: &FragRef, tile: &MmaTile) {
        let f = self.f.frags[frag.frag.index()].clone();
        let (Some(role), Some(sel)) = (f.role, f.selected) else {
            return self.bug(span, "an MMA load of a fragment without a role");
        };
        let (m, n, k) = (sel.config.m, sel.config.n, sel.config.k);
        let l = self.frag_lvalue(frag);
        let base = self.expr(&tile.base);
        let (s0, s1) = (self.expr(&tile.strides[0]), self.expr(&tile.strides[1]));
        let tf32 = is_tf32(&f);
        let t = frag_elem(&f);
        let line = match (sel.family, role) {
            (MmaFamily::Wgmma, MmaRole::E) => {
                let Some(line) = self.wg_sp_meta_load(span, &l, tile, [&base, &s0, &s1]) else {
                    return;
                };
                line
            }
            (MmaFamily::Wgmma, _) => {
                // Logical strides (m, k): a K-major A is [M, K], else [K, M].
                let (sm, sk) = if f.k_major { (&s0, &s1) } else { (&s1, &s0) };
                let (n, sbase, rows, cols) = if tile.swizzle == 0 {
                    (0, base.clone(), 0, 0)
                } else {
                    let HExprKind::At { buffer, .. } = &tile.first.kind else {
                        return self.bug(span, "an MMA tile without its first access");
                    };
                    let (sbase, rows, cols) = self.swizzle_parts(span, *buffer);
                    (tile.swizzle, format!("&{sbase}"), rows, cols)
                };
                format!(
                    "{NS}::wg_load_a<{n}>({l}, {NS}::wg_thread(), {base}, {sm}, {sk}, {sbase}, \
                     {rows}u, {cols}u);"
                )
            }
            (MmaFamily::Wmma, MmaRole::C) => {
                format!("{NS}::wmma_load_c({l}, {LANE}, {base}, {s0});")
            }
            (_, MmaRole::E) => format!("{NS}::sp_meta_load({l}, {LANE}, {base}, {s0}, {s1});"),
            (MmaFamily::Wmma, r) => {
                let role = if r == MmaRole::A { 0 } else { 1 };
                let km = f.k_major;
                format!(
                    "{NS}::wmma_load<{role}, {tf32}, {m}, {n}, {k}, {t}, {km}>({l}, {LANE}, \
                     {base}, {s0});"
                )
            }
            (_, r) => {
                // Logical strides: A (m, k), B (k, n), C (m, n). A K-major A is [M, K], else
                // [K, M]; a K-major B is [N, K], else [K, N].
                let (x, y) = match r {
                    MmaRole::A if f.k_major => (&s0, &s1),
                    MmaRole::A => (&s1, &s0),
                    MmaRole::B if f.k_major => (&s1, &s0),
                    _ => (&s0, &s1),
                };
                if tile.swizzle == 0 {
                    let aligned = self.ldsm_aligned(tile);
                    format!("{NS}::sync_load<{tf32}, 0, {aligned}>({l}, {LANE}, {base}, {x}, {y});")
                } else {
                    let HExprKind::At { buffer, .. } = &tile.first.kind else {
                        return self.bug(span, "an MMA tile without its first access");
                    };
                    let (sbase, rows, cols) = self.swizzle_parts(span, *buffer);
                    let n = tile.swizzle;
                    format!(
                        "{NS}::sync_load<{tf32}, {n}>({l}, {LANE}, {base}, {x}, {y}, &{sbase}, \
                         {rows}u, {cols}u);"
                    )
                }
            }
        };
        match self.tile_guard(tile) {
            // A tile outside its buffer reads zeros (the call fails anyway).
            Some(g) => {
                self.w.line(span, &format!("if ({g}) {line}"));
                self.w.line(span, &format!("else {NS}::fill({l}, 0);"));
            }
            None => self.w.line(span, &line),
        }
        // mma.sync's operand loads converge themselves where they gather element by element
        // (mma.cuh); after ldmatrix the warp converges once, before the next statement that may
        // write shared memory (`FnEmitter::warp_reads`), not after every load: a warp barrier
        // waits for the loaded registers, so the k-step's loads could not overlap.
        if sel.family == MmaFamily::MmaSync && matches!(role, MmaRole::A | MmaRole::B) {
            self.warp_reads = true;
        } else {
            self.w.line(span, &format!("{NS}::converge();"));
        }
    }

    /// Converges the warp if ldmatrix reads are pending (see [`FnEmitter::warp_reads`]).
    pub(super) fn converge_warp_reads(&mut self, span: Span) {
        if std::mem::take(&mut self.warp_reads) {
            self.w.line(span, &format!("{NS}::converge();"));
        }
    }

    /// Whether an mma.sync operand tile provably suits ldmatrix without a run-time test: a
    /// shared tile of 16-bit elements whose first element is 16-byte aligned (the pool places
    /// every shared buffer at a multiple of 16 bytes) and whose rows (`pitch` elements apart,
    /// the stride that is not 1) start 16 bytes apart or a multiple of it.
    fn ldsm_aligned(&self, tile: &MmaTile) -> bool {
        let HExprKind::At { buffer, index, .. } = &tile.first.kind else { return false };
        if tile.storage != Storage::Shared || tile.elem.size_bytes() != 2 {
            return false;
        }
        let pitch = match (&tile.strides[0].kind, &tile.strides[1].kind) {
            (HExprKind::Int(p), HExprKind::Int(1)) | (HExprKind::Int(1), HExprKind::Int(p)) => {
                Some(*p)
            }
            _ => None,
        };
        let offset = align::offset_multiple(&self.dims_of_buffer(*buffer), index);
        pitch.is_some_and(|p| p > 0 && p * 2 % 16 == 0) && align::divides(offset, 8)
    }

    /// The descriptor of atom `kt` (a C++ expression) of a direct operand.
    pub(super) fn wg_desc(
        &mut self,
        span: Span,
        o: &WgOperand,
        atom_k: u64,
        kt: &str,
    ) -> Option<String> {
        let HExprKind::At { buffer, .. } = &o.tile.first.kind else {
            self.bug(span, "a WGMMA operand without its first access");
            return None;
        };
        let (sbase, rows, cols) = self.swizzle_parts(span, *buffer);
        let base = self.expr(&o.tile.base);
        let ks = self.expr(&o.k_stride);
        let n = o.tile.swizzle;
        let mn = o.mn_major;
        let e = match kt {
            "0" => base,
            _ => format!("{base} + {kt} * {atom_k} * ({ks})"),
        };
        Some(format!("{NS}::wg_desc<{n}, {mn}, {atom_k}>(&{sbase}, {e}, {rows}u, {cols}u)"))
    }

    /// The descriptors of a direct operand's K atoms as the descriptor of atom 0 plus a
    /// constant per atom, when the operand's layout makes the step constant (spec-tier3 §10.3:
    /// the descriptor's address field is the unswizzled byte offset, `addr >> 4` in its low
    /// bits, so adding `bytes >> 4` moves it by `bytes` while the address stays in shared
    /// memory): `(atom 0's descriptor, the increment of atom kt as a C++ expression of kt)`.
    /// An MN-major operand steps `atom_k` rows of `Swz` bytes per atom; a K-major one steps
    /// `atom_k` elements along its row while its atoms stay in one column group (`Swz` bytes of
    /// each row: always when the buffer's rows fit in one), and by a `constexpr` table of
    /// per-atom offsets when they cross groups — both need the first column modulo the group
    /// width, known when it is a constant or a multiple of the width. `None` otherwise (each
    /// atom's descriptor is computed on its own).
    fn wg_desc_steps(
        &mut self,
        span: Span,
        o: &WgOperand,
        atoms: u64,
        atom_k: u64,
        name: &str,
    ) -> Option<(String, String)> {
        let HExprKind::At { buffer, index, .. } = &o.tile.first.kind else { return None };
        let (_, rows, cols) = self.swizzle_parts(span, *buffer);
        let swz = u64::from(o.tile.swizzle);
        let elem = o.tile.elem.size_bytes();
        if swz == 0 || elem == 0 || swz % elem != 0 {
            return None;
        }
        let w = swz / elem;
        let ks = peel_int(&o.k_stride)?;
        let step =
            |bytes: u64| format!("static_cast<std::uint32_t>(__choreo_kt) * {}u", bytes >> 4);
        let offsets = if o.mn_major {
            // K runs along the buffer's rows: one atom is `atom_k` rows of `Swz` bytes.
            if ks != i128::from(cols) {
                return None;
            }
            let bytes = atom_k * swz;
            (bytes % 16 == 0).then(|| step(bytes))?
        } else {
            if ks != 1 {
                return None;
            }
            // The first column modulo the column group's width: every column is in the only
            // group when the rows fit in one; else known when the column is a constant or a
            // multiple of the width (`kb * 64`).
            let r0 = if cols <= w { 0 } else { col_mod(index.exprs().last()?, w)? };
            // Several column groups (Swz bytes wide, `rows · Swz` bytes apart): atom kt's
            // offset from atom 0's, in elements.
            let phys = |c: u64| (c % w) + (c / w) * rows * w;
            let mut offsets = Vec::new();
            for kt in 0..atoms {
                let bytes = phys(r0 + kt * atom_k).checked_sub(phys(r0))? * elem;
                if bytes % 16 != 0 {
                    return None;
                }
                offsets.push(bytes >> 4);
            }
            if r0 + atoms * atom_k <= w || cols <= w {
                // Inside one column group: consecutive (unswizzled) elements.
                step(atom_k * elem)
            } else {
                let list = offsets.iter().map(|o| format!("{o}u")).collect::<Vec<_>>().join(", ");
                self.w.line(
                    span,
                    &format!("constexpr std::uint32_t __choreo_{name}_step[{atoms}] = {{{list}}};"),
                );
                format!("__choreo_{name}_step[__choreo_kt]")
            }
        };
        let d0 = self.wg_desc(span, o, atom_k, "0")?;
        Some((d0, offsets))
    }

    /// An SS WGMMA (spec-tier3 §5.4, §10.3): fence the accumulator registers and the
    /// operands' generic writes, issue one instruction per K atom, commit, and (`wait`, a
    /// synchronous execution) wait for all.
    fn wg_exec(
        &mut self,
        span: Span,
        acc: &FragRef,
        (a, b): (&WgA, &WgOperand),
        [atoms, atom_k]: [u64; 2],
        wait: bool,
        order: Option<&[u64]>,
    ) {
        let f = self.f.frags[acc.frag.index()].clone();
        let Some(sel) = f.selected else {
            return self.bug(span, "a WGMMA accumulator without a configuration");
        };
        let c = sel.config;
        let op = wgmma_op(&c);
        let l = self.frag_lvalue(acc);
        let mut guards = Vec::new();
        if let Some(g) = self.tile_guard(&b.tile) {
            guards.push(g);
        }
        let tb = u8::from(b.mn_major);
        let n = c.n;
        // SS: A's descriptor; RS: A's registers.
        let (issue, mode) = match a {
            WgA::Shared(a) => {
                if let Some(g) = self.tile_guard(&a.tile) {
                    guards.push(g);
                }
                let ta = u8::from(a.mn_major);
                (
                    format!(
                        "  {WG}::Mma<{op}, {n}>::ss<{ta}, {tb}>({l}.r, __choreo_da, __choreo_db, 1);"
                    ),
                    "SS",
                )
            }
            WgA::Regs(f) => {
                let fa = self.frag_lvalue(f);
                (format!("  {NS}::wg_rs<{tb}>({l}, {fa}, __choreo_kt, __choreo_db);"), "RS")
            }
        };
        let head = format!(
            "{{  // WGMMA m64n{}k{atom_k} x {atoms} ({mode}{}), {}(c) += {}(a) * {}(b)",
            c.n,
            if wait { "" } else { ", async" },
            c.c.name(),
            c.a.name(),
            c.b.name()
        );
        self.wg_open(span, &guards, &head);
        // The descriptors of the K atoms: atom 0's once, then a constant step per atom where
        // the layout allows (`wg_desc_steps`), else each atom's on its own.
        let mut descs = Vec::new();
        let operands: Vec<(&WgOperand, &str)> = match a {
            WgA::Shared(a) => vec![(a, "da"), (b, "db")],
            WgA::Regs(_) => vec![(b, "db")],
        };
        for (o, name) in operands {
            match self.wg_desc_steps(span, o, atoms, atom_k, name) {
                Some((d0, step)) => {
                    self.w.line(span, &format!("const std::uint64_t __choreo_{name}0 = {d0};"));
                    descs.push(format!(
                        "  const std::uint64_t __choreo_{name} = {NS}::wg_desc_add(__choreo_\
                         {name}0, {step});"
                    ));
                }
                None => {
                    let Some(d) = self.wg_desc(span, o, atom_k, "__choreo_kt") else { return };
                    descs.push(format!("  const std::uint64_t __choreo_{name} = {d};"));
                }
            }
        }
        let operands = match a {
            WgA::Shared(a) => vec![a, b],
            WgA::Regs(_) => vec![b],
        };
        self.wg_fence_operands(span, &operands, &l);
        for line in [
            match order {
                None => {
                    format!("for (int __choreo_kt = 0; __choreo_kt < {atoms}; ++__choreo_kt) {{")
                }
                Some(o) => {
                    let list = o.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
                    format!(
                        "for (int __choreo_ki = 0; __choreo_ki < {atoms}; ++__choreo_ki) {{  \
                         // [[schedule(k_tiles({list}))]]"
                    )
                }
            },
            match order {
                None => String::new(),
                Some(o) => {
                    let list = o.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
                    format!(
                        "  constexpr int __choreo_order[{atoms}] = {{{list}}};\n  const int \
                         __choreo_kt = __choreo_order[__choreo_ki];"
                    )
                }
            },
            descs.join("\n"),
            issue,
            "}".to_string(),
        ] {
            for l in line.lines() {
                self.w.line(span, l);
            }
        }
        self.wg_close(span, &l, wait);
    }

    /// Opens the block of a WGMMA execution: `head` (a `{` and its comment), under the operand
    /// tiles' `guards` if any.
    pub(super) fn wg_open(&mut self, span: Span, guards: &[String], head: &str) {
        match guards.is_empty() {
            true => self.w.line(span, head),
            false => self.w.line(span, &format!("if ({}) {head}", guards.join(" && "))),
        }
        self.w.indent += 1;
    }

    /// Before a WGMMA reads `operands` and writes the accumulator `l`: the proxy fence for
    /// generic-proxy writes of the operand tiles (a copy by threads; tiles only the copy engine
    /// fills need none, `lower::proxy`), the accumulator registers' fence, `wgmma.fence`, and
    /// the unroll pragma of the instruction loop that follows.
    pub(super) fn wg_fence_operands(&mut self, span: Span, operands: &[&WgOperand], l: &str) {
        if operands.iter().any(|o| match &o.tile.first.kind {
            HExprKind::At { buffer, .. } => self.proxies.generic(*buffer),
            _ => true,
        }) {
            self.w.line(span, "::choreo::tma::fence_proxy_async();");
        }
        self.w.line(span, &format!("{WG}::fence_operands({l}.r);"));
        self.w.line(span, &format!("{WG}::fence();"));
        self.w.line(span, "#pragma unroll");
    }

    /// Closes the block of a WGMMA execution after its instruction loop: commit the group and,
    /// for a synchronous one (`wait`), wait for it, fencing the accumulator `l` after each.
    pub(super) fn wg_close(&mut self, span: Span, l: &str, wait: bool) {
        self.w.line(span, &format!("{WG}::commit_group();"));
        self.w.line(span, &format!("{WG}::fence_operands({l}.r);"));
        if wait {
            self.w.line(span, &format!("{WG}::wait_group<0>();"));
            self.w.line(span, &format!("{WG}::fence_operands({l}.r);"));
        }
        self.w.indent -= 1;
        self.w.line(span, "}");
    }

    /// The block scale (spec-tier3 §5.4): `acc += tmp·SA(row)·sb` register by register, then
    /// `tmp = 0`.
    fn wg_scale(
        &mut self,
        span: Span,
        acc: &FragRef,
        tmp: &FragRef,
        scale: &MmaTile,
        m_dim: usize,
        sb: &crate::hir::HExpr,
    ) {
        let (l, t) = (self.frag_lvalue(acc), self.frag_lvalue(tmp));
        let base = self.expr(&scale.base);
        let stride = self.expr(&scale.strides[m_dim]);
        let sb = self.expr(sb);
        let line = format!("{NS}::wg_scale({l}, {t}, {NS}::wg_thread(), {base}, {stride}, {sb});");
        match self.tile_guard(scale) {
            Some(g) => self.w.line(span, &format!("if ({g}) {line}")),
            None => self.w.line(span, &line),
        }
    }
}

/// `c mod w` of a column index `c`, when it is known: a non-negative constant, or a multiple
/// of `w` (a product with a constant factor that is one, sums of such).
fn col_mod(c: &crate::hir::HExpr, w: u64) -> Option<u64> {
    fn multiple(e: &crate::hir::HExpr, w: i128) -> bool {
        use crate::hir::BinOp;
        match &e.kind {
            HExprKind::Int(v) => v % w == 0,
            HExprKind::Cast { operand, .. } => multiple(operand, w),
            HExprKind::Binary { op: BinOp::Mul, lhs, rhs } => multiple(lhs, w) || multiple(rhs, w),
            HExprKind::Binary { op: BinOp::Add | BinOp::Sub, lhs, rhs } => {
                multiple(lhs, w) && multiple(rhs, w)
            }
            _ => false,
        }
    }
    match peel_int(c) {
        Some(v) => u64::try_from(v).ok().map(|v| v % w),
        None => multiple(c, i128::from(w)).then_some(0),
    }
}

/// The value of an integer literal, through casts.
fn peel_int(e: &crate::hir::HExpr) -> Option<i128> {
    match &e.kind {
        HExprKind::Int(v) => Some(*v),
        HExprKind::Cast { operand, .. } => peel_int(operand),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wgmma_namespaces_cover_the_sparse_library_and_the_generated_instructions() {
        for cpu in [false, true] {
            let libraries_only = fnv1a([WGMMA_LIBRARY, WGMMA_OPS]);
            assert_ne!(wgmma_namespace(cpu), library_namespace("wgmma", libraries_only, cpu));
            let with_sparse = fnv1a([WGMMA_LIBRARY, WGMMA_OPS, WGMMA_SPARSE]);
            assert_ne!(wgmma_namespace(cpu), library_namespace("wgmma", with_sparse, cpu));
            // The MMA namespace of a file with WGMMA is not the one of a file without.
            assert_ne!(mma_namespace(cpu, true), mma_namespace(cpu, false));
            assert_eq!(
                mma_namespace(cpu, false),
                library_namespace("mma", fnv1a([MMA_SUPPORT]), cpu)
            );
        }
    }
}
