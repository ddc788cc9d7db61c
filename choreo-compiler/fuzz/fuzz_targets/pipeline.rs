//! Fuzz target: the whole pipeline on lossy-UTF-8 input. First the front end as the snapshot
//! harness runs it (preprocess + lex + parse, then sema even after parse errors, diagnostics
//! rendered), then `compile` (parse → sema → lower → emit, stopping at the first stage with
//! errors), whose `.cu` must exist exactly when no error was reported; then the same for the
//! CPU target and its `.cpp`.
#![no_main]

use choreo_compiler::compile::{CompileOptions, compile};
use choreo_compiler::diagnostics::{Diagnostics, render_human};
use choreo_compiler::frontend::parse_file;
use choreo_compiler::preprocess::PreprocessOptions;
use choreo_compiler::sema;
use choreo_compiler::target::Target;
use choreo_compiler::source::SourceDb;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut db = SourceDb::new();
    let file = db.add("fuzz.co", text.into_owned());
    let mut diags = Diagnostics::new();
    let ast = parse_file(&db, file, &PreprocessOptions::default(), &mut diags);
    let _ = sema::check(&db, &ast, Target::default(), &mut diags);
    let _ = render_human(&db, diags.as_slice());

    let compilation = compile(&db, file, &CompileOptions::default());
    let _ = render_human(&db, &compilation.diagnostics);
    assert_eq!(compilation.cu.is_some(), !compilation.has_errors());

    let on_cpu = CompileOptions { target: Target::Cpu, ..CompileOptions::default() };
    let compilation = compile(&db, file, &on_cpu);
    let _ = render_human(&db, &compilation.diagnostics);
    assert_eq!(compilation.cpp.is_some(), !compilation.has_errors());
    assert!(compilation.cu.is_none());
});
