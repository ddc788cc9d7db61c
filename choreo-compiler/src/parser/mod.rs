//! The tileflow parser (spec §4): hand-written recursive descent over the [`Token`]s of one
//! `__co__` function, producing an [`ast::CoFunction`].
//!
//! The parser accepts the whole grammar of spec §4–§20 (tiers 1–3); constructs whose code
//! generation comes later are still parsed so later stages can report "not supported yet" at
//! their span. It never panics on user input and always terminates: every loop iteration
//! consumes a token or exits, and recursion is bounded by [`MAX_DEPTH`] (expressions and
//! blocks counted together), beyond which a located error is reported. Chains that loops
//! build (`a + b + …`, `x.at(i).at(j)…`, `x[1][2]…`) count one level per link, so the depth of
//! every tree the parser returns is bounded too, and later passes may walk it recursively.
//!
//! # Error recovery
//!
//! A syntax error inside a statement is reported once and the statement is abandoned: the
//! parser skips to the `;` that ends it (or past the `{ … }` block that ends it, or to the `}`
//! of the enclosing block), taking the brackets that were open at the error into account, then
//! continues with the next statement. Nothing is reported while skipping, so one mistake gives
//! one error; a file with several independent mistakes reports each of them. The single
//! statement body of `if`/`while`/… recovers on its own, so a broken `then` statement does not
//! turn the following `else` into a second error, and the `else` of a broken `if` is skipped
//! with it. An unexpected end of input is reported once, and not at all when the preprocessor
//! reported the function as unterminated (E0114). A syntax error at, or right after, a token an
//! earlier stage already reported (a lexer error token, an unterminated string, a macro
//! invocation the preprocessor could not expand) is not reported again.
//!
//! The parser runs on a helper thread with a large stack ([`parse_co_function`]; one thread for
//! all functions of a file in [`crate::frontend::parse_file`]), so [`MAX_DEPTH`] levels of
//! nesting are safe even for callers on small (test) thread stacks.
//!
//! # Syntactic rejection rules
//!
//! The rules of spec §4.3–§4.8 and the syntactic rules of §21 that the parser enforces; all
//! other §21 rules need names, types or levels and belong to semantic analysis.
//!
//! | code  | rule (message) | spec |
//! |-------|----------------|------|
//! | E0301 | generic syntax error: "syntax error, unexpected X" (label: what was expected). Covers missing commas in tuple/shape lists (`{7 a}`, `[7 a]`), empty `[]`/`{}`, `.5` / `5.` (no such float forms; a help says how to write them), a dimension selection `x(e)` whose index is not `NUM`, `-NUM` or a name, `|…|` contents outside the `size_expr` grammar, `x++;` or `n + 1;` as statements, compound assignments other than `+= -= *= /= %=`, `ituple[2] t`, `mdspan[3, 4] m` (rank must be `<N>`), `ituple<a>`/`mdspan<a>`/`event<a>` (rank must be a literal), `parallel [p] by 6`, a tuple binder whose bound is not a bracketed list (`{x, y} by sh`), C array parameters `f32 d[]`, `long double`, `x(::2)` (`::` is one token), `f32 [[a, b]]` (`[[` is one token), `x . at(…)` (dotted keywords are one token), intrinsic calls outside their registration (`foo::bar(…)`), missing `;`, unbalanced brackets, unexpected end of input, tokens after the function body | §2.2, §4, §21 |
//! | E0302 | nesting deeper than [`MAX_DEPTH`] (expressions, blocks and chain links together) | — |
//! | E0303 | "must use ':' to initialize a mdspan." (`mdspan x = …`) | §4.3 |
//! | E0304 | "must use '=' to initialize an ituple." (`ituple x : …`) | §4.3 |
//! | E0305 | "an ituple must be initialized." (`ituple x;`) | §4.3 |
//! | E0306 | "no ituple array is allowed." (`ituple x[2] = …`) | §4.3 |
//! | E0307 | "must use '{' and '}' to define an ituple." (`x = [ … ]`) | §4.3 |
//! | E0308 | `mutable` on an mdspan or spanned declaration (`mutable f32 [4] a;`) | §4.3 |
//! | E0309 | "'else' without a previous 'if'." | §4.2 |
//! | E0310 | "The parallel variable 'p' has been used in the same parallelby block." | §4.7 |
//! | E0311 | "The parallel variable 'p' can not be assigned multiple bounds." (`p by [5, b]`) | §4.7 |
//! | E0312 | "the shared data can not be used as a parameter." (`shared`/`local` parameters) | §4.1, §7.2 |
//! | E0313 | "must use '\[a\]\[2\]...' for multi-dimensional array access" (`a[i, j]` outside a shape list) | §4.5 |
//! | E0314 | `a[i][j]` inside a shape list (there `a[…]` is an mdspan derivation) | §4.5 |
//! | E0315 | "Builtin function 'swap' accept exact two parameters." | §14.3, §21 |
//! | E0316 | "Builtin function 'rotate' accept two or more parameters." | §14.3, §21 |
//! | E0317 | "swizzle value must be 128, 64, or 32" | §4.6, §21 |
//! | E0318 | "L2 promote size must be 64, 128, or 256" | §4.6, §21 |
//! | E0319 | "'.load' is a TMA-only operation." (`dma.load`) | §20.2, §21 |
//! | E0320 | "TMA L2 eviction modifiers are only valid on 'tma.load'." | §20.2, §21 |
//! | E0321 | "TMA eviction modifier must precede '.swiz'." | §20.2, §21 |
//! | E0322 | "only one TMA eviction modifier is allowed." | §20.2, §21 |
//! | E0323 | "event initializer must be 'ready'" | §4.3, §21 |
//! | E0324 | "only 'cluster' scope is supported for trigger." | §4.6, §21 |
//! | E0325 | "parameterized level annotation is only valid for 'device'." (`: block(x)`) | §4.7, §21 |
//! | E0326 | "[[schedule(k_tiles(...))]] only applies to an MMA execution statement" | §4.6, §21 |
//! | E0327 | "__asm__ goto is not supported." | §4.8, §21 |
//! | E0328 | "invalid __asm__ syntax." (e.g. a fifth colon section) | §4.8, §21 |
//! | E0329 | removed syntax: `mma.desc`, `mma.wait<…>`, `mma.<layout>.order<…>`, `wait<0> e`, `tma.store`, `tma.copy.async<e>` (`stage<N>(…)` is E0206 in the lexer) | §20.3, §21 |
//! | E0330 | "unroll factor must be a positive integer" (`unroll(0)`) | §9.1, §21 |
//! | E0331 | a `call` (or intrinsic, atomic, `__lib_*`, `__bar_*` call) inside an expression (`x = call f() + 1`) | §17.1, §21 |
//! | E0332 | a parameter/return dimension that is not a name, `?`, `??` or a constant integer expression (`M + 1`, `-5`) | §4.1, §7.2, §21 |
//! | E0333 | a `with`/`foreach` bound written as `|…|` (`with b in |ss.span|`) | §4.5, §21 |
//! | E0334 | an `.async` MMA without a future name (`mma.row.col.async acc, a, b;`) | §4.6 |
//! | E0335 | `[[launch_bounds]]` / `[[maxnreg]]` not followed by a `parallel` | §4.7 |
//! | E0336 | unknown attribute `[[x(…)]]` | §4.7 |
//! | E0337 | "TMA eviction modifiers cannot be combined with '.multicast'." | §20.2 |
//! | E0338 | a DMA, MMA or placeholder (`dma.any`) assignment inside an assignment list, or `dma.any` without a name | §4.6 |
//!
//! Codes E0301–E0338 are reported here; E02xx come from the lexer, E01xx from the preprocessor.
//!
//! Not syntactic (left to semantic analysis, although some look local): every rule of the §21
//! groups "Declarations and types", "Parameters and returns" (except `shared`/`local`
//! parameters and the dimension grammar above), "Parallel-by" (except E0310/E0311), "Control
//! flow" (except E0330/E0333), "Storage", "Views and DMA" (including an unnamed `.async` DMA,
//! `.sqz` placement and `.at` on futures), "Calls and builtins", "Tier 3" and static
//! assertions; also `return` of a view (a syntax error upstream, accepted here and left to
//! sema with the other unsupported return values), `int x;` without initialiser, string
//! variables, and the arity of math built-ins (the parser accepts 1–3 arguments).

mod call;
mod decl;
mod dma_mma;
mod expr;
mod parallel;
mod stmt;

use crate::ast::{self, Block, Ident, Stmt};
use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::source::{FileId, Span};
use crate::token::{Dotted, Keyword, Punct, Token, TokenKind};

/// Maximum nesting of expressions and blocks (combined) before the parser reports E0302 instead
/// of recursing further.
pub const MAX_DEPTH: u32 = 256;

/// Stack size of the thread the parser runs on. Recursive descent to [`MAX_DEPTH`] needs a few
/// MiB in unoptimised builds (about 30 KiB per nesting level), more than the 2 MiB of a test
/// thread; the reservation is virtual memory, touched only as deep as the input nests.
const PARSER_STACK_BYTES: usize = 64 << 20;

/// Parses the tokens of one `__co__` function (as produced by [`crate::lexer::lex`], ending with
/// [`TokenKind::Eof`]). Errors go to `diags`. Returns `None` when the function header is too
/// broken to build a [`ast::CoFunction`]; its body is still parsed to report errors in it.
///
/// The parser runs on a scoped helper thread with a large stack (see [`MAX_DEPTH`]), so callers
/// on small stacks are safe; if the thread cannot be created it runs on the calling thread.
/// Each call starts its own thread: to parse many functions, use
/// [`crate::frontend::parse_preprocessed`] (or [`crate::frontend::parse_file`]), which parses
/// all functions of a file on one thread.
pub fn parse_co_function(tokens: &[Token], diags: &mut Diagnostics) -> Option<ast::CoFunction> {
    on_parser_stack(|| parse_tokens(tokens, diags))
}

/// Runs `work` once, on a scoped helper thread with a [`PARSER_STACK_BYTES`] stack, and returns
/// its result; a panic in `work` resumes on the calling thread. If the thread cannot be
/// created, `work` runs on the calling thread instead.
///
/// Every call of [`parse_tokens`] must happen inside `work` (directly or through callees), so
/// that [`MAX_DEPTH`] levels of nesting never meet a small caller stack. Starting a thread costs
/// far more than parsing a typical function, so callers run as much as they can (a whole file)
/// in one `work`.
pub(crate) fn on_parser_stack<R: Send>(mut work: impl FnMut() -> R + Send) -> R {
    #[cfg(test)]
    PARSER_THREADS_REQUESTED.with(|count| count.set(count.get() + 1));
    let outcome = std::thread::scope(|scope| {
        let builder =
            std::thread::Builder::new().name("choreo-parser".into()).stack_size(PARSER_STACK_BYTES);
        // The thread only borrows `work`, so it is still here when the spawn fails.
        match builder.spawn_scoped(scope, &mut work) {
            Ok(handle) => Some(handle.join()),
            Err(_) => None,
        }
    });
    match outcome {
        Some(Ok(result)) => result,
        Some(Err(panic)) => std::panic::resume_unwind(panic),
        None => work(),
    }
}

#[cfg(test)]
thread_local! {
    /// How many times [`on_parser_stack`] was called on this thread, so tests can check that a
    /// whole file is parsed on one helper thread. Thread-local, so tests running in parallel do
    /// not see each other's calls.
    pub(crate) static PARSER_THREADS_REQUESTED: std::cell::Cell<usize> =
        const { std::cell::Cell::new(0) };
}

/// [`parse_co_function`] on the calling thread, which must have a large stack: call it only
/// inside [`on_parser_stack`].
pub(crate) fn parse_tokens(tokens: &[Token], diags: &mut Diagnostics) -> Option<ast::CoFunction> {
    let owned;
    let tokens = if tokens.last().is_some_and(|t| t.kind == TokenKind::Eof) {
        tokens
    } else {
        // Defensive: the lexer always ends with Eof, but a caller-built list may not.
        let end = tokens
            .last()
            .map_or(Span::point(FileId(0), 0), |t| Span::point(t.span.file, t.span.end as usize));
        let mut v = tokens.to_vec();
        v.push(Token { kind: TokenKind::Eof, span: end });
        owned = v;
        &owned
    };
    let mut parser = Parser::new(tokens, diags);
    parser.co_function_item()
}

/// Marker: an error was reported (or deliberately suppressed); the caller unwinds to the next
/// recovery point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reported;

/// Result of a parsing function.
pub(crate) type PResult<T> = Result<T, Reported>;

/// The parser state over one token list.
pub(crate) struct Parser<'t, 'd> {
    tokens: &'t [Token],
    pos: usize,
    diags: &'d mut Diagnostics,
    /// Current nesting of expressions and blocks.
    depth: u32,
    /// The deepest nesting reached since [`Parser::measured`] last reset it (chains of
    /// left-nested nodes included); bounds the depth of the tree built meanwhile.
    high: u32,
    /// Span of the last consumed token (for node spans).
    last_span: Span,
    /// Whether an "unexpected end of input" error was reported already.
    eof_reported: bool,
    /// Whether the expression being parsed is an item of a shape list (`T [ … ]`, `[ … ]`,
    /// `span_as(…)`, an mdspan declaration), where `a[i]` is an mdspan derivation (spec §4.5).
    shape_ctx: bool,
}

impl<'t, 'd> Parser<'t, 'd> {
    /// A parser over `tokens`, which must be non-empty and end with [`TokenKind::Eof`].
    fn new(tokens: &'t [Token], diags: &'d mut Diagnostics) -> Parser<'t, 'd> {
        let first = tokens.first().map_or(Span::point(FileId(0), 0), |t| t.span);
        Parser {
            tokens,
            pos: 0,
            diags,
            depth: 0,
            high: 0,
            last_span: Span::point(first.file, first.start as usize),
            eof_reported: false,
            shape_ctx: false,
        }
    }

    // ---------------------------------------------------------------------------------------
    // Token access
    // ---------------------------------------------------------------------------------------

    /// The current token (the final Eof token once the end is reached).
    fn tok(&self) -> &'t Token {
        let tokens: &'t [Token] = self.tokens;
        let last = tokens.len().saturating_sub(1);
        &tokens[self.pos.min(last)]
    }

    /// The kind of the current token.
    fn kind(&self) -> &'t TokenKind {
        &self.tok().kind
    }

    /// The kind of the token `n` places ahead (0 = current).
    fn nth(&self, n: usize) -> &'t TokenKind {
        let tokens: &'t [Token] = self.tokens;
        let last = tokens.len().saturating_sub(1);
        &tokens[self.pos.saturating_add(n).min(last)].kind
    }

    /// The span of the current token.
    fn span(&self) -> Span {
        self.tok().span
    }

    /// Whether the end of input is reached.
    fn at_eof(&self) -> bool {
        matches!(self.kind(), TokenKind::Eof)
    }

    /// Consumes the current token (never moves past Eof) and returns it.
    fn bump(&mut self) -> &'t Token {
        let tok = self.tok();
        if !matches!(tok.kind, TokenKind::Eof) {
            self.pos += 1;
            self.last_span = tok.span;
        }
        tok
    }

    /// The span from `start` through the last consumed token.
    fn since(&self, start: Span) -> Span {
        if self.last_span.start < start.start { start } else { start.to(self.last_span) }
    }

    fn at_punct(&self, p: Punct) -> bool {
        self.kind().is_punct(p)
    }

    fn at_kw(&self, k: Keyword) -> bool {
        self.kind().is_keyword(k)
    }

    fn at_dotted(&self, d: Dotted) -> bool {
        self.kind().is_dotted(d)
    }

    fn eat_punct(&mut self, p: Punct) -> Option<Span> {
        if self.at_punct(p) { Some(self.bump().span) } else { None }
    }

    fn eat_kw(&mut self, k: Keyword) -> Option<Span> {
        if self.at_kw(k) { Some(self.bump().span) } else { None }
    }

    fn eat_dotted(&mut self, d: Dotted) -> Option<Span> {
        if self.at_dotted(d) { Some(self.bump().span) } else { None }
    }

    fn expect_punct(&mut self, p: Punct) -> PResult<Span> {
        match self.eat_punct(p) {
            Some(span) => Ok(span),
            None if p == Punct::Semi => Err(self.missing_semicolon()),
            None => Err(self.unexpected(&format!("'{}'", p.as_str()))),
        }
    }

    /// A `;` is missing: reported where it belongs, right after the previous token (often on
    /// the line before), with the token that was found instead as a secondary label. Falls
    /// back to [`Parser::unexpected`] at the end of input, after errors already reported, at a
    /// `.` that has its own advice (`5.`), and when the previous token is not just before the
    /// current one in the same file (macro expansions).
    fn missing_semicolon(&mut self) -> Reported {
        let tok = self.tok();
        let previous = self.pos.checked_sub(1).and_then(|i| self.tokens.get(i));
        let Some(prev) = previous else { return self.unexpected("';'") };
        if matches!(tok.kind, TokenKind::Eof | TokenKind::Error)
            || self.already_reported_at(tok.span)
            || self.already_reported_at(prev.span)
            || prev.span.file != tok.span.file
            || prev.span.end > tok.span.start
            || self.dot_help(previous).is_some()
        {
            return self.unexpected("';'");
        }
        let at = Span::point(prev.span.file, prev.span.end as usize);
        self.report(
            Diagnostic::error("E0301", at, "syntax error, missing ';'")
                .with_label("expected ';' here")
                .with_secondary(tok.span, format!("unexpected {}", tok.kind)),
        );
        Reported
    }

    fn expect_kw(&mut self, k: Keyword) -> PResult<Span> {
        match self.eat_kw(k) {
            Some(span) => Ok(span),
            None => Err(self.unexpected(&format!("'{}'", k.as_str()))),
        }
    }

    fn expect_dotted(&mut self, d: Dotted) -> PResult<Span> {
        match self.eat_dotted(d) {
            Some(span) => Ok(span),
            None => Err(self.unexpected(&format!("'{}'", d.as_str()))),
        }
    }

    /// An ordinary identifier (not `_`-checked: binders named `_` are sema's business).
    fn expect_ident(&mut self, what: &str) -> PResult<Ident> {
        match self.kind() {
            TokenKind::Ident(name) => {
                let span = self.bump().span;
                Ok(Ident { name: name.to_string(), span })
            }
            _ => Err(self.unexpected(what)),
        }
    }

    /// The current token as an identifier, if it is one.
    fn eat_ident(&mut self) -> Option<Ident> {
        match self.kind() {
            TokenKind::Ident(name) => {
                let span = self.bump().span;
                Some(Ident { name: name.to_string(), span })
            }
            _ => None,
        }
    }

    /// A non-negative integer literal that fits in `u64`.
    fn expect_u64(&mut self, what: &str) -> PResult<(u64, Span)> {
        match self.kind() {
            TokenKind::Int(lit) => {
                let span = self.bump().span;
                Ok((u64::try_from(lit.value).unwrap_or(u64::MAX), span))
            }
            _ => Err(self.unexpected(what)),
        }
    }

    // ---------------------------------------------------------------------------------------
    // Diagnostics
    // ---------------------------------------------------------------------------------------

    /// Reports a diagnostic without unwinding.
    fn report(&mut self, diagnostic: Diagnostic) {
        self.diags.push(diagnostic);
    }

    /// Reports an error with a dedicated code at `span`, its label saying what is wrong there,
    /// and returns the marker to unwind with.
    fn fail(
        &mut self,
        code: &'static str,
        span: Span,
        message: impl Into<String>,
        label: impl Into<String>,
    ) -> Reported {
        self.report(Diagnostic::error(code, span, message).with_label(label));
        Reported
    }

    /// Reports "syntax error, unexpected X" at the current token, labelled with what was
    /// expected. Silent when the error is a consequence of one already reported: at a lexer
    /// error token, at or right after a token an earlier stage reported (an unterminated
    /// string, a macro the preprocessor could not expand), and for a second unexpected end of
    /// input or one the preprocessor reported as an unterminated function (E0114).
    fn unexpected(&mut self, expected: &str) -> Reported {
        let tok = self.tok();
        let previous = self.pos.checked_sub(1).and_then(|i| self.tokens.get(i));
        if self.already_reported_at(tok.span)
            || previous.is_some_and(|p| self.already_reported_at(p.span))
        {
            return Reported;
        }
        match &tok.kind {
            TokenKind::Error => {}
            TokenKind::Eof => {
                // The preprocessor reports a function whose `{` is never closed at its
                // `__co__` keyword.
                let function_start = self.tokens.first().map(|t| t.span);
                let unterminated = self
                    .diags
                    .as_slice()
                    .iter()
                    .any(|d| d.code == "E0114" && Some(d.primary.span) == function_start);
                if !self.eof_reported && !unterminated {
                    self.eof_reported = true;
                    self.report(
                        Diagnostic::error(
                            "E0301",
                            tok.span,
                            "syntax error, unexpected end of input",
                        )
                        .with_label(format!("expected {expected}")),
                    );
                }
            }
            kind => {
                let mut d = Diagnostic::error(
                    "E0301",
                    tok.span,
                    format!("syntax error, unexpected {kind}"),
                )
                .with_label(format!("expected {expected}"));
                if let Some(help) = self.dot_help(previous) {
                    d = d.with_help(help);
                }
                self.report(d);
            }
        }
        Reported
    }

    /// Advice for an unexpected `.`: dotted keywords written with a space, and the `.5` / `5.`
    /// forms that are not floating literals (spec §2.2).
    fn dot_help(&self, previous: Option<&Token>) -> Option<String> {
        let tok = self.tok();
        if !tok.kind.is_punct(Punct::Dot) {
            return None;
        }
        let next = self.tokens.get(self.pos + 1);
        match next.map(|t| &t.kind) {
            Some(TokenKind::Ident(name)) if Dotted::lookup(&format!(".{name}")).is_some() => {
                return Some(format!(
                    "'.{name}' is a single token: write it without spaces after the '.'"
                ));
            }
            Some(TokenKind::Int(lit)) if next.is_some_and(|n| n.span.start == tok.span.end) => {
                return Some(format!(
                    "a floating literal needs a digit before the '.': write '0.{}'",
                    lit.value
                ));
            }
            _ => {}
        }
        match previous.map(|p| (&p.kind, p.span)) {
            Some((TokenKind::Int(lit), span)) if span.end == tok.span.start => Some(format!(
                "a floating literal needs a digit after the '.': write '{}.0'",
                lit.value
            )),
            _ => None,
        }
    }

    /// Whether an earlier stage (or an earlier parser error) already reported an error whose
    /// primary span overlaps `span`. One location gets one error.
    fn already_reported_at(&self, span: Span) -> bool {
        let diags = self.diags.as_slice();
        let recent = &diags[diags.len().saturating_sub(64)..];
        // Empty spans count as one byte wide.
        let (start, end) = (span.start, span.end.max(span.start.saturating_add(1)));
        recent.iter().any(|d| {
            let reported = d.primary.span;
            let reported_end = reported.end.max(reported.start.saturating_add(1));
            d.is_error()
                && reported.file == span.file
                && reported.start < end
                && start < reported_end
        })
    }

    // ---------------------------------------------------------------------------------------
    // Nesting limit
    // ---------------------------------------------------------------------------------------

    /// Runs `f` one nesting level deeper; reports E0302 instead when the limit is reached.
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<T> {
        if self.depth >= MAX_DEPTH {
            return Err(self.too_deep());
        }
        self.depth += 1;
        self.high = self.high.max(self.depth);
        let result = f(self);
        self.depth -= 1;
        result
    }

    /// Runs `f` and returns its result with the nesting it reached below the current level:
    /// an upper bound on the depth of the tree `f` built (up to the constant factor of nodes
    /// that wrap a child without a nesting level of their own).
    fn measured<T>(&mut self, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<(T, u32)> {
        let saved = std::mem::replace(&mut self.high, self.depth);
        let result = f(self);
        let reached = self.high.saturating_sub(self.depth);
        self.high = self.high.max(saved);
        result.map(|value| (value, reached))
    }

    /// Accounts for one node of a chain that a loop builds (`a + b + c`, `x.at(i).at(j)`,
    /// `x[1][2]`) on top of parts `below` levels deep (the previous link or the new operand,
    /// from [`Parser::measured`]); returns the new node's depth. Such a chain nests like
    /// recursion for every later pass that walks the tree (dump, sema, dropping it), so it is
    /// bounded by [`MAX_DEPTH`] as well: E0302 beyond.
    fn chain_link(&mut self, below: u32) -> PResult<u32> {
        let depth = below + 1;
        if self.depth + depth > MAX_DEPTH {
            return Err(self.too_deep());
        }
        self.high = self.high.max(self.depth + depth);
        Ok(depth)
    }

    /// Parses a left-associative chain `next (op next)*` where `op` is one of `ops`, each link
    /// counted by [`Parser::chain_link`]. Used by the restricted expression grammars (constant
    /// parameter dimensions, template arguments, `|…|` sizes); full expressions use the
    /// precedence climber in `expr.rs`.
    fn binary_chain(
        &mut self,
        ops: &[(Punct, crate::ast::BinaryOp)],
        mut next: impl FnMut(&mut Self) -> PResult<crate::ast::Expr>,
    ) -> PResult<crate::ast::Expr> {
        let (mut lhs, mut depth) = self.measured(&mut next)?;
        while let Some(&(_, op)) = ops.iter().find(|(p, _)| self.at_punct(*p)) {
            self.bump();
            let (rhs, rhs_depth) = self.measured(&mut next)?;
            depth = self.chain_link(depth.max(rhs_depth))?;
            let span = lhs.span.to(rhs.span);
            lhs = crate::ast::Expr {
                span,
                kind: crate::ast::ExprKind::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) },
            };
        }
        Ok(lhs)
    }

    /// Reports E0302 at the current token, unless that token comes from text an earlier stage
    /// reported (a macro expansion that was cut off at its size limit, E0120).
    fn too_deep(&mut self) -> Reported {
        let span = self.span();
        if self.already_reported_at(span) {
            return Reported;
        }
        self.report(
            Diagnostic::error(
                "E0302",
                span,
                format!("nesting too deep (more than {MAX_DEPTH} nested expressions or blocks)"),
            )
            .with_label("the limit is reached here")
            .with_note(
                "every nested bracket or block counts one level, and so does every link of a \
                 chain of operators (`a + b + …`) or member operations (`x.at(i).at(j)…`)",
            ),
        );
        Reported
    }

    // ---------------------------------------------------------------------------------------
    // Recovery
    // ---------------------------------------------------------------------------------------

    /// Skips the rest of a statement that started at token index `start` after an error (see
    /// the module documentation). Always makes progress unless at the end of input or at the
    /// `}` that closes the enclosing block.
    fn recover(&mut self, start: usize) {
        // Brackets open between the statement's start and the error (marked `true`), then
        // those opened while skipping (`false`).
        let mut open: Vec<(Punct, bool)> = Vec::new();
        let end = self.pos.min(self.tokens.len());
        for tok in self.tokens.get(start.min(end)..end).unwrap_or(&[]) {
            track_bracket(&mut open, &tok.kind, true);
        }
        let has_brace = |open: &[(Punct, bool)]| open.iter().any(|(p, _)| *p == Punct::LBrace);
        let first = self.pos;
        loop {
            let kind = self.kind();
            match kind {
                TokenKind::Eof => break,
                TokenKind::Punct(Punct::Semi) => {
                    self.bump();
                    if !has_brace(&open) {
                        break;
                    }
                }
                TokenKind::Punct(Punct::RBrace) => {
                    if !has_brace(&open) {
                        // Closes the enclosing block: leave it to the block.
                        break;
                    }
                    self.bump();
                    let closed_skipped = track_bracket(&mut open, kind, false) == Some(false);
                    if closed_skipped && !has_brace(&open) && !self.at_kw(Keyword::Else) {
                        // The statement ended with a `{ … }` body (an `else` continues it).
                        break;
                    }
                }
                TokenKind::Keyword(k)
                    if open.is_empty() && self.pos > first && starts_statement(*k) =>
                {
                    break;
                }
                _ => {
                    self.bump();
                    track_bracket(&mut open, kind, false);
                }
            }
        }
        if self.pos == start && !self.at_eof() && !self.at_punct(Punct::RBrace) {
            self.bump();
        }
    }

    // ---------------------------------------------------------------------------------------
    // Function and blocks
    // ---------------------------------------------------------------------------------------

    /// `__co__ ret name(params) { body }` followed by the end of input.
    fn co_function_item(&mut self) -> Option<ast::CoFunction> {
        let function = match self.co_function() {
            Ok(f) => Some(f),
            Err(Reported) => {
                // Skip to the body and parse it anyway, to report the errors inside it.
                while !self.at_eof() && !self.at_punct(Punct::LBrace) {
                    self.bump();
                }
                if self.at_punct(Punct::LBrace) {
                    let _ = self.block();
                }
                None
            }
        };
        if !self.at_eof() {
            let _ = self.unexpected("end of the function");
        }
        function
    }

    /// A braced block `{ statement* }`.
    fn block(&mut self) -> PResult<Block> {
        self.nested(|p| {
            let open = p.expect_punct(Punct::LBrace)?;
            let stmts = p.statements();
            if p.eat_punct(Punct::RBrace).is_none() {
                // Only reachable at the end of input: report it (once) but keep the block.
                let _ = p.unexpected("'}'");
            }
            Ok(Block { span: p.since(open), stmts, braced: true })
        })
    }

    /// Statements up to (not including) a `}` or the end of input, recovering from errors.
    fn statements(&mut self) -> Vec<Stmt> {
        let mut stmts = Vec::new();
        while !self.at_eof() && !self.at_punct(Punct::RBrace) {
            let start = self.pos;
            match self.statement() {
                Ok(stmt) => stmts.push(stmt),
                Err(Reported) => self.recover(start),
            }
        }
        stmts
    }

    /// A `body` (spec §4.2): a braced block, or one statement (possibly `;`). A broken single
    /// statement is recovered here and yields an empty body.
    fn body(&mut self) -> PResult<Block> {
        if self.at_punct(Punct::LBrace) {
            return self.block();
        }
        self.nested(|p| {
            let start = p.pos;
            let start_span = p.span();
            match p.statement() {
                Ok(stmt) => Ok(Block { span: stmt.span, stmts: vec![stmt], braced: false }),
                Err(Reported) => {
                    p.recover(start);
                    Ok(Block { span: p.since(start_span), stmts: Vec::new(), braced: false })
                }
            }
        })
    }
}

/// Updates the stack of open brackets for one token: an opener is pushed with `mark`; a
/// closing bracket pops through its opener (a stray closer is ignored) and returns the mark of
/// the opener it closed.
fn track_bracket(open: &mut Vec<(Punct, bool)>, kind: &TokenKind, mark: bool) -> Option<bool> {
    let TokenKind::Punct(p) = kind else { return None };
    let opener = match p {
        Punct::LParen | Punct::LBracket | Punct::LBrace => {
            open.push((*p, mark));
            return None;
        }
        Punct::AttrOpen => {
            open.push((Punct::LBracket, mark));
            open.push((Punct::LBracket, mark));
            return None;
        }
        Punct::RParen => Punct::LParen,
        Punct::RBracket => Punct::LBracket,
        Punct::RBrace => Punct::LBrace,
        _ => return None,
    };
    let i = open.iter().rposition(|(q, _)| *q == opener)?;
    let closed = open.get(i).map(|(_, mark)| *mark);
    open.truncate(i);
    closed
}

/// Keywords that can only start a statement: recovery stops before them.
fn starts_statement(k: Keyword) -> bool {
    matches!(
        k,
        Keyword::Parallel
            | Keyword::If
            | Keyword::While
            | Keyword::Foreach
            | Keyword::With
            | Keyword::Inthreads
            | Keyword::Return
            | Keyword::Break
            | Keyword::Continue
    )
}
