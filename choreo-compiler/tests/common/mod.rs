//! What several test suites share. Each suite uses part of it.
#![allow(dead_code)]

pub mod cxx;
pub mod nvcc;

use std::path::{Path, PathBuf};

/// The `.co` files directly in `dir`, sorted; panics when `dir` cannot be read or holds fewer
/// than `at_least` of them (a missing corpus must fail, not pass empty).
pub fn co_files(dir: &Path, at_least: usize) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "co"))
        .collect();
    files.sort();
    assert!(
        files.len() >= at_least,
        "expected at least {at_least} .co files in {}, found {}",
        dir.display(),
        files.len()
    );
    files
}
