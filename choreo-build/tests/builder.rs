//! The builder against the real translator and (where needed) the real nvcc, outside cargo:
//! outputs go to a temporary `out_dir` and no cargo directives are printed.
//!
//! The tests that compile need nvcc (found like a build would find it: `NVCC`, `CUDA_HOME`,
//! `PATH`, pip, the `ci/install-cuda` cache). Without one they FAIL with a message saying so —
//! CI provisions it with `ci/install-cuda`. They need no GPU.

use choreo_build::{Builder, Error, Report};
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn temp_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("builder-{name}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

const SCALE: &str = r#"#include "common.h"

__co__ f32 [N, 64] scale(f32 [N, 64] x, f32 k, stream s) {
  f32 [x.span] y;
  parallel<s> r by N : block {
    parallel c by 64 : thread
      y.at(r, c) = x.at(r, c) * k;
  }
  return y;
}

int host_helper() { return COMMON_VALUE; }
"#;

const ADD: &str = r#"__co__ void add_one(f32 [16] & v) {
  parallel p by 1 : block {
    parallel t by 16 : thread
      v.at(t) = v.at(t) + 1.0;
  }
}
"#;

fn builder(dir: &Path) -> Builder {
    let mut builder = Builder::new();
    builder
        .files(format!("{}/k/*.co", dir.display()))
        .out_dir(dir.join("out"))
        .cargo_metadata(false);
    builder
}

fn compiled(report: &Report) -> Vec<String> {
    report.files.iter().filter(|f| f.compiled).map(|f| f.module.clone()).collect()
}

fn require_toolkit(report: &Report) {
    assert!(
        report.stub.is_none(),
        "this test needs nvcc (run ci/install-cuda, or set CUDA_HOME): {}",
        report.stub.as_ref().map(ToString::to_string).unwrap_or_default()
    );
}

#[test]
fn compiles_each_file_once_and_then_only_what_changed() {
    let dir = temp_dir("cache");
    fs::create_dir_all(dir.join("k")).unwrap();
    fs::write(dir.join("k/scale.co"), SCALE).unwrap();
    fs::write(dir.join("k/common.h"), "#define COMMON_VALUE 1\n").unwrap();
    fs::write(dir.join("k/add-one.co"), ADD).unwrap();

    let first = builder(&dir).emit_sources_to(dir.join("dump")).build("kernels").unwrap();
    require_toolkit(&first);
    assert_eq!(first.nvcc_runs, 2, "{first}");
    assert_eq!(first.cache_hits, 0);
    assert_eq!(compiled(&first), ["add_one", "scale"]);
    let library = first.library.clone().unwrap();
    assert!(library.rebuilt && library.path.is_file(), "{first}");
    assert!(library.path.starts_with(dir.join("out/choreo/lib")), "{first}");
    assert_eq!(library.path.file_name().unwrap(), &*format!("lib{}.a", library.link_name));
    assert!(library.link_name.starts_with("choreo_") && library.link_name.ends_with("_kernels"));
    let out = dir.join("out/choreo");
    for file in [
        "kernels.rs",
        "kernels.report",
        "kernels/choreo.h",
        "kernels/scale.cu",
        "kernels/scale.rs",
        "kernels/add_one.cu",
        "kernels/add_one.rs",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let index = fs::read_to_string(out.join("kernels.rs")).unwrap();
    assert!(index.contains("pub mod add_one {") && index.contains("pub mod scale {"), "{index}");
    assert_eq!(fs::read_to_string(out.join("kernels.report")).unwrap(), first.to_string());
    // The dump folder mirrors the generated sources.
    for file in ["kernels.rs", "kernels/choreo.h", "kernels/scale.cu", "kernels/add_one.rs"] {
        assert_eq!(
            fs::read(dir.join("dump").join(file)).unwrap(),
            fs::read(out.join(file)).unwrap(),
            "{file}"
        );
    }
    // The archive holds both extern "C" entries, mangled with the package, version, library
    // and module (this test's package is choreo-build).
    if let Ok(nm) = Command::new("nm").arg(&library.path).output() {
        let symbols = String::from_utf8_lossy(&nm.stdout);
        for entry in [
            "__choreo_rs_12choreo_build50_1_07kernels5scale5scale",
            "__choreo_rs_12choreo_build50_1_07kernels7add_one7add_one",
        ] {
            assert!(symbols.lines().any(|l| l.ends_with(&format!(" T {entry}"))), "{symbols}");
        }
    }

    // No change: nvcc does not run, nothing is rewritten.
    let cu = out.join("kernels/scale.cu");
    let cu_time = fs::metadata(&cu).unwrap().modified().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let again = builder(&dir).build("kernels").unwrap();
    assert_eq!((again.nvcc_runs, again.cache_hits), (0, 2), "{again}");
    assert!(again.files.iter().all(|f| !f.cu_written && !f.rs_written), "{again}");
    assert!(!again.library.unwrap().rebuilt);
    assert_eq!(fs::metadata(&cu).unwrap().modified().unwrap(), cu_time);

    // One .co changes: only its .cu is compiled.
    fs::write(dir.join("k/add-one.co"), ADD.replace("+ 1.0", "+ 2.0")).unwrap();
    let one = builder(&dir).build("kernels").unwrap();
    assert_eq!((one.nvcc_runs, one.cache_hits), (1, 1), "{one}");
    assert_eq!(compiled(&one), ["add_one"]);
    assert!(one.library.unwrap().rebuilt);

    // A local header that the host code includes changes: only its includer is compiled.
    fs::write(dir.join("k/common.h"), "#define COMMON_VALUE 2\n").unwrap();
    let header = builder(&dir).build("kernels").unwrap();
    assert_eq!(compiled(&header), ["scale"], "{header}");
    // Its cache key did not change (only the header did), yet the library takes the new object.
    assert!(header.library.unwrap().rebuilt, "the library kept the old object of scale.co");
}

#[test]
fn every_file_with_errors_is_reported_with_locations() {
    let dir = temp_dir("diagnostics");
    fs::create_dir_all(dir.join("k")).unwrap();
    fs::write(dir.join("k/a.co"), "__co__ void f() {\n  x = ;\n}\n").unwrap();
    fs::write(dir.join("k/b.co"), ADD.replace("v.at(t) + 1.0", "w.at(t)")).unwrap();
    fs::write(dir.join("k/ok.co"), ADD).unwrap();
    let error = builder(&dir).build("kernels").unwrap_err();
    let Error::Diagnostics(files) = &error else { panic!("expected diagnostics, got {error}") };
    let names: Vec<_> = files.iter().map(|f| f.file.file_name().unwrap().to_owned()).collect();
    assert_eq!(names, ["a.co", "b.co"]);
    let text = error.to_string();
    assert!(text.contains("k/a.co:2:"), "{text}");
    assert!(text.contains("k/b.co:4:"), "{text}");
    let lines = error.summary_lines();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].ends_with("a.co: 1 error") || lines[0].contains("a.co: "), "{lines:?}");
    // Nothing was generated for a failing build.
    assert!(!dir.join("out/choreo/kernels.rs").exists());
}

/// Errors in a `.co` file's host code are the C++ compilers' to find: the CPU version is
/// compiled first (always built), so the host C++ compiler reports them, at `.co` lines (the
/// generated `#line` directives); nvcc would report the same lines.
#[test]
fn compiler_errors_in_host_code_point_at_co_lines() {
    let dir = temp_dir("nvcc-error");
    fs::create_dir_all(dir.join("k")).unwrap();
    let broken = format!("{ADD}\nint broken() {{ return not_declared_anywhere; }}\n");
    fs::write(dir.join("k/broken.co"), &broken).unwrap();
    let result = builder(&dir).build("kernels");
    let error = match result {
        Ok(report) => panic!("the C++ compilers accepted broken host code: {report}"),
        Err(error) => error,
    };
    let line = broken.lines().position(|l| l.contains("not_declared")).unwrap() + 1;
    let text = error.to_string();
    let (Error::Nvcc(failures) | Error::CxxCompile(failures)) = &error else {
        panic!("expected a compiler failure, got {error}")
    };
    assert_eq!(failures.len(), 1);
    assert!(
        text.contains(&format!("broken.co({line})"))
            || text.contains(&format!("broken.co:{line}:")),
        "{text}"
    );
    assert!(text.contains("not_declared_anywhere"), "{text}");
    // A failed compile leaves no cache entry: the next build runs the compiler again.
    let obj = dir.join("out/choreo/kernels/obj");
    for dir in [obj.clone(), obj.join("cpu")] {
        let keys: Vec<_> = fs::read_dir(&dir)
            .map(|entries| entries.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        let keys: Vec<_> = keys
            .iter()
            .map(|name| name.to_string_lossy().into_owned())
            .filter(|name| name.starts_with("broken") && name.ends_with(".key"))
            .collect();
        assert!(keys.is_empty(), "{}: {keys:?}", dir.display());
    }
}

/// Objects are kept per architecture list: building for sm_80, then sm_90, then sm_80 again
/// compiles nothing the third time (the CPU version, which has no architecture, is compiled
/// once).
#[test]
fn switching_the_architecture_and_back_compiles_nothing() {
    let dir = temp_dir("arch-switch");
    fs::create_dir_all(dir.join("k")).unwrap();
    fs::write(dir.join("k/add-one.co"), ADD).unwrap();
    let build = |arch: &str| builder(&dir).arch(arch).build("kernels").unwrap();
    let first = build("sm_80");
    require_toolkit(&first);
    assert_eq!((first.nvcc_runs, first.cache_hits, first.cpu_runs), (1, 0, 1), "{first}");
    let second = build("sm_90");
    assert_eq!((second.nvcc_runs, second.cache_hits, second.cpu_runs), (1, 0, 0), "{second}");
    assert_ne!(first.files[0].object, second.files[0].object, "one object per architecture");
    let third = build("sm_80");
    assert_eq!((third.nvcc_runs, third.cache_hits, third.cpu_runs), (0, 1, 0), "{third}");
    assert_eq!(third.files[0].object, first.files[0].object);
    // The library is remade from the sm_80 object (archiving is cheap; compiling is not).
    let library = third.library.unwrap();
    assert!(library.rebuilt, "the library kept the sm_90 object");
    assert_eq!(
        fs::read(first.files[0].object.as_ref().unwrap()).unwrap(),
        fs::read(third.files[0].object.as_ref().unwrap()).unwrap()
    );
    // And once more for sm_90: its object is still there.
    let fourth = build("sm_90");
    assert_eq!((fourth.nvcc_runs, fourth.cache_hits), (0, 1), "{fourth}");
}

/// A `.co` file with comments in its host code (copied into the generated `.cu` and `.cpp`)
/// and in its `__co__` function (which the `.cu` does not contain).
const COMMENTED: &str = r#"// Adds one to every element.
#include "common.h"

/* The kernel. */
__co__ void add_one(f32 [16] & v) {
  // one block
  parallel p by 1 : block {
    parallel t by 16 : thread /* one thread per element */
      v.at(t) = v.at(t) + 1.0;
  }
}

// A host helper.
int host_helper() { return COMMON_VALUE; } // trailing
"#;

/// Comment-only edits that keep the line numbers compile nothing: the generated `.cu` and
/// `.cpp` change (host comments are copied), but their cache digest leaves comments out. An
/// edit that adds a line moves the `#line` directives after it, so that file is compiled.
#[test]
fn comment_only_edits_compile_nothing() {
    let dir = temp_dir("comments");
    fs::create_dir_all(dir.join("k")).unwrap();
    fs::write(
        dir.join("k/common.h"),
        "#define COMMON_VALUE 1
",
    )
    .unwrap();
    fs::write(dir.join("k/add-one.co"), COMMENTED).unwrap();
    let first = builder(&dir).build("kernels").unwrap();
    require_toolkit(&first);
    assert_eq!((first.nvcc_runs, first.cpu_runs), (1, 1), "{first}");

    let edited = COMMENTED
        .replace("Adds one to every element.", "Increments each element (edited).")
        .replace("The kernel.", "The kernel, documented at length.")
        .replace("// one block", "// a single block of threads")
        .replace("one thread per element", "t: the element")
        .replace("A host helper.", "Returns the header's value.")
        .replace("// trailing", "// trailing comment, edited");
    assert_eq!(edited.lines().count(), COMMENTED.lines().count());
    fs::write(dir.join("k/add-one.co"), &edited).unwrap();
    let again = builder(&dir).build("kernels").unwrap();
    let file = &again.files[0];
    assert!(file.cu_written, "the host comments are in the .cu: {again}");
    let cu = fs::read_to_string(&file.cu).unwrap();
    assert!(cu.contains("Returns the header's value."), "{cu}");
    assert_eq!((again.nvcc_runs, again.cache_hits, again.cpu_runs), (0, 1, 0), "{again}");
    assert!(!again.library.unwrap().rebuilt);

    // A new comment line moves the lines below it: the `.cu` is compiled again (and the CPU
    // version too), so messages and line tables stay right.
    fs::write(dir.join("k/add-one.co"), format!("// a new first line\n{edited}")).unwrap();
    let shifted = builder(&dir).build("kernels").unwrap();
    assert_eq!((shifted.nvcc_runs, shifted.cpu_runs), (1, 1), "{shifted}");

    // A change of code is never mistaken for a comment edit.
    let code = format!("// a new first line\n{edited}").replace("+ 1.0", "+ 3.0");
    fs::write(dir.join("k/add-one.co"), code).unwrap();
    let changed = builder(&dir).build("kernels").unwrap();
    assert_eq!((changed.nvcc_runs, changed.cpu_runs), (1, 1), "{changed}");
}

/// A hand-written file in folder `which` with an `extern "C"` function `hand_<which>` that uses
/// `choreo.h` (found through `-I` the generated folder) and a local header.
fn hand_written_cu(which: &str) -> String {
    format!(
        r#"#include "choreo.h"
#include "local.h"

__global__ void hand_{which}_kernel(float* out) {{ out[threadIdx.x] = LOCAL_VALUE; }}

extern "C" int hand_{which}(int x) {{ return x + LOCAL_VALUE; }}
"#
    )
}

fn symbols(library: &Path) -> Option<String> {
    let nm = Command::new("nm").arg(library).output().ok()?;
    Some(String::from_utf8_lossy(&nm.stdout).into_owned())
}

fn hand_compiled(report: &Report) -> Vec<PathBuf> {
    report.cuda_files.iter().filter(|f| f.compiled).map(|f| f.source.clone()).collect()
}

#[test]
fn hand_written_cu_files_share_the_library_and_the_object_cache() {
    let dir = temp_dir("hand-written");
    // A `.co` file and two `.cu` files, all three of stem `util`.
    fs::create_dir_all(dir.join("k")).unwrap();
    fs::write(dir.join("k/util.co"), ADD).unwrap();
    for which in ["a", "b"] {
        fs::create_dir_all(dir.join(which)).unwrap();
        fs::write(dir.join(which).join("util.cu"), hand_written_cu(which)).unwrap();
        fs::write(dir.join(which).join("local.h"), "#define LOCAL_VALUE 1\n").unwrap();
    }
    let build = || {
        builder(&dir)
            .cuda_file(dir.join("a/util.cu"))
            .cuda_files(format!("{}/b/*.cu", dir.display()))
            .build("kernels")
            .unwrap()
    };

    let first = build();
    require_toolkit(&first);
    assert_eq!((first.nvcc_runs, first.cache_hits), (3, 0), "{first}");
    assert_eq!(compiled(&first), ["util"]);
    assert_eq!(hand_compiled(&first), [dir.join("a/util.cu"), dir.join("b/util.cu")]);
    // Three distinct objects: the generated one in obj/, the hand-written ones in obj/cuda/.
    let obj = dir.join("out/choreo/kernels/obj");
    // Named by their architectures (`util.sm_80-sm_90.o`).
    let generated_object = obj.join(format!("util.{}.o", first.arch.replace(',', "-")));
    assert_eq!(first.files[0].object.as_deref(), Some(&*generated_object));
    let hand_objects: Vec<&Path> =
        first.cuda_files.iter().map(|f| f.object.as_deref().unwrap()).collect();
    assert_ne!(hand_objects[0], hand_objects[1]);
    for object in &hand_objects {
        assert!(object.starts_with(obj.join("cuda")) && object.is_file(), "{first}");
    }
    // One library holds all three (`ar` keeps base names only: they must differ too).
    let library = first.library.clone().unwrap();
    if let Some(symbols) = symbols(&library.path) {
        let add_one = "__choreo_rs_12choreo_build50_1_07kernels4util7add_one";
        for symbol in [add_one, "hand_a", "hand_b"] {
            assert!(symbols.lines().any(|l| l.ends_with(&format!(" T {symbol}"))), "{symbols}");
        }
    }
    let index = fs::read_to_string(&first.index_rs).unwrap();
    assert_eq!(index.matches("pub mod").count(), 1, "{index}");
    assert!(first.to_string().contains(&format!("cuda_file={}", dir.join("b/util.cu").display())));

    // No change: nvcc runs zero times.
    let again = build();
    assert_eq!((again.nvcc_runs, again.cache_hits), (0, 3), "{again}");
    assert!(!again.library.unwrap().rebuilt);

    // The hand-written file changes: only it is compiled.
    let b = dir.join("b/util.cu");
    fs::write(&b, hand_written_cu("b").replace("x + LOCAL_VALUE", "x - LOCAL_VALUE")).unwrap();
    let edited = build();
    assert_eq!((edited.nvcc_runs, edited.cache_hits), (1, 2), "{edited}");
    assert_eq!(hand_compiled(&edited), [b]);
    assert!(compiled(&edited).is_empty());
    assert!(edited.library.unwrap().rebuilt);

    // A local header that one of them includes changes: only its includer is compiled.
    fs::write(dir.join("a/local.h"), "#define LOCAL_VALUE 2\n").unwrap();
    let header = build();
    assert_eq!(hand_compiled(&header), [dir.join("a/util.cu")], "{header}");
    assert_eq!(header.nvcc_runs, 1, "{header}");
    assert!(header.library.unwrap().rebuilt, "the library kept the old object of a/util.cu");
}

#[test]
fn a_build_of_only_hand_written_files_has_a_library_and_an_empty_index() {
    let dir = temp_dir("hand-only");
    fs::create_dir_all(dir.join("cuda")).unwrap();
    fs::write(dir.join("cuda/only.cu"), hand_written_cu("only")).unwrap();
    fs::write(dir.join("cuda/local.h"), "#define LOCAL_VALUE 3\n").unwrap();
    let report = Builder::new()
        .cuda_file(dir.join("cuda/only.cu"))
        .out_dir(dir.join("out"))
        .cargo_metadata(false)
        .build("hand")
        .unwrap();
    require_toolkit(&report);
    assert!(report.files.is_empty(), "{report}");
    assert_eq!(report.nvcc_runs, 1, "{report}");
    let index = fs::read_to_string(&report.index_rs).unwrap();
    assert!(!index.contains("pub mod"), "{index}");
    let library = report.library.unwrap();
    assert!(library.path.is_file());
    if let Some(symbols) = symbols(&library.path) {
        assert!(symbols.lines().any(|l| l.ends_with(" T hand_only")), "{symbols}");
    }
}

#[test]
fn nvcc_errors_in_hand_written_files_name_the_file() {
    let dir = temp_dir("hand-error");
    fs::create_dir_all(dir.join("k")).unwrap();
    fs::write(dir.join("k/ok.co"), ADD).unwrap();
    fs::create_dir_all(dir.join("cuda")).unwrap();
    let broken = "extern \"C\" int broken() { return not_declared_in_cu; }\n";
    fs::write(dir.join("cuda/broken.cu"), broken).unwrap();
    let result = builder(&dir).cuda_file(dir.join("cuda/broken.cu")).build("kernels");
    let error = match result {
        Ok(report) => {
            require_toolkit(&report);
            panic!("nvcc accepted a broken .cu: {report}")
        }
        Err(error) => error,
    };
    let Error::Nvcc(failures) = &error else { panic!("expected an nvcc failure, got {error}") };
    assert_eq!(failures.len(), 1, "{error}");
    assert!(failures[0].hand_written);
    assert_eq!(failures[0].source_file, dir.join("cuda/broken.cu"));
    let text = error.to_string();
    assert!(text.contains("broken.cu(1)"), "{text}");
    assert!(text.contains("not_declared_in_cu"), "{text}");
    let lines = error.summary_lines();
    assert_eq!(
        lines,
        [format!("{}: nvcc failed (exit status: 2)", dir.join("cuda/broken.cu").display())]
    );
    // No cache entry for the failed file: the next build runs nvcc on it again.
    let cuda_obj = dir.join("out/choreo/kernels/obj/cuda");
    let keys = fs::read_dir(&cuda_obj).unwrap().filter_map(Result::ok);
    assert!(keys.filter(|e| e.path().extension() == Some("key".as_ref())).count() == 0);
}

/// The toolkit a build resolves in a child process (this test binary, rerun with
/// `CHOREO_BUILD_TEST_CHILD` set) whose environment is the parent's with `vars` set and
/// `CUDA_HOME`/`CUDA_PATH` removed: builds must see `NVCC` and `CUDA_HOME` in the process
/// environment, as cargo passes them to build scripts.
fn run_child(test: &str, dir: &Path, vars: &[(&str, &OsStr)]) {
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("CHOREO_BUILD_TEST_CHILD", dir)
        .env_remove("CUDA_HOME")
        .env_remove("CUDA_PATH")
        .env_remove("NVCC");
    for (var, value) in vars {
        child.env(var, value);
    }
    let output = child.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success() && text.contains("1 passed"), "child failed:\n{text}");
}

/// In the child: builds `k/add.co` of `dir` and checks that choreo-sys's discovery (same
/// environment) resolves the same toolkit. Returns the report.
fn child_build(dir: &Path, name: &str) -> Report {
    let mut builder = Builder::new();
    builder
        .files(format!("{}/k/*.co", dir.display()))
        .out_dir(dir.join(name))
        .cargo_metadata(false);
    let report = builder.build(name).unwrap();
    require_toolkit(&report);
    let toolkit = report.toolkit.clone().unwrap();
    assert_eq!(compiled(&report), ["add"]);
    // choreo-sys's build script resolves the same toolkit, so it links the runtime that the
    // kernels were compiled against, from the same root.
    let env = choreo_toolkit::Env::process();
    let target = choreo_toolkit::Target::from_env(&env);
    match choreo_toolkit::discover_runtime(&env, &target) {
        Ok(choreo_toolkit::Discovery::Found(runtime)) => assert_eq!(runtime, toolkit),
        other => panic!("choreo-sys would not link the runtime: {other:?}"),
    }
    let link = choreo_toolkit::cudart_link_lines(&toolkit, &target);
    assert_eq!(link[0], format!("rustc-link-search=native={}", toolkit.lib_dir.display()));
    assert!(toolkit.lib_dir.starts_with(&toolkit.root), "{toolkit:?}");
    report
}

/// The real toolkit (as a build finds it) and a wrapper script around its nvcc in a folder
/// outside it, as sccache/ccache users set `NVCC`; the wrapper logs each run.
fn toolkit_and_wrapper(dir: &Path) -> (choreo_build::Toolkit, PathBuf) {
    fs::create_dir_all(dir.join("k")).unwrap();
    fs::write(dir.join("k/add.co"), ADD).unwrap();
    let report = builder(dir).build("probe").unwrap();
    require_toolkit(&report);
    let toolkit = report.toolkit.unwrap();
    let wrapper = dir.join("usr/local/bin/nvcc-wrapper");
    fs::create_dir_all(wrapper.parent().unwrap()).unwrap();
    fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho run >> '{}'\nexec '{}' \"$@\"\n",
            dir.join("wrapper.log").display(),
            toolkit.nvcc.display()
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755)).unwrap();
    }
    (toolkit, wrapper)
}

#[cfg(unix)]
#[test]
fn a_wrapper_named_by_nvcc_compiles_against_cuda_home() {
    const TEST: &str = "a_wrapper_named_by_nvcc_compiles_against_cuda_home";
    if let Some(dir) = std::env::var_os("CHOREO_BUILD_TEST_CHILD") {
        let dir = PathBuf::from(dir);
        let report = child_build(&dir, "wrapped");
        let toolkit = report.toolkit.unwrap();
        assert_eq!(toolkit.nvcc, PathBuf::from(std::env::var_os("NVCC").unwrap()));
        assert_eq!(toolkit.root, PathBuf::from(std::env::var_os("CUDA_HOME").unwrap()));
        assert_eq!(toolkit.root_from, choreo_build::RootFrom::Var("CUDA_HOME"));
        return;
    }
    let dir = temp_dir("nvcc-wrapper");
    let (toolkit, wrapper) = toolkit_and_wrapper(&dir);
    let vars = [("NVCC", wrapper.as_os_str()), ("CUDA_HOME", toolkit.root.as_os_str())];
    run_child(TEST, &dir, &vars);
    let log = fs::read_to_string(dir.join("wrapper.log")).unwrap_or_default();
    assert_eq!(log.lines().count(), 1, "the wrapper ran nvcc once");
}

#[cfg(unix)]
#[test]
fn nvcc_alone_names_the_toolkit_for_compiling_and_linking() {
    const TEST: &str = "nvcc_alone_names_the_toolkit_for_compiling_and_linking";
    if let Some(dir) = std::env::var_os("CHOREO_BUILD_TEST_CHILD") {
        let dir = PathBuf::from(dir);
        let nvcc = PathBuf::from(std::env::var_os("NVCC").unwrap());
        let toolkit = child_build(&dir, "alone").toolkit.unwrap();
        assert_eq!(toolkit.nvcc, nvcc);
        let real = fs::canonicalize(&nvcc).unwrap();
        assert_eq!(toolkit.root, real.parent().unwrap().parent().unwrap());
        assert_eq!(toolkit.root_from, choreo_build::RootFrom::Nvcc);
        return;
    }
    let dir = temp_dir("nvcc-alone");
    let (toolkit, _) = toolkit_and_wrapper(&dir);
    run_child(TEST, &dir, &[("NVCC", toolkit.nvcc.as_os_str())]);
}

#[cfg(unix)]
#[test]
fn a_wrapper_without_cuda_home_uses_the_toolkit_found_after_it() {
    const TEST: &str = "a_wrapper_without_cuda_home_uses_the_toolkit_found_after_it";
    if let Some(dir) = std::env::var_os("CHOREO_BUILD_TEST_CHILD") {
        let dir = PathBuf::from(dir);
        let toolkit = child_build(&dir, "searched").toolkit.unwrap();
        assert_eq!(toolkit.nvcc, PathBuf::from(std::env::var_os("NVCC").unwrap()));
        let expected = PathBuf::from(std::env::var_os("EXPECTED_ROOT").unwrap());
        assert_eq!(toolkit.root, fs::canonicalize(expected).unwrap());
        assert_eq!(toolkit.root_from, choreo_build::RootFrom::Search(choreo_build::FoundBy::Path));
        return;
    }
    let dir = temp_dir("wrapper-search");
    let (toolkit, wrapper) = toolkit_and_wrapper(&dir);
    // The real nvcc's folder first on PATH: the wrapper is found by NVCC, the root on PATH.
    let real_nvcc = fs::canonicalize(&toolkit.nvcc).unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let bin = real_nvcc.parent().unwrap().to_path_buf();
    let path =
        std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&path))).unwrap();
    let root = real_nvcc.parent().unwrap().parent().unwrap().to_path_buf();
    let vars = [
        ("NVCC", wrapper.as_os_str()),
        ("PATH", path.as_os_str()),
        ("EXPECTED_ROOT", root.as_os_str()),
    ];
    run_child(TEST, &dir, &vars);
}

/// `cargo build`, `cargo check` and `cargo clippy` run a build script in different `OUT_DIR`s
/// of one target folder: objects compiled by one are taken from the shared cache
/// (`<profile>/choreo-cache`) by the others, nvcc and the C++ compiler do not run again, and a
/// header change still recompiles.
#[test]
fn build_folders_of_one_target_folder_share_their_objects() {
    let dir = temp_dir("shared-cache");
    fs::create_dir_all(dir.join("k")).unwrap();
    fs::write(dir.join("k/scale.co"), SCALE).unwrap();
    fs::write(dir.join("k/common.h"), "#define COMMON_VALUE 1\n").unwrap();
    let build = |unit: &str| {
        Builder::new()
            .files(format!("{}/k/*.co", dir.display()))
            .out_dir(dir.join(format!("target/debug/build/{unit}/out")))
            .cargo_metadata(false)
            .build("kernels")
            .unwrap()
    };
    let first = build("app-1");
    require_toolkit(&first);
    assert_eq!((first.nvcc_runs, first.cpu_runs), (1, 1), "{first}");
    assert!(dir.join("target/debug/choreo-cache").is_dir());

    let second = build("app-2");
    assert_eq!((second.nvcc_runs, second.cache_hits, second.cpu_runs), (0, 1, 0), "{second}");
    assert!(second.library.as_ref().unwrap().path.is_file());
    let objects = |report: &Report| {
        let file = &report.files[0];
        [file.object.clone().unwrap(), file.cpu_object.clone().unwrap()]
    };
    for (a, b) in objects(&first).iter().zip(objects(&second)) {
        assert_ne!(a, &b);
        assert_eq!(fs::read(a).unwrap(), fs::read(&b).unwrap(), "{}", b.display());
    }

    // The header the host code includes changes: the shared entry lists it, so a third folder
    // compiles the CUDA object again.
    fs::write(dir.join("k/common.h"), "#define COMMON_VALUE 2\n").unwrap();
    let third = build("app-3");
    assert_eq!(third.nvcc_runs, 1, "{third}");
}
