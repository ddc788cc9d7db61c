//! C++ spellings of element types, conversions between them, and literals.

use crate::hir::{ElemTy, Ty};

/// The C++ spelling of an element type (choreo.h aliases; `float`/`double`/`bool` plain).
pub fn cpp_elem(t: ElemTy) -> &'static str {
    match t {
        ElemTy::Bool => "bool",
        ElemTy::S8 => "choreo::s8",
        ElemTy::S16 => "choreo::s16",
        ElemTy::S32 => "choreo::s32",
        ElemTy::S64 => "choreo::s64",
        ElemTy::U8 => "choreo::u8",
        ElemTy::U16 => "choreo::u16",
        ElemTy::U32 => "choreo::u32",
        ElemTy::U64 => "choreo::u64",
        ElemTy::F16 => "choreo::f16",
        ElemTy::Bf16 => "choreo::bf16",
        ElemTy::F32 => "float",
        ElemTy::F64 => "double",
        ElemTy::Tf32 => "choreo::tf32",
        ElemTy::F8E4m3 => "choreo::f8_e4m3",
        ElemTy::F8E5m2 => "choreo::f8_e5m2",
        ElemTy::F8Ue4m3 => "choreo::f8_ue4m3",
        ElemTy::F8Ue8m0 => "choreo::f8_ue8m0",
        ElemTy::F6E2m3 => "choreo::f6_e2m3",
        ElemTy::F6E3m2 => "choreo::f6_e3m2",
        ElemTy::F4E2m1 => "choreo::f4_e2m1",
        ElemTy::S6 => "choreo::s6",
        ElemTy::U6 => "choreo::u6",
        ElemTy::S4 => "choreo::s4",
        ElemTy::U4 => "choreo::u4",
        ElemTy::S2 => "choreo::s2",
        ElemTy::U2 => "choreo::u2",
        ElemTy::U1 => "choreo::u1",
        ElemTy::Bin1 => "choreo::bin1",
    }
}

/// Whether `t` is one of the class types of floats (CUDA's f16, bf16, fp8; choreo.h's fp6, fp4,
/// ue4m3, ue8m0): their operators do not mix with other types and they have no contextual
/// conversion to `bool`, so conditions and compound assignments convert them explicitly.
pub(super) fn is_class_float(t: ElemTy) -> bool {
    matches!(t, ElemTy::F16 | ElemTy::Bf16) || t.is_narrow_float()
}

pub(super) fn is_narrow_int(t: ElemTy) -> bool {
    t.is_int() && t.int_bits() < 32
}

/// The C++ type of a scalar value type (`BoundedInt` is `int`).
pub(super) fn scalar_of(ty: &Ty) -> Option<ElemTy> {
    ty.scalar()
}

/// The type both operands of a comparison are converted to (C++ usual arithmetic conversions;
/// halves are compared as `float`).
pub(super) fn comparison_type(a: ElemTy, b: ElemTy) -> ElemTy {
    if a == ElemTy::F64 || b == ElemTy::F64 {
        return ElemTy::F64;
    }
    if a.is_float() || b.is_float() {
        return ElemTy::F32;
    }
    let promote = |t: ElemTy| if t.int_bits() < 32 { ElemTy::S32 } else { t };
    let (a, b) = (promote(a), promote(b));
    if a == b {
        return a;
    }
    let (wa, wb) = (a.int_bits(), b.int_bits());
    if wa == wb {
        // One is unsigned: the unsigned type wins.
        return if a.is_signed_int() { b } else { a };
    }
    if wa > wb { a } else { b }
}

/// `text` (of type `from`) converted to `to`.
pub(super) fn conv(text: &str, from: ElemTy, to: ElemTy) -> String {
    if from == to {
        return text.to_string();
    }
    match (from, to) {
        // Narrow floats (fp8, fp6, fp4, ue4m3, ue8m0) go through f32 both ways (spec §5.7,
        // spec-tier3 §8): `float(x)` is exact, and the constructor from float rounds to nearest
        // even and saturates to the largest finite value.
        (f, ElemTy::F32) if f.is_narrow_float() => format!("static_cast<float>({text})"),
        (f, _) if f.is_narrow_float() => conv(&conv(text, from, ElemTy::F32), ElemTy::F32, to),
        (ElemTy::F32, t) if t.is_narrow_float() => format!("{}({text})", cpp_elem(to)),
        (_, t) if t.is_narrow_float() => conv(&conv(text, from, ElemTy::F32), ElemTy::F32, to),
        // bin1 converts like bool (spec-tier3 §8): nonzero is 1. Its constructors do the same;
        // said explicitly so that the C++ reads like the rule.
        (_, ElemTy::Bin1) if from != ElemTy::Bool => {
            format!("static_cast<choreo::bin1>({} ? 1 : 0)", conv(text, from, ElemTy::Bool))
        }
        (ElemTy::F16, ElemTy::F32) => format!("__half2float({text})"),
        (ElemTy::Bf16, ElemTy::F32) => format!("__bfloat162float({text})"),
        (ElemTy::F16, ElemTy::Bool) => format!("(__half2float({text}) != 0.0f)"),
        (ElemTy::Bf16, ElemTy::Bool) => format!("(__bfloat162float({text}) != 0.0f)"),
        (ElemTy::F16 | ElemTy::Bf16, _) => conv(&conv(text, from, ElemTy::F32), ElemTy::F32, to),
        (ElemTy::F64, ElemTy::F16) => format!("__double2half({text})"),
        (ElemTy::F64, ElemTy::Bf16) => format!("__double2bfloat16({text})"),
        (ElemTy::F32, ElemTy::F16) => format!("__float2half({text})"),
        (ElemTy::F32, ElemTy::Bf16) => format!("__float2bfloat16({text})"),
        (_, ElemTy::F16 | ElemTy::Bf16) => conv(&conv(text, from, ElemTy::F32), ElemTy::F32, to),
        (_, ElemTy::Bool) => format!("({text} != 0)"),
        (_, _) => format!("static_cast<{}>({text})", cpp_elem(to)),
    }
}

/// `text` without one pair of parentheses that encloses all of it (`(a && b)` → `a && b`,
/// but `(a) + (b)` stays).
pub(super) fn strip_outer_parens(text: &str) -> &str {
    let Some(inner) = text.strip_prefix('(').and_then(|t| t.strip_suffix(')')) else {
        return text;
    };
    let mut depth = 0i32;
    let mut in_string = false;
    let mut prev = '\0';
    for c in inner.chars() {
        match c {
            '"' if prev != '\\' => in_string = !in_string,
            '(' if !in_string => depth += 1,
            ')' if !in_string => {
                depth -= 1;
                if depth < 0 {
                    return text;
                }
            }
            _ => {}
        }
        prev = c;
    }
    if depth == 0 { inner } else { text }
}

pub(super) fn int_literal(v: i128, t: ElemTy) -> String {
    match t {
        ElemTy::S32 => {
            if v == i32::MIN as i128 {
                "(-2147483647 - 1)".to_string()
            } else if v < 0 {
                format!("({v})")
            } else {
                v.to_string()
            }
        }
        ElemTy::S64 => {
            if v == i64::MIN as i128 {
                "(-9223372036854775807ll - 1)".to_string()
            } else if v < 0 {
                format!("({v}ll)")
            } else {
                format!("{v}ll")
            }
        }
        ElemTy::U32 => format!("{v}u"),
        ElemTy::U64 => format!("{v}ull"),
        ElemTy::Bool => (if v != 0 { "true" } else { "false" }).to_string(),
        t if t.is_float() => {
            let text = if v < 0 { format!("({v}ll)") } else { format!("{v}ll") };
            conv(&text, ElemTy::S64, t)
        }
        t => {
            let text = if v < 0 { format!("({v}ll)") } else { format!("{v}ll") };
            format!("static_cast<{}>({text})", cpp_elem(t))
        }
    }
}

pub(super) fn float_literal(v: f64, t: ElemTy) -> String {
    let as_f32 = t != ElemTy::F64;
    let text = if v.is_nan() {
        if as_f32 { "(0.0f / 0.0f)".to_string() } else { "(0.0 / 0.0)".to_string() }
    } else if v.is_infinite() {
        let inf = if as_f32 { "HUGE_VALF" } else { "HUGE_VAL" };
        if v < 0.0 { format!("(-{inf})") } else { inf.to_string() }
    } else {
        let mut digits = if as_f32 { format!("{:?}", v as f32) } else { format!("{v:?}") };
        if !digits.contains(['.', 'e', 'E']) {
            digits.push_str(".0");
        }
        if as_f32 {
            digits.push('f');
        }
        if digits.starts_with('-') { format!("({digits})") } else { digits }
    };
    match t {
        ElemTy::F32 | ElemTy::F64 => text,
        t => conv(&text, ElemTy::F32, t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_valid_cpp() {
        assert_eq!(int_literal(-5, ElemTy::S32), "(-5)");
        assert_eq!(int_literal(i32::MIN as i128, ElemTy::S32), "(-2147483647 - 1)");
        assert_eq!(int_literal(7, ElemTy::U64), "7ull");
        assert_eq!(float_literal(1.0, ElemTy::F32), "1.0f");
        assert_eq!(float_literal(0.1, ElemTy::F32), "0.1f");
        assert_eq!(float_literal(1e-7, ElemTy::F64), "1e-7");
        assert_eq!(float_literal(-2.5, ElemTy::F64), "(-2.5)");
        assert_eq!(float_literal(f64::INFINITY, ElemTy::F32), "HUGE_VALF");
        assert_eq!(float_literal(1.5, ElemTy::F16), "__float2half(1.5f)");
    }

    #[test]
    fn outer_parens() {
        assert_eq!(strip_outer_parens("(a && b)"), "a && b");
        assert_eq!(strip_outer_parens("(a) + (b)"), "(a) + (b)");
        assert_eq!(strip_outer_parens("x"), "x");
        assert_eq!(strip_outer_parens("(f(\")\"))"), "f(\")\")");
    }

    #[test]
    fn conversions() {
        assert_eq!(conv("h", ElemTy::F16, ElemTy::F32), "__half2float(h)");
        assert_eq!(conv("x", ElemTy::S32, ElemTy::F16), "__float2half(static_cast<float>(x))");
        assert_eq!(conv("h", ElemTy::F16, ElemTy::Bf16), "__float2bfloat16(__half2float(h))");
        assert_eq!(conv("x", ElemTy::F32, ElemTy::S32), "static_cast<choreo::s32>(x)");
        assert_eq!(comparison_type(ElemTy::S32, ElemTy::U32), ElemTy::U32);
        assert_eq!(comparison_type(ElemTy::S8, ElemTy::U16), ElemTy::S32);
        assert_eq!(comparison_type(ElemTy::F16, ElemTy::S32), ElemTy::F32);
        assert_eq!(comparison_type(ElemTy::S64, ElemTy::U32), ElemTy::S64);
    }

    #[test]
    fn fp8_converts_through_f32() {
        assert_eq!(conv("x", ElemTy::F8E4m3, ElemTy::F32), "static_cast<float>(x)");
        assert_eq!(conv("f", ElemTy::F32, ElemTy::F8E5m2), "choreo::f8_e5m2(f)");
        assert_eq!(
            conv("x", ElemTy::F8E4m3, ElemTy::F8E5m2),
            "choreo::f8_e5m2(static_cast<float>(x))"
        );
        assert_eq!(conv("h", ElemTy::F16, ElemTy::F8E4m3), "choreo::f8_e4m3(__half2float(h))");
        assert_eq!(
            conv("x", ElemTy::F8E4m3, ElemTy::Bf16),
            "__float2bfloat16(static_cast<float>(x))"
        );
        assert_eq!(
            conv("d", ElemTy::F64, ElemTy::F8E4m3),
            "choreo::f8_e4m3(static_cast<float>(d))"
        );
        assert_eq!(
            conv("x", ElemTy::F8E5m2, ElemTy::S32),
            "static_cast<choreo::s32>(static_cast<float>(x))"
        );
        assert_eq!(conv("x", ElemTy::F8E4m3, ElemTy::Bool), "(static_cast<float>(x) != 0)");
        assert_eq!(float_literal(1.5, ElemTy::F8E4m3), "choreo::f8_e4m3(1.5f)");
        assert_eq!(comparison_type(ElemTy::F8E4m3, ElemTy::F8E5m2), ElemTy::F32);
    }

    #[test]
    fn narrow_types_convert_through_f32_and_int() {
        assert_eq!(conv("x", ElemTy::F4E2m1, ElemTy::F32), "static_cast<float>(x)");
        assert_eq!(conv("f", ElemTy::F32, ElemTy::F6E2m3), "choreo::f6_e2m3(f)");
        assert_eq!(
            conv("x", ElemTy::F8Ue8m0, ElemTy::F6E3m2),
            "choreo::f6_e3m2(static_cast<float>(x))"
        );
        assert_eq!(conv("x", ElemTy::S4, ElemTy::F4E2m1), "choreo::f4_e2m1(static_cast<float>(x))");
        assert_eq!(
            conv("x", ElemTy::F8Ue4m3, ElemTy::U4),
            "static_cast<choreo::u4>(static_cast<float>(x))"
        );
        assert_eq!(conv("x", ElemTy::S32, ElemTy::S4), "static_cast<choreo::s4>(x)");
        assert_eq!(conv("x", ElemTy::S4, ElemTy::S32), "static_cast<choreo::s32>(x)");
        assert_eq!(
            conv("x", ElemTy::S32, ElemTy::Bin1),
            "static_cast<choreo::bin1>((x != 0) ? 1 : 0)"
        );
        assert_eq!(float_literal(1.5, ElemTy::F4E2m1), "choreo::f4_e2m1(1.5f)");
        assert!(is_class_float(ElemTy::F8Ue8m0) && !is_class_float(ElemTy::S4));
        assert!(is_narrow_int(ElemTy::U2));
        assert_eq!(comparison_type(ElemTy::S4, ElemTy::U4), ElemTy::S32);
    }
}
