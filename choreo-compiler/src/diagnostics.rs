//! Diagnostics as values: code, message, primary/secondary labels, notes and an optional fix
//! hint; rendered like rustc (codespan-reporting) for people and as JSON lines for tools.
//!
//! Stages never throw: they push into a [`Diagnostics`] collector and keep going, so one run
//! reports many errors.
//!
//! Error code ranges, one per stage (each code has a fixture that triggers it):
//! `E00xx` input/IO, `E01xx` preprocessor, `E02xx` lexer, `E03xx` parser,
//! `E04xx`–`E07xx` semantic analysis, `E08xx` lowering/target limits, `E09xx` not supported yet.
//! Warnings use `W` plus the same ranges.

use crate::source::{SourceDb, Span};
use codespan_reporting::diagnostic as cs;
use codespan_reporting::term;
use std::fmt::Write as _;

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Informational.
    Note,
    /// The program is accepted, but something is likely wrong.
    Warning,
    /// The program is rejected.
    Error,
}

impl Severity {
    fn as_str(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// A message attached to a span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// Where.
    pub span: Span,
    /// What to say there (may be empty).
    pub message: String,
}

impl Label {
    /// A label with a message.
    pub fn new(span: Span, message: impl Into<String>) -> Label {
        Label { span, message: message.into() }
    }
}

/// One diagnostic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error, warning or note.
    pub severity: Severity,
    /// Stable code such as `E0301`.
    pub code: &'static str,
    /// One short lower-case sentence.
    pub message: String,
    /// The main location and what is wrong there.
    pub primary: Label,
    /// Related locations (e.g. the earlier declaration).
    pub secondary: Vec<Label>,
    /// Extra explanation lines.
    pub notes: Vec<String>,
    /// A suggested fix, where there is one.
    pub help: Option<String>,
}

impl Diagnostic {
    /// A new error at `span`; the label text defaults to empty.
    pub fn error(code: &'static str, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(Severity::Error, code, span, message)
    }

    /// A new note at `span`: information, nothing wrong (the output of `println!`).
    pub fn note(code: &'static str, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(Severity::Note, code, span, message)
    }

    /// A new warning at `span`.
    pub fn warning(code: &'static str, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(Severity::Warning, code, span, message)
    }

    fn new(
        severity: Severity,
        code: &'static str,
        span: Span,
        message: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic {
            severity,
            code,
            message: message.into(),
            primary: Label::new(span, String::new()),
            secondary: Vec::new(),
            notes: Vec::new(),
            help: None,
        }
    }

    /// Sets the primary label's text.
    pub fn with_label(mut self, message: impl Into<String>) -> Diagnostic {
        self.primary.message = message.into();
        self
    }

    /// Adds a secondary label.
    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.secondary.push(Label::new(span, message));
        self
    }

    /// Adds a note line.
    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    /// Sets the fix hint.
    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    /// Whether this diagnostic rejects the program.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    fn to_codespan(&self) -> cs::Diagnostic<crate::source::FileId> {
        let severity = match self.severity {
            Severity::Note => cs::Severity::Note,
            Severity::Warning => cs::Severity::Warning,
            Severity::Error => cs::Severity::Error,
        };
        let mut labels = vec![
            cs::Label::primary(self.primary.span.file, self.primary.span.range())
                .with_message(self.primary.message.clone()),
        ];
        labels.extend(self.secondary.iter().map(|l| {
            cs::Label::secondary(l.span.file, l.span.range()).with_message(l.message.clone())
        }));
        let mut notes = self.notes.clone();
        if let Some(help) = &self.help {
            notes.push(format!("help: {help}"));
        }
        cs::Diagnostic::new(severity)
            .with_code(self.code)
            .with_message(self.message.clone())
            .with_labels(labels)
            .with_notes(notes)
    }
}

/// A collector of diagnostics; stages push into it and continue.
///
/// A diagnostic equal in code, location and message to one already collected is dropped: a
/// bad token in a macro reports once, not once per expansion (a macro doubled 16 times over
/// used to report 65,536 identical errors and take seconds to print them).
#[derive(Debug, Clone, Default)]
pub struct Diagnostics {
    items: Vec<Diagnostic>,
    seen: std::collections::HashSet<(&'static str, Span, String)>,
}

impl Diagnostics {
    /// An empty collector.
    pub fn new() -> Diagnostics {
        Diagnostics::default()
    }

    /// Adds one diagnostic, unless the same one (code, location, message) is already there.
    pub fn push(&mut self, diagnostic: Diagnostic) {
        let key = (diagnostic.code, diagnostic.primary.span, diagnostic.message.clone());
        if self.seen.insert(key) {
            self.items.push(diagnostic);
        }
    }

    /// Adds all of `other`, as [`Diagnostics::push`] does.
    pub fn extend(&mut self, other: impl IntoIterator<Item = Diagnostic>) {
        for diagnostic in other {
            self.push(diagnostic);
        }
    }

    /// Whether any error was reported.
    pub fn has_errors(&self) -> bool {
        self.items.iter().any(Diagnostic::is_error)
    }

    /// Number of errors.
    pub fn error_count(&self) -> usize {
        self.items.iter().filter(|d| d.is_error()).count()
    }

    /// All diagnostics, in the order reported.
    pub fn as_slice(&self) -> &[Diagnostic] {
        &self.items
    }

    /// Consumes the collector.
    pub fn into_vec(self) -> Vec<Diagnostic> {
        self.items
    }

    /// Whether nothing was reported.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Number of diagnostics.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Adds to every diagnostic from number `first` on whose primary span touches a macro
    /// invocation of `expansions` (invocation, expanded text) a note with what the macro
    /// expanded to, so that an error in `#define N (1 << 28)` used as `f32 [N]` shows the
    /// text behind `N`.
    pub fn note_macro_expansions(&mut self, first: usize, expansions: &[(Span, String)]) {
        for d in self.items.iter_mut().skip(first) {
            let at = d.primary.span;
            for (invocation, text) in expansions {
                let touches = invocation.file == at.file
                    && invocation.start <= at.end
                    && at.start <= invocation.end
                    && invocation.start < invocation.end;
                if touches {
                    let mut shown: String = text.chars().take(160).collect();
                    if shown.len() < text.len() {
                        shown.push('…');
                    }
                    let note = format!("in a macro expansion: this is `{shown}`");
                    if !d.notes.contains(&note) {
                        d.notes.push(note);
                    }
                }
            }
        }
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter()
    }
}

/// `n` and a noun in the number `n` asks for: `count(1, "argument")` is "1 argument",
/// `count(2, "argument")` "2 arguments". For irregular plurals, see [`count_as`].
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

/// Like [`count`], with the plural given: `count_as(3, "index", "indices")` is "3 indices".
pub fn count_as(n: usize, singular: &str, plural: &str) -> String {
    format!("{n} {}", if n == 1 { singular } else { plural })
}

/// Renders diagnostics like rustc, without colour (for snapshots, logs and cargo output).
pub fn render_human(db: &SourceDb, diagnostics: &[Diagnostic]) -> String {
    let mut out = term::termcolor::NoColor::new(Vec::new());
    write_human(db, diagnostics, &mut out);
    String::from_utf8_lossy(&out.into_inner()).into_owned()
}

/// Renders diagnostics like rustc into a (possibly coloured) terminal writer.
pub fn write_human(
    db: &SourceDb,
    diagnostics: &[Diagnostic],
    out: &mut dyn term::termcolor::WriteColor,
) {
    let config = term::Config::default();
    for d in diagnostics {
        // A rendering failure (e.g. a span past the file end) must not lose the message.
        if term::emit(out, &config, db, &d.to_codespan()).is_err() {
            let _ = writeln!(
                out,
                "{}[{}]: {} ({})",
                d.severity.as_str(),
                d.code,
                d.message,
                db.location(d.primary.span)
            );
        }
    }
}

/// Renders diagnostics as JSON lines, one object per diagnostic:
/// `{"severity","code","message","file","line","column","end_line","end_column","labels":[…],"notes":[…],"help"}`.
pub fn render_json(db: &SourceDb, diagnostics: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diagnostics {
        out.push('{');
        let _ = write!(
            out,
            "\"severity\":{},\"code\":{},\"message\":{},",
            json_str(d.severity.as_str()),
            json_str(d.code),
            json_str(&d.message)
        );
        write_json_location(&mut out, db, d.primary.span);
        out.push_str(",\"labels\":[");
        for (i, (label, primary)) in std::iter::once((&d.primary, true))
            .chain(d.secondary.iter().map(|l| (l, false)))
            .enumerate()
        {
            if i > 0 {
                out.push(',');
            }
            out.push('{');
            write_json_location(&mut out, db, label.span);
            let _ =
                write!(out, ",\"primary\":{primary},\"message\":{}}}", json_str(&label.message));
        }
        out.push_str("],\"notes\":[");
        for (i, note) in d.notes.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&json_str(note));
        }
        out.push_str("],\"help\":");
        match &d.help {
            Some(h) => out.push_str(&json_str(h)),
            None => out.push_str("null"),
        }
        out.push_str("}\n");
    }
    out
}

fn write_json_location(out: &mut String, db: &SourceDb, span: Span) {
    let file = db.file(span.file);
    let (line, column) = file.line_col(span.start as usize);
    let (end_line, end_column) = file.line_col(span.end as usize);
    let _ = write!(
        out,
        "\"file\":{},\"byte_start\":{},\"byte_end\":{},\"line\":{line},\"column\":{column},\"end_line\":{end_line},\"end_column\":{end_column}",
        json_str(file.name()),
        span.start,
        span.end
    );
}

/// Quotes a string as a JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_located_error_with_help() {
        let mut db = SourceDb::new();
        let f = db.add("k.co", "__co__ void f() {\n  x = ;\n}\n");
        let d = Diagnostic::error("E0301", Span::new(f, 24..25), "expected an expression")
            .with_label("expected an expression here")
            .with_help("write a value after '='");
        let text = render_human(&db, std::slice::from_ref(&d));
        assert!(text.contains("error[E0301]: expected an expression"), "{text}");
        assert!(text.contains("k.co:2:7"), "{text}");
        assert!(text.contains("help: write a value after '='"), "{text}");
        let json = render_json(&db, &[d]);
        assert!(json.starts_with("{\"severity\":\"error\",\"code\":\"E0301\""), "{json}");
        assert!(json.contains("\"line\":2,\"column\":7"), "{json}");
    }
}
