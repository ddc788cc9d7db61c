//! Build script of choreo-sys: find a CUDA 13 toolkit and link `libcudart_static`, or — when there
//! is none — build the crate's stub functions instead of failing (see the crate docs).
//!
//! Search order: `CUDA_HOME`, `CUDA_PATH`, `nvcc` on `PATH` (root = its directory's parent), the
//! pip layout of `python3` (`<purelib>/nvidia/cu13`), the cache folder of `ci/install-cuda`
//! (`$CHOREO_CUDA_CACHE` or `${XDG_CACHE_HOME:-$HOME/.cache}/choreo/cuda-13.0`, then
//! `nvidia/cu13`). The first root with `include/cuda_runtime_api.h` of CUDA 13.x and a
//! `cudart_static` library for the cargo target wins.

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every environment variable this script reads; each gets a `rerun-if-env-changed`.
const ENV_VARS: [&str; 8] = [
    "CUDA_HOME",
    "CUDA_PATH",
    "PATH",
    "CHOREO_CUDA_CACHE",
    "XDG_CACHE_HOME",
    "HOME",
    "CHOREO_SYS_NO_CUDART",
    "DOCS_RS",
];

/// The CUDA major version these bindings are written for (struct layouts differ across majors).
const CUDA_MAJOR: u32 = 13;

/// The cargo target, as far as finding the right `cudart_static` is concerned.
struct Target {
    /// `CARGO_CFG_TARGET_OS`, e.g. `linux`, `windows`.
    os: String,
    /// Subdirectory of `<root>/targets/` holding this target's libraries, if the OS has one.
    toolkit_target_dir: Option<&'static str>,
    /// `TARGET` differs from `HOST`: prefer `targets/<arch>-linux/lib` over the host's `lib64`.
    cross: bool,
}

impl Target {
    fn from_env() -> Target {
        let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
        let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
        let toolkit_target_dir = match (os.as_str(), arch.as_str()) {
            ("linux", "x86_64") => Some("x86_64-linux"),
            ("linux", "aarch64") => Some("sbsa-linux"),
            _ => None,
        };
        let cross = env::var("TARGET").ok() != env::var("HOST").ok();
        Target { os, toolkit_target_dir, cross }
    }

    fn static_lib_file(&self) -> &'static str {
        if self.os == "windows" { "cudart_static.lib" } else { "libcudart_static.a" }
    }

    /// Library directories to look in, most specific first.
    fn lib_dirs(&self, root: &Path) -> Vec<PathBuf> {
        if self.os == "windows" {
            return vec![root.join("lib").join("x64"), root.join("lib")];
        }
        let target_lib =
            self.toolkit_target_dir.map(|dir| root.join("targets").join(dir).join("lib"));
        let mut dirs = Vec::new();
        if self.cross {
            dirs.extend(target_lib.clone());
        }
        dirs.push(root.join("lib64"));
        dirs.push(root.join("lib"));
        if !self.cross {
            dirs.extend(target_lib);
        }
        dirs
    }
}

/// A usable toolkit.
struct Toolkit {
    root: PathBuf,
    lib_dir: PathBuf,
    version: u32,
}

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    for var in ENV_VARS {
        println!("cargo::rerun-if-env-changed={var}");
    }
    println!("cargo::rustc-check-cfg=cfg(choreo_sys_no_cudart)");

    let target = Target::from_env();
    let toolkit = if env_flag("CHOREO_SYS_NO_CUDART") {
        println!(
            "cargo::warning=choreo-sys: CHOREO_SYS_NO_CUDART is set: the CUDA runtime is not \
             linked and every CUDA call returns cudaErrorStubLibrary"
        );
        None
    } else if env::var_os("DOCS_RS").is_some() {
        None
    } else {
        let mut searched = Vec::new();
        let found = find_toolkit(&target, &mut searched);
        if found.is_none() {
            println!(
                "cargo::warning=choreo-sys: no CUDA {CUDA_MAJOR} toolkit with {lib} found \
                 (searched: {searched}); building stubs that return cudaErrorStubLibrary. To link \
                 the CUDA runtime, run ci/install-cuda (installs CUDA {CUDA_MAJOR}.0 into the \
                 cache searched here) or set CUDA_HOME to a toolkit root, then rebuild \
                 (`cargo clean -p choreo-sys` if no variable changed)",
                lib = target.static_lib_file(),
                searched = searched.join("; "),
            );
        }
        found
    };

    match &toolkit {
        Some(toolkit) => emit_link(&target, toolkit),
        None => {
            println!("cargo::rustc-cfg=choreo_sys_no_cudart");
            println!("cargo::metadata=linked=0");
        }
    }

    #[cfg(feature = "bindgen")]
    bindgen_check::generate(toolkit.as_ref().map(|toolkit| toolkit.root.as_path()));
}

fn emit_link(target: &Target, toolkit: &Toolkit) {
    println!(
        "cargo::rerun-if-changed={}",
        toolkit.lib_dir.join(target.static_lib_file()).display()
    );
    println!("cargo::rustc-link-search=native={}", toolkit.lib_dir.display());
    println!("cargo::rustc-link-lib=static=cudart_static");
    if target.os == "linux" {
        // libcudart_static loads the driver with dlopen and uses POSIX timers and threads.
        for lib in ["dl", "rt", "pthread"] {
            println!("cargo::rustc-link-lib=dylib={lib}");
        }
    }
    println!("cargo::metadata=linked=1");
    println!("cargo::metadata=root={}", toolkit.root.display());
    println!("cargo::metadata=include={}", toolkit.root.join("include").display());
    println!("cargo::metadata=lib={}", toolkit.lib_dir.display());
    println!("cargo::metadata=version={}", toolkit.version);
}

/// `true` when `name` is set to something other than empty or `0`.
fn env_flag(name: &str) -> bool {
    env::var_os(name).is_some_and(|value| !value.is_empty() && value != "0")
}

fn non_empty_env(name: &str) -> Option<OsString> {
    env::var_os(name).filter(|value| !value.is_empty())
}

/// Tries every candidate root in order; describes each rejected one in `searched`.
fn find_toolkit(target: &Target, searched: &mut Vec<String>) -> Option<Toolkit> {
    let mut candidates: Vec<(String, PathBuf)> = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        match non_empty_env(var) {
            Some(root) => {
                candidates.push((format!("{var}={}", Path::new(&root).display()), root.into()))
            }
            None => searched.push(format!("{var} (unset)")),
        }
    }
    match nvcc_on_path() {
        Some(root) => candidates.push((format!("nvcc on PATH ({})", root.display()), root)),
        None => searched.push("nvcc on PATH (none)".to_owned()),
    }
    match python_purelib() {
        Some(purelib) => {
            let root = purelib.join("nvidia").join("cu13");
            candidates.push((format!("python3 site-packages ({})", root.display()), root));
        }
        None => searched.push("python3 site-packages (no python3)".to_owned()),
    }
    match install_cuda_cache() {
        Some(cache) => {
            let root = cache.join("nvidia").join("cu13");
            candidates.push((format!("ci/install-cuda cache ({})", root.display()), root));
        }
        None => searched.push("ci/install-cuda cache (HOME unset)".to_owned()),
    }

    for (label, root) in candidates {
        match check_root(target, &root) {
            Ok(toolkit) => return Some(toolkit),
            Err(why) => searched.push(format!("{label}: {why}")),
        }
    }
    None
}

fn check_root(target: &Target, root: &Path) -> Result<Toolkit, String> {
    let header = root.join("include").join("cuda_runtime_api.h");
    let text =
        fs::read_to_string(&header).map_err(|_| "no include/cuda_runtime_api.h".to_owned())?;
    let version = cudart_version(&text).ok_or("no CUDART_VERSION in cuda_runtime_api.h")?;
    if version / 1000 != CUDA_MAJOR {
        return Err(format!(
            "CUDA {}.{} (choreo-sys binds CUDA {CUDA_MAJOR}.x)",
            version / 1000,
            version % 1000 / 10
        ));
    }
    let dirs = target.lib_dirs(root);
    let lib = target.static_lib_file();
    match dirs.iter().find(|dir| dir.join(lib).is_file()) {
        Some(lib_dir) => Ok(Toolkit { root: root.to_owned(), lib_dir: lib_dir.clone(), version }),
        None => {
            let tried: Vec<String> = dirs.iter().map(|dir| dir.display().to_string()).collect();
            let hint = match (target.cross, target.toolkit_target_dir) {
                (true, Some(dir)) => format!(
                    " (cross build: install the CUDA runtime for the target, which provides \
                     targets/{dir}/lib/{lib})"
                ),
                _ => String::new(),
            };
            Err(format!("no {lib} in {}{hint}", tried.join(", ")))
        }
    }
}

/// `CUDART_VERSION` from the text of `cuda_runtime_api.h`, e.g. 13000.
fn cudart_version(header: &str) -> Option<u32> {
    header.lines().find_map(|line| {
        let rest = line.trim_start().strip_prefix("#define")?.trim_start();
        let value = rest.strip_prefix("CUDART_VERSION")?;
        if !value.starts_with(char::is_whitespace) {
            return None;
        }
        value.trim().parse().ok()
    })
}

fn nvcc_on_path() -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    let exe = if cfg!(windows) { "nvcc.exe" } else { "nvcc" };
    env::split_paths(&path)
        .map(|dir| dir.join(exe))
        .find(|nvcc| nvcc.is_file())
        .and_then(|nvcc| Some(nvcc.parent()?.parent()?.to_owned()))
}

fn python_purelib() -> Option<PathBuf> {
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

/// The folder `ci/install-cuda` installs into (its `CACHE` variable).
fn install_cuda_cache() -> Option<PathBuf> {
    if let Some(cache) = non_empty_env("CHOREO_CUDA_CACHE") {
        return Some(cache.into());
    }
    let base = match non_empty_env("XDG_CACHE_HOME") {
        Some(xdg) => PathBuf::from(xdg),
        None => PathBuf::from(non_empty_env("HOME")?).join(".cache"),
    };
    Some(base.join("choreo").join("cuda-13.0"))
}

/// With the `bindgen` feature: generates bindings of `cuda_runtime_api.h` into `$OUT_DIR` for
/// `tests/bindgen_matches.rs` to check the hand-written ones against.
///
/// - `cudart_bindgen.rs`: the types and constants we bind, as bindgen sees them;
/// - `cudart_bindgen_fns.rs`: the functions we bind, with the handle, enum and struct types taken
///   from `choreo_sys`, so a test can demand that each hand-written function has exactly the type
///   of the generated one (the types themselves are compared through the first file);
/// - `cudart_bindgen_checks.rs`: a function asserting, for every enumerator of `cudaError` and
///   `cudaDeviceAttr`, every field of `cudaDeviceProp` and every flag macro we bind, that
///   `choreo_sys` has it with the same value / offset / size (written from bindgen's callbacks,
///   so nothing that the header has can be missed).
#[cfg(feature = "bindgen")]
mod bindgen_check {
    use std::collections::BTreeMap;
    use std::env;
    use std::fmt::Write as _;
    use std::fs;
    use std::path::{Path, PathBuf};
    use std::process;
    use std::sync::{Arc, Mutex};

    use bindgen::callbacks::{EnumVariantValue, FieldInfo, ParseCallbacks};

    /// The functions that the hand-written bindings declare.
    const FUNCTIONS: &str = "cuda(GetDeviceCount|GetDevice|SetDevice|GetDeviceProperties|\
        DeviceGetAttribute|DeviceSynchronize|DeviceReset|RuntimeGetVersion|DriverGetVersion|\
        Malloc|Free|MallocAsync|FreeAsync|Memcpy|MemcpyAsync|Memset|MemsetAsync|MallocHost|\
        HostAlloc|FreeHost|MemGetInfo|StreamCreate|StreamCreateWithFlags|StreamDestroy|\
        StreamSynchronize|StreamQuery|StreamWaitEvent|EventCreate|EventCreateWithFlags|EventRecord|\
        EventSynchronize|EventQuery|EventElapsedTime|EventDestroy|LaunchHostFunc|GetLastError|\
        PeekAtLastError|GetErrorName|GetErrorString)";

    /// Types that `choreo_sys` defines itself; `cudart_bindgen_fns.rs` uses those.
    const OWN_TYPES: &str = "cudaError|cudaError_t|cudaMemcpyKind|cudaDeviceAttr|cudaDeviceProp|\
        cudaStream_t|cudaEvent_t|CUstream_st|CUevent_st|cudaHostFn_t|cudaUUID_t|CUuuid_st";

    /// Flag macros that `choreo_sys` binds as consts. (`cudaCpuDeviceId`, `cudaInvalidDeviceId`
    /// and the stream handles are cast expressions, which bindgen does not evaluate.)
    const FLAG_MACROS: [&str; 13] = [
        "cudaHostAllocDefault",
        "cudaHostAllocPortable",
        "cudaHostAllocMapped",
        "cudaHostAllocWriteCombined",
        "cudaStreamDefault",
        "cudaStreamNonBlocking",
        "cudaEventDefault",
        "cudaEventBlockingSync",
        "cudaEventDisableTiming",
        "cudaEventInterprocess",
        "cudaEventWaitDefault",
        "cudaEventWaitExternal",
        "CUDART_VERSION",
    ];

    /// What bindgen reports while parsing (enumerators, struct fields, integer macros).
    #[derive(Debug, Default)]
    struct Seen {
        /// enum name -> (enumerator -> value)
        enumerators: BTreeMap<String, BTreeMap<String, i64>>,
        /// struct name -> field names
        fields: BTreeMap<String, Vec<String>>,
        macros: BTreeMap<String, i64>,
    }

    #[derive(Debug)]
    struct Collector(Arc<Mutex<Seen>>);

    impl ParseCallbacks for Collector {
        fn enum_variant_name(
            &self,
            enum_name: Option<&str>,
            variant: &str,
            value: EnumVariantValue,
        ) -> Option<String> {
            let value = match value {
                EnumVariantValue::Boolean(v) => i64::from(v),
                EnumVariantValue::Signed(v) => v,
                EnumVariantValue::Unsigned(v) => v as i64,
            };
            let enum_name = enum_name.unwrap_or("").trim_start_matches("enum ").to_owned();
            let mut seen = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            seen.enumerators.entry(enum_name).or_default().insert(variant.to_owned(), value);
            None
        }

        fn field_visibility(&self, info: FieldInfo<'_>) -> Option<bindgen::FieldVisibilityKind> {
            let mut seen = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let fields = seen.fields.entry(info.type_name.to_owned()).or_default();
            if !fields.iter().any(|field| field == info.field_name) {
                fields.push(info.field_name.to_owned());
            }
            None
        }

        fn int_macro(&self, name: &str, value: i64) -> Option<bindgen::callbacks::IntKind> {
            let mut seen = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            seen.macros.insert(name.to_owned(), value);
            None
        }
    }

    fn fail(message: String) -> ! {
        eprintln!("error: choreo-sys feature `bindgen`: {message}");
        process::exit(1);
    }

    fn builder(include: &Path, header: &Path) -> bindgen::Builder {
        bindgen::Builder::default()
            .header(header.display().to_string())
            .clang_arg(format!("-I{}", include.display()))
            .default_enum_style(bindgen::EnumVariation::Consts)
            .prepend_enum_name(false)
            .layout_tests(true)
    }

    pub(super) fn generate(root: Option<&Path>) {
        let Some(root) = root else {
            fail(
                "needs a CUDA 13 toolkit (see the warning above for what was searched); run \
                 ci/install-cuda or set CUDA_HOME"
                    .to_owned(),
            );
        };
        let out_dir = PathBuf::from(env::var_os("OUT_DIR").unwrap_or_default());
        let include = root.join("include");
        let header = include.join("cuda_runtime_api.h");
        println!("cargo::rerun-if-changed={}", header.display());
        println!("cargo::rerun-if-changed={}", include.join("driver_types.h").display());

        let seen = Arc::new(Mutex::new(Seen::default()));
        let full = builder(&include, &header)
            .allowlist_type(
                "cudaDeviceProp|cudaError|cudaError_t|cudaMemcpyKind|cudaDeviceAttr|cudaHostFn_t",
            )
            .allowlist_var("CUDART_VERSION")
            .parse_callbacks(Box::new(Collector(Arc::clone(&seen))))
            .generate()
            .unwrap_or_else(|err| fail(format!("bindgen failed on {}: {err}", header.display())));
        write(&out_dir.join("cudart_bindgen.rs"), &full.to_string());

        let own_types = OWN_TYPES.replace("cudaError|", "").replace('|', ", ");
        let fns = builder(&include, &header)
            .allowlist_function(FUNCTIONS)
            .blocklist_type(OWN_TYPES)
            .raw_line(format!("#[allow(unused_imports)] use choreo_sys::{{{own_types}}};"))
            .generate()
            .unwrap_or_else(|err| fail(format!("bindgen failed on {}: {err}", header.display())));
        write(&out_dir.join("cudart_bindgen_fns.rs"), &fns.to_string());

        let seen = seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        write(&out_dir.join("cudart_bindgen_checks.rs"), &checks(&seen));
    }

    fn checks(seen: &Seen) -> String {
        let mut code = String::from(
            "/// Generated by choreo-sys/build.rs (feature `bindgen`) from bindgen's view of the \
             header.\n#[allow(clippy::unnecessary_cast)]\npub fn check_against_header() {\n",
        );
        for (c_enum, rust_type, all) in [
            ("cudaError", "cudaError_t", Some("choreo_sys::ALL_ERRORS.len()")),
            ("cudaDeviceAttr", "cudaDeviceAttr", Some("choreo_sys::ALL_DEVICE_ATTRS.len()")),
            ("cudaMemcpyKind", "cudaMemcpyKind", None),
        ] {
            let Some(enumerators) = seen.enumerators.get(c_enum) else {
                fail(format!("bindgen reported no enumerators of enum {c_enum}"));
            };
            for (name, value) in enumerators {
                let _ = writeln!(
                    code,
                    "    assert_eq!(choreo_sys::{rust_type}::{name}.0 as i64, {value}i64, \"{name}\");"
                );
            }
            if let Some(all) = all {
                let _ = writeln!(
                    code,
                    "    assert_eq!({all}, {}, \"{c_enum} count\");",
                    enumerators.len()
                );
            }
        }
        let Some(fields) = seen.fields.get("cudaDeviceProp") else {
            fail("bindgen reported no fields of struct cudaDeviceProp".to_owned());
        };
        for field in fields {
            let _ = writeln!(
                code,
                "    assert_eq!(core::mem::offset_of!(choreo_sys::cudaDeviceProp, {field}), \
                 core::mem::offset_of!(header::cudaDeviceProp, {field}), \"offset of {field}\");\n    \
                 assert_eq!(size_of_field!(choreo_sys::cudaDeviceProp, {field}), \
                 size_of_field!(header::cudaDeviceProp, {field}), \"size of {field}\");"
            );
        }
        for flag in FLAG_MACROS {
            let Some(value) = seen.macros.get(flag) else {
                fail(format!("bindgen reported no integer macro {flag}"));
            };
            let _ = writeln!(
                code,
                "    assert_eq!(choreo_sys::{flag} as i64, {value}i64, \"{flag}\");"
            );
        }
        code.push_str("}\n");
        code
    }

    fn write(path: &Path, text: &str) {
        if let Err(err) = fs::write(path, text) {
            fail(format!("cannot write {}: {err}", path.display()));
        }
    }
}
