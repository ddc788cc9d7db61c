//! The output text of a `.cu` file, with `#line` bookkeeping so that nvcc reports errors at
//! the `.co` lines the code comes from.

use crate::source::{FileId, SourceDb, Span};
use std::fmt::Write as _;

/// The output text. Tracks which `.co` line nvcc assigns to the next output line, so that a
/// `#line` directive is written only where the numbering would otherwise be wrong.
pub(super) struct Writer<'a> {
    db: &'a SourceDb,
    file: FileId,
    out: String,
    /// The `.co` line of the next output line, once a `#line` directive is in effect.
    next_line: Option<usize>,
    /// The `.co` line the previous generated line was attributed to. Consecutive lines of one
    /// construct get no new directive (their numbers run on), which keeps the output readable.
    last_source_line: Option<usize>,
    pub(super) indent: usize,
    /// The file name as a C string literal body.
    quoted_name: String,
}

impl<'a> Writer<'a> {
    pub(super) fn new(db: &'a SourceDb, file: FileId) -> Writer<'a> {
        let quoted_name = c_escape(db.file(file).name(), false);
        Writer {
            db,
            file,
            out: String::new(),
            next_line: None,
            last_source_line: None,
            indent: 0,
            quoted_name,
        }
    }

    /// 1-based line of a span's start.
    pub(super) fn line_of(&self, span: Span) -> usize {
        self.db.file(self.file).line_col(span.start as usize).0
    }

    pub(super) fn raw(&mut self, text: &str) {
        self.out.push_str(text);
    }

    pub(super) fn ensure_line_start(&mut self) {
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push('\n');
            if let Some(n) = &mut self.next_line {
                *n += 1;
            }
        }
    }

    pub(super) fn directive(&mut self, line: usize) {
        self.ensure_line_start();
        if self.next_line != Some(line) {
            let _ = writeln!(self.out, "#line {line} \"{}\"", self.quoted_name);
            self.next_line = Some(line);
        }
    }

    /// Source text copied as it is, numbered from the line of `span`.
    pub(super) fn verbatim(&mut self, span: Span, text: &str) {
        if text.is_empty() {
            return;
        }
        let line = self.line_of(span);
        self.directive(line);
        self.last_source_line = None;
        self.out.push_str(text);
        let newlines = text.matches('\n').count();
        // A `#line` of the user's own changes the numbering: write a directive next time.
        let renumbers = text.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with('#') && l[1..].trim_start().starts_with("line")
        });
        self.next_line = if renumbers { None } else { self.next_line.map(|n| n + newlines) };
    }

    /// Makes the next generated line start with an exact `#line` (at the start of each
    /// generated function).
    pub(super) fn resync(&mut self) {
        self.last_source_line = None;
    }

    /// One generated line (may contain `\n`), attributed to the `.co` line of `span`.
    pub(super) fn line(&mut self, span: Span, text: &str) {
        let line = self.line_of(span);
        if self.last_source_line != Some(line) {
            self.directive(line);
        } else {
            self.ensure_line_start();
        }
        self.last_source_line = Some(line);
        for (i, part) in text.split('\n').enumerate() {
            if i > 0 {
                self.out.push('\n');
            }
            if !part.is_empty() {
                for _ in 0..self.indent {
                    self.out.push_str("  ");
                }
                self.out.push_str(part);
            }
        }
        self.out.push('\n');
        let newlines = text.matches('\n').count() + 1;
        self.next_line = self.next_line.map(|n| n + newlines);
    }

    /// Where the text of the last generated line starts (after its indentation): a place for
    /// [`Writer::insert_in_line`].
    pub(super) fn last_line_start(&self) -> usize {
        let body = self.out.strip_suffix('\n').unwrap_or(&self.out);
        body.rfind('\n').map_or(0, |i| i + 1) + 2 * self.indent
    }

    /// Inserts `text` (no line break: the `#line` numbering stays right) at `at`, an offset
    /// from [`Writer::last_line_start`].
    pub(super) fn insert_in_line(&mut self, at: usize, text: &str) {
        debug_assert!(!text.contains('\n'));
        self.out.insert_str(at, text);
    }

    pub(super) fn finish(mut self) -> String {
        self.ensure_line_start();
        self.out
    }
}

/// Text made safe for a `//` comment: no line breaks, no backslash (a backslash at the end of
/// the line would continue the comment onto the next line).
pub(super) fn comment_text(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\r' => ' ',
            '\\' => '/',
            c => c,
        })
        .collect()
}

/// Escapes text for a C string literal; with `printf_format`, `%` becomes `%%`. Non-ASCII and
/// control bytes become octal escapes; `?` is escaped so no trigraph can form.
pub(super) fn c_escape(text: &str, printf_format: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'%' if printf_format => out.push_str("%%"),
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'?' => out.push_str("\\?"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\r' => out.push_str("\\r"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_printf_formats() {
        assert_eq!(c_escape("100%", true), "100%%");
        assert_eq!(c_escape("a\"b\\c\n", false), "a\\\"b\\\\c\\n");
        assert_eq!(c_escape("é", false), "\\303\\251");
        assert_eq!(c_escape("??=", false), "\\?\\?=");
    }

    #[test]
    fn comments_cannot_break_out() {
        assert_eq!(comment_text("a\nb\\"), "a b/");
    }
}
