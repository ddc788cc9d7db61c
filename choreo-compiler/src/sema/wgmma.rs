//! WGMMA: MMA statements of a warpgroup (spec-tier3 §5.2–§5.4, §10.3).
//!
//! In a `group-4` level (or under `t by 128 : thread` of one, and in the `inthreads.async`
//! roles there) `mma.<a>.<b> acc, A, B;` is a warpgroup MMA: A and B are direct shared views
//! (SS mode) that a swizzled copy filled, the accumulator is 64×N over the warpgroup's 128
//! threads (WGMMA_ACC), and a K that is a multiple of the instruction's K is split into
//! several instructions. Fills, updates and stores of WGMMA accumulators are the common ones
//! of `sema::mma`.

use super::Checker;
use super::scope::Symbol;
use crate::ast::{self, ExprKind, MmaLayout};
use crate::diagnostics::Diagnostic;
use crate::hir::mma::{FragRef, MmaOp, MmaRole, MmaSelected, WgA, WgOperand};
use crate::hir::{BufferRef, ElemTy, Level, Stmt, StmtKind, Storage, View};
use crate::source::Span;
use crate::target::mma::{MmaConfig, MmaFamily, MmaType, Selection, select};

use super::Region;
use super::fold;

/// The future of an asynchronous WGMMA (`q = mma.row.row.async acc, a, b;`, or sparse:
/// `q = mma.row.row.sp.async acc, a, b, e;`).
#[derive(Debug, Clone)]
pub(crate) struct WgFuture {
    /// Its name.
    pub(crate) name: String,
    /// The statement that made it.
    pub(crate) span: Span,
    /// The accumulator it computes.
    pub(crate) acc: FragRef,
    /// The scope it was declared in.
    scope: u32,
    /// Its issue number (an index of `Checker::wg_asyncs`).
    seq: usize,
    /// The loop depth of the statement.
    loop_depth: u32,
    /// The `wait` that observed it.
    waited: Option<Span>,
}

/// How a WGMMA execution statement is written.
pub(crate) struct WgExec<'x> {
    /// The operands' suffix.
    pub(crate) layout: MmaLayout,
    /// The statement.
    pub(crate) span: Span,
    /// Whether it may be emitted (its place is right).
    pub(crate) ok: bool,
    /// `.async`.
    pub(crate) is_async: bool,
    /// The future it declares (`q = …`), for an asynchronous one.
    pub(crate) future: &'x Option<ast::Ident>,
    /// `[[schedule(k_tiles(…))]]` and the attribute's span, if written.
    pub(crate) schedule: Option<(&'x [(crate::token::IntLit, Span)], Span)>,
}

/// A role a fragment takes in a WGMMA, for `Checker::wg_role_ok`.
pub(crate) struct WgRole<'w> {
    /// The role.
    pub(crate) role: MmaRole,
    /// How the message names it ("the accumulator").
    pub(crate) what: &'w str,
    /// Whether what else the role needs agrees with the fragment's earlier use.
    pub(crate) fits: bool,
    /// The help's verb: how another fragment is made ("fill", "load").
    pub(crate) make: &'w str,
}

/// The K of one WGMMA instruction for operands of `t` (16-bit: 16, tf32: 8, 8-bit: 32).
pub(super) fn atom_k(t: MmaType) -> u64 {
    match t {
        MmaType::Tf32 => 8,
        MmaType::E4m3 | MmaType::E5m2 | MmaType::S8 | MmaType::U8 => 32,
        _ => 16,
    }
}

impl Checker<'_> {
    /// Whether the statement is executed by whole warpgroups: directly in a `group-4` body, or
    /// in the body of a 128-thread level inside one, outside any `inthreads` whose condition
    /// may differ between the threads of a warpgroup. Reports `E1020` otherwise.
    pub(crate) fn wg_place_ok(&mut self, span: Span) -> bool {
        if self.warpgroup_splits > 0 {
            self.diags.push(
                Diagnostic::error(
                    "E1020",
                    span,
                    "WGMMA statements are executed by a whole warpgroup, but this `inthreads` \
                     condition selects only some of its threads",
                )
                .with_label("inside a part of a warpgroup")
                .with_help(
                    "select whole warpgroups: conditions on the `group-4` index (`w > 0`), not \
                     on the thread index",
                ),
            );
            return false;
        }
        let whole = match self.region {
            Region::Device(Level::Group4) => true,
            Region::Device(Level::Thread) => self.level_extents.last().is_some_and(|e| {
                e.iter().map(|d| d.as_const()).try_fold(1u64, |a, d| d.map(|d| a * d)) == Some(128)
            }),
            _ => false,
        };
        if !whole {
            self.diags.push(
                Diagnostic::error(
                    "E1020",
                    span,
                    "WGMMA statements are executed by a whole warpgroup: they must be in the body \
                     of a `: group-4` level, or of `t by 128 : thread` directly inside one",
                )
                .with_label("not executed by the 128 threads of a warpgroup")
                .with_help("write `parallel w by W : group-4, t by 128 : thread { … }`"),
            );
        }
        whole
    }

    /// Whether `e` names a fragment (`acc`, `acc[i]`).
    pub(crate) fn names_frag(&self, e: &ast::Expr) -> bool {
        let mut base = e;
        while let ExprKind::Index { base: inner, .. } = &base.kind {
            base = inner;
        }
        matches!(&base.kind, ExprKind::Ident(id)
            if matches!(self.scopes.lookup(&id.name), Some(Symbol::Frag(_))))
    }

    /// A direct shared operand of WGMMA: a rank-2 shared view with constant extents, rows of a
    /// shared buffer (contiguous last dimension, the buffer's row pitch) that a swizzled copy
    /// filled. `None` after reporting.
    pub(crate) fn wg_operand(
        &mut self,
        e: &ast::Expr,
        which: &str,
        mn_major: bool,
    ) -> Option<WgOperand> {
        let view: View = self.check_data(e, "a WGMMA operand")?;
        if view.storage != Storage::Shared {
            let place = view.storage.as_str();
            self.error_label(
                "E1023",
                e.span,
                format!(
                    "a direct WGMMA operand must be a view of shared memory, but operand {which} \
                     is {place} data"
                ),
                format!("{place} data as a WGMMA operand"),
            );
            return None;
        }
        let buffer = view.buffer;
        let buffer_dims = self.buffer_dims(buffer);
        let elem = view.elem;
        let mut tile = self.mma_tile(view, e.span, "operand", false, None)?;
        let copy = self.kernel.as_ref().and_then(|k| k.copy_swizzle.get(&buffer).copied());
        let n = match copy {
            Some((n, _)) if n != 0 => n,
            other => {
                let mut d = Diagnostic::error(
                    "E1024",
                    e.span,
                    format!(
                        "operand {which} of a WGMMA must be a shared tile filled by a swizzled copy \
                         (`.swiz<128|64|32>`)"
                    ),
                )
                .with_label("no swizzle to build its matrix descriptor with")
                .with_help(
                    "fill the tile with `tma.load.swiz<128>` (or `dma.copy.swiz<N>`): we \
                     require a swizzle for WGMMA shared operands (spec-tier3 §10.3)",
                );
                if let Some((_, at)) = other {
                    d = d.with_secondary(at, "the copy that filled it, without a swizzle");
                }
                self.diags.push(d);
                return None;
            }
        };
        tile.swizzle = n;
        let cols = buffer_dims.last().and_then(|d| d.as_const());
        let [s0, s1] = [fold::const_int(&tile.strides[0]), fold::const_int(&tile.strides[1])];
        let rows_of_buffer = s1 == Some(1) && cols.is_some_and(|c| s0 == Some(c as i128));
        let array = match buffer {
            BufferRef::Local(v) => self.locals.get(v.index()).is_some_and(|l| l.array_dims > 0),
            BufferRef::Param(_) => false,
        };
        let row_bytes = cols.unwrap_or(0) * elem.size_bytes();
        if !rows_of_buffer || (array && row_bytes > u64::from(n)) {
            let why = if rows_of_buffer {
                format!(
                    "the buffers of this array have rows of {row_bytes} bytes, more than the \
                     swizzle period {n}"
                )
            } else {
                "its last dimension must be contiguous and its rows the buffer's rows".to_string()
            };
            self.error_label(
                "E1025",
                e.span,
                format!(
                    "operand {which} of a WGMMA must be a block of whole rows of its shared \
                     buffer: {why}"
                ),
                "no matrix descriptor describes this view",
            );
            return None;
        }
        // One instruction of the whole warpgroup: its descriptors must be warpgroup-uniform.
        if self.splits_warpgroups(&tile.base)
            || tile.strides.iter().any(|s| self.splits_warpgroups(s))
        {
            self.error_label(
                "E1029",
                e.span,
                format!(
                    "operand {which} of a WGMMA must be the same view in every thread of the \
                     warpgroup, but it depends on a thread or warp index, a mutable value or data"
                ),
                "differs between the threads of a warpgroup",
            );
            return None;
        }
        let k_stride = tile.strides[usize::from(!mn_major)].clone();
        Some(WgOperand { tile, mn_major, k_stride })
    }

    /// `[q =] mma.<a>.<b>[.async] acc, A, B;` in a warpgroup.
    pub(crate) fn check_wg_exec(
        &mut self,
        wg: &WgExec<'_>,
        acc: &ast::Expr,
        a: &ast::Expr,
        b: &ast::Expr,
        out: &mut Vec<Stmt>,
    ) {
        let before = self.diags.error_count();
        self.check_wg_exec_inner(wg, acc, a, b, out);
        self.wg_future_after(wg.future.as_ref(), before);
    }

    /// After an asynchronous WGMMA that reported errors (more than `before`): its future, if
    /// named and not declared by it, is declared poisoned (its `wait` reports nothing more).
    pub(crate) fn wg_future_after(&mut self, future: Option<&ast::Ident>, before: usize) {
        if self.diags.error_count() > before {
            if let Some(f) = future {
                if self.scopes.declared_here(&f.name).is_none() {
                    self.declare_poisoned(f);
                }
            }
        }
    }

    /// An asynchronous WGMMA (dense or sparse) on `acc` is issued by the statement at `span`:
    /// its future joins the scope's FIFO (`wait q` = `wgmma.wait_group n`), is declared as
    /// `future` (without a name nothing can wait for it: `E1027` at the end of the function),
    /// and the accumulator is pending until the wait (`E1028`).
    pub(crate) fn wg_issue_async(
        &mut self,
        future: Option<&ast::Ident>,
        span: Span,
        acc: &FragRef,
    ) {
        let seq = self.wg_asyncs.len();
        let scope = self.scopes.current_id();
        self.wg_asyncs.push((scope, seq));
        let q = self.wg_futures.len();
        let name = future.map_or_else(|| "(unnamed)".to_string(), |f| f.name.clone());
        self.wg_futures.push(WgFuture {
            name,
            span,
            acc: acc.clone(),
            scope,
            seq,
            loop_depth: self.loop_depth,
            waited: None,
        });
        if let Some(f) = future {
            self.declare_symbol(f, Symbol::MmaFuture(q));
        }
        self.frag_states[acc.frag.index()].pending = Some(q);
    }

    fn check_wg_exec_inner(
        &mut self,
        wg: &WgExec<'_>,
        acc: &ast::Expr,
        a: &ast::Expr,
        b: &ast::Expr,
        out: &mut Vec<Stmt>,
    ) {
        let (layout, span, ok) = (wg.layout, wg.span, wg.ok);
        let (a_row, b_row) = match layout {
            MmaLayout::RowRow => (true, true),
            MmaLayout::RowCol => (true, false),
            MmaLayout::ColRow => (false, true),
            MmaLayout::ColCol => (false, false),
        };
        let acc = self.frag_ref(acc, false, "the accumulator");
        // A: (operand, its view's extents, its element type).
        let a = if let Some(shaped) = self.wg_shaped_a(a, a_row, out) {
            shaped
        } else if self.names_frag(a) {
            self.wg_register_a(a, span)
        } else {
            self.wg_operand(a, "A", !a_row)
                .map(|o| (o.tile.dims, o.tile.elem, WgA::Shared(Box::new(o))))
        };
        let b = if self.names_frag(b) {
            let f = self.frag_ref(b, false, "operand B");
            let mut d = Diagnostic::error(
                "E1021",
                b.span,
                "WGMMA mma.load only supports a register A operand; reference shared-memory A/B \
                 operands directly",
            )
            .with_label("a fragment as operand B of a warpgroup MMA")
            .with_help("name the shared view that the fragment was loaded from");
            if let Some(f) = f {
                d = d.with_secondary(self.frags[f.frag.index()].span, "loaded here");
            }
            self.diags.push(d);
            None
        } else {
            self.wg_operand(b, "B", !b_row)
        };
        let (Some(acc), Some(a), Some(b)) = (acc, a, b) else { return };
        let (ad, a_elem, a) = a;
        let bd = b.tile.dims;
        let (m, ka) = if a_row { (ad[0], ad[1]) } else { (ad[1], ad[0]) };
        let (n, kb) = if b_row { (bd[0], bd[1]) } else { (bd[1], bd[0]) };
        if ka != kb {
            let label = format!("K is {ka} for A and {kb} for B ({})", layout.as_str());
            return self.k_mismatch(span, [ad, bd], label);
        }
        if !self.wg_acc_ready(&acc, span, [m, n]) {
            return;
        }
        let b_elem = b.tile.elem;
        let c_elem = self.acc_elem_or(&acc, a_elem);
        let at = atom_k(super::mma::mma_type(a_elem, true));
        let config = MmaConfig {
            a: super::mma::mma_type(a_elem, true),
            b: super::mma::mma_type(b_elem, true),
            c: super::mma::mma_type(c_elem, false),
            m,
            n,
            k: if ka % at == 0 { at } else { ka },
            sparse: false,
        };
        let wide_k = if ka % at == 0 && ka != at {
            format!(" (K {ka} splits into {} instructions of K {at})", ka / at)
        } else {
            String::new()
        };
        let none = format!("no WGMMA instruction has this configuration{wide_k}");
        if !self.wg_select(
            &config,
            span,
            ("a warpgroup MMA", &none),
            "a warpgroup MMA is WGMMA: M = 64, the types and N of table G (spec-tier3 §5.3)",
        ) {
            return;
        }
        let sixteen = matches!(config.a, MmaType::F16 | MmaType::Bf16);
        if (!a_row || !b_row) && !sixteen {
            self.error_label(
                "E1022",
                span,
                format!(
                    "only 16-bit WGMMA operands may be MN-major: {} operands must be `row.row`, \
                     not `{}`",
                    config.a.name(),
                    layout.as_str()
                ),
                "an MN-major operand of an 8-bit or tf32 WGMMA",
            );
            return;
        }
        let atoms = ka / at;
        let order = match wg.schedule {
            None => None,
            Some((list, at_span)) => {
                let values: Vec<i128> = list.iter().map(|(v, _)| v.value).collect();
                let mut sorted = values.clone();
                sorted.sort_unstable();
                if sorted != (0..i128::from(atoms)).collect::<Vec<_>>() {
                    let got = values.iter().map(i128::to_string).collect::<Vec<_>>().join(", ");
                    self.error_label(
                        "E1030",
                        at_span,
                        format!(
                            "MMA k_tiles schedule ({got}) must be a permutation of 0..{} (the \
                             execution issues {atoms} instructions of K {at})",
                            atoms.saturating_sub(1)
                        ),
                        "not a permutation of the K steps",
                    );
                    return;
                }
                Some(values.iter().map(|v| *v as u64).collect::<Vec<u64>>())
            }
        };
        let selected = MmaSelected { family: MmaFamily::Wgmma, config };
        if let WgA::Regs(f) = &a {
            // RS mode: every type (16-bit, tf32, 8-bit) has it; the operand is K-major for
            // tf32 and 8-bit types (E1022 above), its registers in the mma.sync A layout per
            // warp (wgmma.cuh's a_frag_row / a_frag_col).
            let fits = self.frags[f.frag.index()].k_major == a_row;
            let a_role = WgRole { role: MmaRole::A, what: "operand A", fits, make: "load" };
            let note = format!(" ({})", layout.as_str());
            if !self.wg_role_ok(f, span, selected, &a_role, &note) {
                return;
            }
            self.take_role(f, MmaRole::A, selected, a_row, Some(ka));
        }
        let c_role = WgRole { role: MmaRole::C, what: "the accumulator", fits: true, make: "fill" };
        if !self.wg_role_ok(&acc, span, selected, &c_role, "") {
            return;
        }
        self.wg_take_acc(&acc, selected, [m, n]);
        if wg.is_async {
            self.wg_issue_async(wg.future.as_ref(), span, &acc);
        }
        if ok {
            let op = MmaOp::WgExec {
                acc,
                a,
                b: Box::new(b),
                atoms,
                atom_k: at,
                wait: !wg.is_async,
                order,
            };
            out.push(Stmt { kind: StmtKind::Mma(Box::new(op)), span });
        }
    }

    /// Whether the accumulator of a WGMMA of `[m, n]` may execute: made by `mma.fill` or
    /// `frag` (`E1010`), of the shape of its earlier MMAs (`E1002`), and not failed before
    /// (then nothing is reported).
    pub(crate) fn wg_acc_ready(&mut self, acc: &FragRef, span: Span, [m, n]: [u64; 2]) -> bool {
        let st = self.frag_states[acc.frag.index()].clone();
        if st.failed {
            return false;
        }
        if !st.filled {
            let name = self.frags[acc.frag.index()].name.clone();
            self.error_label(
                "E1010",
                span,
                format!(
                    "the accumulator `{name}' of a WGMMA must be made by `mma.fill` or `frag` \
                     (WGMMA accumulators are not loaded from memory)"
                ),
                "not a filled accumulator",
            );
            return false;
        }
        self.acc_same_shape(acc, span, [m, n])
    }

    /// Whether `config` selects a WGMMA instruction on the target (`E1005`): `what` labels a
    /// target older than sm_90a, `none` a configuration that no instruction has, with `help`.
    pub(crate) fn wg_select(
        &mut self,
        config: &MmaConfig,
        span: Span,
        (what, none): (&str, &str),
        help: &str,
    ) -> bool {
        let arch = self.target.arch().map_or("cpu".to_string(), |a| a.sm().to_string());
        match select(config, self.target.arch()) {
            Selection::Selected(MmaFamily::Wgmma) => true,
            Selection::TooOld { family: MmaFamily::Wgmma, .. } => {
                self.diags.push(
                    Diagnostic::error(
                        "E1005",
                        span,
                        format!("WGMMA requires sm_90a (MMA [{config}] on SM_{arch})"),
                    )
                    .with_label(what)
                    .with_help("build for sm_90a (`--arch sm_90a`)"),
                );
                false
            }
            _ => {
                self.no_mma_config(config, span, none, help);
                false
            }
        }
    }

    /// Whether fragment `f` may be `role.what` of an MMA `selected` (`E1006`): it has no role
    /// yet, or this one of this configuration and `role.fits` (what else must agree with its
    /// earlier use). `note` follows the message's configuration.
    pub(crate) fn wg_role_ok(
        &mut self,
        f: &FragRef,
        span: Span,
        selected: MmaSelected,
        role: &WgRole<'_>,
        note: &str,
    ) -> bool {
        let frag = &self.frags[f.frag.index()];
        let (Some(r), Some(s)) = (frag.role, frag.selected) else { return true };
        if r == role.role && s == selected && role.fits {
            return true;
        }
        let (name, decl) = (frag.name.clone(), frag.span);
        let (what, config) = (role.what, selected.config);
        self.diags.push(
            Diagnostic::error(
                "E1006",
                span,
                format!(
                    "fragment `{name}' is the {} of an MMA [{}] and here {what} of \
                     [{config}]{note}",
                    r.name(),
                    s.config
                ),
            )
            .with_label("a second role or configuration")
            .with_secondary(decl, "declared here")
            .with_help(format!(
                "a fragment has one role and configuration: {} another one",
                role.make
            )),
        );
        false
    }

    /// Fragment `f` is from now on `role` of `selected` (`k_major`; its K extent if given).
    pub(crate) fn take_role(
        &mut self,
        f: &FragRef,
        role: MmaRole,
        selected: MmaSelected,
        k_major: bool,
        extent_k: Option<u64>,
    ) {
        let frag = &mut self.frags[f.frag.index()];
        frag.role = Some(role);
        frag.selected = Some(selected);
        frag.k_major = k_major;
        if let Some(k) = extent_k {
            frag.extent_k = k;
        }
    }

    /// The accumulator `acc` of a WGMMA `selected` of `[m, n]` is from now on its C.
    pub(crate) fn wg_take_acc(&mut self, acc: &FragRef, selected: MmaSelected, mn: [u64; 2]) {
        self.take_role(acc, MmaRole::C, selected, true, None);
        self.frag_states[acc.frag.index()].acc_shape = Some(mn);
    }

    /// A register A operand (RS mode): a fragment that `mma.load` filled (its extents and
    /// element type). `None` after reporting.
    pub(crate) fn wg_register_a(
        &mut self,
        e: &ast::Expr,
        span: Span,
    ) -> Option<([u64; 2], ElemTy, WgA)> {
        let f = self.frag_ref(e, false, "operand A")?;
        let st = self.frag_states[f.frag.index()].clone();
        match st.loaded {
            Some(d) if !st.filled => Some((d, self.frags[f.frag.index()].elem, WgA::Regs(f))),
            _ if st.failed => None,
            _ => {
                let name = self.frags[f.frag.index()].name.clone();
                self.error_label(
                    "E1010",
                    span,
                    format!(
                        "operand A `{name}' of a WGMMA must be a fragment loaded with `mma.load`"
                    ),
                    "not a loaded operand",
                );
                None
            }
        }
    }

    /// Whether `e` names the future of an asynchronous WGMMA.
    pub(crate) fn names_mma_future(&self, e: &ast::Expr) -> bool {
        matches!(&e.kind, ExprKind::Ident(id)
            if matches!(self.scopes.lookup(&id.name), Some(Symbol::MmaFuture(_))))
    }

    /// `wait q;` of an asynchronous WGMMA: each future is waited exactly once (`E1026`, also
    /// for a wait in a loop the MMA is not in), as `wgmma.wait_group n` with n the asynchronous
    /// WGMMAs issued after q in its scope (at most 7: fewer waits for more).
    pub(crate) fn check_mma_wait(&mut self, e: &ast::Expr, span: Span, out: &mut Vec<Stmt>) {
        let ExprKind::Ident(id) = &e.kind else { return };
        let Some(Symbol::MmaFuture(q)) = self.scopes.lookup(&id.name).cloned() else { return };
        let f = self.wg_futures[q].clone();
        if let Some(first) = f.waited {
            self.diags.push(
                Diagnostic::error(
                    "E1026",
                    e.span,
                    format!("wait observes future '{}' more than once.", f.name),
                )
                .with_label("waited again")
                .with_secondary(first, "first waited here")
                .with_help("wait for an asynchronous MMA exactly once (spec-tier3 §5.4)"),
            );
            return;
        }
        if f.loop_depth != self.loop_depth {
            self.diags.push(
                Diagnostic::error(
                    "E1026",
                    e.span,
                    format!("wait observes future '{}' more than once.", f.name),
                )
                .with_label("in a loop that the asynchronous MMA is not in: waited every iteration")
                .with_secondary(f.span, "the asynchronous MMA")
                .with_help("wait in the loop (or outside it) where the MMA is issued"),
            );
            self.wg_futures[q].waited = Some(e.span);
            return;
        }
        self.wg_futures[q].waited = Some(e.span);
        if let Some(st) = self.frag_states.get_mut(f.acc.frag.index()) {
            if st.pending == Some(q) {
                st.pending = None;
            }
        }
        let after = self.wg_asyncs.iter().filter(|(s, n)| *s == f.scope && *n > f.seq).count();
        let pending = u32::try_from(after.min(7)).unwrap_or(7);
        out.push(Stmt {
            kind: StmtKind::Mma(Box::new(MmaOp::WgWait { acc: f.acc.clone(), pending })),
            span,
        });
    }

    /// Every asynchronous WGMMA is waited before the function ends (`E1027`).
    pub(crate) fn finish_wg_futures(&mut self) {
        let missing: Vec<WgFuture> =
            self.wg_futures.iter().filter(|f| f.waited.is_none()).cloned().collect();
        for f in missing {
            self.diags.push(
                Diagnostic::error(
                    "E1027",
                    f.span,
                    format!("some asyncs are not explicitly waited: {}.", f.name),
                )
                .with_label("never waited")
                .with_help(
                    "name its future (`q = mma.row.row.async …;`) and `wait q;` before the \
                     accumulator is used and the function ends",
                ),
            );
        }
    }
}
