//! The builder against the real translator and (where needed) the real nvcc, outside cargo:
//! outputs go to a temporary `out_dir` and no cargo directives are printed.
//!
//! The tests that compile need nvcc (found like a build would find it: `NVCC`, `CUDA_HOME`,
//! `PATH`, pip, the `ci/install-cuda` cache). Without one they FAIL with a message saying so —
//! CI provisions it with `ci/install-cuda`. They need no GPU.

use choreo_build::{Builder, Error, Report};
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
    // The archive holds both extern "C" entries.
    if let Ok(nm) = Command::new("nm").arg(&library.path).output() {
        let symbols = String::from_utf8_lossy(&nm.stdout);
        for entry in ["__choreo_rs_scale", "__choreo_rs_add_one"] {
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

#[test]
fn nvcc_errors_in_host_code_point_at_co_lines() {
    let dir = temp_dir("nvcc-error");
    fs::create_dir_all(dir.join("k")).unwrap();
    let broken = format!("{ADD}\nint broken() {{ return not_declared_anywhere; }}\n");
    fs::write(dir.join("k/broken.co"), &broken).unwrap();
    let result = builder(&dir).build("kernels");
    let error = match result {
        Ok(report) => {
            require_toolkit(&report);
            panic!("nvcc accepted broken host code: {report}")
        }
        Err(error) => error,
    };
    let Error::Nvcc(failures) = &error else { panic!("expected an nvcc failure, got {error}") };
    assert_eq!(failures.len(), 1);
    let line = broken.lines().position(|l| l.contains("not_declared")).unwrap() + 1;
    let text = error.to_string();
    assert!(text.contains(&format!("broken.co({line})")), "{text}");
    assert!(text.contains("not_declared_anywhere"), "{text}");
    // A failed compile leaves no cache entry: the next build runs nvcc again.
    let obj = dir.join("out/choreo/kernels/obj");
    assert!(!obj.join("broken.key").exists());
}
