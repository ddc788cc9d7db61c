//! The README shows the example app's own code: each code block of `README.md` preceded by a
//! line `<!-- include: PATH:ANCHOR -->` must be, line for line, the part of `PATH` (relative to
//! the repository root) between `ANCHOR: name` and `ANCHOR_END: name` — the regions the book
//! includes with `{{#include PATH:ANCHOR}}`, without the lines that mark other anchors, as
//! mdBook does. The README's first code block is the Choreo GEMM.

use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

/// The lines of `text` between the `ANCHOR: name` and `ANCHOR_END: name` lines, without any
/// anchor lines; `None` when the anchor is missing or not closed.
fn anchor<'a>(text: &'a str, name: &str) -> Option<Vec<&'a str>> {
    let is = |line: &str, what: &str| {
        line.trim_start().trim_start_matches("//").trim() == format!("{what}: {name}")
    };
    let mut lines = text.lines();
    lines.by_ref().find(|line| is(line, "ANCHOR"))?;
    let mut out = Vec::new();
    for line in lines {
        if is(line, "ANCHOR_END") {
            return Some(out);
        }
        if !line.contains("ANCHOR: ") && !line.contains("ANCHOR_END: ") {
            out.push(line);
        }
    }
    None
}

/// Each `(PATH:ANCHOR, index of the code block, its lines)` of the README's marked blocks.
fn marked_blocks(readme: &str) -> Vec<(String, usize, Vec<&str>)> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut out = Vec::new();
    let mut block = 0;
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].starts_with("```") {
            i += 1;
            continue;
        }
        let start = i + 1;
        let end = (start..lines.len()).find(|&j| lines[j].starts_with("```")).expect("closed");
        let marker = i.checked_sub(1).map(|j| lines[j].trim());
        if let Some(spec) = marker.and_then(|m| m.strip_prefix("<!-- include: ")) {
            let spec = spec.strip_suffix("-->").expect("a closed comment").trim().to_string();
            out.push((spec, block, lines[start..end].to_vec()));
        }
        block += 1;
        i = end + 1;
    }
    out
}

#[test]
fn readme_code_is_the_example_apps_code() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let blocks = marked_blocks(&readme);
    let specs: Vec<&str> = blocks.iter().map(|(spec, ..)| spec.as_str()).collect();
    assert!(
        specs.contains(&"example-app/kernels/hopper/gemm.co:gemm_f16")
            && specs.contains(&"example-app/src/matmul.rs:readme_call"),
        "the README's GEMM blocks are not marked: {specs:?}"
    );
    assert_eq!(blocks[0].1, 0, "the README's first code block is not the Choreo GEMM");
    assert_eq!(blocks[0].0, "example-app/kernels/hopper/gemm.co:gemm_f16");
    for (spec, _, shown) in &blocks {
        let (path, name) = spec.rsplit_once(':').expect("PATH:ANCHOR");
        let text =
            std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        let want = anchor(&text, name).unwrap_or_else(|| panic!("{path} has no anchor `{name}`"));
        if let Some(at) = (0..shown.len().max(want.len())).find(|&i| shown.get(i) != want.get(i)) {
            panic!(
                "README.md's block of {spec} differs from the file at its line {}:\n  README: \
                 {:?}\n  file:   {:?}",
                at + 1,
                shown.get(at),
                want.get(at)
            );
        }
    }
}

#[test]
fn anchors_are_extracted_as_mdbook_does() {
    let text = "a\n// ANCHOR: x\nb\n  // ANCHOR: y\nc\n// ANCHOR_END: y\n// ANCHOR_END: x\nd\n";
    assert_eq!(anchor(text, "x"), Some(vec!["b", "c"]));
    assert_eq!(anchor(text, "y"), Some(vec!["c"]));
    assert_eq!(anchor(text, "z"), None);
    assert_eq!(anchor("// ANCHOR: x\nb\n", "x"), None);
    let readme = "```sh\nls\n```\n<!-- include: f.rs:x -->\n```rust\nb\nc\n```\n";
    assert_eq!(marked_blocks(readme), vec![("f.rs:x".to_string(), 1, vec!["b", "c"])]);
}
