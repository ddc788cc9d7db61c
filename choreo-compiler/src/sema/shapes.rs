//! mdspan and ituple values, shape lists and extents (spec §5.3, §13.1).

use super::fold;
use super::scope::Symbol;
use super::types;
use super::{Checker, Val};
use crate::ast;
use crate::hir::visit::{self, Walk};
use crate::hir::{Dim, HExpr, HExprKind, LocalOrigin, LocalPlace, Ty};
use crate::source::Span;

/// The s32 expression of an extent.
pub(crate) fn dim_to_expr(d: &Dim, span: Span) -> HExpr {
    d.to_expr(span)
}

/// The extent an s32 expression denotes (constants must be checked positive by the caller).
pub(crate) fn expr_to_dim(e: HExpr) -> Dim {
    Dim::from_expr(e)
}

/// Why a value cannot be an extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DimIssue {
    /// Depends on a mutable scalar.
    Mutable,
    /// Depends on the current value of a bounded variable.
    BoundedCurrent,
    /// Depends on a per-thread (device) scalar.
    PerThread,
    /// Depends on buffer contents.
    Data,
}

impl Checker<'_> {
    /// The first reason why `e` cannot be part of a shape, if any.
    pub(crate) fn dim_issue(&self, e: &HExpr) -> Option<DimIssue> {
        let mut issue = None;
        visit::for_each_expr(e, |x| {
            if issue.is_some() {
                return Walk::Skip;
            }
            match &x.kind {
                HExprKind::Var(v) => {
                    if let Some(local) = self.locals.get(v.index()) {
                        issue = match (&local.origin, local.place) {
                            (
                                LocalOrigin::ParallelIndex { .. }
                                | LocalOrigin::WithIndex { .. }
                                | LocalOrigin::RangeLocal { .. }
                                | LocalOrigin::Tuple { .. },
                                _,
                            ) => Some(DimIssue::BoundedCurrent),
                            _ if local.mutable => Some(DimIssue::Mutable),
                            (_, LocalPlace::DeviceScalar) => Some(DimIssue::PerThread),
                            _ => None,
                        };
                    }
                    Walk::Continue
                }
                HExprKind::At { .. } => {
                    issue = Some(DimIssue::Data);
                    Walk::Skip
                }
                _ => Walk::Continue,
            }
        });
        issue
    }

    /// Reports a [`DimIssue`] for a shape item (`E0416`).
    pub(crate) fn report_dim_issue(&mut self, issue: DimIssue, span: Span) {
        let (msg, label) = match issue {
            DimIssue::Mutable => {
                ("mdspan/ituple can not be initialized with mutable values.", "mutable value")
            }
            DimIssue::BoundedCurrent => (
                "Dimension of span can only be const integer value, but got the current value \
                 of a bounded variable.",
                "bounded variable",
            ),
            DimIssue::PerThread => (
                "Dimension of span can only be const integer value, but got a per-thread value.",
                "per-thread value",
            ),
            DimIssue::Data => (
                "Dimension of span can only be const integer value, but got an element of \
                 spanned data.",
                "data-dependent value",
            ),
        };
        self.error_label("E0416", span, msg, label);
    }

    /// Checks one integer extent item of a shape (no splicing): integer type, allowed
    /// dependencies, positive when constant.
    pub(crate) fn extent_item(&mut self, e: HExpr, allow_per_thread: bool) -> Option<HExpr> {
        if matches!(e.ty, Ty::Error) {
            return None;
        }
        if !e.ty.is_integer() {
            self.error_label(
                "E0414",
                e.span,
                format!("unexpected data type '{}' is found in mdspan.", types::ty_name(&e.ty)),
                "not an integer",
            );
            return None;
        }
        match self.dim_issue(&e) {
            Some(DimIssue::PerThread) if allow_per_thread => {}
            Some(issue) => {
                self.report_dim_issue(issue, e.span);
                return None;
            }
            None => {}
        }
        if let Some(v) = fold::const_int(&e) {
            if v <= 0 {
                self.error_label(
                    "E0419",
                    e.span,
                    format!("The mdspan size \"{v}\" is invalid!"),
                    "extents must be positive",
                );
                return None;
            }
        }
        Some(e)
    }

    /// Splices the checked value of one shape-list item into `out`.
    fn splice_shape_item(&mut self, v: Val, span: Span, out: &mut Vec<Dim>) -> bool {
        match v {
            Val::Scalar(e) => match self.extent_item(e, true) {
                Some(e) => {
                    out.push(expr_to_dim(e));
                    true
                }
                None => false,
            },
            Val::Shape(d) => {
                out.extend(d);
                true
            }
            Val::Tuple { items, .. } => {
                let mut ok = true;
                for e in items {
                    match self.extent_item(e, true) {
                        Some(e) => out.push(expr_to_dim(e)),
                        None => ok = false,
                    }
                }
                ok
            }
            Val::Buffer(_, _) => {
                self.error_label(
                    "E0414",
                    span,
                    "spanned data is not allowed in a shape (use `x.span`)",
                    "not an extent",
                );
                false
            }
            Val::Error => false,
            other => {
                self.error_label(
                    "E0414",
                    span,
                    format!("unexpected data type '{}' is found in mdspan.", other.describe()),
                    "not an integer",
                );
                false
            }
        }
    }

    /// `[a, b, …]`: an mdspan literal with spliced mdspans/ituples.
    pub(crate) fn check_mdspan_literal(&mut self, items: &[ast::Expr], span: Span) -> Val {
        let mut dims = Vec::new();
        let mut ok = true;
        for item in items {
            let v = self.check_expr(item);
            ok &= self.splice_shape_item(v, item.span, &mut dims);
        }
        if !ok {
            return Val::Error;
        }
        if dims.is_empty() {
            self.error_label("E0419", span, "an mdspan must have at least one extent", "empty");
            return Val::Error;
        }
        Val::Shape(dims)
    }

    /// `{a, b, …}`: an ituple literal with spliced ituples/mdspans.
    pub(crate) fn check_ituple_literal(&mut self, items: &[ast::Expr], _span: Span) -> Val {
        let mut out = Vec::new();
        let mut bounded = false;
        let mut ok = true;
        for item in items {
            match self.check_expr(item) {
                Val::Scalar(e) => {
                    if matches!(e.ty, Ty::Error) {
                        ok = false;
                        continue;
                    }
                    if !e.ty.is_integer() {
                        self.error_label(
                            "E0414",
                            item.span,
                            format!(
                                "an ituple requires integers but got '{}'",
                                types::ty_name(&e.ty)
                            ),
                            "not an integer",
                        );
                        ok = false;
                        continue;
                    }
                    if self.dim_issue(&e) == Some(DimIssue::Mutable) {
                        self.error_label(
                            "E0416",
                            item.span,
                            "mutable values can not be used for the ituple declaration.",
                            "mutable value",
                        );
                        ok = false;
                        continue;
                    }
                    bounded |= e.ty.is_bounded();
                    out.push(e);
                }
                Val::Tuple { items, bounded: b } => {
                    bounded |= b;
                    out.extend(items);
                }
                Val::Shape(d) => out.extend(d.iter().map(|x| dim_to_expr(x, item.span))),
                Val::Error => ok = false,
                other => {
                    self.error_label(
                        "E0414",
                        item.span,
                        format!("an ituple requires integers but got '{}'", other.describe()),
                        "not an integer",
                    );
                    ok = false;
                }
            }
        }
        if !ok {
            return Val::Error;
        }
        Val::Tuple { items: out, bounded }
    }

    /// The extents of a declaration's shape list (`T [items…] x`).
    pub(crate) fn check_shape_list(&mut self, items: &[ast::Expr], span: Span) -> Option<Vec<Dim>> {
        let mut dims = Vec::new();
        let mut ok = true;
        for item in items {
            let v = self.check_expr(item);
            if let Val::Scalar(e) = &v {
                if matches!(self.dim_issue(e), Some(DimIssue::PerThread)) {
                    self.report_dim_issue(DimIssue::PerThread, item.span);
                    ok = false;
                    continue;
                }
            }
            ok &= self.splice_shape_item(v, item.span, &mut dims);
        }
        if ok && dims.is_empty() {
            self.error_label("E0419", span, "a shape must have at least one extent", "empty");
            return None;
        }
        ok.then_some(dims)
    }

    /// The shape of a `with`/`foreach` bound: an integer (rank 1) or an mdspan.
    pub(crate) fn check_with_bound(&mut self, bound: &ast::Expr) -> Option<Vec<Dim>> {
        let v = self.check_expr(bound);
        match v {
            Val::Scalar(e) => {
                let e = self.extent_item(e, true)?;
                Some(vec![expr_to_dim(e)])
            }
            Val::Shape(d) => Some(d),
            Val::Tuple { .. } => {
                self.error_label(
                    "E0614",
                    bound.span,
                    "must use mdspan instead of ituple to define the bound.",
                    "ituple bound",
                );
                None
            }
            Val::Error => None,
            other => {
                self.error_label(
                    "E0414",
                    bound.span,
                    format!("the bound requires integers but got '{}'", other.describe()),
                    "not an integer",
                );
                None
            }
        }
    }

    /// `[mdspan[<N>]] name : value;`
    pub(crate) fn check_mdspan_decl(&mut self, d: &ast::MdspanDecl) {
        let v = self.check_expr(&d.value);
        let dims = match v {
            Val::Shape(dims) => dims,
            Val::Error => return self.declare_symbol(&d.name, Symbol::Shape(Vec::new())),
            other => {
                self.error_label(
                    "E0421",
                    d.value.span,
                    format!(
                        "`{}' is declared as \"mdspan<> []\" but initialized as \"{}\"",
                        d.name.name,
                        other.describe()
                    ),
                    "not an mdspan",
                );
                return self.declare_symbol(&d.name, Symbol::Shape(Vec::new()));
            }
        };
        if let Some((rank, span)) = d.rank {
            if rank != dims.len() as u64 {
                self.error_label(
                    "E0420",
                    span,
                    format!(
                        "`{}' is declared as \"mdspan<{rank}> []\" but initialized as \
                         \"mdspan<{}> []\"",
                        d.name.name,
                        dims.len()
                    ),
                    "rank differs",
                );
            }
        }
        self.declare_symbol(&d.name, Symbol::Shape(dims));
    }

    /// `ituple[<N>] name = value;`
    pub(crate) fn check_ituple_decl(&mut self, d: &ast::ItupleDecl) {
        let v = self.check_expr(&d.value);
        let (items, bounded) = match v {
            Val::Tuple { items, bounded } => (items, bounded),
            Val::Error => {
                return self
                    .declare_symbol(&d.name, Symbol::Tuple { items: Vec::new(), bounded: false });
            }
            other => {
                self.error_label(
                    "E0421",
                    d.value.span,
                    format!(
                        "`{}' is declared as \"ituple\" but initialized as \"{}\"",
                        d.name.name,
                        other.describe()
                    ),
                    "not an ituple",
                );
                return self
                    .declare_symbol(&d.name, Symbol::Tuple { items: Vec::new(), bounded: false });
            }
        };
        if let Some((rank, span)) = d.rank {
            if rank != items.len() as u64 {
                self.error_label(
                    "E0420",
                    span,
                    format!(
                        "`{}' is declared as \"ituple<{rank}>\" but initialized as \"ituple<{}>\"",
                        d.name.name,
                        items.len()
                    ),
                    "rank differs",
                );
            }
        }
        self.declare_symbol(&d.name, Symbol::Tuple { items, bounded });
    }
}
