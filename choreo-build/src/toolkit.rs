//! Finding nvcc and the CUDA runtime library (design §7).
//!
//! Order: `CHOREO_NVCC=skip` or `DOCS_RS` → stub mode; `NVCC` (a path, or a program name looked
//! up on `PATH`; one that does not exist is an error, not a reason to look further) →
//! `CUDA_HOME`, `CUDA_PATH` (`<root>/bin/nvcc`) → `nvcc` on `PATH` → the pip layout of
//! `python3` (`<purelib>/nvidia/cu13`) → the folder `ci/install-cuda` installs into
//! (`$CHOREO_CUDA_CACHE`, else `${XDG_CACHE_HOME:-$HOME/.cache}/choreo/cuda-13.0`, then
//! `nvidia/cu13`) → none: stub mode with the install hint.
//!
//! Once an nvcc is found, its toolkit must be usable: the CUDA version is read from
//! `include/cuda_runtime_api.h` (`CUDART_VERSION`), and `libcudart_static.a` must exist for the
//! cargo target — for a native build in `lib64`, `lib`, `targets/<arch>-linux/lib` or
//! `lib/<multiarch>`; for a cross build (`TARGET` ≠ `HOST`) in `targets/<arch>-linux/lib`
//! (`sbsa-linux` for aarch64). A toolkit without it is an error that says what to install.

use crate::env::{Env, lossy};
use crate::error::Error;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The hint printed whenever no nvcc is found.
pub(crate) const INSTALL_HINT: &str = "install the CUDA toolkit (13.x) and set CUDA_HOME, put \
    nvcc on PATH, or run ci/install-cuda (installs the pinned CUDA 13.0 compiler wheels into \
    ~/.cache/choreo/cuda-13.0, which is searched)";

/// The cargo target, as far as the CUDA toolkit is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// The target triple (`TARGET`).
    pub(crate) triple: String,
    /// `CARGO_CFG_TARGET_OS`, e.g. `linux`.
    pub(crate) os: String,
    /// `CARGO_CFG_TARGET_ARCH`, e.g. `x86_64`.
    pub(crate) arch: String,
    /// `TARGET` differs from `HOST`.
    pub(crate) cross: bool,
}

impl Target {
    /// From the variables cargo sets for build scripts; outside a build script, the platform
    /// this code was compiled for (build scripts run on the host).
    pub(crate) fn from_env(env: &Env) -> Target {
        let os = env.text("CARGO_CFG_TARGET_OS").unwrap_or_else(|| std::env::consts::OS.into());
        let arch =
            env.text("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|| std::env::consts::ARCH.into());
        let triple = env.text("TARGET").unwrap_or_else(|| format!("{arch}-unknown-{os}"));
        let cross = match (env.text("TARGET"), env.text("HOST")) {
            (Some(target), Some(host)) => target != host,
            _ => false,
        };
        Target { triple, os, arch, cross }
    }

    /// The folder of this target under `<toolkit>/targets/`.
    pub(crate) fn toolkit_dir(&self) -> Option<&'static str> {
        match (self.os.as_str(), self.arch.as_str()) {
            ("linux", "x86_64") => Some("x86_64-linux"),
            ("linux", "aarch64") => Some("sbsa-linux"),
            _ => None,
        }
    }

    /// Debian-style multiarch library folder name.
    fn multiarch(&self) -> Option<&'static str> {
        match (self.os.as_str(), self.arch.as_str()) {
            ("linux", "x86_64") => Some("x86_64-linux-gnu"),
            ("linux", "aarch64") => Some("aarch64-linux-gnu"),
            _ => None,
        }
    }

    /// File name of the static CUDA runtime.
    pub(crate) fn cudart_static_file(&self) -> &'static str {
        if self.os == "windows" { "cudart_static.lib" } else { "libcudart_static.a" }
    }

    /// Library folders to search for the static runtime, most specific first.
    fn lib_dirs(&self, root: &Path) -> Vec<PathBuf> {
        if self.os == "windows" {
            return vec![root.join("lib").join("x64"), root.join("lib")];
        }
        let target_lib = self.toolkit_dir().map(|dir| root.join("targets").join(dir).join("lib"));
        if self.cross {
            return target_lib.into_iter().collect();
        }
        let mut dirs = vec![root.join("lib64"), root.join("lib")];
        dirs.extend(target_lib);
        dirs.extend(self.multiarch().map(|dir| root.join("lib").join(dir)));
        dirs
    }
}

/// Which setting or search step found nvcc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FoundBy {
    /// The `NVCC` environment variable.
    NvccVar,
    /// `CUDA_HOME` or `CUDA_PATH` (named).
    Root(&'static str),
    /// `nvcc` on `PATH`.
    Path,
    /// The `nvidia/cu13` folder of `python3`'s site-packages (pip wheels).
    PythonSitePackages,
    /// The folder `ci/install-cuda` installs into.
    InstallCudaCache,
}

impl fmt::Display for FoundBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FoundBy::NvccVar => f.write_str("NVCC"),
            FoundBy::Root(var) => f.write_str(var),
            FoundBy::Path => f.write_str("PATH"),
            FoundBy::PythonSitePackages => f.write_str("python3 site-packages"),
            FoundBy::InstallCudaCache => f.write_str("ci/install-cuda cache"),
        }
    }
}

/// The CUDA toolkit a build uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toolkit {
    /// The nvcc executable.
    pub nvcc: PathBuf,
    /// The toolkit root (the folder above nvcc's `bin`).
    pub root: PathBuf,
    /// `CUDART_VERSION` of its `cuda_runtime_api.h`, e.g. `13000` for CUDA 13.0.
    pub version: u32,
    /// The folder holding `libcudart_static.a` for the cargo target.
    pub lib_dir: PathBuf,
    /// How it was found.
    pub found_by: FoundBy,
}

impl Toolkit {
    /// `13.0` for version 13000.
    pub fn version_string(&self) -> String {
        format!("{}.{}", self.version / 1000, self.version % 1000 / 10)
    }
}

/// Why the kernels are not compiled (stub mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StubReason {
    /// `CHOREO_NVCC=skip`.
    Skipped,
    /// `DOCS_RS` is set (a docs.rs build has no CUDA).
    DocsRs,
    /// No nvcc was found; the list says where it was looked for.
    NotFound {
        /// One entry per place searched, with why it did not qualify.
        searched: Vec<String>,
    },
}

impl fmt::Display for StubReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StubReason::Skipped => f.write_str("CHOREO_NVCC=skip is set"),
            StubReason::DocsRs => f.write_str("DOCS_RS is set (docs.rs build)"),
            StubReason::NotFound { searched } => {
                write!(f, "no nvcc was found (searched: {}); {INSTALL_HINT}", searched.join("; "))
            }
        }
    }
}

/// The outcome of discovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Discovery {
    /// Compile with this toolkit.
    Found(Toolkit),
    /// Stub mode.
    Stub(StubReason),
}

/// Runs the search described in the module docs.
pub(crate) fn discover(env: &Env, target: &Target) -> Result<Discovery, Error> {
    if let Some(value) = env.var_os("CHOREO_NVCC").filter(|v| !v.is_empty()) {
        if value == "skip" {
            return Ok(Discovery::Stub(StubReason::Skipped));
        }
        return Err(Error::InvalidEnv {
            var: "CHOREO_NVCC",
            value: lossy(&value),
            expected: "`skip` (build without nvcc: stub wrappers) or unset",
        });
    }
    if env.is_set("DOCS_RS") {
        return Ok(Discovery::Stub(StubReason::DocsRs));
    }
    let mut searched = Vec::new();
    let Some((nvcc, found_by)) = find_nvcc(env, &mut searched)? else {
        return Ok(Discovery::Stub(StubReason::NotFound { searched }));
    };
    check_toolkit(nvcc, found_by, target).map(Discovery::Found)
}

/// The nvcc of the first place that has one.
fn find_nvcc(env: &Env, searched: &mut Vec<String>) -> Result<Option<(PathBuf, FoundBy)>, Error> {
    let exe = if cfg!(windows) { "nvcc.exe" } else { "nvcc" };
    if let Some(value) = env.non_empty("NVCC") {
        let given = PathBuf::from(&value);
        let nvcc = if given.components().count() == 1 {
            // A bare program name, as `cc` accepts it: look it up on PATH.
            search_path(env, &lossy(&value))
        } else {
            given.is_file().then(|| given.clone())
        };
        return match nvcc {
            Some(nvcc) => Ok(Some((nvcc, FoundBy::NvccVar))),
            None => Err(Error::NvccNotFound { origin: "NVCC", path: given }),
        };
    }
    searched.push("NVCC (unset)".to_owned());
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        match env.non_empty(var) {
            Some(root) => {
                let nvcc = Path::new(&root).join("bin").join(exe);
                if nvcc.is_file() {
                    return Ok(Some((nvcc, FoundBy::Root(var))));
                }
                searched.push(format!("{var}={}: no bin/{exe}", lossy(&root)));
            }
            None => searched.push(format!("{var} (unset)")),
        }
    }
    match search_path(env, exe) {
        Some(nvcc) => return Ok(Some((nvcc, FoundBy::Path))),
        None => searched.push(format!("PATH: no {exe}")),
    }
    match python_purelib(env) {
        Some(purelib) => {
            let nvcc = purelib.join("nvidia").join("cu13").join("bin").join(exe);
            if nvcc.is_file() {
                return Ok(Some((nvcc, FoundBy::PythonSitePackages)));
            }
            searched.push(format!("python3 site-packages: no {}", nvcc.display()));
        }
        None => searched.push("python3 site-packages: no python3".to_owned()),
    }
    match install_cuda_cache(env) {
        Some(cache) => {
            let nvcc = cache.join("nvidia").join("cu13").join("bin").join(exe);
            if nvcc.is_file() {
                return Ok(Some((nvcc, FoundBy::InstallCudaCache)));
            }
            searched.push(format!("ci/install-cuda cache: no {}", nvcc.display()));
        }
        None => searched.push("ci/install-cuda cache: HOME unset".to_owned()),
    }
    Ok(None)
}

fn search_path(env: &Env, program: &str) -> Option<PathBuf> {
    let path = env.var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|file| file.is_file())
}

/// `sysconfig.get_paths()['purelib']` of `python3`.
fn python_purelib(env: &Env) -> Option<PathBuf> {
    #[cfg(test)]
    if !env.is_process() {
        return env.python_purelib.clone();
    }
    let _ = env;
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

/// The `CACHE` folder of `ci/install-cuda`.
fn install_cuda_cache(env: &Env) -> Option<PathBuf> {
    if let Some(cache) = env.non_empty("CHOREO_CUDA_CACHE") {
        return Some(cache.into());
    }
    let base = match env.non_empty("XDG_CACHE_HOME") {
        Some(xdg) => PathBuf::from(xdg),
        None => PathBuf::from(env.non_empty("HOME")?).join(".cache"),
    };
    Some(base.join("choreo").join("cuda-13.0"))
}

/// Checks the toolkit around `nvcc`: version header and the static runtime for the target.
fn check_toolkit(nvcc: PathBuf, found_by: FoundBy, target: &Target) -> Result<Toolkit, Error> {
    // `/usr/local/bin/nvcc` may be a link into `/usr/local/cuda/bin`: the toolkit is where the
    // real file lives. nvcc itself is run by the path found (its own lookups resolve links).
    let real = fs::canonicalize(&nvcc).unwrap_or_else(|_| nvcc.clone());
    let root = real.parent().and_then(Path::parent).map(Path::to_path_buf).unwrap_or_default();

    let mut headers = vec![root.join("include").join("cuda_runtime_api.h")];
    if let Some(dir) = target.toolkit_dir() {
        headers.push(root.join("targets").join(dir).join("include").join("cuda_runtime_api.h"));
    }
    let version = headers
        .iter()
        .find_map(|header| fs::read_to_string(header).ok())
        .and_then(|text| cudart_version(&text))
        .ok_or_else(|| Error::Toolkit {
            root: root.clone(),
            message: format!(
                "no CUDART_VERSION in {} (is the CUDA runtime development package, e.g. the \
                 nvidia-cuda-runtime wheel, installed?)",
                headers[0].display()
            ),
        })?;

    let lib = target.cudart_static_file();
    let dirs = target.lib_dirs(&root);
    let Some(lib_dir) = dirs.iter().find(|dir| dir.join(lib).is_file()).cloned() else {
        let tried: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        let message = match (target.cross, target.toolkit_dir()) {
            (true, Some(dir)) => format!(
                "cross build for {}: no {lib} in {}; install the CUDA runtime for the target \
                 into this toolkit (the `cuda-cross-{}` package of NVIDIA's repository, or the \
                 target's CUDA runtime unpacked into targets/{dir})",
                target.triple,
                tried.join(", "),
                dir.trim_end_matches("-linux"),
            ),
            (true, None) => format!(
                "cross build for {}: CUDA has no target library folder for this target",
                target.triple
            ),
            (false, _) => format!(
                "no {lib} in {} (install the CUDA runtime development files, e.g. the \
                 nvidia-cuda-runtime wheel or the toolkit's cudart package)",
                tried.join(", ")
            ),
        };
        return Err(Error::Toolkit { root, message });
    };
    Ok(Toolkit { nvcc, root, version, lib_dir, found_by })
}

/// `CUDART_VERSION` from the text of `cuda_runtime_api.h`, e.g. 13000.
pub(crate) fn cudart_version(header: &str) -> Option<u32> {
    header.lines().find_map(|line| {
        let rest = line.trim_start().strip_prefix('#')?.trim_start().strip_prefix("define")?;
        let value = rest.trim_start().strip_prefix("CUDART_VERSION")?;
        if !value.starts_with(char::is_whitespace) {
            return None;
        }
        value.split_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake toolkit under `dir`: `bin/nvcc`, the version header, the static runtime in `lib`.
    fn fake_toolkit(dir: &Path, version: u32, lib: &str) -> PathBuf {
        fs::create_dir_all(dir.join("bin")).unwrap();
        fs::create_dir_all(dir.join("include")).unwrap();
        fs::write(dir.join("bin/nvcc"), "#!/bin/sh\n").unwrap();
        fs::write(
            dir.join("include/cuda_runtime_api.h"),
            format!("/* x */\n#define CUDART_VERSION  {version}\n#define CUDART_VERSION_X 1\n"),
        )
        .unwrap();
        fs::create_dir_all(dir.join(lib)).unwrap();
        fs::write(dir.join(lib).join("libcudart_static.a"), "!<arch>\n").unwrap();
        dir.to_path_buf()
    }

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir()
            .join(format!("choreo-build-toolkit-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn native() -> Target {
        Target {
            triple: "x86_64-unknown-linux-gnu".into(),
            os: "linux".into(),
            arch: "x86_64".into(),
            cross: false,
        }
    }

    fn found(env: &Env) -> Toolkit {
        match discover(env, &native()) {
            Ok(Discovery::Found(toolkit)) => toolkit,
            other => panic!("expected a toolkit, got {other:?}"),
        }
    }

    #[test]
    fn reads_cudart_version() {
        assert_eq!(cudart_version("#define CUDART_VERSION 13000\n"), Some(13000));
        assert_eq!(cudart_version("#  define CUDART_VERSION\t12080 /* 12.8 */\n"), Some(12080));
        assert_eq!(cudart_version("#define CUDART_VERSIONS 1\n"), None);
        assert_eq!(cudart_version("int x;\n"), None);
    }

    #[test]
    fn search_order_is_nvcc_then_cuda_home_then_path_then_pip_then_cache() {
        let dir = temp("order");
        let explicit = fake_toolkit(&dir.join("explicit"), 13000, "lib64");
        let home = fake_toolkit(&dir.join("home"), 13000, "lib64");
        let on_path = fake_toolkit(&dir.join("onpath"), 13000, "lib");
        let pip = fake_toolkit(&dir.join("site/nvidia/cu13"), 13000, "lib");
        let cache = fake_toolkit(&dir.join("cache/nvidia/cu13"), 13000, "lib");
        let nvcc = explicit.join("bin/nvcc");
        let nvcc = nvcc.to_str().unwrap();
        let home = home.to_str().unwrap();
        let path = on_path.join("bin");
        let path = path.to_str().unwrap();
        let cache_root = dir.join("cache");
        let cache_root = cache_root.to_str().unwrap();

        let with = |vars: &[(&str, &str)], pip_site: bool| {
            let mut env = Env::fixed(vars.iter().copied());
            env.python_purelib = pip_site.then(|| dir.join("site"));
            found(&env)
        };
        let all = [
            ("NVCC", nvcc),
            ("CUDA_HOME", home),
            ("PATH", path),
            ("CHOREO_CUDA_CACHE", cache_root),
        ];
        assert_eq!(with(&all, true).found_by, FoundBy::NvccVar);
        assert_eq!(with(&all, true).root, fs::canonicalize(&explicit).unwrap());
        assert_eq!(with(&all[1..], true).found_by, FoundBy::Root("CUDA_HOME"));
        let toolkit = with(&all[2..], true);
        assert_eq!(toolkit.found_by, FoundBy::Path);
        assert_eq!(toolkit.lib_dir, fs::canonicalize(&on_path).unwrap().join("lib"));
        let toolkit = with(&all[3..], true);
        assert_eq!(toolkit.found_by, FoundBy::PythonSitePackages);
        assert_eq!(toolkit.root, fs::canonicalize(&pip).unwrap());
        let toolkit = with(&all[3..], false);
        assert_eq!(toolkit.found_by, FoundBy::InstallCudaCache);
        assert_eq!(toolkit.root, fs::canonicalize(&cache).unwrap());
        assert_eq!(toolkit.version, 13000);
        assert_eq!(toolkit.version_string(), "13.0");

        // CUDA_PATH is searched after CUDA_HOME; a CUDA_HOME without nvcc is passed over.
        let empty = dir.join("empty");
        fs::create_dir_all(&empty).unwrap();
        let toolkit = with(&[("CUDA_HOME", empty.to_str().unwrap()), ("CUDA_PATH", home)], false);
        assert_eq!(toolkit.found_by, FoundBy::Root("CUDA_PATH"));
    }

    #[test]
    fn nothing_found_means_stub_mode_with_what_was_searched() {
        let dir = temp("none");
        let env = Env::fixed([("PATH", dir.to_str().unwrap()), ("HOME", dir.to_str().unwrap())]);
        let Ok(Discovery::Stub(reason)) = discover(&env, &native()) else {
            panic!("expected stub mode");
        };
        let text = reason.to_string();
        assert!(text.contains("NVCC (unset)"), "{text}");
        assert!(text.contains("CUDA_HOME (unset)"), "{text}");
        assert!(text.contains(".cache/choreo/cuda-13.0/nvidia/cu13/bin/nvcc"), "{text}");
        assert!(text.contains("ci/install-cuda"), "{text}");
        assert!(
            env.read_vars().iter().any(|v| v == "CHOREO_NVCC")
                && env.read_vars().iter().any(|v| v == "DOCS_RS")
        );
    }

    #[test]
    fn skip_and_docs_rs_force_stub_mode_even_with_a_toolkit() {
        let dir = temp("skip");
        let root = fake_toolkit(&dir.join("cuda"), 13000, "lib64");
        let root = root.to_str().unwrap();
        let env = Env::fixed([("CUDA_HOME", root), ("CHOREO_NVCC", "skip")]);
        assert_eq!(discover(&env, &native()).unwrap(), Discovery::Stub(StubReason::Skipped));
        let env = Env::fixed([("CUDA_HOME", root), ("DOCS_RS", "1")]);
        assert_eq!(discover(&env, &native()).unwrap(), Discovery::Stub(StubReason::DocsRs));
        let env = Env::fixed([("CUDA_HOME", root), ("CHOREO_NVCC", "yes")]);
        let error = discover(&env, &native()).unwrap_err();
        assert!(matches!(error, Error::InvalidEnv { var: "CHOREO_NVCC", .. }), "{error}");
    }

    #[test]
    fn an_explicit_nvcc_that_does_not_exist_is_an_error() {
        let dir = temp("explicit");
        let root = fake_toolkit(&dir.join("cuda"), 13000, "lib64");
        let env =
            Env::fixed([("NVCC", "/nonexistent/bin/nvcc"), ("CUDA_HOME", root.to_str().unwrap())]);
        let error = discover(&env, &native()).unwrap_err();
        assert!(matches!(error, Error::NvccNotFound { origin: "NVCC", .. }), "{error}");
        assert!(error.to_string().contains("/nonexistent/bin/nvcc"), "{error}");
        // A bare name is looked up on PATH.
        let bin = root.join("bin");
        let env = Env::fixed([("NVCC", "nvcc"), ("PATH", bin.to_str().unwrap())]);
        assert_eq!(found(&env).found_by, FoundBy::NvccVar);
    }

    #[test]
    fn native_builds_find_the_runtime_in_the_system_and_pip_layouts() {
        let dir = temp("layouts");
        for lib in ["lib64", "lib", "targets/x86_64-linux/lib", "lib/x86_64-linux-gnu"] {
            let root = fake_toolkit(&dir.join(lib.replace('/', "_")), 12080, lib);
            let env = Env::fixed([("CUDA_HOME", root.to_str().unwrap())]);
            let toolkit = found(&env);
            assert_eq!(toolkit.lib_dir, fs::canonicalize(&root).unwrap().join(lib));
            assert_eq!(toolkit.version_string(), "12.8");
        }
    }

    #[test]
    fn missing_runtime_or_header_is_an_error_that_says_what_to_install() {
        let dir = temp("incomplete");
        let root = fake_toolkit(&dir.join("cuda"), 13000, "lib64");
        fs::remove_file(root.join("lib64/libcudart_static.a")).unwrap();
        let env = Env::fixed([("CUDA_HOME", root.to_str().unwrap())]);
        let error = discover(&env, &native()).unwrap_err().to_string();
        assert!(error.contains("no libcudart_static.a in"), "{error}");
        assert!(error.contains("nvidia-cuda-runtime"), "{error}");
        fs::remove_file(root.join("include/cuda_runtime_api.h")).unwrap();
        let error = discover(&env, &native()).unwrap_err().to_string();
        assert!(error.contains("no CUDART_VERSION"), "{error}");
    }

    #[test]
    fn cross_builds_need_the_targets_library_folder() {
        let dir = temp("cross");
        let root = fake_toolkit(&dir.join("cuda"), 13000, "lib64");
        let env = Env::fixed([("CUDA_HOME", root.to_str().unwrap())]);
        let aarch64 = Target {
            triple: "aarch64-unknown-linux-gnu".into(),
            os: "linux".into(),
            arch: "aarch64".into(),
            cross: true,
        };
        let error = discover(&env, &aarch64).unwrap_err().to_string();
        assert!(error.contains("cross build for aarch64-unknown-linux-gnu"), "{error}");
        assert!(error.contains("targets/sbsa-linux/lib"), "{error}");
        assert!(error.contains("cuda-cross-sbsa"), "{error}");
        let lib = root.join("targets/sbsa-linux/lib");
        fs::create_dir_all(&lib).unwrap();
        fs::write(lib.join("libcudart_static.a"), "!<arch>\n").unwrap();
        let Ok(Discovery::Found(toolkit)) = discover(&env, &aarch64) else { panic!() };
        assert_eq!(
            toolkit.lib_dir,
            fs::canonicalize(&root).unwrap().join("targets/sbsa-linux/lib")
        );
    }

    #[test]
    fn target_from_cargo_variables() {
        let env = Env::fixed([
            ("TARGET", "aarch64-unknown-linux-gnu"),
            ("HOST", "x86_64-unknown-linux-gnu"),
            ("CARGO_CFG_TARGET_OS", "linux"),
            ("CARGO_CFG_TARGET_ARCH", "aarch64"),
        ]);
        let target = Target::from_env(&env);
        assert!(target.cross);
        assert_eq!(target.toolkit_dir(), Some("sbsa-linux"));
        let env = Env::fixed([
            ("TARGET", "x86_64-unknown-linux-gnu"),
            ("HOST", "x86_64-unknown-linux-gnu"),
            ("CARGO_CFG_TARGET_OS", "linux"),
            ("CARGO_CFG_TARGET_ARCH", "x86_64"),
        ]);
        assert!(!Target::from_env(&env).cross);
    }
}
