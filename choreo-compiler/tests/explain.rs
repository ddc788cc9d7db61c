//! `choreoc explain`'s data (`src/explain.md`) against the sources: every diagnostic code the
//! crate emits has a description, and every description is of a code the crate emits.

use choreo_compiler::explain;
use std::collections::BTreeSet;
use std::path::Path;

/// Every string literal of the form `"E0123"` / `"W0123"` / `"N0123"` in the `.rs` files under
/// `dir` (the codes are always written as such literals where diagnostics are made).
fn codes_in(dir: &Path, codes: &mut BTreeSet<String>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            codes_in(&path, codes);
            continue;
        }
        if path.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read source");
        let bytes = text.as_bytes();
        for (i, _) in text.match_indices('"') {
            let Some(code) = bytes.get(i + 1..i + 7) else { continue };
            let is_code = matches!(code[0], b'E' | b'W' | b'N')
                && code[1..5].iter().all(u8::is_ascii_digit)
                && matches!(code[1], b'0' | b'1')
                && code[5] == b'"';
            if is_code {
                codes.insert(String::from_utf8_lossy(&code[..5]).into_owned());
            }
        }
    }
}

#[test]
fn every_emitted_code_is_explained_and_every_explanation_is_emitted() {
    let mut emitted = BTreeSet::new();
    codes_in(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut emitted);
    assert!(emitted.len() > 150, "too few codes found: {emitted:?}");
    let described: BTreeSet<String> =
        explain::entries().iter().map(|e| e.code.to_string()).collect();
    let missing: Vec<_> = emitted.difference(&described).collect();
    assert!(missing.is_empty(), "codes without an entry in src/explain.md: {missing:?}");
    let stale: Vec<_> = described.difference(&emitted).collect();
    assert!(stale.is_empty(), "entries in src/explain.md for codes never emitted: {stale:?}");
}

#[test]
fn entries_are_short_and_complete() {
    for e in explain::entries() {
        let lines = e.body.lines().count();
        assert!((2..=20).contains(&lines), "{}: {lines} lines", e.code);
        assert!(e.body.contains("Fix:"), "{} says nothing about the fix", e.code);
        assert!(!e.summary.ends_with('.'), "{}: summary ends with '.'", e.code);
    }
}
