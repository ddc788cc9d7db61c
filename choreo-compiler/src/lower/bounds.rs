//! Static range analysis of element accesses: for every `x.at(i0, …)` of a kernel, per
//! dimension, whether `0 <= i < extent` is proven, must be checked at run time, or is provably
//! violated (a located error).
//!
//! Indices are put in a linear form over *atoms*: the indices of parallel levels and loops
//! (each with its range), symbolic dimensions and parameter extents (never negative), scalar
//! parameters and host locals, and host-computable subexpressions that are not linear (`cdiv(N,
//! 64)`, `n / 2`), kept whole and compared structurally. Immutable device locals are replaced
//! by their initial values. A side of a dimension is proven when its linear bound is
//! non-negative after replacing every index by the end of its range that minimises it, either
//! on its own or after subtracting one fact of an enclosing condition (`if (i < N)` gives
//! `N - i - 1 >= 0` in its then-branch, `while` conditions in their body). So
//! `i = p * 256 + t; if (i < N) out.at(i) = …` and `parallel p by N { x.at(p) }` are proven;
//! `parallel p by 16 { x.at(p) }` on `f32 [8] x` is an error (the access is reached for every
//! `p` in every launch); `x.at(p)` on `f32 [N] x` with `p` in `[0, 16)` is checked at run time.
//!
//! The analysis is exact arithmetic on mathematical integers: it only looks at signed index
//! expressions (`s32`, `s64`, bounded values), so unsigned wrap-around cannot fool it, and it
//! assumes signed index arithmetic does not overflow (undefined behaviour in C++ anyway).

use super::internal;
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::hir::visit::{self, Visitor, Walk};
use crate::hir::{
    AccessId, BinOp, BufferRef, Check, CheckKind, Dim, ElemIndex, ElemTy, Function, HExpr,
    HExprKind, LocalPlace, ParamId, ParamKind, Place, SlotIndex, Stmt, StmtKind, SymId, Ty, UnOp,
    VarId,
};
use crate::source::Span;
use std::collections::{BTreeMap, HashMap};

/// What lowering decided for one element access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessPlan {
    /// The buffer accessed.
    pub buffer: BufferRef,
    /// The access (`x.at(…)` or the assigned element).
    pub span: Span,
    /// Per dimension: which sides of `0 <= index < extent` are checked at run time (none:
    /// proven statically). For a flat access ([`hir::ElemIndex::Flat`]) one entry: the
    /// element offset against the buffer's element count.
    pub checks: Vec<DimCheck>,
    /// Whether the access is flat (through a view that reinterprets the layout).
    pub flat: bool,
    /// Conditions on host values under which every checked side of this access holds for
    /// every index the kernel can reach: one list per checked side, of alternatives (the
    /// side holds where one of them does). The host evaluates them before the launch and,
    /// where all hold, launches the kernel without this access's checks. `None` when some
    /// checked side has no such condition (an index from data, a non-linear index): then the
    /// access is always checked in the kernel.
    pub host_proof: Option<Vec<Vec<HostBound>>>,
}

impl AccessPlan {
    /// Whether some side of some dimension is checked at run time.
    pub fn guarded(&self) -> bool {
        self.checks.iter().any(|c| c.below || c.above)
    }
}

/// `constant + Σ coefficient · atom >= 0` over values the host knows before a launch.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostBound {
    /// The constant term.
    pub constant: i64,
    /// The atoms with their coefficients (none zero), ordered by atom.
    pub terms: Vec<(HostAtom, i64)>,
}

/// A value the host knows before a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HostAtom {
    /// A symbolic dimension.
    Sym(SymId),
    /// An anonymous extent of a parameter (`?`).
    Extent(ParamId, u32),
    /// A scalar parameter.
    Param(ParamId),
    /// An immutable host local.
    Local(VarId),
}

/// The run-time checks of one dimension of an access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DimCheck {
    /// `0 <= index` is not proven.
    pub below: bool,
    /// `index < extent` is not proven.
    pub above: bool,
}

/// A readable account of the bounds analysis of a file (`choreoc check --dump=bounds`): one
/// summary line, then one line per access that is checked at run time.
pub fn report(
    db: &crate::source::SourceDb,
    program: &crate::hir::Program,
    plan: &super::Plan,
) -> String {
    let mut total = 0;
    let mut checked = Vec::new();
    for (f, fp) in program.functions().zip(&plan.functions) {
        for a in &fp.accesses {
            total += 1;
            if !a.guarded() {
                continue;
            }
            let name = f.buffer_name(a.buffer);
            let dims: Vec<String> = a
                .checks
                .iter()
                .enumerate()
                .filter(|(_, c)| c.below || c.above)
                .map(|(d, c)| {
                    let sides = match (c.below, c.above) {
                        (true, true) => "0 <= i < extent",
                        (true, false) => "0 <= i",
                        _ => "i < extent",
                    };
                    if a.flat {
                        format!("element offset ({sides})")
                    } else {
                        format!("dimension {d} ({sides})")
                    }
                })
                .collect();
            let skipped = match &a.host_proof {
                Some(sides) => {
                    let sides: Vec<String> = sides
                        .iter()
                        .map(|alternatives| {
                            let any: Vec<String> =
                                alternatives.iter().map(|b| host_bound_text(f, b)).collect();
                            any.join(" or ")
                        })
                        .collect();
                    format!(
                        "; skipped when the host finds {} before the launch",
                        sides.join(" and ")
                    )
                }
                None => String::new(),
            };
            checked.push(format!(
                "  {}: '{name}' at {}: checked at run time: {}{skipped}\n",
                f.name,
                db.location(a.span),
                dims.join(", ")
            ));
        }
    }
    let mut out = format!(
        "{} element accesses: {} proven in bounds, {} checked at run time\n",
        total,
        total - checked.len(),
        checked.len()
    );
    for line in checked {
        out.push_str(&line);
    }
    out
}

/// `bound` in the source's terms, for the report: `|c|(0) - N >= 0`.
fn host_bound_text(f: &Function, bound: &HostBound) -> String {
    let mut text = String::new();
    // Positive terms first: `|c|(0) - N >= 0` reads better than `-N + |c|(0) >= 0`.
    let mut terms: Vec<&(HostAtom, i64)> = bound.terms.iter().collect();
    terms.sort_by_key(|(_, k)| *k < 0);
    for (i, (atom, k)) in terms.into_iter().enumerate() {
        let name = match *atom {
            HostAtom::Sym(s) => {
                f.sym_dims.get(s.index()).map_or("?", |d| d.name.as_str()).to_string()
            }
            HostAtom::Extent(p, d) => {
                format!("|{}|({d})", f.param(p).map_or("?", |p| p.name.as_str()))
            }
            HostAtom::Param(p) => f.param(p).map_or("?", |p| p.name.as_str()).to_string(),
            HostAtom::Local(v) => f.local(v).map_or("?", |l| l.name.as_str()).to_string(),
        };
        let sign = if *k < 0 {
            "-"
        } else if i == 0 {
            ""
        } else {
            "+"
        };
        let magnitude = k.unsigned_abs();
        let term = if magnitude == 1 { name } else { format!("{magnitude} * {name}") };
        text.push_str(&match (i, sign) {
            (0, "") => term,
            (0, _) => format!("-{term}"),
            _ => format!(" {sign} {term}"),
        });
    }
    match bound.constant {
        0 if !bound.terms.is_empty() => {}
        c if bound.terms.is_empty() => text = c.to_string(),
        c if c < 0 => text.push_str(&format!(" - {}", c.unsigned_abs())),
        c => text.push_str(&format!(" + {c}")),
    }
    format!("{text} >= 0")
}

/// The plans of every access of `f`, indexed by [`AccessId`]; `E0712` for accesses that are
/// out of bounds in every launch.
///
/// Also the spans of the event operands ([`crate::hir::EventSlot::span`]) whose index is
/// proven valid: a ring order `e.at(k)` with `k >= 0`, a fixed slot index in `[0, slots)`;
/// the backends select their slot without the run-time check (a trap).
pub(super) fn analyse(
    f: &Function,
    entry_checks: bool,
    diags: &mut Diagnostics,
) -> (Vec<AccessPlan>, std::collections::BTreeSet<Span>) {
    let mut a = Analysis {
        f,
        diags,
        plans: vec![None; f.access_count as usize],
        ranges: HashMap::new(),
        host_ranges: HashMap::new(),
        entry_facts: Vec::new(),
        inits: HashMap::new(),
        host_inits: HashMap::new(),
        facts: Vec::new(),
        derived: std::cell::RefCell::new(HashMap::new()),
        derived_below: std::cell::RefCell::new(HashMap::new()),
        quotients: std::cell::RefCell::new(HashMap::new()),
        conditional: 0,
        checks: entry_checks,
        proven_slots: std::collections::BTreeSet::new(),
        unproven_slots: std::collections::BTreeSet::new(),
    };
    a.entry_facts = a.positive_facts(&f.entry_checks);
    a.host_stmts(&f.body);
    let Analysis { plans, diags, proven_slots, .. } = a;
    let plans = plans
        .into_iter()
        .enumerate()
        .map(|(i, plan)| {
            plan.unwrap_or_else(|| {
                diags.push(internal(f.span, &format!("element access {i} is not in a kernel")));
                AccessPlan {
                    buffer: BufferRef::Param(ParamId(0)),
                    span: f.span,
                    checks: Vec::new(),
                    flat: false,
                    host_proof: None,
                }
            })
        })
        .collect();
    (plans, proven_slots)
}

// ---------------------------------------------------------------------------------------------
// Linear forms
// ---------------------------------------------------------------------------------------------

/// What a linear form is built of.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Atom {
    /// A parallel, `with` or loop index (with a range while it is in scope).
    Index(VarId),
    /// A device value that is not linear but has a range: `e / c` or `e % c` of a linear `e`
    /// and a positive constant `c`, by its structure.
    Derived(String),
    /// A symbolic dimension (never negative).
    Sym(SymId),
    /// An anonymous extent of a parameter (never negative).
    Extent(ParamId, u32),
    /// A scalar parameter.
    Param(ParamId),
    /// An immutable host local.
    Host(VarId),
    /// A host-computable expression that is not linear, by its structure.
    Opaque(String),
}

impl Atom {
    fn never_negative(&self) -> bool {
        matches!(self, Atom::Sym(_) | Atom::Extent(..))
    }
}

/// `c + Σ coefficient · atom` over mathematical integers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Lin {
    c: i128,
    terms: BTreeMap<Atom, i128>,
}

impl Lin {
    fn constant(c: i128) -> Lin {
        Lin { c, terms: BTreeMap::new() }
    }

    fn atom(a: Atom) -> Lin {
        Lin { c: 0, terms: BTreeMap::from([(a, 1)]) }
    }

    fn scaled(&self, k: i128) -> Option<Lin> {
        let mut out = Lin { c: self.c.checked_mul(k)?, terms: BTreeMap::new() };
        for (a, c) in &self.terms {
            let c = c.checked_mul(k)?;
            if c != 0 {
                out.terms.insert(a.clone(), c);
            }
        }
        Some(out)
    }

    fn plus(&self, other: &Lin) -> Option<Lin> {
        let mut out = self.clone();
        out.c = out.c.checked_add(other.c)?;
        for (a, c) in &other.terms {
            let entry = out.terms.entry(a.clone()).or_insert(0);
            *entry = entry.checked_add(*c)?;
            if *entry == 0 {
                out.terms.remove(a);
            }
        }
        Some(out)
    }

    fn minus(&self, other: &Lin) -> Option<Lin> {
        self.plus(&other.scaled(-1)?)
    }

    fn as_constant(&self) -> Option<i128> {
        self.terms.is_empty().then_some(self.c)
    }

    fn has_index(&self) -> bool {
        self.terms.keys().any(|a| matches!(a, Atom::Index(_) | Atom::Derived(_)))
    }
}

/// The range of an index atom: `lo <= v < hi`.
#[derive(Debug, Clone)]
struct Range {
    lo: Lin,
    hi: Lin,
    /// Whether every value of the range is taken in every launch (for errors, not proofs).
    exhaustive: bool,
}

// ---------------------------------------------------------------------------------------------
// The walk
// ---------------------------------------------------------------------------------------------

struct Analysis<'a, 'd> {
    f: &'a Function,
    diags: &'d mut Diagnostics,
    plans: Vec<Option<AccessPlan>>,
    ranges: HashMap<VarId, Range>,
    /// The ranges of host loop indices around the current statement (a kernel inside the loop
    /// sees one value of the range).
    host_ranges: HashMap<VarId, Range>,
    /// The facts that hold in every kernel: positive parallel bounds and extents, checked at
    /// function entry (only when the runtime checks are generated).
    entry_facts: Vec<Lin>,
    /// Whether the runtime checks (entry and launch checks) are generated.
    checks: bool,
    /// Immutable device locals with their initial values.
    inits: HashMap<VarId, &'a HExpr>,
    /// Immutable host locals with their initial values (for [`Analysis::nonneg`]).
    host_inits: HashMap<VarId, &'a HExpr>,
    /// Facts of the enclosing conditions, each `>= 0`.
    facts: Vec<Lin>,
    /// The numeric ranges `[lo, hi)` of the derived atoms met so far, by key.
    derived: std::cell::RefCell<HashMap<String, (i128, i128)>>,
    /// Derived atoms in `[0, bound)` for a symbolic `bound` (`k % S` of a non-negative `k` and
    /// an extent `S >= 1`), by expression key.
    derived_below: std::cell::RefCell<HashMap<String, Lin>>,
    /// Host-computable quotients `x / c` (opaque atoms) of a linear `x` by a positive constant
    /// `c`, by expression key: `c · (x / c) <= x` where `x >= 0` (the last block of a grid of
    /// `M / 128` blocks ends inside `M`).
    quotients: std::cell::RefCell<HashMap<String, (Lin, i128)>>,
    /// Enclosing contexts that may skip an access for some index values (branches, loops
    /// that may not run or may leave early).
    conditional: u32,
    /// The event operands whose slot index is proven valid (see [`analyse`]).
    proven_slots: std::collections::BTreeSet<Span>,
    /// The event operands met whose slot index is not proven.
    unproven_slots: std::collections::BTreeSet<Span>,
}

impl<'a> Analysis<'a, '_> {
    /// Host code: only the kernels matter.
    fn host_stmts(&mut self, stmts: &'a [Stmt]) {
        for s in stmts {
            match &s.kind {
                StmtKind::Parallel(tree) => {
                    self.ranges = self.host_ranges.clone();
                    self.inits.clear();
                    self.facts = self.entry_facts.clone();
                    let launch = self.positive_facts(&tree.launch_checks);
                    self.facts.extend(launch);
                    self.conditional = 0;
                    self.binder(&tree.block.vars, &tree.block.extents);
                    if let Some(c) = &tree.cluster {
                        self.binder(&c.vars, &c.extents);
                    }
                    self.stmts(&tree.body);
                    self.ranges.clear();
                }
                StmtKind::For { var, start, end, step, reset: _, unroll: _, body } => {
                    // A host loop around a launch: the kernel sees one index of its range.
                    let (lo, hi) = (self.lin(start, 0), self.lin(end, 0));
                    let saved = self.host_ranges.remove(var);
                    if let (Some(lo), Some(hi)) = (lo, hi) {
                        let exhaustive = *step == 1
                            && lo.as_constant().zip(hi.as_constant()).is_some_and(|(l, h)| h > l)
                            && !leaves_early(body);
                        self.host_ranges.insert(*var, Range { lo, hi, exhaustive });
                    }
                    self.host_stmts(body);
                    self.host_ranges.remove(var);
                    if let Some(r) = saved {
                        self.host_ranges.insert(*var, r);
                    }
                }
                StmtKind::Block(body) | StmtKind::While { body, .. } => self.host_stmts(body),
                StmtKind::If { then_body, else_body, .. } => {
                    self.host_stmts(then_body);
                    self.host_stmts(else_body);
                }
                StmtKind::Let { var, init: Some(init) } => {
                    if self.f.local(*var).is_some_and(|l| !l.mutable) {
                        self.host_inits.insert(*var, init);
                    }
                }
                StmtKind::Let { .. }
                | StmtKind::DeclBuffer { .. }
                | StmtKind::Assign { .. }
                | StmtKind::Break
                | StmtKind::Continue
                | StmtKind::Yield
                | StmtKind::Assert { .. }
                | StmtKind::Print { .. }
                | StmtKind::Return(_)
                | StmtKind::InnerParallel(_)
                | StmtKind::Check(_)
                | StmtKind::SyncGlobal
                | StmtKind::Barrier(_)
                | StmtKind::Fence(_)
                | StmtKind::Dma(_)
                | StmtKind::Wait { .. }
                | StmtKind::TmaStoreWait { .. }
                | StmtKind::RoleBarrier { .. }
                | StmtKind::Rotate { .. }
                | StmtKind::HostCopy { .. }
                | StmtKind::Eval(_)
                | StmtKind::Cpp(_)
                | StmtKind::Asm(_)
                | StmtKind::EventInit(_)
                | StmtKind::Trigger(_)
                | StmtKind::GlobalFlag { .. }
                | StmtKind::EventWait(_)
                | StmtKind::TriggerAfter(_)
                | StmtKind::NamedBarrier { .. }
                | StmtKind::SetMaxNReg { .. }
                | StmtKind::Mma(_) => {}
            }
        }
    }

    /// `value - 1 >= 0` for every `value > 0` among `checks`, which ran before the kernel
    /// (when the runtime checks are generated).
    fn positive_facts(&self, checks: &[Check]) -> Vec<Lin> {
        if !self.checks {
            return Vec::new();
        }
        checks
            .iter()
            .filter_map(|check| match &check.kind {
                CheckKind::Positive(value) => self.lin(value, 0)?.minus(&Lin::constant(1)),
                CheckKind::ParamExtent { .. }
                | CheckKind::SymbolConsistent { .. }
                | CheckKind::MaxThreads { .. }
                | CheckKind::MultipleOf { .. } => None,
            })
            .collect()
    }

    /// The indices of a parallel level: each takes every value of `[0, extent)`.
    fn binder(&mut self, vars: &[Option<VarId>], extents: &[Dim]) {
        for (v, d) in vars.iter().zip(extents) {
            if let (Some(v), Some(hi)) = (v, self.dim(d)) {
                self.ranges.insert(*v, Range { lo: Lin::constant(0), hi, exhaustive: true });
            }
        }
    }

    fn stmts(&mut self, stmts: &'a [Stmt]) {
        for s in stmts {
            self.stmt(s);
        }
    }

    /// Device code: every access is planned where it is, with the ranges and facts in scope.
    fn stmt(&mut self, s: &'a Stmt) {
        match &s.kind {
            StmtKind::Let { var, init } => {
                if let Some(e) = init {
                    self.expr(e);
                    if self.f.local(*var).is_some_and(|l| !l.mutable) {
                        self.inits.insert(*var, e);
                    }
                }
            }
            StmtKind::Assign { target, op: _, value } => {
                self.expr(value);
                if let Place::Elem { buffer, index, id } = target {
                    for i in index.exprs() {
                        self.expr(i);
                    }
                    self.access(*id, *buffer, index, s.span);
                }
            }
            StmtKind::Assert { cond, message: _ } => self.expr(cond),
            StmtKind::Block(body) => self.stmts(body),
            StmtKind::If { cond, then_body, else_body } => {
                self.expr(cond);
                self.branch(cond, true, then_body);
                self.branch(cond, false, else_body);
            }
            StmtKind::While { cond, body } => {
                self.expr(cond);
                self.branch(cond, true, body);
            }
            StmtKind::For { var, start, end, step, reset: _, unroll: _, body } => {
                self.expr(start);
                self.expr(end);
                let (lo, hi) = (self.lin(start, 0), self.lin(end, 0));
                let counts = lo
                    .as_ref()
                    .and_then(Lin::as_constant)
                    .zip(hi.as_ref().and_then(Lin::as_constant));
                // Every value is taken, and the body runs, when the loop is a fixed, non-empty
                // count of single steps that nothing leaves early.
                let exhaustive =
                    *step == 1 && counts.is_some_and(|(lo, hi)| hi > lo) && !leaves_early(body);
                let saved = self.ranges.remove(var);
                if let (Some(lo), Some(hi)) = (lo, hi) {
                    self.ranges.insert(*var, Range { lo, hi, exhaustive });
                }
                if !exhaustive {
                    self.conditional += 1;
                }
                self.stmts(body);
                if !exhaustive {
                    self.conditional -= 1;
                }
                self.ranges.remove(var);
                if let Some(r) = saved {
                    self.ranges.insert(*var, r);
                }
            }
            StmtKind::Print { newline: _, args } => {
                for a in args {
                    self.expr(a);
                }
            }
            StmtKind::InnerParallel(inner) => {
                self.binder(&inner.binder.vars, &inner.binder.extents);
                self.stmts(&inner.body);
            }
            StmtKind::Eval(e) => self.expr(e),
            StmtKind::NamedBarrier { sync: _, id, threads } => {
                self.expr(id);
                self.expr(threads);
            }
            StmtKind::SetMaxNReg { .. } => {}
            // The tile's first and last elements are planned like any read: the statement
            // runs only when both are inside the buffer (the view moves monotonically along
            // buffer coordinates, so every other element then is too).
            StmtKind::Mma(op) => {
                struct Exprs<'b>(Vec<&'b HExpr>);
                impl<'b> crate::hir::visit::Visitor<'b> for Exprs<'b> {
                    fn expr(&mut self, e: &'b HExpr) -> crate::hir::visit::Walk {
                        self.0.push(e);
                        crate::hir::visit::Walk::Skip
                    }
                }
                let mut top = Exprs(Vec::new());
                crate::hir::visit::walk_mma(&mut top, op);
                for e in top.0 {
                    self.expr(e);
                }
            }
            StmtKind::Asm(asm) => {
                for i in &asm.inputs {
                    self.expr(&i.value);
                }
                for o in &asm.outputs {
                    if let Place::Elem { buffer, index, id } = &o.place {
                        for i in index.exprs() {
                            self.expr(i);
                        }
                        self.access(*id, *buffer, index, s.span);
                    }
                }
            }
            StmtKind::Dma(dma) if dma.tma.is_some() => {
                // The copy engine moves the box: it reads zeros outside the tensor and drops
                // stores there (tier 3 §3.2), so only the coordinates are evaluated.
                if let Some(t) = &dma.tma {
                    for c in &t.coords {
                        self.expr(c);
                    }
                }
                if let StmtKind::Assign {
                    target: Place::Elem { buffer, index, id }, value, ..
                } = &dma.element.kind
                {
                    self.unchecked(*id, *buffer, index, s.span);
                    if let HExprKind::At { buffer, index, id } = &value.kind {
                        self.unchecked(*id, *buffer, index, s.span);
                    }
                }
            }
            StmtKind::Dma(dma) => {
                // The loop covers every point of the box (its iterations are shared by the
                // participants): each index takes every value of `[0, extent)`.
                let vars: Vec<Option<VarId>> = dma.indices.iter().copied().map(Some).collect();
                self.binder(&vars, &dma.extents);
                self.stmt(&dma.element);
                for v in &dma.indices {
                    self.ranges.remove(v);
                }
            }
            StmtKind::Trigger(slots) | StmtKind::EventWait(slots) => {
                for slot in slots {
                    self.expr(slot.index.expr());
                    self.event_slot(slot);
                }
            }
            StmtKind::TriggerAfter(t) => {
                self.expr(t.slot.index.expr());
                self.event_slot(&t.slot);
            }
            StmtKind::GlobalFlag { slot, .. } => self.expr(slot),
            StmtKind::Break
            | StmtKind::Continue
            | StmtKind::Yield
            | StmtKind::Barrier(_)
            | StmtKind::Fence(_)
            | StmtKind::SyncGlobal
            | StmtKind::Return(_)
            | StmtKind::Check(_)
            | StmtKind::EventInit(_)
            | StmtKind::DeclBuffer { .. }
            | StmtKind::Parallel(_)
            | StmtKind::Wait { .. }
            | StmtKind::TmaStoreWait { .. }
            | StmtKind::RoleBarrier { .. }
            | StmtKind::Rotate { .. }
            | StmtKind::HostCopy { .. }
            | StmtKind::Cpp(_) => {}
        }
    }

    /// Records an event operand whose slot index is proven valid: a ring order never
    /// negative, a fixed index inside the event's slots.
    fn event_slot(&mut self, slot: &'a crate::hir::EventSlot) {
        let proven = match &slot.index {
            SlotIndex::Order(k) => self.nonneg(k, 0),
            SlotIndex::Fixed(i) => {
                let Some(event) = self.f.events.get(slot.event.index()) else { return };
                let slots = Lin::constant(i128::from(event.slots()));
                self.sides_proven(i, Some(&slots), 0) == (true, true)
            }
        };
        // Operands that share a span (a macro's expansions) are proven only if all are.
        if proven && !self.unproven_slots.contains(&slot.span) {
            self.proven_slots.insert(slot.span);
        } else {
            self.proven_slots.remove(&slot.span);
            self.unproven_slots.insert(slot.span);
        }
    }

    /// A branch taken when `cond` is `positive`.
    fn branch(&mut self, cond: &'a HExpr, positive: bool, body: &'a [Stmt]) {
        let before = self.facts.len();
        self.facts_of(cond, positive);
        self.conditional += 1;
        self.stmts(body);
        self.conditional -= 1;
        self.facts.truncate(before);
    }

    /// Plans the accesses inside an expression (an index may itself read an element). The
    /// arms of `c ? a : b` and the right operands of `&&` and `||` are evaluated only when
    /// the condition says so: they are planned with its facts, as conditional code.
    fn expr(&mut self, e: &'a HExpr) {
        struct Accesses<'x, 'a, 'd>(&'x mut Analysis<'a, 'd>);
        impl<'a> Visitor<'a> for Accesses<'_, 'a, '_> {
            fn expr(&mut self, e: &'a HExpr) -> Walk {
                match &e.kind {
                    HExprKind::At { buffer, index, id }
                    | HExprKind::Atomic { buffer, index, id, .. } => {
                        self.0.access(*id, *buffer, index, e.span);
                        Walk::Continue
                    }
                    HExprKind::Ternary { cond, then_value, else_value } => {
                        self.0.expr(cond);
                        self.0.guarded_expr(cond, true, then_value);
                        self.0.guarded_expr(cond, false, else_value);
                        Walk::Skip
                    }
                    HExprKind::Binary { op: op @ (BinOp::And | BinOp::Or), lhs, rhs } => {
                        self.0.expr(lhs);
                        self.0.guarded_expr(lhs, *op == BinOp::And, rhs);
                        Walk::Skip
                    }
                    _ => Walk::Continue,
                }
            }
        }
        visit::walk_expr(&mut Accesses(self), e);
    }

    /// Plans the accesses of `e`, evaluated only when `cond` is `positive`.
    fn guarded_expr(&mut self, cond: &'a HExpr, positive: bool, e: &'a HExpr) {
        let before = self.facts.len();
        self.facts_of(cond, positive);
        self.conditional += 1;
        self.expr(e);
        self.conditional -= 1;
        self.facts.truncate(before);
    }

    /// Decides the checks of one access.
    fn access(&mut self, id: AccessId, buffer: BufferRef, index: &'a ElemIndex, span: Span) {
        let (dims, flat) = match index {
            ElemIndex::Coords(_) => (self.buffer_dims(buffer), false),
            ElemIndex::Flat(_) => {
                (vec![crate::hir::arith::dim_product(&self.buffer_dims(buffer), span)], true)
            }
        };
        let indices = index.exprs();
        let mut checks = Vec::with_capacity(indices.len());
        let mut host_proof = Some(Vec::new());
        for (d, (index, extent)) in indices.iter().zip(dims.iter()).enumerate() {
            let idx = self.lin(index, 0);
            let ext = self.dim(extent);
            let (low_ok, high_ok) = self.sides_proven(index, ext.as_ref(), 0);
            let (below, above) = (!low_ok, !high_ok);
            if (below || above) && self.conditional == 0 {
                if let (Some(i), Some(x)) = (&idx, ext.as_ref().and_then(Lin::as_constant)) {
                    self.report_if_always_out(i, x, (!flat).then_some(d), buffer, index.span);
                }
            }
            // What the host would have to find for each unproven side (`index >= 0`,
            // `extent - index - 1 >= 0`).
            let sides = [
                below.then(|| idx.clone()),
                above.then(|| {
                    let gap = ext.as_ref().zip(idx.as_ref()).and_then(|(x, i)| x.minus(i));
                    gap.and_then(|g| g.plus(&Lin::constant(-1)))
                }),
            ];
            for side in sides.into_iter().flatten() {
                let alternatives = side.map(|g| self.host_alternatives(&g)).unwrap_or_default();
                match (&mut host_proof, alternatives.is_empty()) {
                    (Some(proof), false) => proof.push(alternatives),
                    _ => host_proof = None,
                }
            }
            checks.push(DimCheck { below, above });
        }
        let host_proof = host_proof.filter(|p| !p.is_empty());
        match self.plans.get_mut(id.index()) {
            Some(slot) => *slot = Some(AccessPlan { buffer, span, checks, flat, host_proof }),
            None => self.diags.push(internal(span, "an element access numbered out of range")),
        }
    }

    /// An access that needs no check: the element loop of a TMA statement, which only
    /// describes what the copy engine does (it handles the tensor's edges itself).
    fn unchecked(&mut self, id: AccessId, buffer: BufferRef, index: &ElemIndex, span: Span) {
        let flat = matches!(index, ElemIndex::Flat(_));
        let checks = index.exprs().iter().map(|_| DimCheck { below: false, above: false });
        let plan = AccessPlan { buffer, span, checks: checks.collect(), flat, host_proof: None };
        match self.plans.get_mut(id.index()) {
            Some(slot) => *slot = Some(plan),
            None => self.diags.push(internal(span, "an element access numbered out of range")),
        }
    }

    /// Whether `0 <= index` and `index < extent` are proven (each side). A chosen index
    /// `c ? a : b` is proven arm by arm, each under what its condition says.
    fn sides_proven(&mut self, index: &HExpr, extent: Option<&Lin>, depth: u32) -> (bool, bool) {
        match &index.kind {
            HExprKind::Ternary { cond, then_value, else_value } if depth < 8 => {
                let before = self.facts.len();
                self.facts_of(cond, true);
                let (a_low, a_high) = self.sides_proven(then_value, extent, depth + 1);
                self.facts.truncate(before);
                self.facts_of(cond, false);
                let (b_low, b_high) = self.sides_proven(else_value, extent, depth + 1);
                self.facts.truncate(before);
                return (a_low && b_low, a_high && b_high);
            }
            HExprKind::Cast { to, operand, .. }
                if depth < 8
                    && matches!(to, ElemTy::S32 | ElemTy::S64)
                    && matches!(operand.kind, HExprKind::Ternary { .. })
                    && signed(&operand.ty)
                    && operand.ty.scalar().unwrap_or(ElemTy::S32).int_bits() <= to.int_bits() =>
            {
                return self.sides_proven(operand, extent, depth + 1);
            }
            _ => {}
        }
        let Some(i) = self.lin(index, 0) else { return (false, false) };
        let low = self.proves_nonneg(&i);
        let high = extent
            .and_then(|x| x.minus(&i))
            .and_then(|g| g.plus(&Lin::constant(-1)))
            .is_some_and(|g| self.proves_nonneg(&g));
        (low, high)
    }

    /// `E0712` when an index reached for every value of its range in every launch leaves
    /// `[0, extent)`.
    fn report_if_always_out(
        &mut self,
        index: &Lin,
        extent: i128,
        dim: Option<usize>,
        buffer: BufferRef,
        span: Span,
    ) {
        let (Some(min), Some(max)) =
            (self.exact_bound(index, false), self.exact_bound(index, true))
        else {
            return;
        };
        if min >= 0 && max < extent {
            return;
        }
        let name = self.f.buffer_name(buffer);
        let message = match dim {
            Some(dim) => format!(
                "index out of bounds: the index of dimension {dim} of '{name}' takes the values \
                 {min} to {max}, but the extent is {extent}"
            ),
            None => format!(
                "index out of bounds: the element offset in '{name}' (through a reshaping view) \
                 takes the values {min} to {max}, but '{name}' has {}",
                crate::diagnostics::count(extent as usize, "element")
            ),
        };
        self.diags.push(
            Diagnostic::error("E0712", span, message)
                .with_label(format!("out of bounds for some values (valid: 0 to {})", extent - 1))
                .with_help(
                    "guard the access (e.g. `if (i < extent)`) or change the parallel bounds or \
                 the loop so that every index is in range",
                ),
        );
    }

    /// The smallest (`max: false`) or largest value `index` takes, when every index in it
    /// ranges over constants and takes all of them.
    fn exact_bound(&self, index: &Lin, max: bool) -> Option<i128> {
        let mut total = index.c;
        for (atom, c) in &index.terms {
            let Atom::Index(v) = atom else { return None };
            let r = self.ranges.get(v).filter(|r| r.exhaustive)?;
            let (lo, hi) = (r.lo.as_constant()?, r.hi.as_constant()?);
            if hi <= lo {
                return None;
            }
            let end = if (*c > 0) == max { hi - 1 } else { lo };
            total = total.checked_add(c.checked_mul(end)?)?;
        }
        Some(total)
    }

    /// The smallest value of `g` over the ranges of its indices, when they are constants.
    fn numeric_min(&self, g: &Lin) -> Option<i128> {
        self.numeric_end(g, false)
    }

    /// The largest value of `g` over the ranges of its indices, when they are constants.
    fn numeric_max(&self, g: &Lin) -> Option<i128> {
        self.numeric_end(g, true)
    }

    fn numeric_end(&self, g: &Lin, max: bool) -> Option<i128> {
        let mut total = g.c;
        for (atom, c) in &g.terms {
            let (lo, hi) = match atom {
                Atom::Index(v) => {
                    // Only the end this term contributes must be a constant (a loop from 0 to
                    // a run-time extent still starts at 0); a range known to be empty has no
                    // values at all, so it bounds nothing.
                    let r = self.ranges.get(v)?;
                    let (lo, hi) = (r.lo.as_constant(), r.hi.as_constant());
                    if let (Some(lo), Some(hi)) = (lo, hi) {
                        (lo, hi)
                    } else if (*c > 0) == max {
                        let hi = hi?;
                        (i128::MIN / 4, hi)
                    } else {
                        let lo = lo?;
                        (lo, i128::MAX / 4)
                    }
                }
                Atom::Derived(k) => self.derived.borrow().get(k).copied()?,
                // Extents and symbols are never negative: a lower bound of 0.
                a if a.never_negative() && (*c > 0) != max => (0, 1),
                _ => return None,
            };
            if hi <= lo {
                return None;
            }
            let end = if (*c > 0) == max { hi - 1 } else { lo };
            total = total.checked_add(c.checked_mul(end)?)?;
        }
        Some(total)
    }

    // -- proofs ---------------------------------------------------------------------------

    /// Whether `g >= 0` holds wherever the code runs.
    fn proves_nonneg(&self, g: &Lin) -> bool {
        self.lower_bound_nonneg(g)
            || self.facts.iter().any(|f| {
                fact_multiples(g, f).into_iter().any(|k| {
                    f.scaled(k)
                        .and_then(|kf| g.minus(&kf))
                        .is_some_and(|d| self.lower_bound_nonneg(&d))
                })
            })
            || self
                .minimised(g)
                .and_then(|m| self.quotients_bounded(&m))
                .is_some_and(|r| self.lower_bound_nonneg(&r))
    }

    /// A lower bound of `g` without the quotients it subtracts: `-a · (x / c)` with `c`
    /// dividing `a` is at least `-(a / c) · x` when `x >= 0` (floor division of a non-negative
    /// value). `None` when `g` has no such term.
    fn quotients_bounded(&self, g: &Lin) -> Option<Lin> {
        let quotients = self.quotients.borrow();
        let mut out = g.clone();
        let mut changed = false;
        for (atom, a) in &g.terms {
            let Atom::Opaque(k) = atom else { continue };
            let Some((x, c)) = quotients.get(k) else { continue };
            if *a >= 0 || a % c != 0 || !self.lower_bound_nonneg(x) {
                continue;
            }
            let term = Lin::atom(atom.clone()).scaled(*a)?;
            out = out.minus(&term)?.plus(&x.scaled(a / c)?)?;
            changed = true;
        }
        changed.then_some(out)
    }

    /// Whether `g >= 0` follows from the ranges of its indices and the signs of its atoms.
    fn lower_bound_nonneg(&self, g: &Lin) -> bool {
        self.minimised(g)
            .is_some_and(|g| g.c >= 0 && g.terms.iter().all(|(a, c)| *c >= 0 && a.never_negative()))
    }

    /// The conditions on host values under which `g >= 0` holds wherever the code runs: the
    /// smallest value of `g` over the ranges of its indices, on its own or after subtracting
    /// one fact of an enclosing condition, where that leaves only atoms the host knows. At
    /// most four, without repeats; empty when there is none.
    fn host_alternatives(&self, g: &Lin) -> Vec<HostBound> {
        let mut out: Vec<HostBound> = Vec::new();
        let candidates =
            std::iter::once(Some(g.clone())).chain(self.facts.iter().map(|f| g.minus(f)));
        for candidate in candidates.flatten() {
            let Some(bound) = self.minimised(&candidate).and_then(|m| host_bound(&m)) else {
                continue;
            };
            if !out.contains(&bound) {
                out.push(bound);
            }
            if out.len() == 4 {
                break;
            }
        }
        out
    }

    /// `g` with every index replaced by the end of its range that minimises it (and every
    /// derived atom by its smallest value); `None` when some index or derived atom has no
    /// usable range.
    fn minimised(&self, g: &Lin) -> Option<Lin> {
        let mut g = g.clone();
        // Index ranges may mention enclosing indices (a loop from `p * 4`): a few rounds.
        for _ in 0..8 {
            if !g.has_index() {
                break;
            }
            let mut next = Lin::constant(g.c);
            for (atom, c) in &g.terms {
                let term = match atom {
                    Atom::Derived(k) => {
                        if let Some((lo, hi)) = self.derived.borrow().get(k).copied() {
                            let end = if *c > 0 { lo } else { hi - 1 };
                            Lin::constant(end).scaled(*c)
                        } else if let Some(bound) = self.derived_below.borrow().get(k).cloned() {
                            if *c > 0 {
                                Some(Lin::constant(0))
                            } else {
                                bound.plus(&Lin::constant(-1)).and_then(|end| end.scaled(*c))
                            }
                        } else {
                            return None;
                        }
                    }
                    Atom::Index(v) => {
                        let r = self.ranges.get(v)?;
                        let end =
                            if *c > 0 { r.lo.clone() } else { r.hi.plus(&Lin::constant(-1))? };
                        end.scaled(*c)
                    }
                    other => Lin::atom(other.clone()).scaled(*c),
                };
                next = next.plus(&term?)?;
            }
            g = next;
        }
        (!g.has_index()).then_some(g)
    }

    /// The facts `cond == positive` gives, each `>= 0`.
    fn facts_of(&mut self, cond: &HExpr, positive: bool) {
        match &cond.kind {
            HExprKind::Unary { op: UnOp::Not, operand } => self.facts_of(operand, !positive),
            HExprKind::Binary { op: BinOp::And, lhs, rhs } if positive => {
                self.facts_of(lhs, true);
                self.facts_of(rhs, true);
            }
            HExprKind::Binary { op: BinOp::Or, lhs, rhs } if !positive => {
                self.facts_of(lhs, false);
                self.facts_of(rhs, false);
            }
            HExprKind::Binary { op, lhs, rhs } => {
                let (Some(a), Some(b)) = (self.lin(lhs, 0), self.lin(rhs, 0)) else { return };
                // `a < b` ⇔ `b - a - 1 >= 0`, `a <= b` ⇔ `b - a >= 0`; a negated comparison is
                // the opposite one.
                let op = if positive { Some(*op) } else { negated(*op) };
                let one = Lin::constant(1);
                let facts: Vec<Option<Lin>> = match op {
                    Some(BinOp::Lt) => vec![b.minus(&a).and_then(|d| d.minus(&one))],
                    Some(BinOp::Le) => vec![b.minus(&a)],
                    Some(BinOp::Gt) => vec![a.minus(&b).and_then(|d| d.minus(&one))],
                    Some(BinOp::Ge) => vec![a.minus(&b)],
                    Some(BinOp::Eq) => vec![a.minus(&b), b.minus(&a)],
                    _ => Vec::new(),
                };
                self.facts.extend(facts.into_iter().flatten());
            }
            _ => {}
        }
    }

    // -- linear forms of expressions ------------------------------------------------------

    fn dim(&self, d: &Dim) -> Option<Lin> {
        match d {
            Dim::Const(c) => Some(Lin::constant(i128::from(*c))),
            Dim::Sym(s) => Some(Lin::atom(Atom::Sym(*s))),
            Dim::Dynamic { param, dim } => Some(Lin::atom(Atom::Extent(*param, *dim))),
            Dim::Expr(e) => self.lin(e, 0),
        }
    }

    fn buffer_dims(&self, b: BufferRef) -> Vec<Dim> {
        match b {
            BufferRef::Param(p) => self.f.param(p).map(|p| p.dims.clone()).unwrap_or_default(),
            BufferRef::Local(v) => match self.f.local(v).map(|l| &l.ty) {
                Some(Ty::Spanned(t)) => t.dims.clone(),
                _ => Vec::new(),
            },
        }
    }

    /// The linear form of a signed integer expression, or `None` when it has none the analysis
    /// can use (unsigned arithmetic, data, mutable values, non-linear device values).
    fn lin(&self, e: &HExpr, depth: u32) -> Option<Lin> {
        if depth > 32 {
            return None;
        }
        if let Some(range) = masked_range(e) {
            // Whatever the operand (data included), the result lies in a known range.
            let k = key(e);
            self.derived.borrow_mut().insert(k.clone(), range);
            return Some(Lin::atom(Atom::Derived(k)));
        }
        if !signed(&e.ty) && !matches!(e.kind, HExprKind::Int(_)) {
            return None;
        }
        let host = || self.host_computable(e, 0).then(|| Lin::atom(Atom::Opaque(key(e))));
        match &e.kind {
            HExprKind::Int(v) => Some(Lin::constant(*v)),
            HExprKind::Var(v) => {
                if self.ranges.contains_key(v) {
                    return Some(Lin::atom(Atom::Index(*v)));
                }
                let local = self.f.local(*v)?;
                match local.place {
                    LocalPlace::HostScalar if !local.mutable => Some(Lin::atom(Atom::Host(*v))),
                    LocalPlace::DeviceScalar if !local.mutable => {
                        self.lin(self.inits.get(v)?, depth + 1)
                    }
                    _ => None,
                }
            }
            HExprKind::Param(p) => match self.f.param(*p)?.kind {
                ParamKind::Scalar(_) => Some(Lin::atom(Atom::Param(*p))),
                _ => None,
            },
            HExprKind::SymDim(s) => Some(Lin::atom(Atom::Sym(*s))),
            HExprKind::ParamExtent { param, dim } => Some(Lin::atom(Atom::Extent(*param, *dim))),
            HExprKind::Unary { op: UnOp::Neg, operand } => self.lin(operand, depth + 1)?.scaled(-1),
            HExprKind::Binary { op: BinOp::Add, lhs, rhs } => {
                self.lin(lhs, depth + 1)?.plus(&self.lin(rhs, depth + 1)?)
            }
            HExprKind::Binary { op: BinOp::Sub, lhs, rhs } => {
                self.lin(lhs, depth + 1)?.minus(&self.lin(rhs, depth + 1)?)
            }
            HExprKind::Binary { op: BinOp::Mul, lhs, rhs } => {
                let (a, b) = (self.lin(lhs, depth + 1), self.lin(rhs, depth + 1));
                match (a.as_ref().and_then(Lin::as_constant), b.as_ref().and_then(Lin::as_constant))
                {
                    (Some(k), _) => b?.scaled(k),
                    (_, Some(k)) => a?.scaled(k),
                    _ => host(),
                }
            }
            HExprKind::Binary { op: op @ (BinOp::Div | BinOp::Rem), lhs, rhs } => {
                if self.host_computable(e, 0) {
                    // A host value never negative modulo a positive constant (`(K / 32 + 1) %
                    // 2`, the slot of a pipeline's last step): `[0, c)`, which proves the
                    // slot's accesses where an opaque host value would leave them checked.
                    if *op == BinOp::Rem {
                        let divisor = self.lin(rhs, depth + 1).and_then(|d| d.as_constant());
                        if let Some(c) = divisor.filter(|c| *c > 0) {
                            if self.nonneg(lhs, depth + 1) {
                                let k = key(e);
                                self.derived.borrow_mut().insert(k.clone(), (0, c));
                                return Some(Lin::atom(Atom::Derived(k)));
                            }
                        }
                    }
                    if *op == BinOp::Div {
                        let divisor = self.lin(rhs, depth + 1).and_then(|d| d.as_constant());
                        if let (Some(c), Some(x)) = (divisor, self.lin(lhs, depth + 1)) {
                            if c > 0 {
                                self.quotients.borrow_mut().insert(key(e), (x, c));
                            }
                        }
                    }
                    return host();
                }
                // A non-negative value modulo an extent of at least 1 (`k % S`): an atom in
                // `[0, S)`.
                let divisor = self.lin(rhs, depth + 1)?;
                if *op == BinOp::Rem && divisor.as_constant().is_none() {
                    let dividend = self.lin(lhs, depth + 1)?;
                    let positive = divisor.plus(&Lin::constant(-1));
                    if !self.proves_nonneg(&dividend)
                        || !positive.is_some_and(|g| self.proves_nonneg(&g))
                    {
                        return None;
                    }
                    let k = key(e);
                    self.derived_below.borrow_mut().insert(k.clone(), divisor);
                    return Some(Lin::atom(Atom::Derived(k)));
                }
                // A device value divided by a positive constant: an atom with a range.
                let divisor = divisor.as_constant().filter(|c| *c > 0)?;
                let dividend = self.lin(lhs, depth + 1);
                let ends = dividend.as_ref().and_then(|d| {
                    Some((self.numeric_min(d)?, self.numeric_max(d))).filter(|(lo, _)| *lo >= 0)
                });
                let Some((lo, hi)) = ends else {
                    // `x % c` of a value proven non-negative however it is computed (`(it *
                    // (K / 64) + k) % 4`, a ring slot of a product of loop indices): `[0, c)`.
                    if *op != BinOp::Rem || !self.nonneg(lhs, depth + 1) {
                        return None;
                    }
                    let k = key(e);
                    self.derived.borrow_mut().insert(k.clone(), (0, divisor));
                    return Some(Lin::atom(Atom::Derived(k)));
                };
                let range = match op {
                    BinOp::Div => (lo / divisor, hi.map(|hi| hi / divisor + 1)),
                    _ => (0, Some(hi.map_or(divisor, |hi| (hi + 1).min(divisor)))),
                };
                let (lo, hi) = (range.0, range.1?);
                let k = key(e);
                self.derived.borrow_mut().insert(k.clone(), (lo, hi));
                Some(Lin::atom(Atom::Derived(k)))
            }
            HExprKind::Cast { to, operand, .. }
                if matches!(to, ElemTy::S32 | ElemTy::S64) && signed(&operand.ty) =>
            {
                // Widening (or same-width) between signed types keeps the value.
                let from = operand.ty.scalar().unwrap_or(ElemTy::S32);
                if from.int_bits() <= to.int_bits() { self.lin(operand, depth + 1) } else { host() }
            }
            _ => host(),
        }
    }

    /// Whether the signed integer `e` is never negative, by its structure: a linear form proven
    /// non-negative, or sums, products, quotients and remainders of such values (by positive
    /// divisors), immutable (device or host) locals initialised with one, and choices between
    /// two. Like the rest
    /// of the analysis it assumes signed arithmetic does not overflow.
    fn nonneg(&self, e: &HExpr, depth: u32) -> bool {
        if depth > 32 || !signed(&e.ty) && !matches!(e.kind, HExprKind::Int(_)) {
            return false;
        }
        if self.lin(e, depth + 1).is_some_and(|l| self.proves_nonneg(&l)) {
            return true;
        }
        let sub = |x: &HExpr| self.nonneg(x, depth + 1);
        // A positive divisor: at least 1.
        let positive = |x: &HExpr| {
            self.lin(x, depth + 1)
                .and_then(|l| l.plus(&Lin::constant(-1)))
                .is_some_and(|g| self.proves_nonneg(&g))
        };
        match &e.kind {
            HExprKind::Binary { op: BinOp::Add | BinOp::Mul, lhs, rhs } => sub(lhs) && sub(rhs),
            HExprKind::Binary { op: BinOp::Div | BinOp::Rem, lhs, rhs } => {
                sub(lhs) && positive(rhs)
            }
            HExprKind::Cdiv(lhs, rhs) => sub(lhs) && positive(rhs),
            HExprKind::Ternary { then_value, else_value, .. } => sub(then_value) && sub(else_value),
            HExprKind::Cast { to, operand, .. }
                if matches!(to, ElemTy::S32 | ElemTy::S64) && signed(&operand.ty) =>
            {
                let from = operand.ty.scalar().unwrap_or(ElemTy::S32);
                from.int_bits() <= to.int_bits() && sub(operand)
            }
            HExprKind::Var(v) if !self.ranges.contains_key(v) => {
                self.f.local(*v).is_some_and(|l| {
                    let init = match l.place {
                        LocalPlace::DeviceScalar => self.inits.get(v),
                        LocalPlace::HostScalar => self.host_inits.get(v),
                        _ => None,
                    };
                    !l.mutable && init.is_some_and(|init| sub(init))
                })
            }
            _ => false,
        }
    }

    /// Whether `e` can be computed on the host before the launch (no device values, no data).
    fn host_computable(&self, e: &HExpr, depth: u32) -> bool {
        if depth > 32 {
            return false;
        }
        let sub = |x: &HExpr| self.host_computable(x, depth + 1);
        match &e.kind {
            HExprKind::Int(_) | HExprKind::Float(_) | HExprKind::Bool(_) => true,
            HExprKind::Var(v) => {
                !self.ranges.contains_key(v)
                    && self
                        .f
                        .local(*v)
                        .is_some_and(|l| l.place == LocalPlace::HostScalar && !l.mutable)
            }
            HExprKind::Param(p) => {
                self.f.param(*p).is_some_and(|p| matches!(p.kind, ParamKind::Scalar(_)))
            }
            HExprKind::SymDim(_) | HExprKind::ParamExtent { .. } => true,
            HExprKind::Unary { operand, .. } | HExprKind::Cast { operand, .. } => sub(operand),
            HExprKind::Binary { lhs, rhs, .. } | HExprKind::Cdiv(lhs, rhs) => sub(lhs) && sub(rhs),
            HExprKind::Ternary { cond, then_value, else_value } => {
                sub(cond) && sub(then_value) && sub(else_value)
            }
            HExprKind::Math { args, .. } => args.iter().all(sub),
            HExprKind::At { .. }
            | HExprKind::Atomic { .. }
            | HExprKind::Call { .. }
            | HExprKind::Address { .. }
            | HExprKind::Null
            | HExprKind::Select { .. }
            | HExprKind::CppCast { .. }
            | HExprKind::Str(_)
            | HExprKind::Ituple(_)
            | HExprKind::Mdspan(_)
            | HExprKind::Error => false,
        }
    }
}

/// The range `[lo, hi)` of an integer that is reduced by a constant whatever its operand is:
/// `x % c` of an unsigned `x` and `x & m` of any integer `x`, for constants `c > 0`, `m >= 0`
/// (a histogram bin `bins.at(v % 64)`, a ring slot `ring.at(k & 7)`).
fn masked_range(e: &HExpr) -> Option<(i128, i128)> {
    let HExprKind::Binary { op, lhs, rhs } = &e.kind else { return None };
    let constant = match rhs.kind {
        HExprKind::Int(c) => c,
        _ => return None,
    };
    let integer = |t: &Ty| t.is_integer();
    if !integer(&lhs.ty) || !integer(&e.ty) {
        return None;
    }
    let unsigned = lhs.ty.scalar().is_some_and(|t| t.is_int() && !t.is_signed_int());
    match op {
        BinOp::Rem if unsigned && constant > 0 => Some((0, constant)),
        BinOp::BitAnd if constant >= 0 => Some((0, constant + 1)),
        _ => None,
    }
}

/// `g >= 0` as a [`HostBound`], when `g` is over atoms the host knows, its numbers fit
/// comfortably in 64 bits (so the host's `long long` arithmetic cannot overflow), and it is
/// not a constant (a constant is proven or refuted, not a condition).
fn host_bound(g: &Lin) -> Option<HostBound> {
    const LIMIT: i128 = 1 << 30;
    if g.terms.is_empty() || g.c.abs() >= 1 << 62 {
        return None;
    }
    let mut terms = Vec::with_capacity(g.terms.len());
    for (atom, k) in &g.terms {
        let atom = match atom {
            Atom::Sym(s) => HostAtom::Sym(*s),
            Atom::Extent(p, d) => HostAtom::Extent(*p, *d),
            Atom::Param(p) => HostAtom::Param(*p),
            Atom::Host(v) => HostAtom::Local(*v),
            Atom::Index(_) | Atom::Derived(_) | Atom::Opaque(_) => return None,
        };
        if k.abs() >= LIMIT {
            return None;
        }
        terms.push((atom, *k as i64));
    }
    terms.sort();
    Some(HostBound { constant: g.c as i64, terms })
}

/// The positive multiples `k` worth subtracting of a fact `f >= 0` from `g` (then `g >= k·f`
/// proves `g >= 0`): 1, and `cg / cf` for each atom `g` and `f` share whose coefficients have
/// the same sign and divide (`64·w - 64 >= 0` from `w - 1 >= 0` takes `k = 64`).
fn fact_multiples(g: &Lin, f: &Lin) -> Vec<i128> {
    let mut out = vec![1];
    for (atom, cf) in &f.terms {
        let Some(cg) = g.terms.get(atom) else { continue };
        if *cf != 0 && cg % cf == 0 && cg / cf > 1 && !out.contains(&(cg / cf)) {
            out.push(cg / cf);
        }
    }
    out
}

/// The comparison that holds when `op` does not.
fn negated(op: BinOp) -> Option<BinOp> {
    Some(match op {
        BinOp::Lt => BinOp::Ge,
        BinOp::Le => BinOp::Gt,
        BinOp::Gt => BinOp::Le,
        BinOp::Ge => BinOp::Lt,
        _ => return None,
    })
}

/// Whether a value of this type is a signed integer the analysis can reason about.
fn signed(ty: &Ty) -> bool {
    matches!(ty, Ty::BoundedInt | Ty::Scalar(ElemTy::S32 | ElemTy::S64))
}

/// Whether `body` (not counting nested loops) may leave its loop early.
fn leaves_early(body: &[Stmt]) -> bool {
    body.iter().any(|s| match &s.kind {
        // A failed assertion leaves the call (host) or the kernel (device).
        StmtKind::Break
        | StmtKind::Continue
        | StmtKind::Return(_)
        | StmtKind::Yield
        | StmtKind::Assert { .. } => true,
        StmtKind::Block(b) => leaves_early(b),
        StmtKind::If { then_body, else_body, .. } => {
            leaves_early(then_body) || leaves_early(else_body)
        }
        StmtKind::While { .. } | StmtKind::For { .. } => false,
        StmtKind::Let { .. }
        | StmtKind::DeclBuffer { .. }
        | StmtKind::Assign { .. }
        | StmtKind::Print { .. }
        | StmtKind::Parallel(_)
        | StmtKind::InnerParallel(_)
        | StmtKind::Check(_)
        | StmtKind::SyncGlobal
        | StmtKind::Barrier(_)
        | StmtKind::Fence(_)
        | StmtKind::Dma(_)
        | StmtKind::Wait { .. }
        | StmtKind::TmaStoreWait { .. }
        | StmtKind::RoleBarrier { .. }
        | StmtKind::Rotate { .. }
        | StmtKind::HostCopy { .. }
        | StmtKind::Eval(_)
        | StmtKind::Cpp(_)
        | StmtKind::Asm(_)
        | StmtKind::EventInit(_)
        | StmtKind::Trigger(_)
        | StmtKind::GlobalFlag { .. }
        | StmtKind::EventWait(_)
        | StmtKind::TriggerAfter(_)
        | StmtKind::NamedBarrier { .. }
        | StmtKind::SetMaxNReg { .. }
        | StmtKind::Mma(_) => false,
    })
}

/// A structural key of a host-computable expression (no spans), so that two writings of
/// `cdiv(N, 64)` are the same atom.
fn key(e: &HExpr) -> String {
    let k = |x: &HExpr| key(x);
    match &e.kind {
        HExprKind::Int(v) => v.to_string(),
        HExprKind::Float(v) => format!("{v:?}"),
        HExprKind::Bool(b) => b.to_string(),
        HExprKind::Str(s) => format!("{s:?}"),
        HExprKind::Var(v) => format!("v{}", v.0),
        HExprKind::Param(p) => format!("p{}", p.0),
        HExprKind::SymDim(s) => format!("s{}", s.0),
        HExprKind::ParamExtent { param, dim } => format!("e{}.{dim}", param.0),
        HExprKind::Unary { op, operand } => format!("({}{})", op.as_str(), k(operand)),
        HExprKind::Binary { op, lhs, rhs } => format!("({} {} {})", k(lhs), op.as_str(), k(rhs)),
        HExprKind::Ternary { cond, then_value, else_value } => {
            format!("({} ? {} : {})", k(cond), k(then_value), k(else_value))
        }
        HExprKind::Cdiv(a, b) => format!("cdiv({}, {})", k(a), k(b)),
        HExprKind::At { id, .. } | HExprKind::Atomic { id, .. } => format!("at{}", id.0),
        HExprKind::Address { .. } => "address".to_string(),
        HExprKind::Null => "null".to_string(),
        HExprKind::Select { index, .. } => format!("select({})", k(index)),
        HExprKind::Call { callee, .. } => format!("call {callee}"),
        HExprKind::Math { func, args } => {
            format!("{}({})", func.as_str(), args.iter().map(k).collect::<Vec<_>>().join(", "))
        }
        HExprKind::Cast { to, operand, .. } => format!("({})({})", to.as_str(), k(operand)),
        HExprKind::CppCast { cpp_type, operand } => format!("({cpp_type})({})", k(operand)),
        HExprKind::Ituple(items) => {
            format!("{{{}}}", items.iter().map(k).collect::<Vec<_>>().join(", "))
        }
        HExprKind::Mdspan(_) => "mdspan".to_string(),
        HExprKind::Error => "error".to_string(),
    }
}
