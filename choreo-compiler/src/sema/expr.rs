//! Expressions (spec §4.5, §5.3–§5.4, §12, §13.1–§13.2, §18).

use super::fold::{self, FoldError};
use super::scope::Symbol;
use super::shapes::{dim_to_expr, expr_to_dim};
use super::types::{self, Promoted};
use super::{Checker, Val};
use crate::ast::{self, ExprKind};
use crate::hir::{
    BinOp, BufferRef, Dim, ElemIndex, ElemTy, HExpr, HExprKind, LocalOrigin, LocalPlace, MathFn,
    Ty, UnOp, VarId,
};
use crate::source::Span;
use crate::token;

/// The HIR operator of an AST binary operator (bounded `#op`s map to the plain ones;
/// composition is handled separately).
fn hir_binop(op: ast::BinaryOp) -> Option<BinOp> {
    Some(match op {
        ast::BinaryOp::Or => BinOp::Or,
        ast::BinaryOp::And => BinOp::And,
        ast::BinaryOp::Eq => BinOp::Eq,
        ast::BinaryOp::Ne => BinOp::Ne,
        ast::BinaryOp::Lt => BinOp::Lt,
        ast::BinaryOp::Le => BinOp::Le,
        ast::BinaryOp::Gt => BinOp::Gt,
        ast::BinaryOp::Ge => BinOp::Ge,
        ast::BinaryOp::Shl => BinOp::Shl,
        ast::BinaryOp::Shr => BinOp::Shr,
        ast::BinaryOp::Add | ast::BinaryOp::BoundedAdd => BinOp::Add,
        ast::BinaryOp::Sub | ast::BinaryOp::BoundedSub => BinOp::Sub,
        ast::BinaryOp::Mul | ast::BinaryOp::BoundedMul => BinOp::Mul,
        ast::BinaryOp::Div | ast::BinaryOp::BoundedDiv => BinOp::Div,
        ast::BinaryOp::Rem | ast::BinaryOp::BoundedRem => BinOp::Rem,
        ast::BinaryOp::BitAnd => BinOp::BitAnd,
        ast::BinaryOp::BitXor => BinOp::BitXor,
        ast::BinaryOp::BitOr => BinOp::BitOr,
        ast::BinaryOp::Compose => return None,
    })
}

/// The HIR math function of a lexed one.
pub(crate) fn hir_math(f: token::MathFn) -> MathFn {
    use token::MathFn as T;
    match f {
        T::Sqrt => MathFn::Sqrt,
        T::Rsqrt => MathFn::Rsqrt,
        T::Exp => MathFn::Exp,
        T::Exp2f => MathFn::Exp2f,
        T::Expm1 => MathFn::Expm1,
        T::Log => MathFn::Log,
        T::Log1p => MathFn::Log1p,
        T::Pow => MathFn::Pow,
        T::Sin => MathFn::Sin,
        T::Cos => MathFn::Cos,
        T::Tan => MathFn::Tan,
        T::Asin => MathFn::Asin,
        T::Acos => MathFn::Acos,
        T::Atan => MathFn::Atan,
        T::Atan2 => MathFn::Atan2,
        T::Sinh => MathFn::Sinh,
        T::Cosh => MathFn::Cosh,
        T::Tanh => MathFn::Tanh,
        T::Ceil => MathFn::Ceil,
        T::Floor => MathFn::Floor,
        T::Round => MathFn::Round,
        T::Fabs => MathFn::Fabs,
        T::Sign => MathFn::Sign,
        T::Isfinite => MathFn::Isfinite,
        T::Max => MathFn::Max,
        T::Min => MathFn::Min,
        T::Fmaf => MathFn::Fmaf,
        T::FrcpRn => MathFn::FrcpRn,
        T::Gelu => MathFn::Gelu,
        T::Sigmoid => MathFn::Sigmoid,
        T::Softplus => MathFn::Softplus,
        T::Alignup => MathFn::Alignup,
        T::Aligndown => MathFn::Aligndown,
    }
}

fn is_bounded_origin(origin: &LocalOrigin) -> bool {
    matches!(
        origin,
        LocalOrigin::ParallelIndex { .. }
            | LocalOrigin::WithIndex { .. }
            | LocalOrigin::RangeLocal { .. }
            | LocalOrigin::Tuple { .. }
    )
}

impl Checker<'_> {
    // -- entry points -------------------------------------------------------------------

    /// Checks an expression and returns what it denotes.
    pub(crate) fn check_expr(&mut self, e: &ast::Expr) -> Val {
        let span = e.span;
        match &e.kind {
            ExprKind::Int(lit) => {
                let ty = match lit.ty {
                    token::IntLitType::S32 => ElemTy::S32,
                    token::IntLitType::S64 => ElemTy::S64,
                    token::IntLitType::U32 => ElemTy::U32,
                    token::IntLitType::U64 => ElemTy::U64,
                };
                Val::Scalar(HExpr { kind: HExprKind::Int(lit.value), ty: Ty::Scalar(ty), span })
            }
            ExprKind::Float(lit) => Val::Scalar(HExpr {
                kind: HExprKind::Float(lit.value),
                ty: Ty::Scalar(if lit.is_f32 { ElemTy::F32 } else { ElemTy::F64 }),
                span,
            }),
            ExprKind::Bool(b) => {
                Val::Scalar(HExpr { kind: HExprKind::Bool(*b), ty: Ty::Scalar(ElemTy::Bool), span })
            }
            ExprKind::Str(s) => Val::Str(s.value.clone()),
            ExprKind::Null => {
                self.error_label(
                    "E0454",
                    span,
                    "`nullptr` is only allowed as an argument of `call` or inline assembly",
                    "not a value here",
                );
                Val::Error
            }
            ExprKind::Wildcard => {
                self.error_label(
                    "E0415",
                    span,
                    "`_` is only allowed in view operations",
                    "not allowed here",
                );
                Val::Error
            }
            ExprKind::Ident(id) => self.check_ident(id),
            ExprKind::Path(_) => {
                self.error_label(
                    "E0415",
                    span,
                    "a qualified name is only allowed in call template arguments",
                    "not a value",
                );
                Val::Error
            }
            ExprKind::Mdspan(items) => self.check_mdspan_literal(items, span),
            ExprKind::Ituple(items) => self.check_ituple_literal(items, span),
            ExprKind::Unary { op, operand } => self.check_unary(*op, operand, span),
            ExprKind::Binary { op, lhs, rhs } => self.check_binary(*op, lhs, rhs, span),
            ExprKind::Ternary { cond, then_value, else_value } => {
                self.check_ternary(cond, then_value, else_value, span)
            }
            ExprKind::UpperBound(id) => self.check_upper_bound(id, span),
            ExprKind::AddressOf(inner) => self.check_address_of(inner, span),
            ExprKind::Count(inner) => self.check_count(inner, span),
            ExprKind::SizeOf(t) => {
                let elem = types::scalar_from_ast(*t);
                Val::Scalar(fold::int_lit(elem.size_bytes() as i128, span))
            }
            ExprKind::Cdiv(a, b) => self.check_cdiv(a, b, span),
            ExprKind::Math { func, args } => self.check_math(*func, args, span),
            ExprKind::Cast { target, operand } => self.check_cast(target, operand, span),
            ExprKind::Select { .. } => {
                self.error_label(
                    "E0457",
                    span,
                    "`select` stands only as a DMA source or destination, or as data given a \
                     name (`x = select(k, a, b);`)",
                    "not allowed here",
                );
                Val::Error
            }
            ExprKind::Call(c) => self.check_call(c, None),
            ExprKind::DimSelect { base, index } => self.check_dim_select(base, index, span),
            ExprKind::Index { .. } => self.check_array_element(e),
            ExprKind::Derive { base, ituple, items } => {
                self.check_derive(base, *ituple, items, span)
            }
            ExprKind::Span(base) => self.check_span_of(base, span),
            ExprKind::Data(base) => self.check_future_data(base, span),
            ExprKind::Mdata(_) => {
                self.unsupported(span, "`.mdata`", 3);
                Val::Error
            }
            ExprKind::At { base, indices } => match self.check_at(base, indices, span) {
                Some((buffer, index, elem)) => {
                    self.mark_access(buffer, true, false);
                    self.element_of_swizzled(buffer, span);
                    if !self.in_device() {
                        self.error_label(
                            "E0425",
                            span,
                            "element access is only allowed inside a parallel-by",
                            "element read in host code",
                        );
                    }
                    let id = self.next_access();
                    Val::Scalar(HExpr {
                        kind: HExprKind::At { buffer, index, id },
                        ty: Ty::Scalar(elem),
                        span,
                    })
                }
                None => Val::Error,
            },
            ExprKind::View { base, op } => self.check_view_op(base, op, span),
            ExprKind::BufferMap { .. } => {
                self.out_of_scope(span, "`.map`/`.remap` buffer mapping");
                Val::Error
            }
        }
    }

    /// Checks an expression that must be a scalar (bool, number or bounded integer).
    pub(crate) fn check_scalar(&mut self, e: &ast::Expr, what: &str) -> HExpr {
        let v = self.check_expr(e);
        self.expect_scalar(v, e.span, what)
    }

    /// Turns a value into a scalar, reporting `E0415`/`E0516` otherwise.
    pub(crate) fn expect_scalar(&mut self, v: Val, span: Span, what: &str) -> HExpr {
        match v {
            Val::Scalar(e) => e,
            Val::Error => Self::error_expr(span),
            Val::Stream(p) => {
                let name = self.params.get(p.index()).map(|p| p.name.clone()).unwrap_or_default();
                self.error_label(
                    "E0516",
                    span,
                    format!(
                        "the stream '{name}' can only be used to bind a parallel-by (`parallel<{name}>`)"
                    ),
                    format!("stream used as {what}"),
                );
                Self::error_expr(span)
            }
            other => {
                self.error_label(
                    "E0415",
                    span,
                    format!("expect a scalar for {what} but got '{}'", other.describe()),
                    "not a scalar",
                );
                Self::error_expr(span)
            }
        }
    }

    /// Checks an expression that must be an integer scalar (bounded allowed).
    pub(crate) fn check_int(&mut self, e: &ast::Expr, what: &str) -> HExpr {
        let v = self.check_expr(e);
        self.expect_int(v, e.span, what)
    }

    /// Turns a value into an integer scalar, reporting `E0414` otherwise.
    pub(crate) fn expect_int(&mut self, v: Val, span: Span, what: &str) -> HExpr {
        let e = self.expect_scalar(v, span, what);
        if matches!(e.ty, Ty::Error) || e.ty.is_integer() {
            return e;
        }
        self.error_label(
            "E0414",
            span,
            format!("{what} requires an integer but got '{}'", types::ty_name(&e.ty)),
            "not an integer",
        );
        Self::error_expr(span)
    }

    // -- names ------------------------------------------------------------------------------

    /// The value a name denotes.
    pub(crate) fn check_ident(&mut self, id: &ast::Ident) -> Val {
        let span = id.span;
        let Some(sym) = self.scopes.lookup(&id.name).cloned() else {
            self.undeclared(id);
            return Val::Error;
        };
        match sym {
            Symbol::Param(p) => {
                let Some(param) = self.params.get(p.index()) else { return Val::Error };
                match param.ty() {
                    Ty::Stream => Val::Stream(p),
                    Ty::Spanned(t) => Val::Buffer(BufferRef::Param(p), t),
                    Ty::Error => Val::Error,
                    ty => Val::Scalar(HExpr { kind: HExprKind::Param(p), ty, span }),
                }
            }
            Symbol::Sym(s) => {
                Val::Scalar(HExpr { kind: HExprKind::SymDim(s), ty: Ty::Scalar(ElemTy::S32), span })
            }
            Symbol::Shape(dims) => Val::Shape(dims),
            Symbol::Future(f) => Val::Future(f),
            Symbol::MmaFuture(_) => {
                self.error_label(
                    "E1010",
                    span,
                    format!(
                        "'{}' is the future of an asynchronous MMA: it is no value (only `wait` \
                         names it)",
                        id.name
                    ),
                    "an MMA future",
                );
                Val::Error
            }
            Symbol::Frag(_) => {
                self.error_label(
                    "E1010",
                    span,
                    format!(
                        "'{}' is an MMA fragment: fragments are not values (only MMA \
                         statements and `op=` name them)",
                        id.name
                    ),
                    "a fragment",
                );
                Val::Error
            }
            Symbol::Event(_) => {
                self.error_label(
                    "E0471",
                    span,
                    format!(
                        "'{}' is an event: events are not values (only `trigger` and `wait` \
                         name them; `while (e)` needs a local or global event)",
                        id.name
                    ),
                    "an event",
                );
                Val::Error
            }
            Symbol::View(mut view) => {
                // Spans of the expansion point at the use.
                for e in view.exprs_mut() {
                    e.span = span;
                }
                Val::View(view)
            }
            Symbol::Tuple { items, bounded } => Val::Tuple {
                items: items
                    .into_iter()
                    .map(|mut e| {
                        e.span = span;
                        e
                    })
                    .collect(),
                bounded,
            },
            Symbol::Local(v) => self.local_value(v, span),
        }
    }

    /// The value of a local.
    pub(crate) fn local_value(&mut self, v: VarId, span: Span) -> Val {
        let Some(local) = self.locals.get(v.index()) else { return Val::Error };
        if let Some(c) = self.consts.get(&v) {
            return Val::Scalar(HExpr { kind: c.kind.clone(), ty: local.ty.clone(), span });
        }
        match (&local.origin, &local.ty) {
            (LocalOrigin::Tuple { components }, _) => Val::Tuple {
                items: components
                    .iter()
                    .map(|c| HExpr { kind: HExprKind::Var(*c), ty: Ty::BoundedInt, span })
                    .collect(),
                bounded: true,
            },
            (_, Ty::Spanned(t)) if local.array_dims > 0 => Val::Array(v, t.clone()),
            (_, Ty::Spanned(t)) => Val::Buffer(BufferRef::Local(v), t.clone()),
            (_, Ty::Error) => Val::Error,
            (_, ty) => Val::Scalar(HExpr { kind: HExprKind::Var(v), ty: ty.clone(), span }),
        }
    }

    /// The upper bound of a bounded local, if it is one.
    pub(crate) fn upper_of(&self, v: VarId) -> Option<Dim> {
        let local = self.locals.get(v.index())?;
        match &local.origin {
            LocalOrigin::ParallelIndex { upper, .. } | LocalOrigin::WithIndex { upper } => {
                Some(upper.clone())
            }
            LocalOrigin::RangeLocal { of } => self.upper_of(*of),
            _ => None,
        }
    }

    fn check_upper_bound(&mut self, id: &ast::Ident, span: Span) -> Val {
        let sym = self.scopes.lookup(&id.name).cloned();
        let var = match sym {
            Some(Symbol::Local(v)) => v,
            None => {
                self.undeclared(id);
                return Val::Error;
            }
            Some(_) => {
                self.error_label(
                    "E0427",
                    span,
                    format!("`#{}': '{}' is not a bounded variable", id.name, id.name),
                    "not bounded",
                );
                return Val::Error;
            }
        };
        let origin = self.locals.get(var.index()).map(|l| l.origin.clone());
        match origin {
            Some(LocalOrigin::Tuple { components }) => {
                let items = components
                    .iter()
                    .map(|c| match self.upper_of(*c) {
                        Some(d) => bounded(dim_to_expr(&d, span)),
                        None => Self::error_expr(span),
                    })
                    .collect();
                // `#idx` is a plain ituple: it does not decay to an integer (spec §5.4).
                Val::Tuple { items, bounded: false }
            }
            Some(o) if is_bounded_origin(&o) => match self.upper_of(var) {
                Some(d) => Val::Scalar(bounded(dim_to_expr(&d, span))),
                None => Val::Error,
            },
            _ => {
                self.error_label(
                    "E0427",
                    span,
                    format!("`#{}': '{}' is not a bounded variable", id.name, id.name),
                    "not bounded",
                );
                Val::Error
            }
        }
    }

    // -- operators --------------------------------------------------------------------------

    fn check_unary(&mut self, op: ast::UnaryOp, operand: &ast::Expr, span: Span) -> Val {
        let hop = match op {
            ast::UnaryOp::Not => UnOp::Not,
            ast::UnaryOp::BitNot => UnOp::BitNot,
            ast::UnaryOp::Neg => UnOp::Neg,
            _ if self.in_event_order => {
                self.order_update_misplaced(span);
                return Val::Error;
            }
            _ => {
                self.diags.push(
                    crate::diagnostics::Diagnostic::error(
                        "E0478",
                        span,
                        "the value of an increment or decrement is not supported: `o++`/`++o` \
                         is a statement of its own, or the direct argument of an event's `.at(…)`",
                    )
                    .with_label("an increment inside an expression")
                    .with_help(
                        "step the variable in a statement of its own (`o++;`) before or after \
                         this one, and use `o` here",
                    ),
                );
                return Val::Error;
            }
        };
        let v = self.check_expr(operand);
        if let (UnOp::Neg, Val::Tuple { items, bounded: b }) = (hop, &v) {
            let items = items.iter().map(|e| self.scalar_unary(hop, e.clone(), span)).collect();
            return Val::Tuple { items, bounded: *b };
        }
        let sym = match hop {
            UnOp::Not => "!",
            UnOp::BitNot => "~",
            UnOp::Neg => "-",
        };
        let e = match v {
            Val::Scalar(e) => e,
            Val::Error => return Val::Error,
            other => {
                self.error_label(
                    "E0407",
                    span,
                    format!(
                        "in operation \"{sym}\": unable to apply to the type ({})",
                        other.describe()
                    ),
                    "invalid operand",
                );
                return Val::Error;
            }
        };
        Val::Scalar(self.scalar_unary(hop, e, span))
    }

    fn scalar_unary(&mut self, op: UnOp, e: HExpr, span: Span) -> HExpr {
        if matches!(e.ty, Ty::Error) {
            return Self::error_expr(span);
        }
        let Some(t) = e.ty.scalar() else { return Self::error_expr(span) };
        let ok = match op {
            UnOp::Not => t == ElemTy::Bool,
            UnOp::BitNot => t.is_int(),
            UnOp::Neg => t.is_int() || t.is_float(),
        };
        if !ok {
            self.error_label(
                "E0407",
                span,
                format!(
                    "in operation \"{}\": unable to apply to the type ({})",
                    op.as_str(),
                    types::ty_name(&e.ty)
                ),
                "invalid operand",
            );
            return Self::error_expr(span);
        }
        let ty = match (&e.ty, op) {
            (Ty::BoundedInt, _) => Ty::BoundedInt,
            (_, UnOp::Not) => Ty::Scalar(ElemTy::Bool),
            // Integers narrower than int (sub-byte ones too) promote to int; narrow floats are
            // negated in f32 (spec §5.7, spec-tier3 §8).
            _ if t.is_int() || t.is_narrow_float() => Ty::Scalar(promote(t, t).unwrap_or(t)),
            _ => Ty::Scalar(t),
        };
        if let Some(kind) = fold::fold_unary(op, &e) {
            let ty = match kind {
                HExprKind::Int(v) if matches!(ty, Ty::Scalar(_)) => {
                    Ty::Scalar(fold::fit_type(v, t))
                }
                _ => ty,
            };
            return HExpr { kind, ty, span };
        }
        HExpr { kind: HExprKind::Unary { op, operand: Box::new(e) }, ty, span }
    }

    fn check_binary(
        &mut self,
        op: ast::BinaryOp,
        lhs: &ast::Expr,
        rhs: &ast::Expr,
        span: Span,
    ) -> Val {
        let Some(hop) = hir_binop(op) else { return self.check_compose(lhs, rhs, span) };
        let l = self.check_expr(lhs);
        let r = self.check_expr(rhs);
        let rhs_is_literal = matches!(rhs.kind, ExprKind::Int(_));
        self.binary_vals(hop, l, r, span, rhs_is_literal, rhs.span)
    }

    /// A binary operation on two checked values (scalars, ituples, mdspans).
    pub(crate) fn binary_vals(
        &mut self,
        op: BinOp,
        l: Val,
        r: Val,
        span: Span,
        rhs_is_literal: bool,
        rhs_span: Span,
    ) -> Val {
        let arith = matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem);
        match (l, r) {
            (Val::Error, _) | (_, Val::Error) => Val::Error,
            (Val::Scalar(a), Val::Scalar(b)) => {
                Val::Scalar(self.scalar_binary(op, a, b, span, rhs_is_literal, rhs_span))
            }
            // A rank-1 bounded ituple (`with k in 8`) behaves like an integer in arithmetic
            // and comparisons (spec §5.4).
            (Val::Tuple { items, bounded: true }, Val::Scalar(b)) if items.len() == 1 => {
                let a = items.into_iter().next().unwrap_or_else(|| Self::error_expr(span));
                Val::Scalar(self.scalar_binary(op, a, b, span, rhs_is_literal, rhs_span))
            }
            (Val::Scalar(a), Val::Tuple { items, bounded: true }) if items.len() == 1 => {
                let b = items.into_iter().next().unwrap_or_else(|| Self::error_expr(span));
                Val::Scalar(self.scalar_binary(op, a, b, span, rhs_is_literal, rhs_span))
            }
            // Rank-1 ituples compare like integers (spec §5.4).
            (Val::Tuple { items, .. }, Val::Scalar(b))
                if items.len() == 1 && !arith && op.is_boolean() =>
            {
                let a = items.into_iter().next().unwrap_or_else(|| Self::error_expr(span));
                Val::Scalar(self.scalar_binary(op, a, b, span, rhs_is_literal, rhs_span))
            }
            (Val::Scalar(a), Val::Tuple { items, .. })
                if items.len() == 1 && !arith && op.is_boolean() =>
            {
                let b = items.into_iter().next().unwrap_or_else(|| Self::error_expr(span));
                Val::Scalar(self.scalar_binary(op, a, b, span, rhs_is_literal, rhs_span))
            }
            (Val::Tuple { items, bounded }, Val::Scalar(b)) if arith => {
                let items = items
                    .into_iter()
                    .map(|a| self.scalar_binary(op, a, b.clone(), span, false, rhs_span))
                    .collect();
                Val::Tuple { items, bounded }
            }
            (Val::Scalar(a), Val::Tuple { items, bounded }) if arith => {
                let items = items
                    .into_iter()
                    .map(|b| self.scalar_binary(op, a.clone(), b, span, false, rhs_span))
                    .collect();
                Val::Tuple { items, bounded }
            }
            (Val::Tuple { items: a, bounded: ba }, Val::Tuple { items: b, bounded: bb })
                if arith =>
            {
                if a.len() != b.len() {
                    self.rank_mismatch(op, a.len(), b.len(), span);
                    return Val::Error;
                }
                let items = a
                    .into_iter()
                    .zip(b)
                    .map(|(x, y)| self.scalar_binary(op, x, y, span, false, rhs_span))
                    .collect();
                Val::Tuple { items, bounded: ba || bb }
            }
            (Val::Shape(dims), Val::Scalar(b)) if arith => {
                let items = dims
                    .iter()
                    .map(|d| {
                        let a = dim_to_expr(d, span);
                        self.scalar_binary(op, a, b.clone(), span, false, rhs_span)
                    })
                    .collect();
                self.shape_from_exprs(items, span)
            }
            (Val::Scalar(a), Val::Shape(dims)) if arith => {
                let items = dims
                    .iter()
                    .map(|d| {
                        let b = dim_to_expr(d, span);
                        self.scalar_binary(op, a.clone(), b, span, false, rhs_span)
                    })
                    .collect();
                self.shape_from_exprs(items, span)
            }
            (Val::Shape(dims), Val::Tuple { items, .. }) if arith => {
                if dims.len() != items.len() {
                    self.rank_mismatch(op, dims.len(), items.len(), span);
                    return Val::Error;
                }
                let out = dims
                    .iter()
                    .zip(items)
                    .map(|(d, b)| {
                        let a = dim_to_expr(d, span);
                        self.scalar_binary(op, a, b, span, false, rhs_span)
                    })
                    .collect();
                self.shape_from_exprs(out, span)
            }
            (Val::Tuple { items, .. }, Val::Shape(dims)) if arith => {
                if dims.len() != items.len() {
                    self.rank_mismatch(op, items.len(), dims.len(), span);
                    return Val::Error;
                }
                let out = items
                    .into_iter()
                    .zip(dims.iter())
                    .map(|(a, d)| {
                        let b = dim_to_expr(d, span);
                        self.scalar_binary(op, a, b, span, false, rhs_span)
                    })
                    .collect();
                self.shape_from_exprs(out, span)
            }
            (Val::Shape(a), Val::Shape(b)) if matches!(op, BinOp::Div | BinOp::Rem) => {
                if a.len() != b.len() {
                    self.rank_mismatch(op, a.len(), b.len(), span);
                    return Val::Error;
                }
                let items = a
                    .iter()
                    .zip(b.iter())
                    .map(|(x, y)| {
                        let x = dim_to_expr(x, span);
                        let y = dim_to_expr(y, span);
                        self.scalar_binary(op, x, y, span, false, rhs_span)
                    })
                    .collect();
                Val::Tuple { items, bounded: false }
            }
            (Val::Stream(p), other) | (other, Val::Stream(p)) => {
                let _ = other;
                let _ = self.expect_scalar(Val::Stream(p), span, "an operand");
                Val::Error
            }
            (l, r) => {
                self.error_label(
                    if matches!((&l, &r), (Val::Shape(_), Val::Shape(_))) {
                        "E0418"
                    } else {
                        "E0407"
                    },
                    span,
                    format!(
                        "in operation \"{}\": unable to apply to the types ({} vs. {})",
                        op.as_str(),
                        l.describe(),
                        r.describe()
                    ),
                    "invalid operands",
                );
                Val::Error
            }
        }
    }

    fn rank_mismatch(&mut self, op: BinOp, a: usize, b: usize, span: Span) {
        self.error_label(
            "E0417",
            span,
            format!("in operation \"{}\": dimension inconsistent ({a} vs. {b})", op.as_str()),
            "ranks differ",
        );
    }

    /// Builds an mdspan value from extent expressions (folding constants, checking signs).
    pub(crate) fn shape_from_exprs(&mut self, items: Vec<HExpr>, span: Span) -> Val {
        let mut dims = Vec::with_capacity(items.len());
        for e in items {
            if matches!(e.ty, Ty::Error) {
                return Val::Error;
            }
            if let Some(v) = fold::const_int(&e) {
                if v <= 0 {
                    self.error_label(
                        "E0419",
                        e.span,
                        format!("The mdspan size \"{v}\" is invalid!"),
                        "extents must be positive",
                    );
                    return Val::Error;
                }
            }
            dims.push(expr_to_dim(e));
        }
        let _ = span;
        Val::Shape(dims)
    }

    /// A binary operation on two scalars: type rules, conversions and folding.
    pub(crate) fn scalar_binary(
        &mut self,
        op: BinOp,
        a: HExpr,
        b: HExpr,
        span: Span,
        rhs_is_literal: bool,
        rhs_span: Span,
    ) -> HExpr {
        if matches!(a.ty, Ty::Error) || matches!(b.ty, Ty::Error) {
            return Self::error_expr(span);
        }
        let (Some(ta), Some(tb)) = (a.ty.scalar(), b.ty.scalar()) else {
            return Self::error_expr(span);
        };
        let any_bounded = a.ty.is_bounded() || b.ty.is_bounded();
        let invalid = |this: &mut Self| {
            this.error_label(
                "E0407",
                span,
                format!(
                    "in operation \"{}\": unable to apply to the types ({} vs. {})",
                    op.as_str(),
                    types::ty_name(&a.ty),
                    types::ty_name(&b.ty)
                ),
                "invalid operands",
            );
            Self::error_expr(span)
        };
        let both_bool = ta == ElemTy::Bool && tb == ElemTy::Bool;
        let any_bool = ta == ElemTy::Bool || tb == ElemTy::Bool;
        match op {
            BinOp::And | BinOp::Or => {
                if !both_bool {
                    return invalid(self);
                }
                if let (HExprKind::Bool(x), HExprKind::Bool(y)) = (&a.kind, &b.kind) {
                    let v = if op == BinOp::And { *x && *y } else { *x || *y };
                    return HExpr { kind: HExprKind::Bool(v), ty: Ty::Scalar(ElemTy::Bool), span };
                }
                return mk_binary(op, a, b, Ty::Scalar(ElemTy::Bool), span);
            }
            BinOp::Shl | BinOp::Shr => {
                if !rhs_is_literal {
                    self.error_label(
                        "E0408",
                        rhs_span,
                        format!(
                            "in operation \"{}\": expect an integer literal as the right operand \
                             but got `{}'.",
                            op.as_str(),
                            self.text(rhs_span)
                        ),
                        "not an integer literal",
                    );
                    return Self::error_expr(span);
                }
                if !(ta.is_int() && tb.is_int()) {
                    return invalid(self);
                }
                let lt = match promote(ta, ta) {
                    Some(t) => t,
                    None => return invalid(self),
                };
                let ty =
                    if any_bounded && lt == ElemTy::S32 { Ty::BoundedInt } else { Ty::Scalar(lt) };
                if let (Some(x), Some(y)) = (fold::const_int(&a), fold::const_int(&b)) {
                    if let Ok(Some((v, t))) = fold::fold_int_binary(op, x, y, lt) {
                        return HExpr { kind: HExprKind::Int(v), ty: keep_bounded(ty, t), span };
                    }
                }
                return mk_binary(op, Self::widen(a, lt), b, ty, span);
            }
            _ => {}
        }
        // Bitwise operators on bools yield s32 (spec §4.5).
        let (ta, tb) = if matches!(op, BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor) && any_bool {
            (
                if ta == ElemTy::Bool { ElemTy::S32 } else { ta },
                if tb == ElemTy::Bool { ElemTy::S32 } else { tb },
            )
        } else {
            (ta, tb)
        };
        if matches!(op, BinOp::Eq | BinOp::Ne) && both_bool {
            return mk_binary(op, a, b, Ty::Scalar(ElemTy::Bool), span);
        }
        if ta == ElemTy::Bool || tb == ElemTy::Bool {
            return invalid(self);
        }
        let common = match types::promote(ta, tb) {
            Promoted::Ok(t) => t,
            Promoted::HalfMix => {
                self.error_label(
                    "E0411",
                    span,
                    format!(
                        "unexpect floating-point types in promote: {} and {}",
                        ta.as_str(),
                        tb.as_str()
                    ),
                    "f16 and bf16 cannot be mixed",
                );
                return Self::error_expr(span);
            }
        };
        if matches!(op, BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor) && !common.is_int() {
            return invalid(self);
        }
        if op == BinOp::Rem && !common.is_int() {
            self.error_label(
                "E0409",
                span,
                format!(
                    "in operation \"%\": unable to apply to floating-point types ({} vs. {})",
                    types::ty_name(&a.ty),
                    types::ty_name(&b.ty)
                ),
                "`%` needs integer operands",
            );
            return Self::error_expr(span);
        }
        let a = Self::widen(a, common);
        let b = Self::widen(b, common);
        if op.is_boolean() {
            if let (Some(x), Some(y)) = (fold::const_int(&a), fold::const_int(&b)) {
                if let Some(v) = fold::fold_compare(op, x, y) {
                    return HExpr { kind: HExprKind::Bool(v), ty: Ty::Scalar(ElemTy::Bool), span };
                }
            }
            return mk_binary(op, a, b, Ty::Scalar(ElemTy::Bool), span);
        }
        let ty =
            if any_bounded && common == ElemTy::S32 { Ty::BoundedInt } else { Ty::Scalar(common) };
        if common.is_int() {
            if let (Some(x), Some(y)) = (fold::const_int(&a), fold::const_int(&b)) {
                match fold::fold_int_binary(op, x, y, common) {
                    Ok(Some((v, t))) => {
                        return HExpr { kind: HExprKind::Int(v), ty: keep_bounded(ty, t), span };
                    }
                    Ok(None) => {}
                    Err(FoldError::DivByZero) => {
                        self.div_by_zero(span);
                        return Self::error_expr(span);
                    }
                }
            } else if matches!(op, BinOp::Div | BinOp::Rem) && fold::const_int(&b) == Some(0) {
                self.div_by_zero(span);
                return Self::error_expr(span);
            }
        }
        mk_binary(op, a, b, ty, span)
    }

    pub(crate) fn div_by_zero(&mut self, span: Span) {
        self.error_label(
            "E0410",
            span,
            "division by zero in a constant expression",
            "divides by 0",
        );
    }

    fn check_compose(&mut self, lhs: &ast::Expr, rhs: &ast::Expr, span: Span) -> Val {
        // `p # n`: value p * #n + n, a bounded integer (spec §13.2).
        let l = self.check_expr(lhs);
        let r = self.check_expr(rhs);
        let rhs_upper = match &rhs.kind {
            ExprKind::Ident(id) => match self.scopes.lookup(&id.name) {
                Some(Symbol::Local(v)) => self.upper_of(*v),
                _ => None,
            },
            _ => None,
        };
        let (Val::Scalar(a), Val::Scalar(b), Some(upper)) = (l, r, rhs_upper) else {
            self.error_label(
                "E0407",
                span,
                "in operation \"#\": both operands must be bounded integer variables",
                "invalid composition",
            );
            return Val::Error;
        };
        if !(a.ty.is_bounded()) {
            self.error_label(
                "E0407",
                lhs.span,
                "in operation \"#\": the left operand must be a bounded integer",
                "not bounded",
            );
            return Val::Error;
        }
        let n_bound = dim_to_expr(&upper, span);
        let scaled = self.scalar_binary(BinOp::Mul, a, n_bound, span, false, span);
        Val::Scalar(bounded(self.scalar_binary(BinOp::Add, scaled, b, span, false, span)))
    }

    fn check_ternary(
        &mut self,
        cond: &ast::Expr,
        then_value: &ast::Expr,
        else_value: &ast::Expr,
        span: Span,
    ) -> Val {
        let c = self.check_scalar(cond, "a condition");
        let t = self.check_scalar(then_value, "a `?:` arm");
        let e = self.check_scalar(else_value, "a `?:` arm");
        if [&c.ty, &t.ty, &e.ty].iter().any(|t| matches!(t, Ty::Error)) {
            return Val::Error;
        }
        let (Some(tt), Some(te)) = (t.ty.scalar(), e.ty.scalar()) else { return Val::Error };
        let ty = if tt == ElemTy::Bool && te == ElemTy::Bool {
            Ty::Scalar(ElemTy::Bool)
        } else if tt == ElemTy::Bool || te == ElemTy::Bool {
            self.error_label(
                "E0434",
                span,
                format!(
                    "the arms of '?:' have incompatible types ({} vs. {})",
                    types::ty_name(&t.ty),
                    types::ty_name(&e.ty)
                ),
                "incompatible arms",
            );
            return Val::Error;
        } else {
            match types::promote(tt, te) {
                Promoted::Ok(common) => {
                    if common == ElemTy::S32 && (t.ty.is_bounded() || e.ty.is_bounded()) {
                        Ty::BoundedInt
                    } else {
                        Ty::Scalar(common)
                    }
                }
                Promoted::HalfMix => {
                    self.error_label(
                        "E0411",
                        span,
                        "unexpect floating-point types in promote: bf16 and f16",
                        "f16 and bf16 cannot be mixed",
                    );
                    return Val::Error;
                }
            }
        };
        let common = ty.scalar().unwrap_or(ElemTy::S32);
        let t = Self::widen(t, common);
        let e = Self::widen(e, common);
        if let HExprKind::Bool(b) = c.kind {
            return Val::Scalar(HExpr { ty, ..if b { t } else { e } });
        }
        Val::Scalar(HExpr {
            kind: HExprKind::Ternary {
                cond: Box::new(c),
                then_value: Box::new(t),
                else_value: Box::new(e),
            },
            ty,
            span,
        })
    }

    fn check_cdiv(&mut self, a: &ast::Expr, b: &ast::Expr, span: Span) -> Val {
        let x = self.check_int(a, "`cdiv`");
        let y = self.check_int(b, "`cdiv`");
        if matches!(x.ty, Ty::Error) || matches!(y.ty, Ty::Error) {
            return Val::Error;
        }
        let (Some(tx), Some(ty_)) = (x.ty.scalar(), y.ty.scalar()) else { return Val::Error };
        let common = match types::promote(tx, ty_) {
            Promoted::Ok(t) => t,
            Promoted::HalfMix => return Val::Error,
        };
        let bounded_result = (x.ty.is_bounded() || y.ty.is_bounded()) && common == ElemTy::S32;
        let ty = if bounded_result { Ty::BoundedInt } else { Ty::Scalar(common) };
        if fold::const_int(&y) == Some(0) {
            self.div_by_zero(span);
            return Val::Error;
        }
        if let (Some(p), Some(q)) = (fold::const_int(&x), fold::const_int(&y)) {
            let sum = fold::fold_int_binary(BinOp::Add, p, q - 1, common);
            if let Ok(Some((s, _))) = sum {
                if let Ok(Some((v, t))) = fold::fold_int_binary(BinOp::Div, s, q, common) {
                    return Val::Scalar(HExpr {
                        kind: HExprKind::Int(v),
                        ty: keep_bounded(ty, t),
                        span,
                    });
                }
            }
        }
        Val::Scalar(HExpr {
            kind: HExprKind::Cdiv(
                Box::new(Self::widen(x, common)),
                Box::new(Self::widen(y, common)),
            ),
            ty,
            span,
        })
    }

    fn check_count(&mut self, inner: &ast::Expr, span: Span) -> Val {
        let v = self.check_expr(inner);
        let dims_product = |this: &mut Self, exprs: Vec<HExpr>| -> Val {
            let mut acc: Option<HExpr> = None;
            for e in exprs {
                acc = Some(match acc {
                    None => e,
                    Some(prev) => this.scalar_binary(BinOp::Mul, prev, e, span, false, span),
                });
            }
            let mut out = acc.unwrap_or_else(|| fold::int_lit(1, span));
            out.span = span;
            if out.ty.is_bounded() {
                out.ty = Ty::Scalar(ElemTy::S32);
            }
            Val::Scalar(out)
        };
        match v {
            Val::Shape(dims) => {
                let exprs = dims.iter().map(|d| dim_to_expr(d, span)).collect();
                dims_product(self, exprs)
            }
            Val::Buffer(_, t) => {
                let exprs = t.dims.iter().map(|d| dim_to_expr(d, span)).collect();
                dims_product(self, exprs)
            }
            Val::View(v) => {
                let exprs = v.dims.iter().map(|d| dim_to_expr(d, span)).collect();
                dims_product(self, exprs)
            }
            Val::Tuple { items, .. } => dims_product(self, items),
            Val::Scalar(e) if e.ty.is_integer() => Val::Scalar(e),
            Val::Error => Val::Error,
            other => {
                self.error_label(
                    "E0414",
                    span,
                    format!(
                        "`|…|` requires an mdspan or an integer but got '{}'",
                        other.describe()
                    ),
                    "no element count",
                );
                Val::Error
            }
        }
    }

    fn check_math(&mut self, func: token::MathFn, args: &[ast::Expr], span: Span) -> Val {
        let f = hir_math(func);
        let vals: Vec<HExpr> =
            args.iter().map(|a| self.check_scalar(a, "a math argument")).collect();
        if vals.iter().any(|v| matches!(v.ty, Ty::Error)) {
            return Val::Error;
        }
        if vals.len() != f.arity() {
            self.error_label(
                "E0429",
                span,
                format!(
                    "'{}' expects {} but got {}",
                    f.as_str(),
                    crate::diagnostics::count(f.arity(), "argument"),
                    vals.len()
                ),
                "wrong number of arguments",
            );
            return Val::Error;
        }
        let mut common: Option<ElemTy> = None;
        for v in &vals {
            let Some(t) = v.ty.scalar() else { return Val::Error };
            if t == ElemTy::Bool {
                self.error_label(
                    "E0429",
                    v.span,
                    format!("'{}' does not accept 'bool' arguments", f.as_str()),
                    "bool argument",
                );
                return Val::Error;
            }
            common = Some(match common {
                None => t,
                Some(c) => match types::promote(c, t) {
                    Promoted::Ok(x) => x,
                    Promoted::HalfMix => {
                        self.error_label(
                            "E0411",
                            span,
                            "unexpect floating-point types in promote: bf16 and f16",
                            "f16 and bf16 cannot be mixed",
                        );
                        return Val::Error;
                    }
                },
            });
        }
        // Narrow float arguments are computed in f32 (spec §5.7), also when they are alone;
        // sub-byte integers in int.
        let common = common
            .filter(|t| !t.is_narrow_float())
            .map(|t| if t.is_subbyte_int() { ElemTy::S32 } else { t })
            .unwrap_or(ElemTy::F32);
        let (arg_ty, result) = match f {
            MathFn::Alignup | MathFn::Aligndown => {
                if !common.is_int() {
                    self.error_label(
                        "E0429",
                        span,
                        format!("'{}' requires integer arguments", f.as_str()),
                        "not integers",
                    );
                    return Val::Error;
                }
                (common, common)
            }
            MathFn::Max | MathFn::Min | MathFn::Sign => (common, common),
            MathFn::Isfinite => {
                let t = if common.is_float() { common } else { ElemTy::F32 };
                (t, ElemTy::Bool)
            }
            _ => {
                let t = if common.is_float() { common } else { ElemTy::F32 };
                (t, t)
            }
        };
        let args = vals.into_iter().map(|v| Self::widen(v, arg_ty)).collect();
        Val::Scalar(HExpr { kind: HExprKind::Math { func: f, args }, ty: Ty::Scalar(result), span })
    }

    fn check_cast(&mut self, target: &ast::CastTarget, operand: &ast::Expr, span: Span) -> Val {
        let to = match target {
            ast::CastTarget::Cpp(text, s) => {
                return self.check_cpp_cast(&text.value, *s, operand, span);
            }
            ast::CastTarget::Type(t, s) => {
                let to = types::scalar_from_ast(*t);
                if !self.implemented_elem(to, *s) || !self.cast_target_ok(to, *s) {
                    return Val::Error;
                }
                to
            }
        };
        let v = self.check_expr(operand);
        let e = match v {
            Val::Scalar(e) => e,
            Val::Error => return Val::Error,
            other => {
                self.error_label(
                    "E0428",
                    operand.span,
                    format!("unable to convert '{}' to '{}'", other.describe(), to.as_str()),
                    "not a scalar",
                );
                return Val::Error;
            }
        };
        if matches!(e.ty, Ty::Error) {
            return Val::Error;
        }
        if let Some(from) = e.ty.scalar().filter(|t| t.is_subbyte_int() || *t == ElemTy::Bool) {
            // Sub-byte integers and bool are never `__to` sources (spec-tier3 §8).
            self.error_label(
                "E0428",
                operand.span,
                format!(
                    "'__to' does not convert from '{}': sub-byte integers and bool are never \
                     '__to' sources (an assignment converts instead)",
                    from.as_str()
                ),
                "a sub-byte integer or bool",
            );
            return Val::Error;
        }
        if let (HExprKind::Int(v), true) = (&e.kind, to.is_int()) {
            let v = *v;
            let wrapped = wrap_int(v, to);
            return Val::Scalar(HExpr { kind: HExprKind::Int(wrapped), ty: Ty::Scalar(to), span });
        }
        Val::Scalar(HExpr {
            kind: HExprKind::Cast { to, operand: Box::new(e), implicit: false },
            ty: Ty::Scalar(to),
            span,
        })
    }

    // -- selection, shapes ---------------------------------------------------------------------

    fn check_dim_select(&mut self, base: &ast::Expr, index: &ast::Expr, span: Span) -> Val {
        let idx_val = self.check_expr(index);
        let idx = match &idx_val {
            Val::Scalar(e) => fold::const_int(e),
            _ => None,
        };
        // `x.span(i)`
        if let ExprKind::Span(inner) = &base.kind {
            let v = self.check_span_of(inner, base.span);
            return self.select_component(v, idx, index.span, span, true);
        }
        // `expf(x)`: an undeclared C spelling of a built-in, "called" (parsed as a selection).
        if let ExprKind::Ident(id) = &base.kind {
            let builtin = token::choreo_spelling(&id.name);
            if let Some(builtin) = builtin.filter(|_| self.scopes.lookup(&id.name).is_none()) {
                self.diags.push(
                    crate::diagnostics::Diagnostic::error(
                        "E0401",
                        id.span,
                        format!("'{}' is not declared and is not a Choreo built-in", id.name),
                    )
                    .with_label("unknown function")
                    .with_help(format!("Choreo spells it `{builtin}`")),
                );
                return Val::Error;
            }
        }
        let v = self.check_expr(base);
        // `v(-k)` on a bounded variable: `#v - k` (spec §5.4).
        if let Some(k) = idx.filter(|k| *k < 0) {
            let var = match &base.kind {
                ExprKind::Ident(id) => match self.scopes.lookup(&id.name) {
                    Some(Symbol::Local(v)) => Some(*v),
                    _ => None,
                },
                _ => None,
            };
            if let Some(var) = var {
                let origin = self.locals.get(var.index()).map(|l| l.origin.clone());
                let comps: Vec<VarId> = match origin {
                    Some(LocalOrigin::Tuple { components }) => components,
                    Some(o) if is_bounded_origin(&o) => vec![var],
                    _ => Vec::new(),
                };
                if !comps.is_empty() {
                    let mut items = Vec::new();
                    for c in &comps {
                        let Some(upper) = self.upper_of(*c) else { return Val::Error };
                        let ub = dim_to_expr(&upper, span);
                        let e = self.scalar_binary(
                            BinOp::Add,
                            ub,
                            fold::int_lit(k, span),
                            span,
                            false,
                            span,
                        );
                        items.push(bounded(e));
                    }
                    return if comps.len() == 1 {
                        Val::Scalar(items.remove(0))
                    } else {
                        Val::Tuple { items, bounded: true }
                    };
                }
            }
        }
        self.select_component(v, idx, index.span, span, false)
    }

    fn select_component(
        &mut self,
        v: Val,
        idx: Option<i128>,
        idx_span: Span,
        span: Span,
        is_span: bool,
    ) -> Val {
        let (len, what) = match &v {
            Val::Shape(d) => (d.len(), "mdspan"),
            Val::Tuple { items, .. } => (items.len(), "ituple"),
            Val::Error => return Val::Error,
            other => {
                self.error_label(
                    "E0422",
                    span,
                    format!("unable to select a dimension of '{}'", other.describe()),
                    "no dimensions",
                );
                return Val::Error;
            }
        };
        let Some(i) = idx else {
            self.error_label(
                "E0422",
                idx_span,
                "the dimension index must be a constant integer",
                "not a constant",
            );
            return Val::Error;
        };
        if i < 0 || i as usize >= len {
            self.error_label(
                "E0422",
                idx_span,
                format!(
                    "dimension index {i} is out of range for {}{what} of rank {len}",
                    if is_span { "the shape, an " } else { "an " }
                ),
                "out of range",
            );
            return Val::Error;
        }
        let i = i as usize;
        match v {
            Val::Shape(d) => Val::Scalar(dim_to_expr(&d[i], span)),
            Val::Tuple { mut items, .. } => {
                let mut e = items.swap_remove(i);
                e.span = span;
                Val::Scalar(e)
            }
            _ => Val::Error,
        }
    }

    /// `x.span`: the shape of spanned data.
    pub(crate) fn check_span_of(&mut self, base: &ast::Expr, span: Span) -> Val {
        match self.check_expr(base) {
            Val::Buffer(_, t) => Val::Shape(t.dims),
            Val::View(v) => Val::Shape(v.dims),
            Val::Future(f) => match self.future_view(&f, span) {
                Some(v) => Val::Shape(v.dims),
                None => Val::Error,
            },
            Val::Shape(d) => Val::Shape(d),
            Val::Error => Val::Error,
            other => {
                self.error_label(
                    "E0423",
                    span,
                    format!("'.span' requires spanned data but got '{}'", other.describe()),
                    "no shape",
                );
                Val::Error
            }
        }
    }

    fn check_derive(
        &mut self,
        base: &ast::Expr,
        ituple: bool,
        items: &[ast::DeriveItem],
        span: Span,
    ) -> Val {
        let b = self.check_expr(base);
        let comps: Vec<HExpr> = match &b {
            Val::Shape(d) => d.iter().map(|x| dim_to_expr(x, span)).collect(),
            Val::Buffer(_, t) => t.dims.iter().map(|x| dim_to_expr(x, span)).collect(),
            Val::View(v) => v.dims.iter().map(|x| dim_to_expr(x, span)).collect(),
            Val::Tuple { items, .. } => items.clone(),
            Val::Error => return Val::Error,
            other => {
                self.error_label(
                    "E0422",
                    base.span,
                    format!("unable to derive from '{}'", other.describe()),
                    "no dimensions",
                );
                return Val::Error;
            }
        };
        let mut out = Vec::new();
        for item in items {
            match item {
                ast::DeriveItem::Dim(k) => {
                    let kv = self.check_expr(k);
                    let idx = match &kv {
                        Val::Scalar(e) => fold::const_int(e),
                        _ => None,
                    };
                    match idx {
                        Some(i) if i >= 0 && (i as usize) < comps.len() => {
                            let mut e = comps[i as usize].clone();
                            e.span = k.span;
                            out.push(e);
                        }
                        _ => {
                            self.error_label(
                                "E0422",
                                k.span,
                                format!(
                                    "the derived dimension must be a constant in [0, {})",
                                    comps.len()
                                ),
                                "invalid dimension",
                            );
                            return Val::Error;
                        }
                    }
                }
                ast::DeriveItem::Value(e) => match self.check_expr(e) {
                    Val::Scalar(x) => out.push(x),
                    Val::Shape(d) => out.extend(d.iter().map(|x| dim_to_expr(x, e.span))),
                    Val::Tuple { items, .. } => out.extend(items),
                    Val::Error => return Val::Error,
                    other => {
                        self.error_label(
                            "E0414",
                            e.span,
                            format!("unexpected '{}' in a derivation", other.describe()),
                            "not an integer",
                        );
                        return Val::Error;
                    }
                },
            }
        }
        if ituple {
            Val::Tuple { items: out, bounded: false }
        } else {
            for e in &out {
                if !(matches!(e.ty, Ty::Error) || e.ty.is_integer()) {
                    self.error_label(
                        "E0414",
                        e.span,
                        format!(
                            "unexpected data type '{}' is found in mdspan.",
                            types::ty_name(&e.ty)
                        ),
                        "not an integer",
                    );
                    return Val::Error;
                }
            }
            self.shape_from_exprs(out, span)
        }
    }

    // -- element access -------------------------------------------------------------------------

    /// Resolves `base.at(indices)` (spec §12): the buffer, the element it denotes and the
    /// element type. `base` is spanned data: a buffer, a view, an array element.
    pub(crate) fn check_at(
        &mut self,
        base: &ast::Expr,
        indices: &[ast::Expr],
        span: Span,
    ) -> Option<(BufferRef, ElemIndex, ElemTy)> {
        // `f.at(i, j)` of a fragment inside `apply` (spec-tier3 §6.2, sema/frag.rs).
        if let Some(element) = self.frag_element(base, indices, span) {
            return element;
        }
        let view = match self.check_expr(base) {
            Val::Future(_) => {
                self.error_label(
                    "E0426",
                    base.span,
                    format!(
                        "expect '{0}' a spanned type but got 'future' (use `{0}.data.at(…)`)",
                        self.text(base.span)
                    ),
                    "a future",
                );
                return None;
            }
            v => self.view_of(v, base.span, "an element access")?,
        };
        let mut flat = Vec::new();
        for ix in indices {
            match self.check_expr(ix) {
                Val::Tuple { items, .. } => flat.extend(items),
                v => flat.push(self.expect_int(v, ix.span, "an element index")),
            }
        }
        if flat.len() != view.dims.len() {
            self.error_label(
                "E0424",
                span,
                format!(
                    "accessing an spanned data (rank: {}) with {}",
                    view.dims.len(),
                    crate::diagnostics::count_as(flat.len(), "index", "indices")
                ),
                "wrong number of indices",
            );
            return None;
        }
        for (i, (e, d)) in flat.iter().zip(view.dims.iter()).enumerate() {
            if let Some(v) = fold::const_int(e) {
                let out = v < 0 || d.as_const().is_some_and(|n| v as u64 >= n);
                if out {
                    let range = d.as_const().map_or("[0, ?)".to_string(), |n| format!("[0, {n})"));
                    self.error_label(
                        "E0436",
                        e.span,
                        format!(
                            "index {v} is out of bounds of dimension {i}, where the valid range \
                             is {range}"
                        ),
                        "out of bounds",
                    );
                }
            }
        }
        if flat.iter().any(|e| matches!(e.ty, Ty::Error)) {
            return None;
        }
        Some((view.buffer, view.element(flat, span), view.elem))
    }

    /// Records a read or write of a buffer in its access set.
    pub(crate) fn mark_access(&mut self, buffer: BufferRef, read: bool, write: bool) {
        let access = match buffer {
            BufferRef::Param(p) => self.params.get_mut(p.index()).map(|p| &mut p.access),
            BufferRef::Local(v) => self.locals.get_mut(v.index()).map(|l| &mut l.access),
        };
        if let Some(a) = access {
            a.read |= read;
            a.write |= write;
        }
    }

    /// Whether a local is a device (per-thread) value or a bounded index.
    pub(crate) fn is_per_thread(&self, v: VarId) -> bool {
        self.locals.get(v.index()).is_some_and(|l| {
            matches!(l.place, LocalPlace::DeviceScalar | LocalPlace::ParallelIndex)
        })
    }
}

/// `t` with a bounded type when `ty` was bounded.
fn keep_bounded(ty: Ty, t: ElemTy) -> Ty {
    if matches!(ty, Ty::BoundedInt) && t == ElemTy::S32 { Ty::BoundedInt } else { Ty::Scalar(t) }
}

fn promote(a: ElemTy, b: ElemTy) -> Option<ElemTy> {
    match types::promote(a, b) {
        Promoted::Ok(t) => Some(t),
        Promoted::HalfMix => None,
    }
}

fn mk_binary(op: BinOp, a: HExpr, b: HExpr, ty: Ty, span: Span) -> HExpr {
    HExpr { kind: HExprKind::Binary { op, lhs: Box::new(a), rhs: Box::new(b) }, ty, span }
}

/// Marks an integer expression as a bounded value (prints in braces).
pub(crate) fn bounded(mut e: HExpr) -> HExpr {
    if matches!(e.ty, Ty::Scalar(ElemTy::S32) | Ty::Scalar(ElemTy::S64)) {
        e.ty = Ty::BoundedInt;
    }
    e
}

/// Wraps an integer constant to the width of `to` (C conversion semantics).
fn wrap_int(v: i128, to: ElemTy) -> i128 {
    match to {
        ElemTy::S8 => v as i8 as i128,
        ElemTy::S16 => v as i16 as i128,
        ElemTy::S32 => v as i32 as i128,
        ElemTy::S64 => v as i64 as i128,
        ElemTy::U8 => v as u8 as i128,
        ElemTy::U16 => v as u16 as i128,
        ElemTy::U32 => v as u32 as i128,
        ElemTy::U64 => v as u64 as i128,
        _ => v,
    }
}
