//! Parallel-by, `with`, `foreach` and attributes (spec §4.7, §8, §9).

use super::{PResult, Parser};
use crate::ast::{
    Attribute, AttributeKind, ExprKind, Foreach, ForeachItems, Ident, Level, LevelNote, LoopSuffix,
    Parallel, ParallelBinder, ParallelItem, Range, RangeBounds, StmtKind, With, WithBinder, Within,
};
use crate::diagnostics::Diagnostic;
use crate::token::{Dotted, Keyword, Punct, TokenKind};

impl Parser<'_, '_> {
    /// A statement starting with `[[`: attributes, then a `parallel` or an MMA statement.
    pub(super) fn attributed_statement(&mut self) -> PResult<StmtKind> {
        let mut attrs = Vec::new();
        while self.at_punct(Punct::AttrOpen) {
            attrs.push(self.attribute()?);
        }
        let schedule_pos = attrs.iter().position(|a| matches!(a.kind, AttributeKind::Schedule(_)));
        let is_mma = self.at_kw(Keyword::Mma)
            || (matches!(self.kind(), TokenKind::Ident(_))
                && self.nth(1).is_punct(Punct::Assign)
                && self.nth(2).is_keyword(Keyword::Mma));
        if self.at_kw(Keyword::Parallel) && schedule_pos.is_none() {
            return Ok(StmtKind::Parallel(self.parallel(attrs)?));
        }
        if let Some(i) = schedule_pos {
            let schedule = attrs.swap_remove(i);
            if !is_mma {
                return Err(self.fail(
                    "E0326",
                    schedule.span,
                    "[[schedule(k_tiles(...))]] only applies to an MMA execution statement",
                    "not an MMA execution statement",
                ));
            }
            if let Some(other) = attrs.first() {
                let (code, message) = if matches!(other.kind, AttributeKind::Schedule(_)) {
                    ("E0326", "only one [[schedule(k_tiles(...))]] is allowed on an MMA statement")
                } else {
                    (
                        "E0335",
                        "[[launch_bounds(...)]] and [[maxnreg(...)]] only apply to a parallel-by statement",
                    )
                };
                let span = other.span;
                return Err(self.fail(code, span, message, "misplaced attribute"));
            }
            let future = if matches!(self.kind(), TokenKind::Ident(_)) {
                let name = self.expect_ident("a name")?;
                self.bump(); // `=`
                Some(name)
            } else {
                None
            };
            let kind = self.mma_statement(future, Some(schedule))?;
            self.expect_punct(Punct::Semi)?;
            return Ok(kind);
        }
        let span = attrs.first().map_or(self.span(), |a| a.span);
        let reported = self.fail(
            "E0335",
            span,
            "[[launch_bounds(...)]] and [[maxnreg(...)]] only apply to a parallel-by statement",
            "not followed by a parallel-by",
        );
        if self.at_eof() || self.at_punct(Punct::RBrace) {
            return Err(reported);
        }
        // The attributes are dropped and the statement after them is parsed as usual: skipping
        // it instead would stop at its first `}` (`foreach {k} in …`) and report the rest.
        Ok(self.statement()?.kind)
    }

    /// `[[launch_bounds(…)]]`, `[[maxnreg(…)]]`, `[[schedule(k_tiles(…))]]`.
    fn attribute(&mut self) -> PResult<Attribute> {
        let open = self.expect_punct(Punct::AttrOpen)?;
        let name = self.expect_ident("an attribute name")?;
        let kind = match name.name.as_str() {
            "launch_bounds" => AttributeKind::LaunchBounds(self.paren_args(false)?),
            "maxnreg" => {
                self.expect_punct(Punct::LParen)?;
                let n = self.plain_expr()?;
                self.expect_punct(Punct::RParen)?;
                AttributeKind::MaxNReg(n)
            }
            "schedule" => {
                self.expect_punct(Punct::LParen)?;
                match self.kind() {
                    TokenKind::Ident(word) if &**word == "k_tiles" => {
                        self.bump();
                    }
                    _ => return Err(self.unexpected("'k_tiles'")),
                }
                self.expect_punct(Punct::LParen)?;
                let tiles =
                    self.comma_list(Punct::RParen, false, |p| p.int_literal("an integer literal"))?;
                self.expect_punct(Punct::RParen)?;
                AttributeKind::Schedule(tiles)
            }
            other => {
                let message = format!("unknown attribute '{other}'");
                self.report(
                    Diagnostic::error("E0336", name.span, message)
                        .with_label("unknown attribute")
                        .with_help("the attributes are launch_bounds, maxnreg and schedule"),
                );
                return Err(super::Reported);
            }
        };
        self.expect_punct(Punct::RBracket)?;
        self.expect_punct(Punct::RBracket)?;
        Ok(Attribute { span: self.since(open), kind })
    }

    /// `parallel[.async][<s>] item, … body`.
    pub(super) fn parallel(&mut self, attrs: Vec<Attribute>) -> PResult<Parallel> {
        self.expect_kw(Keyword::Parallel)?;
        let is_async = self.eat_dotted(Dotted::Async);
        let stream = if self.eat_punct(Punct::Lt).is_some() {
            let s = self.expect_ident("a stream name")?;
            self.expect_punct(Punct::Gt)?;
            Some(s)
        } else {
            None
        };
        let mut items = vec![self.parallel_item()?];
        while self.eat_punct(Punct::Comma).is_some() {
            items.push(self.parallel_item()?);
        }
        self.check_parallel_names(&items);
        let body = self.body()?;
        Ok(Parallel { attrs, is_async, stream, items, body })
    }

    /// Reports names bound twice in one parallel statement (E0310).
    fn check_parallel_names(&mut self, items: &[ParallelItem]) {
        let mut seen: Vec<&Ident> = Vec::new();
        let mut duplicates = Vec::new();
        for item in items {
            let names: Vec<&Ident> = match &item.binder {
                ParallelBinder::Anonymous => Vec::new(),
                ParallelBinder::Name(n) => vec![n],
                ParallelBinder::Tuple { name, components } => {
                    name.iter().chain(components.iter()).collect()
                }
            };
            for n in names {
                if let Some(first) = seen.iter().find(|s| s.name == n.name) {
                    duplicates.push((n.clone(), first.span));
                } else {
                    seen.push(n);
                }
            }
        }
        for (n, first) in duplicates {
            self.report(
                Diagnostic::error(
                    "E0310",
                    n.span,
                    format!(
                        "The parallel variable '{}' has been used in the same parallelby block.",
                        n.name
                    ),
                )
                .with_label("used again")
                .with_secondary(first, "first bound here"),
            );
        }
    }

    /// `[name | {x, y} | t = {x, y}] by bound [: level]`.
    fn parallel_item(&mut self) -> PResult<ParallelItem> {
        let start = self.span();
        let binder = match self.kind() {
            TokenKind::Keyword(Keyword::By) => ParallelBinder::Anonymous,
            _ if self.at_tuple_binder() => {
                let (name, components) = self.tuple_binder()?;
                ParallelBinder::Tuple { name, components }
            }
            TokenKind::Ident(_) => ParallelBinder::Name(self.expect_ident("a name")?),
            _ => return Err(self.unexpected("a parallel variable or 'by'")),
        };
        self.expect_kw(Keyword::By)?;
        let bound = if let ParallelBinder::Tuple { .. } = binder {
            if !self.at_punct(Punct::LBracket) {
                return Err(
                    self.unexpected("'[' (a tuple binder needs a bracketed list of bounds)")
                );
            }
            self.with_shape_ctx(false, |p| p.primary())?
        } else {
            self.plain_expr()?
        };
        if let (ParallelBinder::Name(name), ExprKind::Mdspan(list)) = (&binder, &bound.kind) {
            if list.len() > 1 {
                self.report(
                    Diagnostic::error(
                        "E0311",
                        bound.span,
                        format!(
                            "The parallel variable '{}' can not be assigned multiple bounds.",
                            name.name
                        ),
                    )
                    .with_label("several bounds for one name"),
                );
            }
        }
        let level = if self.at_punct(Punct::Colon) { Some(self.level_note()?) } else { None };
        Ok(ParallelItem { span: self.since(start), binder, bound, level })
    }

    /// `: level[(target)][<cooperative>]`.
    fn level_note(&mut self) -> PResult<LevelNote> {
        let colon = self.expect_punct(Punct::Colon)?;
        let level = self.level_ref()?;
        let target = if self.eat_punct(Punct::LParen).is_some() {
            let target = self.expect_ident("a device target")?;
            self.expect_punct(Punct::RParen)?;
            if level.level != Level::Device {
                let span = self.since(level.span);
                self.report(
                    Diagnostic::error(
                        "E0325",
                        span,
                        "parameterized level annotation is only valid for 'device'.",
                    )
                    .with_label("argument on a level other than 'device'"),
                );
            }
            Some(target)
        } else {
            None
        };
        let cooperative = if self.eat_punct(Punct::Lt).is_some() {
            let span = self.expect_kw(Keyword::Cooperative)?;
            self.expect_punct(Punct::Gt)?;
            Some(span)
        } else {
            None
        };
        Ok(LevelNote { span: self.since(colon), level, target, cooperative })
    }

    /// `with within, … [where a <-> b, …] body`.
    pub(super) fn with_stmt(&mut self) -> PResult<StmtKind> {
        self.expect_kw(Keyword::With)?;
        let mut items = vec![self.within()?];
        while self.eat_punct(Punct::Comma).is_some() {
            items.push(self.within()?);
        }
        let mut swaps = Vec::new();
        if self.eat_kw(Keyword::Where).is_some() {
            loop {
                let a = self.expect_ident("a name")?;
                self.expect_punct(Punct::SwapArrow)?;
                let b = self.expect_ident("a name")?;
                swaps.push((a, b));
                if self.eat_punct(Punct::Comma).is_none() {
                    break;
                }
            }
        }
        let body = self.body()?;
        Ok(StmtKind::With(With { items, swaps, body }))
    }

    /// Whether the current tokens start a `within` binder (rather than a range).
    fn at_within(&self) -> bool {
        match self.kind() {
            TokenKind::Punct(Punct::LBrace) => true,
            TokenKind::Ident(_) => {
                self.nth(1).is_keyword(Keyword::In)
                    || (self.nth(1).is_punct(Punct::Assign) && self.nth(2).is_punct(Punct::LBrace))
            }
            _ => false,
        }
    }

    /// Whether a tuple binder starts here: `{i, j}` or `t = {i, j}` (of parallel-by, `with`
    /// and `foreach`).
    fn at_tuple_binder(&self) -> bool {
        match self.kind() {
            TokenKind::Punct(Punct::LBrace) => true,
            TokenKind::Ident(_) => self.nth(1).is_punct(Punct::Assign),
            _ => false,
        }
    }

    /// Parses a tuple binder `{i, j}` or `t = {i, j}`: the optional tuple name and the
    /// component names.
    fn tuple_binder(&mut self) -> PResult<(Option<Ident>, Vec<Ident>)> {
        let name = if self.at_punct(Punct::LBrace) {
            None
        } else {
            let name = self.expect_ident("a name")?;
            self.bump();
            Some(name)
        };
        self.expect_punct(Punct::LBrace)?;
        let components = self.comma_list(Punct::RBrace, false, |p| p.expect_ident("a name"))?;
        Ok((name, components))
    }

    /// `name in bound`, `{i, j} in bound`, `idx = {i, j} in bound`.
    fn within(&mut self) -> PResult<Within> {
        let start = self.span();
        let binder = match self.kind() {
            _ if self.at_tuple_binder() => {
                let (name, components) = self.tuple_binder()?;
                WithBinder::Tuple { name, components }
            }
            _ => WithBinder::Name(self.expect_ident("a name or '{'")?),
        };
        self.expect_kw(Keyword::In)?;
        if self.at_punct(Punct::Pipe) {
            let span = self.span();
            return Err(self.fail(
                "E0333",
                span,
                "syntax error, unexpected '|': a with/foreach bound can not be a '|…|' size expression", "a size expression is not a bound"));
        }
        let bound = self.plain_expr()?;
        Ok(Within { span: self.since(start), binder, bound })
    }

    /// `foreach (within, … | range, …) [: suffix, …] body`.
    pub(super) fn foreach_stmt(&mut self) -> PResult<StmtKind> {
        self.expect_kw(Keyword::Foreach)?;
        let items = if self.at_within() {
            let mut items = vec![self.within()?];
            while self.eat_punct(Punct::Comma).is_some() {
                items.push(self.within()?);
            }
            ForeachItems::Within(items)
        } else {
            let mut items = vec![self.range()?];
            while self.eat_punct(Punct::Comma).is_some() {
                items.push(self.range()?);
            }
            ForeachItems::Ranges(items)
        };
        let mut suffixes = Vec::new();
        if self.eat_punct(Punct::Colon).is_some() {
            suffixes.push(self.loop_suffix()?);
            while self.eat_punct(Punct::Comma).is_some() {
                suffixes.push(self.loop_suffix()?);
            }
        }
        let body = self.body()?;
        Ok(StmtKind::Foreach(Foreach { items, suffixes, body }))
    }

    /// `[c =] v[(lo:hi:step)]`.
    fn range(&mut self) -> PResult<Range> {
        let start = self.span();
        let local =
            if matches!(self.kind(), TokenKind::Ident(_)) && self.nth(1).is_punct(Punct::Assign) {
                let name = self.expect_ident("a name")?;
                self.bump();
                Some(name)
            } else {
                None
            };
        let var = self.expect_ident("an iteration variable")?;
        let bounds = if let Some(open) = self.eat_punct(Punct::LParen) {
            let lo = if self.at_punct(Punct::Colon) { None } else { Some(self.plain_expr()?) };
            self.expect_punct(Punct::Colon)?;
            let hi = if self.at_punct(Punct::Colon) || self.at_punct(Punct::RParen) {
                None
            } else {
                Some(self.plain_expr()?)
            };
            let step = if self.eat_punct(Punct::Colon).is_some() && !self.at_punct(Punct::RParen) {
                Some(self.int_literal("an integer literal step")?)
            } else {
                None
            };
            self.expect_punct(Punct::RParen)?;
            Some(RangeBounds { span: self.since(open), lo, hi, step })
        } else {
            None
        };
        Ok(Range { span: self.since(start), local, var, bounds })
    }

    /// `unroll[(n)]` or `vectorize(v, w)`.
    fn loop_suffix(&mut self) -> PResult<LoopSuffix> {
        let start = self.span();
        if self.eat_kw(Keyword::Unroll).is_some() {
            let factor = if self.eat_punct(Punct::LParen).is_some() {
                let lit = self.int_literal("an integer literal unroll factor")?;
                self.expect_punct(Punct::RParen)?;
                if lit.0.value <= 0 {
                    self.report(
                        Diagnostic::error(
                            "E0330",
                            lit.1,
                            "unroll factor must be a positive integer",
                        )
                        .with_label("not positive"),
                    );
                }
                Some(lit)
            } else {
                None
            };
            return Ok(LoopSuffix::Unroll { span: self.since(start), factor });
        }
        if self.eat_kw(Keyword::Vectorize).is_some() {
            self.expect_punct(Punct::LParen)?;
            let var = self.expect_ident("a variable")?;
            self.expect_punct(Punct::Comma)?;
            let width = self.plain_expr()?;
            self.expect_punct(Punct::RParen)?;
            return Ok(LoopSuffix::Vectorize { span: self.since(start), var, width });
        }
        Err(self.unexpected("'unroll' or 'vectorize'"))
    }
}
