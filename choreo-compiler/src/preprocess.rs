//! Preprocessing and island splitting (spec §1.1, §2.1, §3).
//!
//! Input: one file of a [`SourceDb`]. Output: [`Preprocessed`], the file cut into top-level
//! regions. Host C++ text stays verbatim (directives are evaluated for bookkeeping only);
//! each `__co__` function becomes an [`Expanded`] text — macro-expanded, with its directives and
//! excluded lines removed — plus a map from every output byte back to the user's original span.
//! `__device__`/`__co_device__` declarations and `__cok__` blocks are captured verbatim.
//!
//! NOTE (interim): this is the interface stub. The implementation below only splits regions
//! naively; the full preprocessor replaces it while keeping these types.

use crate::diagnostics::Diagnostics;
use crate::source::{FileId, SourceDb, Span};

/// Options that affect preprocessing.
#[derive(Debug, Clone, Default)]
pub struct PreprocessOptions {
    /// `-D` definitions: `(name, value)`; `value` of `None` means `1` (spec §3).
    pub defines: Vec<(String, Option<String>)>,
}

/// The file, cut into top-level regions, in source order.
#[derive(Debug, Clone)]
pub struct Preprocessed {
    /// The file these regions came from.
    pub file: FileId,
    /// The regions, in source order; together with [`Region::span`] they tile the file.
    pub regions: Vec<Region>,
    /// Intrinsic prefixes registered with `#pragma croq intrinsic prefix <p>` (spec §17.2).
    pub intrinsic_prefixes: Vec<String>,
    /// Intrinsic namespaces registered with `#pragma croq intrinsic namespace <n>`.
    pub intrinsic_namespaces: Vec<String>,
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
    /// Maps an output byte range back to the original file.
    pub fn origin(&self, out: std::ops::Range<usize>) -> Span {
        let start = self.origin_of(out.start, false);
        let end = self.origin_of(out.end.max(out.start), true);
        start.to(end)
    }

    fn origin_of(&self, offset: usize, is_end: bool) -> Span {
        let idx = match self.segments.binary_search_by_key(&(offset as u32), |s| s.out_start) {
            Ok(i) if is_end && i > 0 => i - 1,
            Ok(i) => i,
            Err(0) => 0,
            Err(i) => i - 1,
        };
        let Some(seg) = self.segments.get(idx) else {
            return Span::point(crate::source::FileId(0), 0);
        };
        if !seg.verbatim {
            return seg.origin;
        }
        let delta = (offset as u32).saturating_sub(seg.out_start);
        let pos = (seg.origin.start + delta).min(seg.origin.end);
        Span { file: seg.origin.file, start: pos, end: pos }
    }
}

/// Preprocesses `file` and splits it into regions. Errors go to `diags`; the result is always
/// usable (regions with errors are still returned so later stages can report more).
pub fn preprocess(
    db: &SourceDb,
    file: FileId,
    options: &PreprocessOptions,
    diags: &mut Diagnostics,
) -> Preprocessed {
    let _ = (options, &diags);
    // Interim naive splitter: finds `__co__` and matches braces, ignoring comments/strings.
    let text = db.file(file).text();
    let mut regions = Vec::new();
    let mut host_start = 0;
    let mut pos = 0;
    while let Some(found) = text[pos..].find("__co__") {
        let start = pos + found;
        let Some(open) = text[start..].find('{').map(|i| start + i) else { break };
        let mut depth = 0usize;
        let mut end = text.len();
        for (i, c) in text[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        if host_start < start {
            regions.push(Region::Host { span: Span::new(file, host_start..start) });
        }
        let span = Span::new(file, start..end);
        let expanded = Expanded {
            text: text[start..end].to_string(),
            segments: vec![Segment { out_start: 0, origin: span, verbatim: true }],
        };
        regions.push(Region::CoFunction { span, text: expanded });
        host_start = end;
        pos = end;
    }
    if host_start < text.len() {
        regions.push(Region::Host { span: Span::new(file, host_start..text.len()) });
    }
    Preprocessed { file, regions, intrinsic_prefixes: Vec::new(), intrinsic_namespaces: Vec::new() }
}
