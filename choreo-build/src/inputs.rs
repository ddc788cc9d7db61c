//! The inputs: `.co` files and hand-written `.cu` files. Glob expansion, de-duplication, Rust
//! module names, object names of hand-written files, the directories and local headers cargo
//! must watch.

use crate::error::Error;
use crate::hash::Digest;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// One `.co` input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Input {
    /// The path as the user gave it or the glob produced it (relative to the package, usually);
    /// used in diagnostics, `#line` directives and cargo lines.
    pub(crate) path: PathBuf,
    /// The Rust module (and generated file) name.
    pub(crate) module: String,
}

/// Expands the patterns and single files into a sorted, de-duplicated list, and the glob base
/// directories to watch. A pattern that matches nothing is an error; no files and no patterns
/// give an empty list (whether that is an error depends on the other kind of input).
pub(crate) fn collect(
    files: &[PathBuf],
    patterns: &[String],
) -> Result<(Vec<PathBuf>, Vec<PathBuf>), Error> {
    let mut found: Vec<PathBuf> = files.to_vec();
    let mut watch_dirs = Vec::new();
    for pattern in patterns {
        let paths = glob::glob(pattern).map_err(|e| Error::InvalidPattern {
            pattern: pattern.clone(),
            message: e.to_string(),
        })?;
        let mut matched = 0;
        for entry in paths {
            let path = entry.map_err(|e| {
                let path = e.path().to_path_buf();
                Error::io("read", path, e.into())
            })?;
            if path.is_file() {
                found.push(path);
                matched += 1;
            }
        }
        if matched == 0 {
            return Err(Error::NoInputs { pattern: Some(pattern.clone()) });
        }
        if let Some(base) = glob_base(pattern) {
            watch_dirs.push(base);
        }
    }
    // Sorted by the path as written, de-duplicated by the file it names (`a.co`, `./a.co` and a
    // glob hit of the same file are one input; the first spelling in sort order is kept).
    found.sort();
    let mut seen = BTreeMap::new();
    found.retain(|path| {
        let key = std::fs::canonicalize(path).unwrap_or_else(|_| normalize(path));
        seen.insert(key, ()).is_none()
    });
    watch_dirs.sort();
    watch_dirs.dedup();
    Ok((found, watch_dirs))
}

/// The directory part of a glob pattern before its first wildcard component (`src/kernels` for
/// `src/kernels/**/*.co`). `None` when that is the package directory itself (watching `.`
/// would include `target/` and rerun the build script forever) or the pattern has no wildcard.
pub(crate) fn glob_base(pattern: &str) -> Option<PathBuf> {
    let mut base = PathBuf::new();
    let mut wildcard = false;
    for component in Path::new(pattern).components() {
        let text = component.as_os_str().to_string_lossy();
        if text.contains(['*', '?', '[']) {
            wildcard = true;
            break;
        }
        base.push(component);
    }
    let base = normalize(&base);
    let is_package_dir = base.as_os_str().is_empty() || base == Path::new(".");
    (wildcard && !is_package_dir).then_some(base)
}

/// Removes `.` components (not `..`: that would change meaning through links).
fn normalize(path: &Path) -> PathBuf {
    path.components().filter(|c| !matches!(c, Component::CurDir)).collect()
}

/// Rust keywords that cannot be module names (strict and reserved, 2024 edition).
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut",
    "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try",
];

/// Whether `name` is a plain (non-raw) Rust identifier that is not a keyword or `_`.
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else { return false };
    (first == '_' || first.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && name != "_"
        && !KEYWORDS.contains(&name)
}

/// The module name of a `.co` file: its stem with `-` and `.` turned into `_`.
pub(crate) fn module_name(path: &Path) -> Result<String, Error> {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let module: String = stem.chars().map(|c| if c == '-' || c == '.' { '_' } else { c }).collect();
    if is_identifier(&module) {
        Ok(module)
    } else {
        Err(Error::InvalidModuleName { file: path.to_path_buf(), module })
    }
}

/// Module names for all inputs; two files with the same module name are an error.
pub(crate) fn assign_modules(paths: Vec<PathBuf>) -> Result<Vec<Input>, Error> {
    let mut by_module: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut inputs = Vec::with_capacity(paths.len());
    for path in paths {
        let module = module_name(&path)?;
        if let Some(first) = by_module.get(&module) {
            return Err(Error::DuplicateModule { module, first: first.clone(), second: path });
        }
        by_module.insert(module.clone(), path.clone());
        inputs.push(Input { path, module });
    }
    Ok(inputs)
}

/// A hand-written CUDA C++ file, compiled as it is into the library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CudaInput {
    /// The path as the user gave it or the glob produced it.
    pub(crate) path: PathBuf,
    /// The file name of its object without the extension (see [`cuda_object_stem`]).
    pub(crate) object_stem: String,
}

impl CudaInput {
    pub(crate) fn new(path: PathBuf) -> CudaInput {
        let object_stem = cuda_object_stem(&path);
        CudaInput { path, object_stem }
    }
}

/// The object name (without `.o`) of a hand-written `.cu`: its file stem (characters other than
/// ASCII letters, digits and `_` turned into `_`), `-`, and 16 hex digits of a hash of its path
/// as written (`.` components removed). The objects live in `obj/cuda/`, apart from the
/// generated ones in `obj/`; the hash keeps two files of the same stem in different folders
/// apart, and the `-` keeps the archive member names (`ar` stores base names only) apart from
/// those of generated objects, which are Rust identifiers.
pub(crate) fn cuda_object_stem(path: &Path) -> String {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let mut stem: String =
        stem.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if stem.is_empty() {
        stem.push_str("cuda");
    }
    let digest = Digest::of(normalize(path).as_os_str().as_encoded_bytes()).to_string();
    format!("{stem}-{}", &digest[..16])
}

/// The files named by `#include "…"` in `text` that exist relative to `dir` (the `.co` file's
/// folder), followed transitively through those headers (at most `limit` files), so cargo
/// reruns the build when one changes. `#include <…>` (system and toolkit headers) is not
/// followed; includes inside comments are skipped.
pub(crate) fn local_includes(text: &str, dir: &Path, limit: usize) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    let mut queue: Vec<(String, PathBuf)> = vec![(text.to_owned(), dir.to_path_buf())];
    while let Some((text, dir)) = queue.pop() {
        for name in quoted_includes(&text) {
            let joined = dir.join(&name);
            if !joined.is_file() || found.len() >= limit {
                continue;
            }
            // Canonical, so that `inc/../common.h` and `common.h` are one file and include
            // cycles end.
            let path = std::fs::canonicalize(&joined).unwrap_or(joined);
            if found.contains(&path) {
                continue;
            }
            if let Ok(header) = std::fs::read_to_string(&path) {
                let parent = path.parent().map(Path::to_path_buf).unwrap_or_default();
                queue.push((header, parent));
            }
            found.push(path);
        }
    }
    found.sort();
    found
}

/// The names in `#include "name"` lines, outside `/* … */` and `//` comments.
fn quoted_includes(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_block_comment = false;
    for line in text.lines() {
        let mut rest = line;
        // Strip comments, tracking block comments across lines.
        let mut code = String::new();
        loop {
            if in_block_comment {
                match rest.find("*/") {
                    Some(end) => {
                        rest = &rest[end + 2..];
                        in_block_comment = false;
                    }
                    None => break,
                }
            } else {
                let block = rest.find("/*");
                let line_comment = rest.find("//");
                match (block, line_comment) {
                    (Some(b), Some(l)) if l < b => {
                        code.push_str(&rest[..l]);
                        break;
                    }
                    (None, Some(l)) => {
                        code.push_str(&rest[..l]);
                        break;
                    }
                    (Some(b), _) => {
                        code.push_str(&rest[..b]);
                        code.push(' ');
                        rest = &rest[b + 2..];
                        in_block_comment = true;
                    }
                    (None, None) => {
                        code.push_str(rest);
                        break;
                    }
                }
            }
        }
        let Some(directive) = code.trim_start().strip_prefix('#') else { continue };
        let Some(operand) = directive.trim_start().strip_prefix("include") else { continue };
        let Some(quoted) = operand.trim_start().strip_prefix('"') else { continue };
        if let Some(end) = quoted.find('"') {
            names.push(quoted[..end].to_owned());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("choreo-build-inputs-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn glob_base_is_the_directory_before_the_first_wildcard() {
        assert_eq!(glob_base("src/kernels/**/*.co"), Some(PathBuf::from("src/kernels")));
        assert_eq!(glob_base("./k/*.co"), Some(PathBuf::from("k")));
        assert_eq!(glob_base("k/a?.co"), Some(PathBuf::from("k")));
        assert_eq!(glob_base("*.co"), None);
        assert_eq!(glob_base("k/one.co"), None);
    }

    #[test]
    fn module_names_come_from_stems() {
        assert_eq!(module_name(Path::new("k/matmul.co")).unwrap(), "matmul");
        assert_eq!(module_name(Path::new("k/two-stream.v2.co")).unwrap(), "two_stream_v2");
        for bad in ["k/1st.co", "k/type.co", "k/a b.co", "k/_.co", "k/a+b.co"] {
            assert!(
                matches!(module_name(Path::new(bad)), Err(Error::InvalidModuleName { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn duplicate_modules_are_an_error_naming_both_files() {
        let error = assign_modules(vec!["a/k.co".into(), "b/k.co".into()]).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("a/k.co") && text.contains("b/k.co") && text.contains("`k`"),
            "{text}"
        );
    }

    #[test]
    fn collect_sorts_dedups_and_rejects_empty_patterns() {
        let dir = temp("collect");
        fs::create_dir_all(dir.join("k/sub")).unwrap();
        for file in ["k/b.co", "k/a.co", "k/sub/c.co", "k/notes.txt"] {
            fs::write(dir.join(file), "").unwrap();
        }
        let base = dir.to_str().unwrap();
        let (files, watch) = collect(
            &[dir.join("k/a.co")],
            &[format!("{base}/k/**/*.co"), format!("{base}/k/*.co")],
        )
        .unwrap();
        let names: Vec<_> =
            files.iter().map(|f| f.strip_prefix(&dir).unwrap().to_path_buf()).collect();
        assert_eq!(names, [Path::new("k/a.co"), Path::new("k/b.co"), Path::new("k/sub/c.co")]);
        assert_eq!(watch, [dir.join("k")]);

        let error = collect(&[], &[format!("{base}/k/*.cu")]).unwrap_err();
        assert!(matches!(&error, Error::NoInputs { pattern: Some(p) } if p.ends_with("*.cu")));
        // Nothing asked for is not an error here: a build may have only `.cu` or only `.co` files.
        let (none, no_dirs) = collect(&[], &[]).unwrap();
        assert!(none.is_empty() && no_dirs.is_empty());
        let error = collect(&[], &["k/[".to_owned()]).unwrap_err();
        assert!(matches!(error, Error::InvalidPattern { .. }), "{error}");
    }

    #[test]
    fn cuda_object_names_keep_stems_apart_from_each_other_and_from_modules() {
        let util_a = cuda_object_stem(Path::new("a/util.cu"));
        let util_b = cuda_object_stem(Path::new("b/util.cu"));
        assert!(util_a.starts_with("util-") && util_b.starts_with("util-"), "{util_a} {util_b}");
        assert_ne!(util_a, util_b);
        // The name depends on the file named, not on how `.` components spell it.
        assert_eq!(util_a, cuda_object_stem(Path::new("./a/util.cu")));
        // Stable across runs (it names cached objects): a fixed hash of the path.
        assert_eq!(util_a.len(), "util-".len() + 16);
        assert!(util_a["util-".len()..].chars().all(|c| c.is_ascii_hexdigit()), "{util_a}");
        // Odd characters become `_`; the result is never a Rust identifier (the `-`), so no
        // generated object (named after its module) can have the same name.
        let odd = cuda_object_stem(Path::new("k/my kernels+v2.cu"));
        assert!(odd.starts_with("my_kernels_v2-"), "{odd}");
        for name in [&util_a, &odd] {
            assert!(!is_identifier(name), "{name}");
        }
        assert!(cuda_object_stem(Path::new("k/.cu")).starts_with("_cu-"));
    }

    #[test]
    fn finds_local_includes_transitively_and_skips_system_and_commented_ones() {
        let dir = temp("includes");
        fs::create_dir_all(dir.join("inc")).unwrap();
        fs::write(dir.join("common.h"), "#include \"inc/deep.h\"\n").unwrap();
        fs::write(dir.join("inc/deep.h"), "#include \"../common.h\"\n").unwrap();
        let text = "#include \"choreo.h\"\n#include <vector>\n  #  include \"common.h\"\n\
                    // #include \"commented.h\"\n/* #include \"block.h\"\n*/\n";
        fs::write(dir.join("commented.h"), "").unwrap();
        fs::write(dir.join("block.h"), "").unwrap();
        let found = local_includes(text, &dir, 100);
        assert_eq!(found, [dir.join("common.h"), dir.join("inc/deep.h")]);
    }
}
