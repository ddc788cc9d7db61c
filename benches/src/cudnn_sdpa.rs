//! cuDNN's scaled-dot-product attention forward (flash attention), loaded at run time: the
//! reference the attention section of `choreo-bench gpu` times the Choreo attention forward
//! against (issue 15), and its float64 host reference.
//!
//! `O = softmax(Q · Kᵀ · scale [+ causal mask]) · V`, Q, K, V, O bf16 `[batch_heads, seq,
//! head_dim]` contiguous, f32 compute. `kernels/cudnn_sdpa.cu` opens `libcudnn.so.9` with
//! dlopen (`$CHOREO_CUDNN_LIB` names another; nothing is linked, no cuDNN header is needed) and
//! builds, with cuDNN's backend graph API, what cudnn_frontend's SDPA node builds: its single
//! SDPA_FWD operation where the frontend would use it (cuDNN ≥ 9.13.1, causal ≥ 9.21 with a
//! DIAGONAL_BAND_MASK score subgraph), else the composite graph (matmul, scale, the causal mask
//! as GEN_INDEX + CMP_GE + BINARY_SELECT, softmax as reductions and pointwise operations,
//! matmul), so that the heuristics (mode A) pick the fused flash-attention engine; see that
//! file for the graphs and the order in which they are tried.
//! The execution plan and its workspace are cached per `(batch_heads, seq, head_dim, causal)`.
//!
//! The GPU test (`tests/cudnn_sdpa_gpu.rs`) checks it against [`reference`]: `cargo test -p
//! choreo-bench --release --test cudnn_sdpa_gpu -- --ignored --nocapture`.

use std::ffi::c_void;
use std::sync::Mutex;

use choreo::sys::cudaStream_t;

/// The C entries of `kernels/cudnn_sdpa.cu`.
#[cfg(choreo_bench_kernels)]
mod ffi {
    use std::ffi::{c_char, c_void};

    use choreo::sys::cudaStream_t;

    unsafe extern "C" {
        pub fn sdpa_cudnn_create(
            ctx: *mut *mut c_void,
            version: *mut usize,
            err: *mut c_char,
            len: usize,
        ) -> i32;
        pub fn sdpa_cudnn_destroy(ctx: *mut c_void);
        pub fn sdpa_cudnn_forward(
            ctx: *mut c_void,
            stream: cudaStream_t,
            q: *const c_void,
            k: *const c_void,
            v: *const c_void,
            o: *mut c_void,
            b: i64,
            s: i64,
            d: i64,
            causal: i32,
            scale: f32,
            err: *mut c_char,
            len: usize,
        ) -> i32;
        pub fn sdpa_cudnn_plan_name(
            ctx: *mut c_void,
            b: i64,
            s: i64,
            d: i64,
            causal: i32,
            out: *mut c_char,
            len: usize,
        ) -> i32;
    }
}

/// Bytes for the messages of the C entries (a refused graph lists every engine tried).
#[cfg(choreo_bench_kernels)]
const MESSAGE_BYTES: usize = 32 << 10;

/// A message buffer's text (up to its NUL).
#[cfg(choreo_bench_kernels)]
fn text(buffer: &[u8]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).trim_end().to_string()
}

/// The C context (its cuDNN handle and plan cache).
struct Context(*mut c_void);

// SAFETY: the context is plain heap data and a cuDNN handle, used by one thread at a time (it
// only lives inside the `Mutex` of `CudnnSdpa`); cuDNN handles may move between host threads.
unsafe impl Send for Context {}

/// cuDNN's SDPA forward (see the module's documentation).
///
/// Thread-safety: `CudnnSdpa` is `Send` and `Sync`; its cuDNN handle and plan cache sit behind a
/// mutex, so concurrent [`forward`](CudnnSdpa::forward) calls are serialised (each only
/// enqueues work on its stream, the lock is not held while the GPU runs). A shape's plan has one
/// workspace: the same shape must not run on two streams at once (one stream, as the bench
/// times it, is always fine).
pub struct CudnnSdpa {
    context: Mutex<Context>,
    version: usize,
}

impl CudnnSdpa {
    /// dlopen libcudnn and create a handle; Err(reason) if cuDNN is absent or too old.
    pub fn load() -> Result<CudnnSdpa, String> {
        #[cfg(choreo_bench_kernels)]
        {
            let mut ctx = std::ptr::null_mut();
            let mut version = 0usize;
            let mut err = vec![0u8; MESSAGE_BYTES];
            // SAFETY: `ctx` and `version` are writable slots, `err` a writable buffer of the
            // length passed.
            let status = unsafe {
                ffi::sdpa_cudnn_create(&mut ctx, &mut version, err.as_mut_ptr().cast(), err.len())
            };
            if status != 0 || ctx.is_null() {
                return Err(format!("cuDNN unavailable: {}", text(&err)));
            }
            Ok(CudnnSdpa { context: Mutex::new(Context(ctx)), version })
        }
        #[cfg(not(choreo_bench_kernels))]
        Err("cuDNN SDPA: the bench's CUDA files were not compiled (stub build without nvcc)".into())
    }

    /// "cuDNN 9.x.y" for the report.
    pub fn version(&self) -> String {
        let v = self.version;
        format!("cuDNN {}.{}.{}", v / 10000, v / 100 % 100, v % 100)
    }

    /// o = softmax(q·kᵀ·scale [+ causal mask]) · v, bf16 [batch_heads, seq, head_dim] each,
    /// contiguous; launched on `stream` (raw cudaStream_t, as in gemm_fp8.rs's cuBLASLt call).
    ///
    /// Not waited for. The first call of a `(batch_heads, seq, head_dim, causal)` builds its
    /// plan (graph, heuristics, workspace: slow, keep it out of timings); later calls only
    /// enqueue the fused kernel. The causal mask keeps key `j ≤` query `i` (top-left aligned).
    /// `Err` names the cuDNN call that failed with cuDNN's status and message; for a graph no
    /// engine accepts, every form and engine configuration tried.
    ///
    /// Contract (not checked beyond null pointers): `q`, `k`, `v`, `o` are device addresses of
    /// `batch_heads · seq · head_dim` bf16 elements each, which stay allocated, and unwritten
    /// by other streams, until `stream` has run the attention. The host never dereferences
    /// them; cuDNN's kernel reads and writes them on the GPU. This is the benchmark harness API
    /// of the attention section.
    ///
    /// # Safety
    ///
    /// The contract above: a wrong address is a GPU fault or corrupted device memory, as with
    /// the raw launches of the other sections (`gemm_sync::launch_hand`).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn forward(
        &self,
        stream: cudaStream_t,
        q: *const c_void,
        k: *const c_void,
        v: *const c_void,
        o: *mut c_void,
        batch_heads: usize,
        seq: usize,
        head_dim: usize,
        causal: bool,
        scale: f32,
    ) -> Result<(), String> {
        let (b, s, d) = validate((q, k, v, o.cast_const()), (batch_heads, seq, head_dim), scale)?;
        #[cfg(choreo_bench_kernels)]
        {
            let context = self.context.lock().unwrap_or_else(|e| e.into_inner());
            let mut err = vec![0u8; MESSAGE_BYTES];
            // SAFETY: the context is live (dropped only with `self`) and used under the lock;
            // the pointers' sizes and lifetimes are the caller's contract; `err` is a writable
            // buffer of the length passed.
            let status = unsafe {
                ffi::sdpa_cudnn_forward(
                    context.0,
                    stream,
                    q,
                    k,
                    v,
                    o,
                    b,
                    s,
                    d,
                    i32::from(causal),
                    scale,
                    err.as_mut_ptr().cast(),
                    err.len(),
                )
            };
            if status != 0 {
                return Err(format!("cuDNN SDPA: {}", text(&err)));
            }
            Ok(())
        }
        #[cfg(not(choreo_bench_kernels))]
        {
            let _ = (stream, causal, b, s, d);
            Err("cuDNN SDPA: the bench's CUDA files were not compiled".into())
        }
    }

    /// What the cached plan of a shape is, for the report: "cuDNN 9.x.y SDPA (SDPA_FWD
    /// operation, HEUR_MODE_A engine N)", or "(fused graph, inference, …)", "(fused graph with
    /// stats, …)" for the composite forms; `HEUR_MODE_FALLBACK` means an unfused fallback
    /// engine (a correct but slow reference; the report must say so). `None` before the
    /// shape's first [`forward`](CudnnSdpa::forward).
    pub fn plan_name(
        &self,
        batch_heads: usize,
        seq: usize,
        head_dim: usize,
        causal: bool,
    ) -> Option<String> {
        let dims = (i64::try_from(batch_heads), i64::try_from(seq), i64::try_from(head_dim));
        let (Ok(b), Ok(s), Ok(d)) = dims else { return None };
        #[cfg(choreo_bench_kernels)]
        {
            let context = self.context.lock().unwrap_or_else(|e| e.into_inner());
            let mut out = vec![0u8; 512];
            // SAFETY: a live context used under the lock; `out` is a writable buffer of the
            // length passed.
            let status = unsafe {
                ffi::sdpa_cudnn_plan_name(
                    context.0,
                    b,
                    s,
                    d,
                    i32::from(causal),
                    out.as_mut_ptr().cast(),
                    out.len(),
                )
            };
            (status == 0).then(|| text(&out))
        }
        #[cfg(not(choreo_bench_kernels))]
        {
            let _ = (b, s, d, causal);
            None
        }
    }
}

impl Drop for CudnnSdpa {
    fn drop(&mut self) {
        let context = self.context.get_mut().unwrap_or_else(|e| e.into_inner());
        #[cfg(choreo_bench_kernels)]
        // SAFETY: the context came from sdpa_cudnn_create and is destroyed once (it waits for
        // the device before freeing the workspaces).
        unsafe {
            ffi::sdpa_cudnn_destroy(context.0)
        };
        context.0 = std::ptr::null_mut();
    }
}

/// Checks the arguments of [`CudnnSdpa::forward`]: non-null pointers, positive sizes whose
/// tensors fit in `i64` elements, a finite scale. Returns the sizes as cuDNN's `i64`.
pub fn validate(
    (q, k, v, o): (*const c_void, *const c_void, *const c_void, *const c_void),
    (batch_heads, seq, head_dim): (usize, usize, usize),
    scale: f32,
) -> Result<(i64, i64, i64), String> {
    for (name, p) in [("q", q), ("k", k), ("v", v), ("o", o)] {
        if p.is_null() {
            return Err(format!("cuDNN SDPA: {name} is a null pointer"));
        }
    }
    let shape = format!("[{batch_heads}, {seq}, {head_dim}]");
    if batch_heads == 0 || seq == 0 || head_dim == 0 {
        return Err(format!("cuDNN SDPA: empty shape {shape}"));
    }
    let elems = batch_heads.checked_mul(seq).and_then(|n| n.checked_mul(seq.max(head_dim)));
    let fits = elems.is_some_and(|n| i64::try_from(n).is_ok());
    let dims = (i64::try_from(batch_heads), i64::try_from(seq), i64::try_from(head_dim));
    let (true, Ok(b), Ok(s), Ok(d)) = (fits, dims.0, dims.1, dims.2) else {
        return Err(format!("cuDNN SDPA: shape {shape} does not fit cuDNN's int64 strides"));
    };
    if !scale.is_finite() {
        return Err(format!("cuDNN SDPA: scale {scale} is not finite"));
    }
    Ok((b, s, d))
}

/// The float64 host reference: `o[h][i][c] = Σ_j p_ij · v[h][j][c]` with `p_i =
/// softmax_j(scale · q[h][i] · k[h][j])` over `j < seq` (`j ≤ i` when `causal`), inputs `q`, `k`,
/// `v` `[batch_heads, seq, head_dim]` row-major.
pub fn reference(
    (q, k, v): (&[f32], &[f32], &[f32]),
    (batch_heads, seq, head_dim): (usize, usize, usize),
    causal: bool,
    scale: f32,
) -> Vec<f64> {
    let len = batch_heads * seq * head_dim;
    assert!(q.len() == len && k.len() == len && v.len() == len, "reference: inputs of {len}");
    let mut o = vec![0.0f64; len];
    let mut p = vec![0.0f64; seq];
    for h in 0..batch_heads {
        let base = h * seq * head_dim;
        fn row(t: &[f32], start: usize, len: usize) -> &[f32] {
            &t[start..start + len]
        }
        let at = |i: usize| base + i * head_dim;
        for i in 0..seq {
            let keys = if causal { i + 1 } else { seq };
            let qi = row(q, at(i), head_dim);
            let mut max = f64::NEG_INFINITY;
            for (j, pj) in p.iter_mut().enumerate().take(keys) {
                let dot: f64 = qi
                    .iter()
                    .zip(row(k, at(j), head_dim))
                    .map(|(&a, &b)| a as f64 * b as f64)
                    .sum();
                *pj = dot * scale as f64;
                max = max.max(*pj);
            }
            let mut sum = 0.0;
            for pj in p.iter_mut().take(keys) {
                *pj = (*pj - max).exp();
                sum += *pj;
            }
            let out = &mut o[at(i)..at(i) + head_dim];
            for (j, pj) in p.iter().enumerate().take(keys) {
                for (oc, &vc) in out.iter_mut().zip(row(v, at(j), head_dim)) {
                    *oc += pj / sum * vc as f64;
                }
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ptr(x: &u8) -> *const c_void {
        (x as *const u8).cast()
    }

    #[test]
    fn validate_refuses_null_pointers_empty_and_huge_shapes_and_bad_scales() {
        let x = 0u8;
        let p = ptr(&x);
        let null = std::ptr::null();
        assert_eq!(validate((p, p, p, p), (2, 128, 128), 0.1), Ok((2, 128, 128)));
        let err = validate((p, null, p, p), (2, 128, 128), 0.1).unwrap_err();
        assert!(err.contains("k is a null pointer"), "{err}");
        let err = validate((p, p, p, p), (2, 0, 128), 0.1).unwrap_err();
        assert!(err.contains("empty shape [2, 0, 128]"), "{err}");
        let err = validate((p, p, p, p), (1 << 40, 1 << 20, 128), 0.1).unwrap_err();
        assert!(err.contains("does not fit"), "{err}");
        let err = validate((p, p, p, p), (2, 128, 128), f32::NAN).unwrap_err();
        assert!(err.contains("not finite"), "{err}");
    }

    #[test]
    fn reference_softmax_weights_and_causal_mask() {
        // One head, 3 positions, head_dim 2. With q = 0 every score is 0: the output is the
        // mean of the visible values.
        let q = [0.0f32; 6];
        let k = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let v = [1.0, 10.0, 2.0, 20.0, 6.0, 60.0];
        let o = reference((&q, &k, &v), (1, 3, 2), false, 1.0);
        for row in o.chunks(2) {
            assert!((row[0] - 3.0).abs() < 1e-12 && (row[1] - 30.0).abs() < 1e-12, "{o:?}");
        }
        let o = reference((&q, &k, &v), (1, 3, 2), true, 1.0);
        let want = [1.0, 10.0, 1.5, 15.0, 3.0, 30.0];
        assert!(o.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12), "{o:?}");
        // A large scale makes the softmax pick the key with the largest score.
        let q = [1.0f32, 0.0, 1.0, 0.0, 1.0, 0.0];
        let o = reference((&q, &k, &v), (1, 3, 2), false, 100.0);
        assert!((o[0] - 6.0).abs() < 1e-9 && (o[1] - 60.0).abs() < 1e-9, "{o:?}");
        // Causal: row 0 sees only key 0.
        let o = reference((&q, &k, &v), (1, 3, 2), true, 100.0);
        assert!((o[0] - 1.0).abs() < 1e-12 && (o[1] - 10.0).abs() < 1e-12, "{o:?}");
    }
}
