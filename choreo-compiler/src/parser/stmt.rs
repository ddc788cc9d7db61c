//! Statements (spec §4.2): dispatch on the first token, assignments, simple statements and
//! the sequential control-flow constructs (`if`, `while`, `inthreads`, `apply`).

use super::expr::{binary_op, starts_call, storage};
use super::{PResult, Parser};
use crate::ast::{
    AssignOp, Assignment, Expr, ExprKind, FragOp, Level, LevelRef, Print, Stmt, StmtKind,
};
use crate::diagnostics::Diagnostic;
use crate::source::Span;
use crate::token::{Dotted, IntLit, Keyword, Punct, TokenKind};

impl Parser<'_, '_> {
    /// One statement, including its terminating `;` (or its body).
    pub(super) fn statement(&mut self) -> PResult<Stmt> {
        let start = self.span();
        let kind = match self.kind() {
            TokenKind::Punct(Punct::Semi) => {
                self.bump();
                StmtKind::Empty
            }
            TokenKind::Punct(Punct::LBrace) => StmtKind::Block(self.block()?),
            TokenKind::Punct(Punct::AttrOpen) => self.attributed_statement()?,
            TokenKind::Keyword(k) => match k {
                Keyword::Parallel => StmtKind::Parallel(self.parallel(Vec::new())?),
                Keyword::With => self.with_stmt()?,
                Keyword::Foreach => self.foreach_stmt()?,
                Keyword::If => self.if_stmt()?,
                Keyword::While => {
                    self.bump();
                    self.expect_punct(Punct::LParen)?;
                    let cond = self.plain_expr()?;
                    self.expect_punct(Punct::RParen)?;
                    let body = self.body()?;
                    StmtKind::While { cond, body }
                }
                Keyword::Inthreads => {
                    self.bump();
                    let is_async = self.eat_dotted(Dotted::Async);
                    self.expect_punct(Punct::LParen)?;
                    let pred = self.plain_expr()?;
                    self.expect_punct(Punct::RParen)?;
                    let body = self.body()?;
                    StmtKind::Inthreads { is_async, pred, body }
                }
                Keyword::Apply => {
                    self.bump();
                    self.expect_punct(Punct::LBrace)?;
                    let names =
                        self.comma_list(Punct::RBrace, false, |p| p.expect_ident("a name"))?;
                    self.expect_kw(Keyword::In)?;
                    let target = self.expect_ident("a fragment name")?;
                    self.expect_dotted(Dotted::Span)?;
                    let body = self.body()?;
                    StmtKind::Apply { names, target, body }
                }
                Keyword::Else => {
                    return Err(self.fail(
                        "E0309",
                        start,
                        "'else' without a previous 'if'.",
                        "no 'if' before this",
                    ));
                }
                _ => {
                    let kind = self.simple_statement(*k)?;
                    self.expect_punct(Punct::Semi)?;
                    kind
                }
            },
            _ => {
                let kind = self.simple_statement_other()?;
                self.expect_punct(Punct::Semi)?;
                kind
            }
        };
        Ok(Stmt { span: self.since(start), kind })
    }

    /// Statements that start with a keyword and end with `;` (not yet consumed).
    fn simple_statement(&mut self, k: Keyword) -> PResult<StmtKind> {
        match k {
            Keyword::Break => {
                self.bump();
                Ok(StmtKind::Break)
            }
            Keyword::Continue => {
                self.bump();
                Ok(StmtKind::Continue)
            }
            Keyword::Yield => {
                self.bump();
                Ok(StmtKind::Yield)
            }
            Keyword::Return => {
                self.bump();
                if self.at_punct(Punct::Semi) {
                    Ok(StmtKind::Return(None))
                } else {
                    Ok(StmtKind::Return(Some(self.plain_expr()?)))
                }
            }
            Keyword::Sync => self.sync_stmt(),
            Keyword::Wait => self.wait_stmt(),
            Keyword::Trigger => self.trigger_stmt(),
            Keyword::Swap | Keyword::Rotate => self.swap_stmt(),
            Keyword::Print | Keyword::Println => {
                let newline = k == Keyword::Println;
                self.bump();
                let compile_time = self.eat_punct(Punct::Bang).is_some();
                let args = self.paren_args(true)?;
                Ok(StmtKind::Print(Print { newline, compile_time, args }))
            }
            Keyword::Assert => {
                self.bump();
                self.expect_punct(Punct::LParen)?;
                let cond = self.plain_expr()?;
                self.expect_punct(Punct::Comma)?;
                let (message, _) = self.strings()?;
                self.expect_punct(Punct::RParen)?;
                Ok(StmtKind::Assert { cond, message })
            }
            Keyword::Cpp => {
                self.bump();
                self.expect_punct(Punct::LParen)?;
                let (text, _) = self.strings()?;
                self.expect_punct(Punct::RParen)?;
                Ok(StmtKind::Cpp(text))
            }
            Keyword::Asm | Keyword::UnderscoreAsm => Ok(StmtKind::Asm(self.asm()?)),
            Keyword::PragmaPrefix | Keyword::PragmaNamespace => {
                let namespace = k == Keyword::PragmaNamespace;
                self.bump();
                self.expect_punct(Punct::LParen)?;
                let (name, _) = self.strings()?;
                self.expect_punct(Punct::RParen)?;
                Ok(StmtKind::IntrinsicPragma { namespace, name })
            }
            Keyword::Dma | Keyword::Tma => self.dma_statement(None),
            Keyword::Mma => self.mma_statement(None, None),
            Keyword::ReduceMax | Keyword::ReduceSum | Keyword::AllReduceSum | Keyword::Copy => {
                self.frag_op(k)
            }
            Keyword::Call | Keyword::BarArrive | Keyword::BarSync => {
                Ok(StmtKind::Call(self.call()?))
            }
            Keyword::Global
            | Keyword::Shared
            | Keyword::Local
            | Keyword::Mutable
            | Keyword::Int
            | Keyword::Bool
            | Keyword::Mdspan
            | Keyword::Ituple
            | Keyword::Event
            | Keyword::Frag => self.declaration(),
            _ => Err(self.unexpected("a statement")),
        }
    }

    /// Statements that start with something other than a keyword, ending with `;` (not yet
    /// consumed): declarations by element type, calls, assignments, `name : shape`.
    fn simple_statement_other(&mut self) -> PResult<StmtKind> {
        match self.kind() {
            TokenKind::ElemType(_) => self.declaration(),
            kind if starts_call(kind) => Ok(StmtKind::Call(self.call()?)),
            TokenKind::Ident(_) if self.nth(1).is_punct(Punct::Colon) => {
                Ok(StmtKind::MdspanDecl(self.mdspan_decl()?))
            }
            // `atomicAdd(x.at(i), 1);`, `fmaxf(a, b);`: a C spelling of a built-in.
            TokenKind::Ident(name) if self.nth(1).is_punct(Punct::LParen) => {
                match crate::token::choreo_spelling(name) {
                    Some(builtin) => Err(self.c_spelling(name, self.span(), builtin)),
                    None => self.assignment_stmt(),
                }
            }
            TokenKind::Ident(_) | TokenKind::Punct(Punct::PlusPlus | Punct::MinusMinus) => {
                self.assignment_stmt()
            }
            _ => Err(self.unexpected("a statement")),
        }
    }

    /// `a = e, b.at(i) += f, …`, or `name = dma…` / `name = mma…` (single).
    fn assignment_stmt(&mut self) -> PResult<StmtKind> {
        if self.nth(1).is_punct(Punct::Assign) {
            match self.nth(2) {
                TokenKind::Keyword(Keyword::Dma | Keyword::Tma) => {
                    let name = self.expect_ident("a name")?;
                    self.bump();
                    return self.dma_statement(Some(name));
                }
                TokenKind::Keyword(Keyword::Mma) => {
                    let name = self.expect_ident("a name")?;
                    self.bump();
                    return self.mma_statement(Some(name), None);
                }
                _ => {}
            }
        }
        let mut list = vec![self.assignment()?];
        while self.eat_punct(Punct::Comma).is_some() {
            list.push(self.assignment()?);
        }
        Ok(StmtKind::Assign(list))
    }

    fn assignment(&mut self) -> PResult<Assignment> {
        // `++o` / `--o`: `o += 1` / `o -= 1`.
        if let TokenKind::Punct(p @ (Punct::PlusPlus | Punct::MinusMinus)) = self.kind() {
            let at = self.span();
            self.bump();
            let target = self.assign_target()?;
            return Ok(step_assignment(target, *p == Punct::PlusPlus, at));
        }
        let target = self.assign_target()?;
        // `o++` / `o--`.
        if let TokenKind::Punct(p @ (Punct::PlusPlus | Punct::MinusMinus)) = self.kind() {
            let at = self.span();
            self.bump();
            return Ok(step_assignment(target, *p == Punct::PlusPlus, at));
        }
        let op = match self.kind() {
            TokenKind::Punct(Punct::Assign) => AssignOp::Assign,
            TokenKind::Punct(Punct::PlusAssign) => AssignOp::Add,
            TokenKind::Punct(Punct::MinusAssign) => AssignOp::Sub,
            TokenKind::Punct(Punct::StarAssign) => AssignOp::Mul,
            TokenKind::Punct(Punct::SlashAssign) => AssignOp::Div,
            TokenKind::Punct(Punct::PercentAssign) => AssignOp::Rem,
            _ => {
                let expected = if matches!(target.kind, ExprKind::Ident(_)) {
                    "'=', ':' or a compound assignment"
                } else {
                    "'=' or a compound assignment"
                };
                return Err(self.unexpected(expected));
            }
        };
        self.bump();
        let value = if op == AssignOp::Assign { self.rhs_value()? } else { self.plain_expr()? };
        Ok(Assignment { span: target.span.to(value.span), target, op, value, step: None })
    }

    /// An assignment target: `name`, or an element `name[i]….at(…)`, `name.data.at(…)`,
    /// `name.mdata.at(…)`.
    fn assign_target(&mut self) -> PResult<Expr> {
        let name = self.expect_ident("a name")?;
        let start = name.span;
        let mut e = Expr { span: start, kind: ExprKind::Ident(name) };
        loop {
            e = match self.kind() {
                TokenKind::Punct(Punct::LBracket)
                    if matches!(e.kind, ExprKind::Ident(_) | ExprKind::Index { .. }) =>
                {
                    self.bump();
                    let index = self.plain_expr()?;
                    self.expect_punct(Punct::RBracket)?;
                    Expr {
                        span: self.since(start),
                        kind: ExprKind::Index { base: Box::new(e), index: Box::new(index) },
                    }
                }
                TokenKind::Dotted(Dotted::Data)
                    if !matches!(e.kind, ExprKind::Data(_) | ExprKind::Mdata(_)) =>
                {
                    self.bump();
                    Expr { span: self.since(start), kind: ExprKind::Data(Box::new(e)) }
                }
                TokenKind::Dotted(Dotted::Mdata)
                    if !matches!(e.kind, ExprKind::Data(_) | ExprKind::Mdata(_)) =>
                {
                    self.bump();
                    Expr { span: self.since(start), kind: ExprKind::Mdata(Box::new(e)) }
                }
                TokenKind::Dotted(Dotted::At) => {
                    self.bump();
                    let indices = self.paren_args(false)?;
                    return Ok(Expr {
                        span: self.since(start),
                        kind: ExprKind::At { base: Box::new(e), indices },
                    });
                }
                _ if matches!(e.kind, ExprKind::Ident(_)) => return Ok(e),
                // `acc[i][j] op= v`: an element of a fragment array (spec-tier3 §5.6).
                TokenKind::Punct(
                    Punct::PlusAssign
                    | Punct::MinusAssign
                    | Punct::StarAssign
                    | Punct::SlashAssign
                    | Punct::PercentAssign,
                ) => return Ok(e),
                _ => return Err(self.unexpected("'.at'")),
            };
        }
    }

    /// The value after `=` in an assignment or initialiser: a call, an ituple derivation
    /// `t{(1), (0)}`, or an expression (spec §4.4).
    pub(super) fn rhs_value(&mut self) -> PResult<Expr> {
        let start = self.span();
        match self.kind() {
            kind if starts_call(kind) => {
                let call = self.call()?;
                let e = Expr { span: call.span, kind: ExprKind::Call(Box::new(call)) };
                let next = self.kind();
                if binary_op(next).is_some()
                    || next.is_punct(Punct::Question)
                    || matches!(
                        next,
                        TokenKind::Dotted(_) | TokenKind::Punct(Punct::LParen | Punct::LBracket)
                    )
                {
                    let span = e.span.to(self.span());
                    return Err(self.fail(
                        "E0331",
                        span,
                        "a call can not be used inside an expression; assign its result to a \
                         mutable variable first",
                        "call inside an expression",
                    ));
                }
                Ok(e)
            }
            TokenKind::Ident(_) if self.nth(1).is_punct(Punct::LBrace) => self.ituple_derivation(),
            TokenKind::Punct(Punct::LBracket) => {
                self.report(
                    Diagnostic::error("E0307", start, "must use '{' and '}' to define an ituple.")
                        .with_label("'[' starts an mdspan")
                        .with_help("an mdspan is declared with ':' (`m : [4, 8];`), an ituple with braces (`t = {4, 8};`)"),
                );
                self.plain_expr()
            }
            TokenKind::Keyword(Keyword::Dma | Keyword::Tma | Keyword::Mma) => Err(self.fail(
                "E0338",
                start,
                "a DMA or MMA operation must be a statement of its own (`name = dma.copy …;`)",
                "not a statement of its own",
            )),
            _ => self.plain_expr(),
        }
    }

    /// `if (cond) body [else body]`; the condition may be a call.
    fn if_stmt(&mut self) -> PResult<StmtKind> {
        self.expect_kw(Keyword::If)?;
        self.expect_punct(Punct::LParen)?;
        let cond = if starts_call(self.kind()) { self.rhs_value()? } else { self.plain_expr()? };
        self.expect_punct(Punct::RParen)?;
        let then_body = self.body()?;
        let else_body =
            if self.eat_kw(Keyword::Else).is_some() { Some(self.body()?) } else { None };
        Ok(StmtKind::If { cond, then_body, else_body })
    }

    /// A level keyword.
    pub(super) fn level_ref(&mut self) -> PResult<LevelRef> {
        let level = match self.kind() {
            TokenKind::Keyword(Keyword::Device) => Level::Device,
            TokenKind::Keyword(Keyword::Cluster) => Level::Cluster,
            TokenKind::Keyword(Keyword::Block) => Level::Block,
            TokenKind::Keyword(Keyword::Group4) => Level::Group4,
            TokenKind::Keyword(Keyword::Group) => Level::Group,
            TokenKind::Keyword(Keyword::Thread) => Level::Thread,
            TokenKind::Keyword(Keyword::Term) => Level::Term,
            _ => return Err(self.unexpected("a parallel level")),
        };
        Ok(LevelRef { level, span: self.bump().span })
    }

    /// `sync.shared|global|local`, `sync.barrier : level`, `sync.fence : level[<storage>]`.
    fn sync_stmt(&mut self) -> PResult<StmtKind> {
        self.expect_kw(Keyword::Sync)?;
        self.expect_punct(Punct::Dot)?;
        if let Some(st) = storage(self.kind()) {
            let span = self.bump().span;
            return Ok(StmtKind::Sync(st, span));
        }
        if self.eat_kw(Keyword::Barrier).is_some() {
            self.expect_punct(Punct::Colon)?;
            return Ok(StmtKind::Barrier(self.level_ref()?));
        }
        if self.eat_kw(Keyword::Fence).is_some() {
            self.expect_punct(Punct::Colon)?;
            let level = self.level_ref()?;
            let storage = if self.eat_punct(Punct::Lt).is_some() {
                let Some(st) = storage(self.kind()) else {
                    return Err(self.unexpected("'shared', 'local' or 'global'"));
                };
                let span = self.bump().span;
                self.expect_punct(Punct::Gt)?;
                Some((st, span))
            } else {
                None
            };
            return Ok(StmtKind::Fence { level, storage });
        }
        Err(self.unexpected("'shared', 'global', 'local', 'barrier' or 'fence'"))
    }

    /// Event/future targets: `e`, `e[i]…`, `e.at(k)`.
    fn wait_targets(&mut self) -> PResult<Vec<Expr>> {
        let mut targets = vec![self.with_shape_ctx(false, |p| p.postfix_expr())?];
        while self.eat_punct(Punct::Comma).is_some() {
            targets.push(self.with_shape_ctx(false, |p| p.postfix_expr())?);
        }
        Ok(targets)
    }

    /// `wait a, b.at(k), e[1]`.
    fn wait_stmt(&mut self) -> PResult<StmtKind> {
        let start = self.expect_kw(Keyword::Wait)?;
        if self.at_punct(Punct::Lt) {
            let span = start.to(self.span());
            return Err(self.removed_syntax(span, "wait<N> e"));
        }
        Ok(StmtKind::Wait(self.wait_targets()?))
    }

    /// `trigger[.cluster] e, … [after f, …]`.
    fn trigger_stmt(&mut self) -> PResult<StmtKind> {
        self.expect_kw(Keyword::Trigger)?;
        let cluster = if self.eat_punct(Punct::Dot).is_some() {
            if let Some(span) = self.eat_kw(Keyword::Cluster) {
                Some(span)
            } else {
                let span = self.span();
                return Err(self.fail(
                    "E0324",
                    span,
                    "only 'cluster' scope is supported for trigger.",
                    "only 'cluster' is supported",
                ));
            }
        } else {
            None
        };
        let targets = self.wait_targets()?;
        let after =
            if self.eat_kw(Keyword::After).is_some() { self.wait_targets()? } else { Vec::new() };
        Ok(StmtKind::Trigger(crate::ast::Trigger { cluster, targets, after }))
    }

    /// `swap(a, b)` / `rotate(a, b, c)` (parentheses optional).
    fn swap_stmt(&mut self) -> PResult<StmtKind> {
        let rotate = self.at_kw(Keyword::Rotate);
        let start = self.bump().span;
        let names = if self.eat_punct(Punct::LParen).is_some() {
            self.comma_list(Punct::RParen, true, |p| p.expect_ident("a name"))?
        } else {
            let mut names = vec![self.expect_ident("a name")?];
            while self.eat_punct(Punct::Comma).is_some() {
                names.push(self.expect_ident("a name")?);
            }
            names
        };
        let span = self.since(start);
        if !rotate && names.len() != 2 {
            self.report(
                Diagnostic::error(
                    "E0315",
                    span,
                    "Builtin function 'swap' accept exact two parameters.",
                )
                .with_label("needs exactly two names"),
            );
        } else if rotate && names.len() < 2 {
            self.report(
                Diagnostic::error(
                    "E0316",
                    span,
                    "Builtin function 'rotate' accept two or more parameters.",
                )
                .with_label("needs at least two names"),
            );
        }
        Ok(StmtKind::Swap { rotate, names })
    }

    /// `reduce_max(d, s, n)`, `reduce_sum(d, s, n)`, `all_reduce_sum(f)`, `copy(d, s)`.
    fn frag_op(&mut self, k: Keyword) -> PResult<StmtKind> {
        self.bump();
        self.expect_punct(Punct::LParen)?;
        let first = self.plain_expr()?;
        let op = match k {
            Keyword::AllReduceSum => FragOp::AllReduceSum(first),
            Keyword::Copy => {
                self.expect_punct(Punct::Comma)?;
                let src = self.plain_expr()?;
                FragOp::Copy { dst: first, src }
            }
            _ => {
                self.expect_punct(Punct::Comma)?;
                let src = self.plain_expr()?;
                self.expect_punct(Punct::Comma)?;
                let axis = self.int_literal("an integer literal axis")?;
                if k == Keyword::ReduceMax {
                    FragOp::ReduceMax { dst: first, src, axis }
                } else {
                    FragOp::ReduceSum { dst: first, src, axis }
                }
            }
        };
        self.expect_punct(Punct::RParen)?;
        Ok(StmtKind::FragOp(op))
    }

    /// An integer literal, optionally negative.
    pub(super) fn int_literal(&mut self, what: &str) -> PResult<(IntLit, Span)> {
        let start = self.span();
        let negative = self.at_punct(Punct::Minus) && matches!(self.nth(1), TokenKind::Int(_));
        if negative {
            self.bump();
        }
        match self.kind() {
            TokenKind::Int(lit) => {
                let lit = if negative { IntLit { value: -lit.value, ty: lit.ty } } else { *lit };
                self.bump();
                Ok((lit, self.since(start)))
            }
            _ => Err(self.unexpected(what)),
        }
    }

    /// Reports removed syntax (E0329).
    pub(super) fn removed_syntax(&mut self, span: Span, what: &str) -> super::Reported {
        self.report(
            Diagnostic::error(
                "E0329",
                span,
                format!("'{what}' is removed syntax and is no longer supported"),
            )
            .with_label("removed syntax"),
        );
        super::Reported
    }
}

/// `o++` / `++o` (`inc`) or `o--` / `--o` at `at` (the operator): the assignment `o += 1` /
/// `o -= 1`, its `1` at the operator.
fn step_assignment(target: Expr, inc: bool, at: Span) -> Assignment {
    let one = Expr {
        span: at,
        kind: ExprKind::Int(IntLit { value: 1, ty: crate::token::IntLitType::S32 }),
    };
    let span = target.span.to(at);
    Assignment {
        span,
        target,
        op: if inc { AssignOp::Add } else { AssignOp::Sub },
        value: one,
        step: Some(at),
    }
}
