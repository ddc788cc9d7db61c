//! The file model: a database of source files, file ids, byte spans and line/column mapping.
//!
//! Every token and AST node carries a [`Span`] into one file of a [`SourceDb`]. Spans always
//! point into the *original* text the user wrote (the preprocessor keeps a map back to it), so
//! diagnostics show the user's own lines.

use std::ops::Range;

/// Identifies one file inside a [`SourceDb`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(pub u32);

/// A byte range `start..end` inside one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    /// The file the range belongs to.
    pub file: FileId,
    /// First byte (inclusive).
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// A span covering `range` of `file`.
    pub fn new(file: FileId, range: Range<usize>) -> Span {
        Span { file, start: clamp_u32(range.start), end: clamp_u32(range.end.max(range.start)) }
    }

    /// An empty span at `offset`.
    pub fn point(file: FileId, offset: usize) -> Span {
        Span::new(file, offset..offset)
    }

    /// The smallest span covering both `self` and `other` (which must be in the same file;
    /// otherwise `self` is returned).
    pub fn to(self, other: Span) -> Span {
        if self.file != other.file {
            return self;
        }
        Span { file: self.file, start: self.start.min(other.start), end: self.end.max(other.end) }
    }

    /// The byte range as `usize`s.
    pub fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }

    /// Length in bytes.
    pub fn len(self) -> usize {
        (self.end - self.start) as usize
    }

    /// Whether the span is empty.
    pub fn is_empty(self) -> bool {
        self.start == self.end
    }
}

fn clamp_u32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// One source file: its display name, text and precomputed line starts.
#[derive(Debug, Clone)]
pub struct SourceFile {
    name: String,
    text: String,
    line_starts: Vec<usize>,
}

impl SourceFile {
    /// The name shown in diagnostics (usually the path as given).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The full text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// 0-based line index of a byte offset (offsets past the end map to the last line).
    pub fn line_index(&self, offset: usize) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(line) => line,
            Err(next) => next - 1,
        }
    }

    /// Byte range of a 0-based line, including its newline.
    pub fn line_range(&self, line: usize) -> Option<Range<usize>> {
        let start = *self.line_starts.get(line)?;
        let end = self.line_starts.get(line + 1).copied().unwrap_or(self.text.len());
        Some(start..end)
    }

    /// 1-based `(line, column)` of a byte offset; the column counts characters, not bytes.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_index(offset);
        let start = self.line_starts[line];
        let col = self.text.get(start..offset).map_or(offset - start, |s| s.chars().count());
        (line + 1, col + 1)
    }
}

/// All files of one compilation.
#[derive(Debug, Clone, Default)]
pub struct SourceDb {
    files: Vec<SourceFile>,
}

impl SourceDb {
    /// An empty database.
    pub fn new() -> SourceDb {
        SourceDb::default()
    }

    /// Adds a file and returns its id.
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        let text = text.into();
        let line_starts =
            std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
        let id = FileId(clamp_u32(self.files.len()));
        self.files.push(SourceFile { name: name.into(), text, line_starts });
        id
    }

    /// The file behind an id. Ids come only from [`SourceDb::add`], so a foreign id is a bug of
    /// the caller; it yields an empty placeholder rather than a panic.
    pub fn file(&self, id: FileId) -> &SourceFile {
        static EMPTY: SourceFile =
            SourceFile { name: String::new(), text: String::new(), line_starts: Vec::new() };
        self.files.get(id.0 as usize).unwrap_or(&EMPTY)
    }

    /// The text covered by a span (empty if the span is out of range).
    pub fn snippet(&self, span: Span) -> &str {
        self.file(span.file).text.get(span.range()).unwrap_or("")
    }

    /// `name:line:col` of a span's start, as used in one-line messages.
    pub fn location(&self, span: Span) -> String {
        let file = self.file(span.file);
        if file.line_starts.is_empty() {
            return format!("<unknown>:{}", span.start);
        }
        let (line, col) = file.line_col(span.start as usize);
        format!("{}:{}:{}", file.name, line, col)
    }

    /// Number of files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether the database has no files.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

impl<'a> codespan_reporting::files::Files<'a> for SourceDb {
    type FileId = FileId;
    type Name = &'a str;
    type Source = &'a str;

    fn name(&'a self, id: FileId) -> Result<&'a str, codespan_reporting::files::Error> {
        self.files
            .get(id.0 as usize)
            .map(|f| f.name.as_str())
            .ok_or(codespan_reporting::files::Error::FileMissing)
    }

    fn source(&'a self, id: FileId) -> Result<&'a str, codespan_reporting::files::Error> {
        self.files
            .get(id.0 as usize)
            .map(|f| f.text.as_str())
            .ok_or(codespan_reporting::files::Error::FileMissing)
    }

    fn line_index(
        &'a self,
        id: FileId,
        byte_index: usize,
    ) -> Result<usize, codespan_reporting::files::Error> {
        let file =
            self.files.get(id.0 as usize).ok_or(codespan_reporting::files::Error::FileMissing)?;
        Ok(file.line_index(byte_index))
    }

    fn line_range(
        &'a self,
        id: FileId,
        line_index: usize,
    ) -> Result<Range<usize>, codespan_reporting::files::Error> {
        let file =
            self.files.get(id.0 as usize).ok_or(codespan_reporting::files::Error::FileMissing)?;
        match file.line_range(line_index) {
            Some(r) => Ok(r),
            None if line_index == file.line_starts.len() => Ok(file.text.len()..file.text.len()),
            None => Err(codespan_reporting::files::Error::LineTooLarge {
                given: line_index,
                max: file.line_starts.len() - 1,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based_and_count_chars() {
        let mut db = SourceDb::new();
        let id = db.add("a.co", "ab\nçd\n");
        let f = db.file(id);
        assert_eq!(f.line_col(0), (1, 1));
        assert_eq!(f.line_col(3), (2, 1));
        assert_eq!(f.line_col(5), (2, 2)); // 'ç' is two bytes, one column
        assert_eq!(db.location(Span::point(id, 6)), "a.co:2:3");
        assert_eq!(f.line_col(100), (3, 1));
    }
}
