//! The front end as one call: preprocess, lex and parse a `.co` file into an [`ast::File`].

use crate::ast;
use crate::diagnostics::Diagnostics;
use crate::lexer::{self, IntrinsicNames};
use crate::parser;
use crate::preprocess::{self, PreprocessOptions, Preprocessed, Region};
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
    parse_preprocessed(&pre, diags)
}

/// Lexes and parses the regions of a preprocessed file (the part of [`parse_file`] after
/// preprocessing). Errors go to `diags`, function by function in source order, the lexer's
/// errors of a function before its parser's.
///
/// All `__co__` functions are parsed on one helper thread with a large stack (see
/// [`parser::MAX_DEPTH`]), so callers on small stacks are safe; if the thread cannot be
/// created they are parsed on the calling thread. A file without `__co__` functions needs no
/// thread.
pub fn parse_preprocessed(pre: &Preprocessed, diags: &mut Diagnostics) -> ast::File {
    if pre.regions.iter().any(|region| matches!(region, Region::CoFunction { .. })) {
        parser::on_parser_stack(|| lex_and_parse(pre, diags))
    } else {
        lex_and_parse(pre, diags)
    }
}

/// [`parse_preprocessed`] on the calling thread: inside [`parser::on_parser_stack`] unless
/// `pre` has no `__co__` function.
fn lex_and_parse(pre: &Preprocessed, diags: &mut Diagnostics) -> ast::File {
    let intrinsics = IntrinsicNames::from_preprocessed(pre);
    let first = diags.len();
    let mut items = Vec::with_capacity(pre.regions.len());
    let mut macro_expansions = Vec::new();
    for region in &pre.regions {
        match region {
            Region::Host { span } => items.push(ast::Item::Host(*span)),
            Region::Device { span } => items.push(ast::Item::Device(*span)),
            Region::Cok { span, body } => items.push(ast::Item::Cok { span: *span, body: *body }),
            Region::CoFunction { text, .. } => {
                macro_expansions.extend(text.generated());
                let tokens = lexer::lex(text, &intrinsics, diags);
                if let Some(function) = parser::parse_tokens(&tokens, diags) {
                    items.push(ast::Item::CoFunction(function));
                }
            }
        }
    }
    diags.note_macro_expansions(first, &macro_expansions);
    ast::File { items, main_definitions: pre.main_definitions.clone(), macro_expansions }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnostics::Diagnostic;
    use crate::parser::PARSER_THREADS_REQUESTED;

    /// Stack of a test thread: [`parser::MAX_DEPTH`] levels of nesting do not fit in it in an
    /// unoptimised build.
    const SMALL_STACK_BYTES: usize = 2 << 20;

    /// Runs `f` on a fresh thread with a [`SMALL_STACK_BYTES`] stack.
    fn on_small_stack<R: Send>(f: impl FnOnce() -> R + Send) -> R {
        std::thread::scope(|scope| {
            let worker = std::thread::Builder::new()
                .stack_size(SMALL_STACK_BYTES)
                .spawn_scoped(scope, f)
                .expect("a test thread");
            worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    /// Several functions with host code between them: deep (but allowed) nesting, too deep
    /// nesting, a lexer error, a syntax error and a header too broken to parse.
    fn sample_file() -> String {
        format!(
            "#include <cstdio>\n\
             __co__ void deep(int n) {{\n  x = {open}1{close};\n}}\n\
             static int host_helper() {{ return 1; }}\n\
             __co__ void too_deep() {{\n  x = {too_deep_open}1{too_deep_close};\n  y = 2 +;\n}}\n\
             __co__ void lexer_error() {{\n  x = 1 $ 2;\n  y = 3;\n}}\n\
             __co__ void (int n) {{\n  x = ;\n}}\n\
             __co__ void fine(f32 [8] &a) {{\n  parallel p by 8 {{ a.at(p) = 1.0f; }}\n}}\n",
            open = "(".repeat(200),
            close = ")".repeat(200),
            too_deep_open = "(".repeat(10_000),
            too_deep_close = ")".repeat(10_000),
        )
    }

    fn parse_sample(db: &SourceDb, file: FileId) -> (ast::File, Vec<Diagnostic>) {
        let mut diags = Diagnostics::new();
        let ast = parse_file(db, file, &PreprocessOptions::default(), &mut diags);
        (ast, diags.into_vec())
    }

    #[test]
    fn a_whole_file_is_parsed_on_one_helper_thread() {
        let mut db = SourceDb::new();
        let file = db.add("sample.co", sample_file());
        let (requested, (ast, diags)) = on_small_stack(|| {
            let before = PARSER_THREADS_REQUESTED.with(|count| count.get());
            let parsed = parse_sample(&db, file);
            (PARSER_THREADS_REQUESTED.with(|count| count.get()) - before, parsed)
        });
        assert_eq!(requested, 1, "one parser thread for the five functions of the file");
        let names: Vec<String> = ast
            .items
            .iter()
            .filter_map(|item| match item {
                ast::Item::CoFunction(function) => Some(function.name.name.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(names, ["deep", "too_deep", "lexer_error", "fine"]);
        let codes: Vec<&str> = diags.iter().filter(|d| d.is_error()).map(|d| d.code).collect();
        assert_eq!(codes, ["E0302", "E0301", "E0201", "E0301", "E0301"]);
    }

    #[test]
    fn a_file_without_co_functions_needs_no_helper_thread() {
        let mut db = SourceDb::new();
        let file = db.add("host.co", "#include <cstdio>\nint main() { return 0; }\n");
        let before = PARSER_THREADS_REQUESTED.with(|count| count.get());
        let (ast, diags) = parse_sample(&db, file);
        assert_eq!(PARSER_THREADS_REQUESTED.with(|count| count.get()), before);
        assert!(diags.is_empty(), "{diags:?}");
        assert!(matches!(ast.items.as_slice(), [ast::Item::Host(_)]), "{:?}", ast.items);
    }

    #[test]
    fn file_parsing_matches_parsing_function_by_function() {
        let mut db = SourceDb::new();
        let file = db.add("sample.co", sample_file());
        let (ast, diags) = parse_sample(&db, file);

        // The same front end, one `parse_co_function` (and one thread) per function.
        let mut expected_diags = Diagnostics::new();
        let pre =
            preprocess::preprocess(&db, file, &PreprocessOptions::default(), &mut expected_diags);
        let intrinsics = IntrinsicNames::from_preprocessed(&pre);
        let mut expected_items = Vec::new();
        for region in &pre.regions {
            match region {
                Region::Host { span } => expected_items.push(ast::Item::Host(*span)),
                Region::Device { span } => expected_items.push(ast::Item::Device(*span)),
                Region::Cok { span, body } => {
                    expected_items.push(ast::Item::Cok { span: *span, body: *body })
                }
                Region::CoFunction { text, .. } => {
                    let tokens = lexer::lex(text, &intrinsics, &mut expected_diags);
                    if let Some(function) = parser::parse_co_function(&tokens, &mut expected_diags)
                    {
                        expected_items.push(ast::Item::CoFunction(function));
                    }
                }
            }
        }
        assert_eq!(diags, expected_diags.into_vec(), "same diagnostics in the same order");
        assert_eq!(ast.items, expected_items);
        assert!(ast.main_definitions.is_empty());
    }

    #[test]
    fn a_panic_in_the_parser_thread_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| {
            parser::on_parser_stack(|| -> u32 { panic!("parser bug") })
        });
        let payload = caught.expect_err("the panic is resumed on the calling thread");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"parser bug"));
    }
}
