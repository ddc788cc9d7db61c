//! The tileflow lexer (spec §2.2): turns the preprocessed text of one `__co__` function into
//! [`Token`]s whose spans point at the user's original text.
//!
//! Hand-written, one pass, linear time. It never fails: bad input produces a located diagnostic
//! and either a best-effort token (an out-of-range literal keeps its clamped value, an
//! unterminated string its text so far) or a [`TokenKind::Error`] token (bad characters,
//! character literals), which the parser treats as an already-reported syntax error. The token
//! list always ends with [`TokenKind::Eof`].
//!
//! Error codes:
//! - `E0201` unexpected character(s)
//! - `E0202` unterminated string literal (also raw strings)
//! - `E0203` unterminated block comment
//! - `E0204` integer literal out of range (signed or unsigned, spec wording)
//! - `E0205` malformed numeric literal (bad suffix, leading zero, exponent form)
//! - `E0206` removed syntax `stage<N>(…)`
//! - `E0207` invalid raw-string delimiter
//! - `E0208` unknown `__atomic_*` built-in
//!
//! Notes on the ⚠ points of §2.2: `-` is always an operator (the parser makes negative
//! literals), `group-4` is one token, `::` and `[[` are single tokens, compound assignments
//! `+=` … `%=` are single tokens.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::preprocess::{Expanded, Preprocessed, Segment};
use crate::source::Span;
use crate::token::{
    AtomicOp, Dotted, ElemType, FloatLit, IntLit, IntLitType, Keyword, MathFn, Punct, StrLit,
    Token, TokenKind,
};

/// Names that lex as intrinsic identifiers (spec §17.2): registered prefixes and namespaces.
/// `croq` is always an intrinsic namespace (it is reserved for built-ins such as
/// `croq::cuda::setreg_inc`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntrinsicNames {
    /// An identifier starting with one of these is an intrinsic.
    pub prefixes: Vec<String>,
    /// An identifier equal to one of these (used as `ns::name`) is an intrinsic.
    pub namespaces: Vec<String>,
}

impl IntrinsicNames {
    /// The file-scope registrations recorded by the preprocessor.
    pub fn from_preprocessed(pre: &Preprocessed) -> IntrinsicNames {
        IntrinsicNames {
            prefixes: pre.intrinsic_prefixes.clone(),
            namespaces: pre.intrinsic_namespaces.clone(),
        }
    }
}

/// An [`Expanded`] text that is the verbatim copy of `text`, which starts at `origin.start` of
/// `origin.file`. Useful to lex text that did not go through the preprocessor (tests, tools).
pub fn expanded_verbatim(origin: Span, text: &str) -> Expanded {
    Expanded {
        text: text.to_string(),
        segments: vec![Segment { out_start: 0, origin, verbatim: true }],
    }
}

/// Lexes one preprocessed tileflow text. Errors go to `diags`; the result always ends with an
/// [`TokenKind::Eof`] token.
pub fn lex(text: &Expanded, intrinsics: &IntrinsicNames, diags: &mut Diagnostics) -> Vec<Token> {
    let mut lexer = Lexer {
        src: &text.text,
        bytes: text.text.as_bytes(),
        pos: 0,
        expanded: text,
        intrinsics,
        scoped: Vec::new(),
        depth: 0,
        tokens: Vec::with_capacity(text.text.len() / 3 + 1),
        diags,
        bad_char_errors: 0,
    };
    lexer.run();
    lexer.tokens
}

/// An intrinsic registered by a `__pragma_croq_intrinsic_*("…")` statement inside the
/// function; it lives until the block it was registered in closes.
struct ScopedIntrinsic {
    depth: usize,
    namespace: bool,
    name: String,
}

struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    expanded: &'a Expanded,
    intrinsics: &'a IntrinsicNames,
    scoped: Vec<ScopedIntrinsic>,
    depth: usize,
    tokens: Vec<Token>,
    diags: &'a mut Diagnostics,
    /// Unexpected characters reported so far: after [`MAX_BAD_CHAR_ERRORS`] the rest become
    /// error tokens without a diagnostic each (a macro can expand to megabytes of junk).
    bad_char_errors: usize,
}

/// How many "unexpected character" errors one file reports; one more says that the rest are
/// not shown.
const MAX_BAD_CHAR_ERRORS: usize = 100;

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The token kind of a reserved word (keyword, element type, math or atomic built-in), if
/// `text` is one. One hash lookup instead of a string comparison per reserved word.
fn reserved_word(text: &str) -> Option<TokenKind> {
    static TABLE: OnceLock<HashMap<&'static str, TokenKind>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut table = HashMap::new();
        table.extend(Keyword::SPELLINGS.iter().map(|&(s, k)| (s, TokenKind::Keyword(k))));
        table.extend(ElemType::SPELLINGS.iter().map(|&(s, e)| (s, TokenKind::ElemType(e))));
        table.extend(MathFn::SPELLINGS.iter().map(|&(s, m)| (s, TokenKind::Math(m))));
        table.extend(AtomicOp::SPELLINGS.iter().map(|&(s, a)| (s, TokenKind::Atomic(a))));
        table
    });
    table.get(text).cloned()
}

/// The punctuation at the start of `rest`, longest match first (maximal munch), with its
/// length in bytes.
fn match_punct(rest: &[u8]) -> Option<(usize, Punct)> {
    let b0 = *rest.first()?;
    let b1 = rest.get(1).copied().unwrap_or(0);
    let b2 = rest.get(2).copied().unwrap_or(0);
    let (len, p) = match (b0, b1, b2) {
        (b'<', b'-', b'>') => (3, Punct::SwapArrow),
        (b'+', b'+', _) => (2, Punct::PlusPlus),
        (b'-', b'-', _) => (2, Punct::MinusMinus),
        (b'+', b'=', _) => (2, Punct::PlusAssign),
        (b'-', b'=', _) => (2, Punct::MinusAssign),
        (b'*', b'=', _) => (2, Punct::StarAssign),
        (b'/', b'=', _) => (2, Punct::SlashAssign),
        (b'%', b'=', _) => (2, Punct::PercentAssign),
        (b':', b':', _) => (2, Punct::ColonColon),
        (b'=', b'=', _) => (2, Punct::EqEq),
        (b'!', b'=', _) => (2, Punct::NotEq),
        (b'<', b'=', _) => (2, Punct::Le),
        (b'>', b'=', _) => (2, Punct::Ge),
        (b'&', b'&', _) => (2, Punct::AndAnd),
        (b'|', b'|', _) => (2, Punct::OrOr),
        (b'<', b'<', _) => (2, Punct::Shl),
        (b'>', b'>', _) => (2, Punct::Shr),
        (b'?', b'?', _) => (2, Punct::QuestionQuestion),
        (b'=', b'>', _) => (2, Punct::FatArrow),
        (b'[', b'[', _) => (2, Punct::AttrOpen),
        (b'#', b'+', _) => (2, Punct::HashPlus),
        (b'#', b'-', _) => (2, Punct::HashMinus),
        (b'#', b'*', _) => (2, Punct::HashStar),
        (b'#', b'/', _) => (2, Punct::HashSlash),
        (b'#', b'%', _) => (2, Punct::HashPercent),
        (b'=', _, _) => (1, Punct::Assign),
        (b'+', _, _) => (1, Punct::Plus),
        (b'-', _, _) => (1, Punct::Minus),
        (b'*', _, _) => (1, Punct::Star),
        (b'/', _, _) => (1, Punct::Slash),
        (b'%', _, _) => (1, Punct::Percent),
        (b'(', _, _) => (1, Punct::LParen),
        (b')', _, _) => (1, Punct::RParen),
        (b'{', _, _) => (1, Punct::LBrace),
        (b'}', _, _) => (1, Punct::RBrace),
        (b'[', _, _) => (1, Punct::LBracket),
        (b']', _, _) => (1, Punct::RBracket),
        (b',', _, _) => (1, Punct::Comma),
        (b';', _, _) => (1, Punct::Semi),
        (b':', _, _) => (1, Punct::Colon),
        (b'.', _, _) => (1, Punct::Dot),
        (b'<', _, _) => (1, Punct::Lt),
        (b'>', _, _) => (1, Punct::Gt),
        (b'!', _, _) => (1, Punct::Bang),
        (b'?', _, _) => (1, Punct::Question),
        (b'|', _, _) => (1, Punct::Pipe),
        (b'&', _, _) => (1, Punct::Amp),
        (b'^', _, _) => (1, Punct::Caret),
        (b'~', _, _) => (1, Punct::Tilde),
        (b'#', _, _) => (1, Punct::Hash),
        _ => return None,
    };
    Some((len, p))
}

impl<'a> Lexer<'a> {
    fn span(&self, start: usize, end: usize) -> Span {
        self.expanded.origin(start..end)
    }

    fn byte(&self, at: usize) -> Option<u8> {
        self.bytes.get(at).copied()
    }

    /// The source text `start..end` (empty when out of range or not on char boundaries). It
    /// borrows the source, not the lexer, so the lexer can report errors while holding it.
    fn slice(&self, start: usize, end: usize) -> &'a str {
        self.src.get(start..end).unwrap_or("")
    }

    fn push(&mut self, kind: TokenKind, start: usize, end: usize) {
        let span = self.span(start, end);
        self.tokens.push(Token { kind, span });
    }

    fn error(
        &mut self,
        code: &'static str,
        start: usize,
        end: usize,
        message: String,
        label: &str,
    ) {
        let span = self.span(start, end);
        self.diags.push(Diagnostic::error(code, span, message).with_label(label));
    }

    fn run(&mut self) {
        loop {
            self.skip_trivia();
            let start = self.pos;
            let Some(b) = self.byte(start) else {
                self.push(TokenKind::Eof, start, start);
                return;
            };
            if b == b'R' && self.byte(start + 1) == Some(b'"') {
                self.raw_string();
            } else if is_ident_start(b) {
                self.ident();
            } else if b.is_ascii_digit() {
                self.number();
            } else if b == b'"' {
                self.string();
            } else if b == b'\'' {
                self.char_literal();
            } else if b == b'.' && self.byte(start + 1).is_some_and(is_ident_start) {
                self.dotted();
            } else if !self.punct() {
                self.bad_chars();
            }
        }
    }

    /// Skips whitespace and comments; reports an unterminated block comment.
    fn skip_trivia(&mut self) {
        loop {
            match self.byte(self.pos) {
                Some(b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c) => self.pos += 1,
                Some(b'/') if self.byte(self.pos + 1) == Some(b'/') => {
                    while let Some(b) = self.byte(self.pos) {
                        if b == b'\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                Some(b'/') if self.byte(self.pos + 1) == Some(b'*') => {
                    let start = self.pos;
                    match self.src.get(start + 2..).and_then(|rest| rest.find("*/")) {
                        Some(i) => self.pos = start + 2 + i + 2,
                        None => {
                            self.error(
                                "E0203",
                                start,
                                start + 2,
                                "unterminated block comment".to_string(),
                                "this comment is never closed",
                            );
                            self.pos = self.bytes.len();
                        }
                    }
                }
                _ => return,
            }
        }
    }

    fn ident(&mut self) {
        let start = self.pos;
        while self.byte(self.pos).is_some_and(is_ident_continue) {
            self.pos += 1;
        }
        let end = self.pos;
        let text = self.slice(start, end);
        if text == "group"
            && self.byte(end) == Some(b'-')
            && self.byte(end + 1) == Some(b'4')
            && !self.byte(end + 2).is_some_and(is_ident_continue)
        {
            self.pos = end + 2;
            self.push(TokenKind::Keyword(Keyword::Group4), start, end + 2);
            return;
        }
        if text == "stage" && self.removed_stage_syntax(start, end) {
            return;
        }
        let kind = if let Some(kind) = reserved_word(text) {
            kind
        } else if text.starts_with("__atomic_") {
            let message = format!("unknown atomic built-in '{text}'");
            self.diags.push(
                Diagnostic::error("E0208", self.span(start, end), message)
                    .with_label("not an atomic built-in")
                    .with_help(
                        "the atomics are __atomic_add, __atomic_sub, __atomic_exch, __atomic_min, \
                         __atomic_max, __atomic_and, __atomic_or, __atomic_xor and __atomic_cas",
                    ),
            );
            TokenKind::Error
        } else if text.starts_with("__lib_") {
            TokenKind::LibIdent(text.into())
        } else if self.is_intrinsic(text) {
            TokenKind::IntrinsicIdent(text.into())
        } else {
            TokenKind::Ident(text.into())
        };
        self.push(kind, start, end);
    }

    fn is_intrinsic(&self, text: &str) -> bool {
        let by_prefix = |p: &str| !p.is_empty() && text.starts_with(p);
        text == "croq"
            || self.intrinsics.namespaces.iter().any(|n| n == text)
            || self.intrinsics.prefixes.iter().any(|p| by_prefix(p))
            || self
                .scoped
                .iter()
                .any(|s| if s.namespace { s.name == text } else { by_prefix(&s.name) })
    }

    /// Recognises the removed `stage<N>(` syntax (spec §20.3) after the identifier `stage`
    /// ending at `end`; reports it and emits one error token for `stage<N>`.
    fn removed_stage_syntax(&mut self, start: usize, end: usize) -> bool {
        let skip_ws = |mut i: usize| {
            while self.byte(i).is_some_and(|b| b.is_ascii_whitespace()) {
                i += 1;
            }
            i
        };
        let mut i = skip_ws(end);
        if self.byte(i) != Some(b'<') {
            return false;
        }
        i = skip_ws(i + 1);
        let arg_start = i;
        while self.byte(i).is_some_and(is_ident_continue) {
            i += 1;
        }
        if i == arg_start {
            return false;
        }
        i = skip_ws(i);
        if self.byte(i) != Some(b'>') {
            return false;
        }
        let close = i + 1;
        if self.byte(skip_ws(close)) != Some(b'(') {
            return false;
        }
        self.diags.push(
            Diagnostic::error(
                "E0206",
                self.span(start, close),
                "'stage<N>(…)' is removed syntax and is no longer supported",
            )
            .with_label("removed syntax")
            .with_help("pipeline stages are written with events and async DMA/TMA (spec §20)"),
        );
        self.pos = close;
        self.push(TokenKind::Error, start, close);
        true
    }

    fn dotted(&mut self) {
        let start = self.pos;
        let mut end = start + 1;
        while self.byte(end).is_some_and(is_ident_continue) {
            end += 1;
        }
        match Dotted::lookup(self.slice(start, end)) {
            Some(d) => {
                self.pos = end;
                self.push(TokenKind::Dotted(d), start, end);
            }
            None => {
                self.pos = start + 1;
                self.push(TokenKind::Punct(Punct::Dot), start, start + 1);
            }
        }
    }

    /// Lexes punctuation at the current position; `false` if there is none.
    fn punct(&mut self) -> bool {
        let start = self.pos;
        let rest = self.bytes.get(start..).unwrap_or(&[]);
        let Some((len, p)) = match_punct(rest) else {
            return false;
        };
        let end = start + len;
        self.pos = end;
        match p {
            Punct::LBrace => self.depth += 1,
            Punct::RBrace => {
                let depth = self.depth;
                self.scoped.retain(|s| s.depth < depth);
                self.depth = depth.saturating_sub(1);
            }
            _ => {}
        }
        self.push(TokenKind::Punct(p), start, end);
        if p == Punct::RParen {
            self.register_scoped_intrinsic();
        }
        true
    }

    /// After `__pragma_croq_intrinsic_{prefix,namespace}("name")`, registers `name` for the rest
    /// of the enclosing block (spec §17.2).
    fn register_scoped_intrinsic(&mut self) {
        let n = self.tokens.len();
        let Some(window) = n.checked_sub(4).and_then(|s| self.tokens.get(s..n)) else { return };
        let namespace = match &window[0].kind {
            TokenKind::Keyword(Keyword::PragmaPrefix) => false,
            TokenKind::Keyword(Keyword::PragmaNamespace) => true,
            _ => return,
        };
        if !window[1].kind.is_punct(Punct::LParen) {
            return;
        }
        let TokenKind::Str(s) = &window[2].kind else { return };
        let name = s.value.trim().to_string();
        if !name.is_empty() {
            self.scoped.push(ScopedIntrinsic { depth: self.depth, namespace, name });
        }
    }

    /// A run of characters that start no token: one diagnostic, one error token.
    fn bad_chars(&mut self) {
        let start = self.pos;
        let mut end = start;
        while let Some(c) = self.src.get(end..).and_then(|s| s.chars().next()) {
            let b = c as u32;
            let starts_token = c.is_ascii_whitespace()
                || (b < 0x80 && (is_ident_start(b as u8) || (b as u8).is_ascii_digit()))
                || c == '"'
                || c == '.'
                || (c.is_ascii() && match_punct(&[b as u8]).is_some());
            if end > start && starts_token {
                break;
            }
            end += c.len_utf8();
        }
        let end = end.max(start + 1).min(self.bytes.len());
        self.bad_char_errors += 1;
        if self.bad_char_errors > MAX_BAD_CHAR_ERRORS {
            if self.bad_char_errors == MAX_BAD_CHAR_ERRORS + 1 {
                self.diags.push(
                    Diagnostic::error(
                        "E0201",
                        self.span(start, end),
                        format!(
                            "more unexpected characters (after {MAX_BAD_CHAR_ERRORS} reported)"
                        ),
                    )
                    .with_label("the rest of the file's unexpected characters are not reported"),
                );
            }
            self.pos = end;
            self.push(TokenKind::Error, start, end);
            return;
        }
        let run = self.slice(start, end);
        let shown = shown_start(run);
        let message = if run.chars().nth(1).is_none() {
            format!("unexpected character '{shown}'")
        } else {
            format!("unexpected characters '{shown}'")
        };
        self.diags.push(
            Diagnostic::error("E0201", self.span(start, end), message)
                .with_label("not valid in tileflow code"),
        );
        self.pos = end;
        self.push(TokenKind::Error, start, end);
    }

    fn number(&mut self) {
        let start = self.pos;
        let hex = self.byte(start) == Some(b'0')
            && matches!(self.byte(start + 1), Some(b'x' | b'X'))
            && self.byte(start + 2).is_some_and(|b| b.is_ascii_hexdigit());
        let digits_start = if hex { start + 2 } else { start };
        let mut i = digits_start;
        while self
            .byte(i)
            .is_some_and(|b| if hex { b.is_ascii_hexdigit() } else { b.is_ascii_digit() })
        {
            i += 1;
        }
        if !hex
            && self.byte(i) == Some(b'.')
            && self.byte(i + 1).is_some_and(|b| b.is_ascii_digit())
        {
            self.float(start, i);
            return;
        }

        let digits_end = i;
        while self.byte(i).is_some_and(is_ident_continue) {
            i += 1;
        }
        self.pos = i;
        let digits = self.slice(digits_start, digits_end);
        let suffix = self.slice(digits_end, i);
        let text = self.slice(start, i).to_string();

        let (unsigned, long_long) = match suffix.to_ascii_lowercase().as_str() {
            "" | "l" => (false, false),
            "ll" => (false, true),
            "u" | "ul" | "lu" => (true, false),
            "ull" | "llu" => (true, true),
            _ => {
                let mut d = Diagnostic::error(
                    "E0205",
                    self.span(digits_end, i),
                    format!("invalid suffix '{suffix}' on integer literal '{text}'"),
                )
                .with_label("invalid suffix");
                if suffix.starts_with(['e', 'E']) {
                    // `1e-3`: the exponent form, as for floating literals below.
                    d = d.with_note("floating literals have no exponent form (spec §2.2)");
                }
                self.diags.push(d);
                (false, false)
            }
        };
        if !hex && digits.len() > 1 && digits.starts_with('0') {
            self.error(
                "E0205",
                start,
                i,
                format!("invalid integer literal '{text}': octal literals are not supported"),
                "octal literal",
            );
        }
        let radix = if hex { 16 } else { 10 };
        let value = digits.bytes().try_fold(0u128, |acc, d| {
            let digit = (d as char).to_digit(radix)?;
            acc.checked_mul(radix as u128)?.checked_add(digit as u128)
        });
        let (value, ty) = if unsigned {
            match value.filter(|v| *v <= u64::MAX as u128) {
                Some(v) if v <= u32::MAX as u128 && !long_long => (v, IntLitType::U32),
                Some(v) => (v, IntLitType::U64),
                None => {
                    self.error(
                        "E0204",
                        start,
                        i,
                        format!("unsigned integer literal '{text}' out of range [0, {}]", u64::MAX),
                        "out of range",
                    );
                    (u64::MAX as u128, IntLitType::U64)
                }
            }
        } else {
            match value.filter(|v| *v <= i64::MAX as u128) {
                Some(v) if v <= i32::MAX as u128 && !long_long => (v, IntLitType::S32),
                Some(v) => (v, IntLitType::S64),
                None => {
                    self.error(
                        "E0204",
                        start,
                        i,
                        format!("signed integer literal '{text}' out of range [0, {}]", i64::MAX),
                        "out of range",
                    );
                    (i64::MAX as u128, IntLitType::S64)
                }
            }
        };
        let value = i128::try_from(value).unwrap_or(i128::MAX);
        self.push(TokenKind::Int(IntLit { value, ty }), start, i);
    }

    /// A floating literal `digits.digits[f|F]`; `dot` is the position of the `.`.
    fn float(&mut self, start: usize, dot: usize) {
        let mut i = dot + 1;
        while self.byte(i).is_some_and(|b| b.is_ascii_digit()) {
            i += 1;
        }
        let number_end = i;
        let is_f32 = matches!(self.byte(i), Some(b'f' | b'F'));
        if is_f32 {
            i += 1;
        }
        let suffix_start = i;
        while self.byte(i).is_some_and(is_ident_continue) {
            i += 1;
        }
        self.pos = i;
        if i > suffix_start {
            let text = self.slice(start, i).to_string();
            let suffix = self.slice(if is_f32 { number_end } else { suffix_start }, i).to_string();
            let exponent = suffix.starts_with(['e', 'E']);
            let mut d = Diagnostic::error(
                "E0205",
                self.span(start, i),
                format!("invalid suffix '{suffix}' on floating literal '{text}'"),
            )
            .with_label("invalid suffix");
            if exponent {
                d = d.with_note("floating literals have no exponent form (spec §2.2)");
            }
            self.diags.push(d);
        }
        let value = self.slice(start, number_end).parse::<f64>().unwrap_or(0.0);
        self.push(TokenKind::Float(FloatLit { value, is_f32 }), start, i);
    }

    /// `'…'`: character literals do not exist in tileflow code; one error for the whole
    /// literal (up to the closing quote on the same line).
    fn char_literal(&mut self) {
        let start = self.pos;
        let mut end = start + 1;
        let mut closed = false;
        while let Some(c) = self.src.get(end..).and_then(|s| s.chars().next()) {
            if c == '\n' || end - start > 16 {
                break;
            }
            end += c.len_utf8();
            if c == '\'' {
                closed = true;
                break;
            }
        }
        if !closed {
            end = start + 1;
        }
        let shown = shown_start(self.slice(start, end));
        self.diags.push(
            Diagnostic::error(
                "E0201",
                self.span(start, end),
                format!("unexpected character literal {shown}"),
            )
            .with_label("character literals are not supported in tileflow code"),
        );
        self.pos = end;
        self.push(TokenKind::Error, start, end);
    }

    fn string(&mut self) {
        let start = self.pos;
        let mut value = String::new();
        let mut i = start + 1;
        loop {
            let Some(c) = self.src.get(i..).and_then(|s| s.chars().next()) else {
                self.unterminated_string(start, i, value);
                return;
            };
            match c {
                '"' => {
                    i += 1;
                    break;
                }
                '\n' => {
                    self.unterminated_string(start, i, value);
                    return;
                }
                '\\' => {
                    let Some(e) = self.src.get(i + 1..).and_then(|s| s.chars().next()) else {
                        self.unterminated_string(start, i + 1, value);
                        return;
                    };
                    match e {
                        'n' => value.push('\n'),
                        't' => value.push('\t'),
                        '"' => value.push('"'),
                        '\\' => value.push('\\'),
                        '\n' => {
                            self.unterminated_string(start, i, value);
                            return;
                        }
                        other => {
                            value.push('\\');
                            value.push(other);
                        }
                    }
                    i += 1 + e.len_utf8();
                }
                c => {
                    value.push(c);
                    i += c.len_utf8();
                }
            }
        }
        self.pos = i;
        self.push(TokenKind::Str(StrLit { value, raw: false }), start, i);
    }

    fn unterminated_string(&mut self, start: usize, end: usize, value: String) {
        self.diags.push(
            Diagnostic::error("E0202", self.span(start, end), "unterminated string literal")
                .with_label("missing closing '\"'"),
        );
        self.pos = end;
        self.push(TokenKind::Str(StrLit { value, raw: false }), start, end);
    }

    /// `R"delim( … )delim"` (spec §2.2).
    fn raw_string(&mut self) {
        let start = self.pos;
        let delim_start = start + 2;
        let mut i = delim_start;
        while let Some(b) = self.byte(i) {
            if b == b'(' || b == b')' || b == b'\\' || b == b'"' || b.is_ascii_whitespace() {
                break;
            }
            i += 1;
        }
        let delim = self.slice(delim_start, i).to_string();
        if self.byte(i) != Some(b'(') || delim.len() > 16 || !delim.is_ascii() {
            let end = i.max(delim_start).min(self.bytes.len());
            self.diags.push(
                Diagnostic::error("E0207", self.span(start, end), "invalid raw string delimiter")
                    .with_label("expected '(' after at most 16 delimiter characters")
                    .with_help("write raw strings as R\"(text)\" or R\"delim(text)delim\""),
            );
            // A delimiter that is only too long still has a recognisable body: skip through
            // its `)delim"` too, so that the body text does not produce follow-up errors.
            let terminator = format!("){delim}\"");
            let body_end = (self.byte(i) == Some(b'('))
                .then(|| self.src.get(i + 1..).and_then(|rest| rest.find(&terminator)))
                .flatten()
                .map_or(end, |off| i + 1 + off + terminator.len());
            self.pos = body_end;
            self.push(TokenKind::Error, start, body_end);
            return;
        }
        let body_start = i + 1;
        let terminator = format!("){delim}\"");
        match self.src.get(body_start..).and_then(|rest| rest.find(&terminator)) {
            Some(off) => {
                let value = self.slice(body_start, body_start + off).to_string();
                let end = body_start + off + terminator.len();
                self.pos = end;
                self.push(TokenKind::Str(StrLit { value, raw: true }), start, end);
            }
            None => {
                self.diags.push(
                    Diagnostic::error(
                        "E0202",
                        self.span(start, body_start),
                        "unterminated raw string literal",
                    )
                    .with_label(format!("no closing '{terminator}' follows")),
                );
                let value = self.slice(body_start, self.bytes.len()).to_string();
                self.pos = self.bytes.len();
                self.push(TokenKind::Str(StrLit { value, raw: true }), start, self.pos);
            }
        }
    }
}

/// The start of `text` for a message, escaped: a run of bad characters can be megabytes long
/// (a macro expanding to junk), and escaping all of it would cost more than lexing it.
fn shown_start(text: &str) -> String {
    const SHOWN: usize = 16;
    let mut shown = text.chars().take(SHOWN).collect::<String>().escape_debug().to_string();
    if text.chars().nth(SHOWN).is_some() {
        shown.push('…');
    }
    shown
}
