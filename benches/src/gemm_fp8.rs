//! The fp8 GEMM pieces shared by the `gemm-fp8` section of `choreo-bench gpu` and its GPU test
//! (`tests/gemm_gpu.rs`): e4m3 inputs, their float64 host reference, and cuBLASLt loaded at run
//! time (`kernels/cublaslt.cu`, dlopen; nothing is linked).
//!
//! `C[M, N] = A[M, K] · B[N, K]ᵀ`, A and B `f8_e4m3` row-major (K-major), f32 accumulation, C
//! bf16 row-major: the Choreo `gemm_e4m3` (`kernels/gemm.co`) and cuBLASLt's fp8 "TN" GEMM
//! compute the same thing on the same buffers (see `kernels/cublaslt.cu` for the mapping to
//! cuBLASLt's column-major terms).

use choreo::{DeviceTensor, F8E4M3, Stream, bf16, sys};

use crate::gemm::{self, Dtype};

/// The type of C.
pub const OUTPUT: Dtype = Dtype::Bf16;

/// The C entries of `kernels/cublaslt.cu`.
#[cfg(choreo_bench_kernels)]
mod ffi {
    use std::ffi::{c_char, c_void};

    use choreo::sys::cudaStream_t;

    unsafe extern "C" {
        pub fn gemm_cublaslt_load(version: *mut usize) -> i32;
        pub fn gemm_cublaslt_fp8(
            s: cudaStream_t,
            a: *const c_void,
            b: *const c_void,
            c: *mut c_void,
            m: i32,
            n: i32,
            k: i32,
            fast_accum: i32,
        ) -> i32;
        pub fn gemm_cublaslt_error(code: i32) -> *const c_char;
    }
}

/// xorshift64.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Inputs whose products and sums are exact in f32 for K ≤ 2^19: the integers -4..=4 (exact
/// in e4m3; products ≤ 16 in magnitude). Every correct kernel then rounds the same exact sums to
/// bf16: its output must equal the reference bit for bit.
pub fn exact_matrix(rows: usize, cols: usize, seed: u64) -> Vec<F8E4M3> {
    let mut state = seed.max(1);
    (0..rows * cols)
        .map(|_| F8E4M3::from_f32(((next(&mut state) >> 40) % 9) as f32 - 4.0))
        .collect()
}

/// Inputs of random values in [-1, 1) rounded to e4m3 (a deterministic xorshift stream).
pub fn random_matrix(rows: usize, cols: usize, seed: u64) -> Vec<F8E4M3> {
    let mut state = seed.max(1);
    (0..rows * cols)
        .map(|_| {
            let unit = (next(&mut state) >> 40) as f32 / (1u64 << 24) as f32;
            F8E4M3::from_f32(2.0 * unit - 1.0)
        })
        .collect()
}

/// The values of `v`.
pub fn values(v: &[F8E4M3]) -> Vec<f32> {
    v.iter().map(|x| x.to_f32()).collect()
}

/// Checks C (bf16 bits) at `points` against the float64 reference of `a` · `b`ᵀ (see
/// [`gemm::check_points`]: bit for bit with `exact`, else within bf16's tolerance of
/// max(|reference|, √K / 3)). Returns the largest relative error seen.
pub fn check_points(
    what: &str,
    (a, b, c): (&[F8E4M3], &[F8E4M3], &[u16]),
    (n, k): (usize, usize),
    points: impl IntoIterator<Item = (usize, usize)>,
    exact: bool,
) -> Result<f64, String> {
    gemm::check_values(what, OUTPUT, (&values(a), &values(b), c), (n, k), points, exact)
}

/// Loads cuBLASLt (dlopen; `$CHOREO_BENCH_CUBLASLT` names another library). `Ok(version)` when
/// ready, `Err(why)` when not.
pub fn load_cublaslt() -> Result<usize, String> {
    #[cfg(choreo_bench_kernels)]
    {
        let mut version = 0usize;
        // SAFETY: `version` is a writable size_t.
        match unsafe { ffi::gemm_cublaslt_load(&mut version) } {
            0 => Ok(version),
            1 => Err("cuBLASLt unavailable (libcublasLt.so.13 / libcublasLt.so / .so.12 not \
                      found, or a symbol missing; $CHOREO_BENCH_CUBLASLT names another)"
                .into()),
            2 => Err("cuBLASLt unavailable (cublasLtCreate failed)".into()),
            status => Err(format!("cuBLASLt unavailable: {}", lt_message(status))),
        }
    }
    #[cfg(not(choreo_bench_kernels))]
    Err("the GEMM kernels were not compiled (stub build without nvcc)".into())
}

/// The message of a non-zero status of the cuBLASLt entries.
#[cfg(choreo_bench_kernels)]
fn lt_message(status: i32) -> String {
    // SAFETY: returns a static string, a pointer into a static buffer, or null.
    let text = unsafe { ffi::gemm_cublaslt_error(status) };
    if text.is_null() {
        return format!("status {status}");
    }
    // SAFETY: a NUL-terminated string that lives as long as the program.
    let text = unsafe { std::ffi::CStr::from_ptr(text) };
    format!("{} (status {status})", text.to_string_lossy())
}

/// `C = A · Bᵀ` with cublasLtMatmul on `stream` (not waited for); cuBLASLt must be loaded.
/// With `fast_accum` (`CUBLASLT_MATMUL_DESC_FAST_ACCUM`) it accumulates in the tensor cores'
/// f32 accumulators throughout, as `gemm_e4m3` does; without, cuBLASLt promotes partial sums
/// periodically (its default, slower).
///
/// # Safety
///
/// `a`, `b`, `c` must be device addresses of at least `m·k`, `n·k` e4m3 and `m·n` bf16
/// elements that stay allocated, and unused by other streams, until `stream` has run the
/// product.
pub unsafe fn launch_cublaslt(
    stream: sys::cudaStream_t,
    (a, b, c): (*const F8E4M3, *const F8E4M3, *mut choreo::bf16),
    (m, n, k): (usize, usize, usize),
    fast_accum: bool,
) -> Result<(), String> {
    let dims = (i32::try_from(m), i32::try_from(n), i32::try_from(k));
    let (Ok(m), Ok(n), Ok(k)) = dims else {
        return Err(format!("cuBLASLt: {m}x{n}x{k} does not fit in int"));
    };
    #[cfg(choreo_bench_kernels)]
    {
        // SAFETY: the caller guarantees the sizes and lifetimes.
        let status = unsafe {
            ffi::gemm_cublaslt_fp8(
                stream,
                a.cast(),
                b.cast(),
                c.cast(),
                m,
                n,
                k,
                i32::from(fast_accum),
            )
        };
        if status != 0 { Err(format!("cuBLASLt fp8: {}", lt_message(status))) } else { Ok(()) }
    }
    #[cfg(not(choreo_bench_kernels))]
    {
        let _ = (stream, a, b, c, m, n, k, fast_accum);
        Err("the GEMM kernels were not compiled (stub build without nvcc)".into())
    }
}

/// One cuBLASLt product `c = a · bᵀ` on `s` on choreo tensors, not waited for: the buffers'
/// tracking orders it after earlier work on them and later work after it, as a generated
/// wrapper does. Shapes that do not make a product are refused.
pub fn cublaslt(
    s: &Stream,
    (a, b, c): (&DeviceTensor<F8E4M3, 2>, &DeviceTensor<F8E4M3, 2>, &mut DeviceTensor<bf16, 2>),
    fast_accum: bool,
) -> Result<(), String> {
    let [m, k] = a.shape();
    let [n, kb] = b.shape();
    if kb != k || c.shape() != [m, n] {
        return Err(format!(
            "cuBLASLt: shapes A {:?}, B {:?}, C {:?} do not make a product",
            a.shape(),
            b.shape(),
            c.shape()
        ));
    }
    let text = |e: choreo::Error| format!("cuBLASLt: {e}");
    let pa = a.buffer().device_ptr_for_read(s).map_err(text)?;
    let pb = b.buffer().device_ptr_for_read(s).map_err(text)?;
    let pc = c.buffer_mut().device_ptr_for_write(s).map_err(text)?;
    // SAFETY: the tensors hold m·k, n·k and m·n elements (shapes checked above) and outlive
    // the product: their buffers are told of this read and write on `s` below and defer frees
    // and other streams' accesses past it.
    unsafe { launch_cublaslt(s.as_raw(), (pa, pb, pc), (m, n, k), fast_accum) }?;
    a.buffer().record_read(s).map_err(text)?;
    b.buffer().record_read(s).map_err(text)?;
    c.buffer_mut().record_write(s).map_err(text)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_inputs_are_small_integers_with_exact_sums() {
        let (k, a) = (8192, exact_matrix(2, 8192, 3));
        let b = exact_matrix(2, 8192, 4);
        assert!(values(&a).iter().all(|v| v.fract() == 0.0 && v.abs() <= 4.0));
        let va = values(&a);
        assert!(va.contains(&-4.0) && va.contains(&4.0));
        // A correct C, built from the f64 sums, passes bit for bit; one ulp off fails.
        let mut c: Vec<u16> = (0..4)
            .map(|x| {
                OUTPUT
                    .bits(gemm::reference_values(&values(&a), &values(&b), k, x / 2, x % 2) as f32)
            })
            .collect();
        let all = || (0..2).flat_map(|i| (0..2).map(move |j| (i, j)));
        assert!(check_points("c", (&a, &b, &c), (2, k), all(), true).is_ok());
        c[3] ^= 1;
        let err = check_points("c", (&a, &b, &c), (2, k), all(), true).unwrap_err();
        assert!(err.contains("C[1][1]"), "{err}");
    }

    #[test]
    fn random_inputs_are_e4m3_values_in_range() {
        let v = values(&random_matrix(64, 64, 5));
        assert!(v.iter().all(|x| (-1.0..=1.0).contains(x)));
        // Rounded to e4m3: at most 3 mantissa bits.
        assert!(v.iter().all(|&x| F8E4M3::from_f32(x).to_f32() == x));
        let distinct: std::collections::BTreeSet<u32> = v.iter().map(|x| x.to_bits()).collect();
        assert!(distinct.len() > 50, "only {} distinct values", distinct.len());
    }
}
