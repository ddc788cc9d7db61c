//! The published crate is self-contained: every file that `src/` reads at compile time
//! (`include_str!`/`include_bytes!` with a literal path) lies inside the crate and is in the
//! file list of `cargo package`. Above all `include/choreo.h`, the runtime header that the
//! generated code includes and that `CHOREO_H` embeds.
//!
//! `ci/check-package` goes further: it packages every library crate of the workspace and builds
//! this one from its package.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The files `cargo package` would put in the crate, relative to the crate folder.
fn package_list() -> BTreeSet<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args(["package", "--list", "--allow-dirty", "--offline", "--manifest-path"])
        .arg(manifest_dir().join("Cargo.toml"));
    // The variables of the cargo running this test must not reach the inner one.
    for (var, _) in std::env::vars_os() {
        let var = var.to_string_lossy().into_owned();
        if var.starts_with("CARGO_") && var != "CARGO_HOME" {
            command.env_remove(var);
        }
    }
    let output = command.output().expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo package --list failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).lines().map(str::to_owned).collect()
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable source folder").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The literal paths of `include_str!("…")` and `include_bytes!("…")` in `text`, outside
/// comments.
fn included_paths(text: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for line in text.lines().filter(|line| !line.trim_start().starts_with("//")) {
        for macro_call in ["include_str!(\"", "include_bytes!(\""] {
            let mut rest = line;
            while let Some(at) = rest.find(macro_call) {
                rest = &rest[at + macro_call.len()..];
                if let Some(end) = rest.find('"') {
                    paths.push(rest[..end].to_owned());
                    rest = &rest[end..];
                }
            }
        }
    }
    paths
}

/// `path` relative to the crate folder with `.` and `..` resolved; `None` when it leaves the
/// crate.
fn within_crate(path: &Path) -> Option<String> {
    let relative = path.strip_prefix(manifest_dir()).ok()?;
    let mut parts: Vec<String> = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.join("/"))
}

#[test]
fn includes_are_found_in_code_but_not_in_comments() {
    assert_eq!(
        included_paths(
            "const A: &str = include_str!(\"../include/choreo.h\");\n// include_str!(\"x\")"
        ),
        ["../include/choreo.h"]
    );
    assert_eq!(
        included_paths("f(include_bytes!(\"a.bin\"), include_str!(\"b.txt\"))"),
        ["b.txt", "a.bin"]
    );
}

#[test]
fn the_package_ships_every_file_the_sources_include() {
    let listed = package_list();
    assert!(listed.contains("include/choreo.h"), "choreo.h is not packaged: {listed:?}");
    let mut checked = 0;
    for source in rust_files(&manifest_dir().join("src")) {
        let text = std::fs::read_to_string(&source).expect("readable source");
        let dir = source.parent().expect("a file has a folder");
        for included in included_paths(&text) {
            let shown = format!("{} includes {included:?}", source.display());
            let path = within_crate(&dir.join(&included))
                .unwrap_or_else(|| panic!("{shown}, which is outside the crate"));
            assert!(listed.contains(&path), "{shown}, but {path} is not in the package");
            checked += 1;
        }
    }
    assert!(checked >= 1, "no include_str! found; CHOREO_H should have one");
}
