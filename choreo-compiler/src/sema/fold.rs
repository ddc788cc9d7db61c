//! Constant folding of integer expressions (spec §4.5): 64-bit arithmetic, C truncation for
//! `/` and `%`; a constant division by zero is an error (reported by the caller).

use crate::hir::{BinOp, ElemTy, HExpr, HExprKind, Ty, UnOp};

/// Why folding failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FoldError {
    /// Division or remainder by a constant zero.
    DivByZero,
}

/// The integer value of a constant expression.
pub(crate) fn const_int(e: &HExpr) -> Option<i128> {
    match e.kind {
        HExprKind::Int(v) => Some(v),
        _ => None,
    }
}

/// The smallest literal type of the signedness of `ty` that holds `v` (s32 → s64, u32 → u64);
/// folded results of s32 arithmetic widen instead of overflowing (`2147483647 + 1`).
pub(crate) fn fit_type(v: i128, ty: ElemTy) -> ElemTy {
    if ty.is_signed_int() || !ty.is_int() {
        if i32::try_from(v).is_ok() && ty.int_bits() <= 32 { ElemTy::S32 } else { ElemTy::S64 }
    } else if u32::try_from(v).is_ok() && ty.int_bits() <= 32 {
        ElemTy::U32
    } else {
        ElemTy::U64
    }
}

/// Folds `a op b` for integer constants of common type `ty`. `Ok(None)` when the operation
/// does not fold (e.g. shift count out of range).
pub(crate) fn fold_int_binary(
    op: BinOp,
    a: i128,
    b: i128,
    ty: ElemTy,
) -> Result<Option<(i128, ElemTy)>, FoldError> {
    let unsigned = ty.is_int() && !ty.is_signed_int();
    if unsigned {
        let (x, y) = (a as u64, b as u64);
        let v: u64 = match op {
            BinOp::Add => x.wrapping_add(y),
            BinOp::Sub => x.wrapping_sub(y),
            BinOp::Mul => x.wrapping_mul(y),
            BinOp::Div => x.checked_div(y).ok_or(FoldError::DivByZero)?,
            BinOp::Rem => x.checked_rem(y).ok_or(FoldError::DivByZero)?,
            BinOp::BitAnd => x & y,
            BinOp::BitOr => x | y,
            BinOp::BitXor => x ^ y,
            BinOp::Shl => match u32::try_from(b) {
                Ok(s) if s < 64 => x.wrapping_shl(s),
                _ => return Ok(None),
            },
            BinOp::Shr => match u32::try_from(b) {
                Ok(s) if s < 64 => x >> s,
                _ => return Ok(None),
            },
            _ => return Ok(None),
        };
        let v = v as i128;
        return Ok(Some((v, fit_type(v, ty))));
    }
    let (x, y) = (a as i64, b as i64);
    let v: i64 = match op {
        BinOp::Add => x.wrapping_add(y),
        BinOp::Sub => x.wrapping_sub(y),
        BinOp::Mul => x.wrapping_mul(y),
        BinOp::Div => {
            if y == 0 {
                return Err(FoldError::DivByZero);
            }
            x.wrapping_div(y)
        }
        BinOp::Rem => {
            if y == 0 {
                return Err(FoldError::DivByZero);
            }
            x.wrapping_rem(y)
        }
        BinOp::BitAnd => x & y,
        BinOp::BitOr => x | y,
        BinOp::BitXor => x ^ y,
        BinOp::Shl => match u32::try_from(b) {
            Ok(s) if s < 64 => x.wrapping_shl(s),
            _ => return Ok(None),
        },
        BinOp::Shr => match u32::try_from(b) {
            Ok(s) if s < 64 => x >> s,
            _ => return Ok(None),
        },
        _ => return Ok(None),
    };
    let v = v as i128;
    Ok(Some((v, fit_type(v, ty))))
}

/// Folds an integer comparison.
pub(crate) fn fold_compare(op: BinOp, a: i128, b: i128) -> Option<bool> {
    Some(match op {
        BinOp::Eq => a == b,
        BinOp::Ne => a != b,
        BinOp::Lt => a < b,
        BinOp::Le => a <= b,
        BinOp::Gt => a > b,
        BinOp::Ge => a >= b,
        _ => return None,
    })
}

/// Folds a unary operator on a constant.
pub(crate) fn fold_unary(op: UnOp, e: &HExpr) -> Option<HExprKind> {
    match (op, &e.kind) {
        (UnOp::Neg, HExprKind::Int(v)) => {
            let ty = e.ty.scalar().unwrap_or(ElemTy::S32);
            if ty.is_signed_int() {
                Some(HExprKind::Int((*v as i64).wrapping_neg() as i128))
            } else {
                Some(HExprKind::Int((*v as u64).wrapping_neg() as i128))
            }
        }
        (UnOp::Neg, HExprKind::Float(f)) => Some(HExprKind::Float(-f)),
        (UnOp::BitNot, HExprKind::Int(v)) => {
            let ty = e.ty.scalar().unwrap_or(ElemTy::S32);
            match ty {
                ElemTy::U32 => Some(HExprKind::Int(!(*v as u32) as i128)),
                ElemTy::U64 => Some(HExprKind::Int(!(*v as u64) as i128)),
                _ => Some(HExprKind::Int(!(*v as i64) as i128)),
            }
        }
        (UnOp::Not, HExprKind::Bool(b)) => Some(HExprKind::Bool(!b)),
        _ => None,
    }
}

/// An s32-or-wider integer literal.
pub(crate) fn int_lit(v: i128, span: crate::source::Span) -> HExpr {
    HExpr { kind: HExprKind::Int(v), ty: Ty::Scalar(fit_type(v, ElemTy::S32)), span }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_truncates_like_c_and_widens() {
        assert_eq!(fold_int_binary(BinOp::Div, -7, 2, ElemTy::S32), Ok(Some((-3, ElemTy::S32))));
        assert_eq!(fold_int_binary(BinOp::Rem, -7, 2, ElemTy::S32), Ok(Some((-1, ElemTy::S32))));
        assert_eq!(
            fold_int_binary(BinOp::Add, 2147483647, 1, ElemTy::S32),
            Ok(Some((2147483648, ElemTy::S64)))
        );
        assert_eq!(fold_int_binary(BinOp::Div, 1, 0, ElemTy::S32), Err(FoldError::DivByZero));
        assert_eq!(fold_int_binary(BinOp::Rem, 1, 0, ElemTy::U32), Err(FoldError::DivByZero));
        assert_eq!(fold_int_binary(BinOp::Shl, 1, 70, ElemTy::S32), Ok(None));
    }
}
