//! Snapshot harness over the front-end fixture corpus (`tests/fixtures/README.md`).
//!
//! - `parse/*.co`: no error diagnostics; snapshot = the AST dump (plus any warnings).
//! - `reject-syntax/*.co`: at least one error from preprocess/lex/parse (for `multi_*` files
//!   exactly the count their header states); snapshot = the rendered diagnostics.
//! - `reject-sema/*.co`: no parse error, at least one error from semantic analysis (for
//!   `multi_*` files exactly the stated count); snapshot = the rendered diagnostics of parse +
//!   sema. A second header line `// arch: sm_86` checks the file for that architecture
//!   (`choreoc --arch`) instead of the default one.
//! - Every error code listed in the doc tables of the front end (preprocess, lexer, parser,
//!   sema) is triggered by at least one fixture, and every code those modules emit is listed.
//!
//! Each directory test goes through all files in sorted order, collects every problem and
//! fails once at the end with the full list, so one run shows everything. Snapshots live in
//! `tests/snapshots/fixtures_snapshots__<dir>__<stem>.snap`; regenerate them with
//! `INSTA_UPDATE=always cargo test -p choreo-compiler --test fixtures_snapshots` and review
//! the diff. File names in the rendered diagnostics are relative (`fixtures/parse/x.co`), so
//! the snapshots do not depend on the checkout location.

use choreo_compiler::diagnostics::{Diagnostic, Diagnostics, render_human};
use choreo_compiler::dump::dump_file;
use choreo_compiler::frontend::parse_file;
use choreo_compiler::preprocess::PreprocessOptions;
use choreo_compiler::sema;
use choreo_compiler::source::SourceDb;
use choreo_compiler::target::Target;
use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

/// The crate root (`choreo-compiler/`).
fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A fixture file: its name as shown in diagnostics (`fixtures/<dir>/<stem>.co`), its stem
/// and its text.
struct Fixture {
    display_name: String,
    stem: String,
    text: String,
}

/// The `.co` files of `tests/fixtures/<dir>`, sorted by name.
fn fixtures(dir: &str) -> Vec<Fixture> {
    let path = crate_dir().join("tests/fixtures").join(dir);
    let entries = std::fs::read_dir(&path)
        .unwrap_or_else(|e| panic!("cannot read fixture directory {}: {e}", path.display()));
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|ext| ext == "co"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", path.display());
    files
        .into_iter()
        .map(|file| {
            let stem = file.file_stem().and_then(|s| s.to_str()).expect("UTF-8 file name");
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
            Fixture { display_name: format!("fixtures/{dir}/{stem}.co"), stem: stem.into(), text }
        })
        .collect()
}

/// What the front end made of one fixture.
struct Outcome {
    db: SourceDb,
    /// Diagnostics of preprocess + lex + parse.
    parse_diags: Vec<Diagnostic>,
    /// Diagnostics of sema (empty unless asked for).
    sema_diags: Vec<Diagnostic>,
    /// The AST dump.
    dump: String,
}

fn run_front_end(fixture: &Fixture, with_sema: bool) -> Outcome {
    let mut db = SourceDb::new();
    let file = db.add(fixture.display_name.clone(), fixture.text.clone());
    let mut parse_diags = Diagnostics::new();
    let ast = parse_file(&db, file, &PreprocessOptions::default(), &mut parse_diags);
    let dump = dump_file(&db, &ast);
    let mut sema_diags = Diagnostics::new();
    if with_sema {
        let _program = sema::check(&db, &ast, fixture_target(&fixture.text), &mut sema_diags);
    }
    Outcome { db, parse_diags: parse_diags.into_vec(), sema_diags: sema_diags.into_vec(), dump }
}

/// The target a fixture is checked for: the default, or the architecture named by a second
/// header line `// arch: sm_NN` (for rules that depend on it).
fn fixture_target(text: &str) -> Target {
    let arch = text.lines().nth(1).and_then(|l| l.strip_prefix("// arch: "));
    match arch {
        Some(name) => Target::Cuda(name.trim().parse().expect("a known architecture")),
        None => Target::default(),
    }
}

fn errors(diags: &[Diagnostic]) -> usize {
    diags.iter().filter(|d| d.is_error()).count()
}

/// `N` of a `// reject: N errors …` header line.
fn stated_error_count(text: &str) -> Option<usize> {
    let header = text.lines().next()?.strip_prefix("// reject: ")?;
    let (count, rest) = header.split_once(' ')?;
    rest.starts_with("errors").then_some(())?;
    count.parse().ok()
}

/// For `multi_*` fixtures: the error count must be the one the header states.
fn check_stated_count(problems: &mut Problems, fixture: &Fixture, reported: usize) {
    if !fixture.stem.starts_with("multi_") {
        return;
    }
    match stated_error_count(&fixture.text) {
        Some(stated) if stated != reported => problems
            .push(fixture, format!("header states {stated} errors, {reported} were reported")),
        Some(_) => {}
        None => problems.push(fixture, "multi_ fixture without a `// reject: N errors` header"),
    }
}

/// Every diagnostic says what is wrong at its location: its primary label has a text.
fn check_labels(problems: &mut Problems, fixture: &Fixture, diags: &[Diagnostic]) {
    for d in diags.iter().filter(|d| d.primary.message.trim().is_empty()) {
        problems.push(fixture, format!("{} \"{}\" has no label text", d.code, d.message));
    }
}

/// Collects the problems of one directory test and fails once at the end.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn push(&mut self, fixture: &Fixture, problem: impl Into<String>) {
        self.0.push(format!("{}: {}", fixture.display_name, problem.into()));
    }

    /// Compares `value` with the snapshot `<dir>__<stem>`, recording a mismatch instead of
    /// failing at once.
    fn snapshot(&mut self, dir: &str, fixture: &Fixture, value: &str) {
        let name = format!("{dir}__{}", fixture.stem);
        let result = catch_unwind(AssertUnwindSafe(|| {
            insta::with_settings!({
                description => fixture.display_name.as_str(),
                omit_expression => true,
            }, {
                insta::assert_snapshot!(name.as_str(), value);
            });
        }));
        if result.is_err() {
            self.push(fixture, format!("snapshot `{name}` does not match"));
        }
    }

    fn finish(self, what: &str) {
        assert!(
            self.0.is_empty(),
            "{} problem(s) in {what}:\n  {}",
            self.0.len(),
            self.0.join("\n  ")
        );
    }
}

#[test]
fn parse_fixtures_dump_without_errors() {
    let mut problems = Problems::default();
    for fixture in fixtures("parse") {
        let outcome = run_front_end(&fixture, false);
        let n = errors(&outcome.parse_diags);
        if n > 0 {
            let rendered = render_human(&outcome.db, &outcome.parse_diags);
            problems.push(&fixture, format!("{n} error(s) where none were expected:\n{rendered}"));
        }
        check_labels(&mut problems, &fixture, &outcome.parse_diags);
        let mut snapshot = outcome.dump;
        if !outcome.parse_diags.is_empty() {
            snapshot.push_str("\n--- diagnostics ---\n");
            snapshot.push_str(&render_human(&outcome.db, &outcome.parse_diags));
        }
        problems.snapshot("parse", &fixture, &snapshot);
    }
    problems.finish("fixtures/parse");
}

#[test]
fn reject_syntax_fixtures_report_syntax_errors() {
    let mut problems = Problems::default();
    for fixture in fixtures("reject-syntax") {
        let outcome = run_front_end(&fixture, false);
        let n = errors(&outcome.parse_diags);
        if n == 0 {
            problems.push(&fixture, "no error from preprocess/lex/parse");
        }
        check_stated_count(&mut problems, &fixture, n);
        check_labels(&mut problems, &fixture, &outcome.parse_diags);
        let rendered = render_human(&outcome.db, &outcome.parse_diags);
        problems.snapshot("reject_syntax", &fixture, &rendered);
    }
    problems.finish("fixtures/reject-syntax");
}

#[test]
fn reject_sema_fixtures_report_sema_errors() {
    let mut problems = Problems::default();
    for fixture in fixtures("reject-sema") {
        let outcome = run_front_end(&fixture, true);
        let parse_errors = errors(&outcome.parse_diags);
        if parse_errors > 0 {
            let rendered = render_human(&outcome.db, &outcome.parse_diags);
            problems.push(&fixture, format!("{parse_errors} parse error(s):\n{rendered}"));
        }
        let sema_errors = errors(&outcome.sema_diags);
        if sema_errors == 0 {
            problems.push(&fixture, "no error from semantic analysis");
        }
        check_stated_count(&mut problems, &fixture, parse_errors + sema_errors);
        let mut all = outcome.parse_diags;
        all.extend(outcome.sema_diags);
        check_labels(&mut problems, &fixture, &all);
        let rendered = render_human(&outcome.db, &all);
        problems.snapshot("reject_sema", &fixture, &rendered);
    }
    problems.finish("fixtures/reject-sema");
}

// -- error-code coverage ------------------------------------------------------------------------

/// The front-end sources whose module docs list their diagnostic codes, and the sources whose
/// code literals must appear in those lists.
const CODE_TABLES: [&str; 4] =
    ["src/preprocess.rs", "src/lexer.rs", "src/parser/mod.rs", "src/sema/mod.rs"];
const CODE_EMITTERS: [&str; 4] = ["src/preprocess.rs", "src/lexer.rs", "src/parser", "src/sema"];

/// Documented error codes that no source text can trigger, with the reason. Each entry is
/// re-checked: if a fixture does trigger it, the entry must go.
const UNREACHABLE_FROM_SOURCE: [(&str, &str); 1] = [(
    "E0505",
    "sema's check of non-constant parameter dimensions; the parser accepts only integer \
         literals, `+ - * / %` and parentheses there and reports anything else as E0332",
)];

/// Every `E0000`-shaped word in `text` (`prefix` is `'E'` or `'W'`).
fn codes_in(text: &str, prefix: char) -> BTreeSet<String> {
    let bytes = text.as_bytes();
    let mut codes = BTreeSet::new();
    for (i, _) in text.match_indices(prefix) {
        let word = &bytes[i..];
        let boundary_before = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        let digits = word.len() >= 5 && word[1..5].iter().all(u8::is_ascii_digit);
        let boundary_after = word.get(5).is_none_or(|b| !b.is_ascii_alphanumeric());
        if boundary_before && digits && boundary_after {
            codes.insert(text[i..i + 5].to_string());
        }
    }
    codes
}

/// The codes listed in the leading `//!` docs of the table files.
fn documented_codes(prefix: char) -> BTreeSet<String> {
    let mut codes = BTreeSet::new();
    for file in CODE_TABLES {
        let text = std::fs::read_to_string(crate_dir().join(file)).expect("readable source");
        let docs: String = text
            .lines()
            .take_while(|l| l.starts_with("//!") || l.trim().is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        codes.extend(codes_in(&docs, prefix));
    }
    codes
}

/// The codes written as string literals (`"E0301"`) in the front-end sources.
fn emitted_codes() -> BTreeSet<String> {
    fn visit(path: &Path, codes: &mut BTreeSet<String>) {
        if path.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
                .expect("readable source directory")
                .map(|e| e.expect("readable entry").path())
                .collect();
            entries.sort();
            for entry in entries {
                visit(&entry, codes);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(path).expect("readable source");
            for prefix in ['E', 'W'] {
                for code in codes_in(&text, prefix) {
                    if text.contains(&format!("\"{code}\"")) {
                        codes.insert(code);
                    }
                }
            }
        }
    }
    let mut codes = BTreeSet::new();
    for emitter in CODE_EMITTERS {
        visit(&crate_dir().join(emitter), &mut codes);
    }
    codes
}

/// The codes the fixtures' snapshots show: parse diagnostics of every fixture, plus sema
/// diagnostics of `reject-sema/`.
fn triggered_codes() -> BTreeSet<String> {
    let mut codes = BTreeSet::new();
    for (dir, with_sema) in [("parse", false), ("reject-syntax", false), ("reject-sema", true)] {
        for fixture in fixtures(dir) {
            let outcome = run_front_end(&fixture, with_sema);
            for d in outcome.parse_diags.iter().chain(&outcome.sema_diags) {
                codes.insert(d.code.to_string());
            }
        }
    }
    codes
}

#[test]
fn every_error_code_is_documented_and_triggered_by_a_fixture() {
    let documented: BTreeSet<String> =
        documented_codes('E').into_iter().chain(documented_codes('W')).collect();
    assert!(documented.len() > 100, "code tables not found: {documented:?}");
    let emitted = emitted_codes();
    let undocumented: Vec<&String> = emitted.difference(&documented).collect();
    let triggered = triggered_codes();
    let exempt = |code: &str| UNREACHABLE_FROM_SOURCE.iter().any(|(c, _)| *c == code);
    let untriggered: Vec<&String> = documented
        .iter()
        .filter(|c| c.starts_with('E') && !triggered.contains(*c) && !exempt(c))
        .collect();
    let wrongly_exempt: Vec<&str> = UNREACHABLE_FROM_SOURCE
        .iter()
        .map(|(c, _)| *c)
        .filter(|c| triggered.contains(*c) || !documented.contains(*c))
        .collect();
    assert!(
        undocumented.is_empty() && untriggered.is_empty() && wrongly_exempt.is_empty(),
        "codes emitted by the front end but missing from its doc tables: {undocumented:?}\n\
         error codes no fixture triggers: {untriggered:?}\n\
         codes listed as unreachable that are triggered or not documented: {wrongly_exempt:?}"
    );
}
