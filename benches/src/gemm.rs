//! The hand-written Hopper GEMM (`kernels/gemm_wgmma.cu`, on the compiler's WGMMA library) and
//! cuBLAS loaded at run time, as the `gemm` section of `choreo-bench gpu` and its GPU test
//! (`tests/gemm_gpu.rs`) use them: device matrices of 16-bit elements, the launches, a float64
//! host reference and the comparisons.
//!
//! `C[M, N] = A[M, K] · B[N, K]ᵀ`, all row-major, f32 accumulation, C in the input type.

use std::ffi::c_void;

use choreo::{bf16, f16, sys};

/// The element type of A, B and C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// IEEE half precision.
    F16,
    /// bfloat16.
    Bf16,
}

impl Dtype {
    /// Both types.
    pub const ALL: [Dtype; 2] = [Dtype::F16, Dtype::Bf16];

    /// The code of the C entries (0 f16, 1 bf16).
    pub fn code(self) -> i32 {
        match self {
            Dtype::F16 => 0,
            Dtype::Bf16 => 1,
        }
    }

    /// The name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
        }
    }

    /// `value` rounded to this type (to nearest even), as bits.
    pub fn bits(self, value: f32) -> u16 {
        match self {
            Dtype::F16 => f16::from_f32(value).to_bits(),
            Dtype::Bf16 => bf16::from_f32(value).to_bits(),
        }
    }

    /// The value of `bits`.
    pub fn value(self, bits: u16) -> f32 {
        match self {
            Dtype::F16 => f16::from_bits(bits).to_f32(),
            Dtype::Bf16 => bf16::from_bits(bits).to_f32(),
        }
    }

    /// The relative tolerance of one output element against an exact reference: a few units
    /// in the last place of the output type (f32 accumulation errors are far below).
    pub fn tolerance(self) -> f64 {
        match self {
            Dtype::F16 => 2e-3,
            Dtype::Bf16 => 1.6e-2,
        }
    }
}

/// A version of the hand-written kernel (the codes are `kernels/gemm_wgmma.cu`'s
/// `gemm_wgmma` variant codes). The baseline: a 4-stage ring, groups of 16 M tiles in the
/// persistent schedule, one k-tile of WGMMAs in flight per consumer (wait_group 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The baseline, one block per 128 x 256 tile.
    Single,
    /// The baseline in clusters of two blocks on M-adjacent tiles sharing each B tile by TMA
    /// multicast (M a multiple of 256).
    Cluster2,
    /// As `Single` with wait_group 0: no WGMMAs in flight across k-tiles (the diagnostic of the
    /// WGMMA pipelining).
    Wait0,
    /// As `Single` with groups of 8 M tiles.
    Group8,
    /// As `Cluster2` with groups of 8 cluster units (16 M tiles).
    Cluster2Group8,
    /// As `Single` with a 3-stage ring.
    Stages3,
    /// The Choreo GEMM (`kernels/gemm.co`) through its generated safe wrapper: the algorithm of
    /// `Wait0` written in Choreo. Not a version of the hand-written kernel: the `gemm` section
    /// runs it with choreo tensors, and [`launch_ours`] refuses it.
    Choreo,
    /// The Choreo GEMM with the TMA-store epilogue (`gemm_f16_tma_store`,
    /// `gemm_bf16_tma_store` of `kernels/gemm.co`): the accumulators staged in a shared C tile
    /// and stored by one TMA bulk tensor store per tile. Run as [`Variant::Choreo`] is.
    ChoreoTma,
}

impl Variant {
    /// Every version of the hand-written kernel, safest first (the order in which the `gemm`
    /// section checks them; it checks [`Variant::CHOREO`] first).
    pub const ALL: [Variant; 6] = [
        Variant::Single,
        Variant::Wait0,
        Variant::Group8,
        Variant::Stages3,
        Variant::Cluster2,
        Variant::Cluster2Group8,
    ];

    /// The Choreo GEMMs (generated code, run through their wrappers), in the order the `gemm`
    /// section checks them.
    pub const CHOREO: [Variant; 2] = [Variant::Choreo, Variant::ChoreoTma];

    /// Whether it is generated from Choreo (not a version of the hand-written kernel).
    pub fn is_choreo(self) -> bool {
        Variant::CHOREO.contains(&self)
    }

    /// The variant code of the C entry.
    pub fn code(self) -> i32 {
        match self {
            Variant::Single => 0,
            Variant::Cluster2 => 1,
            Variant::Wait0 => 2,
            Variant::Group8 => 3,
            Variant::Cluster2Group8 => 4,
            Variant::Stages3 => 5,
            Variant::Choreo | Variant::ChoreoTma => -1,
        }
    }

    /// Blocks per cluster.
    pub fn cluster(self) -> i32 {
        match self {
            Variant::Cluster2 | Variant::Cluster2Group8 => 2,
            _ => 1,
        }
    }

    /// The short name (`CHOREO_BENCH_GEMM_VARIANTS` takes a comma-separated list of them).
    pub fn key(self) -> &'static str {
        match self {
            Variant::Single => "single",
            Variant::Cluster2 => "cluster2",
            Variant::Wait0 => "wait0",
            Variant::Group8 => "group8",
            Variant::Cluster2Group8 => "cluster2-group8",
            Variant::Stages3 => "stages3",
            Variant::Choreo => "choreo",
            Variant::ChoreoTma => "choreo-tma",
        }
    }

    /// The variant of short name `key`.
    pub fn from_key(key: &str) -> Option<Variant> {
        Variant::ALL.into_iter().chain(Variant::CHOREO).find(|v| v.key() == key)
    }

    /// The name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Single => "gemm_wgmma",
            Variant::Cluster2 => "gemm_wgmma cluster 2 (B multicast)",
            Variant::Wait0 => "gemm_wgmma wait_group 0",
            Variant::Group8 => "gemm_wgmma group 8",
            Variant::Cluster2Group8 => "gemm_wgmma cluster 2 (B multicast) group 8",
            Variant::Stages3 => "gemm_wgmma 3 stages",
            Variant::Choreo => "Choreo gemm.co",
            Variant::ChoreoTma => "Choreo gemm.co TMA-store epilogue",
        }
    }
}

/// The C entries of `kernels/gemm_wgmma.cu`. Each returns 0, a `cudaError_t` or a negative
/// code explained by `gemm_wgmma_error`.
#[cfg(choreo_bench_kernels)]
mod ffi {
    use std::ffi::{c_char, c_void};

    use choreo::sys::cudaStream_t;

    unsafe extern "C" {
        pub fn gemm_wgmma(
            s: cudaStream_t,
            dtype: i32,
            variant: i32,
            a: *const c_void,
            b: *const c_void,
            c: *mut c_void,
            m: i32,
            n: i32,
            k: i32,
        ) -> i32;
        pub fn gemm_wgmma_error(code: i32) -> *const c_char;
        pub fn wgmma_unit_case(which: i32, fields: *mut i32) -> i32;
        pub fn wgmma_unit_run(which: i32, a: *const c_void, b: *const c_void, d: *mut f32) -> i32;
        pub fn gemm_cublas_load(version: *mut i32) -> i32;
        pub fn gemm_cublas(
            s: cudaStream_t,
            dtype: i32,
            a: *const c_void,
            b: *const c_void,
            c: *mut c_void,
            m: i32,
            n: i32,
            k: i32,
        ) -> i32;
    }
}

/// Whether the kernels were compiled (nvcc was found at build time).
pub fn built() -> bool {
    cfg!(choreo_bench_kernels)
}

#[cfg(not(choreo_bench_kernels))]
fn not_built() -> String {
    "the GEMM kernels were not compiled (stub build without nvcc)".into()
}

/// The message of a status of the entries.
fn status_message(status: i32, what: &str) -> String {
    #[cfg(choreo_bench_kernels)]
    {
        // SAFETY: returns a static string or null.
        let text = unsafe { ffi::gemm_wgmma_error(status) };
        if !text.is_null() {
            // SAFETY: a NUL-terminated static string.
            let text = unsafe { std::ffi::CStr::from_ptr(text) };
            return format!("{what}: {}", text.to_string_lossy());
        }
    }
    match choreo::check_cuda(sys::cudaError_t(status), "gemm") {
        Err(error) => format!("{what}: {error}"),
        Ok(()) => format!("{what}: status {status}"),
    }
}

/// A `cudaMalloc` matrix of 16-bit elements, freed (after a device synchronisation) on drop.
pub struct DeviceMatrix {
    ptr: *mut c_void,
    elems: usize,
}

impl DeviceMatrix {
    /// `elems` uninitialised elements.
    pub fn new(elems: usize) -> Result<DeviceMatrix, String> {
        let mut ptr = std::ptr::null_mut();
        // SAFETY: `ptr` is a writable slot for the returned device address.
        let status = unsafe { sys::cudaMalloc(&mut ptr, elems * 2) }.0;
        if status != 0 {
            return Err(status_message(status, "cudaMalloc"));
        }
        Ok(DeviceMatrix { ptr, elems })
    }

    /// A matrix holding `data`.
    pub fn from_host(data: &[u16]) -> Result<DeviceMatrix, String> {
        let matrix = DeviceMatrix::new(data.len())?;
        // SAFETY: the destination is this allocation of `2 · elems` bytes, the source a host
        // slice of the same size; cudaMemcpy returns once the copy is done.
        let status = unsafe {
            sys::cudaMemcpy(
                matrix.ptr,
                data.as_ptr().cast(),
                data.len() * 2,
                sys::cudaMemcpyKind::cudaMemcpyHostToDevice,
            )
        }
        .0;
        if status != 0 {
            return Err(status_message(status, "cudaMemcpy to the device"));
        }
        synchronize()?;
        Ok(matrix)
    }

    /// The device address.
    pub fn ptr(&self) -> *mut c_void {
        self.ptr
    }

    /// The number of 16-bit elements.
    pub fn len(&self) -> usize {
        self.elems
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.elems == 0
    }

    /// The contents, after all work on the device.
    pub fn download(&self) -> Result<Vec<u16>, String> {
        synchronize()?;
        let mut data = vec![0u16; self.elems];
        // SAFETY: the source is this allocation; the destination a host vector of the same
        // size.
        let status = unsafe {
            sys::cudaMemcpy(
                data.as_mut_ptr().cast(),
                self.ptr,
                self.elems * 2,
                sys::cudaMemcpyKind::cudaMemcpyDeviceToHost,
            )
        }
        .0;
        if status != 0 {
            return Err(status_message(status, "cudaMemcpy to the host"));
        }
        Ok(data)
    }

    /// Sets every byte to 0xFF (NaN in f16 and bf16), so a check sees every element that was
    /// not written; the device is idle afterwards.
    pub fn poison(&mut self) -> Result<(), String> {
        synchronize()?;
        // SAFETY: the range is this allocation.
        let status = unsafe { sys::cudaMemset(self.ptr, 0xFF, self.elems * 2) }.0;
        if status != 0 {
            return Err(status_message(status, "cudaMemset"));
        }
        synchronize()
    }
}

impl Drop for DeviceMatrix {
    fn drop(&mut self) {
        // SAFETY: the allocation came from cudaMalloc and is freed once, after the device has
        // finished every kernel that may use it.
        unsafe {
            let _ = sys::cudaDeviceSynchronize();
            let _ = sys::cudaFree(self.ptr);
        }
    }
}

/// Waits for all work on the current device.
pub fn synchronize() -> Result<(), String> {
    // SAFETY: no arguments.
    let status = unsafe { sys::cudaDeviceSynchronize() }.0;
    if status != 0 { Err(status_message(status, "cudaDeviceSynchronize")) } else { Ok(()) }
}

/// One product on `stream` with the hand-written kernel (not waited for).
///
/// # Safety
///
/// `a`, `b`, `c` must hold at least `m·k`, `n·k`, `m·n` elements and live until the stream has
/// run the kernel.
pub unsafe fn launch_ours(
    stream: sys::cudaStream_t,
    dtype: Dtype,
    variant: Variant,
    (a, b, c): (&DeviceMatrix, &DeviceMatrix, &DeviceMatrix),
    (m, n, k): (usize, usize, usize),
) -> Result<(), String> {
    check_sizes((a, b, c), (m, n, k))?;
    if variant.is_choreo() {
        return Err("the Choreo GEMM runs through its generated wrapper, not this entry".into());
    }
    #[cfg(choreo_bench_kernels)]
    {
        // SAFETY: sizes checked above; the caller keeps the matrices alive.
        let status = unsafe {
            ffi::gemm_wgmma(
                stream,
                dtype.code(),
                variant.code(),
                a.ptr,
                b.ptr,
                c.ptr,
                m as i32,
                n as i32,
                k as i32,
            )
        };
        if status != 0 { Err(status_message(status, "gemm_wgmma")) } else { Ok(()) }
    }
    #[cfg(not(choreo_bench_kernels))]
    {
        let _ = (stream, dtype, variant);
        Err(not_built())
    }
}

/// Loads cuBLAS (dlopen). `Ok(version)` when ready, `Err(why)` when not.
pub fn load_cublas() -> Result<i32, String> {
    #[cfg(choreo_bench_kernels)]
    {
        let mut version = 0;
        // SAFETY: `version` is a writable int.
        match unsafe { ffi::gemm_cublas_load(&mut version) } {
            0 => Ok(version),
            1 => Err("cuBLAS unavailable (libcublas.so.13 / libcublas.so not found; \
                      $CHOREO_BENCH_CUBLAS names another)"
                .into()),
            status => Err(format!("cuBLAS unavailable (cublasCreate failed: {status})")),
        }
    }
    #[cfg(not(choreo_bench_kernels))]
    Err(not_built())
}

/// The same product with cublasGemmEx (not waited for); cuBLAS must be loaded.
///
/// # Safety
///
/// As [`launch_ours`].
pub unsafe fn launch_cublas(
    stream: sys::cudaStream_t,
    dtype: Dtype,
    (a, b, c): (&DeviceMatrix, &DeviceMatrix, &DeviceMatrix),
    (m, n, k): (usize, usize, usize),
) -> Result<(), String> {
    check_sizes((a, b, c), (m, n, k))?;
    #[cfg(choreo_bench_kernels)]
    {
        // SAFETY: sizes checked above; the caller keeps the matrices alive.
        let status = unsafe {
            ffi::gemm_cublas(
                stream,
                dtype.code(),
                a.ptr,
                b.ptr,
                c.ptr,
                m as i32,
                n as i32,
                k as i32,
            )
        };
        if status != 0 {
            Err(match status {
                s if s < 0 => status_message(s, "cublasGemmEx"),
                s => format!("cublasGemmEx returned status {s}"),
            })
        } else {
            Ok(())
        }
    }
    #[cfg(not(choreo_bench_kernels))]
    {
        let _ = (stream, dtype);
        Err(not_built())
    }
}

fn check_sizes(
    (a, b, c): (&DeviceMatrix, &DeviceMatrix, &DeviceMatrix),
    (m, n, k): (usize, usize, usize),
) -> Result<(), String> {
    let fits = i32::try_from(m.max(n).max(k)).is_ok();
    if !fits || a.elems < m * k || b.elems < n * k || c.elems < m * n {
        return Err(format!("matrices too small for {m}x{n}x{k}"));
    }
    Ok(())
}

/// One case of `kernels/wgmma_unit.cu`: a single-block product D[64, N] = A[64, K] · B[N, K]ᵀ
/// through one family of WGMMA wrappers of the library.
#[derive(Clone, Copy, Debug)]
pub struct UnitCase {
    /// Its index.
    pub which: i32,
    /// Element kinds of A and B (wgmma.cuh's `Elem`: 0 f16, 1 bf16, 2 tf32, 3 e4m3, 4 e5m2,
    /// 5 s8, 6 u8).
    pub a: i32,
    /// See `a`.
    pub b: i32,
    /// Accumulator kind (0 f32, 1 f16, 2 s32).
    pub acc: i32,
    /// N.
    pub n: usize,
    /// The atom's K.
    pub atom_k: usize,
    /// Both operands MN-major (16-bit types).
    pub mn_major: bool,
    /// A from registers.
    pub rs: bool,
    /// Swizzle bytes.
    pub swizzle: usize,
    /// The product's K.
    pub k: usize,
}

impl UnitCase {
    /// A readable description.
    pub fn describe(&self) -> String {
        const ELEMS: [&str; 7] = ["f16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8"];
        const ACCS: [&str; 3] = ["f32", "f16", "s32"];
        let name = |i: i32, list: &[&'static str]| list.get(i as usize).copied().unwrap_or("?");
        format!(
            "m64n{}k{} {}.{}.{} {}{}, swizzle {}, K {}",
            self.n,
            self.atom_k,
            name(self.acc, &ACCS),
            name(self.a, &ELEMS),
            name(self.b, &ELEMS),
            if self.rs { "RS" } else { "SS" },
            if self.mn_major { " MN-major" } else { "" },
            self.swizzle,
            self.k
        )
    }

    /// The bytes of the small integer `v` (-3..=3; 0..=3 for u8) as element kind `elem`.
    pub fn encode(elem: i32, v: i32) -> Vec<u8> {
        let small = v.unsigned_abs() as usize;
        let sign = if v < 0 { 0x80 } else { 0 };
        match elem {
            0 => f16::from_f32(v as f32).to_bits().to_le_bytes().to_vec(),
            1 => bf16::from_f32(v as f32).to_bits().to_le_bytes().to_vec(),
            2 => (v as f32).to_le_bytes().to_vec(),
            3 => vec![[0x00, 0x38, 0x40, 0x44][small] | sign],
            4 => vec![[0x00, 0x3C, 0x40, 0x42][small] | sign],
            5 => vec![v as i8 as u8],
            _ => vec![small as u8],
        }
    }
}

/// Every case of `kernels/wgmma_unit.cu`.
pub fn unit_cases() -> Vec<UnitCase> {
    let mut cases = Vec::new();
    #[cfg(choreo_bench_kernels)]
    for which in 0.. {
        let mut f = [0i32; 9];
        // SAFETY: `f` has the 9 slots the entry writes.
        if unsafe { ffi::wgmma_unit_case(which, f.as_mut_ptr()) } != 0 {
            break;
        }
        cases.push(UnitCase {
            which,
            a: f[0],
            b: f[1],
            acc: f[2],
            n: f[3] as usize,
            atom_k: f[4] as usize,
            mn_major: f[5] != 0,
            rs: f[6] != 0,
            swizzle: f[7] as usize,
            k: f[8] as usize,
        });
    }
    cases
}

/// Runs `case` on the small integers `a` [64, K] and `b` [N, K] (row-major) and returns
/// D [64, N] (waits for the device).
pub fn unit_run(case: &UnitCase, a: &[i32], b: &[i32]) -> Result<Vec<f32>, String> {
    let bytes = |elem: i32, v: &[i32]| -> Vec<u8> {
        v.iter().flat_map(|&x| UnitCase::encode(elem, x)).collect()
    };
    let (ha, hb) = (bytes(case.a, a), bytes(case.b, b));
    let upload = |data: &[u8]| -> Result<DeviceMatrix, String> {
        let words: Vec<u16> = data
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c.get(1).copied().unwrap_or(0)]))
            .collect();
        DeviceMatrix::from_host(&words)
    };
    let (da, db) = (upload(&ha)?, upload(&hb)?);
    // D as floats: 2 u16 slots per element.
    let d = DeviceMatrix::new(64 * case.n * 2)?;
    #[cfg(choreo_bench_kernels)]
    {
        // SAFETY: A, B hold the case's elements (rounded up to whole u16 slots); D holds 64·N
        // floats; the entry waits for the kernel.
        let status = unsafe { ffi::wgmma_unit_run(case.which, da.ptr, db.ptr, d.ptr.cast()) };
        if status != 0 {
            return Err(status_message(status, "wgmma_unit_run"));
        }
    }
    #[cfg(not(choreo_bench_kernels))]
    {
        let _ = (&da, &db);
        return Err(not_built());
    }
    #[allow(unreachable_code)]
    Ok(d.download()?
        .chunks(2)
        .map(|w| f32::from_bits(u32::from(w[0]) | u32::from(w[1]) << 16))
        .collect())
}

/// Inputs of `rows` x `cols` random values in [-1, 1) rounded to `dtype`, as bits (a
/// deterministic xorshift stream from `seed`).
pub fn random_matrix(dtype: Dtype, rows: usize, cols: usize, seed: u64) -> Vec<u16> {
    let mut state = seed.max(1);
    (0..rows * cols)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let unit = (state >> 40) as f32 / (1u64 << 24) as f32;
            dtype.bits(2.0 * unit - 1.0)
        })
        .collect()
}

/// Inputs whose products and sums are exact in f32 for K ≤ 2^16: multiples of 1/8 in [-1, 1]
/// (exact in f16 and bf16). Every correct kernel then rounds the same exact sums: its output
/// must equal the reference bit for bit.
pub fn exact_matrix(dtype: Dtype, rows: usize, cols: usize, seed: u64) -> Vec<u16> {
    let mut state = seed.max(1);
    (0..rows * cols)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let k = (state >> 40) % 17;
            dtype.bits((k as f32 - 8.0) / 8.0)
        })
        .collect()
}

/// The float64 reference of C[i][j].
pub fn reference_at(dtype: Dtype, a: &[u16], b: &[u16], k: usize, i: usize, j: usize) -> f64 {
    let (ra, rb) = (&a[i * k..(i + 1) * k], &b[j * k..(j + 1) * k]);
    ra.iter().zip(rb).map(|(&x, &y)| f64::from(dtype.value(x)) * f64::from(dtype.value(y))).sum()
}

/// The float64 reference of C[i][j] from the inputs' values.
pub fn reference_values(a: &[f32], b: &[f32], k: usize, i: usize, j: usize) -> f64 {
    let (ra, rb) = (&a[i * k..(i + 1) * k], &b[j * k..(j + 1) * k]);
    ra.iter().zip(rb).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum()
}

/// Checks C at `points` against the float64 reference: within [`Dtype::tolerance`] of
/// max(|reference|, √K / 3) — the typical magnitude of an output for inputs uniform in
/// [-1, 1), so that elements near zero are held to the accuracy of the sum, not to a relative
/// error they cannot have — or, with `exact`, bit for bit against the reference rounded to the
/// type. Returns the largest such error seen.
pub fn check_points(
    what: &str,
    dtype: Dtype,
    (a, b, c): (&[u16], &[u16], &[u16]),
    (n, k): (usize, usize),
    points: impl IntoIterator<Item = (usize, usize)>,
    exact: bool,
) -> Result<f64, String> {
    let values = |v: &[u16]| v.iter().map(|&x| dtype.value(x)).collect::<Vec<f32>>();
    check_values(what, dtype, (&values(a), &values(b), c), (n, k), points, exact)
}

/// [`check_points`] on inputs given as their values (of any input type: the fp8 GEMM's e4m3
/// operands too); `dtype` is the type of C.
pub fn check_values(
    what: &str,
    dtype: Dtype,
    (fa, fb, c): (&[f32], &[f32], &[u16]),
    (n, k): (usize, usize),
    points: impl IntoIterator<Item = (usize, usize)>,
    exact: bool,
) -> Result<f64, String> {
    let scale = (k as f64).sqrt() / 3.0;
    let mut worst = 0f64;
    for (i, j) in points {
        let want = reference_values(fa, fb, k, i, j);
        let bits = c[i * n + j];
        let got = f64::from(dtype.value(bits));
        if exact {
            let want_bits = dtype.bits(want as f32);
            if bits != want_bits {
                return Err(format!(
                    "{what}: C[{i}][{j}] = {got} (bits {bits:#06x}), want exactly {want} (bits \
                     {want_bits:#06x})"
                ));
            }
            continue;
        }
        let relative = (got - want).abs() / want.abs().max(scale);
        if got.is_nan() || relative > dtype.tolerance() {
            return Err(format!(
                "{what}: C[{i}][{j}] = {got}, want {want} (error {relative:.3e} of max(|want|, \
                 √K/3) > {:.1e})",
                dtype.tolerance()
            ));
        }
        worst = worst.max(relative);
    }
    Ok(worst)
}

/// Rows of C checked in full, and columns, on an `m` x `n` output (first, last and a few in
/// between): the points of [`check_points`].
pub fn sample_points(m: usize, n: usize) -> Vec<(usize, usize)> {
    let pick = |extent: usize| -> Vec<usize> {
        let mut v = vec![0, 1, extent / 3 + 5, extent / 2 + 63, extent - 65, extent - 1];
        v.retain(|&x| x < extent);
        v.sort_unstable();
        v.dedup();
        v
    };
    let mut points = Vec::new();
    for i in pick(m) {
        points.extend((0..n).map(|j| (i, j)));
    }
    for j in pick(n) {
        points.extend((0..m).map(|i| (i, j)));
    }
    points
}

/// How two outputs differ element by element.
#[derive(Clone, Copy, Debug)]
pub struct Comparison {
    /// The largest |x − y| over the root mean square of y.
    pub max_error_over_rms: f64,
    /// The largest |x − y| / max(|y|, rms of y).
    pub max_relative: f64,
    /// Elements that differ by more than the type's tolerance (relative to max(|y|, rms)), or
    /// are NaN in either.
    pub wrong: usize,
}

/// Compares `ours` with `theirs` (same type and size).
pub fn compare(dtype: Dtype, ours: &[u16], theirs: &[u16]) -> Comparison {
    let values = |v: &[u16]| v.iter().map(|&x| f64::from(dtype.value(x))).collect::<Vec<_>>();
    let (x, y) = (values(ours), values(theirs));
    let rms = (y.iter().map(|v| v * v).sum::<f64>() / y.len().max(1) as f64).sqrt().max(1e-30);
    let mut out = Comparison { max_error_over_rms: 0.0, max_relative: 0.0, wrong: 0 };
    for (a, b) in x.iter().zip(&y) {
        if a.is_nan() || b.is_nan() {
            out.wrong += 1;
            out.max_error_over_rms = f64::INFINITY;
            out.max_relative = f64::INFINITY;
            continue;
        }
        let error = (a - b).abs();
        let relative = error / b.abs().max(rms);
        out.max_error_over_rms = out.max_error_over_rms.max(error / rms);
        out.max_relative = out.max_relative.max(relative);
        if relative > 2.0 * dtype.tolerance() {
            out.wrong += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_inputs_give_exact_sums() {
        let (m, n, k) = (2, 3, 4096);
        let a = exact_matrix(Dtype::Bf16, m, k, 1);
        let b = exact_matrix(Dtype::Bf16, n, k, 2);
        for i in 0..m {
            for j in 0..n {
                let want = reference_at(Dtype::Bf16, &a, &b, k, i, j);
                // Multiples of 1/64 below 2^12: exact in f32.
                assert_eq!(f64::from(want as f32), want);
                assert_eq!((want * 64.0).fract(), 0.0);
            }
        }
    }

    #[test]
    fn check_points_catches_a_wrong_element() {
        let (m, n, k) = (4, 4, 8);
        let a = exact_matrix(Dtype::F16, m, k, 3);
        let b = exact_matrix(Dtype::F16, n, k, 4);
        let mut c: Vec<u16> = (0..m * n)
            .map(|x| Dtype::F16.bits(reference_at(Dtype::F16, &a, &b, k, x / n, x % n) as f32))
            .collect();
        let all = || (0..m).flat_map(|i| (0..n).map(move |j| (i, j)));
        assert!(check_points("c", Dtype::F16, (&a, &b, &c), (n, k), all(), true).is_ok());
        c[5] = Dtype::F16.bits(Dtype::F16.value(c[5]) + 1.0);
        assert!(check_points("c", Dtype::F16, (&a, &b, &c), (n, k), all(), true).is_err());
        assert!(check_points("c", Dtype::F16, (&a, &b, &c), (n, k), all(), false).is_err());
        let cmp = compare(Dtype::F16, &c, &c);
        assert_eq!((cmp.wrong, cmp.max_relative), (0, 0.0));
    }

    #[test]
    fn sample_points_cover_edges() {
        let points = sample_points(256, 512);
        assert!(points.contains(&(255, 511)) && points.contains(&(0, 0)));
        assert!(points.iter().all(|&(i, j)| i < 256 && j < 512));
    }
}
