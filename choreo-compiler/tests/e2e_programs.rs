//! The end-to-end programs (`tests/e2e/NN_name.co`, built with nvcc and run on a GPU by
//! `ci/run-e2e`) stay valid Choreo: each is translated here, as the whole program it is, with
//! no error (some warn on purpose), so a compiler change that breaks one shows in `cargo test` on a
//! machine without a GPU or nvcc.

use choreo_compiler::compile::{CompileOptions, OutputMode, compile};
use choreo_compiler::diagnostics::render_human;
use choreo_compiler::source::SourceDb;
use std::path::PathBuf;

mod common;

#[test]
fn every_e2e_program_translates_cleanly() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
    let programs = common::co_files(&dir, 70);
    let mut failures = Vec::new();
    for path in &programs {
        let text = std::fs::read_to_string(path).expect("readable program");
        let mut db = SourceDb::new();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let file = db.add(name.clone(), text);
        let options = CompileOptions { mode: OutputMode::Standalone, ..CompileOptions::default() };
        let out = compile(&db, file, &options);
        if out.cu.is_none() || out.diagnostics.iter().any(|d| d.is_error()) {
            failures.push(format!("{name}:\n{}", render_human(&db, &out.diagnostics)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
