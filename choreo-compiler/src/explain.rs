//! Long descriptions of the diagnostic codes, for `choreoc explain CODE` (like
//! `rustc --explain`).
//!
//! The descriptions live in `explain.md` next to this file, compiled in with `include_str!`.
//! Each entry starts with a line `## CODE: one-line summary` and runs to the next such line;
//! everything before the first entry is a preamble for people editing the file. The summaries
//! follow the code tables of the stage modules (`preprocess`, `lexer`, `parser`, `sema`,
//! `lower`). A test checks that every code the crate emits has an entry and that every entry is
//! a code the crate emits.

/// The text of every entry, in the order of the file.
const TEXT: &str = include_str!("explain.md");

/// One entry: a code, its one-line summary and its description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// `E0401`, `W0403`, `N0701`, …
    pub code: &'static str,
    /// The one-line summary (the rest of the heading line).
    pub summary: &'static str,
    /// The description, without the heading; trimmed, without a trailing newline.
    pub body: &'static str,
}

/// Every entry, in the order of the file (by stage, then by code).
pub fn entries() -> Vec<Entry> {
    let mut entries = Vec::new();
    // Each chunk after a "\n## " is one entry; the first chunk is the preamble.
    let mut chunks = TEXT.split("\n## ");
    chunks.next();
    for chunk in chunks {
        let (heading, body) = chunk.split_once('\n').unwrap_or((chunk, ""));
        let (code, summary) = heading.split_once(':').unwrap_or((heading, ""));
        entries.push(Entry { code: code.trim(), summary: summary.trim(), body: body.trim() });
    }
    entries
}

/// The entry of `code` (case-insensitive: `e0401` finds `E0401`), if there is one.
pub fn lookup(code: &str) -> Option<Entry> {
    let code = code.trim();
    entries().into_iter().find(|e| e.code.eq_ignore_ascii_case(code))
}

/// The text `choreoc explain CODE` prints: the code and summary, a blank line, the body.
pub fn render(entry: &Entry) -> String {
    format!("{}: {}\n\n{}\n", entry.code, entry.summary, entry.body)
}

/// The list `choreoc explain` prints without a code: one line per code with its summary.
pub fn render_index() -> String {
    let mut text = String::from("Diagnostic codes (choreoc explain CODE prints one in full):\n\n");
    for entry in entries() {
        text.push_str(&format!("  {}  {}\n", entry.code, entry.summary));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_has_a_well_formed_code_a_summary_and_a_body() {
        let all = entries();
        assert!(all.len() > 100, "{}", all.len());
        let mut seen = std::collections::BTreeSet::new();
        for e in &all {
            let b = e.code.as_bytes();
            assert!(
                b.len() == 5
                    && matches!(b[0], b'E' | b'W' | b'N')
                    && b[1..].iter().all(u8::is_ascii_digit),
                "bad code {:?}",
                e.code
            );
            assert!(!e.summary.is_empty(), "{} has no summary", e.code);
            assert!(!e.body.is_empty(), "{} has no description", e.code);
            assert!(seen.insert(e.code), "{} is described twice", e.code);
        }
        assert_eq!(lookup("e0401").map(|e| e.code), Some("E0401"));
        assert_eq!(lookup("E9999"), None);
    }
}
