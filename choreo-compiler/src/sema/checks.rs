//! Parameters, symbolic dimensions, entry checks and the declared return type (spec §7.2,
//! §7.3, §19.2).

use super::scope::Symbol;
use super::types;
use super::{Checker, RetState, ordinal};
use crate::ast::{self, ExprKind, ParamDim, ParamShape, TypeExpr};
use crate::hir::{
    Access, Check, CheckKind, Dim, HExpr, HExprKind, ParamId, ParamKind, ReturnTy, SymDim, SymId,
};
use crate::source::Span;
use std::collections::BTreeMap;

/// Evaluates a constant parameter dimension expression (literals and `+ - * / %`).
pub(crate) enum ConstDim {
    /// The value.
    Value(i128),
    /// A name or another non-constant form, at this span.
    NotConstant(Span),
    /// A division by zero at this span.
    DivByZero(Span),
}

pub(crate) fn eval_const_dim(e: &ast::Expr) -> ConstDim {
    // C semantics on 64-bit integers (the widest type a literal of a dimension has).
    let value = |e: &ast::Expr| match eval_const_dim(e) {
        ConstDim::Value(v) => Ok(v as i64),
        other => Err(other),
    };
    let v = |x: i64| ConstDim::Value(i128::from(x));
    match &e.kind {
        ExprKind::Int(lit) => ConstDim::Value(lit.value),
        ExprKind::Unary { op, operand } => {
            let x = match value(operand) {
                Ok(x) => x,
                Err(other) => return other,
            };
            match op {
                ast::UnaryOp::Neg => v(x.wrapping_neg()),
                ast::UnaryOp::BitNot => v(!x),
                ast::UnaryOp::Not => v(i64::from(x == 0)),
                _ => ConstDim::NotConstant(e.span),
            }
        }
        ExprKind::Ternary { cond, then_value, else_value } => match value(cond) {
            Ok(c) => eval_const_dim(if c != 0 { then_value } else { else_value }),
            Err(other) => other,
        },
        ExprKind::Binary { op, lhs, rhs } => {
            let x = match value(lhs) {
                Ok(x) => x,
                Err(other) => return other,
            };
            let y = match value(rhs) {
                Ok(y) => y,
                Err(other) => return other,
            };
            match op {
                ast::BinaryOp::Add => v(x.wrapping_add(y)),
                ast::BinaryOp::Sub => v(x.wrapping_sub(y)),
                ast::BinaryOp::Mul => v(x.wrapping_mul(y)),
                ast::BinaryOp::Div | ast::BinaryOp::Rem if y == 0 => ConstDim::DivByZero(e.span),
                ast::BinaryOp::Div => v(x.wrapping_div(y)),
                ast::BinaryOp::Rem => v(x.wrapping_rem(y)),
                ast::BinaryOp::Shl | ast::BinaryOp::Shr if !(0..64).contains(&y) => {
                    ConstDim::NotConstant(rhs.span)
                }
                ast::BinaryOp::Shl => v(x.wrapping_shl(y as u32)),
                ast::BinaryOp::Shr => v(x >> y),
                ast::BinaryOp::BitAnd => v(x & y),
                ast::BinaryOp::BitOr => v(x | y),
                ast::BinaryOp::BitXor => v(x ^ y),
                ast::BinaryOp::Eq => v(i64::from(x == y)),
                ast::BinaryOp::Ne => v(i64::from(x != y)),
                ast::BinaryOp::Lt => v(i64::from(x < y)),
                ast::BinaryOp::Le => v(i64::from(x <= y)),
                ast::BinaryOp::Gt => v(i64::from(x > y)),
                ast::BinaryOp::Ge => v(i64::from(x >= y)),
                ast::BinaryOp::And => v(i64::from(x != 0 && y != 0)),
                ast::BinaryOp::Or => v(i64::from(x != 0 || y != 0)),
                _ => ConstDim::NotConstant(e.span),
            }
        }
        _ => ConstDim::NotConstant(e.span),
    }
}

impl Checker<'_> {
    /// Checks a constant extent of a parameter or return type; `None` after an error.
    fn const_extent(&mut self, e: &ast::Expr) -> Option<u64> {
        match eval_const_dim(e) {
            ConstDim::Value(v) if v > 0 => Some(v as u64),
            ConstDim::Value(v) => {
                self.error_label(
                    "E0504",
                    e.span,
                    format!("The mdspan size \"{v}\" is invalid!"),
                    "extents must be positive",
                );
                None
            }
            ConstDim::NotConstant(span) => {
                self.error_label(
                    "E0505",
                    span,
                    "a parameter dimension must be a name, `?`, `??` or a constant integer \
                     expression",
                    "not a constant",
                );
                None
            }
            ConstDim::DivByZero(span) => {
                self.div_by_zero(span);
                None
            }
        }
    }

    /// Checks that an element type is implemented (tier 1 or fp8, see
    /// [`crate::hir::ElemTy::is_implemented`]); `false` after reporting `E0901` otherwise.
    pub(crate) fn implemented_elem(&mut self, t: crate::hir::ElemTy, span: Span) -> bool {
        if !t.is_implemented() {
            self.unsupported(span, &format!("element type '{}'", t.as_str()), types::elem_tier(t));
            return false;
        }
        true
    }

    /// Checks the target type of `__to<T>` (spec-tier3 §8, §0): never a sub-byte integer or
    /// bool (`E0428`), and `f8_ue4m3`, `f8_ue8m0`, `f6_*`, `f4_e2m1` only on sm_90 and later
    /// (`E0470`; the CPU target has them all). `false` after reporting.
    pub(crate) fn cast_target_ok(&mut self, to: crate::hir::ElemTy, span: Span) -> bool {
        if to.is_subbyte_int() || to == crate::hir::ElemTy::Bool {
            self.error_label(
                "E0428",
                span,
                format!(
                    "'__to' does not convert to '{}': sub-byte integers and bool are never \
                     '__to' targets (an assignment converts instead)",
                    to.as_str()
                ),
                "a sub-byte integer or bool",
            );
            return false;
        }
        if let Some(arch) = self.target.arch().filter(|a| to.is_tier3_float() && a.sm() < 90) {
            self.diags.push(
                crate::diagnostics::Diagnostic::error(
                    "E0470",
                    span,
                    format!(
                        "the target type '{}' of '__to' is not supported by the target \
                         architecture {arch}: it needs sm_90 or newer",
                        to.as_str()
                    ),
                )
                .with_label(format!("needs sm_90 or newer, compiling for {arch}"))
                .with_help("compile with `--arch sm_90a` (or sm_90, sm_100, sm_120)"),
            );
            return false;
        }
        true
    }

    /// Checks the parameter list: kinds, dims, symbolic dimensions, entry checks; declares
    /// parameters and symbols in the function scope.
    pub(crate) fn check_params(&mut self, f: &ast::CoFunction) {
        // Symbol names, in order of first mention, to sort and number them first.
        let mut first: BTreeMap<String, (usize, u32, Span)> = BTreeMap::new();
        for (pi, p) in f.params.iter().enumerate() {
            if let TypeExpr::Spanned { shape: ParamShape::Dims(dims), .. } = &p.ty {
                for (di, d) in dims.iter().enumerate() {
                    if let ParamDim::Symbol(id) = d {
                        first.entry(id.name.clone()).or_insert((pi, di as u32, id.span));
                    }
                }
            }
        }
        for (i, (name, (pi, di, span))) in first.iter().enumerate() {
            let id = SymId(i as u32);
            self.syms.push(SymDim {
                name: name.clone(),
                bound_from: (ParamId(*pi as u32), *di),
                span: *span,
            });
            self.sym_names.insert(name.clone(), id);
        }

        let mut anon = 0u32;
        let mut ordered_checks = Vec::new();
        for (pi, p) in f.params.iter().enumerate() {
            let pid = ParamId(pi as u32);
            let (name, named) = match &p.name {
                Some(id) => (id.name.clone(), true),
                None => {
                    let n = format!("anon_{anon}");
                    anon += 1;
                    (n, false)
                }
            };
            let mut elem = None;
            let mut dims = Vec::new();
            let mut unbounded = Vec::new();
            let kind = match &p.ty {
                TypeExpr::Scalar(st, span) => {
                    let t = types::scalar_from_ast(*st);
                    self.implemented_elem(t, *span);
                    if let Some(r) = p.by_ref {
                        self.error_label(
                            "E0501",
                            r,
                            "Scalar parameter is not supported to be passed by reference for now.",
                            "scalar passed by reference",
                        );
                    }
                    if let Some(g) = p.global {
                        self.error_label(
                            "E0515",
                            g,
                            format!("the scalar parameter '{name}' can not be global"),
                            "only spanned parameters can be global",
                        );
                    }
                    ParamKind::Scalar(t)
                }
                TypeExpr::Stream(_) => {
                    if let Some(r) = p.by_ref {
                        self.error_label(
                            "E0515",
                            r,
                            "a stream parameter can not be passed by reference",
                            "stream passed by reference",
                        );
                    }
                    if let Some(g) = p.global {
                        self.error_label(
                            "E0515",
                            g,
                            "a stream parameter can not be global",
                            "only spanned parameters can be global",
                        );
                    }
                    ParamKind::Stream
                }
                TypeExpr::Spanned { elem: e, elem_span, shape, .. } => {
                    let t = types::elem_from_token(*e);
                    self.implemented_elem(t, *elem_span);
                    elem = Some(t);
                    match shape {
                        ParamShape::Rank { rank, span } => {
                            if *rank == 0 || *rank > 16 {
                                self.error_label(
                                    "E0419",
                                    *span,
                                    format!("invalid rank {rank} of a parameter shape"),
                                    "invalid rank",
                                );
                            }
                            for d in 0..(*rank).min(16) as u32 {
                                dims.push(Dim::Dynamic { param: pid, dim: d });
                                unbounded.push(false);
                            }
                        }
                        ParamShape::Dims(pdims) => {
                            for (di, d) in pdims.iter().enumerate() {
                                let di = di as u32;
                                let mut is_unbounded = false;
                                let dim = match d {
                                    ParamDim::Dynamic(_) => Dim::Dynamic { param: pid, dim: di },
                                    ParamDim::Unbounded(s) => {
                                        if p.global.is_none() {
                                            self.error_label(
                                                "E0503",
                                                *s,
                                                "The parameter with an unbounded dimension must \
                                                 be global.",
                                                "`??` needs a `global` parameter",
                                            );
                                        }
                                        is_unbounded = true;
                                        Dim::Dynamic { param: pid, dim: di }
                                    }
                                    ParamDim::Symbol(id) => {
                                        let sid = self.sym_names.get(&id.name).copied();
                                        match sid {
                                            Some(s) => {
                                                let bound = self.syms[s.index()].bound_from;
                                                if bound != (pid, di) {
                                                    let (bp, bd) = bound;
                                                    ordered_checks.push(Check {
                                                        kind: CheckKind::SymbolConsistent {
                                                            sym: s,
                                                            param: pid,
                                                            dim: di,
                                                        },
                                                        message: format!(
                                                            "The shapes of the {} parameter \
                                                             (dim: {bd}) and the {} parameter \
                                                             (dim: {di}) are inconsistent.",
                                                            ordinal(bp.index() + 1),
                                                            ordinal(pi + 1)
                                                        ),
                                                        span: id.span,
                                                    });
                                                }
                                                Dim::Sym(s)
                                            }
                                            None => Dim::Dynamic { param: pid, dim: di },
                                        }
                                    }
                                    ParamDim::Const(e) => match self.const_extent(e) {
                                        Some(v) => {
                                            ordered_checks.push(Check {
                                                kind: CheckKind::ParamExtent {
                                                    param: pid,
                                                    dim: di,
                                                    expected: v,
                                                },
                                                message: format!(
                                                    "shape inconsistent on the {} parameter \
                                                     ('{name}', dim: {di}): expect: {v}, but got",
                                                    ordinal(pi + 1)
                                                ),
                                                span: e.span,
                                            });
                                            Dim::Const(v)
                                        }
                                        None => Dim::Const(1),
                                    },
                                };
                                dims.push(dim);
                                unbounded.push(is_unbounded);
                            }
                        }
                    }
                    match (p.global, p.by_ref) {
                        (Some(_), Some(r)) => {
                            self.error_label(
                                "E0502",
                                r,
                                format!(
                                    "The parameter '{name}' is global, which is not allowed to \
                                     be passed by reference."
                                ),
                                "global passed by reference",
                            );
                            ParamKind::Global
                        }
                        (Some(_), None) => ParamKind::Global,
                        (None, Some(_)) => {
                            self.has_inout = true;
                            ParamKind::HostInOut
                        }
                        (None, None) => ParamKind::HostIn,
                    }
                }
            };
            self.params.push(crate::hir::Param {
                name: name.clone(),
                named,
                span: p.span,
                kind,
                elem,
                dims,
                unbounded,
                access: Access::default(),
            });
            if let Some(id) = &p.name {
                if let Some(prev) = self.scopes.declared_here(&id.name) {
                    self.diags.push(
                        crate::diagnostics::Diagnostic::error(
                            "E0402",
                            id.span,
                            format!("symbol `{}' has been declared already.", id.name),
                        )
                        .with_label("declared again here")
                        .with_secondary(prev, "first declared here"),
                    );
                } else {
                    self.scopes.declare(&id.name, Symbol::Param(pid), id.span);
                }
            }
        }
        // Symbols must not clash with parameter names.
        for (i, s) in self.syms.clone().iter().enumerate() {
            if let Some(prev) = self.scopes.declared_here(&s.name) {
                self.diags.push(
                    crate::diagnostics::Diagnostic::error(
                        "E0506",
                        s.span,
                        format!("symbol `{}' has been declared already.", s.name),
                    )
                    .with_label("symbolic dimension named like a parameter")
                    .with_secondary(prev, "parameter declared here"),
                );
            } else {
                self.scopes.declare(&s.name, Symbol::Sym(SymId(i as u32)), s.span);
            }
        }
        self.entry_checks.extend(ordered_checks);
    }

    /// Checks the declared return type.
    pub(crate) fn check_return_type(&mut self, f: &ast::CoFunction) -> RetState {
        match &f.ret {
            ast::ReturnType::Void(_) => RetState::Void,
            ast::ReturnType::Auto(_) => RetState::Auto(None),
            ast::ReturnType::Type(TypeExpr::Scalar(st, span)) => {
                let t = types::scalar_from_ast(*st);
                self.implemented_elem(t, *span);
                RetState::Declared(ReturnTy::Scalar(t))
            }
            ast::ReturnType::Type(TypeExpr::Stream(span)) => {
                self.error_label(
                    "E0512",
                    *span,
                    "returning value with type 'stream' is not supported.",
                    "unsupported return type",
                );
                RetState::Declared(ReturnTy::Void)
            }
            ast::ReturnType::Type(TypeExpr::Spanned { elem, elem_span, shape, .. }) => {
                let elem = types::elem_from_token(*elem);
                self.implemented_elem(elem, *elem_span);
                let mut dims = Vec::new();
                match shape {
                    ParamShape::Rank { rank, span } => {
                        if *rank == 0 || *rank > 16 {
                            self.error_label(
                                "E0419",
                                *span,
                                format!("invalid rank {rank} of a return shape"),
                                "invalid rank",
                            );
                        }
                        // Extents come from the returned value (spec §7.3).
                        return RetState::RankOnly {
                            elem,
                            rank: (*rank).min(16) as usize,
                            dims: None,
                        };
                    }
                    ParamShape::Dims(pdims) => {
                        for d in pdims {
                            match d {
                                ParamDim::Dynamic(s) | ParamDim::Unbounded(s) => {
                                    self.error_label(
                                        "E0508",
                                        *s,
                                        "a dynamic (`?`) dimension is not supported in a return \
                                         type",
                                        "dynamic extent",
                                    );
                                    dims.push(Dim::Const(1));
                                }
                                ParamDim::Symbol(id) => match self.sym_names.get(&id.name) {
                                    Some(s) => dims.push(Dim::Sym(*s)),
                                    None => {
                                        self.error_label(
                                            "E0507",
                                            id.span,
                                            format!(
                                                "symbol `{}' is used before declaration.",
                                                id.name
                                            ),
                                            "no parameter introduces this dimension",
                                        );
                                        dims.push(Dim::Const(1));
                                    }
                                },
                                ParamDim::Const(e) => {
                                    dims.push(Dim::Const(self.const_extent(e).unwrap_or(1)))
                                }
                            }
                        }
                    }
                }
                RetState::Declared(ReturnTy::Spanned { elem, dims })
            }
        }
    }

    /// Whether an expression can be evaluated at function entry (only parameters, symbols,
    /// extents and constants).
    pub(crate) fn entry_evaluable(e: &HExpr) -> bool {
        match &e.kind {
            HExprKind::Int(_)
            | HExprKind::Float(_)
            | HExprKind::Bool(_)
            | HExprKind::Param(_)
            | HExprKind::SymDim(_)
            | HExprKind::ParamExtent { .. } => true,
            HExprKind::Unary { operand, .. }
            | HExprKind::Cast { operand, .. }
            | HExprKind::CppCast { operand, .. } => Self::entry_evaluable(operand),
            HExprKind::Binary { lhs, rhs, .. } | HExprKind::Cdiv(lhs, rhs) => {
                Self::entry_evaluable(lhs) && Self::entry_evaluable(rhs)
            }
            HExprKind::Ternary { cond, then_value, else_value } => {
                Self::entry_evaluable(cond)
                    && Self::entry_evaluable(then_value)
                    && Self::entry_evaluable(else_value)
            }
            HExprKind::Math { args, .. } => args.iter().all(Self::entry_evaluable),
            _ => false,
        }
    }
}
