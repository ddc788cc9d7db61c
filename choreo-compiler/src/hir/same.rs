//! Structural equality of expressions that ignores where they were written.
//!
//! The derived `PartialEq` of [`HExpr`] compares spans too, so two writings of the same
//! predicate (`inthreads (wg == 1)` twice) differ under it. [`same_expr`] compares everything
//! else: kinds, operators, ids (locals, parameters, access numbers), literal values and types,
//! down through the expressions inside types and views. Every match below lists all the
//! variants of the type it looks at (no `_` arm), so a new kind cannot be silently compared by
//! a catch-all: the compiler asks for its case.

use super::{Dim, ElemIndex, HExpr, HExprKind, SpannedTy, Ty};

/// Whether `a` and `b` are the same expression, spans aside.
pub fn same_expr(a: &HExpr, b: &HExpr) -> bool {
    same_ty(&a.ty, &b.ty) && same_kind(&a.kind, &b.kind)
}

/// [`same_expr`] over two lists: the same length, element by element.
fn same_exprs(a: &[HExpr], b: &[HExpr]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_expr(x, y))
}

fn same_kind(a: &HExprKind, b: &HExprKind) -> bool {
    use HExprKind as K;
    match a {
        K::Int(x) => matches!(b, K::Int(y) if x == y),
        // By bits: the same literal, whatever its value (NaN included); `0.0` and `-0.0` differ.
        K::Float(x) => matches!(b, K::Float(y) if x.to_bits() == y.to_bits()),
        K::Bool(x) => matches!(b, K::Bool(y) if x == y),
        K::Str(x) => matches!(b, K::Str(y) if x == y),
        K::Var(x) => matches!(b, K::Var(y) if x == y),
        K::Param(x) => matches!(b, K::Param(y) if x == y),
        K::SymDim(x) => matches!(b, K::SymDim(y) if x == y),
        K::ParamExtent { param, dim } => {
            matches!(b, K::ParamExtent { param: p, dim: d } if param == p && dim == d)
        }
        K::Unary { op, operand } => {
            matches!(b, K::Unary { op: o, operand: e } if op == o && same_expr(operand, e))
        }
        K::Binary { op, lhs, rhs } => matches!(b, K::Binary { op: o, lhs: l, rhs: r }
            if op == o && same_expr(lhs, l) && same_expr(rhs, r)),
        K::Ternary { cond, then_value, else_value } => {
            matches!(b, K::Ternary { cond: c, then_value: t, else_value: e }
                if same_expr(cond, c) && same_expr(then_value, t) && same_expr(else_value, e))
        }
        K::Cdiv(x, y) => matches!(b, K::Cdiv(u, v) if same_expr(x, u) && same_expr(y, v)),
        K::At { buffer, index, id } => matches!(b, K::At { buffer: f, index: i, id: n }
            if buffer == f && id == n && same_index(index, i)),
        K::Math { func, args } => {
            matches!(b, K::Math { func: f, args: a } if func == f && same_exprs(args, a))
        }
        K::Cast { to, operand, implicit } => matches!(b, K::Cast { to: t, operand: e, implicit: i }
            if to == t && implicit == i && same_expr(operand, e)),
        K::CppCast { cpp_type, operand } => matches!(b, K::CppCast { cpp_type: t, operand: e }
            if cpp_type == t && same_expr(operand, e)),
        K::Ituple(items) => matches!(b, K::Ituple(other) if same_exprs(items, other)),
        K::Mdspan(dims) => matches!(b, K::Mdspan(other) if same_dims(dims, other)),
        K::Address { buffer, index } => {
            matches!(b, K::Address { buffer: f, index: i } if buffer == f && same_index(index, i))
        }
        K::Null => matches!(b, K::Null),
        K::Select { index, options } => matches!(b, K::Select { index: i, options: o }
            if same_expr(index, i) && same_exprs(options, o)),
        K::Call { callee, targs, args } => matches!(b, K::Call { callee: c, targs: t, args: a }
            if callee == c && targs == t && same_exprs(args, a)),
        K::Atomic { op, buffer, index, id, args } => {
            matches!(b, K::Atomic { op: o, buffer: f, index: i, id: n, args: a }
                if op == o && buffer == f && id == n && same_index(index, i) && same_exprs(args, a))
        }
        K::Error => matches!(b, K::Error),
    }
}

fn same_index(a: &ElemIndex, b: &ElemIndex) -> bool {
    match a {
        ElemIndex::Coords(x) => matches!(b, ElemIndex::Coords(y) if same_exprs(x, y)),
        ElemIndex::Flat(x) => matches!(b, ElemIndex::Flat(y) if same_expr(x, y)),
    }
}

fn same_ty(a: &Ty, b: &Ty) -> bool {
    match a {
        Ty::Scalar(x) => matches!(b, Ty::Scalar(y) if x == y),
        Ty::BoundedInt => matches!(b, Ty::BoundedInt),
        Ty::BoundedItuple(x) => matches!(b, Ty::BoundedItuple(y) if x == y),
        Ty::Ituple(x) => matches!(b, Ty::Ituple(y) if x == y),
        Ty::Mdspan(x) => matches!(b, Ty::Mdspan(y) if x == y),
        Ty::Spanned(x) => matches!(b, Ty::Spanned(y) if same_spanned_ty(x, y)),
        Ty::Stream => matches!(b, Ty::Stream),
        Ty::Pointer(x) => matches!(b, Ty::Pointer(y) if x == y),
        Ty::String => matches!(b, Ty::String),
        Ty::Void => matches!(b, Ty::Void),
        Ty::Error => matches!(b, Ty::Error),
    }
}

fn same_spanned_ty(a: &SpannedTy, b: &SpannedTy) -> bool {
    let SpannedTy { elem, dims, storage } = a;
    *elem == b.elem && *storage == b.storage && same_dims(dims, &b.dims)
}

fn same_dims(a: &[Dim], b: &[Dim]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_dim(x, y))
}

fn same_dim(a: &Dim, b: &Dim) -> bool {
    match a {
        Dim::Const(x) => matches!(b, Dim::Const(y) if x == y),
        Dim::Sym(x) => matches!(b, Dim::Sym(y) if x == y),
        Dim::Dynamic { param, dim } => {
            matches!(b, Dim::Dynamic { param: p, dim: d } if param == p && dim == d)
        }
        Dim::Expr(x) => matches!(b, Dim::Expr(y) if same_expr(x, y)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hir::arith;
    use crate::hir::{BinOp, ElemTy, VarId};
    use crate::source::{FileId, Span};

    fn span(start: usize) -> Span {
        Span::new(FileId(0), start..start + 1)
    }

    fn var(v: u32, at: usize) -> HExpr {
        HExpr { kind: HExprKind::Var(VarId(v)), ty: Ty::Scalar(ElemTy::S32), span: span(at) }
    }

    fn eq(lhs: HExpr, rhs: HExpr, at: usize) -> HExpr {
        HExpr {
            kind: HExprKind::Binary { op: BinOp::Eq, lhs: Box::new(lhs), rhs: Box::new(rhs) },
            ty: Ty::Scalar(ElemTy::Bool),
            span: span(at),
        }
    }

    #[test]
    fn spans_do_not_count_but_everything_else_does() {
        let a = eq(var(1, 0), arith::int_lit(1, span(5)), 0);
        let b = eq(var(1, 40), arith::int_lit(1, span(45)), 40);
        assert_ne!(a, b, "the derived equality sees the spans");
        assert!(same_expr(&a, &b));
        assert!(!same_expr(&a, &eq(var(2, 0), arith::int_lit(1, span(5)), 0)));
        assert!(!same_expr(&a, &eq(var(1, 0), arith::int_lit(0, span(5)), 0)));
        let mut other_type = b.clone();
        other_type.ty = Ty::Scalar(ElemTy::S32);
        assert!(!same_expr(&a, &other_type));
    }

    #[test]
    fn expressions_inside_types_are_compared_without_spans() {
        let ty = |at| {
            Ty::Spanned(SpannedTy {
                elem: ElemTy::F32,
                dims: vec![Dim::Expr(Box::new(var(3, at)))],
                storage: crate::hir::Storage::Shared,
            })
        };
        let mdspan = |at, v| HExpr {
            kind: HExprKind::Mdspan(vec![Dim::Expr(Box::new(var(v, at)))]),
            ty: ty(at),
            span: span(at),
        };
        assert!(same_expr(&mdspan(0, 3), &mdspan(9, 3)));
        assert!(!same_expr(&mdspan(0, 3), &mdspan(0, 4)));
    }
}
