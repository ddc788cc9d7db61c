//! DMA/TMA and MMA statements (spec §4.6, §14, §20.2, §20.3).

use super::{PResult, Parser};
use crate::ast::{
    Attribute, DmaAttr, DmaAttrKind, DmaDest, DmaEngine, DmaOp, DmaStmt, Ident, MmaExecVariant,
    MmaKind, MmaLayout, MmaStmt, MmaStoreVariant, PadConfig, StmtKind,
};
use crate::diagnostics::Diagnostic;
use crate::source::Span;
use crate::token::{Dotted, Keyword, Punct, TokenKind};

impl Parser<'_, '_> {
    /// `[f =] dma|tma.op[<config>][.async][modifiers] src => dst [after g]` or
    /// `f = dma|tma.any` (the future name, if any, and `=` are consumed).
    pub(super) fn dma_statement(&mut self, future: Option<Ident>) -> PResult<StmtKind> {
        let engine_span = self.span();
        let engine = match self.kind() {
            TokenKind::Keyword(Keyword::Dma) => DmaEngine::Dma,
            TokenKind::Keyword(Keyword::Tma) => DmaEngine::Tma,
            _ => return Err(self.unexpected("'dma' or 'tma'")),
        };
        self.bump();
        if let Some(any) = self.eat_dotted(Dotted::Any) {
            return match future {
                Some(name) => Ok(StmtKind::DmaAny { name, engine }),
                None => Err(self.fail(
                    "E0338",
                    engine_span.to(any),
                    format!(
                        "'{}.any' must be assigned to a name (`f = {}.any;`)",
                        engine.as_str(),
                        engine.as_str()
                    ),
                    "not bound to a name",
                )),
            };
        }
        let op_span = self.span();
        let op = match self.kind() {
            TokenKind::Dotted(Dotted::Copy) => {
                self.bump();
                DmaOp::Copy
            }
            TokenKind::Dotted(Dotted::Load) => {
                self.bump();
                if engine == DmaEngine::Dma {
                    self.report(
                        Diagnostic::error("E0319", op_span, "'.load' is a TMA-only operation.")
                            .with_label("'dma' has no '.load'")
                            .with_help("write 'tma.load' (sm_90+) or 'dma.copy'"),
                    );
                }
                DmaOp::Load
            }
            TokenKind::Dotted(Dotted::Pad) => {
                self.bump();
                DmaOp::Pad(self.pad_config()?)
            }
            TokenKind::Dotted(Dotted::Transp) => {
                self.bump();
                self.expect_punct(Punct::Lt)?;
                let perm =
                    self.comma_list(Punct::Gt, false, |p| p.int_literal("an integer literal"))?;
                DmaOp::Transp(perm)
            }
            TokenKind::Dotted(Dotted::Store) if engine == DmaEngine::Tma => {
                return Err(self.removed_syntax(engine_span.to(op_span), "tma.store"));
            }
            _ => return Err(self.unexpected("'.copy', '.load', '.pad', '.transp' or '.any'")),
        };
        let (is_async, attrs) = self.dma_modifiers(engine, &op, engine_span)?;
        let src = self.plain_expr()?;
        self.expect_punct(Punct::FatArrow)?;
        let dst = match super::expr::storage(self.kind()) {
            Some(st) => DmaDest::Storage(st, self.bump().span),
            None => DmaDest::Expr(self.plain_expr()?),
        };
        let after = if self.eat_kw(Keyword::After).is_some() {
            Some(self.expect_ident("a future name")?)
        } else {
            None
        };
        Ok(StmtKind::Dma(Box::new(DmaStmt {
            future,
            engine,
            op,
            op_span,
            is_async,
            attrs,
            src,
            dst,
            after,
        })))
    }

    /// `<{low…}, {high…}, {mid…}, value>`.
    fn pad_config(&mut self) -> PResult<PadConfig> {
        self.expect_punct(Punct::Lt)?;
        let mut lists = Vec::with_capacity(3);
        for _ in 0..3 {
            self.expect_punct(Punct::LBrace)?;
            lists.push(self.comma_list(Punct::RBrace, false, |p| p.plain_expr())?);
            self.expect_punct(Punct::Comma)?;
        }
        // The value is a single operand: a comparison would swallow the closing '>'.
        let value = self.with_shape_ctx(false, |p| p.operand())?;
        self.expect_punct(Punct::Gt)?;
        let mut lists = lists.into_iter();
        Ok(PadConfig {
            low: lists.next().unwrap_or_default(),
            high: lists.next().unwrap_or_default(),
            mid: lists.next().unwrap_or_default(),
            value,
        })
    }

    /// `.async` and the modifiers after the operation, with the TMA modifier rules of §20.2.
    fn dma_modifiers(
        &mut self,
        engine: DmaEngine,
        op: &DmaOp,
        engine_span: Span,
    ) -> PResult<(Option<Span>, Vec<DmaAttr>)> {
        let mut is_async = None;
        let mut attrs: Vec<DmaAttr> = Vec::new();
        loop {
            let span = self.span();
            let kind = match self.kind() {
                TokenKind::Dotted(Dotted::Async) if is_async.is_none() => {
                    is_async = Some(self.bump().span);
                    if self.at_punct(Punct::Lt) {
                        let end = self.span();
                        let what = format!("{}.copy.async<…>", engine.as_str());
                        return Err(self.removed_syntax(engine_span.to(end), &what));
                    }
                    continue;
                }
                TokenKind::Dotted(Dotted::Swiz | Dotted::Swizzle) => {
                    self.bump();
                    DmaAttrKind::Swizzle(self.swizzle_value()?)
                }
                TokenKind::Dotted(Dotted::Sp) => {
                    self.bump();
                    let pattern = if self.eat_punct(Punct::Lt).is_some() {
                        let (a, _) = self.expect_u64("an integer literal")?;
                        if self.eat_punct(Punct::Colon).is_none() {
                            self.expect_punct(Punct::Comma)?;
                        }
                        let (b, _) = self.expect_u64("an integer literal")?;
                        self.expect_punct(Punct::Gt)?;
                        Some((a, b))
                    } else {
                        None
                    };
                    DmaAttrKind::Sparse(pattern)
                }
                TokenKind::Dotted(Dotted::Zfill) => {
                    self.bump();
                    DmaAttrKind::Zfill
                }
                TokenKind::Dotted(Dotted::Promote) => {
                    self.bump();
                    self.expect_punct(Punct::Lt)?;
                    let (n, n_span) = self.expect_u64("an integer literal")?;
                    self.expect_punct(Punct::Gt)?;
                    if !matches!(n, 64 | 128 | 256) {
                        self.report(
                            Diagnostic::error(
                                "E0318",
                                n_span,
                                "L2 promote size must be 64, 128, or 256",
                            )
                            .with_label("not 64, 128 or 256"),
                        );
                    }
                    DmaAttrKind::Promote(u32::try_from(n).unwrap_or(u32::MAX))
                }
                TokenKind::Dotted(Dotted::Multicast) => {
                    self.bump();
                    DmaAttrKind::Multicast
                }
                TokenKind::Dotted(Dotted::EvictFirst) => {
                    self.bump();
                    DmaAttrKind::EvictFirst
                }
                TokenKind::Dotted(Dotted::EvictLast) => {
                    self.bump();
                    DmaAttrKind::EvictLast
                }
                _ => break,
            };
            attrs.push(DmaAttr { kind, span: self.since(span) });
        }
        self.check_eviction(engine, op, &attrs);
        Ok((is_async, attrs))
    }

    /// `[<32|64|128>]` after `.swiz`/`.swizzle`.
    fn swizzle_value(&mut self) -> PResult<Option<u32>> {
        if self.eat_punct(Punct::Lt).is_none() {
            return Ok(None);
        }
        let (n, n_span) = self.expect_u64("an integer literal")?;
        self.expect_punct(Punct::Gt)?;
        if !matches!(n, 32 | 64 | 128) {
            self.report(
                Diagnostic::error("E0317", n_span, "swizzle value must be 128, 64, or 32")
                    .with_label("not 128, 64 or 32"),
            );
        }
        Ok(Some(u32::try_from(n).unwrap_or(u32::MAX)))
    }

    /// The TMA L2 eviction rules (spec §20.2): only on `tma.load`, before `.swiz`, at most one,
    /// not with `.multicast`.
    fn check_eviction(&mut self, engine: DmaEngine, op: &DmaOp, attrs: &[DmaAttr]) {
        let is_evict =
            |a: &DmaAttr| matches!(a.kind, DmaAttrKind::EvictFirst | DmaAttrKind::EvictLast);
        let Some(first) = attrs.iter().find(|a| is_evict(a)) else { return };
        if engine != DmaEngine::Tma || !matches!(op, DmaOp::Load) {
            self.report(
                Diagnostic::error(
                    "E0320",
                    first.span,
                    "TMA L2 eviction modifiers are only valid on 'tma.load'.",
                )
                .with_label("not on 'tma.load'"),
            );
            return;
        }
        if let Some(second) = attrs.iter().filter(|a| is_evict(a)).nth(1) {
            self.report(
                Diagnostic::error(
                    "E0322",
                    second.span,
                    "only one TMA eviction modifier is allowed.",
                )
                .with_label("second eviction modifier"),
            );
        }
        let first_swizzle = attrs.iter().position(|a| matches!(a.kind, DmaAttrKind::Swizzle(_)));
        if let Some(swiz) = first_swizzle {
            if let Some(late) = attrs.iter().skip(swiz).find(|a| is_evict(a)) {
                self.report(
                    Diagnostic::error(
                        "E0321",
                        late.span,
                        "TMA eviction modifier must precede '.swiz'.",
                    )
                    .with_label("after '.swiz'"),
                );
            }
        }
        if attrs.iter().any(|a| matches!(a.kind, DmaAttrKind::Multicast)) {
            self.report(
                Diagnostic::error(
                    "E0337",
                    first.span,
                    "TMA eviction modifiers cannot be combined with '.multicast'.",
                )
                .with_label("eviction modifier with '.multicast'"),
            );
        }
    }

    /// An MMA statement (the future name and `=`, if any, are consumed; `mma` is current).
    pub(super) fn mma_statement(
        &mut self,
        future: Option<Ident>,
        schedule: Option<Attribute>,
    ) -> PResult<StmtKind> {
        let start = self.expect_kw(Keyword::Mma)?;
        let op_span = self.span();
        let kind = match self.kind() {
            TokenKind::Dotted(Dotted::Fill) => {
                self.bump();
                let elem = if self.at_punct(Punct::Dot) {
                    self.bump();
                    let TokenKind::ElemType(e) = self.kind() else {
                        return Err(self.unexpected("an element type"));
                    };
                    let e = *e;
                    Some((e, self.bump().span))
                } else {
                    None
                };
                match future {
                    Some(name) => MmaKind::FillNew { name, elem, value: self.plain_expr()? },
                    None => {
                        if let Some((_, span)) = elem {
                            return Err(self.fail(
                                "E0301",
                                span,
                                "syntax error, an element type on 'mma.fill' needs a new accumulator (`acc = mma.fill.f32 0.0f;`)", "element type without a new accumulator"));
                        }
                        let frag = self.plain_expr()?;
                        self.expect_punct(Punct::Comma)?;
                        MmaKind::Fill { frag, value: self.plain_expr()? }
                    }
                }
            }
            TokenKind::Dotted(Dotted::Load) => {
                self.bump();
                match future {
                    Some(name) => {
                        let frag =
                            if self.at_punct(Punct::Dot) && self.nth(1).is_keyword(Keyword::Frag) {
                                self.bump();
                                Some(self.bump().span)
                            } else {
                                None
                            };
                        let swizzle = if matches!(
                            self.kind(),
                            TokenKind::Dotted(Dotted::Swiz | Dotted::Swizzle)
                        ) {
                            let span = self.bump().span;
                            let value = self.swizzle_value()?;
                            Some(DmaAttr {
                                kind: DmaAttrKind::Swizzle(value),
                                span: self.since(span),
                            })
                        } else {
                            None
                        };
                        let is_async = self.eat_dotted(Dotted::Async);
                        MmaKind::LoadNew { name, frag, swizzle, is_async, src: self.plain_expr()? }
                    }
                    None => {
                        let src = self.plain_expr()?;
                        self.expect_punct(Punct::Comma)?;
                        MmaKind::Load { src, frag: self.plain_expr()? }
                    }
                }
            }
            TokenKind::Dotted(Dotted::Row | Dotted::Col) => self.mma_exec(future)?,
            TokenKind::Dotted(Dotted::Store) => {
                self.no_future(&future, op_span)?;
                self.bump();
                enum Sv {
                    Plain,
                    Async(Span),
                    Transp(Span),
                    Mask(Span),
                }
                let sv = match self.kind() {
                    TokenKind::Dotted(Dotted::Async) => Sv::Async(self.bump().span),
                    TokenKind::Dotted(Dotted::Transp) => Sv::Transp(self.bump().span),
                    TokenKind::Dotted(Dotted::Mask) => Sv::Mask(self.bump().span),
                    _ => Sv::Plain,
                };
                let frag = self.plain_expr()?;
                self.expect_punct(Punct::Comma)?;
                let dst = self.plain_expr()?;
                let variant = match sv {
                    Sv::Plain => MmaStoreVariant::Plain,
                    Sv::Async(span) => MmaStoreVariant::Async(span),
                    Sv::Transp(span) => MmaStoreVariant::Transp(span),
                    Sv::Mask(span) => {
                        self.expect_punct(Punct::Comma)?;
                        let rows = self.plain_expr()?;
                        let cols = if self.eat_punct(Punct::Comma).is_some() {
                            Some(self.plain_expr()?)
                        } else {
                            None
                        };
                        MmaStoreVariant::Mask { span, rows, cols }
                    }
                };
                MmaKind::Store { variant, frag, dst }
            }
            TokenKind::Dotted(Dotted::Scale) => {
                self.no_future(&future, op_span)?;
                self.bump();
                let frag = self.plain_expr()?;
                self.expect_punct(Punct::Comma)?;
                let view = self.plain_expr()?;
                self.expect_punct(Punct::Comma)?;
                MmaKind::Scale { frag, view, value: self.plain_expr()? }
            }
            TokenKind::Punct(Punct::Dot) => {
                let what = match self.nth(1) {
                    TokenKind::Ident(word) if &**word == "desc" => Some("mma.desc"),
                    TokenKind::Keyword(Keyword::Wait) => Some("mma.wait<…>"),
                    _ => None,
                };
                match what {
                    Some(what) => {
                        self.bump();
                        let end = self.bump().span;
                        return Err(self.removed_syntax(start.to(end), what));
                    }
                    None => return Err(self.unexpected("an MMA operation")),
                }
            }
            _ => return Err(self.unexpected("an MMA operation")),
        };
        if let Some(attr) = &schedule {
            if !matches!(kind, MmaKind::Exec { .. }) {
                let span = attr.span;
                return Err(self.fail(
                    "E0326",
                    span,
                    "[[schedule(k_tiles(...))]] only applies to an MMA execution statement",
                    "not an MMA execution statement",
                ));
            }
        }
        Ok(StmtKind::Mma(Box::new(MmaStmt { schedule, kind })))
    }

    fn no_future(&mut self, future: &Option<Ident>, op_span: Span) -> PResult<()> {
        match future {
            Some(name) => Err(self.fail(
                "E0301",
                name.span.to(op_span),
                "syntax error, this MMA operation does not produce a value to assign",
                "this operation produces no value",
            )),
            None => Ok(()),
        }
    }

    /// `mma.<layout>[.async|.sp[.async]|.scale] acc, a, b[, …]`.
    fn mma_exec(&mut self, future: Option<Ident>) -> PResult<MmaKind> {
        let start = self.span();
        let first = self.bump();
        let first_row = first.kind.is_dotted(Dotted::Row);
        let layout = match (first_row, self.kind()) {
            (true, TokenKind::Dotted(Dotted::Col)) => MmaLayout::RowCol,
            (true, TokenKind::Dotted(Dotted::Row)) => MmaLayout::RowRow,
            (false, TokenKind::Dotted(Dotted::Col)) => MmaLayout::ColCol,
            (false, TokenKind::Dotted(Dotted::Row)) => MmaLayout::ColRow,
            _ => return Err(self.unexpected("'.row' or '.col'")),
        };
        self.bump();
        if self.at_punct(Punct::Dot) {
            if let TokenKind::Ident(word) = self.nth(1) {
                if &**word == "order" {
                    self.bump();
                    let end = self.bump().span;
                    return Err(self.removed_syntax(start.to(end), "mma.<layout>.order<…>"));
                }
            }
        }
        let variant_span = self.span();
        enum V {
            Plain,
            Async(Span),
            Sparse(Option<Span>),
            Scale,
        }
        let v = match self.kind() {
            TokenKind::Dotted(Dotted::Async) => V::Async(self.bump().span),
            TokenKind::Dotted(Dotted::Sp) => {
                self.bump();
                V::Sparse(self.eat_dotted(Dotted::Async))
            }
            TokenKind::Dotted(Dotted::Scale) => {
                self.bump();
                V::Scale
            }
            _ => V::Plain,
        };
        if let (V::Async(span) | V::Sparse(Some(span)), None) = (&v, &future) {
            let span = *span;
            return Err(self.fail(
                "E0334",
                span,
                "an asynchronous MMA must be bound to a named future (`q = mma.row.col.async …;`)",
                "asynchronous MMA without a future name",
            ));
        }
        let acc = self.plain_expr()?;
        self.expect_punct(Punct::Comma)?;
        let a = self.plain_expr()?;
        self.expect_punct(Punct::Comma)?;
        let b = self.plain_expr()?;
        let variant = match v {
            V::Plain => MmaExecVariant::Plain,
            V::Async(span) => MmaExecVariant::Async(span),
            V::Sparse(is_async) => {
                let metadata = if self.eat_punct(Punct::Comma).is_some() {
                    Some(self.plain_expr()?)
                } else {
                    None
                };
                MmaExecVariant::Sparse { span: variant_span, is_async, metadata }
            }
            V::Scale => {
                self.expect_punct(Punct::Comma)?;
                let view = self.plain_expr()?;
                self.expect_punct(Punct::Comma)?;
                let value = self.plain_expr()?;
                MmaExecVariant::Scale { span: variant_span, view, value }
            }
        };
        Ok(MmaKind::Exec { future, layout, variant, acc, a, b })
    }
}
