// GPU checks of the WGMMA library (choreo-compiler/src/emit/cuda/wgmma.cuh) one instruction
// family at a time, for the ignored test `tests/gemm_gpu.rs` (`wgmma_library_cases`): a
// 128-thread block lays A [64, K] and B [N, K] (row-major in global memory) out in shared
// memory as a swizzled TMA load would (tier 3 §4.2; MN-major: the transposed tiles), issues the
// K/atomK wgmmas (SS, or RS with A fragments read from shared memory), and writes D [64, N] as
// floats through the WGMMA_ACC layout. The test compares with integer sums of small integers
// (exact in every type). Every entry returns 0 or a cudaError_t.

#include <cuda_runtime.h>

#include <cstdint>

#define CHOREO_WGMMA_NS choreo_bench_wgmma_unit
#include "wgmma.cuh"

namespace wu = choreo_bench_wgmma_unit;

namespace {

// §4.1/§4.2: the byte of logical element (r, c) of a swizzled [rows, ·] tile of `s`-byte
// elements with swizzle `n`.
__device__ unsigned tile_byte(unsigned n, unsigned s, unsigned rows, unsigned r, unsigned c) {
  const unsigned wd = n / s;
  const unsigned b = ((c % wd) + r * wd + (c / wd) * rows * wd) * s;
  const unsigned mask = n == 128 ? 7 : n == 64 ? 3 : 1;
  return b ^ (((b >> 7) & mask) << 4);
}

constexpr int kTileBOffset = 32 * 1024;
constexpr int kSmem = 96 * 1024 + 1024;

template <class Op, int N, bool MN, bool RS, int SWZ>
__global__ void __launch_bounds__(128, 1)
    unit_kernel(const unsigned char* a, const unsigned char* b, float* out, int ktotal) {
#if CHOREO_WGMMA_SM90A
  using T = wu::Traits<Op>;
  using M = wu::Mma<Op, N>;
  constexpr unsigned ea = wu::elem_bytes(T::a), eb = wu::elem_bytes(T::b);
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  unsigned char* smem =
      smem_raw + ((1024 - (static_cast<unsigned>(__cvta_generic_to_shared(smem_raw)) & 1023)) &
                  1023);
  unsigned char* tile_a = smem;
  unsigned char* tile_b = smem + kTileBOffset;
  const int t = threadIdx.x;
  for (int i = t; i < 64 * ktotal; i += 128) {
    const unsigned r = i / ktotal, c = i % ktotal;
    const unsigned at = MN ? tile_byte(SWZ, ea, ktotal, c, r) : tile_byte(SWZ, ea, 64, r, c);
    for (unsigned x = 0; x < ea; ++x) tile_a[at + x] = a[i * ea + x];
  }
  for (int i = t; i < N * ktotal; i += 128) {
    const unsigned r = i / ktotal, c = i % ktotal;
    const unsigned at = MN ? tile_byte(SWZ, eb, ktotal, c, r) : tile_byte(SWZ, eb, N, r, c);
    for (unsigned x = 0; x < eb; ++x) tile_b[at + x] = b[i * eb + x];
  }
  // Generic writes read by the tensor cores (async proxy).
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const std::uint32_t addr_a = wu::smem_address(tile_a), addr_b = wu::smem_address(tile_b);
  const std::uint64_t da =
      MN ? wu::desc_mnmajor(addr_a, SWZ, ktotal * SWZ) : wu::desc_kmajor(addr_a, SWZ);
  const std::uint64_t db =
      MN ? wu::desc_mnmajor(addr_b, SWZ, ktotal * SWZ) : wu::desc_kmajor(addr_b, SWZ);
  typename M::Acc d[M::kRegs];
  for (int i = 0; i < M::kRegs; ++i) d[i] = 0;
  wu::fence_operands(d);
  for (int kt = 0; kt < ktotal / T::k; ++kt) {
    const std::uint32_t off_a =
        MN ? wu::mnmajor_k_offset(kt, T::k, SWZ) : wu::kmajor_k_offset(kt, T::k, ea, SWZ, 64);
    const std::uint32_t off_b =
        MN ? wu::mnmajor_k_offset(kt, T::k, SWZ) : wu::kmajor_k_offset(kt, T::k, eb, SWZ, N);
    if constexpr (RS) {
      // A fragment of k step kt: register j holds (row, col) and (row, col + 1).
      std::uint32_t frag[4];
      for (int j = 0; j < 4; ++j) {
        const unsigned row = wu::a_frag_row(t, j);
        const unsigned col = kt * T::k + wu::a_frag_col(t, j);
        const unsigned lo = MN ? tile_byte(SWZ, 2, ktotal, col, row) : tile_byte(SWZ, 2, 64, row, col);
        const unsigned hi =
            MN ? tile_byte(SWZ, 2, ktotal, col + 1, row) : tile_byte(SWZ, 2, 64, row, col + 1);
        frag[j] = static_cast<std::uint32_t>(*reinterpret_cast<const std::uint16_t*>(tile_a + lo)) |
                  static_cast<std::uint32_t>(*reinterpret_cast<const std::uint16_t*>(tile_a + hi))
                      << 16;
      }
      wu::fence_operands(d);
      wu::fence();
      M::template rs<MN ? 1 : 0>(d, frag, wu::desc_advance(db, off_b), 1);
    } else {
      wu::fence();
      M::template ss<MN ? 1 : 0, MN ? 1 : 0>(d, wu::desc_advance(da, off_a),
                                               wu::desc_advance(db, off_b), kt > 0);
    }
    wu::commit_group();
    wu::wait_group<0>();
    wu::fence_operands(d);
  }
  constexpr int per = T::acc == wu::AccKind::F16 ? 2 : 1;
  for (int j = 0; j < M::kRegs; ++j) {
    for (int h = 0; h < per; ++h) {
      const int r = j * per + h;
      float v;
      if constexpr (T::acc == wu::AccKind::F32) {
        v = __uint_as_float(__float_as_uint(static_cast<float>(d[j])));
      } else if constexpr (T::acc == wu::AccKind::S32) {
        v = static_cast<float>(static_cast<std::int32_t>(d[j]));
      } else {
        v = wu::half_bits_to_float(static_cast<std::uint16_t>(static_cast<std::uint32_t>(d[j]) >> (16 * h)));
      }
      out[wu::acc_row(t, r) * N + wu::acc_col(t, r)] = v;
    }
  }
#else
  (void)a;
  (void)b;
  (void)out;
  (void)ktotal;
  __trap();
#endif
}

struct Case {
  void (*kernel)(const unsigned char*, const unsigned char*, float*, int);
  int a, b, acc, n, k, mn, rs, swz, ktotal;
};

#define CASE(OP, N, MN, RS, SWZ, KTOTAL)                                                      \
  Case {                                                                                      \
    unit_kernel<wu::OP, N, MN, RS, SWZ>, static_cast<int>(wu::Traits<wu::OP>::a),            \
        static_cast<int>(wu::Traits<wu::OP>::b), static_cast<int>(wu::Traits<wu::OP>::acc), N, \
        wu::Traits<wu::OP>::k, MN, RS, SWZ, KTOTAL                                            \
  }

const Case kCases[] = {
    CASE(F32F16F16, 256, false, false, 128, 64),  CASE(F32F16F16, 64, false, false, 64, 64),
    CASE(F32F16F16, 32, false, false, 32, 64),    CASE(F32F16F16, 128, true, false, 128, 64),
    CASE(F32F16F16, 64, false, true, 128, 64),    CASE(F32F16F16, 64, true, true, 128, 64),
    CASE(F16F16F16, 64, false, false, 128, 64),   CASE(F32BF16BF16, 128, false, false, 128, 128),
    CASE(F32BF16BF16, 256, false, true, 128, 64), CASE(F32BF16BF16, 96, true, false, 64, 64),
    CASE(F32TF32TF32, 64, false, false, 128, 32), CASE(F32E4M3E4M3, 128, false, false, 128, 128),
    CASE(F32E4M3E5M2, 64, false, false, 64, 128), CASE(F16E5M2E4M3, 32, false, false, 128, 128),
    CASE(F16E4M3E4M3, 256, false, false, 128, 64), CASE(S32S8S8, 64, false, false, 128, 128),
    CASE(S32U8S8, 256, false, false, 128, 128),   CASE(S32S8U8, 24, false, false, 32, 64),
};

}  // namespace

extern "C" {

// The description of case `which`: [a elem, b elem, acc kind, N, atom K, MN-major, RS,
// swizzle, K] (elem: wgmma.cuh's Elem order F16 BF16 TF32 E4M3 E5M2 S8 U8; acc: F32 F16 S32).
// Returns 0, or -1 past the last case.
int wgmma_unit_case(int which, int* fields) {
  if (which < 0 || which >= static_cast<int>(sizeof kCases / sizeof kCases[0])) return -1;
  const Case& c = kCases[which];
  const int values[9] = {c.a, c.b, c.acc, c.n, c.k, c.mn, c.rs, c.swz, c.ktotal};
  for (int i = 0; i < 9; ++i) fields[i] = values[i];
  return 0;
}

// Runs case `which` on A [64, K] and B [N, K] (device, row-major, raw elements) into D [64, N]
// (device floats) and waits for it.
int wgmma_unit_run(int which, const void* a, const void* b, float* d) {
  if (which < 0 || which >= static_cast<int>(sizeof kCases / sizeof kCases[0]))
    return cudaErrorInvalidValue;
  const Case& c = kCases[which];
  cudaError_t e = cudaFuncSetAttribute(c.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  if (e != cudaSuccess) return e;
  c.kernel<<<1, 128, kSmem>>>(static_cast<const unsigned char*>(a),
                               static_cast<const unsigned char*>(b), d, c.ktotal);
  e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  return cudaDeviceSynchronize();
}

}  // extern "C"
