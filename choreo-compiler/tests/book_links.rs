//! The user guide (`docs/book/`, an mdBook) holds together without mdbook: every relative link
//! and every `{{#include …}}` of `docs/book/src` resolves to a file inside the repository, every
//! page is listed in `SUMMARY.md`, and nothing points outside the repository (a clone has no
//! `../shared`). The README's relative links are checked the same way.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .canonicalize()
        .expect("canonical workspace root")
}

fn book_src() -> PathBuf {
    repo_root().join("docs/book/src")
}

/// Every `.md` file under `dir`, sorted.
fn markdown_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("readable folder").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The targets of inline links `[text](target)` outside fenced code blocks and inline code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop inline code spans: `a[i](j)` in code is not a link.
        let mut plain = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("").to_string();
            out.push(target);
            rest = &after[end..];
        }
    }
    out
}

/// The paths of `{{#include path}}` / `{{#include path:anchor}}` (also inside code blocks, as
/// mdbook expands them there too), except escaped ones.
fn includes(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("{{#include") {
        let escaped = rest[..at].ends_with('\\'); // `\{{#include …}}` is shown, not expanded
        let after = &rest[at + "{{#include".len()..];
        let Some(end) = after.find("}}") else { break };
        let arg = after[..end].trim();
        if !escaped {
            out.push(arg.split(':').next().unwrap_or("").to_string());
        }
        rest = &after[end..];
    }
    out
}

fn is_external(target: &str) -> bool {
    target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:")
}

/// Checks one relative target of `file`; `Some(problem)` when it is broken or leaves the repo.
fn check_target(file: &Path, target: &str, root: &Path) -> Option<String> {
    let path = target.split('#').next().unwrap_or("");
    if path.is_empty() {
        return None; // an anchor on the same page
    }
    if path.contains("shared") && path.contains("..") || path.starts_with('/') {
        return Some(format!("`{target}` points outside the repository"));
    }
    let joined = file.parent().expect("file has a folder").join(path);
    // Resolve `..` lexically first: a path that climbs above the root is outside even if the
    // machine happens to have the folder.
    let mut resolved = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                resolved.pop();
            }
            Component::CurDir => {}
            other => resolved.push(other),
        }
    }
    if !resolved.starts_with(root) {
        return Some(format!("`{target}` points outside the repository"));
    }
    if !resolved.exists() {
        return Some(format!("`{target}` does not exist ({})", resolved.display()));
    }
    None
}

#[test]
fn book_links_and_includes_resolve_inside_the_repository() {
    let root = repo_root();
    let src = book_src();
    let mut problems = Vec::new();
    let mut files = markdown_files(&src);
    files.push(root.join("README.md"));
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable page");
        let shown = file.strip_prefix(&root).unwrap_or(file).display().to_string();
        if file.starts_with(&src) && (text.contains("/work/") || text.contains("../shared")) {
            problems.push(format!("{shown}: names a path outside the repository"));
        }
        for target in links(&text).into_iter().filter(|t| !is_external(t)) {
            if let Some(p) = check_target(file, &target, &root) {
                problems.push(format!("{shown}: link {p}"));
            }
        }
        for target in includes(&text) {
            if let Some(p) = check_target(file, &target, &root) {
                problems.push(format!("{shown}: include {p}"));
            }
        }
    }
    assert!(problems.is_empty(), "broken book links:\n{}", problems.join("\n"));
}

/// Includes by line numbers break silently when the file changes: chapters include parts of
/// files by anchor (`{{#include path:name}}`, `// ANCHOR: name` … `// ANCHOR_END: name` in the
/// file), and every anchor they name exists.
#[test]
fn includes_name_anchors_that_exist() {
    let src = book_src();
    let mut problems = Vec::new();
    for file in markdown_files(&src) {
        let text = std::fs::read_to_string(&file).expect("readable page");
        let mut rest = text.as_str();
        while let Some(at) = rest.find("{{#include") {
            let after = &rest[at + "{{#include".len()..];
            let arg = after.split("}}").next().unwrap_or("").trim();
            rest = after;
            let mut parts = arg.splitn(2, ':');
            let (path, selector) = (parts.next().unwrap_or(""), parts.next());
            let Some(selector) = selector else { continue };
            let target = file.parent().expect("folder").join(path);
            let shown = file.strip_prefix(&src).unwrap_or(&file).display().to_string();
            if selector.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                problems.push(format!("{shown}: {arg} includes by line numbers; use an anchor"));
                continue;
            }
            let body = std::fs::read_to_string(&target).unwrap_or_default();
            let (open, close) = (format!("ANCHOR: {selector}"), format!("ANCHOR_END: {selector}"));
            if !body.contains(&open) || !body.contains(&close) {
                problems.push(format!("{shown}: {arg}: the file has no anchor `{selector}`"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_book_page_is_in_the_summary() {
    let src = book_src();
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).expect("SUMMARY.md");
    let listed: BTreeSet<PathBuf> = links(&summary)
        .into_iter()
        .filter(|t| !t.is_empty() && !is_external(t))
        .map(|t| src.join(t.split('#').next().unwrap_or("")))
        .collect();
    assert!(listed.len() >= 6, "SUMMARY.md lists too few chapters: {listed:?}");
    let missing: Vec<String> = markdown_files(&src)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "SUMMARY.md"))
        .filter(|p| !listed.contains(p))
        .map(|p| p.strip_prefix(&src).unwrap_or(&p).display().to_string())
        .collect();
    assert!(missing.is_empty(), "pages missing from SUMMARY.md: {missing:?}");
    let absent: Vec<String> =
        listed.iter().filter(|p| !p.exists()).map(|p| p.display().to_string()).collect();
    assert!(absent.is_empty(), "SUMMARY.md lists missing pages: {absent:?}");
}

#[test]
fn every_example_is_included_by_a_chapter() {
    let src = book_src();
    let mut included = BTreeSet::new();
    for file in markdown_files(&src) {
        let text = std::fs::read_to_string(&file).expect("readable page");
        for target in includes(&text) {
            included.insert(file.parent().expect("folder").join(target));
        }
    }
    let mut orphans = Vec::new();
    for entry in std::fs::read_dir(src.join("examples")).expect("examples folder").flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|x| x == "co") && !included.contains(&path) {
            orphans.push(path.display().to_string());
        }
    }
    assert!(orphans.is_empty(), "examples no chapter includes: {orphans:?}");
}
