//! Static alignment of element offsets: what every value of an integer expression is known to
//! be a multiple of, whatever its variables are.
//!
//! The emitter uses it to pick an instruction that needs aligned addresses (`ldmatrix`) without
//! a run-time test when the address of a tile's first element is provably aligned: a test per
//! load splits the code into basic blocks that the CUDA compiler does not schedule across, so
//! a warp's loads of one k-step no longer overlap.
//!
//! The rules, for integers (two's-complement wrap-around aside, which offsets inside a buffer
//! never reach): a literal `c` is a multiple of `|c|`; `a ± b` of `gcd(m(a), m(b))`; `a · b` of
//! `m(a) · m(b)`; `a % c` of `gcd(m(a), |c|)` (it is `a − c·q`); `a << c` of `m(a) · 2^c`; any
//! other expression (a variable, a quotient, a shift right) only of 1. `0` stands for "the
//! value is 0", a multiple of everything.

use crate::hir::{BinOp, Dim, ElemIndex, HExpr, HExprKind};

/// What every value of `e` is a multiple of (0: `e` is always 0).
pub fn known_multiple(e: &HExpr) -> u64 {
    match &e.kind {
        HExprKind::Int(v) => u64::try_from(v.unsigned_abs()).unwrap_or(1),
        HExprKind::Cast { operand, to, .. } if to.is_int() => known_multiple(operand),
        HExprKind::Binary { op, lhs, rhs } => {
            let (a, b) = (known_multiple(lhs), known_multiple(rhs));
            match op {
                BinOp::Add | BinOp::Sub => gcd(a, b),
                BinOp::Mul => a.checked_mul(b).unwrap_or(1),
                BinOp::Rem => match &rhs.kind {
                    HExprKind::Int(c) if *c != 0 => {
                        gcd(a, u64::try_from(c.unsigned_abs()).unwrap_or(1))
                    }
                    _ => 1,
                },
                BinOp::Shl => match &rhs.kind {
                    HExprKind::Int(c) if (0..32).contains(c) => {
                        a.checked_shl(*c as u32).unwrap_or(1)
                    }
                    _ => 1,
                },
                _ => 1,
            }
        }
        _ => 1,
    }
}

/// What the row-major element offset of `index` in a buffer of extents `dims` is a multiple
/// of (0: always 0); a symbolic extent counts as a multiple of 1.
pub fn offset_multiple(dims: &[Dim], index: &ElemIndex) -> u64 {
    match index {
        ElemIndex::Flat(offset) => known_multiple(offset),
        ElemIndex::Coords(indices) => {
            // offset = Σ_d i_d · Π_{e > d} D_e.
            let mut total = 0;
            let mut inner = 1u64;
            for (k, i) in indices.iter().enumerate().rev() {
                total = gcd(total, known_multiple(i).checked_mul(inner).unwrap_or(1));
                let d = dims.get(k).and_then(Dim::as_const).unwrap_or(1);
                inner = inner.checked_mul(d).unwrap_or(1);
            }
            total
        }
    }
}

/// Whether every value that is a multiple of `m` (0: the value 0) is a multiple of `n`.
pub fn divides(m: u64, n: u64) -> bool {
    n != 0 && m % n == 0
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hir::{ElemTy, Ty, VarId};
    use crate::source::{FileId, Span};

    fn e(kind: HExprKind) -> HExpr {
        HExpr { kind, ty: Ty::Scalar(ElemTy::S32), span: Span::new(FileId(0), 0..0) }
    }
    fn int(v: i128) -> HExpr {
        e(HExprKind::Int(v))
    }
    fn var(n: u32) -> HExpr {
        e(HExprKind::Var(VarId(n)))
    }
    fn bin(op: BinOp, a: HExpr, b: HExpr) -> HExpr {
        e(HExprKind::Binary { op, lhs: Box::new(a), rhs: Box::new(b) })
    }

    #[test]
    fn sums_of_products_keep_the_common_factor() {
        // (k % 2) * 128 * 40 + wm * 64 * 40 + kk * 16: multiples of 16 elements.
        let slot =
            bin(BinOp::Mul, bin(BinOp::Mul, bin(BinOp::Rem, var(0), int(2)), int(128)), int(40));
        let rows = bin(BinOp::Mul, bin(BinOp::Mul, var(1), int(64)), int(40));
        let cols = bin(BinOp::Mul, var(2), int(16));
        let offset = bin(BinOp::Add, bin(BinOp::Add, slot, rows), cols);
        assert_eq!(known_multiple(&offset), 16);
        // + 1 breaks it; a quotient is only a multiple of 1.
        assert_eq!(known_multiple(&bin(BinOp::Add, offset.clone(), int(1))), 1);
        assert_eq!(known_multiple(&bin(BinOp::Div, offset, int(2))), 1);
    }

    #[test]
    fn remainders_shifts_and_zero() {
        assert_eq!(known_multiple(&bin(BinOp::Rem, bin(BinOp::Mul, var(0), int(12)), int(8))), 4);
        assert_eq!(known_multiple(&bin(BinOp::Shl, var(0), int(3))), 8);
        assert_eq!(known_multiple(&int(0)), 0);
        assert!(divides(0, 8) && divides(16, 8) && !divides(4, 8));
    }

    #[test]
    fn offsets_of_coordinates_multiply_by_the_inner_extents() {
        // sa[2][128][40] at (s, 16 r, 8 c): 5120 s + 640 r + 8 c → multiple of 8.
        let dims = [Dim::Const(2), Dim::Const(128), Dim::Const(40)];
        let index = ElemIndex::Coords(vec![
            var(0),
            bin(BinOp::Mul, var(1), int(16)),
            bin(BinOp::Mul, var(2), int(8)),
        ]);
        assert_eq!(offset_multiple(&dims, &index), 8);
        // An odd column: 1.
        let index = ElemIndex::Coords(vec![var(0), var(1), bin(BinOp::Add, var(2), int(0))]);
        assert_eq!(offset_multiple(&dims, &index), 1);
        // Everything 0.
        let index = ElemIndex::Coords(vec![int(0), int(0), int(0)]);
        assert_eq!(offset_multiple(&dims, &index), 0);
    }
}
