//! Spanned data as values: buffers, spanned arrays and views (spec §5.5, §11.5, §13.3).
//!
//! A view is resolved here, once: [`hir::View`] records the buffer underneath, the view's
//! extents and how its coordinates reach the buffer's elements. Views that keep the buffer's
//! strides (`chunkat`, `chunk(..).at`, `subspan`, `modspan`, `view(..).from`, `sqz`, array
//! elements) are coordinate translations ([`Layout::Coords`]): an element access through one
//! is an access of the buffer at translated coordinates, which the bounds analysis checks per
//! dimension like any other. Views that reinterpret the layout (`span_as`, explicit strides)
//! address the buffer by flat element offset ([`Layout::Flat`]).
//!
//! Out-of-range views are errors when the numbers are known (the spec's messages); otherwise
//! every element access through a view is checked against the buffer underneath (statically
//! proven or checked in the kernel), so no view reaches memory outside its buffer.

use super::fold;
use super::scope::Symbol;
use super::{Checker, Val};
use crate::ast::{self, ExprKind};
use crate::diagnostics::Diagnostic;
use crate::hir::{
    self, BinOp, BufferRef, Dim, ElemTy, HExpr, HExprKind, Layout, LocalOrigin, LocalPlace,
    SpannedTy, Stmt, StmtKind, Ty, VarId, View, arith,
};
use crate::source::Span;

/// One tiling factor of `chunkat`: its current value and its bound.
struct Factor {
    value: HExpr,
    bound: Dim,
    span: Span,
}

impl Checker<'_> {
    // -- spanned values ---------------------------------------------------------------------

    /// The view a value denotes, when it is spanned data (`None` after reporting `E0426`
    /// otherwise; `what` says what needed data, e.g. "an element access").
    pub(crate) fn view_of(&mut self, v: Val, span: Span, what: &str) -> Option<View> {
        match v {
            Val::Buffer(buffer, ty) => Some(View::whole(buffer, &ty, span)),
            Val::View(view) => Some(view),
            Val::Future(f) => self.future_view(&f, span),
            Val::Error => None,
            Val::Array(v, _) => {
                let name = self.locals.get(v.index()).map(|l| l.name.clone()).unwrap_or_default();
                self.diags.push(
                    crate::diagnostics::Diagnostic::error(
                        "E0442",
                        span,
                        format!("'{name}' is an array of buffers: select one with `{name}[i]`"),
                    )
                    .with_label(format!("an array used as {what}")),
                );
                None
            }
            other => {
                self.error_label(
                    "E0426",
                    span,
                    format!(
                        "expect '{}' a spanned type but got '{}'",
                        self.text(span),
                        other.describe()
                    ),
                    format!("not spanned data ({what})"),
                );
                None
            }
        }
    }

    /// Spanned data as a value: a whole buffer is the buffer itself (it can be returned),
    /// anything else a view.
    pub(crate) fn data_val(&self, view: View) -> Val {
        let dims = self.buffer_dims(view.buffer);
        let whole = view.is_whole(&dims)
            && !matches!(view.buffer, hir::BufferRef::Local(v)
                if self.locals.get(v.index()).is_some_and(|l| l.array_dims > 0));
        if whole {
            let ty = hir::SpannedTy { elem: view.elem, dims, storage: view.storage };
            return Val::Buffer(view.buffer, ty);
        }
        Val::View(view)
    }

    /// Checks an expression that must denote spanned data.
    pub(crate) fn check_data(&mut self, e: &ast::Expr, what: &str) -> Option<View> {
        let v = self.check_expr(e);
        self.view_of(v, e.span, what)
    }

    /// `a[i]…`: one buffer of a spanned array (spec §11.5).
    pub(crate) fn check_array_element(&mut self, e: &ast::Expr) -> Val {
        // Collect the index chain down to the array's name: `b[i][j]` is Index(Index(b, i), j).
        let mut indices = Vec::new();
        let mut base = e;
        while let ExprKind::Index { base: inner, index } = &base.kind {
            indices.push(index.as_ref());
            base = inner;
        }
        indices.reverse();
        let (var, ty) = match self.check_expr(base) {
            Val::Array(v, ty) => (v, ty),
            Val::Error => return Val::Error,
            other => {
                self.error_label(
                    "E0442",
                    base.span,
                    format!(
                        "'{}' is not an array of buffers but '{}'",
                        self.text(base.span),
                        other.describe()
                    ),
                    "`[i]` selects a buffer of a spanned array",
                );
                return Val::Error;
            }
        };
        let name = self.locals.get(var.index()).map(|l| l.name.clone()).unwrap_or_default();
        let array_rank = self.locals.get(var.index()).map_or(0, |l| l.array_dims as usize);
        if indices.len() != array_rank {
            self.error_label(
                "E0442",
                e.span,
                format!(
                    "Invalid array access: expected {}, but {} {} used.",
                    crate::diagnostics::count(array_rank, "dimension"),
                    indices.len(),
                    if indices.len() == 1 { "was" } else { "were" }
                ),
                "wrong number of array indices",
            );
            return Val::Error;
        }
        let mut origin = Vec::with_capacity(ty.dims.len());
        for (k, ix) in indices.iter().enumerate() {
            let i = self.check_int(ix, "an array index");
            if matches!(i.ty, Ty::Error) {
                return Val::Error;
            }
            if let (Some(v), Some(n)) = (fold::const_int(&i), ty.dims[k].as_const()) {
                if v < 0 || v as u64 >= n {
                    self.error_label(
                        "E0442",
                        ix.span,
                        format!(
                            "Index {v} is out of bounds of the {} dimension of array '{name}', \
                             where the valid range is [0, {n})",
                            super::ordinal(k + 1)
                        ),
                        "out of bounds",
                    );
                    return Val::Error;
                }
            }
            origin.push(i);
        }
        let rank = ty.dims.len();
        origin.resize(rank, fold::int_lit(0, e.span));
        Val::View(View {
            buffer: BufferRef::Local(var),
            elem: ty.elem,
            storage: ty.storage,
            dims: ty.dims[array_rank..].to_vec(),
            layout: Layout::Coords { origin, map: (array_rank as u32..rank as u32).collect() },
        })
    }

    // -- view operations --------------------------------------------------------------------

    /// `base.op(…)`: a view of spanned data (spec §13.3).
    pub(crate) fn check_view_op(&mut self, base: &ast::Expr, op: &ast::ViewOp, span: Span) -> Val {
        let Some(src) = self.check_data(base, "the source of a view") else { return Val::Error };
        match self.view_op(src, base, op, span) {
            Some(v) => Val::View(v),
            None => Val::Error,
        }
    }

    fn view_op(
        &mut self,
        src: View,
        base: &ast::Expr,
        op: &ast::ViewOp,
        span: Span,
    ) -> Option<View> {
        let rank = src.dims.len();
        match op {
            ast::ViewOp::Chunkat(factors) => self.chunkat(src, factors, span),
            ast::ViewOp::Chunk { factors, at } => {
                let f = self.int_list(factors, "a chunk factor")?;
                let i = self.int_list(at, "a chunk index")?;
                if !self.rank_matches(rank, f.len(), "chunk factor", span)
                    || !self.rank_matches(rank, i.len(), "chunk index", span)
                {
                    return None;
                }
                let mut dims = Vec::with_capacity(rank);
                let mut starts = Vec::with_capacity(rank);
                for (d, (f, i)) in f.into_iter().zip(i).enumerate() {
                    let factor = self.positive_extent(f, "a chunk factor")?;
                    if !self.factor_fits(&factor, &src.dims[d], d, "tiling factor", span) {
                        return None;
                    }
                    let extent = dim_div(&src.dims[d], &factor, span);
                    starts.push(arith::mul(i, extent.to_expr(span), span));
                    dims.push(extent);
                }
                Some(offset_view(src, starts, dims, span))
            }
            ast::ViewOp::Subspan(tile) => self.tile_view(src, tile, false, span),
            ast::ViewOp::Modspan(tile) => self.tile_view(src, tile, true, span),
            ast::ViewOp::Window { extents, strides, from } => {
                self.window(src, extents, strides.as_deref(), from.as_deref(), span)
            }
            ast::ViewOp::SpanAs(items) => self.span_as(src, items, span),
            ast::ViewOp::Sqz => {
                let after_reshape = matches!(
                    &base.kind,
                    ExprKind::View {
                        op: ast::ViewOp::Subspan(_)
                            | ast::ViewOp::SpanAs(_)
                            | ast::ViewOp::Window { .. },
                        ..
                    }
                );
                if !after_reshape {
                    self.error_label(
                        "E0441",
                        span,
                        "`.sqz` requires a preceding .subspan, .span_as, or .view.",
                        "not after .subspan, .span_as or .view",
                    );
                    return None;
                }
                Some(squeeze(src))
            }
        }
    }

    /// `x.chunkat(f…)`: even tiles selected by bounded factors.
    fn chunkat(&mut self, src: View, factors: &[ast::Expr], span: Span) -> Option<View> {
        let mut all = Vec::new();
        for f in factors {
            all.extend(self.tiling_factors(f)?);
        }
        let rank = src.dims.len();
        if all.len() != rank {
            self.error_label(
                "E0437",
                span,
                format!(
                    "data rank ({rank}) must be consistent with tiling factor count ({}).",
                    all.len()
                ),
                "wrong number of tiling factors",
            );
            return None;
        }
        let mut dims = Vec::with_capacity(rank);
        let mut starts = Vec::with_capacity(rank);
        for (d, f) in all.into_iter().enumerate() {
            if !self.factor_fits(&f.bound, &src.dims[d], d, "tiling factor", f.span) {
                return None;
            }
            let extent = dim_div(&src.dims[d], &f.bound, span);
            starts.push(arith::mul(f.value, extent.to_expr(span), span));
            dims.push(extent);
        }
        Some(offset_view(src, starts, dims, span))
    }

    /// The tiling factors one `chunkat` argument stands for (spec §13.3 item 1).
    fn tiling_factors(&mut self, e: &ast::Expr) -> Option<Vec<Factor>> {
        let span = e.span;
        match &e.kind {
            ExprKind::Wildcard => {
                return Some(vec![Factor {
                    value: fold::int_lit(0, span),
                    bound: Dim::Const(1),
                    span,
                }]);
            }
            ExprKind::Binary { op: ast::BinaryOp::Compose, lhs, rhs } => {
                let value = match self.check_expr(e) {
                    Val::Scalar(v) => v,
                    _ => return None,
                };
                let (l, r) = (self.bound_in(lhs)?, self.bound_in(rhs)?);
                let bound = arith::dim_product(&[l, r], span);
                return Some(vec![Factor { value, bound, span }]);
            }
            _ => {}
        }
        let v = self.check_expr(e);
        let items = match v {
            Val::Scalar(x) => vec![x],
            Val::Tuple { items, bounded: true } => items,
            Val::Error => return None,
            other => {
                self.error_label(
                    "E0438",
                    span,
                    format!(
                        "a tiling factor must be a bounded integer (a parallel or `with` index), \
                         but got '{}'",
                        other.describe()
                    ),
                    "not a bounded value",
                );
                return None;
            }
        };
        let mut out = Vec::with_capacity(items.len());
        for value in items {
            if matches!(value.ty, Ty::Error) {
                return None;
            }
            let bound = match self.bound_of_value(&value) {
                Some(b) => b,
                // `v(-1)` folds to a constant: its bound is the bound of `v`.
                None => match &e.kind {
                    ExprKind::DimSelect { base, .. } => self.bound_in(base)?,
                    _ => {
                        self.error_label(
                            "E0438",
                            value.span,
                            "a tiling factor must be a bounded integer (a parallel or `with` \
                             index, or arithmetic on one)",
                            "no bound",
                        );
                        return None;
                    }
                },
            };
            out.push(Factor { value, bound, span });
        }
        Some(out)
    }

    /// The bound of the one bounded variable an expression mentions (`p`, `k - 1`, `p # q`
    /// gives the product), reporting `E0438` otherwise.
    fn bound_in(&mut self, e: &ast::Expr) -> Option<Dim> {
        match &e.kind {
            ExprKind::Binary { op: ast::BinaryOp::Compose, lhs, rhs } => {
                let (l, r) = (self.bound_in(lhs)?, self.bound_in(rhs)?);
                return Some(arith::dim_product(&[l, r], e.span));
            }
            ExprKind::Ident(id) => {
                if let Some(Symbol::Local(v)) = self.scopes.lookup(&id.name).cloned() {
                    if let Some(LocalOrigin::Tuple { components }) =
                        self.locals.get(v.index()).map(|l| l.origin.clone())
                    {
                        if let [c] = components.as_slice() {
                            return self.upper_of(*c);
                        }
                    }
                    if let Some(b) = self.upper_of(v) {
                        return Some(b);
                    }
                }
            }
            _ => {}
        }
        let v = self.check_expr(e);
        let found = match &v {
            Val::Scalar(x) => self.bound_of_value(x),
            _ => None,
        };
        if found.is_none() && !matches!(v, Val::Error) {
            self.error_label(
                "E0438",
                e.span,
                "a tiling factor must be a bounded integer (a parallel or `with` index)",
                "no bound",
            );
        }
        found
    }

    /// The bound of a bounded value: the upper bound of the one bounded variable it uses.
    fn bound_of_value(&self, value: &HExpr) -> Option<Dim> {
        let mut vars: Vec<VarId> = Vec::new();
        hir::visit::for_each_expr(value, |x| {
            if let HExprKind::Var(v) = &x.kind {
                if self.upper_of(*v).is_some() && !vars.contains(v) {
                    vars.push(*v);
                }
            }
            hir::visit::Walk::Continue
        });
        match vars.as_slice() {
            [v] => self.upper_of(*v),
            _ => None,
        }
    }

    /// `.subspan(e…)[.step(s…)][.at(i…)]` and `.modspan(…)` (spec §13.3 items 3–4).
    fn tile_view(
        &mut self,
        src: View,
        tile: &ast::TileView,
        remainder: bool,
        span: Span,
    ) -> Option<View> {
        let rank = src.dims.len();
        let what = if remainder { "modspan" } else { "subspan" };
        let extents = self.extent_list(&tile.extents, &src.dims, what)?;
        if !self.rank_matches(rank, extents.len(), &format!("{what} extent"), span) {
            return None;
        }
        let steps = match &tile.step {
            Some(s) => {
                let s = self.int_list(s, "a step")?;
                if !self.rank_matches(rank, s.len(), "step", span) {
                    return None;
                }
                Some(s)
            }
            None => None,
        };
        let at = match &tile.at {
            Some(a) => {
                let a = self.int_list(a, "a tile index")?;
                if !self.rank_matches(rank, a.len(), "tile index", span) {
                    return None;
                }
                Some(a)
            }
            None => None,
        };
        let mut dims = Vec::with_capacity(rank);
        let mut starts = Vec::with_capacity(rank);
        for d in 0..rank {
            let e = &extents[d];
            if !remainder {
                if let (Some(x), Some(n)) = (e.as_const(), src.dims[d].as_const()) {
                    if x > n {
                        self.error_label(
                            "E0439",
                            span,
                            format!("subspan too large for dimension {d} ({x} > {n})."),
                            "larger than the source",
                        );
                        return None;
                    }
                }
            }
            if remainder {
                if let (Some(x), Some(n)) = (e.as_const(), src.dims[d].as_const()) {
                    if n % x == 0 {
                        self.error_label(
                            "E0439",
                            span,
                            format!(
                                "the remainder tile of dimension {d} is empty ({n} % {x} == 0)."
                            ),
                            "empty modspan",
                        );
                        return None;
                    }
                }
            }
            let step = match &steps {
                Some(s) => s[d].clone(),
                None => e.to_expr(span),
            };
            let start = match &at {
                Some(a) => {
                    let i = a[d].clone();
                    if let (Some(iv), Some(sv), Some(n)) =
                        (fold::const_int(&i), fold::const_int(&step), src.dims[d].as_const())
                    {
                        let count = if sv > 0 { (n as i128 + sv - 1) / sv } else { 0 };
                        if iv < 0 || (sv > 0 && iv >= count) {
                            self.error_label(
                                "E0439",
                                i.span,
                                format!("index out of bounds for dimension {d} ({iv} >= {count})."),
                                "out of range",
                            );
                            return None;
                        }
                    }
                    arith::mul(i, step, span)
                }
                None => fold::int_lit(0, span),
            };
            starts.push(start);
            dims.push(if remainder { dim_rem(&src.dims[d], e, span) } else { e.clone() });
        }
        match &tile.strides {
            None => Some(offset_view(src, starts, dims, span)),
            Some(strides) => {
                let strides = self.int_list(strides, "a stride")?;
                if !self.rank_matches(rank, strides.len(), "stride", span) {
                    return None;
                }
                let base = self.buffer_dims(src.buffer);
                let (offset, _) = flat_layout(&src, &base, span);
                let mut flat = offset;
                for (s, st) in starts.into_iter().zip(&strides) {
                    flat = arith::add(flat, arith::mul(s, st.clone(), span), span);
                }
                Some(View { dims, layout: Layout::Flat { offset: Box::new(flat), strides }, ..src })
            }
        }
    }

    /// Whether a view lists one `what` per extent; `E0437` (labelled "wrong number of
    /// `label`") otherwise.
    fn view_list_agrees(
        &mut self,
        extents: usize,
        given: usize,
        what: &str,
        label: &str,
        span: Span,
    ) -> bool {
        if given == extents {
            return true;
        }
        self.error_label(
            "E0437",
            span,
            format!(
                "the view has {} but {}",
                crate::diagnostics::count(extents, "extent"),
                crate::diagnostics::count(given, what)
            ),
            format!("wrong number of {label}"),
        );
        false
    }

    /// `.view(e… [: s…])[.from(o…)]` (spec §13.3 item 5).
    fn window(
        &mut self,
        src: View,
        extents: &[ast::Expr],
        strides: Option<&[ast::Expr]>,
        from: Option<&[ast::Expr]>,
        span: Span,
    ) -> Option<View> {
        let rank = src.dims.len();
        let dims = self.extent_list(extents, &src.dims, "view")?;
        let origin = match from {
            Some(o) => self.int_list(o, "a view origin")?,
            None => vec![fold::int_lit(0, span); dims.len()],
        };
        if !self.view_list_agrees(
            dims.len(),
            origin.len(),
            "origin coordinate",
            "coordinates",
            span,
        ) {
            return None;
        }
        match strides {
            None => {
                if !self.rank_matches(rank, dims.len(), "view extent", span) {
                    return None;
                }
                for (d, (o, n)) in origin.iter().zip(&src.dims).enumerate() {
                    if let (Some(ov), Some(nv)) = (fold::const_int(o), n.as_const()) {
                        if ov < 0 || ov as u64 >= nv {
                            self.error_label(
                                "E0439",
                                o.span,
                                format!("offset out of bounds for dimension {d} ({ov} >= {nv})."),
                                "outside the source",
                            );
                            return None;
                        }
                    }
                }
                Some(offset_view(src, origin, dims, span))
            }
            Some(strides) => {
                let strides = self.int_list(strides, "a stride")?;
                if !self.view_list_agrees(dims.len(), strides.len(), "stride", "strides", span) {
                    return None;
                }
                // Explicit strides are in elements of the buffer underneath, and so are the
                // origin coordinates they multiply.
                let base = self.buffer_dims(src.buffer);
                let (mut flat, _) = flat_layout(&src, &base, span);
                for (o, s) in origin.into_iter().zip(&strides) {
                    flat = arith::add(flat, arith::mul(o, s.clone(), span), span);
                }
                Some(View { dims, layout: Layout::Flat { offset: Box::new(flat), strides }, ..src })
            }
        }
    }

    /// `.span_as([d…])`: the same elements with another shape (spec §13.3 item 6).
    fn span_as(&mut self, src: View, items: &[ast::Expr], span: Span) -> Option<View> {
        let items: Vec<ast::Expr> = match items {
            [one] => match &one.kind {
                ExprKind::Mdspan(inner) => inner.clone(),
                _ => vec![one.clone()],
            },
            _ => items.to_vec(),
        };
        let dims = self.check_shape_list(&items, span)?;
        let (old, new) = (Dim::const_count(&src.dims), Dim::const_count(&dims));
        if let (Some(a), Some(b)) = (old, new) {
            if a != b {
                self.error_label(
                    "E0440",
                    span,
                    format!(
                        "Inconsistent mdspan size: the data has {a} elements, but span_as gives \
                         {b}."
                    ),
                    "a different element count",
                );
                return None;
            }
        }
        let base = self.buffer_dims(src.buffer);
        match contiguity(&src, &base) {
            Contiguous::Yes => {}
            Contiguous::No => {
                self.error_label(
                    "E0440",
                    span,
                    "`.span_as` needs contiguous data, but this view skips elements of its buffer",
                    "not contiguous",
                );
                return None;
            }
            Contiguous::Unknown => self.warn(
                "W0404",
                span,
                "`.span_as` of a view that may not be contiguous (its extents are not known here)",
                "may not be contiguous",
            ),
        }
        let (offset, _) = flat_layout(&src, &base, span);
        let strides = row_major_strides(&dims, span);
        Some(View { dims, layout: Layout::Flat { offset: Box::new(offset), strides }, ..src })
    }

    // -- pieces ---------------------------------------------------------------------------

    /// The integers of a list (ituples spliced), reporting `E0414` for anything else.
    fn int_list(&mut self, items: &[ast::Expr], what: &str) -> Option<Vec<HExpr>> {
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for item in items {
            match self.check_expr(item) {
                Val::Tuple { items, .. } => out.extend(items),
                v => {
                    let e = self.expect_int(v, item.span, what);
                    ok &= !matches!(e.ty, Ty::Error);
                    out.push(e);
                }
            }
        }
        ok.then_some(out)
    }

    /// Extents of a tile or window: integers, spliced ituples/mdspans, `_` for the source's
    /// whole extent in that position.
    fn extent_list(&mut self, items: &[ast::Expr], src: &[Dim], what: &str) -> Option<Vec<Dim>> {
        let mut out: Vec<Dim> = Vec::with_capacity(items.len());
        for item in items {
            if let ExprKind::Wildcard = item.kind {
                match src.get(out.len()) {
                    Some(d) => out.push(d.clone()),
                    None => {
                        self.error_label(
                            "E0437",
                            item.span,
                            format!("`_` in {what} extents beyond the source's rank"),
                            "no such dimension",
                        );
                        return None;
                    }
                }
                continue;
            }
            match self.check_expr(item) {
                Val::Shape(d) => out.extend(d),
                Val::Tuple { items, .. } => {
                    for e in items {
                        out.push(self.positive_extent(e, "an extent")?);
                    }
                }
                v => {
                    let e = self.expect_int(v, item.span, "an extent");
                    if matches!(e.ty, Ty::Error) {
                        return None;
                    }
                    out.push(self.positive_extent(e, "an extent")?);
                }
            }
        }
        Some(out)
    }

    /// An integer as an extent: positive when constant (`E0419`).
    fn positive_extent(&mut self, e: HExpr, what: &str) -> Option<Dim> {
        if let Some(v) = fold::const_int(&e) {
            if v <= 0 {
                self.error_label(
                    "E0419",
                    e.span,
                    format!("{what} must be positive, but got {v}"),
                    "not positive",
                );
                return None;
            }
        }
        Some(Dim::from_expr(e))
    }

    /// Whether `count` (what the view operation was given) matches the source's rank
    /// (`E0437` otherwise).
    fn rank_matches(&mut self, rank: usize, count: usize, what: &str, span: Span) -> bool {
        if rank == count {
            return true;
        }
        self.error_label(
            "E0437",
            span,
            format!("data rank ({rank}) must be consistent with {what} count ({count})."),
            format!("wrong number of {what}s"),
        );
        false
    }

    /// Whether a tiling factor fits the extent it tiles (`E0439` when it is larger; `W0403`
    /// when it does not divide it).
    fn factor_fits(
        &mut self,
        factor: &Dim,
        extent: &Dim,
        d: usize,
        what: &str,
        span: Span,
    ) -> bool {
        if let (Some(f), Some(n)) = (factor.as_const(), extent.as_const()) {
            if f > n {
                self.error_label(
                    "E0439",
                    span,
                    format!("{what} exceeds data size ({f} > {n}) in dimension {d}."),
                    "more tiles than elements",
                );
                return false;
            }
            if n % f != 0 {
                self.warn(
                    "W0403",
                    span,
                    format!(
                        "the {what} {f} does not divide the extent {n} of dimension {d}: the last \
                         {} {} in no tile",
                        crate::diagnostics::count((n % f) as usize, "element"),
                        if n % f == 1 { "is" } else { "are" }
                    ),
                    "does not divide the extent",
                );
            }
        }
        true
    }

    /// The extents of a buffer's type.
    pub(crate) fn buffer_dims(&self, b: BufferRef) -> Vec<Dim> {
        match b {
            BufferRef::Param(p) => self.params.get(p.index()).map(|p| p.dims.clone()),
            BufferRef::Local(v) => match self.locals.get(v.index()).map(|l| &l.ty) {
                Some(Ty::Spanned(t)) => Some(t.dims.clone()),
                _ => None,
            },
        }
        .unwrap_or_default()
    }

    // -- named views --------------------------------------------------------------------

    /// `t = <view>;`: binds `name` to a view. Every coordinate, offset and stride that is not a
    /// constant or an immutable name is computed once, here, into an immutable local, so that
    /// later uses see the values of the binding (not of a later assignment).
    pub(crate) fn bind_view(&mut self, name: &ast::Ident, mut view: View, out: &mut Vec<Stmt>) {
        let mut n = 0;
        let mut keep = |this: &mut Self, e: &mut HExpr| {
            if this.is_stable(e) {
                return;
            }
            let ty = match e.ty.scalar() {
                Some(t) if t.is_int() => Ty::Scalar(t),
                _ => Ty::Scalar(ElemTy::S32),
            };
            let place = this.scalar_place();
            let var = this.new_local(
                &format!("{}__v{n}", name.name),
                e.span,
                ty.clone(),
                place,
                false,
                LocalOrigin::Decl,
            );
            n += 1;
            let span = e.span;
            let value = std::mem::replace(e, HExpr { kind: HExprKind::Var(var), ty, span });
            out.push(Stmt { kind: StmtKind::Let { var, init: Some(value) }, span });
        };
        match &mut view.layout {
            Layout::Coords { origin, .. } => {
                for e in origin.iter_mut() {
                    keep(self, e);
                }
            }
            Layout::Flat { offset, strides } => {
                keep(self, offset);
                for e in strides.iter_mut() {
                    keep(self, e);
                }
            }
        }
        for d in view.dims.iter_mut() {
            if let Dim::Expr(e) = d {
                keep(self, e);
            }
        }
        self.declare_symbol(name, Symbol::View(view));
    }

    /// Whether re-evaluating `e` later gives the value it has now: no mutable locals, no
    /// element reads.
    fn is_stable(&self, e: &HExpr) -> bool {
        let mut stable = true;
        hir::visit::for_each_expr(e, |x| {
            match &x.kind {
                HExprKind::Var(v) => {
                    stable &= self.locals.get(v.index()).is_some_and(|l| {
                        !l.mutable
                            && matches!(
                                l.place,
                                LocalPlace::HostScalar
                                    | LocalPlace::DeviceScalar
                                    | LocalPlace::ParallelIndex
                            )
                    })
                }
                HExprKind::At { .. } | HExprKind::Error => stable = false,
                _ => {}
            }
            hir::visit::Walk::Continue
        });
        stable
    }
}

/// `src` moved by `starts` (one per view dimension) with new extents `dims`.
fn offset_view(src: View, starts: Vec<HExpr>, dims: Vec<Dim>, span: Span) -> View {
    let layout = match src.layout {
        Layout::Coords { mut origin, map } => {
            for (k, s) in starts.into_iter().enumerate() {
                if let Some(o) = map.get(k).and_then(|b| origin.get_mut(*b as usize)) {
                    *o = arith::add(o.clone(), s, span);
                }
            }
            Layout::Coords { origin, map }
        }
        Layout::Flat { offset, strides } => {
            let mut flat = *offset;
            for (s, st) in starts.into_iter().zip(&strides) {
                flat = arith::add(flat, arith::mul(s, st.clone(), span), span);
            }
            Layout::Flat { offset: Box::new(flat), strides }
        }
    };
    View { dims, layout, ..src }
}

/// `src` without its dimensions of constant extent 1.
fn squeeze(src: View) -> View {
    let keep: Vec<bool> = src.dims.iter().map(|d| d.as_const() != Some(1)).collect();
    fn pick<T>(v: Vec<T>, keep: &[bool]) -> Vec<T> {
        v.into_iter().zip(keep).filter(|(_, k)| **k).map(|(x, _)| x).collect()
    }
    let layout = match src.layout {
        Layout::Coords { origin, map } => Layout::Coords { origin, map: pick(map, &keep) },
        Layout::Flat { offset, strides } => Layout::Flat { offset, strides: pick(strides, &keep) },
    };
    View { dims: pick(src.dims, &keep), layout, ..src }
}

/// The flat offset of a view's first element in its buffer (whose extents are `base`), and the
/// flat stride of each view dimension.
pub(crate) fn flat_layout(v: &View, base: &[Dim], span: Span) -> (HExpr, Vec<HExpr>) {
    match &v.layout {
        Layout::Flat { offset, strides } => ((**offset).clone(), strides.clone()),
        Layout::Coords { origin, map } => {
            let base_strides = row_major_strides(base, span);
            let mut offset = fold::int_lit(0, span);
            for (o, s) in origin.iter().zip(&base_strides) {
                offset = arith::add(offset, arith::mul(o.clone(), s.clone(), span), span);
            }
            let strides = map
                .iter()
                .map(|b| base_strides.get(*b as usize).cloned().unwrap_or(fold::int_lit(0, span)))
                .collect();
            (offset, strides)
        }
    }
}

/// Row-major strides of a dense shape.
fn row_major_strides(dims: &[Dim], span: Span) -> Vec<HExpr> {
    let mut strides = vec![fold::int_lit(1, span); dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        strides[k] = arith::mul(strides[k + 1].clone(), dims[k + 1].to_expr(span), span);
    }
    strides
}

/// Whether a view's elements are one dense run of its buffer.
enum Contiguous {
    Yes,
    No,
    Unknown,
}

fn contiguity(v: &View, base: &[Dim]) -> Contiguous {
    // The view's extents with their flat strides, size-1 dimensions left out: contiguous when
    // the innermost stride is 1 and each stride is the next one times its extent.
    let span = Span { file: crate::source::FileId(0), start: 0, end: 0 };
    let (_, strides) = flat_layout(v, base, span);
    let mut unknown = false;
    let mut expected: Option<i128> = Some(1);
    for (d, s) in v.dims.iter().zip(&strides).rev() {
        if d.as_const() == Some(1) {
            continue;
        }
        match (fold::const_int(s), expected) {
            (Some(sv), Some(ev)) if sv != ev => return Contiguous::No,
            (Some(_), Some(_)) => {}
            _ => unknown = true,
        }
        expected = match (expected, d.as_const()) {
            (Some(e), Some(n)) => e.checked_mul(n as i128),
            _ => None,
        };
    }
    if unknown { Contiguous::Unknown } else { Contiguous::Yes }
}

/// `a / b` of two extents (constant when both are).
fn dim_div(a: &Dim, b: &Dim, span: Span) -> Dim {
    match (a.as_const(), b.as_const()) {
        (Some(x), Some(y)) if y > 0 => Dim::Const((x / y).max(1)),
        _ => Dim::from_expr(arith::div(a.to_expr(span), b.to_expr(span), span)),
    }
}

/// `a % b` of two extents (the remainder tile of `modspan`).
fn dim_rem(a: &Dim, b: &Dim, span: Span) -> Dim {
    match (a.as_const(), b.as_const()) {
        (Some(x), Some(y)) if y > 0 => Dim::Const((x % y).max(1)),
        _ => Dim::from_expr(arith::rem(a.to_expr(span), b.to_expr(span), span)),
    }
}

// -- select -----------------------------------------------------------------------------------

impl Checker<'_> {
    /// `select(k, a, b, …)` of same-typed data (spec §14.3), where it may stand: a DMA source
    /// or destination, or data given a name (`x = select(…)`). The choice is made once, here,
    /// into a pointer local ([`LocalPlace::Selected`]) whose view is returned. The candidates
    /// are whole buffers or futures' data; the index must be proven in range (a constant, a
    /// bounded variable, `k % n`, `k & m`), so that no run-time check is needed.
    pub(crate) fn select_data(
        &mut self,
        index: &ast::Expr,
        items: &[ast::Expr],
        span: Span,
        out: &mut Vec<Stmt>,
    ) -> Option<View> {
        if !self.in_device() {
            self.error_label(
                "E0457",
                span,
                "`select` is only allowed inside a parallel-by",
                "host code",
            );
            return None;
        }
        let k = self.check_scalar(index, "a select index");
        if matches!(k.ty, Ty::Error) {
            return None;
        }
        if !k.ty.is_integer() {
            self.error_label(
                "E0457",
                index.span,
                format!(
                    "expect `{}` to be a (bounded) integer type, but got '{}'",
                    self.text(index.span),
                    crate::sema::types::ty_name(&k.ty)
                ),
                "not an integer",
            );
            return None;
        }
        let mut views = Vec::with_capacity(items.len());
        for item in items {
            views.push(self.check_data(item, "a select candidate"));
        }
        let views: Vec<View> = views.into_iter().collect::<Option<_>>()?;
        let first = views.first()?.clone();
        let describe = |v: &View| {
            crate::sema::types::ty_name(&Ty::Spanned(SpannedTy {
                elem: v.elem,
                dims: v.dims.clone(),
                storage: v.storage,
            }))
        };
        let mut ok = true;
        for (item, v) in items.iter().zip(&views) {
            if !v.is_whole(&self.buffer_dims(v.buffer)) {
                self.diags.push(
                    Diagnostic::error(
                        "E0457",
                        item.span,
                        format!(
                            "`select` chooses among whole buffers and futures' data, but `{}` \
                             is a view",
                            self.text(item.span)
                        ),
                    )
                    .with_label("a view")
                    .with_help("select the buffers, then take the view of the result"),
                );
                ok = false;
            } else if v.elem != first.elem || v.storage != first.storage || v.dims != first.dims {
                self.error_label(
                    "E0457",
                    item.span,
                    format!(
                        "expect `{}`({}) to be the same type as `{}`({})",
                        self.text(item.span),
                        describe(v),
                        self.text(items[0].span),
                        describe(&first)
                    ),
                    "a different type",
                );
                ok = false;
            }
        }
        if !ok {
            return None;
        }
        let n = views.len() as i128;
        if let Some(c) = fold::const_int(&k) {
            if !(0..n).contains(&c) {
                self.error_label(
                    "E0457",
                    index.span,
                    format!("The select factor `{c}` is not in bound [0, {n})"),
                    "out of range",
                );
                return None;
            }
            return views.into_iter().nth(c as usize);
        }
        if !self.proven_below(&k, n) {
            self.diags.push(
                Diagnostic::error(
                    "E0457",
                    index.span,
                    format!(
                        "the select index `{}` is not provably within [0, {n})",
                        self.text(index.span)
                    ),
                )
                .with_label("may be out of range")
                .with_help(format!(
                    "use a bounded variable of extent {n} or less, or reduce it: `k % {n}`"
                )),
            );
            return None;
        }
        let mut options = Vec::with_capacity(views.len());
        for v in &views {
            self.mark_access(v.buffer, true, true);
            let zeros = vec![fold::int_lit(0, span); v.dims.len()];
            options.push(HExpr {
                kind: HExprKind::Address { buffer: v.buffer, index: v.element(zeros, span) },
                ty: Ty::Pointer(v.elem),
                span,
            });
        }
        let ty = SpannedTy { elem: first.elem, dims: first.dims.clone(), storage: first.storage };
        let var = self.new_local(
            "selected",
            span,
            Ty::Spanned(ty.clone()),
            LocalPlace::Selected,
            false,
            LocalOrigin::Decl,
        );
        let init = HExpr {
            kind: HExprKind::Select { index: Box::new(k), options },
            ty: Ty::Pointer(first.elem),
            span,
        };
        out.push(Stmt { kind: StmtKind::Let { var, init: Some(init) }, span });
        Some(View::whole(BufferRef::Local(var), &ty, span))
    }

    /// Whether the integer `k` is in `[0, n)` whatever the values it depends on.
    fn proven_below(&self, k: &HExpr, n: i128) -> bool {
        let constant = |e: &HExpr| match e.kind {
            HExprKind::Int(c) => Some(c),
            _ => None,
        };
        match &k.kind {
            HExprKind::Var(v) => {
                matches!(self.upper_of(*v), Some(Dim::Const(u)) if i128::from(u) <= n)
            }
            HExprKind::Binary { op: BinOp::Rem, lhs, rhs } => {
                let non_negative = lhs.ty.is_bounded()
                    || lhs.ty.scalar().is_some_and(|t| t.is_int() && !t.is_signed_int());
                non_negative && constant(rhs).is_some_and(|c| c > 0 && c <= n)
            }
            HExprKind::Binary { op: BinOp::BitAnd, rhs, .. } => {
                constant(rhs).is_some_and(|m| m >= 0 && m < n)
            }
            HExprKind::Cast { operand, .. } => self.proven_below(operand, n),
            _ => false,
        }
    }
}
