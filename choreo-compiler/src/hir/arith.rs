//! C arithmetic on element types, shared by semantic analysis and lowering: the usual
//! arithmetic conversions (spec §5.7), integer constant folding (spec §4.5: 64-bit arithmetic,
//! C truncation for `/` and `%`; a constant division by zero is an error reported by the
//! caller), and products of extents.

use super::{BinOp, Dim, ElemTy, HExpr, HExprKind, Ty, UnOp};
use crate::source::Span;

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

/// Integer promotion: types narrower than `int` (the sub-byte integers too) become s32.
pub(crate) fn int_promote(t: ElemTy) -> ElemTy {
    match t {
        ElemTy::S8 | ElemTy::S16 | ElemTy::U8 | ElemTy::U16 | ElemTy::Bool => ElemTy::S32,
        t if t.is_subbyte_int() => ElemTy::S32,
        other => other,
    }
}

pub(crate) fn float_rank(t: ElemTy) -> u8 {
    match t {
        ElemTy::F64 => 4,
        ElemTy::F32 | ElemTy::Tf32 => 3,
        ElemTy::F16 | ElemTy::Bf16 => 2,
        _ => 1, // fp8/fp6/fp4/ue*: computed in f32 (spec §5.7, spec-tier3 §8)
    }
}

/// Outcome of the usual arithmetic conversions.
pub(crate) enum Promoted {
    /// The common type.
    Ok(ElemTy),
    /// `f16` mixed with `bf16`.
    HalfMix,
}

/// The common type of two numeric scalar types (C++ usual arithmetic conversions, spec §5.7;
/// f16 op f16 stays f16; narrow float types compute in f32).
pub(crate) fn promote(a: ElemTy, b: ElemTy) -> Promoted {
    if a.is_float() || b.is_float() {
        if (a == ElemTy::F16 && b == ElemTy::Bf16) || (a == ElemTy::Bf16 && b == ElemTy::F16) {
            return Promoted::HalfMix;
        }
        let pick = match (a.is_float(), b.is_float()) {
            (true, false) => a,
            (false, true) => b,
            _ => {
                if float_rank(a) >= float_rank(b) {
                    a
                } else {
                    b
                }
            }
        };
        // An f8 operand is converted to f32 before the operation (spec §5.7), so f8 op f16 is
        // f32 op f16: f32.
        let narrow = |t: ElemTy| t.is_float() && float_rank(t) == 1;
        let computed_in_f32 =
            (narrow(a) || narrow(b)) && float_rank(pick) < float_rank(ElemTy::F32);
        return Promoted::Ok(if computed_in_f32 { ElemTy::F32 } else { pick });
    }
    let (a, b) = (int_promote(a), int_promote(b));
    if a == b {
        return Promoted::Ok(a);
    }
    let (sa, sb) = (a.is_signed_int(), b.is_signed_int());
    let (wa, wb) = (a.int_bits(), b.int_bits());
    if sa == sb {
        return Promoted::Ok(if wa >= wb { a } else { b });
    }
    let (signed, unsigned) = if sa { (a, b) } else { (b, a) };
    if unsigned.int_bits() >= signed.int_bits() {
        Promoted::Ok(unsigned)
    } else {
        Promoted::Ok(signed)
    }
}

/// Converts an operand to the common type of a binary operation without warnings (the
/// usual arithmetic conversions are not implicit conversions in the §5.7 sense).
pub(crate) fn widen(e: HExpr, to: ElemTy) -> HExpr {
    match e.ty.scalar() {
        Some(t) if t == to => e,
        None => e,
        Some(_) => {
            if let HExprKind::Int(v) = e.kind {
                if to.is_int() {
                    return HExpr { kind: HExprKind::Int(v), ty: Ty::Scalar(to), span: e.span };
                }
                if to.is_float() {
                    return HExpr {
                        kind: HExprKind::Float(v as f64),
                        ty: Ty::Scalar(to),
                        span: e.span,
                    };
                }
            }
            let span = e.span;
            HExpr {
                kind: HExprKind::Cast { to, operand: Box::new(e), implicit: true },
                ty: Ty::Scalar(to),
                span,
            }
        }
    }
}

/// The product of extents, as semantic analysis writes it: a constant when every extent is
/// one (saturating), else a left-to-right `*` chain of the non-unit extents in their common
/// integer type (adjacent constants folded).
pub(crate) fn dim_product(dims: &[Dim], span: Span) -> Dim {
    if let Some(p) =
        dims.iter().try_fold(1u64, |acc, d| d.as_const().map(|c| acc.saturating_mul(c)))
    {
        return Dim::Const(p);
    }
    let mut acc: Option<HExpr> = None;
    for d in dims {
        if d.as_const() == Some(1) {
            continue;
        }
        let e = d.to_expr(span);
        acc = Some(match acc {
            None => e,
            Some(a) => int_mul(a, e, span),
        });
    }
    match acc {
        Some(e) => Dim::from_expr(e),
        None => Dim::Const(1),
    }
}

/// `a + b` on integer operands, in their common type (folded when both are constants; `x + 0`
/// is `x`).
pub(crate) fn add(a: HExpr, b: HExpr, span: Span) -> HExpr {
    int_binary(BinOp::Add, a, b, span)
}

/// `a * b` on integer operands (see [`add`]; `x * 1` is `x`, `x * 0` is `0`: index expressions
/// have no side effects).
pub(crate) fn mul(a: HExpr, b: HExpr, span: Span) -> HExpr {
    int_binary(BinOp::Mul, a, b, span)
}

/// `a / b` on integer operands (see [`add`]; `x / 1` is `x`).
pub(crate) fn div(a: HExpr, b: HExpr, span: Span) -> HExpr {
    int_binary(BinOp::Div, a, b, span)
}

/// `a % b` on integer operands (see [`add`]; `x % 1` is `0`).
pub(crate) fn rem(a: HExpr, b: HExpr, span: Span) -> HExpr {
    int_binary(BinOp::Rem, a, b, span)
}

/// `a op b` for an arithmetic `op` on integer operands, in their common type (bounded values
/// count as s32), with constants folded and the identities of 0 and 1 applied.
fn int_binary(op: BinOp, a: HExpr, b: HExpr, span: Span) -> HExpr {
    let ta = a.ty.scalar().unwrap_or(ElemTy::S32);
    let tb = b.ty.scalar().unwrap_or(ElemTy::S32);
    let common = match promote(ta, tb) {
        Promoted::Ok(t) => t,
        Promoted::HalfMix => ElemTy::S32,
    };
    let (a, b) = (widen(a, common), widen(b, common));
    let (ca, cb) = (const_int(&a), const_int(&b));
    if let (Some(x), Some(y)) = (ca, cb) {
        if let Ok(Some((v, t))) = fold_int_binary(op, x, y, common) {
            return HExpr { kind: HExprKind::Int(v), ty: Ty::Scalar(t), span };
        }
    }
    let as_common = |mut e: HExpr| {
        if e.ty.is_bounded() {
            e.ty = Ty::Scalar(common);
        }
        e
    };
    let zero = || HExpr { kind: HExprKind::Int(0), ty: Ty::Scalar(common), span };
    match (op, ca, cb) {
        (BinOp::Add, Some(0), _) => return as_common(b),
        (BinOp::Add | BinOp::Sub, _, Some(0)) => return as_common(a),
        (BinOp::Mul, Some(1), _) => return as_common(b),
        (BinOp::Mul | BinOp::Div, _, Some(1)) => return as_common(a),
        (BinOp::Mul, Some(0), _) | (BinOp::Mul, _, Some(0)) | (BinOp::Rem, _, Some(1)) => {
            return zero();
        }
        _ => {}
    }
    // `N / N` and `N % N` of one extent (a chunk of a dimension split into as many chunks as
    // it has elements): extents are positive wherever the expression is evaluated (a launch
    // over a zero extent runs nothing), so the quotient is 1 and the remainder 0.
    if matches!(op, BinOp::Div | BinOp::Rem) {
        if let (Some(x), Some(y)) = (extent_atom(&a), extent_atom(&b)) {
            if x == y {
                let v = i128::from(op == BinOp::Div);
                return HExpr { kind: HExprKind::Int(v), ty: Ty::Scalar(common), span };
            }
        }
    }
    HExpr {
        kind: HExprKind::Binary { op, lhs: Box::new(a), rhs: Box::new(b) },
        ty: Ty::Scalar(common),
        span,
    }
}

/// `a * b` on integer operands (the product of two extents).
fn int_mul(a: HExpr, b: HExpr, span: Span) -> HExpr {
    int_binary(BinOp::Mul, a, b, span)
}

/// The extent an integer expression is, through conversions: a symbolic dimension or a
/// parameter's extent.
fn extent_atom(e: &HExpr) -> Option<&HExprKind> {
    match &e.kind {
        HExprKind::Cast { operand, .. } => extent_atom(operand),
        k @ (HExprKind::SymDim(_) | HExprKind::ParamExtent { .. }) => Some(k),
        _ => None,
    }
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

    #[test]
    fn fp8_operands_are_computed_in_f32_or_wider() {
        use ElemTy::*;
        let common = |a, b| match promote(a, b) {
            Promoted::Ok(t) => t,
            Promoted::HalfMix => panic!("{a:?} and {b:?} are not a half mix"),
        };
        for (a, b, want) in [
            (F8E4m3, F8E4m3, F32),
            (F8E4m3, F8E5m2, F32),
            (F8E5m2, S32, F32),
            (U8, F8E4m3, F32),
            (F16, F8E5m2, F32),
            (F8E4m3, Bf16, F32),
            (F8E4m3, F32, F32),
            (F64, F8E5m2, F64),
            (F16, S32, F16),
            (F16, F16, F16),
        ] {
            assert_eq!(common(a, b), want, "{a:?} op {b:?}");
        }
    }

    #[test]
    fn narrow_types_compute_in_int_or_f32() {
        use ElemTy::*;
        let common = |a, b| match promote(a, b) {
            Promoted::Ok(t) => t,
            Promoted::HalfMix => panic!("{a:?} and {b:?} are not a half mix"),
        };
        for (a, b, want) in [
            (S4, S4, S32),
            (U4, S2, S32),
            (Bin1, U1, S32),
            (S6, U32, U32),
            (U6, S64, S64),
            (F4E2m1, F4E2m1, F32),
            (F6E2m3, F6E3m2, F32),
            (F8Ue8m0, F16, F32),
            (F8Ue4m3, S4, F32),
            (F64, F4E2m1, F64),
        ] {
            assert_eq!(common(a, b), want, "{a:?} op {b:?}");
        }
    }
}
