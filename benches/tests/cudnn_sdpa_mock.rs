//! The control flow of the cuDNN SDPA reference (`choreo_bench::cudnn_sdpa`,
//! `kernels/cudnn_sdpa.cu`) without a GPU or cuDNN: the real code, loaded against a mock
//! `libcudnn.so.9` (`tests/support/mock_cudnn.cpp`, built here with the host C++ compiler) whose
//! heuristics offer three engines, the first refusing its execution plan and the second failing
//! at execution. Checks the dlopen path and version, the fall-through to the next candidate
//! (plan name "engine 12"), the variant pack's tensor ids (causal and not), the plan cache, and
//! the message listing every form and heuristics mode when nothing finalizes.
//!
//! The numerics are checked on the GPU by `tests/cudnn_sdpa_gpu.rs`.

use std::ffi::c_void;
use std::path::PathBuf;
use std::process::Command;

use choreo_bench::cudnn_sdpa::CudnnSdpa;

/// Builds the mock library into a fresh temporary directory.
fn build_mock() -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/mock_cudnn.cpp");
    let dir = std::env::temp_dir().join(format!("choreo-cudnn-mock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let lib = dir.join("libcudnn.so.9");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let status = Command::new(&cxx)
        .args(["-std=c++17", "-shared", "-fPIC", "-Wl,-soname,libcudnn.so.9", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("running {cxx}: {e}"));
    assert!(status.success(), "{cxx} failed to build the mock cuDNN ({status})");
    lib
}

#[test]
fn plans_fall_through_and_failures_are_named_against_a_mock_cudnn() {
    if !choreo_bench::gemm::built() {
        // The C++ side is compiled with the bench's CUDA files; a stub build has none to test.
        let err = CudnnSdpa::load().err().expect("a stub build cannot load cuDNN");
        assert!(err.contains("not compiled"), "{err}");
        return;
    }
    let lib = build_mock();
    // SAFETY: the only test of this binary sets the variables before anything reads them (no
    // other thread of the process reads the environment meanwhile). The mock itself serves as
    // the cuBLASLt the loader preloads (any loadable library does for the mock).
    unsafe {
        std::env::set_var("CHOREO_CUDNN_LIB", &lib);
        std::env::set_var("CHOREO_BENCH_CUBLASLT", &lib);
        std::env::remove_var("MOCK_CUDNN");
    }
    let sdpa = CudnnSdpa::load().expect("loading the mock cuDNN");
    assert_eq!(sdpa.version(), "cuDNN 9.28.1");

    // Fake device addresses: the mock never touches them.
    let p = 0x1000 as *mut c_void;
    let stream = std::ptr::null_mut();
    for causal in [false, true] {
        assert_eq!(sdpa.plan_name(2, 128, 128, causal), None);
        for call in 0..2 {
            // SAFETY: the mock never touches the fake addresses.
            unsafe { sdpa.forward(stream, p, p, p, p, 2, 128, 128, causal, 0.125) }
                .unwrap_or_else(|e| panic!("causal {causal}, call {call}: {e}"));
        }
        // Engine 10 refused its plan, engine 11 failed at execution: engine 12 of the first
        // form (cuDNN 9.28 >= 9.21: the SDPA_FWD operation, also for causal attention).
        assert_eq!(
            sdpa.plan_name(2, 128, 128, causal).as_deref(),
            Some("cuDNN 9.28.1 SDPA (SDPA_FWD operation, HEUR_MODE_A engine 12)")
        );
    }

    // A shape with no finalizable plan: every form and mode is listed, with cuDNN's words.
    // SAFETY: as above (one test, no concurrent reader).
    unsafe { std::env::set_var("MOCK_CUDNN", "nofinalize") };
    // SAFETY: the mock never touches the fake addresses.
    let err = unsafe { sdpa.forward(stream, p, p, p, p, 2, 256, 128, true, 0.125) }.unwrap_err();
    for attempt in [
        "[SDPA_FWD operation, HEUR_MODE_A]",
        "[fused graph, inference, HEUR_MODE_A]",
        "[fused graph with stats, HEUR_MODE_A]",
        "[SDPA_FWD operation, HEUR_MODE_FALLBACK]",
        "[fused graph, inference, HEUR_MODE_FALLBACK]",
        "[fused graph with stats, HEUR_MODE_FALLBACK]",
    ] {
        assert!(err.contains(attempt), "{attempt} missing from: {err}");
    }
    assert!(err.contains("no cuDNN execution plan for SDPA B=2 S=256 D=128 causal"), "{err}");
    assert!(
        err.contains(
            "config 2 (engine 12): cudnnBackendFinalize(EXECUTION_PLAN): \
             CUDNN_STATUS_NOT_SUPPORTED (status 3000); cuDNN says: mock cuDNN"
        ),
        "{err}"
    );
    assert_eq!(sdpa.plan_name(2, 256, 128, true), None);
    // The cached plans are unaffected.
    // SAFETY: the mock never touches the fake addresses.
    unsafe { sdpa.forward(stream, p, p, p, p, 2, 128, 128, false, 0.125) }.expect("cached plan");

    // SAFETY: refused before anything is enqueued (a null k).
    let err = unsafe { sdpa.forward(stream, p, std::ptr::null(), p, p, 2, 128, 128, false, 0.1) }
        .unwrap_err();
    assert!(err.contains("k is a null pointer"), "{err}");
    let _ = std::fs::remove_dir_all(lib.parent().expect("directory"));
}
