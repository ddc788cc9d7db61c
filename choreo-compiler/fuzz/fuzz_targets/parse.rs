//! Fuzz target: preprocess + lex + parse, then dump the AST and render the diagnostics.
//!
//! Input bytes are decoded as lossy UTF-8 (the compiler reads `.co` files as text). Dumping and
//! rendering are included because both walk every span the front end produced: a span out of
//! range or off a character boundary panics there, not in the parser.
#![no_main]

use choreo_compiler::diagnostics::{Diagnostics, render_human};
use choreo_compiler::dump::dump_file;
use choreo_compiler::frontend::parse_file;
use choreo_compiler::preprocess::PreprocessOptions;
use choreo_compiler::source::SourceDb;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut db = SourceDb::new();
    let file = db.add("fuzz.co", text.into_owned());
    let mut diags = Diagnostics::new();
    let ast = parse_file(&db, file, &PreprocessOptions::default(), &mut diags);
    let _ = dump_file(&db, &ast);
    let _ = render_human(&db, diags.as_slice());
});
