//! Expressions (spec §4.5, §12, §13): precedence climbing over the table of §4.5, primaries,
//! postfix member operations (`.at`, `.span`, view operations), derivations and `|…|`.
//!
//! Precedence, lowest to highest: `?:` (right) · `||` · `&&` · `== !=` · `< <= > >=` ·
//! `<< >>` · `+ -` · `* / %` · `#+ #-` · `#* #/ #%` · prefix `! ++ --` · `& ^ |` · binary `#` ·
//! prefix `~ -` (and `&` address-of) · postfix. A prefix operator of level 11 (`!`) takes an
//! operand that may contain binary operators of level 12 and up, so `!b & c` is `!(b & c)`;
//! `~` and `-` take a single (prefix or postfix) operand. A `-` directly before a numeric literal
//! (or `inf`) makes a negative literal.

use super::{PResult, Parser, Reported};
use crate::ast::{
    BinaryOp, CastTarget, DeriveItem, Expr, ExprKind, Ident, ScalarType, Storage, TileView,
    UnaryOp, ViewOp,
};
use crate::diagnostics::Diagnostic;
use crate::source::Span;
use crate::token::{Dotted, FloatLit, IntLit, Keyword, Punct, StrLit, TokenKind};

/// The binary operator a token stands for, if any.
pub(super) fn binary_op(kind: &TokenKind) -> Option<BinaryOp> {
    let TokenKind::Punct(p) = kind else { return None };
    Some(match p {
        Punct::OrOr => BinaryOp::Or,
        Punct::AndAnd => BinaryOp::And,
        Punct::EqEq => BinaryOp::Eq,
        Punct::NotEq => BinaryOp::Ne,
        Punct::Lt => BinaryOp::Lt,
        Punct::Le => BinaryOp::Le,
        Punct::Gt => BinaryOp::Gt,
        Punct::Ge => BinaryOp::Ge,
        Punct::Shl => BinaryOp::Shl,
        Punct::Shr => BinaryOp::Shr,
        Punct::Plus => BinaryOp::Add,
        Punct::Minus => BinaryOp::Sub,
        Punct::Star => BinaryOp::Mul,
        Punct::Slash => BinaryOp::Div,
        Punct::Percent => BinaryOp::Rem,
        Punct::HashPlus => BinaryOp::BoundedAdd,
        Punct::HashMinus => BinaryOp::BoundedSub,
        Punct::HashStar => BinaryOp::BoundedMul,
        Punct::HashSlash => BinaryOp::BoundedDiv,
        Punct::HashPercent => BinaryOp::BoundedRem,
        Punct::Amp => BinaryOp::BitAnd,
        Punct::Caret => BinaryOp::BitXor,
        Punct::Pipe => BinaryOp::BitOr,
        Punct::Hash => BinaryOp::Compose,
        _ => return None,
    })
}

/// Whether the token starts a call-like construct (`call_stmt` of spec §4.8 except print and
/// assert), which is allowed only as a whole initialiser, assigned value or `if` condition.
pub(super) fn starts_call(kind: &TokenKind) -> bool {
    matches!(
        kind,
        TokenKind::Keyword(Keyword::Call | Keyword::BarArrive | Keyword::BarSync)
            | TokenKind::IntrinsicIdent(_)
            | TokenKind::LibIdent(_)
            | TokenKind::Atomic(_)
    )
}

/// The scalar type a token names (`int`, `bool` or an element type).
pub(super) fn scalar_type(kind: &TokenKind) -> Option<ScalarType> {
    match kind {
        TokenKind::Keyword(Keyword::Int) => Some(ScalarType::Int),
        TokenKind::Keyword(Keyword::Bool) => Some(ScalarType::Bool),
        TokenKind::ElemType(e) => Some(ScalarType::Elem(*e)),
        _ => None,
    }
}

/// The storage a keyword names.
pub(super) fn storage(kind: &TokenKind) -> Option<Storage> {
    match kind {
        TokenKind::Keyword(Keyword::Global) => Some(Storage::Global),
        TokenKind::Keyword(Keyword::Shared) => Some(Storage::Shared),
        TokenKind::Keyword(Keyword::Local) => Some(Storage::Local),
        _ => None,
    }
}

fn boxed(span: Span, kind: ExprKind) -> Box<Expr> {
    Box::new(Expr { span, kind })
}

impl Parser<'_, '_> {
    /// Runs `f` with the shape-list flag set to `shape` (restored afterwards).
    pub(super) fn with_shape_ctx<T>(
        &mut self,
        shape: bool,
        f: impl FnOnce(&mut Self) -> PResult<T>,
    ) -> PResult<T> {
        let saved = std::mem::replace(&mut self.shape_ctx, shape);
        let result = f(self);
        self.shape_ctx = saved;
        result
    }

    /// A full expression (level 1, the conditional operator).
    pub(super) fn expr(&mut self) -> PResult<Expr> {
        self.nested(|p| p.ternary())
    }

    /// An expression that is not an item of a shape list.
    pub(super) fn plain_expr(&mut self) -> PResult<Expr> {
        self.with_shape_ctx(false, |p| p.expr())
    }

    /// An item of a shape list (`T [ … ]`, mdspan literals, `span_as`, mdspan declarations).
    pub(super) fn shape_item(&mut self) -> PResult<Expr> {
        self.with_shape_ctx(true, |p| p.expr())
    }

    fn ternary(&mut self) -> PResult<Expr> {
        let cond = self.binary(2)?;
        if self.eat_punct(Punct::Question).is_none() {
            return Ok(cond);
        }
        let then_value = self.expr()?;
        self.expect_punct(Punct::Colon)?;
        let else_value = self.nested(|p| p.ternary())?;
        let span = cond.span.to(else_value.span);
        Ok(Expr {
            span,
            kind: ExprKind::Ternary {
                cond: Box::new(cond),
                then_value: Box::new(then_value),
                else_value: Box::new(else_value),
            },
        })
    }

    /// Binary operators of level `min` and above, left-associative.
    fn binary(&mut self, min: u8) -> PResult<Expr> {
        self.binary_of(min, Self::operand, |_| true)
    }

    /// Binary operators of level `min` and above that `accepts` (the first other one ends
    /// the expression), over operands parsed by `operand`; left-associative, with the
    /// nesting limits of every expression.
    pub(super) fn binary_of(
        &mut self,
        min: u8,
        operand: fn(&mut Self) -> PResult<Expr>,
        accepts: fn(BinaryOp) -> bool,
    ) -> PResult<Expr> {
        let (mut lhs, mut depth) = self.measured(operand)?;
        while let Some(op) = binary_op(self.kind()) {
            let level = op.level();
            if level < min || !accepts(op) {
                break;
            }
            self.bump();
            let (rhs, rhs_depth) =
                self.measured(|p| p.nested(|p| p.binary_of(level + 1, operand, accepts)))?;
            depth = self.chain_link(depth.max(rhs_depth))?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                span,
                kind: ExprKind::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) },
            };
        }
        Ok(lhs)
    }

    /// An operand: prefix operators, then a postfix expression.
    pub(super) fn operand(&mut self) -> PResult<Expr> {
        let start = self.span();
        let op = match self.kind() {
            TokenKind::Punct(Punct::Bang) => UnaryOp::Not,
            TokenKind::Punct(Punct::PlusPlus) => UnaryOp::PreInc,
            TokenKind::Punct(Punct::MinusMinus) => UnaryOp::PreDec,
            TokenKind::Punct(Punct::Tilde) => UnaryOp::BitNot,
            TokenKind::Punct(Punct::Minus) => UnaryOp::Neg,
            TokenKind::Punct(Punct::Amp) => {
                self.bump();
                let operand = self.nested(|p| p.operand())?;
                let span = start.to(operand.span);
                return Ok(Expr { span, kind: ExprKind::AddressOf(Box::new(operand)) });
            }
            _ => return self.postfix_expr(),
        };
        self.bump();
        if op == UnaryOp::Neg {
            if let Some(lit) = self.negative_literal(start) {
                return Ok(lit);
            }
        }
        let operand = match op {
            // Level 11: the operand may contain `& ^ |`, `#` and tighter operators.
            UnaryOp::Not | UnaryOp::PreInc | UnaryOp::PreDec => self.nested(|p| p.binary(12))?,
            _ => self.nested(|p| p.operand())?,
        };
        let span = start.to(operand.span);
        Ok(Expr { span, kind: ExprKind::Unary { op, operand: Box::new(operand) } })
    }

    /// After a `-` (at `minus`): a numeric literal or `inf` becomes a negative literal.
    fn negative_literal(&mut self, minus: Span) -> Option<Expr> {
        let kind = match self.kind() {
            TokenKind::Int(lit) => ExprKind::Int(IntLit { value: -lit.value, ty: lit.ty }),
            TokenKind::Float(lit) => {
                ExprKind::Float(FloatLit { value: -lit.value, is_f32: lit.is_f32 })
            }
            TokenKind::Keyword(Keyword::Inf) => {
                ExprKind::Float(FloatLit { value: f64::NEG_INFINITY, is_f32: true })
            }
            _ => return None,
        };
        let span = minus.to(self.bump().span);
        Some(Expr { span, kind })
    }

    /// A primary followed by postfix operations: `(i)`, `[…]`, member operations, `++`/`--`.
    pub(super) fn postfix_expr(&mut self) -> PResult<Expr> {
        let (mut e, mut depth) = self.measured(|p| p.primary())?;
        loop {
            let wraps = match self.kind() {
                TokenKind::Punct(Punct::LParen | Punct::PlusPlus | Punct::MinusMinus) => true,
                TokenKind::Punct(Punct::LBracket) => is_bracket_base(&e.kind),
                TokenKind::Dotted(d) => is_member_op(*d),
                _ => false,
            };
            if !wraps {
                return Ok(e);
            }
            let (next, step_depth) = self.measured(|p| p.postfix_step(e))?;
            depth = self.chain_link(depth.max(step_depth))?;
            e = next;
        }
    }

    /// One postfix operation on `e` (see [`Parser::postfix_expr`]); `e` itself when none
    /// follows.
    fn postfix_step(&mut self, e: Expr) -> PResult<Expr> {
        Ok(match self.kind() {
            TokenKind::Punct(Punct::LParen) => self.dim_select(e)?,
            TokenKind::Punct(Punct::LBracket) if is_bracket_base(&e.kind) => {
                self.bracket_suffix(e)?
            }
            TokenKind::Punct(Punct::PlusPlus | Punct::MinusMinus) => {
                let op = if self.at_punct(Punct::PlusPlus) {
                    UnaryOp::PostInc
                } else {
                    UnaryOp::PostDec
                };
                let span = e.span.to(self.bump().span);
                Expr { span, kind: ExprKind::Unary { op, operand: Box::new(e) } }
            }
            TokenKind::Dotted(d) if is_member_op(*d) => self.member(e, *d)?,
            _ => e,
        })
    }

    /// Reports the call of `name`, a C spelling of the Choreo built-in `builtin` (`fmaxf` for
    /// `__max`), with the Choreo name as the help.
    pub(super) fn c_spelling(&mut self, name: &str, span: Span, builtin: &str) -> Reported {
        self.report(
            Diagnostic::error(
                "E0301",
                span,
                format!("syntax error, '{name}' is not a Choreo built-in"),
            )
            .with_label("unknown function")
            .with_help(format!("Choreo spells it `{builtin}`")),
        );
        Reported
    }

    /// `base(i)`: dimension/component selection (also `v(-1)`).
    fn dim_select(&mut self, base: Expr) -> PResult<Expr> {
        // `fmaxf(x, y)`, `sqrtf(x * 2)`: a C spelling of a built-in, called with what cannot be
        // a selection index. (A simple `exp(x)` parses as a selection; sema then reports the
        // undeclared name with the same hint.)
        if let ExprKind::Ident(id) = &base.kind {
            let simple = matches!(
                (self.nth(1), self.nth(2), self.nth(3)),
                (TokenKind::Int(_) | TokenKind::Ident(_), TokenKind::Punct(Punct::RParen), _)
                    | (
                        TokenKind::Punct(Punct::Minus),
                        TokenKind::Int(_),
                        TokenKind::Punct(Punct::RParen)
                    )
            );
            if let Some(builtin) = crate::token::choreo_spelling(&id.name).filter(|_| !simple) {
                return Err(self.c_spelling(&id.name, id.span, builtin));
            }
        }
        self.expect_punct(Punct::LParen)?;
        // Spec §4.5: `expr '(' (NUM | '-' NUM | IDENT) ')'`.
        let index = match self.kind() {
            TokenKind::Int(_) | TokenKind::Ident(_) => self.primary()?,
            TokenKind::Punct(Punct::Minus) if matches!(self.nth(1), TokenKind::Int(_)) => {
                self.operand()?
            }
            _ => return Err(self.unexpected("an integer literal or a name")),
        };
        self.expect_punct(Punct::RParen)?;
        let span = self.since(base.span);
        Ok(Expr {
            span,
            kind: ExprKind::DimSelect { base: Box::new(base), index: Box::new(index) },
        })
    }

    /// `base[…]`: array element, or an mdspan derivation (in shape lists, after `.span`, or
    /// when an item is a `(k)` dimension reference).
    fn bracket_suffix(&mut self, base: Expr) -> PResult<Expr> {
        let open = self.expect_punct(Punct::LBracket)?;
        let items = self.derive_items(Punct::RBracket)?;
        let span = self.since(base.span);
        let is_span = matches!(base.kind, ExprKind::Span(_));
        if is_span || (self.shape_ctx && matches!(base.kind, ExprKind::Ident(_))) {
            return Ok(Expr {
                span,
                kind: ExprKind::Derive { base: Box::new(base), ituple: false, items },
            });
        }
        if self.shape_ctx {
            return Err(self.fail(
                "E0314",
                open.to(span),
                "multi-dimensional array access is not allowed in a shape list",
                "a second index in a shape list",
            ));
        }
        let has_dim = items.iter().any(|i| matches!(i, DeriveItem::Dim(_)));
        if has_dim {
            return Ok(Expr {
                span,
                kind: ExprKind::Derive { base: Box::new(base), ituple: false, items },
            });
        }
        match <[DeriveItem; 1]>::try_from(items) {
            Ok([DeriveItem::Value(index)]) => Ok(Expr {
                span,
                kind: ExprKind::Index { base: Box::new(base), index: Box::new(index) },
            }),
            _ => Err(self.fail(
                "E0313",
                open.to(span),
                "must use '[a][2]...' for multi-dimensional array access",
                "write one '[…]' per dimension",
            )),
        }
    }

    /// Items of a derivation list up to `close` (consumed): `(k)` is a dimension reference,
    /// anything else a value.
    pub(super) fn derive_items(&mut self, close: Punct) -> PResult<Vec<DeriveItem>> {
        self.comma_list(close, false, |p| {
            let is_dim = p.at_punct(Punct::LParen)
                && matches!(p.nth(1), TokenKind::Int(_) | TokenKind::Ident(_))
                && p.nth(2).is_punct(Punct::RParen)
                && (p.nth(3).is_punct(Punct::Comma) || p.nth(3).is_punct(close));
            if is_dim {
                let open = p.bump().span;
                let inner = p.primary()?;
                p.expect_punct(Punct::RParen)?;
                let span = p.since(open);
                Ok(DeriveItem::Dim(Box::new(Expr { span, kind: inner.kind })))
            } else {
                Ok(DeriveItem::Value(p.shape_item()?))
            }
        })
    }

    /// `name{…}`: an ituple derivation (assignment right-hand sides only).
    pub(super) fn ituple_derivation(&mut self) -> PResult<Expr> {
        let base = self.expect_ident("an identifier")?;
        let base_span = base.span;
        self.expect_punct(Punct::LBrace)?;
        let items = self.derive_items(Punct::RBrace)?;
        let span = self.since(base_span);
        Ok(Expr {
            span,
            kind: ExprKind::Derive {
                base: boxed(base_span, ExprKind::Ident(base)),
                ituple: true,
                items,
            },
        })
    }

    /// A comma-separated list after its (consumed) opener, through `close` (consumed).
    pub(super) fn comma_list<T>(
        &mut self,
        close: Punct,
        allow_empty: bool,
        mut item: impl FnMut(&mut Self) -> PResult<T>,
    ) -> PResult<Vec<T>> {
        let mut items = Vec::new();
        if allow_empty && self.eat_punct(close).is_some() {
            return Ok(items);
        }
        loop {
            items.push(item(self)?);
            if self.eat_punct(close).is_some() {
                return Ok(items);
            }
            if self.eat_punct(Punct::Comma).is_none() {
                return Err(self.unexpected(&format!("',' or '{}'", close.as_str())));
            }
        }
    }

    /// `( e, … )`: call-like arguments (not shape items).
    pub(super) fn paren_args(&mut self, allow_empty: bool) -> PResult<Vec<Expr>> {
        self.expect_punct(Punct::LParen)?;
        self.comma_list(Punct::RParen, allow_empty, |p| p.plain_expr())
    }

    /// Expressions separated by commas, without brackets (stops at anything but `,`).
    pub(super) fn bare_list(&mut self) -> PResult<Vec<Expr>> {
        let mut items = vec![self.plain_expr()?];
        while self.eat_punct(Punct::Comma).is_some() {
            items.push(self.plain_expr()?);
        }
        Ok(items)
    }

    /// A member operation after `base` (the dotted token is current).
    fn member(&mut self, base: Expr, d: Dotted) -> PResult<Expr> {
        let start = base.span;
        let dot = self.bump().span;
        let kind = match d {
            Dotted::Span => ExprKind::Span(Box::new(base)),
            Dotted::Data => ExprKind::Data(Box::new(base)),
            Dotted::Mdata => ExprKind::Mdata(Box::new(base)),
            Dotted::At => {
                let indices = self.paren_args(false)?;
                ExprKind::At { base: Box::new(base), indices }
            }
            Dotted::Chunkat => {
                let factors = self.paren_args(false)?;
                ExprKind::View { base: Box::new(base), op: ViewOp::Chunkat(factors) }
            }
            Dotted::Chunk => {
                let factors = self.paren_args(false)?;
                self.expect_dotted(Dotted::At)?;
                let at = self.paren_args(false)?;
                ExprKind::View { base: Box::new(base), op: ViewOp::Chunk { factors, at } }
            }
            Dotted::Subspan | Dotted::Modspan => {
                let (extents, strides) = self.extent_list()?;
                let step = match self.eat_dotted(Dotted::Step) {
                    Some(_) => Some(self.paren_args(false)?),
                    None => None,
                };
                let at = match self.eat_dotted(Dotted::At) {
                    Some(_) => Some(self.paren_args(false)?),
                    None => None,
                };
                let tile = TileView { extents, strides, step, at };
                let op = if d == Dotted::Subspan {
                    ViewOp::Subspan(tile)
                } else {
                    ViewOp::Modspan(tile)
                };
                ExprKind::View { base: Box::new(base), op }
            }
            Dotted::View => {
                let (extents, strides) = self.extent_list()?;
                let from = match self.eat_dotted(Dotted::From) {
                    Some(_) => Some(self.paren_args(false)?),
                    None => None,
                };
                ExprKind::View {
                    base: Box::new(base),
                    op: ViewOp::Window { extents, strides, from },
                }
            }
            Dotted::SpanAs => {
                self.expect_punct(Punct::LParen)?;
                let items = self.comma_list(Punct::RParen, false, |p| p.shape_item())?;
                ExprKind::View { base: Box::new(base), op: ViewOp::SpanAs(items) }
            }
            Dotted::Sqz => {
                self.expect_punct(Punct::LParen)?;
                self.expect_punct(Punct::RParen)?;
                ExprKind::View { base: Box::new(base), op: ViewOp::Sqz }
            }
            Dotted::Map | Dotted::Remap => {
                self.expect_punct(Punct::Lt)?;
                let Some(st) = storage(self.kind()) else {
                    return Err(self.unexpected("'shared', 'local' or 'global'"));
                };
                let st_span = self.bump().span;
                self.expect_punct(Punct::Gt)?;
                let args = self.paren_args(false)?;
                ExprKind::BufferMap {
                    base: Box::new(base),
                    remap: d == Dotted::Remap,
                    storage: (st, st_span),
                    args,
                }
            }
            _ => {
                return Err(self.fail(
                    "E0301",
                    dot,
                    format!("syntax error, unexpected '{}'", d.as_str()),
                    format!("'{}' cannot follow an expression here", d.as_str()),
                ));
            }
        };
        Ok(Expr { span: self.since(start), kind })
    }

    /// `( e, … [: s, …] )`: extents with optional explicit strides.
    fn extent_list(&mut self) -> PResult<(Vec<Expr>, Option<Vec<Expr>>)> {
        self.expect_punct(Punct::LParen)?;
        let extents = self.bare_list()?;
        let strides = match self.eat_punct(Punct::Colon) {
            Some(_) => Some(self.bare_list()?),
            None => None,
        };
        self.expect_punct(Punct::RParen)?;
        Ok((extents, strides))
    }

    /// Adjacent string literals, concatenated.
    pub(super) fn strings(&mut self) -> PResult<(StrLit, Span)> {
        let TokenKind::Str(first) = self.kind() else {
            return Err(self.unexpected("a string literal"));
        };
        let start = self.bump().span;
        let mut value = first.clone();
        while let TokenKind::Str(next) = self.kind() {
            self.bump();
            value.value.push_str(&next.value);
            value.raw |= next.raw;
        }
        Ok((value, self.since(start)))
    }

    /// Primary expressions.
    pub(super) fn primary(&mut self) -> PResult<Expr> {
        let start = self.span();
        let kind = match self.kind() {
            TokenKind::Int(lit) => {
                self.bump();
                ExprKind::Int(*lit)
            }
            TokenKind::Float(lit) => {
                self.bump();
                ExprKind::Float(*lit)
            }
            TokenKind::Keyword(Keyword::Inf) => {
                self.bump();
                ExprKind::Float(FloatLit { value: f64::INFINITY, is_f32: true })
            }
            TokenKind::Keyword(Keyword::True) => {
                self.bump();
                ExprKind::Bool(true)
            }
            TokenKind::Keyword(Keyword::False) => {
                self.bump();
                ExprKind::Bool(false)
            }
            TokenKind::Keyword(Keyword::Nullptr) => {
                self.bump();
                ExprKind::Null
            }
            TokenKind::Str(_) => ExprKind::Str(self.strings()?.0),
            TokenKind::Ident(name) => {
                self.bump();
                if &**name == "_" {
                    ExprKind::Wildcard
                } else {
                    ExprKind::Ident(Ident { name: name.to_string(), span: start })
                }
            }
            TokenKind::Punct(Punct::LParen) => {
                self.bump();
                let inner = self.plain_expr()?;
                self.expect_punct(Punct::RParen)?;
                inner.kind
            }
            TokenKind::Punct(Punct::LBracket) => {
                self.bump();
                ExprKind::Mdspan(self.comma_list(Punct::RBracket, false, |p| p.shape_item())?)
            }
            TokenKind::Punct(Punct::LBrace) => {
                self.bump();
                ExprKind::Ituple(self.comma_list(Punct::RBrace, false, |p| p.plain_expr())?)
            }
            TokenKind::Keyword(Keyword::Cdiv) => {
                self.bump();
                self.expect_punct(Punct::LParen)?;
                let a = self.plain_expr()?;
                self.expect_punct(Punct::Comma)?;
                let b = self.plain_expr()?;
                self.expect_punct(Punct::RParen)?;
                ExprKind::Cdiv(Box::new(a), Box::new(b))
            }
            TokenKind::Math(func) => {
                let func = *func;
                self.bump();
                let args = self.paren_args(false)?;
                if args.len() > 3 {
                    let span = self.since(start);
                    return Err(self.fail(
                        "E0301",
                        span,
                        format!("syntax error, '{}' takes at most 3 arguments", func.as_str()),
                        "too many arguments",
                    ));
                }
                ExprKind::Math { func, args }
            }
            TokenKind::Keyword(Keyword::To) => self.cast()?,
            TokenKind::Keyword(Keyword::Select) => {
                self.bump();
                self.expect_punct(Punct::LParen)?;
                let index = self.plain_expr()?;
                self.expect_punct(Punct::Comma)?;
                let items = self.comma_list(Punct::RParen, false, |p| p.plain_expr())?;
                ExprKind::Select { index: Box::new(index), items }
            }
            TokenKind::Punct(Punct::Hash) => {
                self.bump();
                ExprKind::UpperBound(self.expect_ident("a bounded variable after '#'")?)
            }
            TokenKind::Punct(Punct::Pipe) => self.count()?,
            kind if starts_call(kind) => {
                return Err(self.fail(
                    "E0331",
                    start,
                    "a call can not be used inside an expression; assign its result to a \
                     mutable variable first",
                    "call inside an expression",
                ));
            }
            _ => return Err(self.unexpected("an expression")),
        };
        Ok(Expr { span: self.since(start), kind })
    }

    /// `__to<T>(e)` / `__to<"C++ type">(e)`.
    fn cast(&mut self) -> PResult<ExprKind> {
        self.expect_kw(Keyword::To)?;
        self.expect_punct(Punct::Lt)?;
        let target = if let Some(ty) = scalar_type(self.kind()) {
            CastTarget::Type(ty, self.bump().span)
        } else if matches!(self.kind(), TokenKind::Str(_)) {
            let (s, span) = self.strings()?;
            CastTarget::Cpp(s, span)
        } else {
            return Err(self.unexpected("an element type or a string"));
        };
        self.expect_punct(Punct::Gt)?;
        self.expect_punct(Punct::LParen)?;
        let operand = self.plain_expr()?;
        self.expect_punct(Punct::RParen)?;
        Ok(ExprKind::Cast { target, operand: Box::new(operand) })
    }

    /// `|T|` (element size) or `|size_expr|` (element count).
    fn count(&mut self) -> PResult<ExprKind> {
        self.expect_punct(Punct::Pipe)?;
        if let Some(ty) = scalar_type(self.kind()) {
            if self.nth(1).is_punct(Punct::Pipe) {
                self.bump();
                self.bump();
                return Ok(ExprKind::SizeOf(ty));
            }
        }
        let inner = self.nested(|p| p.size_expr())?;
        self.expect_punct(Punct::Pipe)?;
        Ok(ExprKind::Count(Box::new(inner)))
    }

    /// The restricted expressions inside `|…|` (spec §4.5 `size_expr`): names with `.span`,
    /// `.data`, `[i]` and `(i)`, literals, `#v`, `cdiv`, parentheses and `+ - * / %`.
    fn size_expr(&mut self) -> PResult<Expr> {
        self.binary_chain(&[(Punct::Plus, BinaryOp::Add), (Punct::Minus, BinaryOp::Sub)], |p| {
            p.size_term()
        })
    }

    fn size_term(&mut self) -> PResult<Expr> {
        self.binary_chain(
            &[
                (Punct::Star, BinaryOp::Mul),
                (Punct::Slash, BinaryOp::Div),
                (Punct::Percent, BinaryOp::Rem),
            ],
            |p| p.size_atom(),
        )
    }

    fn size_atom(&mut self) -> PResult<Expr> {
        let start = self.span();
        match self.kind() {
            TokenKind::Int(_) | TokenKind::Punct(Punct::Hash) => self.primary(),
            TokenKind::Keyword(Keyword::Cdiv) => {
                self.bump();
                self.expect_punct(Punct::LParen)?;
                let a = self.nested(|p| p.size_expr())?;
                self.expect_punct(Punct::Comma)?;
                let b = self.nested(|p| p.size_expr())?;
                self.expect_punct(Punct::RParen)?;
                Ok(Expr { span: self.since(start), kind: ExprKind::Cdiv(Box::new(a), Box::new(b)) })
            }
            TokenKind::Punct(Punct::LParen) => {
                self.bump();
                let inner = self.nested(|p| p.size_expr())?;
                self.expect_punct(Punct::RParen)?;
                Ok(Expr { span: self.since(start), kind: inner.kind })
            }
            TokenKind::Ident(_) => {
                let name = self.expect_ident("a name")?;
                let mut e = Expr { span: name.span, kind: ExprKind::Ident(name) };
                let mut depth = 0;
                loop {
                    let (next, step_depth) = self.measured(|p| p.size_suffix(e, start))?;
                    match next {
                        Ok(wrapped) => {
                            depth = self.chain_link(depth.max(step_depth))?;
                            e = wrapped;
                        }
                        Err(done) => return Ok(done),
                    }
                }
            }
            _ => Err(self.unexpected("a size expression (a name, '.span' or an integer)")),
        }
    }

    /// One suffix of a name in a size expression (`.span`, `.data`, `[i]`, `(i)`) applied to
    /// `e`: `Ok(wrapped)`, or `Err(e)` unchanged when no suffix follows.
    fn size_suffix(&mut self, e: Expr, start: Span) -> PResult<Result<Expr, Expr>> {
        let wrapped = if self.eat_dotted(Dotted::Span).is_some() {
            Expr { span: self.since(start), kind: ExprKind::Span(Box::new(e)) }
        } else if self.eat_dotted(Dotted::Data).is_some() {
            Expr { span: self.since(start), kind: ExprKind::Data(Box::new(e)) }
        } else if self.at_punct(Punct::LBracket) {
            self.bump();
            let index = self.plain_expr()?;
            self.expect_punct(Punct::RBracket)?;
            Expr {
                span: self.since(start),
                kind: ExprKind::Index { base: Box::new(e), index: Box::new(index) },
            }
        } else if self.at_punct(Punct::LParen) {
            self.dim_select(e)?
        } else {
            return Ok(Err(e));
        };
        Ok(Ok(wrapped))
    }
}

/// Dotted keywords that continue a postfix expression.
/// Whether `base[…]` is a bracket suffix (an array element or a derivation) rather than the
/// end of the expression.
fn is_bracket_base(base: &ExprKind) -> bool {
    matches!(
        base,
        ExprKind::Ident(_) | ExprKind::Index { .. } | ExprKind::Span(_) | ExprKind::Derive { .. }
    )
}

fn is_member_op(d: Dotted) -> bool {
    matches!(
        d,
        Dotted::Span
            | Dotted::Data
            | Dotted::Mdata
            | Dotted::At
            | Dotted::Chunkat
            | Dotted::Chunk
            | Dotted::Subspan
            | Dotted::Modspan
            | Dotted::View
            | Dotted::SpanAs
            | Dotted::Sqz
            | Dotted::Map
            | Dotted::Remap
    )
}
