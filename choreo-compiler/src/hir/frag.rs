//! Fragment operations of the checked program (spec-tier3 §6).
//!
//! A shaped fragment (`frag T [shape] name {init};`) is a per-thread register array: sema
//! declares it as a `local` buffer of the registers one thread holds ([`crate::hir::LocalPlace::
//! LocalBuffer`]) once its layout (§6.1) is inferred, and `apply` becomes an unrolled loop over
//! those registers whose body indexes the buffer. Accumulators of MMA executions take part
//! through [`FragOp::Unpack`]/[`FragOp::Pack`]: their elements, in the order of the layout
//! (WGMMA_ACC, SYNC_ACC), are copied to and from such a buffer around the operation.
//! The operations that exchange registers between threads (row reductions, `all_reduce_sum`)
//! are [`FragOp::Reduce`] and [`FragOp::AllReduce`], rendered as calls of `frag_ops.cuh`.

use super::mma::FragRef;
use super::{AssignOp, HExpr, VarId};

/// The 2-D layout a row reduction reads: rows are owned by groups of four threads (the four
/// `t % 4` of a quad), two rows per thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowLayout {
    /// WGMMA_ACC (64×N over 128 threads): register r belongs to the row of `(r % 4) / 2`.
    Wgmma,
    /// SYNC_ACC (16×8 over 32 threads): register r belongs to the row of `r / 2`.
    Sync,
}

/// One fragment operation.
#[derive(Debug, Clone, PartialEq)]
pub enum FragOp {
    /// The thread's elements of an accumulator, in register order, converted into the
    /// per-thread buffer `buf`.
    Unpack {
        /// The accumulator.
        acc: FragRef,
        /// The buffer.
        buf: VarId,
        /// The elements one thread holds.
        regs: u64,
    },
    /// The reverse of [`FragOp::Unpack`]: `buf` converted into the accumulator's elements.
    Pack {
        /// The accumulator.
        acc: FragRef,
        /// The buffer.
        buf: VarId,
        /// The elements one thread holds.
        regs: u64,
    },
    /// `reduce_max` / `reduce_sum` over dimension 1: `dst[h]` (the thread's two rows) = the
    /// maximum or sum of its row's elements in `src`, reduced locally then across the quad
    /// with `__shfl_xor_sync` xor 2, 1.
    Reduce {
        /// `reduce_max` (else `reduce_sum`).
        max: bool,
        /// The REPLICATED_1D destination (2 registers).
        dst: VarId,
        /// The source's registers.
        src: VarId,
        /// How many the source has.
        regs: u64,
        /// The source's layout.
        rows: RowLayout,
    },
    /// `all_reduce_sum(v)`: every copy of each row of a REPLICATED_1D fragment (2 registers)
    /// becomes the sum of the quad's four copies.
    AllReduce {
        /// The fragment.
        buf: VarId,
    },
    /// `copy(dst, src)` between two buffers of one layout, converting each element.
    Copy {
        /// The destination.
        dst: VarId,
        /// The source.
        src: VarId,
        /// The registers of each.
        regs: u64,
    },
    /// RS mode from a fragment (spec-tier3 §5.4, §10.3): the registers of the WGMMA operand
    /// `afrag` (`k` columns) from columns `c0 .. c0 + k` of a 64×N fragment in WGMMA_ACC
    /// layout: for 16-bit elements accumulator registers `4(c/8) + …` are the operand's
    /// registers; tf32 (f32) and 8-bit ones are exchanged among the lanes of a quad.
    ToA {
        /// The operand fragment (a WGMMA A operand in registers).
        afrag: FragRef,
        /// The shaped fragment's registers.
        buf: VarId,
        /// The first column (s32).
        c0: HExpr,
        /// The operand's K.
        k: u64,
    },
    /// `frag op= scalar` (spec-tier3 §5.6) of a shaped fragment: every register of `buf`
    /// (its extent, the registers of its layout).
    Update {
        /// The fragment's registers.
        buf: VarId,
        /// `+=`, `-=`, `*=` or `/=`.
        op: AssignOp,
        /// The scalar, converted to the element type.
        value: HExpr,
    },
}
