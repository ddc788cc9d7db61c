//! Calls into C++ (spec §4.8, §17): `call`, intrinsics, `__lib_*`, atomics, `__bar_*`,
//! template arguments, inline assembly.

use super::expr::scalar_type;
use super::{PResult, Parser, Reported};
use crate::ast::{
    Asm, AsmOperand, BinaryOp, Call, CallKind, Expr, ExprKind, Ident, Path, TemplateArg,
};
use crate::token::{Dotted, Keyword, Punct, StrLit, TokenKind};

impl Parser<'_, '_> {
    /// A call-like construct; the current token satisfies [`super::expr::starts_call`].
    pub(super) fn call(&mut self) -> PResult<Call> {
        let start = self.span();
        let (kind, template_args) = match self.kind() {
            TokenKind::Keyword(Keyword::Call) => {
                self.bump();
                let path = self.path()?;
                let targs = self.opt_template_args()?;
                (CallKind::Device(path), targs)
            }
            TokenKind::IntrinsicIdent(_) => {
                let path = self.path()?;
                let targs = self.opt_template_args()?;
                (CallKind::Intrinsic(path), targs)
            }
            TokenKind::LibIdent(name) => {
                let span = self.bump().span;
                (CallKind::Lib(Ident { name: name.to_string(), span }), Vec::new())
            }
            TokenKind::Atomic(op) => {
                let op = *op;
                (CallKind::Atomic(op, self.bump().span), Vec::new())
            }
            TokenKind::Keyword(Keyword::BarArrive) => {
                (CallKind::BarArrive(self.bump().span), Vec::new())
            }
            TokenKind::Keyword(Keyword::BarSync) => {
                (CallKind::BarSync(self.bump().span), Vec::new())
            }
            _ => return Err(self.unexpected("a call")),
        };
        let args = self.paren_args(true)?;
        Ok(Call { span: self.since(start), kind, template_args, args })
    }

    /// One segment of a qualified name.
    fn path_segment(&mut self, first: bool) -> PResult<Ident> {
        let name = match self.kind() {
            TokenKind::Ident(s) | TokenKind::IntrinsicIdent(s) => s.to_string(),
            // After `::` any word is a C++ name (e.g. `cute::copy`).
            TokenKind::Keyword(k) if !first => k.as_str().to_string(),
            TokenKind::ElemType(t) if !first => t.as_str().to_string(),
            TokenKind::Math(m) if !first => m.as_str().to_string(),
            _ => return Err(self.unexpected("a name")),
        };
        let span = self.bump().span;
        Ok(Ident { name, span })
    }

    /// `a::b::c`.
    fn path(&mut self) -> PResult<Path> {
        let first = self.path_segment(true)?;
        let start = first.span;
        let mut segments = vec![first];
        while self.eat_punct(Punct::ColonColon).is_some() {
            segments.push(self.path_segment(false)?);
        }
        Ok(Path { segments, span: self.since(start) })
    }

    fn opt_template_args(&mut self) -> PResult<Vec<TemplateArg>> {
        if self.eat_punct(Punct::Lt).is_none() {
            return Ok(Vec::new());
        }
        self.comma_list(Punct::Gt, true, |p| p.template_arg())
    }

    /// One template argument (spec §4.8 `targ`).
    fn template_arg(&mut self) -> PResult<TemplateArg> {
        if let Some(ty) = scalar_type(self.kind()) {
            if self.nth(1).is_punct(Punct::Comma) || self.nth(1).is_punct(Punct::Gt) {
                return Ok(TemplateArg::Type(ty, self.bump().span));
            }
        }
        Ok(TemplateArg::Value(self.nested(|p| p.targ_sum())?))
    }

    fn targ_sum(&mut self) -> PResult<Expr> {
        self.binary_chain(&[(Punct::Plus, BinaryOp::Add), (Punct::Minus, BinaryOp::Sub)], |p| {
            p.targ_product()
        })
    }

    fn targ_product(&mut self) -> PResult<Expr> {
        self.binary_chain(
            &[
                (Punct::Star, BinaryOp::Mul),
                (Punct::Slash, BinaryOp::Div),
                (Punct::Percent, BinaryOp::Rem),
            ],
            |p| p.targ_compose(),
        )
    }

    fn targ_compose(&mut self) -> PResult<Expr> {
        self.binary_chain(&[(Punct::Hash, BinaryOp::Compose)], |p| p.targ_atom())
    }

    fn targ_atom(&mut self) -> PResult<Expr> {
        let start = self.span();
        let mut e = match self.kind() {
            TokenKind::Int(_) | TokenKind::Punct(Punct::Hash) => self.primary()?,
            TokenKind::Punct(Punct::Minus) if matches!(self.nth(1), TokenKind::Int(_)) => {
                self.operand()?
            }
            TokenKind::Keyword(Keyword::Cdiv) => {
                self.bump();
                self.expect_punct(Punct::LParen)?;
                let a = self.nested(|p| p.targ_sum())?;
                self.expect_punct(Punct::Comma)?;
                let b = self.nested(|p| p.targ_sum())?;
                self.expect_punct(Punct::RParen)?;
                Expr { span: self.since(start), kind: ExprKind::Cdiv(Box::new(a), Box::new(b)) }
            }
            TokenKind::Punct(Punct::LParen) => {
                self.bump();
                let inner = self.nested(|p| p.targ_sum())?;
                self.expect_punct(Punct::RParen)?;
                Expr { span: self.since(start), kind: inner.kind }
            }
            TokenKind::Ident(_) | TokenKind::IntrinsicIdent(_) => {
                let mut path = self.path()?;
                let kind = if path.segments.len() == 1 {
                    match path.segments.pop() {
                        Some(ident) => ExprKind::Ident(ident),
                        None => ExprKind::Path(path),
                    }
                } else {
                    ExprKind::Path(path)
                };
                let mut e = Expr { span: self.since(start), kind };
                if self.eat_dotted(Dotted::Span).is_some() {
                    e = Expr { span: self.since(start), kind: ExprKind::Span(Box::new(e)) };
                }
                e
            }
            _ => return Err(self.unexpected("a template argument")),
        };
        // `x(i)` selections (a chain: one nesting level each, see `Parser::chain_link`).
        let mut depth = 1;
        while self.at_punct(Punct::LParen) {
            depth = self.chain_link(depth)?;
            self.bump();
            let index = match self.kind() {
                TokenKind::Int(_) | TokenKind::Ident(_) => self.primary()?,
                TokenKind::Punct(Punct::Minus) if matches!(self.nth(1), TokenKind::Int(_)) => {
                    self.operand()?
                }
                _ => return Err(self.unexpected("an integer literal or a name")),
            };
            self.expect_punct(Punct::RParen)?;
            e = Expr {
                span: self.since(start),
                kind: ExprKind::DimSelect { base: Box::new(e), index: Box::new(index) },
            };
        }
        Ok(e)
    }

    /// `__asm__ [volatile] ("tmpl" : outs : ins : clobbers)` (spec §4.8, §17.4).
    pub(super) fn asm(&mut self) -> PResult<Asm> {
        let start = self.bump().span; // `asm` / `__asm__`
        let volatile = self.eat_kw(Keyword::Volatile);
        if self.at_kw(Keyword::Goto) {
            let span = self.span();
            return Err(self.fail(
                "E0327",
                start.to(span),
                "__asm__ goto is not supported.",
                "asm goto",
            ));
        }
        if self.eat_punct(Punct::LParen).is_none() {
            return Err(self.invalid_asm(start));
        }
        if !matches!(self.kind(), TokenKind::Str(_)) {
            return Err(self.invalid_asm(start));
        }
        let (template, _) = self.strings()?;
        let mut outputs = Vec::new();
        let mut inputs = Vec::new();
        let mut clobbers = Vec::new();
        let mut section = 0u32;
        loop {
            match self.kind() {
                TokenKind::Punct(Punct::RParen) => {
                    self.bump();
                    break;
                }
                TokenKind::Punct(Punct::Colon) => section += 1,
                TokenKind::Punct(Punct::ColonColon) => section += 2,
                _ => return Err(self.invalid_asm(start)),
            }
            self.bump();
            if section > 3 {
                return Err(self.invalid_asm(start));
            }
            if matches!(
                self.kind(),
                TokenKind::Punct(Punct::RParen | Punct::Colon | Punct::ColonColon)
            ) {
                continue;
            }
            match section {
                1 => outputs = self.asm_operands(start)?,
                2 => inputs = self.asm_operands(start)?,
                _ => clobbers = self.asm_clobbers(start)?,
            }
        }
        Ok(Asm { volatile, template, outputs, inputs, clobbers })
    }

    fn invalid_asm(&mut self, start: crate::source::Span) -> Reported {
        if matches!(self.kind(), TokenKind::Error) {
            return Reported;
        }
        let span = start.to(self.span());
        self.fail("E0328", span, "invalid __asm__ syntax.", "not a valid __asm__ statement")
    }

    fn asm_operands(&mut self, start: crate::source::Span) -> PResult<Vec<AsmOperand>> {
        let mut ops = Vec::new();
        loop {
            let op_start = self.span();
            let name = if self.eat_punct(Punct::LBracket).is_some() {
                let Some(name) = self.eat_ident() else { return Err(self.invalid_asm(start)) };
                if self.eat_punct(Punct::RBracket).is_none() {
                    return Err(self.invalid_asm(start));
                }
                Some(name)
            } else {
                None
            };
            if !matches!(self.kind(), TokenKind::Str(_)) {
                return Err(self.invalid_asm(start));
            }
            let (constraint, _) = self.strings()?;
            if self.eat_punct(Punct::LParen).is_none() {
                return Err(self.invalid_asm(start));
            }
            let expr = self.plain_expr()?;
            if self.eat_punct(Punct::RParen).is_none() {
                return Err(self.invalid_asm(start));
            }
            ops.push(AsmOperand { span: self.since(op_start), name, constraint, expr });
            if self.eat_punct(Punct::Comma).is_none() {
                return Ok(ops);
            }
        }
    }

    fn asm_clobbers(&mut self, start: crate::source::Span) -> PResult<Vec<StrLit>> {
        let mut clobbers = Vec::new();
        loop {
            if !matches!(self.kind(), TokenKind::Str(_)) {
                return Err(self.invalid_asm(start));
            }
            clobbers.push(self.strings()?.0);
            if self.eat_punct(Punct::Comma).is_none() {
                return Ok(clobbers);
            }
        }
    }
}
