//! The function header, parameter/return types (spec §4.1, §7) and declarations (spec §4.3).

use super::expr::{scalar_type, storage};
use super::{PResult, Parser};
use crate::ast::{
    BinaryOp, CoFunction, EventDecl, EventItem, Expr, ExprKind, FragDecl, ItupleDecl, MdspanDecl,
    Param, ParamDim, ParamShape, ReturnType, ScalarDecl, ScalarInit, ScalarItem, ScalarType, Shape,
    SpannedDecl, SpannedItem, StmtKind, Storage, TypeExpr,
};
use crate::diagnostics::Diagnostic;
use crate::source::Span;
use crate::token::{Keyword, Punct, TokenKind};

impl Parser<'_, '_> {
    /// `__co__ ret name(params) { body }`.
    pub(super) fn co_function(&mut self) -> PResult<CoFunction> {
        let start = self.expect_kw(Keyword::Co)?;
        let ret = self.return_type()?;
        let name = self.expect_ident("the function name")?;
        self.expect_punct(Punct::LParen)?;
        let params = self.comma_list(Punct::RParen, true, |p| p.param())?;
        let body = self.block()?;
        Ok(CoFunction { span: self.since(start), ret, name, params, body })
    }

    fn return_type(&mut self) -> PResult<ReturnType> {
        if let Some(span) = self.eat_kw(Keyword::Void) {
            return Ok(ReturnType::Void(span));
        }
        if let Some(span) = self.eat_kw(Keyword::Auto) {
            return Ok(ReturnType::Auto(span));
        }
        Ok(ReturnType::Type(self.param_type("a return type")?))
    }

    /// `[global] type [&] [name]`.
    fn param(&mut self) -> PResult<Param> {
        let start = self.span();
        let mut global = None;
        match storage(self.kind()) {
            Some(Storage::Global) => global = Some(self.bump().span),
            Some(st) => {
                let span = self.bump().span;
                self.report(
                    Diagnostic::error(
                        "E0312",
                        span,
                        "the shared data can not be used as a parameter.",
                    )
                    .with_label(format!("'{}' parameter", st.as_str()))
                    .with_help("parameters are host data or 'global' device data"),
                );
            }
            None => {}
        }
        let ty = self.param_type("a parameter type")?;
        let by_ref = self.eat_punct(Punct::Amp);
        let name = self.eat_ident();
        Ok(Param { span: self.since(start), global, ty, by_ref, name })
    }

    /// `scalar_type | stream | elem_type param_shape`.
    fn param_type(&mut self, what: &str) -> PResult<TypeExpr> {
        let start = self.span();
        if let Some(span) = self.eat_kw(Keyword::Stream) {
            return Ok(TypeExpr::Stream(span));
        }
        let Some(ty) = scalar_type(self.kind()) else {
            return Err(self.unexpected(what));
        };
        self.bump();
        let ScalarType::Elem(elem) = ty else {
            return Ok(TypeExpr::Scalar(ty, start));
        };
        let shape = if self.at_punct(Punct::LBracket) {
            ParamShape::Dims(self.param_dims()?)
        } else if self.at_kw(Keyword::Mdspan) {
            let kw = self.bump().span;
            if self.eat_punct(Punct::Lt).is_some() {
                let (rank, _) = self.expect_u64("an integer literal rank")?;
                self.expect_punct(Punct::Gt)?;
                ParamShape::Rank { rank, span: self.since(kw) }
            } else if self.at_punct(Punct::LBracket) {
                ParamShape::Dims(self.param_dims()?)
            } else {
                return Err(self.unexpected("'<' or '['"));
            }
        } else {
            return Ok(TypeExpr::Scalar(ty, start));
        };
        Ok(TypeExpr::Spanned { span: self.since(start), elem, elem_span: start, shape })
    }

    /// `[ pdim, … ]`.
    fn param_dims(&mut self) -> PResult<Vec<ParamDim>> {
        self.expect_punct(Punct::LBracket)?;
        self.comma_list(Punct::RBracket, false, |p| p.param_dim())
    }

    /// `? | ?? | IDENT | const_int_expr`.
    fn param_dim(&mut self) -> PResult<ParamDim> {
        if let Some(span) = self.eat_punct(Punct::Question) {
            return Ok(ParamDim::Dynamic(span));
        }
        if let Some(span) = self.eat_punct(Punct::QuestionQuestion) {
            return Ok(ParamDim::Unbounded(span));
        }
        if matches!(self.kind(), TokenKind::Ident(_))
            && (self.nth(1).is_punct(Punct::Comma) || self.nth(1).is_punct(Punct::RBracket))
        {
            return Ok(ParamDim::Symbol(self.expect_ident("a name")?));
        }
        if self.at_punct(Punct::Minus) {
            // A leading negative literal is a syntax error (spec §7.2); minus signs inside
            // parentheses are ordinary constant arithmetic.
            return Err(self.bad_param_dim());
        }
        Ok(ParamDim::Const(self.nested(|p| p.const_expr())?))
    }

    /// Reports `E0332` at the current token: it cannot start or continue a parameter
    /// dimension.
    fn bad_param_dim(&mut self) -> super::Reported {
        let start = self.span();
        let message = format!(
            "syntax error, unexpected {} in a parameter dimension: a dimension is a name, '?', \
             '??' or a constant integer expression",
            self.kind()
        );
        self.report(
            Diagnostic::error("E0332", start, message)
                .with_label("not allowed here")
                .with_help("symbolic dimensions can not be combined in parameter types (write 'M', not 'M + 1'), and extents are positive"),
        );
        super::Reported
    }

    /// A constant integer expression of a parameter dimension: integer literals combined with
    /// every integer operator of the language (`?:`, `|| &&`, comparisons, shifts, `+ - * / %`,
    /// `& ^ |`, unary `- ~ !`) at their usual precedence levels (spec §4.5), so that macros
    /// such as `#define N (1 << 28)` can size a parameter.
    fn const_expr(&mut self) -> PResult<Expr> {
        let cond = self.const_binary(2)?;
        if self.eat_punct(Punct::Question).is_none() {
            return Ok(cond);
        }
        let then_value = self.nested(|p| p.const_expr())?;
        self.expect_punct(Punct::Colon)?;
        let else_value = self.nested(|p| p.const_expr())?;
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

    /// Binary operators of level `min` and tighter (bounded operators and `#` are not
    /// integer operators: they end the expression).
    fn const_binary(&mut self, min: u8) -> PResult<Expr> {
        self.binary_of(min, Self::const_unary, |op| {
            !matches!(
                op,
                BinaryOp::Compose
                    | BinaryOp::BoundedAdd
                    | BinaryOp::BoundedSub
                    | BinaryOp::BoundedMul
                    | BinaryOp::BoundedDiv
                    | BinaryOp::BoundedRem
            )
        })
    }

    /// `- x`, `~ x`, `! x` or an atom.
    fn const_unary(&mut self) -> PResult<Expr> {
        let start = self.span();
        let op = match self.kind() {
            TokenKind::Punct(Punct::Minus) => crate::ast::UnaryOp::Neg,
            TokenKind::Punct(Punct::Tilde) => crate::ast::UnaryOp::BitNot,
            TokenKind::Punct(Punct::Bang) => crate::ast::UnaryOp::Not,
            _ => return self.const_atom(),
        };
        self.bump();
        let operand = self.nested(|p| p.const_unary())?;
        let span = start.to(operand.span);
        Ok(Expr { span, kind: ExprKind::Unary { op, operand: Box::new(operand) } })
    }

    fn const_atom(&mut self) -> PResult<Expr> {
        let start = self.span();
        match self.kind() {
            TokenKind::Int(lit) => {
                let lit = *lit;
                self.bump();
                Ok(Expr { span: start, kind: ExprKind::Int(lit) })
            }
            TokenKind::Punct(Punct::LParen) => {
                self.bump();
                let inner = self.nested(|p| p.const_expr())?;
                self.expect_punct(Punct::RParen)?;
                Ok(Expr { span: self.since(start), kind: inner.kind })
            }
            TokenKind::Error | TokenKind::Eof => Err(self.unexpected("a dimension")),
            _ => Err(self.bad_param_dim()),
        }
    }

    // -------------------------------------------------------------------------------------
    // Declarations in statements
    // -------------------------------------------------------------------------------------

    /// A declaration statement (without its `;`): the current token is a storage keyword,
    /// `mutable`, a scalar/element type, `mdspan`, `ituple`, `event` or `frag`.
    pub(super) fn declaration(&mut self) -> PResult<StmtKind> {
        let storage = storage(self.kind()).map(|st| (st, self.bump().span));
        match self.kind() {
            TokenKind::Keyword(Keyword::Event) => {
                Ok(StmtKind::EventDecl(self.event_decl(storage)?))
            }
            TokenKind::Keyword(Keyword::Mutable) => {
                let mutable = self.bump().span;
                if self.at_kw(Keyword::Mdspan) {
                    self.mutable_not_allowed(mutable, "an mdspan");
                    return Ok(StmtKind::MdspanDecl(self.mdspan_decl()?));
                }
                if matches!(self.kind(), TokenKind::ElemType(_))
                    && self.nth(1).is_punct(Punct::LBracket)
                {
                    self.mutable_not_allowed(mutable, "a spanned");
                    return Ok(StmtKind::SpannedDecl(self.spanned_decl(storage)?));
                }
                let ty = scalar_type(self.kind()).map(|ty| (ty, self.bump().span));
                let items = self.scalar_items()?;
                Ok(StmtKind::ScalarDecl(ScalarDecl { storage, mutable: Some(mutable), ty, items }))
            }
            TokenKind::ElemType(_) if self.nth(1).is_punct(Punct::LBracket) => {
                Ok(StmtKind::SpannedDecl(self.spanned_decl(storage)?))
            }
            kind if scalar_type(kind).is_some() => {
                let ty = scalar_type(kind).map(|ty| (ty, self.bump().span));
                let items = self.scalar_items()?;
                Ok(StmtKind::ScalarDecl(ScalarDecl { storage, mutable: None, ty, items }))
            }
            TokenKind::Keyword(Keyword::Mdspan) if storage.is_none() => {
                Ok(StmtKind::MdspanDecl(self.mdspan_decl()?))
            }
            TokenKind::Keyword(Keyword::Ituple) if storage.is_none() => {
                Ok(StmtKind::ItupleDecl(self.ituple_decl()?))
            }
            TokenKind::Keyword(Keyword::Frag) if storage.is_none() => {
                Ok(StmtKind::FragDecl(self.frag_decl()?))
            }
            _ => Err(self.unexpected("a type, 'mutable' or 'event'")),
        }
    }

    fn mutable_not_allowed(&mut self, mutable: Span, what: &str) {
        self.report(
            Diagnostic::error(
                "E0308",
                mutable,
                format!("syntax error, 'mutable' is not allowed in {what} declaration"),
            )
            .with_label("remove 'mutable'")
            .with_note("only scalars can be mutable (spec §4.3)"),
        );
    }

    /// `name [= value | {value}], …`.
    fn scalar_items(&mut self) -> PResult<Vec<ScalarItem>> {
        let mut items = Vec::new();
        loop {
            let name = self.expect_ident("a variable name")?;
            let start = name.span;
            let init = if self.eat_punct(Punct::Assign).is_some() {
                Some(ScalarInit::Assign(self.rhs_value()?))
            } else if self.eat_punct(Punct::LBrace).is_some() {
                let value = self.plain_expr()?;
                self.expect_punct(Punct::RBrace)?;
                Some(ScalarInit::Brace(value))
            } else {
                None
            };
            items.push(ScalarItem { span: self.since(start), name, init });
            if self.eat_punct(Punct::Comma).is_none() {
                return Ok(items);
            }
        }
    }

    /// `[ shape_list ]` or `[auto]`.
    pub(super) fn decl_shape(&mut self) -> PResult<Shape> {
        let open = self.expect_punct(Punct::LBracket)?;
        if self.at_kw(Keyword::Auto) && self.nth(1).is_punct(Punct::RBracket) {
            self.bump();
            self.bump();
            return Ok(Shape::Auto(self.since(open)));
        }
        let items = self.comma_list(Punct::RBracket, false, |p| p.shape_item())?;
        Ok(Shape::List { span: self.since(open), items })
    }

    /// `T [shape] a[2] {v}, …`.
    fn spanned_decl(&mut self, storage: Option<(Storage, Span)>) -> PResult<SpannedDecl> {
        let TokenKind::ElemType(elem) = self.kind() else {
            return Err(self.unexpected("an element type"));
        };
        let elem = *elem;
        let elem_span = self.bump().span;
        let shape = self.decl_shape()?;
        let items = self.spanned_items()?;
        Ok(SpannedDecl { storage, elem, elem_span, shape, items })
    }

    /// `name[d]… {init}, …`.
    pub(super) fn spanned_items(&mut self) -> PResult<Vec<SpannedItem>> {
        let mut items = Vec::new();
        loop {
            let name = self.expect_ident("a name")?;
            let start = name.span;
            let mut array_dims = Vec::new();
            while self.eat_punct(Punct::LBracket).is_some() {
                array_dims.push(self.plain_expr()?);
                self.expect_punct(Punct::RBracket)?;
            }
            let init = if self.eat_punct(Punct::LBrace).is_some() {
                let value = self.plain_expr()?;
                self.expect_punct(Punct::RBrace)?;
                Some(value)
            } else {
                None
            };
            items.push(SpannedItem { span: self.since(start), name, array_dims, init });
            if self.eat_punct(Punct::Comma).is_none() {
                return Ok(items);
            }
        }
    }

    /// `<N>` after `mdspan`/`ituple`, if present.
    fn opt_rank(&mut self) -> PResult<Option<(u64, Span)>> {
        let Some(open) = self.eat_punct(Punct::Lt) else { return Ok(None) };
        let (rank, _) = self.expect_u64("an integer literal rank")?;
        self.expect_punct(Punct::Gt)?;
        Ok(Some((rank, self.since(open))))
    }

    /// `[mdspan[<N>]] name : value` (the current token is `mdspan` or the name).
    pub(super) fn mdspan_decl(&mut self) -> PResult<MdspanDecl> {
        let keyword = self.eat_kw(Keyword::Mdspan);
        let rank = if keyword.is_some() { self.opt_rank()? } else { None };
        let name = self.expect_ident(if keyword.is_some() { "'<' or a name" } else { "a name" })?;
        if let Some(eq) = self.eat_punct(Punct::Assign) {
            self.report(
                Diagnostic::error("E0303", eq, "must use ':' to initialize a mdspan.")
                    .with_label("'=' here")
                    .with_help(format!("write '{} : …'", name.name)),
            );
        } else {
            self.expect_punct(Punct::Colon)?;
        }
        let value = self.shape_item()?;
        Ok(MdspanDecl { keyword, rank, name, value })
    }

    /// `ituple[<N>] name = value`.
    fn ituple_decl(&mut self) -> PResult<ItupleDecl> {
        self.expect_kw(Keyword::Ituple)?;
        let rank = self.opt_rank()?;
        let name = self.expect_ident("'<' or a name")?;
        if self.at_punct(Punct::LBracket) {
            let open = self.span();
            while self.eat_punct(Punct::LBracket).is_some() {
                self.plain_expr()?;
                self.expect_punct(Punct::RBracket)?;
            }
            let span = self.since(open);
            self.report(
                Diagnostic::error("E0306", span, "no ituple array is allowed.")
                    .with_label("ituple array"),
            );
        }
        if let Some(colon) = self.eat_punct(Punct::Colon) {
            self.report(
                Diagnostic::error("E0304", colon, "must use '=' to initialize an ituple.")
                    .with_label("':' here")
                    .with_help(format!("write '{} = …'", name.name)),
            );
        } else if self.eat_punct(Punct::Assign).is_none() {
            if self.at_punct(Punct::Semi) || self.at_punct(Punct::Comma) {
                let span = name.span;
                return Err(self.fail(
                    "E0305",
                    span,
                    "an ituple must be initialized.",
                    "declared without a value",
                ));
            }
            return Err(self.unexpected("'='"));
        }
        let value = self.rhs_value()?;
        Ok(ItupleDecl { rank, name, value })
    }

    /// `[storage] event[<N>] e[2] = ready, …`.
    fn event_decl(&mut self, storage: Option<(Storage, Span)>) -> PResult<EventDecl> {
        self.expect_kw(Keyword::Event)?;
        let arrivals = if self.eat_punct(Punct::Lt).is_some() {
            let TokenKind::Int(lit) = self.kind() else {
                return Err(self.unexpected("an integer literal arrival count"));
            };
            let lit = *lit;
            let span = self.bump().span;
            self.expect_punct(Punct::Gt)?;
            Some((lit, span))
        } else {
            None
        };
        let mut items = Vec::new();
        loop {
            let name = self.expect_ident("an event name")?;
            let start = name.span;
            let mut dims = Vec::new();
            while self.eat_punct(Punct::LBracket).is_some() {
                dims.push(self.plain_expr()?);
                self.expect_punct(Punct::RBracket)?;
            }
            let ready = if self.eat_punct(Punct::Assign).is_some() {
                match self.kind() {
                    TokenKind::Ident(word) if &**word == "ready" => Some(self.bump().span),
                    _ => {
                        let span = self.span();
                        return Err(self.fail(
                            "E0323",
                            span,
                            "event initializer must be 'ready'",
                            "not 'ready'",
                        ));
                    }
                }
            } else {
                None
            };
            items.push(EventItem { span: self.since(start), name, dims, ready });
            if self.eat_punct(Punct::Comma).is_none() {
                break;
            }
        }
        Ok(EventDecl { storage, arrivals, items })
    }

    /// `frag [T [shape] | .T] name[d]… {init}, …`.
    fn frag_decl(&mut self) -> PResult<FragDecl> {
        self.expect_kw(Keyword::Frag)?;
        let elem = match self.kind() {
            TokenKind::ElemType(e) => Some((*e, self.bump().span)),
            TokenKind::Punct(Punct::Dot) => {
                self.bump();
                let TokenKind::ElemType(e) = self.kind() else {
                    return Err(self.unexpected("an element type"));
                };
                let e = *e;
                Some((e, self.bump().span))
            }
            _ => None,
        };
        let shape = if elem.is_some() && self.at_punct(Punct::LBracket) {
            Some(self.decl_shape()?)
        } else {
            None
        };
        let items = self.spanned_items()?;
        Ok(FragDecl { elem, shape, items })
    }
}
