//! Environment access that remembers what was read, so that every variable a build depends on
//! gets a `cargo::rerun-if-env-changed` line, and that tests can replace.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::process::Command;

/// Variables that cargo sets for build scripts. Cargo reruns the script when they change by
/// itself, so they are not listed by [`Env::read_vars`].
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

/// Where `python3`'s `purelib` folder comes from.
#[derive(Debug, Clone)]
enum Python {
    /// Ask `python3` (the process environment).
    Run,
    /// Given (a fixed environment): `None` means there is no `python3`.
    Given(Option<PathBuf>),
}

/// The environment of one discovery or build: the process environment (optionally with some
/// variables replaced), or a fixed map in tests.
///
/// Every lookup of a variable that cargo does not set itself is recorded;
/// [`Env::read_vars`] lists them for `rerun-if-env-changed` lines.
///
/// ```
/// use choreo_toolkit::Env;
///
/// let env = Env::fixed([("CUDA_HOME", "/opt/cuda")]);
/// assert_eq!(env.text("CUDA_HOME").as_deref(), Some("/opt/cuda"));
/// assert_eq!(env.text("NVCC"), None);
/// assert_eq!(env.read_vars(), ["CUDA_HOME", "NVCC"]);
/// ```
#[derive(Debug)]
pub struct Env {
    /// `None`: the process environment.
    fixed: Option<BTreeMap<String, OsString>>,
    /// Values that replace those of the process environment.
    overrides: BTreeMap<String, OsString>,
    /// Every variable looked up that cargo does not set itself.
    read: RefCell<BTreeSet<String>>,
    python: Python,
}

impl Default for Env {
    fn default() -> Env {
        Env::process()
    }
}

impl Env {
    /// The process environment; `python3` is asked for its site-packages folder.
    pub fn process() -> Env {
        Env {
            fixed: None,
            overrides: BTreeMap::new(),
            read: RefCell::default(),
            python: Python::Run,
        }
    }

    /// A fixed environment holding exactly `vars` (tests). Nothing is spawned: there is no
    /// `python3` unless [`Env::with_python_purelib`] gives its folder.
    pub fn fixed<'a>(vars: impl IntoIterator<Item = (&'a str, &'a str)>) -> Env {
        let fixed = vars.into_iter().map(|(k, v)| (k.to_owned(), OsString::from(v))).collect();
        Env {
            fixed: Some(fixed),
            overrides: BTreeMap::new(),
            read: RefCell::default(),
            python: Python::Given(None),
        }
    }

    /// This environment with `name` set to `value` (e.g. `NVCC` from a command-line option).
    pub fn with_var(mut self, name: &str, value: impl Into<OsString>) -> Env {
        let value = value.into();
        match &mut self.fixed {
            Some(map) => {
                map.insert(name.to_owned(), value);
            }
            None => {
                self.overrides.insert(name.to_owned(), value);
            }
        }
        self
    }

    /// This environment with `python3`'s `purelib` folder given instead of asked for
    /// (`None`: there is no `python3`).
    pub fn with_python_purelib(mut self, purelib: Option<PathBuf>) -> Env {
        self.python = Python::Given(purelib);
        self
    }

    /// The raw value of `name`, recording the lookup.
    pub fn var_os(&self, name: &str) -> Option<OsString> {
        if !SET_BY_CARGO.contains(&name) {
            self.read.borrow_mut().insert(name.to_owned());
        }
        if let Some(value) = self.overrides.get(name) {
            return Some(value.clone());
        }
        match &self.fixed {
            Some(map) => map.get(name).cloned(),
            None => std::env::var_os(name),
        }
    }

    /// The value of `name` when it is set and not empty.
    pub fn non_empty(&self, name: &str) -> Option<OsString> {
        self.var_os(name).filter(|value| !value.is_empty())
    }

    /// The value of `name` as text, when set, not empty and valid UTF-8.
    pub fn text(&self, name: &str) -> Option<String> {
        self.non_empty(name).and_then(|value| value.into_string().ok())
    }

    /// Whether `name` is set at all (even empty), like docs.rs's `DOCS_RS`.
    pub fn is_set(&self, name: &str) -> bool {
        self.var_os(name).is_some()
    }

    /// Whether `name` is set to something other than empty or `0` (a switch such as
    /// `CHOREO_SYS_NO_CUDART=1`).
    pub fn flag(&self, name: &str) -> bool {
        self.non_empty(name).is_some_and(|value| value != "0")
    }

    /// The variables read so far that need a `rerun-if-env-changed` line, sorted.
    pub fn read_vars(&self) -> Vec<String> {
        self.read.borrow().iter().cloned().collect()
    }

    /// Whether this is the process environment (commands spawned see the same variables,
    /// apart from those replaced with [`Env::with_var`]).
    pub fn is_process(&self) -> bool {
        self.fixed.is_none()
    }

    /// `sysconfig.get_paths()['purelib']` of `python3`, or the folder given in its place.
    pub(crate) fn python_purelib(&self) -> Option<PathBuf> {
        match &self.python {
            Python::Given(purelib) => purelib.clone(),
            Python::Run => {
                let output = Command::new("python3")
                    .args(["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
                    .output()
                    .ok()?;
                if !output.status.success() {
                    return None;
                }
                let text = String::from_utf8(output.stdout).ok()?;
                let line = text.trim();
                (!line.is_empty()).then(|| PathBuf::from(line))
            }
        }
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

    #[test]
    fn flags_are_set_unless_empty_or_zero() {
        let env = Env::fixed([("A", "1"), ("B", "0"), ("C", ""), ("D", "yes")]);
        assert_eq!(
            ["A", "B", "C", "D", "E"].map(|var| env.flag(var)),
            [true, false, false, true, false]
        );
    }

    #[test]
    fn with_var_replaces_a_value_of_either_kind_of_environment() {
        let env = Env::fixed([("NVCC", "/a/nvcc")]).with_var("NVCC", "/b/nvcc");
        assert_eq!(env.text("NVCC").as_deref(), Some("/b/nvcc"));
        let env = Env::process().with_var("CHOREO_TOOLKIT_TEST_VAR", "set");
        assert_eq!(env.text("CHOREO_TOOLKIT_TEST_VAR").as_deref(), Some("set"));
        assert!(env.is_process());
    }

    #[test]
    fn a_fixed_environment_has_no_python_unless_given() {
        assert_eq!(Env::fixed([]).python_purelib(), None);
        let env = Env::fixed([]).with_python_purelib(Some("/site".into()));
        assert_eq!(env.python_purelib(), Some(PathBuf::from("/site")));
    }
}
