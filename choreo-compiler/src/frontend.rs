//! The front end as one call: preprocess, lex and parse a `.co` file into an [`ast::File`].

use crate::ast;
use crate::diagnostics::Diagnostics;
use crate::lexer::{self, IntrinsicNames};
use crate::parser;
use crate::preprocess::{self, PreprocessOptions, Region};
use crate::source::{FileId, SourceDb};

/// Preprocesses, lexes and parses `file`. Errors go to `diags`; the result always lists the
/// file's regions in source order. A `__co__` function whose header is too broken to parse is
/// left out (its errors are reported).
pub fn parse_file(
    db: &SourceDb,
    file: FileId,
    opts: &PreprocessOptions,
    diags: &mut Diagnostics,
) -> ast::File {
    let pre = preprocess::preprocess(db, file, opts, diags);
    let intrinsics = IntrinsicNames::from_preprocessed(&pre);
    let mut items = Vec::with_capacity(pre.regions.len());
    for region in &pre.regions {
        match region {
            Region::Host { span } => items.push(ast::Item::Host(*span)),
            Region::Device { span } => items.push(ast::Item::Device(*span)),
            Region::Cok { span, body } => items.push(ast::Item::Cok { span: *span, body: *body }),
            Region::CoFunction { text, .. } => {
                let tokens = lexer::lex(text, &intrinsics, diags);
                if let Some(function) = parser::parse_co_function(&tokens, diags) {
                    items.push(ast::Item::CoFunction(function));
                }
            }
        }
    }
    ast::File { items }
}
