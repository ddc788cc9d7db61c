//! The search (see the crate docs for the order and the rules).

use crate::env::{Env, lossy};
use crate::error::Error;
use crate::target::Target;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

/// The oldest CUDA version (`CUDART_VERSION`) that choreo-sys links: 12.4. choreo-sys binds
/// the runtime of CUDA 12.4 and later and of every CUDA 13 (it selects the one symbol and the
/// one struct layout that differ, `cudaGetDeviceProperties`, at build time); kernels built with
/// an older toolkit would have no runtime to link against.
pub const MIN_CUDA_VERSION: u32 = 12040;

/// The newest CUDA major version that choreo-sys binds (13): a toolkit of a later major is not
/// linked, since its ABI is not known.
pub const MAX_CUDA_MAJOR: u32 = 13;

/// Whether choreo-sys binds the runtime of CUDA `version` (`CUDART_VERSION`, e.g. 12080):
/// CUDA 12.4 to 13.x.
pub fn supported_version(version: u32) -> bool {
    (MIN_CUDA_VERSION..(MAX_CUDA_MAJOR + 1) * 1000).contains(&version)
}

/// Every environment variable that [`discover`] may read (cargo's own variables aside), for
/// `rerun-if-env-changed` lines. [`Env::read_vars`] lists those a given run did read.
pub const ENV_VARS: &[&str] = &[
    "CHOREO_NVCC",
    "CHOREO_SYS_NO_CUDART",
    "DOCS_RS",
    "NVCC",
    "CUDA_HOME",
    "CUDA_PATH",
    "PATH",
    "CHOREO_CUDA_CACHE",
    "CHOREO_CUDA12_CACHE",
    "XDG_CACHE_HOME",
    "HOME",
];

/// The hint given whenever no nvcc is found.
pub const INSTALL_HINT: &str = "install the CUDA toolkit (12.4 or later, or 13.x) and set \
    CUDA_HOME, put nvcc on PATH, or run ci/install-cuda (installs the pinned CUDA 13.0 compiler \
    wheels into ~/.cache/choreo/cuda-13.0, which is searched; CHOREO_CUDA_MAJOR=12 installs CUDA \
    12.4 into ~/.cache/choreo/cuda-12.4, searched too)";

/// Which setting or search step found nvcc.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FoundBy {
    /// The `NVCC` environment variable.
    NvccVar,
    /// `CUDA_HOME` or `CUDA_PATH` (named): `<root>/bin/nvcc`.
    Root(&'static str),
    /// `nvcc` on `PATH`.
    Path,
    /// The `nvidia/cu13` folder of `python3`'s site-packages (pip wheels).
    PythonSitePackages,
    /// The folder `ci/install-cuda` installs CUDA 13 into.
    InstallCudaCache,
    /// The folder `CHOREO_CUDA_MAJOR=12 ci/install-cuda` installs CUDA 12 into.
    InstallCuda12Cache,
}

impl fmt::Display for FoundBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FoundBy::NvccVar => f.write_str("NVCC"),
            FoundBy::Root(var) => f.write_str(var),
            FoundBy::Path => f.write_str("PATH"),
            FoundBy::PythonSitePackages => f.write_str("python3 site-packages"),
            FoundBy::InstallCudaCache => f.write_str("ci/install-cuda cache"),
            FoundBy::InstallCuda12Cache => f.write_str("ci/install-cuda CUDA 12 cache"),
        }
    }
}

/// Where the toolkit root (headers, the runtime) came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RootFrom {
    /// `CUDA_HOME` or `CUDA_PATH` (named), which always name the root when set.
    Var(&'static str),
    /// The folder above the `bin` of nvcc's real location (links resolved).
    Nvcc,
    /// `NVCC` names a program outside any toolkit (a wrapper such as sccache) and neither
    /// `CUDA_HOME` nor `CUDA_PATH` is set: the root of the first toolkit found by the other
    /// search steps (`nvcc` on `PATH`, the pip wheels, the `ci/install-cuda` cache).
    Search(FoundBy),
}

impl fmt::Display for RootFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RootFrom::Var(var) => f.write_str(var),
            RootFrom::Nvcc => f.write_str("nvcc's location"),
            RootFrom::Search(by) => write!(f, "{by} (NVCC is outside any toolkit)"),
        }
    }
}

/// A usable CUDA toolkit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toolkit {
    /// The nvcc to run (possibly a wrapper outside the toolkit, named by `NVCC`).
    pub nvcc: PathBuf,
    /// The toolkit root (headers, libraries): `CUDA_HOME`/`CUDA_PATH` when set, else the
    /// folder above the `bin` of nvcc's real location, else (a wrapper named by `NVCC`) the
    /// root of the first toolkit the other search steps find; see [`Toolkit::root_from`].
    pub root: PathBuf,
    /// `CUDART_VERSION` of its `cuda_runtime_api.h`, e.g. `13000` for CUDA 13.0.
    pub version: u32,
    /// The folder holding the static CUDA runtime for the cargo target.
    pub lib_dir: PathBuf,
    /// How nvcc was found.
    pub found_by: FoundBy,
    /// Where the root came from. Headers, the version and the runtime linked by choreo-sys
    /// all come from this one root, whatever nvcc is.
    pub root_from: RootFrom,
}

impl Toolkit {
    /// `13.0` for version 13000.
    pub fn version_string(&self) -> String {
        format!("{}.{}", self.major(), self.version % 1000 / 10)
    }

    /// The major version: 13 for version 13000.
    pub fn major(&self) -> u32 {
        self.version / 1000
    }

    /// The folder to hand nvcc as `-L` when nvcc itself links the runtime (a whole program,
    /// `-cudart static`): [`Toolkit::lib_dir`], unless it is one that nvcc's own profile
    /// searches (`lib64` or `targets/<arch>-linux/lib` next to nvcc's `bin`). The pip wheels
    /// keep the runtime in `lib`, which nvcc does not search.
    pub fn nvcc_lib_dir(&self, target: &Target) -> Option<&Path> {
        let real = |path: &Path| fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let nvcc_root = real(&self.nvcc).parent().and_then(Path::parent).map(Path::to_path_buf);
        let lib_dir = real(&self.lib_dir);
        let searched_by_nvcc = nvcc_root.is_some_and(|root| {
            let mut dirs = vec![root.join("lib64")];
            dirs.extend(target.toolkit_dir().map(|dir| root.join("targets").join(dir).join("lib")));
            dirs.iter().any(|dir| real(dir) == lib_dir)
        });
        (!searched_by_nvcc).then_some(self.lib_dir.as_path())
    }
}

/// Why nothing CUDA is built (stub mode).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StubReason {
    /// `CHOREO_NVCC=skip`.
    Skipped,
    /// `DOCS_RS` is set (a docs.rs build has no CUDA).
    DocsRs,
    /// `CHOREO_SYS_NO_CUDART` is set: choreo-sys links no CUDA runtime.
    NoCudart,
    /// No nvcc was found; the list says where it was looked for.
    NotFound {
        /// One entry per place searched, with why it did not qualify.
        searched: Vec<String>,
    },
    /// The toolkit found is older than CUDA 12.4 or newer than CUDA 13.x, the versions
    /// choreo-sys links ([`supported_version`]).
    UnsupportedVersion {
        /// Its `CUDART_VERSION`, e.g. 12080.
        version: u32,
        /// Its root.
        root: PathBuf,
    },
}

impl fmt::Display for StubReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StubReason::Skipped => f.write_str("CHOREO_NVCC=skip is set"),
            StubReason::DocsRs => f.write_str("DOCS_RS is set (docs.rs build)"),
            StubReason::NoCudart => {
                f.write_str("CHOREO_SYS_NO_CUDART is set (choreo-sys links no CUDA runtime)")
            }
            StubReason::NotFound { searched } => {
                write!(f, "no nvcc was found (searched: {}); {INSTALL_HINT}", searched.join("; "))
            }
            StubReason::UnsupportedVersion { version, root } => write!(
                f,
                "the CUDA toolkit at {} is CUDA {}.{}, but only CUDA 12.4 to {MAX_CUDA_MAJOR}.x \
                 is supported (choreo-sys binds the runtime ABI of those versions), so nothing \
                 CUDA is compiled or linked (a stub build); set CUDA_HOME to the root of a CUDA \
                 12.4+ or 13 toolkit, or run ci/install-cuda (installs CUDA 13.0 into \
                 ~/.cache/choreo/cuda-13.0)",
                root.display(),
                version / 1000,
                version % 1000 / 10
            ),
        }
    }
}

/// The outcome of discovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Discovery {
    /// Build with this toolkit.
    Found(Toolkit),
    /// Build nothing CUDA (stub mode), for this reason.
    Stub(StubReason),
}

/// For builds of kernels (choreo-build): `CHOREO_NVCC=skip` → stub mode, `require` (the
/// caller turns stub mode into an error) or unset → everything [`discover_runtime`] does
/// (another non-empty value is an error). So CUDA kernels are compiled exactly when
/// choreo-sys, run in the same environment, links a runtime for them.
pub fn discover(env: &Env, target: &Target) -> Result<Discovery, Error> {
    if let Some(value) = env.non_empty("CHOREO_NVCC") {
        if value == "skip" {
            return Ok(Discovery::Stub(StubReason::Skipped));
        }
        if value != "require" {
            return Err(Error::InvalidEnv {
                var: "CHOREO_NVCC",
                value: lossy(&value),
                expected: "`skip` (no CUDA kernels: the CPU version only), `require` (no nvcc \
                           is an error) or unset",
            });
        }
    }
    discover_runtime(env, target)
}

/// For linking the CUDA runtime (choreo-sys): `CHOREO_SYS_NO_CUDART` (set, not `0`) or
/// `DOCS_RS` → stub mode; else [`find`], and a toolkit of a version that choreo-sys does not
/// bind (older than 12.4, newer than 13.x: [`supported_version`]) → stub mode
/// ([`StubReason::UnsupportedVersion`]).
pub fn discover_runtime(env: &Env, target: &Target) -> Result<Discovery, Error> {
    if env.flag("CHOREO_SYS_NO_CUDART") {
        return Ok(Discovery::Stub(StubReason::NoCudart));
    }
    if env.is_set("DOCS_RS") {
        return Ok(Discovery::Stub(StubReason::DocsRs));
    }
    // The version is checked before the runtime library: a CUDA 12 toolkit without
    // `libcudart_static.a` (the CUDA 12 runtime wheel has none) is unsupported, not incomplete.
    find_of(env, target, true)
}

/// The search alone, of any CUDA version and without the stub-mode switches (a command-line
/// tool such as `choreoc build`): nvcc, the toolkit root, its version and its static runtime
/// for `target`. [`Discovery::Stub`] only with [`StubReason::NotFound`].
pub fn find(env: &Env, target: &Target) -> Result<Discovery, Error> {
    find_of(env, target, false)
}

/// [`find`]; with `supported_only`, a toolkit of a version that choreo-sys does not bind is
/// [`StubReason::UnsupportedVersion`].
fn find_of(env: &Env, target: &Target, supported_only: bool) -> Result<Discovery, Error> {
    let mut searched = Vec::new();
    let Some((nvcc, found_by)) = find_nvcc(env, &mut searched)? else {
        return Ok(Discovery::Stub(StubReason::NotFound { searched }));
    };
    let from_var = match found_by {
        FoundBy::Root(var) => env.non_empty(var).map(|root| (var, PathBuf::from(root))),
        _ => ["CUDA_HOME", "CUDA_PATH"]
            .into_iter()
            .find_map(|var| env.non_empty(var).map(|root| (var, PathBuf::from(root)))),
    };
    let (root, root_from) = match from_var {
        Some((var, root)) => (root, RootFrom::Var(var)),
        None => {
            // `/usr/local/bin/nvcc` may be a link into `/usr/local/cuda/bin`: the toolkit is
            // where the real file lives. nvcc itself is run by the path found.
            let root = nvcc_root(&nvcc);
            if found_by == FoundBy::NvccVar && !has_version_header(&root, target) {
                // A wrapper outside the toolkit (sccache, ccache, a script): the toolkit is
                // the one the rest of the search finds.
                match search_root(env, target) {
                    Some((root, by)) => (root, RootFrom::Search(by)),
                    None => (root, RootFrom::Nvcc),
                }
            } else {
                (root, RootFrom::Nvcc)
            }
        }
    };
    check_toolkit(nvcc, found_by, root, root_from, target, supported_only)
}

/// The folder above the `bin` of nvcc's real location.
fn nvcc_root(nvcc: &Path) -> PathBuf {
    let real = fs::canonicalize(nvcc).unwrap_or_else(|_| nvcc.to_path_buf());
    real.parent().and_then(Path::parent).map(Path::to_path_buf).unwrap_or_default()
}

/// The version headers a toolkit at `root` may have, the usual one first.
fn version_headers(root: &Path, target: &Target) -> Vec<PathBuf> {
    let mut headers = vec![root.join("include").join("cuda_runtime_api.h")];
    if let Some(dir) = target.toolkit_dir() {
        headers.push(root.join("targets").join(dir).join("include").join("cuda_runtime_api.h"));
    }
    headers
}

fn has_version_header(root: &Path, target: &Target) -> bool {
    version_headers(root, target).iter().any(|header| header.is_file())
}

/// For a wrapper named by `NVCC` without `CUDA_HOME`/`CUDA_PATH`: the root of the first toolkit
/// (a folder with the version header) that the later search steps find: every `nvcc` on
/// `PATH` (the wrapper itself may be on it), then the pip wheels, then the install cache.
fn search_root(env: &Env, target: &Target) -> Option<(PathBuf, FoundBy)> {
    let exe = if cfg!(windows) { "nvcc.exe" } else { "nvcc" };
    let usable = |nvcc: PathBuf| {
        let root = nvcc_root(&nvcc);
        (nvcc.is_file() && has_version_header(&root, target)).then_some(root)
    };
    if let Some(path) = env.var_os("PATH") {
        let on_path = std::env::split_paths(&path).find_map(|dir| usable(dir.join(exe)));
        if let Some(root) = on_path {
            return Some((root, FoundBy::Path));
        }
    }
    let wheel = |base: PathBuf| base.join("nvidia").join("cu13").join("bin").join(exe);
    if let Some(root) = env.python_purelib().and_then(|purelib| usable(wheel(purelib))) {
        return Some((root, FoundBy::PythonSitePackages));
    }
    if let Some(root) = install_cuda_cache(env).and_then(|cache| usable(wheel(cache))) {
        return Some((root, FoundBy::InstallCudaCache));
    }
    let root = install_cuda12_cache(env).and_then(|cache| usable(cuda12_nvcc(cache)))?;
    Some((root, FoundBy::InstallCuda12Cache))
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
    match env.python_purelib() {
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
    match install_cuda12_cache(env) {
        Some(cache) => {
            let nvcc = cuda12_nvcc(cache);
            if nvcc.is_file() {
                return Ok(Some((nvcc, FoundBy::InstallCuda12Cache)));
            }
            searched.push(format!("ci/install-cuda CUDA 12 cache: no {}", nvcc.display()));
        }
        None => searched.push("ci/install-cuda CUDA 12 cache: HOME unset".to_owned()),
    }
    Ok(None)
}

/// The nvcc of the toolkit that `CHOREO_CUDA_MAJOR=12 ci/install-cuda` lays out in `cache`.
fn cuda12_nvcc(cache: PathBuf) -> PathBuf {
    let exe = if cfg!(windows) { "nvcc.exe" } else { "nvcc" };
    cache.join("toolkit").join("bin").join(exe)
}

/// The `CACHE` folder of `CHOREO_CUDA_MAJOR=12 ci/install-cuda`.
fn install_cuda12_cache(env: &Env) -> Option<PathBuf> {
    if let Some(cache) = env.non_empty("CHOREO_CUDA12_CACHE") {
        return Some(cache.into());
    }
    let base = match env.non_empty("XDG_CACHE_HOME") {
        Some(xdg) => PathBuf::from(xdg),
        None => PathBuf::from(env.non_empty("HOME")?).join(".cache"),
    };
    Some(base.join("choreo").join("cuda-12.4"))
}

fn search_path(env: &Env, program: &str) -> Option<PathBuf> {
    let path = env.var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|file| file.is_file())
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

/// Checks the toolkit at `root`: version header and the static runtime for the target.
fn check_toolkit(
    nvcc: PathBuf,
    found_by: FoundBy,
    root: PathBuf,
    root_from: RootFrom,
    target: &Target,
    supported_only: bool,
) -> Result<Discovery, Error> {
    let headers = version_headers(&root, target);
    let version = headers
        .iter()
        .find_map(|header| fs::read_to_string(header).ok())
        .and_then(|text| cudart_version(&text))
        .ok_or_else(|| {
            let hint = match (&root_from, &found_by) {
                (RootFrom::Var(var), _) => format!("; {var} names this toolkit root"),
                (RootFrom::Nvcc, FoundBy::NvccVar) => format!(
                    "; NVCC names {}, which is not inside a CUDA toolkit, and no toolkit was \
                     found on PATH, in python3's site-packages or in the ci/install-cuda cache: \
                     if NVCC is a wrapper outside the toolkit, set CUDA_HOME to the toolkit root",
                    nvcc.display()
                ),
                _ => String::new(),
            };
            Error::Toolkit {
                root: root.clone(),
                message: format!(
                    "no CUDART_VERSION in {} (is the CUDA runtime development package, e.g. the \
                     nvidia-cuda-runtime wheel, installed?){hint}",
                    headers[0].display()
                ),
            }
        })?;

    if supported_only && !supported_version(version) {
        return Ok(Discovery::Stub(StubReason::UnsupportedVersion { version, root }));
    }

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
    Ok(Discovery::Found(Toolkit { nvcc, root, version, lib_dir, found_by, root_from }))
}

/// `CUDART_VERSION` from the text of `cuda_runtime_api.h`, e.g. 13000.
pub fn cudart_version(header: &str) -> Option<u32> {
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
        let dir =
            std::env::temp_dir().join(format!("choreo-toolkit-{}-{name}", std::process::id()));
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

    fn text(path: &Path) -> &str {
        path.to_str().unwrap()
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
        let path = on_path.join("bin");
        let cache_root = dir.join("cache");

        let with = |vars: &[(&str, &str)], pip_site: bool| {
            let env = Env::fixed(vars.iter().copied())
                .with_python_purelib(pip_site.then(|| dir.join("site")));
            found(&env)
        };
        let all = [
            ("NVCC", text(&nvcc)),
            ("CUDA_HOME", text(&home)),
            ("PATH", text(&path)),
            ("CHOREO_CUDA_CACHE", text(&cache_root)),
        ];
        // NVCC names the compiler; CUDA_HOME, when set, the toolkit root.
        let toolkit = with(&all, true);
        assert_eq!((toolkit.found_by, &toolkit.nvcc), (FoundBy::NvccVar, &nvcc));
        assert_eq!(toolkit.root, home);
        // Without CUDA_HOME the root is the one of nvcc's real location.
        let toolkit = with(&[all[0]], false);
        assert_eq!(toolkit.root, fs::canonicalize(&explicit).unwrap());
        let toolkit = with(&all[1..], true);
        assert_eq!((toolkit.found_by, toolkit.root), (FoundBy::Root("CUDA_HOME"), home.clone()));
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

        // CUDA_PATH is searched after CUDA_HOME.
        let toolkit = with(&[("CUDA_PATH", text(&home))], false);
        assert_eq!((toolkit.found_by, toolkit.root), (FoundBy::Root("CUDA_PATH"), home));
    }

    #[test]
    fn a_cuda_home_without_nvcc_still_names_the_root() {
        let dir = temp("home-without-nvcc");
        let headers_and_libs = fake_toolkit(&dir.join("runtime"), 13000, "lib64");
        fs::remove_file(headers_and_libs.join("bin/nvcc")).unwrap();
        let other = fake_toolkit(&dir.join("other"), 13000, "lib64");
        let path = other.join("bin");
        let env = Env::fixed([("CUDA_HOME", text(&headers_and_libs)), ("PATH", text(&path))]);
        let toolkit = found(&env);
        assert_eq!(toolkit.found_by, FoundBy::Path);
        assert_eq!(toolkit.root, headers_and_libs);
        assert_eq!(toolkit.lib_dir, headers_and_libs.join("lib64"));

        // A CUDA_HOME that is no toolkit at all is an error naming it, not passed over.
        let empty = dir.join("empty");
        fs::create_dir_all(&empty).unwrap();
        let env = Env::fixed([("CUDA_HOME", text(&empty)), ("PATH", text(&path))]);
        let error = discover(&env, &native()).unwrap_err().to_string();
        assert!(error.contains("no CUDART_VERSION") && error.contains("CUDA_HOME"), "{error}");
    }

    #[test]
    fn a_wrapper_named_by_nvcc_needs_cuda_home() {
        let dir = temp("wrapper");
        let root = fake_toolkit(&dir.join("cuda"), 13000, "lib64");
        let wrapper = dir.join("bin/sccache-nvcc");
        fs::create_dir_all(wrapper.parent().unwrap()).unwrap();
        fs::write(&wrapper, "#!/bin/sh\n").unwrap();
        let env = Env::fixed([("NVCC", text(&wrapper)), ("CUDA_HOME", text(&root))]);
        let toolkit = found(&env);
        assert_eq!((toolkit.nvcc, toolkit.root), (wrapper.clone(), root));
        let env = Env::fixed([("NVCC", text(&wrapper))]);
        let error = discover(&env, &native()).unwrap_err().to_string();
        assert!(error.contains("set CUDA_HOME to the toolkit root"), "{error}");
    }

    /// A shell script at `path` that runs `nvcc` (as sccache or ccache wrappers do).
    fn wrapper(path: &Path, nvcc: &Path) -> PathBuf {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, format!("#!/bin/sh\nexec {} \"$@\"\n", nvcc.display())).unwrap();
        path.to_path_buf()
    }

    #[test]
    fn cuda_home_and_cuda_path_name_the_root_whatever_nvcc_names() {
        let dir = temp("root-rule");
        let home = fake_toolkit(&dir.join("home"), 13000, "lib");
        let path_root = fake_toolkit(&dir.join("cuda-path"), 13000, "lib64");
        // NVCC names a real nvcc of another toolkit: still only the compiler.
        let other = fake_toolkit(&dir.join("other"), 13000, "lib64");
        let nvcc = other.join("bin/nvcc");
        let wrapped = wrapper(&dir.join("usr/local/bin/nvcc-wrapper"), &nvcc);
        for compiler in [&nvcc, &wrapped] {
            let env = Env::fixed([("NVCC", text(compiler)), ("CUDA_HOME", text(&home))]);
            let toolkit = found(&env);
            assert_eq!((&toolkit.nvcc, &toolkit.root), (compiler, &home));
            assert_eq!(toolkit.root_from, RootFrom::Var("CUDA_HOME"));
            assert_eq!(toolkit.lib_dir, home.join("lib"));
            let env = Env::fixed([("NVCC", text(compiler)), ("CUDA_PATH", text(&path_root))]);
            let toolkit = found(&env);
            assert_eq!((&toolkit.nvcc, &toolkit.root), (compiler, &path_root));
            assert_eq!(toolkit.root_from, RootFrom::Var("CUDA_PATH"));
        }
        // CUDA_HOME wins over CUDA_PATH.
        let env = Env::fixed([
            ("NVCC", text(&wrapped)),
            ("CUDA_HOME", text(&home)),
            ("CUDA_PATH", text(&path_root)),
        ]);
        assert_eq!(found(&env).root, home);
    }

    #[test]
    fn without_cuda_home_the_root_is_nvccs_real_location() {
        let dir = temp("symlink");
        let root = fake_toolkit(&dir.join("cuda-13.0"), 13000, "lib64");
        let link = dir.join("usr/local/bin/nvcc");
        fs::create_dir_all(link.parent().unwrap()).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(root.join("bin/nvcc"), &link).unwrap();
        #[cfg(not(unix))]
        fs::copy(root.join("bin/nvcc"), &link).unwrap();
        let env = Env::fixed([("NVCC", text(&link))]);
        let toolkit = found(&env);
        assert_eq!(toolkit.nvcc, link);
        if cfg!(unix) {
            assert_eq!(toolkit.root, fs::canonicalize(&root).unwrap());
            assert_eq!(toolkit.root_from, RootFrom::Nvcc);
        }
    }

    #[test]
    fn a_wrapper_without_cuda_home_takes_the_root_of_the_next_toolkit_found() {
        let dir = temp("wrapper-search");
        let on_path = fake_toolkit(&dir.join("onpath"), 13000, "lib64");
        let pip = fake_toolkit(&dir.join("site/nvidia/cu13"), 13000, "lib");
        let cache = fake_toolkit(&dir.join("cache/nvidia/cu13"), 13000, "lib");
        // The wrapper is itself called nvcc and comes first on PATH: it is passed over.
        let wrapped = wrapper(&dir.join("wrappers/nvcc"), &on_path.join("bin/nvcc"));
        let path = std::env::join_paths([dir.join("wrappers"), on_path.join("bin")]).unwrap();
        let path = path.to_str().unwrap();
        let cache_var = dir.join("cache");
        let cache_var = text(&cache_var);
        let site = Some(dir.join("site"));
        let cases = [
            (
                vec![("PATH", path), ("CHOREO_CUDA_CACHE", cache_var)],
                site.clone(),
                &on_path,
                FoundBy::Path,
            ),
            (vec![("CHOREO_CUDA_CACHE", cache_var)], site, &pip, FoundBy::PythonSitePackages),
            (vec![("CHOREO_CUDA_CACHE", cache_var)], None, &cache, FoundBy::InstallCudaCache),
        ];
        for (vars, site, root, by) in cases {
            let mut vars = vars;
            vars.push(("NVCC", text(&wrapped)));
            let env = Env::fixed(vars).with_python_purelib(site);
            let toolkit = found(&env);
            assert_eq!(toolkit.nvcc, wrapped);
            assert_eq!(toolkit.found_by, FoundBy::NvccVar);
            assert_eq!(toolkit.root, fs::canonicalize(root).unwrap());
            assert_eq!(toolkit.root_from, RootFrom::Search(by));
            // The runtime linked comes from that same root.
            assert!(toolkit.lib_dir.starts_with(&toolkit.root), "{toolkit:?}");
        }
        // A wrapper inside a folder that looks like a toolkit's bin but has no headers, and
        // nothing else found: an error that names NVCC and says to set CUDA_HOME.
        let env = Env::fixed([("NVCC", text(&wrapped))]);
        let error = discover(&env, &native()).unwrap_err().to_string();
        assert!(
            error.contains("NVCC names") && error.contains("not inside a CUDA toolkit"),
            "{error}"
        );
        assert!(error.contains("set CUDA_HOME to the toolkit root"), "{error}");
    }

    #[test]
    fn nvcc_alone_gives_kernels_and_runtime_one_toolkit_that_is_linked() {
        let dir = temp("nvcc-alone");
        let root = fake_toolkit(&dir.join("cuda"), 13000, "lib");
        // Another toolkit on PATH must not be picked for either.
        let decoy = fake_toolkit(&dir.join("decoy"), 13000, "lib64");
        let nvcc = root.join("bin/nvcc");
        let path = decoy.join("bin");
        let env = Env::fixed([("NVCC", text(&nvcc)), ("PATH", text(&path))]);
        let kernels = found(&env);
        let Ok(Discovery::Found(runtime)) = discover_runtime(&env, &native()) else { panic!() };
        assert_eq!(kernels, runtime);
        assert_eq!(kernels.root, fs::canonicalize(&root).unwrap());
        assert_eq!(kernels.nvcc, nvcc);
        let lines = crate::cudart_link_lines(&runtime, &native());
        let search = format!("rustc-link-search=native={}", kernels.root.join("lib").display());
        assert_eq!(lines[..2], [search, "rustc-link-lib=static=cudart_static".to_owned()]);
        // nvcc linking a whole program is handed the same folder (nvcc does not search `lib`).
        assert_eq!(kernels.nvcc_lib_dir(&native()), Some(kernels.lib_dir.as_path()));
    }

    #[test]
    fn nothing_found_means_stub_mode_with_what_was_searched() {
        let dir = temp("none");
        let env = Env::fixed([("PATH", text(&dir)), ("HOME", text(&dir))]);
        let Ok(Discovery::Stub(reason)) = discover(&env, &native()) else {
            panic!("expected stub mode");
        };
        let text = reason.to_string();
        assert!(text.contains("NVCC (unset)"), "{text}");
        assert!(text.contains("CUDA_HOME (unset)"), "{text}");
        assert!(text.contains("python3 site-packages: no python3"), "{text}");
        assert!(text.contains(".cache/choreo/cuda-13.0/nvidia/cu13/bin/nvcc"), "{text}");
        assert!(text.contains("ci/install-cuda"), "{text}");
        // Every variable read is one discovery documents.
        let read = env.read_vars();
        assert!(read.iter().all(|var| ENV_VARS.contains(&var.as_str())), "{read:?}");
        assert_eq!(read.len(), ENV_VARS.len(), "{read:?}");
    }

    #[test]
    fn skip_docs_rs_and_no_cudart_force_stub_mode_even_with_a_toolkit() {
        let dir = temp("skip");
        let root = fake_toolkit(&dir.join("cuda"), 13000, "lib64");
        let root = text(&root);
        let stub = |vars: &[(&str, &str)]| discover(&Env::fixed(vars.iter().copied()), &native());
        assert_eq!(
            stub(&[("CUDA_HOME", root), ("CHOREO_NVCC", "skip")]),
            Ok(Discovery::Stub(StubReason::Skipped))
        );
        assert_eq!(
            stub(&[("CUDA_HOME", root), ("DOCS_RS", "1")]),
            Ok(Discovery::Stub(StubReason::DocsRs))
        );
        assert_eq!(
            stub(&[("CUDA_HOME", root), ("CHOREO_SYS_NO_CUDART", "1")]),
            Ok(Discovery::Stub(StubReason::NoCudart))
        );
        assert!(matches!(
            stub(&[("CUDA_HOME", root), ("CHOREO_SYS_NO_CUDART", "0")]),
            Ok(Discovery::Found(_))
        ));
        let error = stub(&[("CUDA_HOME", root), ("CHOREO_NVCC", "yes")]).unwrap_err();
        assert!(matches!(error, Error::InvalidEnv { var: "CHOREO_NVCC", .. }), "{error}");
        // choreo-sys does not read CHOREO_NVCC: it governs nvcc, not the runtime.
        let env = Env::fixed([("CUDA_HOME", root), ("CHOREO_NVCC", "skip")]);
        assert!(matches!(discover_runtime(&env, &native()), Ok(Discovery::Found(_))));
        assert!(!env.read_vars().contains(&"CHOREO_NVCC".to_owned()));
    }

    fn expected_again(root: &Path) -> Discovery {
        Discovery::Stub(StubReason::UnsupportedVersion { version: 12020, root: root.to_owned() })
    }

    #[test]
    fn cuda_12_4_and_later_and_13_are_linked() {
        assert!(!supported_version(11080) && !supported_version(12030));
        assert!(supported_version(12040) && supported_version(12080) && supported_version(12090));
        assert!(supported_version(13000) && supported_version(13050));
        assert!(!supported_version(14000));
        let dir = temp("cuda12-ok");
        for version in [12040, 12080, 13000] {
            let root = fake_toolkit(&dir.join(version.to_string()), version, "lib64");
            let env = Env::fixed([("CUDA_HOME", text(&root))]);
            let Ok(Discovery::Found(toolkit)) = discover_runtime(&env, &native()) else {
                panic!("CUDA {version} is not linked")
            };
            assert_eq!(toolkit.version, version);
            assert_eq!(found(&env), toolkit);
        }
    }

    #[test]
    fn the_cuda12_install_cache_is_searched_last() {
        let dir = temp("cuda12-cache");
        let cache = fake_toolkit(&dir.join("cache12/toolkit"), 12040, "lib64");
        let env = Env::fixed([
            ("CHOREO_CUDA12_CACHE", text(&dir.join("cache12"))),
            ("CHOREO_CUDA_CACHE", text(&dir.join("none"))),
        ]);
        let toolkit = found(&env);
        assert_eq!(toolkit.found_by, FoundBy::InstallCuda12Cache);
        assert_eq!(toolkit.root, fs::canonicalize(&cache).unwrap());
        assert_eq!(toolkit.version_string(), "12.4");
        // A CUDA 13 cache wins over it.
        let cache13 = fake_toolkit(&dir.join("cache13/nvidia/cu13"), 13000, "lib");
        let env = Env::fixed([
            ("CHOREO_CUDA12_CACHE", text(&dir.join("cache12"))),
            ("CHOREO_CUDA_CACHE", text(&dir.join("cache13"))),
        ]);
        assert_eq!(found(&env).root, fs::canonicalize(&cache13).unwrap());
    }

    #[test]
    fn an_unsupported_cuda_version_is_stub_mode_for_both_kernels_and_runtime_but_found_by_find() {
        let dir = temp("cuda12");
        let root = fake_toolkit(&dir.join("cuda"), 12020, "lib64");
        let env = Env::fixed([("CUDA_HOME", text(&root))]);
        let expected =
            Discovery::Stub(StubReason::UnsupportedVersion { version: 12020, root: root.clone() });
        assert_eq!(discover(&env, &native()), Ok(expected.clone()));
        assert_eq!(discover_runtime(&env, &native()), Ok(expected.clone()));
        let Discovery::Stub(reason) = expected else { unreachable!() };
        let reason = reason.to_string();
        assert!(
            reason.contains("is CUDA 12.2, but only CUDA 12.4 to 13.x is supported")
                && reason.contains("stub build")
                && reason.contains("set CUDA_HOME"),
            "{reason}"
        );
        let Ok(Discovery::Found(toolkit)) = find(&env, &native()) else { panic!() };
        assert_eq!(toolkit.version_string(), "12.2");
        // Without libcudart_static.a it is still the version that is reported, not the missing
        // library.
        fs::remove_file(root.join("lib64/libcudart_static.a")).unwrap();
        assert_eq!(discover(&env, &native()), Ok(expected_again(&root)));
        assert!(find(&env, &native()).is_err());
    }

    #[test]
    fn an_explicit_nvcc_that_does_not_exist_is_an_error() {
        let dir = temp("explicit");
        let root = fake_toolkit(&dir.join("cuda"), 13000, "lib64");
        let env = Env::fixed([("NVCC", "/nonexistent/bin/nvcc"), ("CUDA_HOME", text(&root))]);
        let error = discover(&env, &native()).unwrap_err();
        assert!(matches!(error, Error::NvccNotFound { origin: "NVCC", .. }), "{error}");
        assert!(error.to_string().contains("/nonexistent/bin/nvcc"), "{error}");
        // A bare name is looked up on PATH.
        let bin = root.join("bin");
        let env = Env::fixed([("NVCC", "nvcc"), ("PATH", text(&bin))]);
        assert_eq!(found(&env).found_by, FoundBy::NvccVar);
    }

    #[test]
    fn native_builds_find_the_runtime_in_the_system_and_pip_layouts() {
        let dir = temp("layouts");
        for lib in ["lib64", "lib", "targets/x86_64-linux/lib", "lib/x86_64-linux-gnu"] {
            let root = fake_toolkit(&dir.join(lib.replace('/', "_")), 13000, lib);
            let env = Env::fixed([("CUDA_HOME", text(&root))]);
            assert_eq!(found(&env).lib_dir, root.join(lib));
        }
    }

    #[test]
    fn nvcc_gets_a_library_path_only_for_folders_its_profile_does_not_search() {
        let dir = temp("nvcc-lib");
        let system = fake_toolkit(&dir.join("system"), 13000, "lib64");
        let targets = fake_toolkit(&dir.join("targets"), 13000, "targets/x86_64-linux/lib");
        let pip = fake_toolkit(&dir.join("pip"), 13000, "lib");
        let nvcc_lib_dir = |root: &Path| {
            let toolkit = found(&Env::fixed([("CUDA_HOME", text(root))]));
            toolkit.nvcc_lib_dir(&native()).map(Path::to_path_buf)
        };
        assert_eq!(nvcc_lib_dir(&system), None);
        assert_eq!(nvcc_lib_dir(&targets), None);
        assert_eq!(nvcc_lib_dir(&pip), Some(pip.join("lib")));
    }

    #[test]
    fn missing_runtime_or_header_is_an_error_that_says_what_to_install() {
        let dir = temp("incomplete");
        let root = fake_toolkit(&dir.join("cuda"), 13000, "lib64");
        fs::remove_file(root.join("lib64/libcudart_static.a")).unwrap();
        let env = Env::fixed([("CUDA_HOME", text(&root))]);
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
        let env = Env::fixed([("CUDA_HOME", text(&root))]);
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
        assert_eq!(toolkit.lib_dir, lib);
    }
}
