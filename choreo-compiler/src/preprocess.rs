//! Preprocessing and island splitting (spec §1.1, §2.1, §3).
//!
//! Input: one file of a [`SourceDb`]. Output: [`Preprocessed`], the file cut into top-level
//! regions. Host C++ text stays verbatim (directives are evaluated for bookkeeping only and stay
//! in the host text, so nvcc evaluates them again); each `__co__` function becomes an
//! [`Expanded`] text — macro-expanded, with its directives and excluded lines replaced by empty
//! lines — plus a map from every output byte back to the user's original span.
//! `__device__`/`__co_device__` declarations and `__cok__` blocks are captured verbatim.
//!
//! # How the file is scanned
//!
//! One pass over the bytes with a small C-like tokenizer (`lex_at`) that knows comments,
//! string/char literals (including raw strings `R"x(…)x"`), pp-numbers, identifiers and line
//! splices. A line whose first token is `#` is a directive (in tileflow code only when a known
//! directive name follows, because `#` is also Choreo's upper-bound operator). Triggers are whole
//! identifiers outside comments and literals:
//! - `__co__` (anywhere in live host text) starts a tileflow function that ends at the `}` that
//!   returns its brace depth to 0 (braces of live lines only, outside comments and literals);
//!   a `;` before the first `{` also ends it (there are no forward declarations; the parser
//!   reports the missing body);
//! - `__cok__` must be followed by `{`; the block ends at the matching `}`;
//! - `__device__` / `__co_device__` fire only at file scope (outside host braces other than
//!   those of `namespace … { }` and `extern "C" { }`) and capture the declaration through its
//!   matching `}` (or through the `;` after an initialiser `= { … };`) or a `;` at depth 0.
//!
//! Triggers in excluded host conditionals do not fire: such a `__co__` function stays inside the
//! host text (nvcc excludes it as well) and is never parsed.
//!
//! # Macro semantics (tileflow code and `#if` expressions)
//!
//! At the start of each `__co__` function the global table is overlaid by an empty local table;
//! directives in the body change only the overlay, which is dropped at the end of the function.
//! Expansion is identifier-aware and follows the C rules (a macro is not re-expanded inside its
//! own expansion; function-like arguments are fully expanded before substitution) with these
//! choices:
//! - an identifier directly preceded by `.` is never expanded (Choreo's dotted keywords such as
//!   `.at` are single tokens), neither are identifiers inside pp-numbers (`1.5f`), strings or
//!   comments;
//! - `#define NAME` with no body means `1` (spec §3 ⚠); `-D NAME` likewise;
//! - rescanning stops after 32 nested rounds (error E0109), an expansion may not exceed 1 MiB
//!   or scan more than 2^18 tokens (E0120), and arguments may nest macro invocations at most
//!   128 deep (E0122);
//! - argument splitting respects `()`, `[]`, `{}` and literals, so `F([M, N])` has one argument
//!   (C would split it; Choreo shapes need brackets);
//! - a function-like macro whose expansion ends in the name of another function-like macro does
//!   not take that macro's arguments from the text after the invocation (rare in practice);
//! - variadic macros (`...`, `__VA_ARGS__`) are supported; `##` and `#param` are not (E0112,
//!   reported where a tileflow macro is defined or where a host macro is used in tileflow code).
//!
//! `#if` expressions: integer literals (decimal, hex, octal, binary, suffixes, `'` separators),
//! character literals, macros (expanded), `defined X` / `defined(X)`, `true`/`false` (C++),
//! `! ~ - +`, `* / % + - << >> < > <= >= == != & ^ | && ||`, `?:`, the C++ alternative tokens
//! (`and`, `or`, `not`, …) and parentheses, evaluated in wrapping 64-bit signed arithmetic with
//! short-circuiting. Unknown identifiers are 0. `__has_include(…)` and the other `__has_*`
//! built-ins cannot be evaluated here: they are 0, and a warning (W0103) is given when a `__co__`
//! function depends on such a condition.
//!
//! Conditionals opened inside a `__co__` function must be closed inside it (its conditional stack
//! starts empty). Unknown directives are passed through in host code and never occur in tileflow
//! code (a `#word` line there is Choreo text). Other `#pragma`s in tileflow code are removed with
//! a warning; `#pragma croq intrinsic prefix|namespace <name>` becomes the statement
//! `__pragma_croq_intrinsic_prefix("name");` (or `…_namespace`) there, and is recorded in
//! [`Preprocessed::intrinsic_prefixes`] / [`Preprocessed::intrinsic_namespaces`] in host code.
//! `#line` directives in live code are validated and recorded in
//! [`Preprocessed::line_directives`].
//!
//! # Diagnostics
//!
//! | code  | meaning |
//! |-------|---------|
//! | E0101 | `#error` in live code (host or tileflow) |
//! | E0102 | missing `#endif` (points at the opening `#if`) |
//! | E0103 | `#elif` / `#else` / `#endif` without a matching `#if` |
//! | E0104 | `#elif` / `#else` after `#else` |
//! | E0105 | malformed `#if` / `#elif` expression (also: no expression, string or float in it) |
//! | E0106 | division or remainder by zero in `#if` |
//! | E0107 | malformed `#define` (also from `-D`) |
//! | E0108 | redefinition of a function-like macro with a different definition |
//! | E0109 | macro expansion did not reach a fixed point within 32 rounds |
//! | E0110 | wrong number of arguments for a function-like macro |
//! | E0111 | unterminated invocation of a function-like macro (no closing `)`) |
//! | E0112 | token pasting `##` or stringising `#x` in a macro used in tileflow code |
//! | E0113 | conditionals nested deeper than 256 |
//! | E0114 | unterminated `__co__` function (its `{` is never closed) |
//! | E0115 | `__cok__` not followed by `{`, or its block is never closed |
//! | E0116 | unterminated `__device__` / `__co_device__` declaration |
//! | E0117 | malformed `#pragma croq intrinsic …` |
//! | E0118 | `#include` inside a `__co__` function |
//! | E0119 | malformed `#line` |
//! | E0120 | macro expansion larger than 1 MiB, or scanning more than 2^18 tokens |
//! | E0121 | `#ifdef` / `#ifndef` / `#elifdef` / `#elifndef` / `#undef` without a macro name |
//! | E0122 | macro invocations nested more than 128 deep in arguments |
//! | W0101 | `#warning` in live code |
//! | W0102 | `#pragma` (other than `croq intrinsic`) inside a `__co__` function is ignored |
//! | W0103 | a `__co__` function depends on `__has_include` / `__has_*`, evaluated as 0 |
//! | W0104 | unknown `#pragma croq …` is ignored |

use std::collections::HashMap;
use std::ops::Range;

use crate::diagnostics::{Diagnostic, Diagnostics};
use crate::source::{FileId, SourceDb, Span};

/// Options that affect preprocessing.
#[derive(Debug, Clone, Default)]
pub struct PreprocessOptions {
    /// `-D` definitions: `(name, value)`; `value` of `None` means `1` (spec §3). `name` may be
    /// function-like (`"F(x)"`).
    pub defines: Vec<(String, Option<String>)>,
}

/// The file, cut into top-level regions, in source order.
#[derive(Debug, Clone)]
pub struct Preprocessed {
    /// The file these regions came from.
    pub file: FileId,
    /// The regions, in source order; together with [`Region::span`] they tile the file.
    pub regions: Vec<Region>,
    /// Intrinsic prefixes registered with `#pragma croq intrinsic prefix <p>` in host code
    /// (spec §17.2), in source order, without duplicates. Registrations inside a `__co__`
    /// function are not listed here; they become `__pragma_croq_intrinsic_prefix("p");`
    /// statements in that function's [`Expanded`] text.
    pub intrinsic_prefixes: Vec<String>,
    /// Intrinsic namespaces registered with `#pragma croq intrinsic namespace <n>` in host code
    /// (same rules as [`Preprocessed::intrinsic_prefixes`]).
    pub intrinsic_namespaces: Vec<String>,
    /// `#line` directives of live code (host and tileflow), in source order (spec §2.1).
    pub line_directives: Vec<LineDirective>,
    /// The `main` identifier of every definition of a global function `main` in live host text
    /// (`int main(…) { … }` at file scope or in an `extern "…" { }` block, not in a namespace,
    /// class or function), in source order. A library build renames exactly these, so the
    /// file links into another program.
    pub main_definitions: Vec<Span>,
}

/// A `#line N ["file"]` directive: the line after it is numbered `line` (in `file`, if given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineDirective {
    /// The directive itself.
    pub span: Span,
    /// Byte offset of the first byte the new numbering applies to (the start of the next line).
    pub applies_from: u32,
    /// The number the next line gets.
    pub line: u32,
    /// The file name it gets, when one is given.
    pub file: Option<String>,
}

/// One top-level region of a `.co` file.
#[derive(Debug, Clone)]
pub enum Region {
    /// Host C++ text, copied verbatim to the output (includes directives, comments, and code in
    /// excluded conditionals, which nvcc re-evaluates).
    Host {
        /// The original text range.
        span: Span,
    },
    /// A `__co__` function: from the `__co__` keyword through its closing `}`.
    CoFunction {
        /// The original text range.
        span: Span,
        /// The text to lex: macro-expanded, directives removed, with its origin map.
        text: Expanded,
    },
    /// A top-level `__device__` / `__co_device__` declaration or definition, verbatim.
    Device {
        /// The original text range.
        span: Span,
    },
    /// A `__cok__ { … }` block: `span` covers all of it, `body` the text between the braces.
    Cok {
        /// The original text range.
        span: Span,
        /// The contents between the outer braces.
        body: Span,
    },
}

impl Region {
    /// The original text range of the region.
    pub fn span(&self) -> Span {
        match self {
            Region::Host { span } | Region::CoFunction { span, .. } | Region::Device { span } => {
                *span
            }
            Region::Cok { span, .. } => *span,
        }
    }
}

/// Preprocessed text of one tileflow function plus, for each piece of it, where it came from.
#[derive(Debug, Clone, Default)]
pub struct Expanded {
    /// The text to lex.
    pub text: String,
    /// Sorted by `out_start`: the output range `out_start..` (up to the next segment) came from
    /// `origin`. A verbatim copy has `origin.len()` equal to the segment length and maps byte for
    /// byte; text produced by a macro expansion maps every byte to the whole invocation span.
    pub segments: Vec<Segment>,
}

/// One piece of an [`Expanded`] text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Start of the piece in [`Expanded::text`].
    pub out_start: u32,
    /// Where it came from in the original file.
    pub origin: Span,
    /// `true` when the piece is verbatim source (byte-for-byte mapping), `false` when it is the
    /// product of a macro expansion (every byte maps to `origin`).
    pub verbatim: bool,
}

impl Expanded {
    /// The pieces produced by macro expansion (or rewritten directives): each invocation with
    /// the text it became.
    pub fn generated(&self) -> Vec<(Span, String)> {
        let mut out = Vec::new();
        for (i, seg) in self.segments.iter().enumerate() {
            if seg.verbatim {
                continue;
            }
            let end = self.segments.get(i + 1).map_or(self.text.len(), |n| n.out_start as usize);
            if let Some(text) = self.text.get(seg.out_start as usize..end) {
                out.push((seg.origin, text.trim().to_string()));
            }
        }
        out
    }

    /// Maps an output byte range back to the original file.
    ///
    /// Bytes of verbatim pieces map byte for byte; a range touching an expansion covers the
    /// whole invocation. An empty range maps to an empty span at its position (or to the
    /// invocation, inside an expansion). Offsets past the end are clamped.
    pub fn origin(&self, out: Range<usize>) -> Span {
        let start = out.start.min(self.text.len());
        let end = out.end.clamp(start, self.text.len());
        let first = self.locate(start, false);
        if end == start {
            return first;
        }
        first.to(self.locate(end, true))
    }

    /// The original position of output offset `offset`. With `is_end`, an offset on a segment
    /// boundary belongs to the segment that ends there (it is the end of a range).
    fn locate(&self, offset: usize, is_end: bool) -> Span {
        let key = u32::try_from(offset).unwrap_or(u32::MAX);
        let after = if is_end {
            self.segments.partition_point(|s| s.out_start < key)
        } else {
            self.segments.partition_point(|s| s.out_start <= key)
        };
        let Some(seg) = self.segments.get(after.saturating_sub(1)) else {
            return Span::point(FileId(0), 0);
        };
        if !seg.verbatim {
            return seg.origin;
        }
        let delta = key.saturating_sub(seg.out_start);
        let pos = seg.origin.start.saturating_add(delta).min(seg.origin.end);
        Span { file: seg.origin.file, start: pos, end: pos }
    }

    /// Appends source text copied byte for byte from `origin`, merging with the previous piece
    /// when both are contiguous verbatim copies.
    fn push_verbatim(&mut self, text: &str, origin: Span) {
        if text.is_empty() {
            return;
        }
        let out_len = out_offset(self.text.len());
        if let Some(last) = self.segments.last_mut() {
            let last_len = out_len.saturating_sub(last.out_start);
            if last.verbatim
                && last.origin.file == origin.file
                && last.origin.end == origin.start
                && last_len == last.origin.end - last.origin.start
            {
                last.origin.end = origin.end;
                self.text.push_str(text);
                return;
            }
        }
        self.segments.push(Segment { out_start: out_len, origin, verbatim: true });
        self.text.push_str(text);
    }

    /// Appends generated text (a macro expansion or a rewritten directive) standing for
    /// `origin`.
    fn push_generated(&mut self, text: &str, origin: Span) {
        if text.is_empty() {
            return;
        }
        self.segments.push(Segment {
            out_start: out_offset(self.text.len()),
            origin,
            verbatim: false,
        });
        self.text.push_str(text);
    }
}

fn out_offset(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// Preprocesses `file` and splits it into regions. Errors go to `diags`; the result is always
/// usable (regions with errors are still returned so later stages can report more).
pub fn preprocess(
    db: &SourceDb,
    file: FileId,
    options: &PreprocessOptions,
    diags: &mut Diagnostics,
) -> Preprocessed {
    let src = db.file(file).text();
    let mut pp = Pp {
        src,
        b: src.as_bytes(),
        file,
        diags,
        globals: MacroTable::default(),
        regions: Vec::new(),
        prefixes: Vec::new(),
        namespaces: Vec::new(),
        line_directives: Vec::new(),
        main_definitions: Vec::new(),
    };
    pp.predefine(options);
    pp.run();
    Preprocessed {
        file,
        regions: pp.regions,
        intrinsic_prefixes: pp.prefixes,
        intrinsic_namespaces: pp.namespaces,
        line_directives: pp.line_directives,
        main_definitions: pp.main_definitions,
    }
}

// ---------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------

/// Nested rescans of macro bodies before E0109 (spec §3: "max 32 rounds").
const MAX_EXPANSION_ROUNDS: usize = 32;
/// Conditional nesting before E0113.
const MAX_COND_DEPTH: usize = 256;
/// Nesting of macro invocations inside macro arguments before E0122 (bounds recursion).
const MAX_ARG_NESTING: usize = 128;
/// Size of one expansion before E0120 (bounds exponential macro definitions).
const MAX_EXPANSION_BYTES: usize = 1 << 20;
/// Tokens scanned inside the expansion of one top-level invocation before E0120 (bounds the
/// work of exponential definitions whose output stays small, like `#define A B B` chains).
const MAX_EXPANSION_STEPS: usize = 1 << 18;
/// Tokens scanned in the expansions of all invocations of a file together: twice what one
/// invocation may take, so that an exploding macro used many times stops early (half a million
/// tokens: far beyond any kernel file, and a debug build gets through it in under a second).
const MAX_FILE_EXPANSION_STEPS: usize = 1 << 19;
/// Nesting of parentheses and unary operators in `#if` before E0105 (bounds recursion).
const MAX_EXPR_DEPTH: usize = 256;

/// Directive names recognised inside tileflow code (other `#word` lines are Choreo text).
const TILEFLOW_DIRECTIVES: &[&str] = &[
    "define",
    "undef",
    "if",
    "ifdef",
    "ifndef",
    "elif",
    "elifdef",
    "elifndef",
    "else",
    "endif",
    "line",
    "include",
    "include_next",
    "import",
    "error",
    "warning",
    "pragma",
];

// ---------------------------------------------------------------------------------------------
// Tokenizer shared by every scanner
// ---------------------------------------------------------------------------------------------

/// Coarse C token classes: enough to skip comments and literals and to find identifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lx {
    /// A `\n` (line splices are [`Lx::Space`]).
    Newline,
    /// Horizontal whitespace and line splices.
    Space,
    /// `// …` (up to, not including, the newline) or `/* … */`.
    Comment,
    /// A string literal, raw or not, with its encoding prefix.
    Str,
    /// A character literal with its encoding prefix.
    Char,
    /// An identifier (bytes ≥ 0x80 count as identifier characters).
    Ident,
    /// A pp-number (`12`, `1.5f`, `0x1Fu`, `1'000`, `1e+5`).
    Number,
    /// Any other single ASCII byte.
    Punct,
}

/// Identifier characters (bytes ≥ 0x80 included, so UTF-8 identifiers stay whole).
const IDENT_CONTINUE: [bool; 256] = {
    let mut table = [false; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        table[c] = b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
        c += 1;
    }
    table
};

fn is_ident_start(c: u8) -> bool {
    IDENT_CONTINUE[usize::from(c)] && !c.is_ascii_digit()
}

fn is_ident_continue(c: u8) -> bool {
    IDENT_CONTINUE[usize::from(c)]
}

fn is_hspace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | 0x0b | 0x0c)
}

/// Length of a backslash-newline line splice at `pos` (0 if there is none).
fn splice_len(b: &[u8], pos: usize) -> usize {
    match (b.get(pos), b.get(pos + 1), b.get(pos + 2)) {
        (Some(b'\\'), Some(b'\n'), _) => 2,
        (Some(b'\\'), Some(b'\r'), Some(b'\n')) => 3,
        _ => 0,
    }
}

/// The token starting at `pos` and its end. Always makes progress; every end lies on a UTF-8
/// character boundary (tokens start and end at ASCII bytes or the end of the text).
fn lex_at(b: &[u8], pos: usize) -> (Lx, usize) {
    let Some(&c) = b.get(pos) else {
        return (Lx::Space, pos.saturating_add(1));
    };
    if is_ident_start(c) {
        // The common case first: an identifier, unless it is an encoding prefix of a literal.
        let end = ident_end(b, pos + 1);
        let quote = match b.get(end) {
            Some(&q @ (b'"' | b'\'')) => q,
            _ => return (Lx::Ident, end),
        };
        let word = &b[pos..end];
        let encoding = matches!(word, b"u8" | b"u" | b"U" | b"L");
        if quote == b'"' {
            if matches!(word, b"R" | b"u8R" | b"uR" | b"UR" | b"LR") {
                if let Some(e) = raw_string_end(b, end) {
                    return (Lx::Str, e);
                }
            }
            if encoding {
                return (Lx::Str, quoted_end(b, end + 1, b'"'));
            }
        } else if encoding {
            return (Lx::Char, quoted_end(b, end + 1, b'\''));
        }
        return (Lx::Ident, end);
    }
    let next = b.get(pos + 1).copied();
    match c {
        b'\n' => (Lx::Newline, pos + 1),
        b' ' | b'\t' | b'\r' | 0x0b | 0x0c => (Lx::Space, space_end(b, pos + 1)),
        b'\\' if splice_len(b, pos) > 0 => (Lx::Space, space_end(b, pos)),
        b'/' if next == Some(b'/') => (Lx::Comment, line_comment_end(b, pos + 2)),
        b'/' if next == Some(b'*') => (Lx::Comment, block_comment_end(b, pos + 2)),
        b'"' => (Lx::Str, quoted_end(b, pos + 1, b'"')),
        b'\'' => (Lx::Char, quoted_end(b, pos + 1, b'\'')),
        b'0'..=b'9' => (Lx::Number, pp_number_end(b, pos + 1)),
        b'.' if next.is_some_and(|n| n.is_ascii_digit()) => (Lx::Number, pp_number_end(b, pos + 1)),
        _ => (Lx::Punct, pos + 1),
    }
}

/// End of a run of horizontal whitespace and line splices starting at `i`.
fn space_end(b: &[u8], mut i: usize) -> usize {
    loop {
        match b.get(i) {
            Some(&c) if is_hspace(c) => i += 1,
            Some(b'\\') if splice_len(b, i) > 0 => i += splice_len(b, i),
            _ => return i,
        }
    }
}

/// Whether `c` is whitespace or punctuation that cannot start a comment, literal, number,
/// identifier or line splice — a scanner looking for identifiers can step over it alone.
fn is_plain_byte(c: u8) -> bool {
    matches!(
        c,
        b' ' | b'\t'
            | b'\n'
            | b'\r'
            | b'('
            | b')'
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b','
            | b';'
            | b':'
            | b'='
            | b'+'
            | b'-'
            | b'*'
            | b'<'
            | b'>'
            | b'!'
            | b'&'
            | b'|'
            | b'^'
            | b'%'
            | b'?'
            | b'#'
            | b'~'
    )
}

fn ident_end(b: &[u8], i: usize) -> usize {
    let rest = b.get(i..).unwrap_or(&[]);
    i + rest.iter().position(|&c| !is_ident_continue(c)).unwrap_or(rest.len())
}

fn pp_number_end(b: &[u8], mut i: usize) -> usize {
    while let Some(&c) = b.get(i) {
        if matches!(c, b'e' | b'E' | b'p' | b'P') && matches!(b.get(i + 1), Some(b'+' | b'-')) {
            i += 2;
        } else if c.is_ascii_alphanumeric() || c == b'_' || c == b'.' {
            i += 1;
        } else if c == b'\'' && b.get(i + 1).is_some_and(|&n| n.is_ascii_alphanumeric()) {
            i += 2;
        } else {
            break;
        }
    }
    i
}

/// End of a `//` comment whose text starts at `i`: the next newline not spliced away.
fn line_comment_end(b: &[u8], mut i: usize) -> usize {
    loop {
        let Some(nl) = b.get(i..).and_then(|rest| rest.iter().position(|&c| c == b'\n')) else {
            return b.len();
        };
        let nl = i + nl;
        let spliced = (nl >= 1 && b[nl - 1] == b'\\')
            || (nl >= 2 && b[nl - 1] == b'\r' && b[nl - 2] == b'\\');
        if !spliced {
            return nl;
        }
        i = nl + 1;
    }
}

/// End (after `*/`) of a block comment whose text starts at `i`, or the end of the text.
fn block_comment_end(b: &[u8], i: usize) -> usize {
    let rest = b.get(i..).unwrap_or(&[]);
    match rest.windows(2).position(|w| w == b"*/") {
        Some(p) => i + p + 2,
        None => b.len(),
    }
}

/// End of a quoted literal whose contents start at `i`: after the closing quote, or at an
/// unescaped newline (not consumed; an unterminated literal ends with its line), or the end.
fn quoted_end(b: &[u8], mut i: usize, quote: u8) -> usize {
    while let Some(&c) = b.get(i) {
        if c == quote {
            return i + 1;
        }
        match c {
            b'\n' => return i,
            b'\\' => {
                i +=
                    if b.get(i + 1) == Some(&b'\r') && b.get(i + 2) == Some(&b'\n') { 3 } else { 2 }
            }
            _ => i += 1,
        }
    }
    b.len()
}

/// End of a raw string literal whose opening quote is at `quote`, or `None` when what follows
/// is not a valid raw-string delimiter (then it is an ordinary string).
fn raw_string_end(b: &[u8], quote: usize) -> Option<usize> {
    let open = quote + 1;
    let mut paren = open;
    loop {
        match b.get(paren) {
            Some(b'(') => break,
            Some(c) if !matches!(c, b' ' | b')' | b'\\' | b'\t' | b'\n' | b'\r' | b'"') => {
                paren += 1;
                if paren - open > 16 {
                    return None;
                }
            }
            _ => return None,
        }
    }
    let delim = &b[open..paren];
    let mut i = paren + 1;
    while let Some(p) = b.get(i..).and_then(|rest| rest.iter().position(|&c| c == b')')) {
        let close = i + p;
        let after = close + 1 + delim.len();
        if b.get(close + 1..after) == Some(delim) && b.get(after) == Some(&b'"') {
            return Some(after + 1);
        }
        i = close + 1;
    }
    Some(b.len())
}

/// A token of a directive line or of an `#if` expression (multi-character punctuators merged).
#[derive(Debug, Clone, Copy)]
struct PTok {
    kind: Lx,
    start: usize,
    end: usize,
}

const MULTI_PUNCT: &[&[u8]] =
    &[b"...", b"##", b"&&", b"||", b"==", b"!=", b"<=", b">=", b"<<", b">>", b"::"];

/// The significant tokens of `b[range]` (whitespace, comments and splices dropped).
fn dir_tokens(b: &[u8], range: Range<usize>) -> Vec<PTok> {
    let mut toks = Vec::new();
    let mut i = range.start;
    while i < range.end {
        let (kind, end) = lex_at(b, i);
        let mut end = end.min(range.end);
        match kind {
            Lx::Space | Lx::Comment | Lx::Newline => {}
            Lx::Punct => {
                if let Some(p) = MULTI_PUNCT
                    .iter()
                    .find(|p| i + p.len() <= range.end && b.get(i..i + p.len()) == Some(**p))
                {
                    end = i + p.len();
                }
                toks.push(PTok { kind, start: i, end });
            }
            _ => toks.push(PTok { kind, start: i, end }),
        }
        i = end;
    }
    toks
}

/// `text[range]` with comments replaced by one space, whitespace runs collapsed to one space,
/// line splices removed, and the ends trimmed (how C treats a directive's text).
fn clean(text: &str, range: Range<usize>) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(range.len());
    let mut i = range.start;
    while i < range.end {
        let (kind, end) = lex_at(b, i);
        let end = end.min(range.end);
        match kind {
            Lx::Space | Lx::Comment | Lx::Newline => {
                if !out.is_empty() && !out.ends_with(' ') {
                    out.push(' ');
                }
            }
            Lx::Str | Lx::Char => {
                let lit = text.get(i..end).unwrap_or("");
                if lit.contains("\\\n") || lit.contains("\\\r\n") {
                    out.push_str(&lit.replace("\\\r\n", "").replace("\\\n", ""));
                } else {
                    out.push_str(lit);
                }
            }
            _ => out.push_str(text.get(i..end).unwrap_or("")),
        }
        i = end;
    }
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    out
}

/// `(content_end, line_end)` of the directive whose `#` is at `hash`: the logical line ends at
/// the first newline that is not spliced away or inside a block comment.
fn directive_extent(b: &[u8], hash: usize) -> (usize, usize) {
    let mut i = hash + 1;
    while i < b.len() {
        let (kind, end) = lex_at(b, i);
        if kind == Lx::Newline {
            return (i, end);
        }
        i = end;
    }
    (b.len(), b.len())
}

/// The directive name after the `#` at `hash` (empty for a null directive or a non-identifier).
fn directive_name(b: &[u8], hash: usize, content_end: usize) -> (&[u8], usize) {
    let mut i = hash + 1;
    while i < content_end {
        let (kind, end) = lex_at(b, i);
        match kind {
            Lx::Space | Lx::Comment => i = end,
            Lx::Ident => return (&b[i..end.min(content_end)], end.min(content_end)),
            _ => return (&[], i),
        }
    }
    (&[], content_end)
}

/// Whether the `#` at `hash` (first token of a tileflow line) starts a directive there.
fn is_tileflow_directive(b: &[u8], hash: usize) -> bool {
    let (content_end, _) = directive_extent(b, hash);
    let (name, after) = directive_name(b, hash, content_end);
    if name.is_empty() {
        // A lone `#` is the null directive; `#` followed by anything else is Choreo text.
        return dir_tokens(b, after..content_end).is_empty();
    }
    TILEFLOW_DIRECTIVES.iter().any(|d| d.as_bytes() == name)
}

// ---------------------------------------------------------------------------------------------
// Macros
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Macro {
    name: String,
    /// `None` for object-like macros.
    params: Option<Vec<String>>,
    variadic: bool,
    /// The name standing for the variable arguments: `__VA_ARGS__`, or `args` for GNU `args...`.
    va_name: String,
    body: String,
    /// The name in its `#define` (an empty span at 0 for `-D`).
    def: Span,
    /// Defined by a `-D` option (there is no `#define` to point at).
    from_command_line: bool,
    /// What makes it unusable in tileflow code (`##`, `#param`), if anything.
    unsupported: Option<&'static str>,
    /// The unsupported feature was already reported where the macro was defined.
    reported: bool,
}

impl Macro {
    /// Adds "defined here" (or a note naming the -D option) to `diag`.
    fn explain_definition(&self, diag: Diagnostic, what: &str) -> Diagnostic {
        if self.from_command_line {
            diag.with_note(format!("'{}' is {what} by a -D option", self.name))
        } else {
            diag.with_secondary(self.def, format!("{what} here"))
        }
    }

    fn same_definition(&self, other: &Macro) -> bool {
        self.params == other.params
            && self.variadic == other.variadic
            && self.va_name == other.va_name
            && self.body.split_whitespace().eq(other.body.split_whitespace())
    }
}

type MacroTable = HashMap<String, Macro, BuildNameHasher>;
/// The per-function overlay: `None` records an `#undef` of a global macro.
type LocalTable = HashMap<String, Option<Macro>, BuildNameHasher>;

/// A fast non-cryptographic hasher for macro names (the FxHash mixing step). Every identifier
/// of tileflow code is looked up, so SipHash would dominate expansion time; the tables are
/// built from one trusted file, so hash flooding is not a concern.
#[derive(Debug, Clone, Copy, Default)]
struct BuildNameHasher;

impl std::hash::BuildHasher for BuildNameHasher {
    type Hasher = NameHasher;
    fn build_hasher(&self) -> NameHasher {
        NameHasher(0)
    }
}

struct NameHasher(u64);

impl std::hash::Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
        for &byte in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(byte)).wrapping_mul(K);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

fn lookup<'t>(
    globals: &'t MacroTable,
    local: Option<&'t LocalTable>,
    name: &str,
) -> Option<&'t Macro> {
    match local.and_then(|l| l.get(name)) {
        Some(entry) => entry.as_ref(),
        None => globals.get(name),
    }
}

struct DefineError {
    message: String,
    range: Range<usize>,
}

/// A parsed `#define`: the macro (its `def` span still unset), where its name is, and where an
/// unsupported operator is (if any).
struct ParsedDefine {
    m: Macro,
    name: Range<usize>,
    unsupported_at: Option<Range<usize>>,
}

/// Parses the text of a `#define` after the directive name (`text[range]`).
fn parse_define(text: &str, range: Range<usize>) -> Result<ParsedDefine, DefineError> {
    let b = text.as_bytes();
    let toks = dir_tokens(b, range.clone());
    let tok_text = |t: &PTok| text.get(t.start..t.end).unwrap_or("");
    let Some(name_tok) = toks.first().copied() else {
        return Err(DefineError {
            message: "'#define' needs a macro name".into(),
            range: range.start..range.start,
        });
    };
    if name_tok.kind != Lx::Ident {
        return Err(DefineError {
            message: format!("macro name must be an identifier, found '{}'", tok_text(&name_tok)),
            range: name_tok.start..name_tok.end,
        });
    }
    let name = tok_text(&name_tok).to_string();
    if name == "defined" {
        return Err(DefineError {
            message: "'defined' cannot be used as a macro name".into(),
            range: name_tok.start..name_tok.end,
        });
    }
    let mut params = None;
    let mut variadic = false;
    let mut va_name = "__VA_ARGS__".to_string();
    let mut body_start = name_tok.end;
    let mut next = 1;
    if b.get(name_tok.end) == Some(&b'(') {
        // Function-like: `(` directly after the name.
        let mut list = Vec::new();
        next = 2;
        let mut expect_param = true;
        loop {
            let Some(t) = toks.get(next).copied() else {
                return Err(DefineError {
                    message: format!("missing ')' in the parameter list of macro '{name}'"),
                    range: name_tok.start..range.end,
                });
            };
            next += 1;
            let s = tok_text(&t);
            match (expect_param, t.kind, s) {
                (_, Lx::Punct, ")") if !expect_param || list.is_empty() => {
                    body_start = t.end;
                    break;
                }
                (true, Lx::Ident, _) if !variadic => {
                    if s == "__VA_ARGS__" || list.iter().any(|p: &String| p == s) {
                        return Err(DefineError {
                            message: format!("invalid or duplicate macro parameter '{s}'"),
                            range: t.start..t.end,
                        });
                    }
                    list.push(s.to_string());
                    expect_param = false;
                }
                (true, Lx::Punct, "...") if !variadic => {
                    variadic = true;
                    expect_param = false;
                }
                (false, Lx::Punct, "...") if !variadic => {
                    // GNU named variadic parameter: `args...`.
                    variadic = true;
                    va_name = list.pop().unwrap_or(va_name);
                }
                (false, Lx::Punct, ",") if !variadic => expect_param = true,
                _ => {
                    return Err(DefineError {
                        message: format!(
                            "unexpected '{s}' in the parameter list of macro '{name}'"
                        ),
                        range: t.start..t.end,
                    });
                }
            }
        }
        params = Some(list);
    }
    // Unsupported operators: `##` anywhere; `#` before a parameter of a function-like macro
    // (in object-like macros `#` is Choreo's upper-bound operator).
    let mut unsupported = None;
    for (k, t) in toks.iter().enumerate().skip(next) {
        let s = tok_text(t);
        if s == "##" {
            unsupported = Some(("token pasting ('##')", t.start..t.end));
            break;
        }
        if s == "#" {
            if let (Some(ps), Some(operand)) = (&params, toks.get(k + 1)) {
                let op = tok_text(operand);
                if ps.iter().any(|p| p == op) || (variadic && op == va_name) {
                    unsupported = Some(("stringising ('#')", t.start..operand.end));
                    break;
                }
            }
        }
    }
    let mut body = clean(text, body_start..range.end);
    if body.is_empty() && params.is_none() {
        // Spec §3 ⚠: `#define NAME` means `1`.
        body.push('1');
    }
    let (what, at) = match unsupported {
        Some((what, at)) => (Some(what), Some(at)),
        None => (None, None),
    };
    let m = Macro {
        name,
        params,
        variadic,
        va_name,
        body,
        def: Span::point(FileId(0), 0),
        from_command_line: false,
        unsupported: what,
        reported: false,
    };
    Ok(ParsedDefine { m, name: name_tok.start..name_tok.end, unsupported_at: at })
}

// ---------------------------------------------------------------------------------------------
// Expansion
// ---------------------------------------------------------------------------------------------

/// Receives the pieces of a scanned text: verbatim runs and expansions.
trait Sink {
    fn verbatim(&mut self, text: &str, origin: Range<usize>);
    fn expansion(&mut self, text: &str, invocation: Range<usize>);
    fn len(&self) -> usize;
}

struct StrSink<'s>(&'s mut String);

impl Sink for StrSink<'_> {
    fn verbatim(&mut self, text: &str, _origin: Range<usize>) {
        self.0.push_str(text);
    }
    fn expansion(&mut self, text: &str, _invocation: Range<usize>) {
        self.0.push_str(text);
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

struct OutSink<'s> {
    out: &'s mut Expanded,
    file: FileId,
}

impl Sink for OutSink<'_> {
    fn verbatim(&mut self, text: &str, origin: Range<usize>) {
        self.out.push_verbatim(text, Span::new(self.file, origin));
    }
    fn expansion(&mut self, text: &str, invocation: Range<usize>) {
        self.out.push_generated(text, Span::new(self.file, invocation));
    }
    fn len(&self) -> usize {
        self.out.text.len()
    }
}

enum Args {
    /// The name is not followed by `(`: not an invocation.
    NotCall,
    /// No closing `)` before the end of the text.
    Unterminated,
    /// The arguments (comments and newlines turned into spaces, trimmed) and the end of the
    /// invocation.
    Call(Vec<String>, usize),
}

/// Collects the arguments of a function-like macro invocation whose name ends at `pos`.
fn collect_args(text: &str, pos: usize, limit: usize) -> Args {
    let b = text.as_bytes();
    let mut j = pos;
    loop {
        if j >= limit {
            return Args::NotCall;
        }
        let (kind, end) = lex_at(b, j);
        match kind {
            Lx::Space | Lx::Comment | Lx::Newline => j = end,
            Lx::Punct if b[j] == b'(' => {
                j = end;
                break;
            }
            _ => return Args::NotCall,
        }
    }
    let mut args = Vec::new();
    let mut current = String::new();
    let mut parens = 0usize;
    let mut others = 0usize;
    while j < limit {
        let (kind, end) = lex_at(b, j);
        let end = end.min(limit);
        let piece = text.get(j..end).unwrap_or("");
        match kind {
            Lx::Space | Lx::Comment | Lx::Newline => {
                if !current.ends_with(' ') {
                    current.push(' ');
                }
            }
            Lx::Punct => match b[j] {
                b'(' => {
                    parens += 1;
                    current.push('(');
                }
                b')' if parens == 0 => {
                    args.push(current.trim().to_string());
                    return Args::Call(args, end);
                }
                b')' => {
                    parens -= 1;
                    current.push(')');
                }
                b'[' | b'{' => {
                    others += 1;
                    current.push_str(piece);
                }
                b']' | b'}' => {
                    others = others.saturating_sub(1);
                    current.push_str(piece);
                }
                b',' if parens == 0 && others == 0 => {
                    args.push(current.trim().to_string());
                    current.clear();
                }
                _ => current.push_str(piece),
            },
            _ => current.push_str(piece),
        }
        j = end;
    }
    Args::Unterminated
}

/// For `#if` expressions: the end of a `defined X` / `defined(X)` / `__has_*(…)` operand that
/// starts with the identifier `name` at `start..end`, which must not be macro-expanded.
fn protected_operand(b: &[u8], name: &str, end: usize, limit: usize) -> Option<usize> {
    let skip_space = |mut i: usize| {
        while i < limit {
            match lex_at(b, i) {
                (Lx::Space | Lx::Comment | Lx::Newline, e) => i = e,
                _ => break,
            }
        }
        i
    };
    if name == "defined" {
        let i = skip_space(end);
        return Some(match lex_at(b, i) {
            (Lx::Ident, e) if i < limit => e.min(limit),
            (Lx::Punct, _) if b.get(i) == Some(&b'(') => {
                let j = skip_space(i + 1);
                match lex_at(b, j) {
                    (Lx::Ident, e) if j < limit => {
                        let k = skip_space(e.min(limit));
                        if b.get(k) == Some(&b')') { k + 1 } else { end }
                    }
                    _ => end,
                }
            }
            _ => end,
        });
    }
    if name.starts_with("__has_") {
        let i = skip_space(end);
        if b.get(i) != Some(&b'(') {
            return Some(end);
        }
        let mut depth = 0usize;
        let mut j = i;
        while j < limit {
            let (kind, e) = lex_at(b, j);
            if kind == Lx::Punct {
                match b[j] {
                    b'(' => depth += 1,
                    b')' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(e);
                        }
                    }
                    _ => {}
                }
            }
            j = e;
        }
        return Some(limit);
    }
    None
}

/// Macro expander over one text (a chunk of tileflow source or an `#if` expression).
struct Expander<'t> {
    globals: &'t MacroTable,
    local: Option<&'t LocalTable>,
    diags: &'t mut Diagnostics,
    file: FileId,
    /// Every location reported is this span (for `#if` / `#line` texts, which are not file text).
    fixed_site: Option<Span>,
    /// The top-level invocation being expanded: the location of nested errors.
    site: Span,
    /// An error was already reported for `site` (one error per invocation).
    site_failed: bool,
    /// The current invocation exceeded the size limit: stop all work on it.
    exhausted: bool,
    /// Tokens scanned inside expansions of the current invocation.
    steps: usize,
    /// Tokens scanned inside expansions of the whole file: bounds the work of a file that
    /// invokes an exploding macro many times (each invocation stops at its own limit).
    file_steps: usize,
    /// Keep `defined X` and `__has_*(…)` operands unexpanded (`#if` expressions).
    protect_defined: bool,
    /// Macros whose expansion is being rescanned (C's recursion guard).
    disabled: Vec<&'t str>,
}

impl<'t> Expander<'t> {
    fn new(
        globals: &'t MacroTable,
        local: Option<&'t LocalTable>,
        diags: &'t mut Diagnostics,
        file: FileId,
        fixed_site: Option<Span>,
    ) -> Expander<'t> {
        Expander {
            globals,
            local,
            diags,
            file,
            fixed_site,
            site: fixed_site.unwrap_or(Span::point(file, 0)),
            site_failed: false,
            exhausted: false,
            steps: 0,
            file_steps: 0,
            protect_defined: fixed_site.is_some(),
            disabled: Vec::new(),
        }
    }

    fn lookup(&self, name: &str) -> Option<&'t Macro> {
        let globals: &'t MacroTable = self.globals;
        lookup(globals, self.local, name)
    }

    /// E0120 for the current invocation; all further work on it stops.
    fn too_large(&mut self) {
        self.exhausted = true;
        let d = Diagnostic::error("E0120", self.site, "macro expansion is too large")
            .with_label("this expands to more than 1 MiB of text or 262144 tokens")
            .with_note("macros that use another macro or a parameter twice grow exponentially");
        self.report(d);
    }

    /// Reports `diag` unless the current invocation already has an error.
    fn report(&mut self, diag: Diagnostic) {
        if !self.site_failed {
            self.site_failed = true;
            self.diags.push(diag);
        }
    }

    /// Expands `text[range]` of the file into `out` (top level: byte-exact origins).
    fn expand_file_chunk(&mut self, text: &str, range: Range<usize>, out: &mut Expanded) {
        let file = self.file;
        self.scan(text, range, true, 0, 0, &mut OutSink { out, file });
    }

    /// Expands a whole standalone text (an `#if` or `#line` operand).
    fn expand_standalone(&mut self, text: &str) -> String {
        let mut s = String::with_capacity(text.len());
        self.scan(text, 0..text.len(), true, 0, 0, &mut StrSink(&mut s));
        s
    }

    /// Rescans generated text (a macro body or an argument).
    fn rescan(&mut self, text: &str, rounds: usize, nest: usize) -> String {
        let mut s = String::with_capacity(text.len());
        self.scan(text, 0..text.len(), false, rounds, nest, &mut StrSink(&mut s));
        s
    }

    fn scan(
        &mut self,
        text: &str,
        range: Range<usize>,
        top: bool,
        rounds: usize,
        nest: usize,
        sink: &mut dyn Sink,
    ) {
        let b = text.as_bytes();
        let mut i = range.start;
        let mut run = i;
        while i < range.end {
            if !top {
                self.steps += 1;
                self.file_steps += 1;
                if self.exhausted
                    || sink.len() > MAX_EXPANSION_BYTES
                    || self.steps > MAX_EXPANSION_STEPS
                    || self.file_steps > MAX_FILE_EXPANSION_STEPS
                {
                    if !self.exhausted {
                        self.too_large();
                    }
                    return;
                }
            }
            if is_plain_byte(b[i]) {
                i += 1;
                continue;
            }
            let (kind, end) = lex_at(b, i);
            let end = end.min(range.end);
            if kind != Lx::Ident || (i > 0 && b[i - 1] == b'.') {
                // `x.at`: a name right after `.` is a member-ish token, never a macro.
                i = end;
                continue;
            }
            let name = text.get(i..end).unwrap_or("");
            if self.protect_defined {
                if let Some(skip) = protected_operand(b, name, end, range.end) {
                    i = skip.max(end);
                    continue;
                }
            }
            let Some(m) = self.lookup(name) else {
                i = end;
                continue;
            };
            if self.disabled.contains(&name) {
                i = end;
                continue;
            }
            let (inv_end, args) = match m.params {
                None => (end, None),
                Some(_) => match collect_args(text, end, range.end) {
                    Args::NotCall => {
                        i = end;
                        continue;
                    }
                    Args::Unterminated => {
                        let span = self.fixed_site.unwrap_or(if top {
                            Span::new(self.file, i..end)
                        } else {
                            self.site
                        });
                        let d = Diagnostic::error(
                            "E0111",
                            span,
                            format!("unterminated invocation of macro '{name}'"),
                        )
                        .with_label("no matching ')' for this invocation")
                        .with_help(
                            "arguments may span lines but not directives; close the parenthesis",
                        );
                        self.report(d);
                        i = end;
                        continue;
                    }
                    Args::Call(args, e) => (e, Some(args)),
                },
            };
            if top {
                self.site = self.fixed_site.unwrap_or(Span::new(self.file, i..inv_end));
                self.site_failed = false;
                self.exhausted = false;
                self.steps = 0;
            }
            let invocation = text.get(i..inv_end).unwrap_or("");
            let mut expansion = self.expand_macro(m, args, invocation, rounds, nest);
            if top && self.exhausted {
                // E0120 was reported for this invocation: its partial expansion (up to a
                // mebibyte) is meaningless, and lexing it would cost more than producing it.
                expansion.clear();
            }
            // Keep the line structure: an invocation spanning lines is followed by as many
            // newlines (the expansion itself never contains one).
            let newlines = invocation.bytes().filter(|&c| c == b'\n').count();
            if newlines > 0 {
                expansion = expansion.replace(['\n', '\r'], " ");
                expansion.extend(std::iter::repeat_n('\n', newlines));
            }
            sink.verbatim(text.get(run..i).unwrap_or(""), run..i);
            sink.expansion(&expansion, i..inv_end);
            i = inv_end;
            run = i;
        }
        let end = range.end.max(run);
        sink.verbatim(text.get(run..end).unwrap_or(""), run..end);
    }

    fn expand_macro(
        &mut self,
        m: &'t Macro,
        args: Option<Vec<String>>,
        invocation: &str,
        rounds: usize,
        nest: usize,
    ) -> String {
        if self.exhausted {
            return invocation.to_string();
        }
        if let Some(what) = m.unsupported {
            if !m.reported {
                let mut d = Diagnostic::error(
                    "E0112",
                    self.site,
                    format!("{what} is not supported in Choreo macros"),
                )
                .with_label(format!("macro '{}' uses {what}", m.name))
                .with_help("write the expansion out, or use a macro without '#'/'##'");
                d = m.explain_definition(d, "defined");
                self.report(d);
            }
            return invocation.to_string();
        }
        if rounds >= MAX_EXPANSION_ROUNDS {
            let d = Diagnostic::error(
                "E0109",
                self.site,
                format!(
                    "macro expansion did not reach a fixed point after {MAX_EXPANSION_ROUNDS} rounds"
                ),
            )
            .with_label(format!("'{}' is expanded more than {MAX_EXPANSION_ROUNDS} levels deep", m.name))
            .with_help("look for a chain of macros that expand into each other");
            self.report(d);
            return invocation.to_string();
        }
        let substituted;
        let body: &str = match (&m.params, args) {
            (Some(params), Some(mut args)) => {
                if params.is_empty() && args.len() == 1 && args[0].is_empty() {
                    args.clear();
                }
                let arity_ok = if m.variadic {
                    args.len() >= params.len() || (params.is_empty() && args.is_empty())
                } else {
                    args.len() == params.len()
                };
                if !arity_ok {
                    let expected = if m.variadic {
                        format!("at least {}", params.len())
                    } else {
                        params.len().to_string()
                    };
                    let d = Diagnostic::error(
                        "E0110",
                        self.site,
                        format!(
                            "macro '{}' expects {expected} argument{}, but {} {} given",
                            m.name,
                            if params.len() == 1 && !m.variadic { "" } else { "s" },
                            args.len(),
                            if args.len() == 1 { "was" } else { "were" }
                        ),
                    )
                    .with_label("wrong number of arguments");
                    let d = m.explain_definition(d, "defined");
                    self.report(d);
                    return invocation.to_string();
                }
                if nest >= MAX_ARG_NESTING {
                    let d = Diagnostic::error(
                        "E0122",
                        self.site,
                        format!(
                            "macro invocations are nested more than {MAX_ARG_NESTING} deep in arguments"
                        ),
                    )
                    .with_label("nested too deeply");
                    self.report(d);
                    return invocation.to_string();
                }
                let mut expanded = Vec::with_capacity(args.len());
                for arg in &args {
                    expanded.push(self.rescan(arg, rounds, nest + 1));
                }
                let va_args = if m.variadic {
                    expanded[params.len().min(expanded.len())..].join(", ")
                } else {
                    String::new()
                };
                let va = m.variadic.then_some((m.va_name.as_str(), va_args.as_str()));
                match substitute(&m.body, params, &expanded, va) {
                    Some(body) => {
                        substituted = body;
                        &substituted
                    }
                    None => {
                        self.too_large();
                        return invocation.to_string();
                    }
                }
            }
            _ => &m.body,
        };
        self.disabled.push(m.name.as_str());
        let result = self.rescan(body, rounds + 1, nest);
        self.disabled.pop();
        result
    }
}

/// Replaces the parameters in a function-like macro body by their (expanded) arguments;
/// `va` is the variadic parameter's name and value. `None` when the result exceeds the
/// expansion size limit.
fn substitute(
    body: &str,
    params: &[String],
    args: &[String],
    va: Option<(&str, &str)>,
) -> Option<String> {
    let b = body.as_bytes();
    let mut out = String::with_capacity(body.len() + args.iter().map(String::len).sum::<usize>());
    let mut i = 0;
    while i < b.len() {
        let (kind, end) = lex_at(b, i);
        let end = end.min(b.len());
        let piece = body.get(i..end).unwrap_or("");
        if kind == Lx::Ident && !(i > 0 && b[i - 1] == b'.') {
            if let Some(k) = params.iter().position(|p| p == piece) {
                out.push_str(args.get(k).map_or("", String::as_str));
            } else if let Some((_, value)) = va.filter(|(name, _)| *name == piece) {
                out.push_str(value);
            } else {
                out.push_str(piece);
            }
        } else {
            out.push_str(piece);
        }
        if out.len() > MAX_EXPANSION_BYTES {
            return None;
        }
        i = end;
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------------
// `#if` evaluation
// ---------------------------------------------------------------------------------------------

struct Eval<'e> {
    text: &'e str,
    toks: Vec<PTok>,
    pos: usize,
    globals: &'e MacroTable,
    local: Option<&'e LocalTable>,
    /// The first error: code and message.
    error: Option<(&'static str, String)>,
    /// A `__has_*` built-in was used (its value 0 is a guess).
    uncertain: bool,
}

impl<'e> Eval<'e> {
    fn peek(&self) -> &'e str {
        let text: &'e str = self.text;
        self.toks.get(self.pos).map_or("", |t| text.get(t.start..t.end).unwrap_or(""))
    }

    fn peek_kind(&self) -> Option<Lx> {
        self.toks.get(self.pos).map(|t| t.kind)
    }

    fn fail(&mut self, code: &'static str, message: String) -> i64 {
        if self.error.is_none() {
            self.error = Some((code, message));
        }
        0
    }

    fn expect(&mut self, s: &str) {
        if self.peek() == s {
            self.pos += 1;
        } else {
            let found = self.describe_peek();
            self.fail("E0105", format!("expected '{s}' in '#if' expression, found {found}"));
        }
    }

    fn describe_peek(&self) -> String {
        match self.peek() {
            "" => "the end of the line".to_string(),
            s => format!("'{s}'"),
        }
    }

    /// `cond ? a : b` (right-associative), the loosest level.
    fn expr(&mut self, eval: bool, depth: usize) -> i64 {
        let c = self.binary(1, eval, depth);
        if self.peek() != "?" {
            return c;
        }
        self.pos += 1;
        let a = self.expr(eval && c != 0, depth + 1);
        self.expect(":");
        let b = self.expr(eval && c == 0, depth + 1);
        if c != 0 { a } else { b }
    }

    fn binary(&mut self, min_prec: u8, eval: bool, depth: usize) -> i64 {
        let mut lhs = self.unary(eval, depth);
        while self.error.is_none() {
            let (prec, op) = match self.peek() {
                "||" | "or" => (1, "||"),
                "&&" | "and" => (2, "&&"),
                "|" | "bitor" => (3, "|"),
                "^" | "xor" => (4, "^"),
                "&" | "bitand" => (5, "&"),
                "!=" | "not_eq" => (6, "!="),
                op @ "==" => (6, op),
                op @ ("<" | ">" | "<=" | ">=") => (7, op),
                op @ ("<<" | ">>") => (8, op),
                op @ ("+" | "-") => (9, op),
                op @ ("*" | "/" | "%") => (10, op),
                _ => break,
            };
            if prec < min_prec {
                break;
            }
            self.pos += 1;
            let rhs_eval = match op {
                "&&" => eval && lhs != 0,
                "||" => eval && lhs == 0,
                _ => eval,
            };
            let rhs = self.binary(prec + 1, rhs_eval, depth + 1);
            lhs = match op {
                "||" => i64::from(lhs != 0 || rhs != 0),
                "&&" => i64::from(lhs != 0 && rhs != 0),
                "|" => lhs | rhs,
                "^" => lhs ^ rhs,
                "&" => lhs & rhs,
                "==" => i64::from(lhs == rhs),
                "!=" => i64::from(lhs != rhs),
                "<" => i64::from(lhs < rhs),
                ">" => i64::from(lhs > rhs),
                "<=" => i64::from(lhs <= rhs),
                ">=" => i64::from(lhs >= rhs),
                "<<" => match u32::try_from(rhs) {
                    Ok(s) if s < 64 => lhs.wrapping_shl(s),
                    _ => 0,
                },
                ">>" => match u32::try_from(rhs) {
                    Ok(s) if s < 64 => lhs >> s,
                    _ if lhs < 0 => -1,
                    _ => 0,
                },
                "+" => lhs.wrapping_add(rhs),
                "-" => lhs.wrapping_sub(rhs),
                "*" => lhs.wrapping_mul(rhs),
                "/" | "%" if rhs == 0 => {
                    if eval {
                        self.fail("E0106", "division by zero in '#if' expression".into());
                    }
                    0
                }
                "/" => lhs.wrapping_div(rhs),
                _ => lhs.wrapping_rem(rhs),
            };
        }
        lhs
    }

    fn unary(&mut self, eval: bool, depth: usize) -> i64 {
        if depth > MAX_EXPR_DEPTH {
            return self.fail("E0105", "'#if' expression is nested too deeply".into());
        }
        let tok = self.peek();
        match (self.peek_kind(), tok) {
            (None, _) => self.fail(
                "E0105",
                "expected a value in '#if' expression, found the end of the line".into(),
            ),
            (Some(Lx::Punct), "!") | (Some(Lx::Ident), "not") => {
                self.pos += 1;
                i64::from(self.unary(eval, depth + 1) == 0)
            }
            (Some(Lx::Punct), "~") | (Some(Lx::Ident), "compl") => {
                self.pos += 1;
                !self.unary(eval, depth + 1)
            }
            (Some(Lx::Punct), "-") => {
                self.pos += 1;
                self.unary(eval, depth + 1).wrapping_neg()
            }
            (Some(Lx::Punct), "+") => {
                self.pos += 1;
                self.unary(eval, depth + 1)
            }
            (Some(Lx::Punct), "(") => {
                self.pos += 1;
                let v = self.expr(eval, depth + 1);
                self.expect(")");
                v
            }
            (Some(Lx::Number), _) => {
                let s = tok;
                self.pos += 1;
                match parse_pp_int(s) {
                    Some(v) => v,
                    None => self.fail("E0105", format!("'{s}' is not an integer constant")),
                }
            }
            (Some(Lx::Char), _) => {
                self.pos += 1;
                char_value(tok)
            }
            (Some(Lx::Str), _) => {
                self.fail("E0105", "a string literal cannot be used in '#if'".into())
            }
            (Some(Lx::Ident), "defined") => {
                self.pos += 1;
                let paren = self.peek() == "(";
                if paren {
                    self.pos += 1;
                }
                if self.peek_kind() != Some(Lx::Ident) {
                    let found = self.describe_peek();
                    return self
                        .fail("E0105", format!("'defined' needs a macro name, found {found}"));
                }
                let name = self.peek();
                self.pos += 1;
                if paren {
                    self.expect(")");
                }
                i64::from(lookup(self.globals, self.local, name).is_some())
            }
            (Some(Lx::Ident), _) => {
                let name = tok;
                self.pos += 1;
                if self.peek() == "(" {
                    if name.starts_with("__has_") {
                        self.uncertain = true;
                        self.skip_parens();
                        return 0;
                    }
                    return self.fail(
                        "E0105",
                        format!(
                            "'{name}' is not a function-like macro here, so '(' cannot follow it"
                        ),
                    );
                }
                match name {
                    "true" => 1,
                    _ => 0, // `false` and unknown identifiers (spec §3)
                }
            }
            (Some(_), _) => {
                let found = self.describe_peek();
                self.fail("E0105", format!("expected a value in '#if' expression, found {found}"))
            }
        }
    }

    fn skip_parens(&mut self) {
        let mut depth = 0usize;
        while let Some(t) = self.toks.get(self.pos) {
            let s = self.text.get(t.start..t.end).unwrap_or("");
            self.pos += 1;
            match s {
                "(" => depth += 1,
                ")" => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return;
                    }
                }
                _ => {}
            }
        }
    }
}

/// Value of a pp-number in `#if`: integer with optional `u`/`l`/`z` suffixes and `'` separators.
fn parse_pp_int(s: &str) -> Option<i64> {
    let digits = s.trim_end_matches(['u', 'U', 'l', 'L', 'z', 'Z']).replace('\'', "");
    let (radix, body) = if let Some(h) = digits.strip_prefix("0x").or(digits.strip_prefix("0X")) {
        (16, h)
    } else if let Some(bin) = digits.strip_prefix("0b").or(digits.strip_prefix("0B")) {
        (2, bin)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits.as_str())
    };
    if body.is_empty() {
        return None;
    }
    u64::from_str_radix(body, radix).ok().map(|v| v as i64)
}

/// Value of a character literal (`'a'`, `'\n'`, `'\x41'`, `L'a'`; multi-character literals
/// combine bytes like GCC).
fn char_value(s: &str) -> i64 {
    let inner = s.find('\'').map_or("", |q| &s[q + 1..]);
    let inner = inner.strip_suffix('\'').unwrap_or(inner);
    let mut chars = inner.chars().peekable();
    let mut value: i64 = 0;
    while let Some(c) = chars.next() {
        let v = if c == '\\' {
            match chars.next() {
                Some('n') => 10,
                Some('t') => 9,
                Some('r') => 13,
                Some('a') => 7,
                Some('b') => 8,
                Some('f') => 12,
                Some('v') => 11,
                Some('x') => {
                    let mut v: i64 = 0;
                    while let Some(d) = chars.peek().and_then(|c| c.to_digit(16)) {
                        v = v.wrapping_mul(16).wrapping_add(i64::from(d));
                        chars.next();
                    }
                    v
                }
                Some(d @ '0'..='7') => {
                    let mut v = i64::from(d.to_digit(8).unwrap_or(0));
                    for _ in 0..2 {
                        match chars.peek().and_then(|c| c.to_digit(8)) {
                            Some(d) => {
                                v = v * 8 + i64::from(d);
                                chars.next();
                            }
                            None => break,
                        }
                    }
                    v
                }
                Some(other) => i64::from(u32::from(other)),
                None => 0,
            }
        } else {
            i64::from(u32::from(c))
        };
        value = value.wrapping_shl(8) | v;
    }
    value
}

// ---------------------------------------------------------------------------------------------
// Conditionals
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
struct CondFrame {
    /// The opening `#if…` directive.
    directive: Span,
    /// Whether the enclosing text is live.
    parent_live: bool,
    /// Whether the current branch is live.
    live: bool,
    /// Whether some branch was already taken.
    taken: bool,
    seen_else: bool,
    /// A condition of this chain used `__has_*` (value guessed as 0).
    uncertain: Option<Span>,
    /// W0103 was already given for this frame.
    warned: bool,
}

#[derive(Debug, Default)]
struct Conds {
    frames: Vec<CondFrame>,
    too_deep_reported: bool,
}

impl Conds {
    fn live(&self) -> bool {
        self.frames.last().is_none_or(|f| f.live)
    }
}

// ---------------------------------------------------------------------------------------------
// The scanner
// ---------------------------------------------------------------------------------------------

/// Where a directive appears.
enum Mode<'m> {
    Host,
    Tileflow { local: &'m mut LocalTable, out: &'m mut Expanded },
}

impl Mode<'_> {
    fn local(&self) -> Option<&LocalTable> {
        match self {
            Mode::Host => None,
            Mode::Tileflow { local, .. } => Some(&**local),
        }
    }

    fn is_tileflow(&self) -> bool {
        matches!(self, Mode::Tileflow { .. })
    }
}

/// Host brace nesting, to know whether a `__device__` declaration is at file scope. Braces
/// opened by `namespace … {` and `extern "…" {` keep namespace scope, so they do not count.
#[derive(Debug, Default)]
struct HostScope {
    /// What each open brace opened.
    braces: Vec<Brace>,
    /// How many open braces leave namespace scope.
    opaque: usize,
    /// How many open braces are namespace bodies.
    namespaces: usize,
    header: ScopeHeader,
}

/// What an open host brace belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Brace {
    /// A class, function, initialiser or block: leaves namespace scope.
    Opaque,
    /// A `namespace … { }` body.
    Namespace,
    /// An `extern "…" { }` linkage block (stays at file scope).
    Linkage,
}

/// What the significant tokens before a `{` announce.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum ScopeHeader {
    #[default]
    Other,
    /// `namespace`, optionally followed by a (qualified) name.
    Namespace,
    /// `extern`.
    Extern,
    /// `extern "C"`.
    ExternLanguage,
}

impl HostScope {
    fn at_file_scope(&self) -> bool {
        self.opaque == 0
    }

    /// At file scope and outside every namespace: where the global `main` is defined.
    fn at_global_scope(&self) -> bool {
        self.opaque == 0 && self.namespaces == 0
    }

    /// Feeds one significant token of live host text.
    fn token(&mut self, kind: Lx, text: &[u8]) {
        use ScopeHeader::*;
        self.header = match (kind, text, self.header) {
            (Lx::Ident, b"namespace", _) => Namespace,
            (Lx::Ident, b"extern", _) => Extern,
            (Lx::Str, _, Extern) => ExternLanguage,
            (Lx::Ident, _, Namespace) | (Lx::Punct, b":", Namespace) => Namespace,
            (Lx::Punct, b"{", header) => {
                let brace = match header {
                    Namespace => Brace::Namespace,
                    ExternLanguage => Brace::Linkage,
                    Other | Extern => Brace::Opaque,
                };
                self.opaque += usize::from(brace == Brace::Opaque);
                self.namespaces += usize::from(brace == Brace::Namespace);
                self.braces.push(brace);
                Other
            }
            (Lx::Punct, b"}", _) => {
                match self.braces.pop() {
                    Some(Brace::Opaque) => self.opaque -= 1,
                    Some(Brace::Namespace) => self.namespaces -= 1,
                    Some(Brace::Linkage) | None => {}
                }
                Other
            }
            _ => Other,
        };
    }
}

/// Whether the identifier that ends at `end` is the name of a function definition: followed by
/// a parenthesised parameter list and then, before any `;`, `=` or `,` outside parentheses and
/// brackets, by `{` (a trailing return type or `noexcept` may come between).
fn names_function_definition(b: &[u8], end: usize) -> bool {
    let mut pos = end;
    let mut depth = 0usize;
    let mut seen_params = false;
    while pos < b.len() {
        let (kind, next) = lex_at(b, pos);
        if kind == Lx::Punct {
            match b[pos] {
                b'(' | b'[' => depth += 1,
                b')' | b']' => {
                    depth = depth.saturating_sub(1);
                    seen_params = true;
                }
                b'{' if depth == 0 => return seen_params,
                b';' | b'=' | b',' if depth == 0 => return false,
                b'#' => return false,
                _ if !seen_params && depth == 0 => return false,
                _ => {}
            }
        } else if !seen_params
            && depth == 0
            && !matches!(kind, Lx::Space | Lx::Comment | Lx::Newline)
        {
            return false;
        }
        pos = next.min(b.len()).max(pos + 1);
    }
    false
}

/// Whether the significant text before `pos` makes the identifier there a qualified or member
/// name (`::main`, `x.main`, `p->main`).
fn is_qualified_at(b: &[u8], pos: usize) -> bool {
    let before = b[..pos].iter().rposition(|c| !c.is_ascii_whitespace());
    match before {
        Some(i) => match b[i] {
            b'.' => true,
            b':' | b'>' => i > 0 && b[i - 1] == if b[i] == b':' { b':' } else { b'-' },
            _ => false,
        },
        None => false,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CaptureKind {
    Device,
    Cok,
}

/// A verbatim capture in progress (`__device__` declaration or `__cok__` block).
struct Capture {
    kind: CaptureKind,
    start: usize,
    depth: usize,
    /// The outermost `{` follows `=`: the declaration ends at the `;` after the `}`.
    initializer: bool,
    body_start: usize,
}

struct Pp<'a> {
    src: &'a str,
    b: &'a [u8],
    file: FileId,
    diags: &'a mut Diagnostics,
    globals: MacroTable,
    regions: Vec<Region>,
    prefixes: Vec<String>,
    namespaces: Vec<String>,
    line_directives: Vec<LineDirective>,
    main_definitions: Vec<Span>,
}

impl<'a> Pp<'a> {
    fn span(&self, range: Range<usize>) -> Span {
        Span::new(self.file, range)
    }

    fn text(&self, range: Range<usize>) -> &'a str {
        self.src.get(range).unwrap_or("")
    }

    /// Installs the `-D` definitions.
    fn predefine(&mut self, options: &PreprocessOptions) {
        for (name, value) in &options.defines {
            let value = value.as_deref().unwrap_or("1").replace(['\n', '\r'], " ");
            let text = format!("{name} {value}");
            let at = Span::point(self.file, 0);
            let (base, params) = match name.split_once('(') {
                Some((base, params)) => (base, Some(params)),
                None => (name.as_str(), None),
            };
            let valid_name = base.bytes().next().is_some_and(is_ident_start)
                && base.bytes().all(is_ident_continue)
                && params.is_none_or(|p| p.ends_with(')'));
            if !valid_name {
                self.diags.push(
                    Diagnostic::error("E0107", at, format!("invalid macro name '{name}' in -D"))
                        .with_label("not an identifier")
                        .with_help("use -DNAME, -DNAME=VALUE or -D'NAME(params)=VALUE'"),
                );
                continue;
            }
            match parse_define(&text, 0..text.len()) {
                Ok(ParsedDefine { mut m, .. }) => {
                    m.def = at;
                    m.from_command_line = true;
                    let existing = self.globals.get(&m.name);
                    if let Some(old) = existing.filter(|old| old.params.is_some()) {
                        if !old.same_definition(&m) {
                            self.diags.push(
                                Diagnostic::error(
                                    "E0108",
                                    at,
                                    format!("redefinition of function-like macro '{}'", m.name),
                                )
                                .with_label("defined differently before")
                                .with_note(format!("in the command-line definition -D{name}")),
                            );
                        }
                        continue;
                    }
                    self.globals.insert(m.name.clone(), m);
                }
                Err(e) => self.diags.push(
                    Diagnostic::error("E0107", at, format!("invalid -D definition: {}", e.message))
                        .with_label("invalid definition")
                        .with_note(format!("in the command-line definition -D{name}")),
                ),
            }
        }
    }

    /// The host-mode scan over the whole file.
    fn run(&mut self) {
        let b = self.b;
        let len = b.len();
        let mut conds = Conds::default();
        let mut pos = if self.src.starts_with('\u{feff}') { 3 } else { 0 };
        let mut line_blank = true;
        let mut host_start = 0;
        let mut scope = HostScope::default();
        let mut capture: Option<Capture> = None;
        let mut prev_significant = 0u8;
        while pos < len {
            if line_blank && b[pos] == b'#' {
                let (content_end, line_end) = directive_extent(b, pos);
                self.directive(&mut conds, &mut Mode::Host, pos, content_end, line_end);
                pos = line_end;
                continue;
            }
            let (kind, end) = lex_at(b, pos);
            let end = end.min(len);
            match kind {
                Lx::Newline => line_blank = true,
                Lx::Space | Lx::Comment => {}
                _ => line_blank = false,
            }
            if !conds.live() {
                if kind == Lx::Ident && &b[pos..end] == b"__co__" {
                    self.warn_uncertain(&mut conds, pos..end);
                }
                pos = end;
                continue;
            }
            let significant = !matches!(kind, Lx::Space | Lx::Comment | Lx::Newline);
            if significant && capture.is_none() {
                scope.token(kind, &b[pos..end]);
            }
            match kind {
                Lx::Ident if capture.is_none() => {
                    let word = &b[pos..end];
                    if word == b"__co__" {
                        self.warn_uncertain(&mut conds, pos..end);
                        self.push_host(host_start..pos);
                        let fn_end = self.co_function(pos);
                        host_start = fn_end;
                        pos = fn_end;
                        line_blank = false;
                        prev_significant = b'}';
                        continue;
                    }
                    if word == b"__cok__" {
                        match self.cok_brace(end) {
                            Some(brace) => {
                                self.push_host(host_start..pos);
                                capture = Some(Capture {
                                    kind: CaptureKind::Cok,
                                    start: pos,
                                    depth: 0,
                                    initializer: false,
                                    body_start: brace + 1,
                                });
                                pos = brace;
                                continue;
                            }
                            None => self.diags.push(
                                Diagnostic::error(
                                    "E0115",
                                    self.span(pos..end),
                                    "expected '{' after '__cok__'",
                                )
                                .with_label("a kernel block is written '__cok__ { … }'"),
                            ),
                        }
                    } else if word == b"main"
                        && scope.at_global_scope()
                        && !is_qualified_at(b, pos)
                        && names_function_definition(b, end)
                    {
                        self.main_definitions.push(self.span(pos..end));
                    } else if (word == b"__device__" || word == b"__co_device__")
                        && scope.at_file_scope()
                    {
                        self.push_host(host_start..pos);
                        capture = Some(Capture {
                            kind: CaptureKind::Device,
                            start: pos,
                            depth: 0,
                            initializer: false,
                            body_start: pos,
                        });
                    }
                }
                Lx::Punct => {
                    let c = b[pos];
                    if let Some(cap) = capture.as_mut() {
                        let mut finish = None;
                        match c {
                            b'{' => {
                                if cap.depth == 0 {
                                    cap.initializer = prev_significant == b'=';
                                }
                                cap.depth += 1;
                            }
                            b'}' if cap.depth == 0 => {
                                // A stray `}` ends a device declaration before it.
                                finish = Some((pos, pos));
                                scope.token(kind, b"}");
                            }
                            b'}' => {
                                cap.depth -= 1;
                                if cap.depth == 0
                                    && (cap.kind == CaptureKind::Cok || !cap.initializer)
                                {
                                    finish = Some((end, pos));
                                }
                            }
                            b';' if cap.depth == 0 && cap.kind == CaptureKind::Device => {
                                finish = Some((end, pos));
                            }
                            _ => {}
                        }
                        if let Some((region_end, body_end)) = finish {
                            if let Some(cap) = capture.take() {
                                self.finish_capture(&cap, region_end, body_end);
                                host_start = region_end;
                            }
                        }
                    }
                }
                _ => {}
            }
            if significant {
                prev_significant = if kind == Lx::Punct { b[pos] } else { 0 };
            }
            pos = end;
        }
        if let Some(cap) = capture.take() {
            let (code, what) = match cap.kind {
                CaptureKind::Device => ("E0116", "unterminated device declaration"),
                CaptureKind::Cok => ("E0115", "unterminated '__cok__' block"),
            };
            let keyword_end = ident_end(b, cap.start);
            self.diags.push(
                Diagnostic::error(code, self.span(cap.start..keyword_end), what)
                    .with_label("this declaration never ends")
                    .with_help("add the missing '}' or ';'"),
            );
            self.finish_capture(&cap, len, len);
            host_start = len;
        }
        self.push_host(host_start..len);
        self.missing_endifs(&mut conds);
    }

    fn push_host(&mut self, range: Range<usize>) {
        if range.start < range.end {
            self.regions.push(Region::Host { span: self.span(range) });
        }
    }

    fn finish_capture(&mut self, cap: &Capture, end: usize, body_end: usize) {
        let span = self.span(cap.start..end);
        match cap.kind {
            CaptureKind::Device => self.regions.push(Region::Device { span }),
            CaptureKind::Cok => {
                let body = self.span(cap.body_start.min(body_end)..body_end);
                self.regions.push(Region::Cok { span, body });
            }
        }
    }

    /// The position of the `{` that must follow `__cok__` (whitespace and comments allowed).
    fn cok_brace(&self, mut i: usize) -> Option<usize> {
        while i < self.b.len() {
            match lex_at(self.b, i) {
                (Lx::Space | Lx::Comment | Lx::Newline, e) => i = e,
                (Lx::Punct, _) if self.b[i] == b'{' => return Some(i),
                _ => return None,
            }
        }
        None
    }

    fn missing_endifs(&mut self, conds: &mut Conds) {
        for frame in conds.frames.drain(..) {
            self.diags.push(
                Diagnostic::error("E0102", frame.directive, "missing '#endif'")
                    .with_label("this conditional is never closed")
                    .with_help("add '#endif' after the conditional code"),
            );
        }
    }

    /// W0103 for a `__co__` function inside a host conditional that used `__has_*`.
    fn warn_uncertain(&mut self, conds: &mut Conds, keyword: Range<usize>) {
        let at = self.span(keyword);
        for frame in conds.frames.iter_mut() {
            if let (Some(cond), false) = (frame.uncertain, frame.warned) {
                frame.warned = true;
                self.diags.push(
                    Diagnostic::warning(
                        "W0103",
                        at,
                        "whether this '__co__' function is compiled depends on a condition Choreo cannot evaluate",
                    ).with_label("this function is conditional")
                    .with_secondary(cond, "'__has_*' is evaluated as 0 here")
                    .with_note("nvcc may evaluate the condition differently"),
                );
            }
        }
    }

    /// Scans a `__co__` function starting at the keyword; returns its end.
    fn co_function(&mut self, start: usize) -> usize {
        let b = self.b;
        let len = b.len();
        let keyword_end = start + "__co__".len();
        let mut out = Expanded::default();
        // The keyword itself is never macro-expanded: it is what makes this a function.
        out.push_verbatim(self.text(start..keyword_end), self.span(start..keyword_end));
        let mut local = LocalTable::default();
        let mut conds = Conds::default();
        let mut pos = keyword_end;
        let mut line_blank = false;
        let mut line_start = start;
        let mut chunk_start = keyword_end;
        let mut depth = 0usize;
        let mut seen_open = false;
        let mut end = None;
        while pos < len {
            if line_blank && b[pos] == b'#' && is_tileflow_directive(b, pos) {
                self.flush(&local, chunk_start..line_start, &mut out);
                let (content_end, line_end) = directive_extent(b, pos);
                let mut mode = Mode::Tileflow { local: &mut local, out: &mut out };
                self.directive(&mut conds, &mut mode, pos, content_end, line_end);
                self.push_newlines(&mut out, line_start..line_end);
                pos = line_end;
                line_start = line_end;
                chunk_start = line_end;
                continue;
            }
            let (kind, tok_end) = lex_at(b, pos);
            let tok_end = tok_end.min(len);
            match kind {
                Lx::Newline => line_blank = true,
                Lx::Space | Lx::Comment => {}
                _ => line_blank = false,
            }
            if !conds.live() {
                // Excluded lines become empty lines.
                self.push_newlines(&mut out, pos..tok_end);
                pos = tok_end;
                chunk_start = tok_end;
                if kind == Lx::Newline {
                    line_start = tok_end;
                }
                continue;
            }
            match kind {
                Lx::Newline => line_start = tok_end,
                Lx::Punct => match b[pos] {
                    b'{' => {
                        depth += 1;
                        seen_open = true;
                    }
                    b'}' if depth <= 1 => {
                        end = Some(tok_end);
                        break;
                    }
                    b'}' => depth -= 1,
                    b';' if !seen_open => {
                        end = Some(tok_end);
                        break;
                    }
                    _ => {}
                },
                _ => {}
            }
            pos = tok_end;
        }
        let fn_end = end.unwrap_or(len);
        if conds.live() {
            self.flush(&local, chunk_start..fn_end.max(chunk_start), &mut out);
        }
        if end.is_none() {
            self.diags.push(
                Diagnostic::error("E0114", self.span(start..keyword_end), "unterminated '__co__' function")
                    .with_label(if seen_open {
                        "the body of this function is never closed"
                    } else {
                        "this function has no body"
                    })
                    .with_help("add the missing '}' (braces in comments, strings and excluded lines do not count)"),
            );
        }
        self.missing_endifs(&mut conds);
        self.regions.push(Region::CoFunction { span: self.span(start..fn_end), text: out });
        fn_end
    }

    /// Macro-expands live tileflow text `range` into `out`.
    fn flush(&mut self, local: &LocalTable, range: Range<usize>, out: &mut Expanded) {
        if range.start >= range.end {
            return;
        }
        out.text.reserve(range.len());
        if self.globals.is_empty() && local.is_empty() {
            out.push_verbatim(self.text(range.clone()), self.span(range));
            return;
        }
        let mut ex = Expander::new(&self.globals, Some(local), &mut *self.diags, self.file, None);
        ex.expand_file_chunk(self.src, range, out);
    }

    /// Each newline of `range` as a one-byte verbatim piece (keeps line numbers of removed lines).
    fn push_newlines(&self, out: &mut Expanded, range: Range<usize>) {
        let bytes = self.b.get(range.clone()).unwrap_or(&[]);
        for (k, _) in bytes.iter().enumerate().filter(|(_, c)| **c == b'\n') {
            let at = range.start + k;
            out.push_verbatim("\n", self.span(at..at + 1));
        }
    }

    /// Handles the directive whose `#` is at `hash`.
    fn directive(
        &mut self,
        conds: &mut Conds,
        mode: &mut Mode<'_>,
        hash: usize,
        content_end: usize,
        line_end: usize,
    ) {
        let b = self.b;
        let (name_bytes, after) = directive_name(b, hash, content_end);
        let name = std::str::from_utf8(name_bytes).unwrap_or("");
        let dspan = self.span(hash..content_end);
        let rest = after..content_end;
        match name {
            "if" | "ifdef" | "ifndef" => {
                if conds.frames.len() >= MAX_COND_DEPTH && !conds.too_deep_reported {
                    conds.too_deep_reported = true;
                    self.diags.push(
                        Diagnostic::error(
                            "E0113",
                            dspan,
                            format!("conditionals are nested more than {MAX_COND_DEPTH} deep"),
                        )
                        .with_label("too deeply nested"),
                    );
                }
                let parent_live = conds.live();
                let (value, uncertain) = if parent_live {
                    self.condition(name, rest, dspan, mode)
                } else {
                    (false, false)
                };
                conds.frames.push(CondFrame {
                    directive: dspan,
                    parent_live,
                    live: parent_live && value,
                    taken: value,
                    seen_else: false,
                    uncertain: uncertain.then_some(dspan),
                    warned: false,
                });
            }
            "elif" | "elifdef" | "elifndef" | "else" => {
                let Some(top) = conds.frames.last() else {
                    self.unmatched(name, dspan);
                    return;
                };
                if top.seen_else {
                    let opened = top.directive;
                    self.diags.push(
                        Diagnostic::error("E0104", dspan, format!("'#{name}' after '#else'"))
                            .with_label("this branch can never be taken")
                            .with_secondary(opened, "the conditional starts here"),
                    );
                    if let Some(top) = conds.frames.last_mut() {
                        top.live = false;
                    }
                    return;
                }
                let (parent_live, taken) = (top.parent_live, top.taken);
                let (value, uncertain) = if name == "else" {
                    (parent_live && !taken, false)
                } else if parent_live && !taken {
                    self.condition(name, rest, dspan, mode)
                } else {
                    (false, false)
                };
                if let Some(top) = conds.frames.last_mut() {
                    top.live = value;
                    top.taken |= value;
                    top.seen_else = name == "else";
                    if uncertain && top.uncertain.is_none() {
                        top.uncertain = Some(dspan);
                    }
                }
            }
            "endif" => {
                let closed = conds.frames.pop();
                if closed.is_none() {
                    self.unmatched(name, dspan);
                }
            }
            _ if !conds.live() => {}
            "define" => self.define(rest, mode),
            "undef" => {
                let toks = dir_tokens(b, rest.clone());
                match toks.first().filter(|t| t.kind == Lx::Ident) {
                    Some(t) => {
                        let macro_name = self.text(t.start..t.end).to_string();
                        match mode {
                            Mode::Host => {
                                self.globals.remove(&macro_name);
                            }
                            Mode::Tileflow { local, .. } => {
                                local.insert(macro_name, None);
                            }
                        }
                    }
                    None => self.missing_name("undef", dspan),
                }
            }
            "line" => self.line(rest, dspan, line_end, mode),
            "include" | "include_next" | "import" if mode.is_tileflow() => {
                self.diags.push(
                    Diagnostic::error(
                        "E0118",
                        dspan,
                        format!("'#{name}' is not allowed inside a '__co__' function"),
                    )
                    .with_label("included text cannot be tileflow code")
                    .with_help("move the '#include' to the top of the file"),
                );
            }
            "error" => {
                let message = clean(self.src, rest);
                let text = if message.is_empty() {
                    "'#error' directive".to_string()
                } else {
                    message.clone()
                };
                self.diags.push(
                    Diagnostic::error("E0101", dspan, text).with_label("'#error' reached here"),
                );
            }
            "warning" => {
                let message = clean(self.src, rest);
                let text =
                    if message.is_empty() { "'#warning' directive".to_string() } else { message };
                self.diags.push(
                    Diagnostic::warning("W0101", dspan, text).with_label("'#warning' reached here"),
                );
            }
            "pragma" => self.pragma(rest, dspan, mode),
            // Unknown directives and the null directive: host text for nvcc.
            _ => {}
        }
    }

    fn unmatched(&mut self, name: &str, dspan: Span) {
        self.diags.push(
            Diagnostic::error("E0103", dspan, format!("'#{name}' without '#if'"))
                .with_label("there is no open conditional here")
                .with_note(
                    "conditionals opened inside a '__co__' function must be closed inside it",
                ),
        );
    }

    fn missing_name(&mut self, directive: &str, dspan: Span) {
        self.diags.push(
            Diagnostic::error("E0121", dspan, format!("'#{directive}' needs a macro name"))
                .with_label("expected an identifier after the directive name"),
        );
    }

    /// Evaluates the condition of `#if`/`#ifdef`/… Returns `(value, used __has_*)`.
    fn condition(
        &mut self,
        kind: &str,
        rest: Range<usize>,
        dspan: Span,
        mode: &Mode<'_>,
    ) -> (bool, bool) {
        let local = mode.local();
        match kind {
            "ifdef" | "ifndef" | "elifdef" | "elifndef" => {
                let toks = dir_tokens(self.b, rest);
                let Some(t) = toks.first().filter(|t| t.kind == Lx::Ident) else {
                    self.missing_name(kind, dspan);
                    return (false, false);
                };
                let defined = lookup(&self.globals, local, self.text(t.start..t.end)).is_some();
                (defined == kind.ends_with("ifdef"), false)
            }
            _ => {
                let cleaned = clean(self.src, rest.clone());
                let toks = dir_tokens(self.b, rest.clone());
                let expr_span = match (toks.first(), toks.last()) {
                    (Some(f), Some(l)) => self.span(f.start..l.end),
                    _ => dspan,
                };
                if cleaned.is_empty() {
                    self.diags.push(
                        Diagnostic::error("E0105", dspan, format!("'#{kind}' with no expression"))
                            .with_label("expected a condition"),
                    );
                    return (false, false);
                }
                let errors_before = self.diags.error_count();
                let expanded = {
                    let mut ex = Expander::new(
                        &self.globals,
                        local,
                        &mut *self.diags,
                        self.file,
                        Some(expr_span),
                    );
                    ex.expand_standalone(&cleaned)
                };
                if self.diags.error_count() > errors_before {
                    // The expansion already explained what is wrong with this condition.
                    return (false, false);
                }
                let toks = dir_tokens(expanded.as_bytes(), 0..expanded.len());
                let mut ev = Eval {
                    text: &expanded,
                    toks,
                    pos: 0,
                    globals: &self.globals,
                    local,
                    error: None,
                    uncertain: false,
                };
                let value = ev.expr(true, 0);
                if ev.error.is_none() && ev.pos < ev.toks.len() {
                    let found = ev.describe_peek();
                    ev.fail("E0105", format!("unexpected {found} in '#{kind}' expression"));
                }
                let uncertain = ev.uncertain;
                if let Some((code, message)) = ev.error {
                    self.diags.push(
                        Diagnostic::error(code, expr_span, message)
                            .with_label("in this condition")
                            .with_note(format!(
                                "after macro expansion the condition reads: {expanded}"
                            )),
                    );
                    return (false, uncertain);
                }
                if uncertain && mode.is_tileflow() {
                    self.diags.push(
                        Diagnostic::warning(
                            "W0103",
                            expr_span,
                            "'__has_*' cannot be evaluated by Choreo and is taken as 0",
                        )
                        .with_label("this condition is evaluated as if '__has_*' were 0"),
                    );
                }
                (value != 0, uncertain)
            }
        }
    }

    fn define(&mut self, rest: Range<usize>, mode: &mut Mode<'_>) {
        let ParsedDefine { mut m, name, unsupported_at: bad } = match parse_define(self.src, rest) {
            Ok(parsed) => parsed,
            Err(e) => {
                self.diags.push(
                    Diagnostic::error(
                        "E0107",
                        self.span(e.range),
                        format!("invalid '#define': {}", e.message),
                    )
                    .with_label("here"),
                );
                return;
            }
        };
        m.def = self.span(name);
        if let Some(old) = lookup(&self.globals, mode.local(), &m.name) {
            if old.params.is_some() && !old.same_definition(&m) {
                let mut d = Diagnostic::error(
                    "E0108",
                    m.def,
                    format!("redefinition of function-like macro '{}'", m.name),
                )
                .with_label("redefined here")
                .with_help("'#undef' it first, or use a different name");
                d = old.explain_definition(d, "first defined");
                self.diags.push(d);
                return;
            }
        }
        match mode {
            Mode::Host => {
                self.globals.insert(m.name.clone(), m);
            }
            Mode::Tileflow { local, .. } => {
                if let (Some(what), Some(at)) = (m.unsupported, bad) {
                    m.reported = true;
                    self.diags.push(
                        Diagnostic::error(
                            "E0112",
                            Span::new(self.file, at),
                            format!("{what} is not supported in Choreo macros"),
                        )
                        .with_label(format!("in the definition of '{}'", m.name)),
                    );
                }
                local.insert(m.name.clone(), Some(m));
            }
        }
    }

    fn line(&mut self, rest: Range<usize>, dspan: Span, line_end: usize, mode: &Mode<'_>) {
        let cleaned = clean(self.src, rest);
        let expanded = {
            let mut ex = Expander::new(
                &self.globals,
                mode.local(),
                &mut *self.diags,
                self.file,
                Some(dspan),
            );
            ex.protect_defined = false;
            ex.expand_standalone(&cleaned)
        };
        let toks = dir_tokens(expanded.as_bytes(), 0..expanded.len());
        let tok_text = |t: &PTok| expanded.get(t.start..t.end).unwrap_or("");
        let number = toks
            .first()
            .filter(|t| t.kind == Lx::Number && tok_text(t).bytes().all(|c| c.is_ascii_digit()))
            .and_then(|t| tok_text(t).parse::<u32>().ok())
            .filter(|&n| n <= 2_147_483_647);
        let file = match toks.get(1) {
            None => Some(None),
            Some(t) if t.kind == Lx::Str && toks.len() == 2 => {
                let s = tok_text(t);
                s.strip_prefix('"')
                    .and_then(|s| s.strip_suffix('"'))
                    .map(|s| Some(s.replace("\\\\", "\\").replace("\\\"", "\"")))
            }
            Some(_) => None,
        };
        match (number, file) {
            (Some(line), Some(file)) => self.line_directives.push(LineDirective {
                span: dspan,
                applies_from: out_offset(line_end),
                line,
                file,
            }),
            _ => self.diags.push(
                Diagnostic::error("E0119", dspan, "malformed '#line' directive")
                    .with_label("expected '#line <number>' or '#line <number> \"<file>\"'")
                    .with_note("the line number must be a decimal integer up to 2147483647"),
            ),
        }
    }

    fn pragma(&mut self, rest: Range<usize>, dspan: Span, mode: &mut Mode<'_>) {
        let toks = dir_tokens(self.b, rest);
        let word = |k: usize| toks.get(k).map_or("", |t| self.text(t.start..t.end));
        if word(0) != "croq" {
            if mode.is_tileflow() {
                self.diags.push(
                    Diagnostic::warning(
                        "W0102",
                        dspan,
                        "'#pragma' inside a '__co__' function is ignored",
                    )
                    .with_label("only '#pragma croq intrinsic …' has a meaning here"),
                );
            }
            return;
        }
        if word(1) != "intrinsic" {
            self.diags.push(
                Diagnostic::warning("W0104", dspan, "unknown '#pragma croq' directive is ignored")
                    .with_label("ignored")
                    .with_help(
                        "the known form is '#pragma croq intrinsic prefix|namespace <name>'",
                    ),
            );
            return;
        }
        let kind = word(2);
        let name_toks = toks.get(3..).unwrap_or(&[]);
        let name = match name_toks {
            [t] if t.kind == Lx::Str => {
                let s = self.text(t.start..t.end);
                s.strip_prefix('"').and_then(|s| s.strip_suffix('"')).unwrap_or("").to_string()
            }
            _ => name_toks.iter().map(|t| self.text(t.start..t.end)).collect::<String>(),
        };
        let valid_prefix =
            name.bytes().next().is_some_and(is_ident_start) && name.bytes().all(is_ident_continue);
        let valid_namespace = !name.is_empty()
            && name.split("::").all(|part| {
                part.bytes().next().is_some_and(is_ident_start)
                    && part.bytes().all(is_ident_continue)
            });
        let valid = match kind {
            "prefix" => valid_prefix,
            "namespace" => valid_namespace,
            _ => false,
        };
        if !valid {
            self.diags.push(
                Diagnostic::error("E0117", dspan, "malformed '#pragma croq intrinsic'")
                    .with_label("expected 'prefix <identifier-prefix>' or 'namespace <name>'"),
            );
            return;
        }
        match mode {
            Mode::Host => {
                let list = if kind == "prefix" { &mut self.prefixes } else { &mut self.namespaces };
                if !list.contains(&name) {
                    list.push(name);
                }
            }
            Mode::Tileflow { out, .. } => {
                let statement = format!("__pragma_croq_intrinsic_{kind}(\"{name}\");");
                out.push_generated(&statement, dspan);
            }
        }
    }
}
