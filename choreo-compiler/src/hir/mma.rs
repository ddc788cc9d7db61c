//! MMA statements and fragments in the checked program (spec-tier3 §5, §6).
//!
//! A fragment is a register tile distributed over the threads of the warp (warpgroup) that
//! executes the statements naming it. Sema gives every fragment an entry of
//! [`super::Function::frags`]: its element type, its role in the `mma.<a>.<b>` that uses it
//! (A, B, accumulator C, sparse metadata E), the selected family and configuration, and, for
//! A and B, whether the operand is K-major. The role and configuration are only known at the
//! execution statement, after the `mma.load` or `mma.fill` that declared the fragment, so the
//! table is completed when the function has been checked and the backends read it then.
//!
//! Memory tiles are [`MmaTile`]s: the address of the view's first element and the element
//! strides of its two dimensions (the backends' helpers index the tile themselves), plus the
//! accesses of its first and last element, which `lower::bounds` proves or checks (the view
//! moves along buffer coordinates monotonically, so those two decide whether every element is
//! inside the buffer). WGMMA's direct shared operands are tiles too ([`WgOperand`], with the
//! swizzle of the copy that filled them); its executions ([`MmaOp::WgExec`]) carry the K split.

use super::{AssignOp, ElemTy, HExpr, Storage};
use crate::source::Span;
use crate::target::mma::{MmaConfig, MmaFamily};

/// Index of a fragment in [`super::Function::frags`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FragId(pub u32);

impl FragId {
    /// The index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The role of a fragment in the MMA that uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MmaRole {
    /// Operand A (`M×K`).
    A,
    /// Operand B (`K×N`).
    B,
    /// The accumulator (`M×N`), filled or loaded.
    C,
    /// Sparse metadata.
    E,
}

impl MmaRole {
    /// The role's name in diagnostics.
    pub fn name(self) -> &'static str {
        match self {
            MmaRole::A => "operand A",
            MmaRole::B => "operand B",
            MmaRole::C => "accumulator",
            MmaRole::E => "sparse metadata",
        }
    }
}

/// How a fragment's elements are distributed over the threads (spec-tier3 §6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FragLayout {
    /// `mma.sync` m16n8 / m8n8 accumulators: row `t/4 + 8(r/2)`, column `2(t%4) + r%2`.
    SyncAcc,
    /// `mma.sync` operand registers (PTX's A/B fragment layouts).
    SyncOperand,
    /// WMMA fragments: opaque.
    Wmma,
    /// WGMMA accumulators (64×N over 128 threads).
    WgmmaAcc,
}

/// The execution an accumulator takes part in: family and configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmaSelected {
    /// The instruction family.
    pub family: MmaFamily,
    /// The configuration (types and M×N×K).
    pub config: MmaConfig,
}

/// A fragment (one local, or an array of them: `frag acc[2][3] {0.0};`).
#[derive(Debug, Clone, PartialEq)]
pub struct Frag {
    /// The name as written.
    pub name: String,
    /// The declaration.
    pub span: Span,
    /// The element type (for operands: the loaded view's; for accumulators: the fill's type, or
    /// the A operand's).
    pub elem: ElemTy,
    /// Array extents (`acc[2][3]`), empty for a single fragment.
    pub array_dims: Vec<u64>,
    /// Its role, once an execution used it.
    pub role: Option<MmaRole>,
    /// The family and configuration of that execution.
    pub selected: Option<MmaSelected>,
    /// For A and B: whether the operand's memory view is K-major (`row` for A, `.row` for B);
    /// for accumulators loaded from or stored to memory, unused.
    pub k_major: bool,
    /// The element type the fill asked for (`mma.fill.f32`, `frag.f32`), if written.
    pub explicit_elem: bool,
    /// For a WGMMA A operand in registers (RS mode): the K of its tile (a multiple of the
    /// instruction's); 0 otherwise.
    pub extent_k: u64,
}

impl Frag {
    /// How the fragment's elements are distributed, once its execution is known.
    pub fn layout(&self) -> Option<FragLayout> {
        let sel = self.selected?;
        Some(match (sel.family, self.role?) {
            (MmaFamily::Wmma, _) => FragLayout::Wmma,
            (MmaFamily::MmaSync, MmaRole::C) => FragLayout::SyncAcc,
            (MmaFamily::MmaSync, _) => FragLayout::SyncOperand,
            (MmaFamily::Wgmma, _) => FragLayout::WgmmaAcc,
        })
    }
}

/// A fragment named by a statement: `acc`, `acc[i][j]`, or a whole array (`index` shorter
/// than the array's rank, only where the statement allows it: `mma.fill`, `op=`).
#[derive(Debug, Clone, PartialEq)]
pub struct FragRef {
    /// The fragment.
    pub frag: FragId,
    /// The array indices (s32), outermost first.
    pub index: Vec<HExpr>,
}

/// A two-dimensional memory tile an MMA statement reads or writes.
#[derive(Debug, Clone, PartialEq)]
pub struct MmaTile {
    /// The address of the view's element `(0, 0)` ([`super::HExprKind::Address`]).
    pub base: HExpr,
    /// The element strides of view dimensions 0 and 1 (s64 expressions).
    pub strides: [HExpr; 2],
    /// The view's extents.
    pub dims: [u64; 2],
    /// Where the view lives.
    pub storage: Storage,
    /// The element type in memory.
    pub elem: ElemTy,
    /// The read of element `(0, 0)` ([`super::HExprKind::At`]): its access is proven or
    /// checked; the statement runs only when it and [`MmaTile::last`] are in bounds.
    pub first: HExpr,
    /// The read of the last element the statement touches.
    pub last: HExpr,
    /// The swizzle period (bytes; 0: none) of the copy that filled the shared buffer, which
    /// `mma.load` reads through (spec-tier3 §4.2, §4.3).
    pub swizzle: u32,
}

/// A direct shared-memory operand of WGMMA (spec-tier3 §5.2): a rectangle of rows of a shared
/// buffer that a swizzled copy filled, read through a matrix descriptor (§10.3).
#[derive(Debug, Clone, PartialEq)]
pub struct WgOperand {
    /// The view as a tile ([`MmaTile::swizzle`] is the filling copy's period, never 0).
    pub tile: MmaTile,
    /// Whether the operand is MN-major (`col` for A, `.col` for B: K is the view's first
    /// dimension); K-major otherwise.
    pub mn_major: bool,
    /// The element stride of the view along K (s64).
    pub k_stride: HExpr,
}

/// Operand A of a WGMMA.
#[derive(Debug, Clone, PartialEq)]
pub enum WgA {
    /// A direct shared view (SS mode).
    Shared(Box<WgOperand>),
    /// A fragment that `mma.load` filled (RS mode, spec-tier3 §10.3): four registers per K
    /// atom in the layout of `a_frag_row`/`a_frag_col` (the mma.sync A layout per warp), for
    /// 16-bit, tf32 and 8-bit types.
    Regs(FragRef),
}

/// One MMA statement (spec-tier3 §5).
#[derive(Debug, Clone, PartialEq)]
pub enum MmaOp {
    /// Declares a fragment (or array of fragments) local, uninitialised.
    Decl(FragId),
    /// `mma.fill`: every element of the fragment (every fragment of the array) = `value`,
    /// converted to the element type.
    Fill {
        /// The fragment(s).
        frag: FragRef,
        /// The scalar value.
        value: HExpr,
    },
    /// `mma.load`: the fragment's share of the tile (row/column order: the operand's view as
    /// written, interpreted by the fragment's role and `k_major`).
    Load {
        /// The fragment.
        frag: FragRef,
        /// The memory tile.
        tile: Box<MmaTile>,
    },
    /// `mma.<a>.<b> acc, a, b;`: `acc += a·b`.
    Exec {
        /// The accumulator.
        acc: FragRef,
        /// Operand A.
        a: FragRef,
        /// Operand B.
        b: FragRef,
    },
    /// `mma.store[.transp|.mask]`: the accumulator converted to the tile's element type.
    Store {
        /// The accumulator.
        frag: FragRef,
        /// The destination tile (`[M, N]`, or `[N, M]` transposed).
        tile: Box<MmaTile>,
        /// `.transp`: element `(i, j)` goes to tile element `(j, i)`.
        transpose: bool,
        /// Only accumulator rows `i < rows` are written (s32), if any.
        rows: Option<HExpr>,
        /// Only accumulator columns `j < cols` are written (s32), if any.
        cols: Option<HExpr>,
    },
    /// `mma.<a>.<b> acc, A, B;` of a warpgroup (WGMMA, spec-tier3 §5.2–§5.4, §10.3) with both
    /// operands direct shared views (SS mode): `atoms` instructions of K = `atom_k`, in
    /// increasing k, then a commit and a wait for all of them (a synchronous execution).
    WgExec {
        /// The accumulator (64×N over the warpgroup's 128 threads, WGMMA_ACC layout).
        acc: FragRef,
        /// Operand A: a direct `[M, K]` (K-major) or `[K, M]` (MN-major) view (SS mode), or a
        /// register fragment (RS mode).
        a: WgA,
        /// Operand B: `[N, K]` (K-major) or `[K, N]` (MN-major).
        b: Box<WgOperand>,
        /// The instructions the statement issues (views' K / `atom_k`).
        atoms: u64,
        /// The K of one instruction (16, 8 for tf32, 32 for 8-bit types).
        atom_k: u64,
        /// Whether the statement waits for its instructions (a synchronous execution); an
        /// asynchronous one (`q = mma….async …`) is waited by [`MmaOp::WgWait`].
        wait: bool,
        /// `[[schedule(k_tiles(…))]]`: the order of the K steps (a permutation of
        /// `0..atoms`); increasing k without one.
        order: Option<Vec<u64>>,
    },
    /// `wait q;` of an asynchronous WGMMA (spec-tier3 §5.4): `wgmma.wait_group pending`, with
    /// `pending` the asynchronous WGMMAs issued after q in its scope (they may stay in flight).
    WgWait {
        /// The accumulator of q.
        acc: FragRef,
        /// Commit groups that may remain pending (0..=7).
        pending: u32,
    },
    /// `mma.row.<b>.sp acc, a, b, e;` of a warp (`mma.sp.sync`, spec-tier3 §5.4 "Sparse"):
    /// `acc += Â·b` with `Â` the `[M, K]` matrix that the 2:4-compressed `[M, K/2]` operand `a`
    /// and the metadata fragment `meta` (a `u8 [M, K/8]` nibble stream) describe.
    SparseExec {
        /// The accumulator.
        acc: FragRef,
        /// Operand A: the compressed values (`[M, K/2]`, K-major).
        a: FragRef,
        /// Operand B (logical K).
        b: FragRef,
        /// The metadata fragment (role [`MmaRole::E`]).
        meta: FragRef,
    },
    /// `mma.row.row.sp acc, A, B, e;` of a warpgroup (sparse WGMMA, `wgmma.mma_async.sp`,
    /// spec-tier3 §5.4 "Sparse", §10.3): `atoms` instructions of logical K `atom_k`, A the
    /// 2:4-compressed `[64, K/2]` values (a direct shared view, SS mode, or a fragment that
    /// `mma.load` filled from one, RS mode: per instruction the 4 registers of a dense 16-bit
    /// RS atom over 16 compressed columns), B the `[N, K]` direct view (both K-major), the
    /// metadata fragment `meta` (role [`MmaRole::E`], `u8 [64, K/8]`); synchronous, or
    /// asynchronous (`q = mma.row.row.sp.async …`, waited by [`MmaOp::WgWait`]).
    WgSparseExec {
        /// The accumulator (64×N, WGMMA_ACC layout).
        acc: FragRef,
        /// Operand A: the compressed values (`[64, K/2]`), in shared memory or registers.
        a: WgA,
        /// Operand B (`[N, K]`, logical K).
        b: Box<WgOperand>,
        /// The metadata fragment.
        meta: FragRef,
        /// The instructions the statement issues.
        atoms: u64,
        /// The logical K of one instruction (32 for 16-bit types, 64 for fp8).
        atom_k: u64,
        /// Whether the statement waits for its instructions (a synchronous execution).
        wait: bool,
    },
    /// The block scale of spec-tier3 §5.4 (`mma.row.row.scale acc, a, b, SA, sb;` after its
    /// execution into `tmp`, or `mma.scale acc, SA, sb;`): `acc[i][j] += tmp[i][j]·SA(i)·sb`,
    /// then `tmp` is zeroed for the next executions (WGMMA accumulators only).
    Scale {
        /// The accumulator.
        acc: FragRef,
        /// The hidden accumulator `T` (same configuration as `acc`).
        tmp: FragRef,
        /// `SA`: an f32 `[M, 1]` or `[1, M]` tile.
        scale: Box<MmaTile>,
        /// The tile dimension that runs along M (0 for `[M, 1]`, 1 for `[1, M]`).
        m_dim: usize,
        /// `sb` (f32).
        sb: HExpr,
    },
    /// `frag op= scalar` (spec-tier3 §5.6) on every element.
    Update {
        /// The fragment(s).
        frag: FragRef,
        /// `+=`, `-=`, `*=` or `/=`.
        op: AssignOp,
        /// The scalar, converted to the element type.
        value: HExpr,
    },
    /// A fragment operation (spec-tier3 §6.2): `apply`'s accumulator bridges, reductions,
    /// `copy`.
    Frag(Box<super::frag::FragOp>),
}
