//! Build script of choreo-sys: find a CUDA 12.4+ or 13 toolkit and link `libcudart_static`, or —
//! when there is none — build the crate's stub functions instead of failing (see the crate docs).
//!
//! The toolkit is found by `choreo_toolkit::discover_runtime`, the discovery that choreo-build
//! and `choreoc build` share (`NVCC`, `CUDA_HOME`/`CUDA_PATH`, `nvcc` on `PATH`, the pip wheels
//! of `python3`, the `ci/install-cuda` cache; the root from `CUDA_HOME`/`CUDA_PATH` when set).
//! Stubs are built when `CHOREO_SYS_NO_CUDART` is set (not `0`), on docs.rs (`DOCS_RS`), when
//! no toolkit is found or the one found cannot be used, and when it is not CUDA 12.4 to 13.x
//! (a CUDA 12 toolkit sets `--cfg choreo_sys_cuda12`: its `cudaDeviceProp` layout and
//! `cudaGetDeviceProperties_v2` symbol are bound instead of CUDA 13's); the reason
//! is printed as a warning and compiled into the crate (`CHOREO_SYS_STUB_REASON`, read by
//! `STUB_REASON` and the text of `cudaErrorStubLibrary`). This is
//! the only crate that prints the cudart link lines: every crate whose code calls the runtime
//! depends on it through `choreo`.

use choreo_toolkit::{
    Discovery, Env, StubReason, Target, Toolkit, cudart_link_lines, discover_runtime,
};

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(choreo_sys_no_cudart)");
    println!("cargo::rustc-check-cfg=cfg(choreo_sys_cuda12)");

    let env = Env::process();
    let target = Target::from_env(&env);
    // Why this is a stub build, for the warning and for the text of `cudaErrorStubLibrary`
    // (a dependency's build-script warnings are hidden by cargo, so the program says it too).
    let (toolkit, why_stub) = match discover_runtime(&env, &target) {
        Ok(Discovery::Found(toolkit)) => (Some(toolkit), None),
        Ok(Discovery::Stub(StubReason::DocsRs)) => {
            (None, Some("DOCS_RS is set (docs.rs build)".to_owned()))
        }
        Ok(Discovery::Stub(StubReason::NoCudart)) => {
            println!(
                "cargo::warning=choreo-sys: CHOREO_SYS_NO_CUDART is set: the CUDA runtime is not \
                 linked and every CUDA call returns cudaErrorStubLibrary"
            );
            (None, Some("CHOREO_SYS_NO_CUDART was set".to_owned()))
        }
        Ok(Discovery::Stub(reason)) => {
            let why = one_line(&reason.to_string());
            stub_warning(&why);
            (None, Some(why))
        }
        Err(error) => {
            let why = one_line(&error.to_string());
            stub_warning(&why);
            (None, Some(why))
        }
    };
    let stub_text = match &why_stub {
        Some(why) => format!("choreo-sys was built as stubs: {why}").replace('\0', " "),
        None => String::new(),
    };
    println!("cargo::rustc-env=CHOREO_SYS_STUB_REASON={stub_text}");
    // Every variable discovery read (it stops at the first toolkit found).
    for var in env.read_vars() {
        println!("cargo::rerun-if-env-changed={var}");
    }

    match &toolkit {
        Some(toolkit) => {
            if toolkit.major() == 12 {
                println!("cargo::rustc-cfg=choreo_sys_cuda12");
            }
            println!("cargo::rustc-env=CHOREO_SYS_CUDART_VERSION={}", toolkit.version);
            emit_link(&target, toolkit);
        }
        None => {
            println!("cargo::rustc-cfg=choreo_sys_no_cudart");
            // Empty: the crate then reports the version of the headers it was generated from.
            println!("cargo::rustc-env=CHOREO_SYS_CUDART_VERSION=");
            println!("cargo::metadata=linked=0");
        }
    }

    #[cfg(feature = "bindgen")]
    bindgen_check::generate(toolkit.as_ref().map(|toolkit| toolkit.root.as_path()));
}

/// `text` on one line, as cargo wants warnings and `rustc-env` values.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The warning of a build without the CUDA runtime (one line).
fn stub_warning(why: &str) {
    println!(
        "cargo::warning=choreo-sys: no usable CUDA runtime ({why}); building stubs \
         that return cudaErrorStubLibrary. Rebuild after installing or pointing at a toolkit \
         (`cargo clean -p choreo-sys` if no environment variable changed)"
    );
}

fn emit_link(target: &Target, toolkit: &Toolkit) {
    println!(
        "cargo::rerun-if-changed={}",
        toolkit.lib_dir.join(target.cudart_static_file()).display()
    );
    for line in cudart_link_lines(toolkit, target) {
        println!("cargo::{line}");
    }
    println!("cargo::metadata=linked=1");
    println!("cargo::metadata=root={}", toolkit.root.display());
    println!("cargo::metadata=include={}", toolkit.root.join("include").display());
    println!("cargo::metadata=lib={}", toolkit.lib_dir.display());
    println!("cargo::metadata=version={}", toolkit.version);
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
        HostAlloc|HostGetDevicePointer|FreeHost|MemGetInfo|StreamCreate|StreamCreateWithFlags|StreamDestroy|\
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
                "needs a CUDA 12.4+ or 13 toolkit (see the warning above for what was searched); run \
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
