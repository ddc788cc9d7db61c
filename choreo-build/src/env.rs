//! Environment access that remembers what was read, so that every variable the build depends
//! on gets a `cargo::rerun-if-env-changed` line (design §6), and that tests can replace.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};

/// Variables that cargo sets for build scripts. Cargo reruns the script when they change by
/// itself, so they get no `rerun-if-env-changed` line.
const SET_BY_CARGO: &[&str] = &[
    "OUT_DIR",
    "TARGET",
    "HOST",
    "NUM_JOBS",
    "OPT_LEVEL",
    "PROFILE",
    "DEBUG",
    "CARGO_CFG_TARGET_OS",
    "CARGO_CFG_TARGET_ARCH",
    "CARGO_CFG_TARGET_ENV",
    "CARGO_MANIFEST_DIR",
    "CARGO_PKG_NAME",
];

/// The environment of one build: the process environment, or a fixed map in tests.
#[derive(Debug, Default)]
pub(crate) struct Env {
    /// `None`: the process environment.
    fixed: Option<BTreeMap<String, OsString>>,
    /// Every variable looked up that cargo does not set itself.
    read: RefCell<BTreeSet<String>>,
    /// Tests: what `python3` would say its `purelib` directory is (`None`: no python3).
    #[cfg(test)]
    pub(crate) python_purelib: Option<std::path::PathBuf>,
}

impl Env {
    /// The process environment.
    pub(crate) fn process() -> Env {
        Env::default()
    }

    /// A fixed environment (tests).
    #[cfg(test)]
    pub(crate) fn fixed<'a>(vars: impl IntoIterator<Item = (&'a str, &'a str)>) -> Env {
        let fixed = vars.into_iter().map(|(k, v)| (k.to_owned(), OsString::from(v))).collect();
        Env { fixed: Some(fixed), read: RefCell::default(), python_purelib: None }
    }

    /// The raw value of `name`, recording the lookup.
    pub(crate) fn var_os(&self, name: &str) -> Option<OsString> {
        if !SET_BY_CARGO.contains(&name) {
            self.read.borrow_mut().insert(name.to_owned());
        }
        match &self.fixed {
            Some(map) => map.get(name).cloned(),
            None => std::env::var_os(name),
        }
    }

    /// The value of `name` when it is set and not empty.
    pub(crate) fn non_empty(&self, name: &str) -> Option<OsString> {
        self.var_os(name).filter(|value| !value.is_empty())
    }

    /// The value of `name` as text, when set, not empty and valid UTF-8.
    pub(crate) fn text(&self, name: &str) -> Option<String> {
        self.non_empty(name).and_then(|value| value.into_string().ok())
    }

    /// Whether `name` is set at all (even empty), like docs.rs's `DOCS_RS`.
    pub(crate) fn is_set(&self, name: &str) -> bool {
        self.var_os(name).is_some()
    }

    /// The variables read so far that need a `rerun-if-env-changed` line, sorted.
    pub(crate) fn read_vars(&self) -> Vec<String> {
        self.read.borrow().iter().cloned().collect()
    }

    /// Whether this is the process environment (commands we spawn see the same variables).
    pub(crate) fn is_process(&self) -> bool {
        self.fixed.is_none()
    }
}

/// `OsStr` to text for messages.
pub(crate) fn lossy(value: &OsStr) -> String {
    value.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_reads_except_cargo_variables() {
        let env = Env::fixed([("NVCC", "/x/nvcc"), ("TARGET", "x86_64-unknown-linux-gnu")]);
        assert_eq!(env.text("NVCC").as_deref(), Some("/x/nvcc"));
        assert_eq!(env.text("TARGET").as_deref(), Some("x86_64-unknown-linux-gnu"));
        assert_eq!(env.text("CUDA_HOME"), None);
        assert_eq!(env.read_vars(), ["CUDA_HOME", "NVCC"]);
    }

    #[test]
    fn empty_values_count_as_unset_except_for_is_set() {
        let env = Env::fixed([("DOCS_RS", ""), ("CUDA_HOME", "")]);
        assert!(env.is_set("DOCS_RS"));
        assert_eq!(env.non_empty("CUDA_HOME"), None);
    }
}
