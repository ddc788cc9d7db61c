//! Element types, usual arithmetic conversions and implicit conversions (spec §5.1, §5.7).

use super::Checker;
use crate::ast;
use crate::hir::arith::float_rank;
pub(crate) use crate::hir::arith::{Promoted, promote};
use crate::hir::{Dim, ElemTy, HExpr, HExprKind, Storage, Ty};
use crate::token::ElemType;

/// The HIR element type of a lexed element type name.
pub fn elem_from_token(t: ElemType) -> ElemTy {
    match t {
        ElemType::F64 => ElemTy::F64,
        ElemType::Tf32 => ElemTy::Tf32,
        ElemType::F32 => ElemTy::F32,
        ElemType::F16 => ElemTy::F16,
        ElemType::Bf16 => ElemTy::Bf16,
        ElemType::F8E4m3 => ElemTy::F8E4m3,
        ElemType::F8E5m2 => ElemTy::F8E5m2,
        ElemType::F8Ue4m3 => ElemTy::F8Ue4m3,
        ElemType::F8Ue8m0 => ElemTy::F8Ue8m0,
        ElemType::F6E2m3 => ElemTy::F6E2m3,
        ElemType::F6E3m2 => ElemTy::F6E3m2,
        ElemType::F4E2m1 => ElemTy::F4E2m1,
        ElemType::S64 => ElemTy::S64,
        ElemType::U64 => ElemTy::U64,
        ElemType::S32 => ElemTy::S32,
        ElemType::U32 => ElemTy::U32,
        ElemType::S16 => ElemTy::S16,
        ElemType::U16 => ElemTy::U16,
        ElemType::S8 => ElemTy::S8,
        ElemType::U8 => ElemTy::U8,
        ElemType::S6 => ElemTy::S6,
        ElemType::U6 => ElemTy::U6,
        ElemType::S4 => ElemTy::S4,
        ElemType::U4 => ElemTy::U4,
        ElemType::S2 => ElemTy::S2,
        ElemType::U2 => ElemTy::U2,
        ElemType::U1 => ElemTy::U1,
        ElemType::Bin1 => ElemTy::Bin1,
    }
}

/// The HIR type of a scalar type keyword (`int` is s32).
pub(crate) fn scalar_from_ast(t: ast::ScalarType) -> ElemTy {
    match t {
        ast::ScalarType::Int => ElemTy::S32,
        ast::ScalarType::Bool => ElemTy::Bool,
        ast::ScalarType::Elem(e) => elem_from_token(e),
    }
}

/// The tier an element type belongs to (1, 2 or 3).
pub(crate) fn elem_tier(t: ElemTy) -> u8 {
    if t.is_tier1() {
        1
    } else if t.is_fp8() {
        2
    } else {
        3
    }
}

/// A type's name for messages, in the spec's style (`s32`, `f32 mdspan<2> [8, 32]`, …).
pub(crate) fn ty_name(t: &Ty) -> String {
    match t {
        Ty::Scalar(e) => e.as_str().to_string(),
        Ty::BoundedInt => "bounded int".to_string(),
        Ty::Pointer(e) => format!("{}*", e.as_str()),
        Ty::BoundedItuple(r) => format!("bounded ituple<{r}>"),
        Ty::Ituple(r) => format!("ituple<{r}>"),
        Ty::Mdspan(r) => format!("mdspan<{r}>"),
        Ty::Spanned(s) => {
            let storage = match s.storage {
                Storage::Host => "",
                Storage::Global => "global ",
                Storage::Shared => "shared ",
                Storage::Local => "local ",
            };
            let dims: Vec<String> = s.dims.iter().map(dim_name).collect();
            format!("{storage}{} mdspan<{}> [{}]", s.elem.as_str(), s.dims.len(), dims.join(", "))
        }
        Ty::Stream => "stream".to_string(),
        Ty::String => "string".to_string(),
        Ty::Void => "void".to_string(),
        Ty::Error => "<error>".to_string(),
    }
}

/// A dimension for messages.
pub(crate) fn dim_name(d: &Dim) -> String {
    match d {
        Dim::Const(c) => c.to_string(),
        Dim::Sym(s) => format!("sym#{}", s.0),
        Dim::Dynamic { .. } => "?".to_string(),
        Dim::Expr(_) => "<expr>".to_string(),
    }
}

/// Significant bits (the implicit leading one included) of a floating-point type.
fn float_mantissa(t: ElemTy) -> u32 {
    match t {
        ElemTy::F64 => 53,
        ElemTy::F32 | ElemTy::Tf32 => 24,
        ElemTy::F16 => 11,
        ElemTy::Bf16 => 8,
        _ => 4,
    }
}

/// The exactly representable values of a narrow float type: significant bits (the implicit
/// one included), the exponent of the smallest step (the smallest subnormal, or for `f8_ue8m0`
/// the smallest value), the largest finite value, whether negative values and zero exist.
struct NarrowFormat {
    significant: u32,
    min_step_exp: i32,
    max: f64,
    signed: bool,
    has_zero: bool,
}

fn narrow_format(t: ElemTy) -> NarrowFormat {
    let f = |significant, min_step_exp, max, signed| NarrowFormat {
        significant,
        min_step_exp,
        max,
        signed,
        has_zero: true,
    };
    match t {
        ElemTy::F8E4m3 => f(4, -9, 448.0, true),
        ElemTy::F8E5m2 => f(3, -16, 57344.0, true),
        ElemTy::F8Ue4m3 => f(4, -9, 448.0, false),
        ElemTy::F6E2m3 => f(4, -3, 7.5, true),
        ElemTy::F6E3m2 => f(3, -4, 28.0, true),
        ElemTy::F4E2m1 => f(2, -1, 6.0, true),
        // 2^-127 … 2^127, powers of two only.
        _ => NarrowFormat {
            significant: 1,
            min_step_exp: -127,
            max: 2f64.powi(127),
            signed: false,
            has_zero: false,
        },
    }
}

/// Whether `f` is exactly a value of the narrow float type `t` (see [`ElemTy::is_narrow_float`]):
/// at most its significant bits, no finer than its smallest step, within its range.
fn narrow_exact(f: f64, t: ElemTy) -> bool {
    let format = narrow_format(t);
    if !f.is_finite() || f.abs() > format.max || (f < 0.0 && !format.signed) {
        return false;
    }
    if f == 0.0 {
        return format.has_zero && (format.signed || !f.is_sign_negative());
    }
    // f = m * 2^k with m odd; exact when m fits the significand and k is not below the
    // smallest step. The scaled values are exact in f64 (powers of two).
    let mut m = f.abs() * 2f64.powi(-format.min_step_exp);
    if m.fract() != 0.0 {
        return false;
    }
    while m >= 2.0 && (m / 2.0).fract() == 0.0 {
        m /= 2.0;
    }
    m < f64::from(1u32 << format.significant)
}

/// Whether a constant value is exactly representable in `t`.
fn const_fits(e: &HExpr, t: ElemTy) -> bool {
    match e.kind {
        HExprKind::Int(v) => {
            if t.is_int() {
                let bits = t.int_bits();
                if t.is_signed_int() {
                    let lo = -(1i128 << (bits - 1));
                    let hi = (1i128 << (bits - 1)) - 1;
                    (lo..=hi).contains(&v)
                } else {
                    (0..=((1i128 << bits) - 1)).contains(&v)
                }
            } else if t.is_narrow_float() {
                narrow_exact(v as f64, t)
            } else if t.is_float() {
                v.unsigned_abs() <= (1u128 << float_mantissa(t))
            } else {
                false
            }
        }
        HExprKind::Float(f) => match t {
            ElemTy::F64 => true,
            ElemTy::F32 => (f as f32) as f64 == f || f.is_infinite(),
            ElemTy::F16 | ElemTy::Bf16 => f.fract() == 0.0 && f.abs() <= 256.0,
            t if t.is_narrow_float() => narrow_exact(f, t),
            _ => false,
        },
        _ => false,
    }
}

impl Checker<'_> {
    /// Converts a scalar expression to `to` for an assignment, initialisation, argument or
    /// return: inserts an implicit [`HExprKind::Cast`] when the types differ and warns for
    /// lossy (`W0401`) or reinterpreting (`W0402`) conversions (spec §5.7). Returns `None` for
    /// incompatible kinds (bool ↔ number, non-scalars); the caller reports.
    pub(crate) fn convert(&mut self, e: HExpr, to: ElemTy) -> Option<HExpr> {
        let from = match &e.ty {
            Ty::Error => return Some(e),
            t => t.scalar()?,
        };
        if from == to {
            return Some(e);
        }
        if (from == ElemTy::Bool) != (to == ElemTy::Bool) {
            return None;
        }
        // Conversions from or to sub-byte integers have no explicit form (they are never
        // `__to` sources or targets, spec-tier3 §8): the assignment is the conversion, and its
        // wrap-around is the defined behaviour, so it does not warn.
        let subbyte = from.is_subbyte_int() || to.is_subbyte_int();
        if !subbyte && !const_fits(&e, to) {
            let lossy = if from.is_float() && to.is_int() {
                true
            } else if from.is_float() && to.is_float() {
                float_rank(to) < float_rank(from)
                    || (from == ElemTy::F16 && to == ElemTy::Bf16)
                    || (from == ElemTy::Bf16 && to == ElemTy::F16)
                    // Between narrow floats: one has the finer steps, the other the wider range.
                    || (from.is_narrow_float() && to.is_narrow_float())
            } else if from.is_int() && to.is_int() {
                to.int_bits() < from.int_bits()
                    // bin1 keeps only whether the value is zero.
                    || (to == ElemTy::Bin1 && from != ElemTy::Bin1)
            } else if from.is_int() && to.is_narrow_float() {
                // Unlike the wider floats, the narrow ones hold few integers exactly (fp4 none
                // above 6).
                true
            } else {
                false
            };
            let reinterpret = !lossy
                && from.is_int()
                && to.is_int()
                && from.is_signed_int() != to.is_signed_int()
                && !(to.is_signed_int() && to.int_bits() > from.int_bits());
            if lossy {
                self.warn(
                    "W0401",
                    e.span,
                    format!(
                        "The implicit type conversion may lose precision: '{}' to '{}'",
                        from.as_str(),
                        to.as_str()
                    ),
                    "may lose precision",
                );
            } else if reinterpret {
                self.warn(
                    "W0402",
                    e.span,
                    format!(
                        "The implicit type conversion may lead to semantic error(without data \
                         loss): '{}' to '{}'",
                        from.as_str(),
                        to.as_str()
                    ),
                    "reinterpreted",
                );
            }
        }
        // Constants that convert exactly stay literals.
        if let HExprKind::Int(v) = e.kind {
            if to.is_int() && const_fits(&e, to) {
                return Some(HExpr { kind: HExprKind::Int(v), ty: Ty::Scalar(to), span: e.span });
            }
            if to.is_float() && const_fits(&e, to) {
                let kind = HExprKind::Float(v as f64);
                return Some(HExpr { kind, ty: Ty::Scalar(to), span: e.span });
            }
        }
        let span = e.span;
        Some(HExpr {
            kind: HExprKind::Cast { to, operand: Box::new(e), implicit: true },
            ty: Ty::Scalar(to),
            span,
        })
    }

    /// Converts an operand to the common type of a binary operation without warnings (the
    /// usual arithmetic conversions are not implicit conversions in the §5.7 sense).
    pub(crate) fn widen(e: HExpr, to: ElemTy) -> HExpr {
        crate::hir::arith::widen(e, to)
    }
}
