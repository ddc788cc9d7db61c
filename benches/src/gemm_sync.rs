//! The hand-written twin of the Choreo mma.sync GEMM (`kernels/gemm_sync_hand.cu`; the Choreo
//! side is `kernels/gemm_sync.co`), as the `gemm-sync` section of `choreo-bench gpu` and its GPU
//! test use it: `C[M, N] = A[M, K] · B[N, K]ᵀ`, f16, row-major, f32 accumulation, 128 x 128 x 32
//! block tiles of 4 warps, ldmatrix + mma.sync m16n8k16 (an sm_80-style code path).

use choreo::sys;

use crate::gemm::DeviceMatrix;

/// A version of the hand-written kernel (the `variant` codes of `gemm_sync_hand`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hand {
    /// The twin of the generated code: cp.async double buffering, as the compiler lowers
    /// `dma.copy.async` of f16 rows (16-byte `cp.async.cg` per lane).
    Twin,
    /// The same with synchronous 16-byte loads and stores instead of cp.async (what the
    /// compiler emitted before it issued cp.async for 2-byte elements; shown for what the
    /// asynchronous copies gain).
    SyncCopies,
}

impl Hand {
    /// Both versions.
    pub const ALL: [Hand; 2] = [Hand::Twin, Hand::SyncCopies];

    /// The variant code of the C entry.
    pub fn code(self) -> i32 {
        match self {
            Hand::Twin => 1,
            Hand::SyncCopies => 0,
        }
    }

    /// The name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Hand::Twin => "gemm_sync_hand (twin: cp.async)",
            Hand::SyncCopies => "gemm_sync_hand synchronous copies",
        }
    }
}

#[cfg(choreo_bench_kernels)]
mod ffi {
    use std::ffi::{c_char, c_void};

    use choreo::sys::cudaStream_t;

    unsafe extern "C" {
        pub fn gemm_sync_hand(
            s: cudaStream_t,
            variant: i32,
            a: *const c_void,
            b: *const c_void,
            c: *mut c_void,
            m: i32,
            n: i32,
            k: i32,
        ) -> i32;
        pub fn gemm_sync_hand_error(code: i32) -> *const c_char;
    }
}

/// One product on `stream` with the hand-written kernel (not waited for).
///
/// # Safety
///
/// `a`, `b`, `c` must hold at least `m·k`, `n·k`, `m·n` f16 elements and live until the
/// stream has run the kernel.
pub unsafe fn launch_hand(
    stream: sys::cudaStream_t,
    hand: Hand,
    (a, b, c): (&DeviceMatrix, &DeviceMatrix, &DeviceMatrix),
    (m, n, k): (usize, usize, usize),
) -> Result<(), String> {
    let fits = i32::try_from(m.max(n).max(k)).is_ok();
    if !fits || a.len() < m * k || b.len() < n * k || c.len() < m * n {
        return Err(format!("matrices too small for {m}x{n}x{k}"));
    }
    #[cfg(choreo_bench_kernels)]
    {
        // SAFETY: sizes checked above; the caller keeps the matrices alive.
        let status = unsafe {
            ffi::gemm_sync_hand(
                stream,
                hand.code(),
                a.ptr(),
                b.ptr(),
                c.ptr(),
                m as i32,
                n as i32,
                k as i32,
            )
        };
        if status == 0 {
            return Ok(());
        }
        // SAFETY: a static string or null.
        let text = unsafe { ffi::gemm_sync_hand_error(status) };
        if !text.is_null() {
            // SAFETY: NUL-terminated, static.
            let text = unsafe { std::ffi::CStr::from_ptr(text) };
            return Err(format!("{}: {}", hand.name(), text.to_string_lossy()));
        }
        Err(match choreo::check_cuda(sys::cudaError_t(status), "gemm_sync_hand") {
            Err(error) => format!("{}: {error}", hand.name()),
            Ok(()) => format!("{}: status {status}", hand.name()),
        })
    }
    #[cfg(not(choreo_bench_kernels))]
    {
        let _ = (stream, hand);
        Err("the GEMM kernels were not compiled (stub build without nvcc)".into())
    }
}
