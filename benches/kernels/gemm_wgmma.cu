// The hand-written Hopper GEMM of the `gemm` section of `choreo-bench gpu` (sm_90a), built on
// the WGMMA device library that the compiler emits (choreo-compiler/src/emit/cuda/wgmma.cuh):
// the shape of the code the compiler should generate for a tier-3 GEMM.
//
//   C[M, N] = A[M, K] · B[N, K]ᵀ   (A row-major, B row-major [N, K] = K-major "TN", f32
//                                   accumulation, C row-major in the input type: f16 or bf16)
//
// - persistent: one block of 384 threads per SM walks the 128 x 256 output tiles (grouped
//   along M for L2 reuse);
// - warp-specialised: warpgroup 0 is the producer (setmaxnreg.dec to 40 registers; one thread
//   issues the TMA loads), warpgroups 1 and 2 are consumers (setmaxnreg.inc to 232), each
//   computing 64 x 256 of the tile with m64n256k16 WGMMAs (128 f32 accumulators per thread);
// - a 4-stage ring of 128B-swizzled TMA tiles (A [128, 64] + B [256, 64] = 48 KiB per stage)
//   with `full` (TMA bytes landed) and `empty` (both consumers done reading) mbarriers; each
//   consumer keeps one k-tile of WGMMAs in flight (wait_group 1) and releases the slot before;
// - tensor maps encoded on the host with the runtime header's `choreo::tma::encode_tiled`
//   (cuTensorMapEncodeTiled from cudaGetDriverEntryPoint(ByVersion), no -lcuda), which the
//   compiler's TMA host code calls too.
//
// cuBLAS (cublasGemmEx) is loaded at run time with dlopen for the comparison; nothing from it
// is linked. Every entry returns 0 on success, a cudaError_t, or a negative code of its own.

#include <cuda.h>  // CUtensorMap and its enums (types only)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>

#include "choreo.h"  // choreo::tma::encode_tiled (host)

#define CHOREO_WGMMA_NS choreo_bench_wgmma
#include "wgmma.cuh"

namespace wg = choreo_bench_wgmma;

namespace {

constexpr int kBM = 128, kBN = 256, kBK = 64;
constexpr int kConsumers = 2;
constexpr int kThreads = 128 * (kConsumers + 1);

// Shared memory: the A and B rings (each slot 1024-byte aligned for the 128B swizzle), then the
// mbarriers; plus 1024 bytes of slack to align the dynamic shared memory.
constexpr int kTileABytes = kBM * kBK * 2;  // 16 KiB
constexpr int kTileBBytes = kBN * kBK * 2;  // 32 KiB
constexpr int smem_bytes(int stages) {
  return stages * (kTileABytes + kTileBBytes) + 2 * stages * 8 + 1024;
}

// Negative codes of the entries (besides cudaError_t values).
constexpr int kBadShape = -2;     // M % 128, N % 256 or K % 64 not 0, or a size not positive
constexpr int kBadTensorMap = -4;  // encode_tiled rejected a map (message: map_error)
constexpr int kNoCublas = -5;     // cuBLAS not loaded

// ---- device helpers: mbarriers and TMA (tier 3 §10.1, §10.2) ------------------------------

__device__ __forceinline__ std::uint32_t sa(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(std::uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(sa(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(sa(bar))
               : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   sa(bar)),
               "r"(bytes)
               : "memory");
}

// Arrives on the mbarrier at the same offset as `bar` in block `rank` of the cluster.
__device__ __forceinline__ void mbar_arrive_remote(std::uint64_t* bar, unsigned rank) {
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}\n" ::"r"(sa(bar)),
      "r"(rank)
      : "memory");
}

// Returns once the phase of parity `parity` of `bar` has completed; `Cluster`: acquire at
// cluster scope (the arrivals include other blocks').
template <bool Cluster = false>
__device__ __forceinline__ void mbar_wait(std::uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  do {
    if constexpr (Cluster) {
      asm volatile(
          "{\n.reg .pred p;\n"
          "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
          "selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(sa(bar)), "r"(parity)
          : "memory");
    } else {
      asm volatile(
          "{\n.reg .pred p;\n"
          "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n"
          "selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(sa(bar)), "r"(parity)
          : "memory");
    }
  } while (!done);
}

// All threads of all blocks of the cluster (release / acquire).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

__device__ __forceinline__ unsigned cluster_rank() {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

// A 2-D TMA load multicast to the blocks of `mask`: the box lands at the offset of `dst` in
// each and completes the mbarrier at the offset of `bar` in each.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* map, int c0,
                                                      int c1, std::uint64_t* bar,
                                                      unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(sa(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(sa(bar)), "h"(mask)
      : "memory");
}

// A 2-D TMA load of the box at (c0 innermost, c1) into `dst`, completing `bar`'s transaction.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1,
                                            std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(sa(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(sa(bar))
      : "memory");
}

template <int Regs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Regs));
}
template <int Regs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Regs));
}

// The (m, n) tile of linear tile index `t` of the persistent schedule: groups of GroupM tiles
// along M, each walked M-fastest, then along N.
template <int kGroupM>
__device__ __forceinline__ void tile_of(int t, int tiles_m, int tiles_n, int& tm, int& tn) {
  const int per_group = kGroupM * tiles_n;
  const int group = t / per_group;
  const int first_m = group * kGroupM;
  const int rows = min(kGroupM, tiles_m - first_m);
  const int in_group = t - group * per_group;
  tm = first_m + in_group % rows;
  tn = in_group / rows;
}

template <class T>
struct Pack;
template <>
struct Pack<__half> {
  using Op = wg::F32F16F16;
  __device__ static __half2 two(float a, float b) { return __floats2half2_rn(a, b); }
  using Two = __half2;
};
template <>
struct Pack<__nv_bfloat16> {
  using Op = wg::F32BF16BF16;
  __device__ static __nv_bfloat162 two(float a, float b) { return __floats2bfloat162_rn(a, b); }
  using Two = __nv_bfloat162;
};

// `Cluster` = 1: one block per tile. `Cluster` = 2: clusters of 2 blocks along x computing the
// two M-adjacent tiles (2p, 2p + 1) of one N tile; each block loads its A tile and half of the
// shared B tile (128 of its 256 rows), multicast to both, so L2 serves 2/3 of the bytes. Each
// block's `full` barrier then waits for its A plus both B halves; its `empty` barrier counts
// the consumers of both blocks (a slot is refilled in both at once).
// Tuning knobs of the variants (the baseline: Stages 4, GroupM 16, WaitDepth 1):
// - `Stages`: slots of the TMA ring (48 KiB each; at most 4 fit in 227 KiB);
// - `GroupM`: tiles walked down M before moving along N (L2 reuse of the B tiles);
// - `WaitDepth`: k-tiles of WGMMAs each consumer keeps in flight (wgmma.wait_group WaitDepth
//   after each commit; 0 = wait for every k-tile, the diagnostic of the pipelining).
template <class T, int Cluster, int kStages, int kGroupM, int WaitDepth>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_wgmma_kernel(const __grid_constant__ CUtensorMap map_a,
                      const __grid_constant__ CUtensorMap map_b, T* __restrict__ c, int m, int n,
                      int k) {
#if CHOREO_WGMMA_SM90A
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (sa(smem_raw) & 1023)) & 1023);
  unsigned char* ring_a = smem;
  unsigned char* ring_b = smem + kStages * kTileABytes;
  std::uint64_t* full =
      reinterpret_cast<std::uint64_t*>(smem + kStages * (kTileABytes + kTileBBytes));
  std::uint64_t* empty = full + kStages;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kConsumers * Cluster);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
  // The barriers of every block of the cluster are initialised before anyone uses them.
  if constexpr (Cluster == 2) {
    cluster_sync();
  } else {
    __syncthreads();
  }
  const unsigned rank = Cluster == 2 ? cluster_rank() : 0;
  const unsigned peer = rank ^ 1;

  // The schedule walks units of Cluster M-adjacent tiles; block `rank` of a cluster computes
  // tile Cluster·um + rank of unit (um, tn).
  const int tiles_m = m / (kBM * Cluster), tiles_n = n / kBN;
  const int tiles = tiles_m * tiles_n;
  const int first = static_cast<int>(blockIdx.x) / Cluster;
  const int stride = static_cast<int>(gridDim.x) / Cluster;
  const int k_tiles = k / kBK;
  const int warpgroup = threadIdx.x / 128;

  if (warpgroup == 0) {
    // Producer.
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(&map_a) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(&map_b) : "memory");
      int s = 0;
      unsigned phase = 0;
      for (int t = first; t < tiles; t += stride) {
        int tm, tn;
        tile_of<kGroupM>(t, tiles_m, tiles_n, tm, tn);
        tm = tm * Cluster + static_cast<int>(rank);
        for (int kt = 0; kt < k_tiles; ++kt) {
          mbar_wait<Cluster == 2>(&empty[s], phase ^ 1);
          mbar_arrive_expect_tx(&full[s], kTileABytes + kTileBBytes);
          tma_load_2d(ring_a + s * kTileABytes, &map_a, kt * kBK, tm * kBM, &full[s]);
          if constexpr (Cluster == 2) {
            // This block's half of B, into both blocks (map_b's box is [128, 64] here).
            tma_load_2d_multicast(ring_b + s * kTileBBytes + rank * (kTileBBytes / 2), &map_b,
                                  kt * kBK, tn * kBN + static_cast<int>(rank) * (kBN / 2),
                                  &full[s], 0x3);
          } else {
            tma_load_2d(ring_b + s * kTileBBytes, &map_b, kt * kBK, tn * kBN, &full[s]);
          }
          if (++s == kStages) {
            s = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    // Consumers: rows [64 (warpgroup − 1), + 64) of each tile.
    setmaxnreg_inc<232>();
    using Mma = wg::Mma<typename Pack<T>::Op, kBN>;
    const int consumer = warpgroup - 1;
    const int t_in_wg = threadIdx.x % 128;
    float d[Mma::kRegs];
#pragma unroll
    for (int i = 0; i < Mma::kRegs; ++i) d[i] = 0.0f;
    int s = 0;
    unsigned phase = 0;
    // Releases slot `slot` in this block and, in a cluster, in the peer (whose producer
    // multicasts into this block's slot too).
    const auto release = [&](int slot) {
      if (t_in_wg != 0) return;
      mbar_arrive(&empty[slot]);
      if constexpr (Cluster == 2) mbar_arrive_remote(&empty[slot], peer);
    };
    for (int t = first; t < tiles; t += stride) {
      int tm, tn;
      tile_of<kGroupM>(t, tiles_m, tiles_n, tm, tn);
      tm = tm * Cluster + static_cast<int>(rank);
      int previous = -1;
      for (int kt = 0; kt < k_tiles; ++kt) {
        mbar_wait(&full[s], phase);
        const std::uint64_t da =
            wg::desc_kmajor(sa(ring_a + s * kTileABytes + consumer * 64 * kBK * 2), 128);
        const std::uint64_t db = wg::desc_kmajor(sa(ring_b + s * kTileBBytes), 128);
        wg::fence_operands(d);
        wg::fence();
#pragma unroll
        for (int kk = 0; kk < kBK / 16; ++kk) {
          // K step kk: 16 elements = 32 bytes along the 128-byte swizzled rows.
          Mma::ss(d, wg::desc_advance(da, kk * 32), wg::desc_advance(db, kk * 32),
                  (kt > 0 || kk > 0) ? 1 : 0);
        }
        wg::commit_group();
        wg::fence_operands(d);
        // The previous k-tile's WGMMAs are complete: its slot may be refilled.
        wg::wait_group<WaitDepth>();
        wg::fence_operands(d);
        if (previous >= 0) release(previous);
        previous = s;
        if (++s == kStages) {
          s = 0;
          phase ^= 1;
        }
      }
      wg::wait_group<0>();
      wg::fence_operands(d);
      if (previous >= 0) release(previous);

      // Epilogue: the WGMMA_ACC layout, two adjacent columns per store.
      const int row0 = tm * kBM + consumer * 64;
      const int col0 = tn * kBN;
#pragma unroll
      for (int r = 0; r < Mma::kRegs; r += 2) {
        const int row = row0 + wg::acc_row(t_in_wg, r);
        const int col = col0 + wg::acc_col(t_in_wg, r);
        *reinterpret_cast<typename Pack<T>::Two*>(c + static_cast<std::size_t>(row) * n + col) =
            Pack<T>::two(d[r], d[r + 1]);
      }
    }
  }
  if constexpr (Cluster == 2) {
    // No block exits while its peer may still arrive on its barriers or write its shared
    // memory.
    __syncwarp();
    cluster_sync();
  }
  (void)peer;
#else
  (void)map_a;
  (void)map_b;
  (void)c;
  (void)m;
  (void)n;
  (void)k;
  __trap();
#endif
}

// ---- host side ------------------------------------------------------------------------------

// What `choreo::tma::encode_tiled` said about the last map it rejected (no driver entry point,
// alignment, extents).
const char* map_error = "the tensor map was rejected";

// A 2-D map of a row-major [rows, cols] matrix of 16-bit elements `T` with [box_rows, 64]
// boxes, 128-byte swizzle, 256-byte L2 promotion.
template <class T>
int encode_2d(CUtensorMap* map, const void* base, int rows, int cols, int box_rows) {
  const std::uint64_t dims[2] = {static_cast<std::uint64_t>(cols),
                                 static_cast<std::uint64_t>(rows)};
  const std::uint64_t strides[1] = {static_cast<std::uint64_t>(cols) * sizeof(T)};
  const std::uint32_t box[2] = {static_cast<std::uint32_t>(kBK),
                                static_cast<std::uint32_t>(box_rows)};
  const char* err = ::choreo::tma::encode_tiled<T>(map, 2u, base, dims, strides, box, 128u, 256u);
  if (err == nullptr) return 0;
  map_error = err;
  return kBadTensorMap;
}

int sm_count() {
  static const int count = [] {
    int device = 0, n = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
      return 0;
    return n;
  }();
  return count;
}

template <class T, int Cluster, int kStages, int kGroupM, int WaitDepth>
int launch(cudaStream_t s, const void* a, const void* b, void* c, int m, int n, int k) {
  if (m <= 0 || n <= 0 || k <= 0 || m % (kBM * Cluster) != 0 || n % kBN != 0 || k % kBK != 0)
    return kBadShape;
  alignas(64) CUtensorMap map_a;
  alignas(64) CUtensorMap map_b;
  int err = encode_2d<T>(&map_a, a, m, k, kBM);
  if (err == 0) err = encode_2d<T>(&map_b, b, n, k, kBN / Cluster);
  if (err != 0) return err;
  const auto kernel = gemm_wgmma_kernel<T, Cluster, kStages, kGroupM, WaitDepth>;
  constexpr int kSmemBytes = smem_bytes(kStages);
  static int max_units = 0;  // co-resident blocks (or clusters), computed once
  if (max_units == 0) {
    cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    if (e != cudaSuccess) return e;
    const int sms = sm_count();
    if (sms <= 0) return cudaErrorNoDevice;
    if constexpr (Cluster == 1) {
      max_units = sms;
    } else {
      cudaLaunchConfig_t config{};
      config.gridDim = dim3(Cluster * sms, 1, 1);
      config.blockDim = dim3(kThreads, 1, 1);
      config.dynamicSmemBytes = kSmemBytes;
      cudaLaunchAttribute attribute{};
      attribute.id = cudaLaunchAttributeClusterDimension;
      attribute.val.clusterDim.x = Cluster;
      attribute.val.clusterDim.y = 1;
      attribute.val.clusterDim.z = 1;
      config.attrs = &attribute;
      config.numAttrs = 1;
      int clusters = 0;
      e = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
      if (e != cudaSuccess) return e;
      max_units = clusters > 0 ? clusters : sms / Cluster;
    }
  }
  const int units = (m / (kBM * Cluster)) * (n / kBN);
  const int grid = Cluster * (units < max_units ? units : max_units);
  T* out = static_cast<T*>(c);
  if constexpr (Cluster == 1) {
    kernel<<<grid, kThreads, kSmemBytes, s>>>(map_a, map_b, out, m, n, k);
    return cudaGetLastError();
  } else {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(grid, 1, 1);
    config.blockDim = dim3(kThreads, 1, 1);
    config.dynamicSmemBytes = kSmemBytes;
    config.stream = s;
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = Cluster;
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
    return cudaLaunchKernelEx(&config, kernel, map_a, map_b, out, m, n, k);
  }
}

// ---- cuBLAS, loaded at run time -------------------------------------------------------------

using CublasHandle = void*;
using CreateFn = int (*)(CublasHandle*);
using SetStreamFn = int (*)(CublasHandle, cudaStream_t);
using GemmExFn = int (*)(CublasHandle, int, int, int, int, int, const void*, const void*, int,
                         int, const void*, int, int, const void*, void*, int, int, int, int);
using VersionFn = int (*)(CublasHandle, int*);

struct Cublas {
  void* library = nullptr;
  CublasHandle handle = nullptr;
  SetStreamFn set_stream = nullptr;
  GemmExFn gemm_ex = nullptr;
  int version = 0;
};
Cublas cublas;

}  // namespace

extern "C" {

// C = A · Bᵀ for f16 (`dtype` 0) or bf16 (`dtype` 1): A [m, k], B [n, k], C [m, n], all
// row-major, on stream `s`, with kernel variant `variant` (the codes of benches/src/gemm.rs's
// `Variant`):
//   0 baseline (4 stages, groups of 16 M tiles, wait_group 1), one block per tile;
//   1 baseline in clusters of two blocks sharing B tiles by TMA multicast;
//   2 as 0 with wait_group 0 (no WGMMAs in flight across k-tiles: the diagnostic);
//   3 as 0 with groups of 8 M tiles;
//   4 as 1 with groups of 8 M tiles (units of 2 tiles: 16 M tiles per group);
//   5 as 0 with 3 stages.
// m % 128 == 0 (m % 256 == 0 for clusters), n % 256 == 0, k % 64 == 0. Not waited for.
int gemm_wgmma(cudaStream_t s, int dtype, int variant, const void* a, const void* b, void* c,
               int m, int n, int k) {
  if (dtype != 0 && dtype != 1) return cudaErrorInvalidValue;
#define CHOREO_GEMM_VARIANT(code, ...)                                       \
  case code:                                                                 \
    return dtype == 0 ? launch<__half, __VA_ARGS__>(s, a, b, c, m, n, k)     \
                      : launch<__nv_bfloat16, __VA_ARGS__>(s, a, b, c, m, n, k);
  switch (variant) {
    CHOREO_GEMM_VARIANT(0, 1, 4, 16, 1)
    CHOREO_GEMM_VARIANT(1, 2, 4, 16, 1)
    CHOREO_GEMM_VARIANT(2, 1, 4, 16, 0)
    CHOREO_GEMM_VARIANT(3, 1, 4, 8, 1)
    CHOREO_GEMM_VARIANT(4, 2, 4, 8, 1)
    CHOREO_GEMM_VARIANT(5, 1, 3, 16, 1)
    default:
      return cudaErrorInvalidValue;
  }
#undef CHOREO_GEMM_VARIANT
}

// A message for a negative code of the entries (nullptr for other codes).
const char* gemm_wgmma_error(int code) {
  switch (code) {
    case kBadShape:
      return "unsupported shape (M % 128 (M % 256 with clusters), N % 256 and K % 64 must be "
             "0)";
    case kBadTensorMap:
      return map_error;
    case kNoCublas:
      return "cuBLAS is not loaded";
    default:
      return nullptr;
  }
}

// Loads cuBLAS with dlopen (`$CHOREO_BENCH_CUBLAS`, libcublas.so.13, libcublas.so, the CUDA
// install, PyTorch's pip copy on the GPU machines' image) and creates a handle. Returns 0 when
// ready, 1 when the library or a symbol was not found, 2 when cublasCreate failed. `version`
// gets cuBLAS's version (e.g. 130000) when ready.
int gemm_cublas_load(int* version) {
  if (cublas.handle == nullptr) {
    const char* candidates[] = {std::getenv("CHOREO_BENCH_CUBLAS"),
                                "libcublas.so.13",
                                "libcublas.so",
                                "libcublas.so.12",
                                "/usr/local/cuda/lib64/libcublas.so.13",
                                "/usr/local/cuda/lib64/libcublas.so",
                                "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/"
                                "libcublas.so.13"};
    for (const char* name : candidates) {
      if (name == nullptr || *name == '\0') continue;
      cublas.library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (cublas.library != nullptr) break;
    }
    if (cublas.library == nullptr) return 1;
    const auto create = reinterpret_cast<CreateFn>(dlsym(cublas.library, "cublasCreate_v2"));
    const auto get_version =
        reinterpret_cast<VersionFn>(dlsym(cublas.library, "cublasGetVersion_v2"));
    cublas.set_stream =
        reinterpret_cast<SetStreamFn>(dlsym(cublas.library, "cublasSetStream_v2"));
    cublas.gemm_ex = reinterpret_cast<GemmExFn>(dlsym(cublas.library, "cublasGemmEx"));
    if (create == nullptr || cublas.set_stream == nullptr || cublas.gemm_ex == nullptr) return 1;
    if (create(&cublas.handle) != 0) {
      cublas.handle = nullptr;
      return 2;
    }
    if (get_version != nullptr) get_version(cublas.handle, &cublas.version);
  }
  if (version != nullptr) *version = cublas.version;
  return 0;
}

// The same product as gemm_wgmma with cublasGemmEx (f32 compute, default algorithm): in
// cuBLAS's column-major terms Cᵀ [n, m] = op_T(B as [k, n]) · (A as [k, m]). Returns the
// cuBLAS status, or kNoCublas.
int gemm_cublas(cudaStream_t s, int dtype, const void* a, const void* b, void* c, int m, int n,
                int k) {
  if (cublas.handle == nullptr) return kNoCublas;
  const int status = cublas.set_stream(cublas.handle, s);
  if (status != 0) return status;
  const float one = 1.0f, zero = 0.0f;
  constexpr int kOpN = 0, kOpT = 1;                 // CUBLAS_OP_N, CUBLAS_OP_T
  constexpr int kComputeF32 = 68;                   // CUBLAS_COMPUTE_32F
  constexpr int kAlgoDefault = -1;                  // CUBLAS_GEMM_DEFAULT
  const int type = dtype == 0 ? CUDA_R_16F : CUDA_R_16BF;
  return cublas.gemm_ex(cublas.handle, kOpT, kOpN, n, m, k, &one, b, type, k, a, type, k, &zero,
                        c, type, n, kComputeF32, kAlgoDefault);
}

}  // extern "C"
