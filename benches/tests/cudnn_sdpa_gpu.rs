//! cuDNN's attention forward (`choreo_bench::cudnn_sdpa`, the attention section's reference) on
//! small shapes against the float64 host reference, every element, causal and not: needs a CUDA
//! GPU with cuDNN 9. Run just this with
//!
//! ```text
//! cargo test -p choreo-bench --release --test cudnn_sdpa_gpu -- --ignored --nocapture
//! ```
//!
//! (`CHOREO_CUDNN_LIB=/path/to/libcudnn.so.9` picks the library.) Each failure says which step
//! failed: loading, the plan or launch (with cuDNN's status and message), the download, or the
//! comparison (the first wrong elements).

use choreo_bench::cudnn_sdpa::{self, CudnnSdpa};
use choreo_bench::gemm::{self, DeviceMatrix, Dtype};

/// One shape: `(batch_heads, seq, head_dim, scale)`.
type Case = (usize, usize, usize, f32);

/// Loads cuDNN, or says why not. cuDNN is an optional dependency of the bench (the attention
/// section times ours alone without it, and nothing is linked at build time), so a machine
/// without it skips this test with a message rather than failing; on the GPU machine the message
/// shows in the output (`--nocapture`), and every later step that fails is a failure.
fn load() -> Option<CudnnSdpa> {
    match CudnnSdpa::load() {
        Ok(sdpa) => {
            eprintln!("{} loaded", sdpa.version());
            Some(sdpa)
        }
        Err(why) => {
            eprintln!("cuDNN not found: {why}");
            None
        }
    }
}

/// Runs `sdpa` on random inputs of `case` and compares every element with the host reference.
fn check(sdpa: &CudnnSdpa, (bh, seq, d, scale): Case, causal: bool, seed: u64) {
    let what = format!(
        "cuDNN SDPA [{bh}, {seq}, {d}] scale {scale}{}",
        if causal { " causal" } else { "" }
    );
    let hq = gemm::random_matrix(Dtype::Bf16, bh * seq, d, seed);
    let hk = gemm::random_matrix(Dtype::Bf16, bh * seq, d, seed + 1);
    let hv = gemm::random_matrix(Dtype::Bf16, bh * seq, d, seed + 2);
    let upload = |h: &[u16], name: &str| {
        DeviceMatrix::from_host(h).unwrap_or_else(|e| panic!("{what}: upload of {name}: {e}"))
    };
    let (q, k, v) = (upload(&hq, "q"), upload(&hk, "k"), upload(&hv, "v"));
    let mut o = DeviceMatrix::new(bh * seq * d).unwrap_or_else(|e| panic!("{what}: alloc o: {e}"));
    o.poison().unwrap_or_else(|e| panic!("{what}: poison o: {e}"));
    let stream = choreo::Stream::new().unwrap_or_else(|e| panic!("{what}: stream: {e}"));
    // Twice: the first call builds and caches the plan, the second reuses it (as timing does).
    for call in ["first call (builds the plan)", "second call (cached plan)"] {
        // SAFETY: q, k, v, o hold bh·seq·d bf16 each and live until the synchronize below.
        unsafe {
            sdpa.forward(
                stream.as_raw(),
                q.ptr(),
                k.ptr(),
                v.ptr(),
                o.ptr(),
                bh,
                seq,
                d,
                causal,
                scale,
            )
        }
        .unwrap_or_else(|e| panic!("{what}: forward, {call}:\n{e}"));
        stream.synchronize().unwrap_or_else(|e| panic!("{what}: running the {call}: {e}"));
    }
    let plan =
        sdpa.plan_name(bh, seq, d, causal).unwrap_or_else(|| panic!("{what}: no cached plan"));
    let ho = o.download().unwrap_or_else(|e| panic!("{what}: download of o: {e}"));
    let values = |h: &[u16]| h.iter().map(|&b| Dtype::Bf16.value(b)).collect::<Vec<f32>>();
    let want = cudnn_sdpa::reference(
        (&values(&hq), &values(&hk), &values(&hv)),
        (bh, seq, d),
        causal,
        scale,
    );
    // bf16 output (8 significant bits) of a softmax-weighted mean whose probabilities the fused
    // kernel rounds to bf16 before the second product: a few 2^-9 relative, plus a small
    // absolute term for outputs near 0. A missing mask, scale or wrong layout is off by far more.
    let tolerance = |r: f64| 2e-3 + 1e-2 * r.abs();
    let mut wrong = Vec::new();
    let mut worst = 0.0f64;
    for (i, (&bits, &r)) in ho.iter().zip(&want).enumerate() {
        let got = f64::from(Dtype::Bf16.value(bits));
        let err = (got - r).abs();
        if err.is_nan() || err > tolerance(r) {
            wrong.push(format!(
                "o[{}][{}][{}] = {got} (want {r:.6})",
                i / (seq * d),
                i / d % seq,
                i % d
            ));
        }
        worst = worst.max(if err.is_nan() { f64::INFINITY } else { err });
    }
    assert!(
        wrong.is_empty(),
        "{what} [{plan}]: {} of {} elements wrong, first: {}",
        wrong.len(),
        ho.len(),
        wrong.iter().take(8).cloned().collect::<Vec<_>>().join(", ")
    );
    eprintln!("{what}: all {} elements right (max abs. err {worst:.2e}) [{plan}]", ho.len());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cudnn_sdpa_matches_the_host_reference() {
    let Some(sdpa) = load() else { return };
    let d = 128;
    let cases: [Case; 3] = [
        (2, 128, d, 1.0 / (d as f32).sqrt()),
        (2, 256, d, 1.0 / (d as f32).sqrt()),
        // A sharper softmax: errors in the scores show.
        (2, 256, d, 0.5),
    ];
    for (n, case) in cases.into_iter().enumerate() {
        for causal in [false, true] {
            check(&sdpa, case, causal, 11 + 10 * n as u64);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cudnn_sdpa_refuses_bad_arguments_with_a_message() {
    let Some(sdpa) = load() else { return };
    let o = DeviceMatrix::new(2 * 128 * 128).expect("alloc");
    let stream = choreo::Stream::new().expect("stream");
    let null = std::ptr::null();
    // SAFETY: refused before anything is enqueued (a null q); o holds 2·128·128 elements.
    let err = unsafe {
        sdpa.forward(stream.as_raw(), null, o.ptr(), o.ptr(), o.ptr(), 2, 128, 128, false, 0.1)
    }
    .unwrap_err();
    assert!(err.contains("q is a null pointer"), "{err}");
    // SAFETY: refused before anything is enqueued (an empty shape).
    let err = unsafe {
        sdpa.forward(stream.as_raw(), o.ptr(), o.ptr(), o.ptr(), o.ptr(), 2, 0, 128, false, 0.1)
    }
    .unwrap_err();
    assert!(err.contains("empty shape"), "{err}");
}
