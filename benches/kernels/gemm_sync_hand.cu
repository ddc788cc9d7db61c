// The hand-written twin of the Choreo mma.sync GEMM `gemm_sync_f16` (kernels/gemm.co) for the
// `gemm-sync` section of `choreo-bench gpu`: the same algorithm, written as clean CUDA with
// inline PTX (ldmatrix, mma.sync, cp.async), an sm_80-style code path (no WGMMA, no TMA), built
// for sm_90a with the Choreo kernels.
//
//   C[M, N] = A[M, K] · B[N, K]ᵀ   f16, all row-major (A and B K-major), f32 accumulation
//
// - one block of 4 warps (2 x 2) per 128 x 128 tile of C; grid (M / 128, N / 128);
// - K in steps of 32; two slots of shared tiles A [128, 32] and B [128, 32], rows padded to 40
//   elements (80 bytes: the 8 row addresses of an ldmatrix fall in 8 different 16-byte bank
//   groups); warp w copies rows 32w .. 32w + 31 of both tiles, 16 bytes per lane per copy;
// - each warp computes 64 x 64 of the tile: 4 x 8 accumulators of m16n8k16 (f16 x f16 -> f32);
//   per k16 step it loads 4 A fragments (ldmatrix.x4) and, for each of 8 columns, one B
//   fragment (ldmatrix.x2) used by 4 mma.sync;
// - step k copies the tiles of step k + 1 into the other slot, computes on its slot, then one
//   block barrier.
//
// Variants (the `variant` argument of gemm_sync_hand):
//   1  the twin: the copies with cp.async (16 bytes, .cg) committed as one group and waited for
//      (cp.async.wait_group 0) after the compute — the double buffering `dma.copy.async` asks
//      for, and what the compiler emits for rows of f16 (16-byte cp.async per lane);
//   0  the same with synchronous 16-byte loads and stores issued before the step's compute
//      (what the compiler emitted before it used cp.async for 2-byte elements; kept to show
//      what the asynchronous copies gain).
// Every entry returns 0, a cudaError_t, or a negative code explained by gemm_sync_hand_error.

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kTile = 128;    // block tile, M and N
constexpr int kStep = 32;     // block tile, K
constexpr int kPitch = 40;    // shared row pitch, elements
constexpr int kThreads = 128;
constexpr int kSlotElems = kTile * kPitch;
constexpr int kSharedBytes = 2 * 2 * kSlotElems * static_cast<int>(sizeof(__half));  // 40 KiB

constexpr int kBadShape = -1;

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const __half* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row))
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x2(std::uint32_t (&r)[2], const __half* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_addr(row))
               : "memory");
}

// d += a · b, m16n8k16, f16 x f16 -> f32.
__device__ __forceinline__ void mma_16816(float (&d)[4], const std::uint32_t (&a)[4],
                                          const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// Warp `warp`'s share of step `step`'s tiles: rows 32 warp .. + 31 of the A tile (rows of a
// from `bm` 128) and of the B tile, into slot `slot`; lane l copies 16-byte chunks e = l, l + 32,
// l + 64, l + 96 (row e / 4, columns 8 (e % 4) .. + 7).
template <bool Async>
__device__ __forceinline__ void copy_step(__half* sa, __half* sb, const __half* a, const __half* b,
                                          int bm, int bn, int warp, int lane, int step, int slot,
                                          int k) {
#pragma unroll
  for (int e = lane; e < 128; e += 32) {
    const int row = warp * 32 + e / 4, col = (e % 4) * 8;
    __half* da = sa + slot * kSlotElems + row * kPitch + col;
    __half* db = sb + slot * kSlotElems + row * kPitch + col;
    const __half* ga = a + static_cast<long long>(bm * kTile + row) * k + step * kStep + col;
    const __half* gb = b + static_cast<long long>(bn * kTile + row) * k + step * kStep + col;
    if constexpr (Async) {
      cp_async16(da, ga);
      cp_async16(db, gb);
    } else {
      *reinterpret_cast<uint4*>(da) = *reinterpret_cast<const uint4*>(ga);
      *reinterpret_cast<uint4*>(db) = *reinterpret_cast<const uint4*>(gb);
    }
  }
  if constexpr (Async) cp_async_commit();
}

// The warp's MMAs on one slot: 2 k16 steps of 4 A fragments x 8 B fragments.
__device__ __forceinline__ void compute_step(float (&acc)[4][8][4], const __half* sa,
                                             const __half* sb, int wm, int wn, int lane) {
  const int r8 = lane & 7;
  const int ia = (lane >> 3) & 3;  // ldmatrix.x4 matrix of this lane's address
  const int ib = (lane >> 3) & 1;  // ldmatrix.x2 matrix
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) {
    std::uint32_t fa[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // Matrices 0..3: rows 0-7 / 8-15 of k 0-7, then of k 8-15.
      const __half* p = sa + (wm * 64 + i * 16 + (ia % 2) * 8 + r8) * kPitch + kk * 16 + (ia / 2) * 8;
      ldmatrix_x4(fa[i], p);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      std::uint32_t fb[2];
      ldmatrix_x2(fb, sb + (wn * 64 + j * 8 + r8) * kPitch + kk * 16 + ib * 8);
#pragma unroll
      for (int i = 0; i < 4; ++i) mma_16816(acc[i][j], fa[i], fb);
    }
  }
}

template <bool Async>
__global__ void __launch_bounds__(kThreads) gemm_sync_kernel(const __half* __restrict__ a,
                                                             const __half* __restrict__ b,
                                                             __half* __restrict__ c, int n, int k) {
  extern __shared__ __align__(128) unsigned char smem[];
  __half* sa = reinterpret_cast<__half*>(smem);
  __half* sb = sa + 2 * kSlotElems;
  const int bm = blockIdx.x, bn = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / 2, wn = warp % 2;

  float acc[4][8][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

  const int steps = k / kStep;
  copy_step<Async>(sa, sb, a, b, bm, bn, warp, lane, 0, 0, k);
  if constexpr (Async) cp_async_wait_all();
  __syncthreads();
  for (int step = 0; step + 1 < steps; ++step) {
    const int slot = step % 2;
    copy_step<Async>(sa, sb, a, b, bm, bn, warp, lane, step + 1, slot ^ 1, k);
    compute_step(acc, sa + slot * kSlotElems, sb + slot * kSlotElems, wm, wn, lane);
    if constexpr (Async) cp_async_wait_all();
    __syncthreads();
  }
  const int last = (steps - 1) % 2;
  compute_step(acc, sa + last * kSlotElems, sb + last * kSlotElems, wm, wn, lane);

  // Accumulator element r of lane l: row l / 4 + 8 (r / 2), column 2 (l % 4) + r % 2 of its
  // 16 x 8 tile; the two columns of a row are stored together.
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = bm * kTile + wm * 64 + i * 16 + (lane >> 2) + 8 * h;
        const int col = bn * kTile + wn * 64 + j * 8 + 2 * (lane & 3);
        *reinterpret_cast<__half2*>(c + static_cast<long long>(row) * n + col) =
            __floats2half2_rn(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
      }
}

template <bool Async>
int launch(cudaStream_t s, const void* a, const void* b, void* c, int m, int n, int k) {
  auto kernel = gemm_sync_kernel<Async>;
  cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes);
  if (e != cudaSuccess) return e;
  kernel<<<dim3(m / kTile, n / kTile), kThreads, kSharedBytes, s>>>(
      static_cast<const __half*>(a), static_cast<const __half*>(b), static_cast<__half*>(c), n, k);
  return cudaGetLastError();
}

}  // namespace

extern "C" {

// C = A · Bᵀ (f16, f32 accumulation): A [m, k], B [n, k], C [m, n], row-major, on stream `s`,
// with variant `variant` (0 the twin, 1 cp.async; see above). m % 128 == 0, n % 128 == 0,
// k % 32 == 0 and k > 0, and 16-byte aligned matrices. Not waited for.
int gemm_sync_hand(cudaStream_t s, int variant, const void* a, const void* b, void* c, int m,
                   int n, int k) {
  if (m <= 0 || n <= 0 || k <= 0 || m % kTile != 0 || n % kTile != 0 || k % kStep != 0)
    return kBadShape;
  if ((reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(b) |
       reinterpret_cast<std::uintptr_t>(c)) % 16 != 0)
    return kBadShape;
  switch (variant) {
    case 0:
      return launch<false>(s, a, b, c, m, n, k);
    case 1:
      return launch<true>(s, a, b, c, m, n, k);
    default:
      return cudaErrorInvalidValue;
  }
}

// A message for a negative code of gemm_sync_hand (nullptr for other codes).
const char* gemm_sync_hand_error(int code) {
  return code == kBadShape ? "unsupported shape (M % 128, N % 128 and K % 32 must be 0, K > 0, "
                             "matrices 16-byte aligned)"
                           : nullptr;
}

}  // extern "C"
