//! Expressions, conditions, assignments and `print` as C++ (the same text in host and device
//! code).

use super::FnEmitter;
use super::types::{
    comparison_type, conv, cpp_elem, float_literal, int_literal, is_class_float, is_narrow_int,
    scalar_of, strip_outer_parens,
};
use super::writer::c_escape;
use crate::hir::{
    AssignOp, AtomicOp, BinOp, ElemTy, HExpr, HExprKind, LocalOrigin, LocalPlace, MathFn,
    ParamKind, TemplateArg, Ty, UnOp,
};
use crate::source::Span;

/// `atomicOp(&element, args…)` with the pointer type CUDA's overloads take (`int`,
/// `unsigned`, `unsigned long long`, `long long`, `float`, `double`, `__half`,
/// `unsigned short`).
fn atomic_call(op: AtomicOp, elem: ElemTy, element: &str, args: &[String]) -> String {
    let name = match op {
        AtomicOp::Add => "atomicAdd",
        AtomicOp::Sub => "atomicSub",
        AtomicOp::Exch => "atomicExch",
        AtomicOp::Min => "atomicMin",
        AtomicOp::Max => "atomicMax",
        AtomicOp::And => "atomicAnd",
        AtomicOp::Or => "atomicOr",
        AtomicOp::Xor => "atomicXor",
        AtomicOp::Cas => "atomicCAS",
    };
    let cuda_type = match elem {
        ElemTy::S32 => "int",
        ElemTy::U32 => "unsigned int",
        ElemTy::U64 => "unsigned long long",
        ElemTy::S64 => "long long",
        ElemTy::U16 => "unsigned short int",
        ElemTy::F32 => "float",
        ElemTy::F64 => "double",
        _ => "__half",
    };
    let elem_cpp = cpp_elem(elem);
    let args: Vec<String> = args.iter().map(|a| format!("static_cast<{cuda_type}>({a})")).collect();
    format!(
        "static_cast<{elem_cpp}>({name}(reinterpret_cast<{cuda_type}*>(&{element}), {}))",
        args.join(", ")
    )
}

impl FnEmitter<'_, '_> {
    pub(super) fn expr(&mut self, e: &HExpr) -> String {
        let ty = scalar_of(&e.ty);
        match &e.kind {
            HExprKind::Int(v) => int_literal(*v, ty.unwrap_or(ElemTy::S32)),
            HExprKind::Float(v) => float_literal(*v, ty.unwrap_or(ElemTy::F64)),
            HExprKind::Bool(b) => {
                let text = if *b { "true" } else { "false" };
                conv(text, ElemTy::Bool, ty.unwrap_or(ElemTy::Bool))
            }
            HExprKind::Var(v) => match self.f.local(*v) {
                Some(l) if matches!(l.place, LocalPlace::Expanded) => {
                    self.bug(e.span, "a tuple name used as a value");
                    "0".to_string()
                }
                Some(_) => self.names().local(*v).to_string(),
                None => {
                    self.bug(e.span, "an unknown local");
                    "0".to_string()
                }
            },
            HExprKind::Param(p) => match self.f.param(*p) {
                Some(param) if param.kind == ParamKind::Stream => {
                    self.bug(e.span, "a stream used as a value");
                    "0".to_string()
                }
                Some(_) => self.param_name(*p),
                None => {
                    self.bug(e.span, "an unknown parameter");
                    "0".to_string()
                }
            },
            HExprKind::SymDim(s) => format!("static_cast<int>({})", self.names().sym(*s)),
            HExprKind::ParamExtent { param, dim } => {
                format!("static_cast<int>({})", self.names().extent(*param, *dim))
            }
            HExprKind::Unary { op, operand } => {
                let ot = scalar_of(&operand.ty).unwrap_or(ElemTy::S32);
                let rt = ty.unwrap_or(ot);
                let inner = self.expr(operand);
                match op {
                    UnOp::Not => format!("(!{})", conv(&inner, ot, ElemTy::Bool)),
                    UnOp::BitNot | UnOp::Neg => {
                        let text = format!("({}{})", op.as_str(), conv(&inner, ot, rt));
                        if is_narrow_int(rt) { conv(&text, ElemTy::S32, rt) } else { text }
                    }
                }
            }
            HExprKind::Binary { op, lhs, rhs } => self.binary(e, *op, lhs, rhs),
            HExprKind::Ternary { cond, then_value, else_value } => {
                let rt = ty.unwrap_or(ElemTy::S32);
                let ct = scalar_of(&cond.ty).unwrap_or(ElemTy::Bool);
                let c = self.expr(cond);
                let c = if is_class_float(ct) { conv(&c, ct, ElemTy::Bool) } else { c };
                let a = self.converted(then_value, rt);
                let b = self.converted(else_value, rt);
                format!("({c} ? {a} : {b})")
            }
            HExprKind::Cdiv(a, b) => {
                let rt = ty.unwrap_or(ElemTy::S32);
                let a = self.converted(a, rt);
                let b = self.converted(b, rt);
                format!("(({a} + {b} - 1) / {b})")
            }
            HExprKind::At { buffer, index, id } => {
                let element = self.element(e.span, *buffer, index);
                match self.bounds_guard(*id, *buffer, index) {
                    // A skipped read gives zero; the call fails anyway.
                    Some(guard) => {
                        let elem = cpp_elem(self.elem_of_buffer(*buffer).unwrap_or(ElemTy::S32));
                        format!("({guard} ? {element} : {elem}{{}})")
                    }
                    None => element,
                }
            }
            HExprKind::Math { func, args } => self.math(e, *func, args),
            HExprKind::Address { buffer, index } => {
                let element = self.element(e.span, *buffer, index);
                format!("(&{element})")
            }
            HExprKind::Null => "nullptr".to_string(),
            HExprKind::Select { index, options } => {
                // `(i == 0 ? a : i == 1 ? b : c)`: the index is proven in range, so the last
                // option needs no test.
                let i = self.converted(index, ElemTy::S32);
                let last = options.len().saturating_sub(1);
                let mut text = String::from("(");
                for (k, o) in options.iter().enumerate() {
                    let address = self.expr(o);
                    if k < last {
                        text.push_str(&format!("{i} == {k} ? {address} : "));
                    } else {
                        text.push_str(&address);
                    }
                }
                text.push(')');
                text
            }
            HExprKind::Call { callee, targs, args } => {
                let args: Vec<String> = args.iter().map(|a| self.expr(a)).collect();
                let targs: Vec<String> = targs
                    .iter()
                    .map(|t| match t {
                        TemplateArg::Type(t) => cpp_elem(*t).to_string(),
                        TemplateArg::Int(v) => v.to_string(),
                        TemplateArg::Name(n) => n.clone(),
                    })
                    .collect();
                let targs = if targs.is_empty() {
                    String::new()
                } else {
                    format!("<{}>", targs.join(", "))
                };
                format!("{callee}{targs}({})", args.join(", "))
            }
            HExprKind::Atomic { op, buffer, index, id, args } => {
                let elem = self.elem_of_buffer(*buffer).unwrap_or(ElemTy::S32);
                let element = self.element(e.span, *buffer, index);
                let args: Vec<String> = args.iter().map(|a| self.converted(a, elem)).collect();
                let call = atomic_call(*op, elem, &element, &args);
                match self.bounds_guard(*id, *buffer, index) {
                    // A skipped update gives zero; the call fails anyway.
                    Some(guard) => format!("({guard} ? {call} : {}{{}})", cpp_elem(elem)),
                    None => call,
                }
            }
            HExprKind::Cast { to, operand, .. } => {
                let from = scalar_of(&operand.ty).unwrap_or(*to);
                let inner = self.expr(operand);
                conv(&inner, from, *to)
            }
            HExprKind::CppCast { cpp_type, operand } => {
                let inner = self.expr(operand);
                format!("(({cpp_type})({inner}))")
            }
            HExprKind::Str(_) | HExprKind::Ituple(_) | HExprKind::Mdspan(_) => {
                self.bug(e.span, "a string, ituple or mdspan used as a value");
                "0".to_string()
            }
            HExprKind::Error => {
                self.bug(e.span, "an expression with an error");
                "0".to_string()
            }
        }
    }

    /// `e` converted to `to`.
    pub(super) fn converted(&mut self, e: &HExpr, to: ElemTy) -> String {
        let from = scalar_of(&e.ty).unwrap_or(to);
        let text = self.expr(e);
        conv(&text, from, to)
    }

    pub(super) fn binary(&mut self, e: &HExpr, op: BinOp, lhs: &HExpr, rhs: &HExpr) -> String {
        let lt = scalar_of(&lhs.ty).unwrap_or(ElemTy::S32);
        let rt = scalar_of(&rhs.ty).unwrap_or(ElemTy::S32);
        let s = op.as_str();
        match op {
            BinOp::And | BinOp::Or => {
                let l = self.converted(lhs, ElemTy::Bool);
                let r = self.converted(rhs, ElemTy::Bool);
                format!("({l} {s} {r})")
            }
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                let c = comparison_type(lt, rt);
                let l = self.converted(lhs, c);
                let r = self.converted(rhs, c);
                format!("({l} {s} {r})")
            }
            BinOp::Shl | BinOp::Shr => {
                let res = scalar_of(&e.ty).unwrap_or(lt);
                let l = self.converted(lhs, res);
                let r = self.expr(rhs);
                let text = format!("({l} {s} {r})");
                if is_narrow_int(res) { conv(&text, ElemTy::S32, res) } else { text }
            }
            _ => {
                let res = scalar_of(&e.ty).unwrap_or(lt);
                let l = self.converted(lhs, res);
                let r = self.converted(rhs, res);
                let text = format!("({l} {s} {r})");
                if is_narrow_int(res) { conv(&text, ElemTy::S32, res) } else { text }
            }
        }
    }

    pub(super) fn math(&mut self, e: &HExpr, func: MathFn, args: &[HExpr]) -> String {
        if args.len() != func.arity() {
            self.bug(e.span, "a math built-in with a wrong number of arguments");
            return "0".to_string();
        }
        let rt = scalar_of(&e.ty).unwrap_or(ElemTy::F32);
        let arg_types: Vec<ElemTy> =
            args.iter().map(|a| scalar_of(&a.ty).unwrap_or(ElemTy::F32)).collect();
        let all_int = arg_types.iter().all(|t| t.is_int());
        let int_form = match func {
            MathFn::Max if all_int && rt.is_int() => Some("__choreo_imax"),
            MathFn::Min if all_int && rt.is_int() => Some("__choreo_imin"),
            MathFn::Sign if all_int && rt.is_int() => Some("__choreo_isign"),
            MathFn::Alignup => Some("__choreo_alignup"),
            MathFn::Aligndown => Some("__choreo_aligndown"),
            _ => None,
        };
        if let Some(helper) = int_form {
            let t = if rt.is_int() { rt } else { ElemTy::S64 };
            let parts: Vec<String> = args.iter().map(|a| self.converted(a, t)).collect();
            let call = format!("::{helper}({})", parts.join(", "));
            return conv(&call, t, rt);
        }
        let compute = if rt == ElemTy::F64 || arg_types.contains(&ElemTy::F64) {
            ElemTy::F64
        } else {
            ElemTy::F32
        };
        let helper = match func {
            MathFn::Sqrt => "sqrt",
            MathFn::Rsqrt => "rsqrt",
            MathFn::Exp => "exp",
            MathFn::Exp2f => "exp2",
            MathFn::Expm1 => "expm1",
            MathFn::Log => "log",
            MathFn::Log1p => "log1p",
            MathFn::Pow => "pow",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Tan => "tan",
            MathFn::Asin => "asin",
            MathFn::Acos => "acos",
            MathFn::Atan => "atan",
            MathFn::Atan2 => "atan2",
            MathFn::Sinh => "sinh",
            MathFn::Cosh => "cosh",
            MathFn::Tanh => "tanh",
            MathFn::Ceil => "ceil",
            MathFn::Floor => "floor",
            MathFn::Round => "round",
            MathFn::Fabs => "fabs",
            MathFn::Sign => "sign",
            MathFn::Isfinite => "isfinite",
            MathFn::Max => "max",
            MathFn::Min => "min",
            MathFn::Fmaf => "fma",
            MathFn::FrcpRn => "frcp_rn",
            MathFn::Gelu => "gelu",
            MathFn::Sigmoid => "sigmoid",
            MathFn::Softplus => "softplus",
            MathFn::Alignup | MathFn::Aligndown => "unreachable",
        };
        let parts: Vec<String> = args.iter().map(|a| self.converted(a, compute)).collect();
        let call = format!("::__choreo_{helper}({})", parts.join(", "));
        let produced = if func == MathFn::Isfinite { ElemTy::Bool } else { compute };
        conv(&call, produced, rt)
    }

    // -- print ------------------------------------------------------------------------------

    /// `device`: printed by a kernel (on the CPU, through the executing thread, which keeps
    /// the output of a launch in block order).
    pub(super) fn print(
        &mut self,
        span: Span,
        newline: bool,
        args: &[HExpr],
        device: bool,
    ) -> String {
        let mut format = String::new();
        let mut values: Vec<String> = Vec::new();
        for a in args {
            self.print_arg(a, &mut format, &mut values);
        }
        if newline {
            format.push_str("\\n");
        }
        if format.is_empty() && values.is_empty() {
            // printf("") is legal but draws a warning; print nothing explicitly.
            let _ = span;
            return "(void)0;".to_string();
        }
        let printf = self.printf(device);
        let mut text = format!("{printf}(\"{format}\"");
        for v in values {
            text.push_str(", ");
            text.push_str(&v);
        }
        text.push_str(");");
        text
    }

    pub(super) fn print_arg(&mut self, a: &HExpr, format: &mut String, values: &mut Vec<String>) {
        match &a.kind {
            HExprKind::Str(s) => format.push_str(&c_escape(s, true)),
            HExprKind::Ituple(items) => {
                format.push('{');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        format.push_str(", ");
                    }
                    format.push_str("%lld");
                    let v = self.expr(item);
                    values.push(format!("static_cast<long long>({v})"));
                }
                format.push('}');
            }
            HExprKind::Mdspan(dims) => {
                format.push('[');
                for (i, d) in dims.iter().enumerate() {
                    if i > 0 {
                        format.push_str(", ");
                    }
                    format.push_str("%lld");
                    let v = self.dim_raw(d);
                    values.push(format!("static_cast<long long>({v})"));
                }
                format.push(']');
            }
            HExprKind::Var(v)
                if matches!(
                    self.f.local(*v).map(|l| &l.origin),
                    Some(LocalOrigin::Tuple { .. })
                ) =>
            {
                let components = match self.f.local(*v).map(|l| &l.origin) {
                    Some(LocalOrigin::Tuple { components }) => components.clone(),
                    _ => Vec::new(),
                };
                format.push('{');
                for (i, c) in components.iter().enumerate() {
                    if i > 0 {
                        format.push_str(", ");
                    }
                    format.push_str("%lld");
                    values.push(format!("static_cast<long long>({})", self.names().local(*c)));
                }
                format.push('}');
            }
            _ => match &a.ty {
                Ty::BoundedInt => {
                    format.push_str("{%lld}");
                    let v = self.expr(a);
                    values.push(format!("static_cast<long long>({v})"));
                }
                Ty::Scalar(ElemTy::Bool) => {
                    format.push_str("%s");
                    let v = self.expr(a);
                    values.push(format!("({v} ? \"true\" : \"false\")"));
                }
                Ty::Scalar(t) if t.is_float() => {
                    format.push_str("%f");
                    let target = if *t == ElemTy::F64 { ElemTy::F64 } else { ElemTy::F32 };
                    let v = self.converted(a, target);
                    values.push(format!("static_cast<double>({v})"));
                }
                Ty::Scalar(t) if t.is_int() && !t.is_signed_int() => {
                    format.push_str("%llu");
                    let v = self.expr(a);
                    values.push(format!("static_cast<unsigned long long>({v})"));
                }
                Ty::Scalar(t) if t.is_int() => {
                    format.push_str("%lld");
                    let v = self.expr(a);
                    values.push(format!("static_cast<long long>({v})"));
                }
                Ty::Pointer(_) => {
                    format.push_str("%p");
                    let v = self.expr(a);
                    values.push(format!("static_cast<const void*>({v})"));
                }
                _ => self.bug(a.span, "a print argument of a type that cannot be printed"),
            },
        }
    }

    pub(super) fn condition(&mut self, cond: &HExpr) -> String {
        let t = scalar_of(&cond.ty).unwrap_or(ElemTy::Bool);
        let text = self.expr(cond);
        let text = if is_class_float(t) { conv(&text, t, ElemTy::Bool) } else { text };
        strip_outer_parens(&text).to_string()
    }

    pub(super) fn assignment(
        &mut self,
        target: &str,
        tt: ElemTy,
        op: AssignOp,
        value: &HExpr,
    ) -> String {
        let vt = scalar_of(&value.ty).unwrap_or(tt);
        if op == AssignOp::Assign {
            let v = self.converted(value, tt);
            return format!("{target} = {v};");
        }
        let bin = match op {
            AssignOp::Add => "+",
            AssignOp::Sub => "-",
            AssignOp::Mul => "*",
            AssignOp::Div => "/",
            AssignOp::Rem => "%",
            AssignOp::Assign => "=",
        };
        if is_class_float(tt) || is_class_float(vt) {
            // Explicit conversions: the operators of CUDA's half and fp8 types do not mix with
            // other types (fp8 has none that store back into fp8).
            let p = if tt == ElemTy::F64 || vt == ElemTy::F64 { ElemTy::F64 } else { ElemTy::F32 };
            let l = conv(target, tt, p);
            let v = self.converted(value, p);
            let result = conv(&format!("({l} {bin} {v})"), p, tt);
            return format!("{target} = {result};");
        }
        if tt.is_subbyte_int() || vt.is_subbyte_int() {
            // choreo.h's sub-byte integers have no compound assignments: compute in the common
            // type (int or wider) and store back, keeping the low bits (spec-tier3 §8).
            let p = comparison_type(tt, vt);
            let l = conv(target, tt, p);
            let v = self.converted(value, p);
            let result = conv(&format!("({l} {bin} {v})"), p, tt);
            return format!("{target} = {result};");
        }
        let v = self.expr(value);
        format!("{target} {} {v};", op.as_str())
    }
}
