// The MMA support library of generated code (choreo-compiler, emit::cuda; spec-tier3 §5, §10.4,
// §10.5): fragments, loads, executions and stores of WMMA and mma.sync. The translator pastes
// this file only into files that use MMA, after the support library, preceded by
// `#define CHOREO_MMA_NS __choreo_mma_<hash of this file>[_cpu]`; every name it defines lives in
// that namespace.
//
// GPU (nvcc): mma.sync fragments hold the registers of PTX's fragment layouts (loaded element by
// element, spec-tier3 §10.4 ⚠), executions are inline PTX; WMMA is <mma.h>.
// CPU (__CHOREO_CPU__): accumulators of mma.sync have the GPU's layout (SYNC_ACC, §6.1), so each
// thread holds the same elements as on the GPU; operand fragments hold the whole operand tile
// (every lane loads all of it, which is what the warp's lanes load together on the GPU), so a
// thread computes its own accumulator elements without exchanging registers. WMMA layouts are
// opaque: on the CPU every lane holds the whole tile and stores the elements e with
// e % 32 == lane. Results equal the GPU's whenever the sums are exact (integers, and floating
// values whose partial sums are representable); otherwise the order of the additions may differ
// in the last bits.
#include <cstdint>
#include <cstring>
#include <type_traits>
#if !defined(__CHOREO_CPU__)
#include <mma.h>
#endif

namespace CHOREO_MMA_NS {

// -- conversions ---------------------------------------------------------------------------------

// The type arithmetic on T runs in: double for f64, long long for integers, float otherwise.
template <typename T>
struct wide {
  using type = typename std::conditional<
      std::is_same<T, double>::value, double,
      typename std::conditional<std::is_integral<T>::value, long long, float>::type>::type;
};

template <typename D, typename S>
__device__ __forceinline__ D cvt(S v) {
  using W = typename std::conditional<
      std::is_integral<D>::value && std::is_integral<S>::value, long long,
      typename std::conditional<std::is_same<D, double>::value || std::is_same<S, double>::value,
                                double, float>::type>::type;
  return D(static_cast<W>(v));
}

// cvt.rna.tf32.f32: round the mantissa to 10 bits, ties away from zero (inf and NaN unchanged).
__device__ __forceinline__ float rna_tf32(float x) {
#if defined(__CHOREO_CPU__)
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) != 0x7f800000u) bits = (bits + 0x1000u) & 0xffffe000u;
  std::memcpy(&x, &bits, 4);
  return x;
#else
  std::uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
#endif
}

// A fragment array index that the compiler could not prove in range: trap, like a failed
// device assertion (the call then fails).
__device__ __forceinline__ int idx(long long i, int n) {
  if (i < 0 || i >= n) __trap();
  return static_cast<int>(i);
}

// The end of a warp-collective load: no lane may overwrite the tile (the next DMA of a loop)
// before every lane has read it. mma.sync operands are gathered with ordinary loads, which
// independent thread scheduling does not keep converged, and the CPU's lanes run one after the
// other: both meet at a warp barrier.
__device__ __forceinline__ void converge() { __syncwarp(); }

__device__ __forceinline__ int imin(long long a, long long b) {
  return static_cast<int>(a < b ? a : b);
}

// -- element-wise operations (every fragment kind has x[num_elements]) ---------------------------

template <typename F, typename V>
__device__ __forceinline__ void fill(F& f, V v) {
  using E = typename std::remove_reference<decltype(f.x[0])>::type;
  const E e = cvt<E>(v);
  for (int i = 0; i < static_cast<int>(F::num_elements); ++i) f.x[i] = e;
}

// `frag op= v` (spec-tier3 §5.6): Op 0 +, 1 -, 2 *, 3 /.
template <int Op, typename F, typename V>
__device__ __forceinline__ void update(F& f, V v) {
  using E = typename std::remove_reference<decltype(f.x[0])>::type;
  using W = typename wide<E>::type;
  const W s = static_cast<W>(cvt<E>(v));
  for (int i = 0; i < static_cast<int>(F::num_elements); ++i) {
    const W x = static_cast<W>(f.x[i]);
    f.x[i] = cvt<E>(Op == 0 ? x + s : Op == 1 ? x - s : Op == 2 ? x * s : x / s);
  }
}

// -- mma.sync ------------------------------------------------------------------------------------

// Elements of one 32-bit register of an operand of T (one for 4- and 8-byte types).
template <typename T>
struct per_reg {
  static constexpr int value = sizeof(T) >= 4 ? 1 : static_cast<int>(4 / sizeof(T));
};

// PTX's operand layouts (g = lane / 4, q = lane % 4): element t of A (M×K) and of B (K×N).
template <int M, int K, typename T>
__device__ __forceinline__ void a_coord(int lane, int t, int& m, int& k) {
  constexpr int E = per_reg<T>::value;
  constexpr int regs = M * K / (32 * E);
  constexpr int rows = M / 8;
  constexpr int cols = regs / rows;
  const int j = t / E, i = t % E;
  m = (lane >> 2) + 8 * (j % rows);
  k = (j / rows) * (K / cols) + E * (lane & 3) + i;
}

template <int N, int K, typename T>
__device__ __forceinline__ void b_coord(int lane, int t, int& k, int& n) {
  constexpr int E = per_reg<T>::value;
  constexpr int regs = K * N / (32 * E);
  const int j = t / E, i = t % E;
  n = lane >> 2;
  k = j * (K / regs) + E * (lane & 3) + i;
}

// SYNC_ACC (spec-tier3 §6.1): element r of the lane's accumulator.
__device__ __forceinline__ void c_coord(int lane, int r, int& m, int& n) {
  m = (lane >> 2) + 8 * (r / 2);
  n = 2 * (lane & 3) + (r & 1);
}

// The address of logical element `e` of a tile: itself, or in a shared buffer of rows x cols
// elements at `base` that a copy with swizzle Swz filled (`mma.load.swiz<N>`, spec-tier3 §4.2).
template <unsigned Swz, typename S>
__device__ __forceinline__ const S* at(const S* e, const S* base, unsigned rows, unsigned cols) {
  if constexpr (Swz == 0) {
    (void)base, (void)rows, (void)cols;
    return e;
  } else {
    return ::choreo::tma::swizzled<Swz>(const_cast<S*>(base), const_cast<S*>(e), rows, cols);
  }
}

// Role 0 = A, 1 = B, 2 = accumulator.
template <int Role, int M, int N, int K, typename T>
struct sync_frag {
#if defined(__CHOREO_CPU__)
  static constexpr int num_elements = Role == 0 ? M * K : Role == 1 ? K * N : M * N / 32;
#else
  static constexpr int num_elements = (Role == 0 ? M * K : Role == 1 ? K * N : M * N) / 32;
#endif
  T x[num_elements];
};

template <typename T, bool Tf32, typename S>
__device__ __forceinline__ T operand(S v) {
  if constexpr (Tf32) {
    return rna_tf32(static_cast<float>(v));
  } else {
    return cvt<T>(v);
  }
}

#if !defined(__CHOREO_CPU__)
// `-DCHOREO_MMA_NO_LDMATRIX` makes every operand load an element gather (a comparison point).
#if defined(CHOREO_MMA_NO_LDMATRIX)
constexpr bool use_ldmatrix = false;
#else
constexpr bool use_ldmatrix = true;
#endif

// ldmatrix (spec-tier3 §10.4) of Count 8x8 b16 matrices into Count registers: lane l gives the
// address of row l % 8 of matrix (l / 8) % Count; register i of thread t then holds row t / 4,
// columns 2(t % 4) and 2(t % 4) + 1 of matrix i (of its transpose with .trans).
template <int Count, bool Trans>
__device__ __forceinline__ void ldsm(std::uint32_t* r, const void* row) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (Count == 4 && Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a)
                 : "memory");
  } else if constexpr (Count == 4) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a)
                 : "memory");
  } else if constexpr (Count == 2 && Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(a)
                 : "memory");
  } else if constexpr (Count == 2) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(a)
                 : "memory");
  } else if constexpr (Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0])
                 : "r"(a)
                 : "memory");
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0])
                 : "r"(a)
                 : "memory");
  }
}

// Whether ldmatrix can read a tile: in shared memory, 16-byte aligned, rows (of the
// contiguous dimension) a multiple of 16 bytes apart. The tile is the warp's, so the answer is
// uniform over the warp.
template <typename S>
__device__ __forceinline__ bool ldsm_ok(const S* p, long long pitch) {
  return __isShared(p) && reinterpret_cast<std::uintptr_t>(p) % 16 == 0 &&
         (pitch * static_cast<long long>(sizeof(S))) % 16 == 0;
}
#endif

// Operand loads of mma.sync end converged (see `converge`) except through ldmatrix, one
// instruction of the whole warp: a warp barrier there would also make every lane wait for its
// loaded registers (a __syncwarp orders memory), so the k-step's loads could not overlap.
// `Aligned`: the translator proved `p` a 16-byte aligned shared address and the pitch a
// multiple of 16 bytes, so ldmatrix needs no run-time test (one basic block for the k-step).

// Operand A: element (m, k) at p[m * sm + k * sk].
template <bool Tf32, unsigned Swz, bool Aligned = false, int M, int N, int K, typename T,
          typename S>
__device__ __forceinline__ void sync_load(sync_frag<0, M, N, K, T>& f, int lane, const S* p,
                                          long long sm, long long sk, const S* base = nullptr,
                                          unsigned rows = 0, unsigned cols = 0) {
#if defined(__CHOREO_CPU__)
  (void)lane;
  for (int m = 0; m < M; ++m)
    for (int k = 0; k < K; ++k) f.x[m * K + k] = operand<T, Tf32>(*at<Swz>(p + m * sm + k * sk, base, rows, cols));
  converge();
#else
  if constexpr (use_ldmatrix && Swz == 0 && sizeof(T) == 2 && std::is_same<T, S>::value &&
                M == 16) {
    // 16-bit operands from shared memory: ldmatrix (matrix i: rows 8(i % 2), columns 8(i / 2)),
    // with .trans when M is the contiguous dimension (a `col` A).
    constexpr int count = M * K / 64;
    const int i = (lane >> 3) % count, r8 = lane & 7;
    std::uint32_t r[count];
    if (sk == 1 && (Aligned || ldsm_ok(p, sm))) {
      ldsm<count, false>(r, p + ((i % 2) * 8 + r8) * sm + (i / 2) * 8);
      std::memcpy(f.x, r, sizeof(r));
      return;
    }
    if (sm == 1 && (Aligned || ldsm_ok(p, sk))) {
      ldsm<count, true>(r, p + ((i / 2) * 8 + r8) * sk + (i % 2) * 8);
      std::memcpy(f.x, r, sizeof(r));
      return;
    }
  }
  for (int t = 0; t < f.num_elements; ++t) {
    int m, k;
    a_coord<M, K, T>(lane, t, m, k);
    f.x[t] = operand<T, Tf32>(*at<Swz>(p + m * sm + k * sk, base, rows, cols));
  }
  converge();
#endif
}

// Operand B: element (k, n) at p[k * sk + n * sn].
template <bool Tf32, unsigned Swz, bool Aligned = false, int M, int N, int K, typename T,
          typename S>
__device__ __forceinline__ void sync_load(sync_frag<1, M, N, K, T>& f, int lane, const S* p,
                                          long long sk, long long sn, const S* base = nullptr,
                                          unsigned rows = 0, unsigned cols = 0) {
#if defined(__CHOREO_CPU__)
  (void)lane;
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n) f.x[k * N + n] = operand<T, Tf32>(*at<Swz>(p + k * sk + n * sn, base, rows, cols));
  converge();
#else
  if constexpr (use_ldmatrix && Swz == 0 && sizeof(T) == 2 && std::is_same<T, S>::value &&
                N == 8) {
    // 16-bit operands from shared memory: ldmatrix (matrix i: k 8i..8i+7), with .trans when N
    // is the contiguous dimension (a `col` B, [K, N]).
    constexpr int count = K * N / 64;
    const int i = (lane >> 3) % count, r8 = lane & 7;
    std::uint32_t r[count];
    if (sk == 1 && (Aligned || ldsm_ok(p, sn))) {
      ldsm<count, false>(r, p + r8 * sn + i * 8);
      std::memcpy(f.x, r, sizeof(r));
      return;
    }
    if (sn == 1 && (Aligned || ldsm_ok(p, sk))) {
      ldsm<count, true>(r, p + (i * 8 + r8) * sk);
      std::memcpy(f.x, r, sizeof(r));
      return;
    }
  }
  for (int t = 0; t < f.num_elements; ++t) {
    int k, n;
    b_coord<N, K, T>(lane, t, k, n);
    f.x[t] = operand<T, Tf32>(*at<Swz>(p + k * sk + n * sn, base, rows, cols));
  }
  converge();
#endif
}

// Accumulator: element (m, n) at p[m * sm + n * sn] (`Aligned` has no use: no ldmatrix).
template <bool Tf32, unsigned Swz, bool Aligned = false, int M, int N, int K, typename T,
          typename S>
__device__ __forceinline__ void sync_load(sync_frag<2, M, N, K, T>& f, int lane, const S* p,
                                          long long sm, long long sn, const S* base = nullptr,
                                          unsigned rows = 0, unsigned cols = 0) {
  for (int r = 0; r < f.num_elements; ++r) {
    int m, n;
    c_coord(lane, r, m, n);
    f.x[r] = cvt<T>(*at<Swz>(p + m * sm + n * sn, base, rows, cols));
  }
}

// The accumulator's elements (m, n) with m < rows and n < cols, converted to D.
template <int M, int N, int K, typename T, typename D>
__device__ __forceinline__ void sync_store(const sync_frag<2, M, N, K, T>& f, int lane, D* p,
                                           long long sm, long long sn, int rows, int cols) {
  for (int r = 0; r < f.num_elements; ++r) {
    int m, n;
    c_coord(lane, r, m, n);
    if (m < rows && n < cols) p[m * sm + n * sn] = cvt<D>(f.x[r]);
  }
}

#if defined(__CHOREO_CPU__)
// Each thread computes its own accumulator elements from the whole operand tiles.
template <int M, int N, int K, typename TA, typename TB, typename TC>
__device__ __forceinline__ void sync_mma(sync_frag<2, M, N, K, TC>& c,
                                         const sync_frag<0, M, N, K, TA>& a,
                                         const sync_frag<1, M, N, K, TB>& b, int lane) {
  using W = typename std::conditional<
      std::is_same<TC, double>::value, double,
      typename std::conditional<std::is_integral<TC>::value, long long, float>::type>::type;
  for (int r = 0; r < c.num_elements; ++r) {
    int m, n;
    c_coord(lane, r, m, n);
    W s = static_cast<W>(c.x[r]);
    for (int k = 0; k < K; ++k)
      s += static_cast<W>(a.x[m * K + k]) * static_cast<W>(b.x[k * N + n]);
    if constexpr (std::is_integral<TC>::value) {
      c.x[r] = static_cast<TC>(static_cast<std::uint32_t>(s));
    } else {
      c.x[r] = cvt<TC>(s);
    }
  }
}
#else
template <int M, int N, int K, typename TA, typename TB, typename TC>
struct sync_op;

#define CHOREO_MMA_ARGS_A4 "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3])
#define CHOREO_MMA_ARGS_A2 "r"(a[0]), "r"(a[1])
#define CHOREO_MMA_ARGS_B2 "r"(b[0]), "r"(b[1])
#define CHOREO_MMA_ARGS_B1 "r"(b[0])

// f32 (or s32) accumulators, 4 of them: {d0..d3}, {a...}, {b...}, {d0..d3}.
#define CHOREO_MMA_C4(M_, N_, K_, TA, TB, TC, CON, PTX, AREGS, BREGS, AARGS, BARGS)              \
  template <>                                                                                  \
  struct sync_op<M_, N_, K_, TA, TB, TC> {                                                     \
    __device__ __forceinline__ static void run(TC* d, const std::uint32_t* a,                  \
                                               const std::uint32_t* b) {                       \
      asm volatile(PTX " {%0, %1, %2, %3}, " AREGS ", " BREGS ", {%0, %1, %2, %3};\n"          \
                   : CON(d[0]), CON(d[1]), CON(d[2]), CON(d[3])                                \
                   : AARGS, BARGS);                                                            \
    }                                                                                          \
  };
#define CHOREO_MMA_CON_F(x) "+f"(x)
#define CHOREO_MMA_CON_R(x) "+r"(x)

// f16 accumulators: two f16x2 registers.
#define CHOREO_MMA_H2(M_, N_, K_, TA, TB, PTX, AREGS, BREGS, AARGS, BARGS)                       \
  template <>                                                                                  \
  struct sync_op<M_, N_, K_, TA, TB, __half> {                                                 \
    __device__ __forceinline__ static void run(__half* dh, const std::uint32_t* a,             \
                                               const std::uint32_t* b) {                       \
      std::uint32_t d[2];                                                                      \
      std::memcpy(d, dh, sizeof(d));                                                           \
      asm volatile(PTX " {%0, %1}, " AREGS ", " BREGS ", {%0, %1};\n"                          \
                   : "+r"(d[0]), "+r"(d[1])                                                    \
                   : AARGS, BARGS);                                                            \
      std::memcpy(dh, d, sizeof(d));                                                           \
    }                                                                                          \
  };

#define CHOREO_A4 "{%4, %5, %6, %7}"
#define CHOREO_A2 "{%4, %5}"
#define CHOREO_B2_A4 "{%8, %9}"
#define CHOREO_B1_A4 "{%8}"
#define CHOREO_B1_A2 "{%6}"
#define CHOREO_H_A4 "{%2, %3, %4, %5}"
#define CHOREO_H_A2 "{%2, %3}"
#define CHOREO_H_B2_A4 "{%6, %7}"
#define CHOREO_H_B1_A4 "{%6}"
#define CHOREO_H_B1_A2 "{%4}"

// f16 / bf16
CHOREO_MMA_C4(16, 8, 16, __half, __half, float, CHOREO_MMA_CON_F,
              "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", CHOREO_A4, CHOREO_B2_A4,
              CHOREO_MMA_ARGS_A4, CHOREO_MMA_ARGS_B2)
CHOREO_MMA_C4(16, 8, 8, __half, __half, float, CHOREO_MMA_CON_F,
              "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32", CHOREO_A2, CHOREO_B1_A2,
              CHOREO_MMA_ARGS_A2, CHOREO_MMA_ARGS_B1)
CHOREO_MMA_C4(16, 8, 16, __nv_bfloat16, __nv_bfloat16, float, CHOREO_MMA_CON_F,
              "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", CHOREO_A4, CHOREO_B2_A4,
              CHOREO_MMA_ARGS_A4, CHOREO_MMA_ARGS_B2)
CHOREO_MMA_C4(16, 8, 8, __nv_bfloat16, __nv_bfloat16, float, CHOREO_MMA_CON_F,
              "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32", CHOREO_A2, CHOREO_B1_A2,
              CHOREO_MMA_ARGS_A2, CHOREO_MMA_ARGS_B1)
CHOREO_MMA_H2(16, 8, 16, __half, __half, "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
              CHOREO_H_A4, CHOREO_H_B2_A4, CHOREO_MMA_ARGS_A4, CHOREO_MMA_ARGS_B2)
CHOREO_MMA_H2(16, 8, 8, __half, __half, "mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16",
              CHOREO_H_A2, CHOREO_H_B1_A2, CHOREO_MMA_ARGS_A2, CHOREO_MMA_ARGS_B1)
// tf32 (f32 operands)
CHOREO_MMA_C4(16, 8, 8, float, float, float, CHOREO_MMA_CON_F,
              "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", CHOREO_A4, CHOREO_B2_A4,
              CHOREO_MMA_ARGS_A4, CHOREO_MMA_ARGS_B2)
CHOREO_MMA_C4(16, 8, 4, float, float, float, CHOREO_MMA_CON_F,
              "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32", CHOREO_A2, CHOREO_B1_A2,
              CHOREO_MMA_ARGS_A2, CHOREO_MMA_ARGS_B1)
// 8-bit integers (any mix of signedness)
#define CHOREO_MMA_INT(TA, TB, SA, SB)                                                          \
  CHOREO_MMA_C4(16, 8, 32, TA, TB, std::int32_t, CHOREO_MMA_CON_R,                              \
                "mma.sync.aligned.m16n8k32.row.col.s32." SA "." SB ".s32", CHOREO_A4,           \
                CHOREO_B2_A4, CHOREO_MMA_ARGS_A4, CHOREO_MMA_ARGS_B2)                           \
  CHOREO_MMA_C4(16, 8, 16, TA, TB, std::int32_t, CHOREO_MMA_CON_R,                              \
                "mma.sync.aligned.m16n8k16.row.col.s32." SA "." SB ".s32", CHOREO_A2,           \
                CHOREO_B1_A2, CHOREO_MMA_ARGS_A2, CHOREO_MMA_ARGS_B1)                           \
  template <>                                                                                  \
  struct sync_op<8, 8, 16, TA, TB, std::int32_t> {                                             \
    __device__ __forceinline__ static void run(std::int32_t* d, const std::uint32_t* a,        \
                                               const std::uint32_t* b) {                       \
      asm volatile("mma.sync.aligned.m8n8k16.row.col.s32." SA "." SB                           \
                   ".s32 {%0, %1}, {%2}, {%3}, {%0, %1};\n"                                    \
                   : "+r"(d[0]), "+r"(d[1])                                                    \
                   : "r"(a[0]), "r"(b[0]));                                                    \
    }                                                                                          \
  };
CHOREO_MMA_INT(std::int8_t, std::int8_t, "s8", "s8")
CHOREO_MMA_INT(std::int8_t, std::uint8_t, "s8", "u8")
CHOREO_MMA_INT(std::uint8_t, std::int8_t, "u8", "s8")
CHOREO_MMA_INT(std::uint8_t, std::uint8_t, "u8", "u8")
// fp8 (sm_89+; any mix), f32 or f16 accumulators
#define CHOREO_MMA_FP8(TA, TB, SA, SB)                                                          \
  CHOREO_MMA_C4(16, 8, 32, TA, TB, float, CHOREO_MMA_CON_F,                                     \
                "mma.sync.aligned.m16n8k32.row.col.f32." SA "." SB ".f32", CHOREO_A4,           \
                CHOREO_B2_A4, CHOREO_MMA_ARGS_A4, CHOREO_MMA_ARGS_B2)                           \
  CHOREO_MMA_H2(16, 8, 32, TA, TB, "mma.sync.aligned.m16n8k32.row.col.f16." SA "." SB ".f16",  \
                CHOREO_H_A4, CHOREO_H_B2_A4, CHOREO_MMA_ARGS_A4, CHOREO_MMA_ARGS_B2)
CHOREO_MMA_FP8(__nv_fp8_e4m3, __nv_fp8_e4m3, "e4m3", "e4m3")
CHOREO_MMA_FP8(__nv_fp8_e4m3, __nv_fp8_e5m2, "e4m3", "e5m2")
CHOREO_MMA_FP8(__nv_fp8_e5m2, __nv_fp8_e4m3, "e5m2", "e4m3")
CHOREO_MMA_FP8(__nv_fp8_e5m2, __nv_fp8_e5m2, "e5m2", "e5m2")

// f64: operands are 64-bit registers.
template <int M, int N, int K>
struct sync_op_f64;
template <>
struct sync_op_f64<8, 8, 4> {
  __device__ __forceinline__ static void run(double* d, const double* a, const double* b) {
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
                 : "+d"(d[0]), "+d"(d[1])
                 : "d"(a[0]), "d"(b[0]));
  }
};
template <>
struct sync_op_f64<16, 8, 4> {
  __device__ __forceinline__ static void run(double* d, const double* a, const double* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
        "{%0, %1, %2, %3};\n"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a[0]), "d"(a[1]), "d"(b[0]));
  }
};
template <>
struct sync_op_f64<16, 8, 8> {
  __device__ __forceinline__ static void run(double* d, const double* a, const double* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
  }
};
template <>
struct sync_op_f64<16, 8, 16> {
  __device__ __forceinline__ static void run(double* d, const double* a, const double* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3};\n"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
          "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
  }
};

template <int M, int N, int K, typename TA, typename TB, typename TC>
__device__ __forceinline__ void sync_mma(sync_frag<2, M, N, K, TC>& c,
                                         const sync_frag<0, M, N, K, TA>& a,
                                         const sync_frag<1, M, N, K, TB>& b, int lane) {
  (void)lane;
  if constexpr (std::is_same<TC, double>::value) {
    sync_op_f64<M, N, K>::run(c.x, a.x, b.x);
  } else {
    constexpr int na = sizeof(a.x) / 4, nb = sizeof(b.x) / 4;
    std::uint32_t ra[na], rb[nb];
    std::memcpy(ra, a.x, sizeof(ra));
    std::memcpy(rb, b.x, sizeof(rb));
    sync_op<M, N, K, TA, TB, TC>::run(c.x, ra, rb);
  }
}
#endif

// -- sparse mma.sync (spec-tier3 §5.4 "Sparse", §10.4) --------------------------------------------

// The metadata of a 2:4-sparse M x K operand A. In memory (and in Choreo) it is META u8 [M, K/8]:
// byte k/8 of row m, low nibble for the group of four k mod 8 in 0..3, high nibble for 4..7;
// nibble = i0 | i1 << 2, the positions (i0 < i1) of the group's two kept values, which appear
// in that order in the compressed [M, K/2] A.
// GPU: the 32-bit metadata register of mma.sp with sparsity selector 0 (PTX ISA, sparse
// mma.m16n8k16/k32 .f16/.bf16): thread (g = lane / 4, q = lane % 4) with q < K / 16 holds the
// metadata of K chunk q (logical k 16q..16q+15): bits 0..15 for row g, bits 16..31 for row
// g + 8 (group j of the chunk at bits 4j..4j+3 of its half) -- the nibble stream of rows g and
// g + 8, two bytes each. The other threads' registers are not read.
// fp8 m16n8k64 (K 64) is different, as measured on an H200 (`ci/probes/sparse8/`): all four
// threads hold metadata, thread q ONE row, g + 8 (q & 1), and half its groups, 8 (q >> 1) ..
// 8 (q >> 1) + 7 (group 8 (q >> 1) + j at bits 4j..4j+3): the four bytes
// META[g + 8 (q & 1)][4 (q >> 1) + b], b = 0..3.
// CPU: every lane holds the whole META tile.
template <int M, int K>
struct sp_meta {
  static_assert(K % 16 == 0, "sparse mma.sync metadata covers K in chunks of 16");
#if defined(__CHOREO_CPU__)
  static constexpr int num_elements = M * K / 8;
  std::uint8_t x[num_elements];
#else
  static constexpr int num_elements = 1;
  std::uint32_t x[1];
#endif
};

// Metadata byte (m, c) at p[m * sm + c * sc].
template <int M, int K, typename S>
__device__ __forceinline__ void sp_meta_load(sp_meta<M, K>& f, int lane, const S* p, long long sm,
                                             long long sc) {
#if defined(__CHOREO_CPU__)
  (void)lane;
  for (int m = 0; m < M; ++m)
    for (int c = 0; c < K / 8; ++c) f.x[m * (K / 8) + c] = static_cast<std::uint8_t>(p[m * sm + c * sc]);
#else
  static_assert(M == 16, "sparse mma.sync is m16n8");
  const int g = lane >> 2, q = lane & 3;
  std::uint32_t v = 0;
  if constexpr (K == 64) {
    const int r = g + 8 * (q & 1);
    for (int b = 0; b < 4; ++b)
      v |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(p[r * sm + (4 * (q >> 1) + b) * sc]))
           << (8 * b);
  } else if (q < K / 16) {
    for (int b = 0; b < 2; ++b) {
      v |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(p[g * sm + (2 * q + b) * sc]))
           << (8 * b);
      v |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(p[(g + 8) * sm + (2 * q + b) * sc]))
           << (16 + 8 * b);
    }
  }
  f.x[0] = v;
#endif
}

#if defined(__CHOREO_CPU__)
// acc(m, n) += sum over the groups j of four: A'(m, 2j) * B(4j + i0, n) + A'(m, 2j + 1) *
// B(4j + i1, n), with A' the compressed operand (whole in every lane).
template <int M, int N, int K, typename TA, typename TB, typename TC>
__device__ __forceinline__ void sp_mma(sync_frag<2, M, N, K, TC>& c,
                                       const sync_frag<0, M, N, K / 2, TA>& a,
                                       const sync_frag<1, M, N, K, TB>& b, const sp_meta<M, K>& e,
                                       int lane) {
  using W = typename wide<TC>::type;
  for (int r = 0; r < c.num_elements; ++r) {
    int m, n;
    c_coord(lane, r, m, n);
    W s = static_cast<W>(c.x[r]);
    for (int j = 0; j < K / 4; ++j) {
      const int nib = (e.x[m * (K / 8) + j / 2] >> (4 * (j % 2))) & 0xF;
      const int i0 = nib & 3, i1 = nib >> 2;
      s += static_cast<W>(a.x[m * (K / 2) + 2 * j]) * static_cast<W>(b.x[(4 * j + i0) * N + n]);
      s += static_cast<W>(a.x[m * (K / 2) + 2 * j + 1]) * static_cast<W>(b.x[(4 * j + i1) * N + n]);
    }
    c.x[r] = cvt<TC>(s);
  }
}
#else
template <int K, typename TA, typename TB, typename TC>
struct sp_op;

// f32 accumulators: {d0..d3}, {a...}, {b...}, {d0..d3}, e, selector 0.
#define CHOREO_SP_F32(K_, TA, TB, PTX, AB)                                                      \
  template <>                                                                                  \
  struct sp_op<K_, TA, TB, float> {                                                            \
    __device__ __forceinline__ static void run(float* d, const std::uint32_t* a,               \
                                               const std::uint32_t* b, std::uint32_t e) {      \
      CHOREO_SP_ASM_F32_##AB(PTX)                                                              \
    }                                                                                          \
  };
#define CHOREO_SP_ASM_F32_2(PTX)                                                               \
  asm volatile(PTX " {%0, %1, %2, %3}, {%4, %5}, {%6, %7}, {%0, %1, %2, %3}, %8, 0x0;\n"         \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                \
               : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(b[1]), "r"(e));
#define CHOREO_SP_ASM_F32_4(PTX)                                                               \
  asm volatile(PTX " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9, %10, %11}, "                  \
                   "{%0, %1, %2, %3}, %12, 0x0;\n"                                             \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]),  \
                 "r"(b[3]), "r"(e));
// f16 accumulators: two f16x2 registers.
#define CHOREO_SP_F16(K_, TA, TB, PTX, AB)                                                      \
  template <>                                                                                  \
  struct sp_op<K_, TA, TB, __half> {                                                           \
    __device__ __forceinline__ static void run(__half* dh, const std::uint32_t* a,             \
                                               const std::uint32_t* b, std::uint32_t e) {      \
      std::uint32_t d[2];                                                                      \
      std::memcpy(d, dh, sizeof(d));                                                           \
      CHOREO_SP_ASM_F16_##AB(PTX)                                                              \
      std::memcpy(dh, d, sizeof(d));                                                           \
    }                                                                                          \
  };
#define CHOREO_SP_ASM_F16_2(PTX)                                                               \
  asm volatile(PTX " {%0, %1}, {%2, %3}, {%4, %5}, {%0, %1}, %6, 0x0;\n"                         \
               : "+r"(d[0]), "+r"(d[1])                                                        \
               : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(b[1]), "r"(e));
#define CHOREO_SP_ASM_F16_4(PTX)                                                               \
  asm volatile(PTX " {%0, %1}, {%2, %3, %4, %5}, {%6, %7, %8, %9}, {%0, %1}, %10, 0x0;\n"        \
               : "+r"(d[0]), "+r"(d[1])                                                        \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]),  \
                 "r"(b[3]), "r"(e));

// ::ordered_metadata: the two indices of a group are in increasing order (§5.4 says i0 < i1).
// PTX before 8.5 (nvcc before 12.5) has only the plain `.sp` form, which reads the same
// metadata and gives the same result when it is ordered.
#ifndef CHOREO_MMA_SP
#if defined(__CUDACC_VER_MAJOR__) && \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 5))
#define CHOREO_MMA_SP "mma.sp::ordered_metadata"
#else
#define CHOREO_MMA_SP "mma.sp"
#endif
#endif
CHOREO_SP_F32(16, __half, __half,
              CHOREO_MMA_SP ".sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 2)
CHOREO_SP_F32(32, __half, __half,
              CHOREO_MMA_SP ".sync.aligned.m16n8k32.row.col.f32.f16.f16.f32", 4)
CHOREO_SP_F32(16, __nv_bfloat16, __nv_bfloat16,
              CHOREO_MMA_SP ".sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 2)
CHOREO_SP_F32(32, __nv_bfloat16, __nv_bfloat16,
              CHOREO_MMA_SP ".sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32", 4)
CHOREO_SP_F16(16, __half, __half,
              CHOREO_MMA_SP ".sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", 2)
CHOREO_SP_F16(32, __half, __half,
              CHOREO_MMA_SP ".sync.aligned.m16n8k32.row.col.f16.f16.f16.f16", 4)
// fp8 m16n8k64 (sm_90 per spec-tier3 §5.3 table S; any mix of e4m3 and e5m2): A is the
// compressed [16, 32] (4 registers, the layout of the dense m16n8k32 fp8 A), B [64, 8] (4
// registers: register j holds k 16j + 4q .. 16j + 4q + 3 of column g; both confirmed by
// ci/probes/sparse8). Metadata: all four threads of a group contribute (selector 0), in the
// layout sp_meta_load describes (measured, not the 16-bit one).
// f32 accumulators only: ptxas rejects an f16 accumulator with fp8 operands on sm_90a.
#define CHOREO_SP_FP8(TA, TB, SA, SB)                                                           \
  CHOREO_SP_F32(64, TA, TB,                                                                    \
                CHOREO_MMA_SP ".sync.aligned.m16n8k64.row.col.f32." SA "." SB ".f32", 4)
CHOREO_SP_FP8(__nv_fp8_e4m3, __nv_fp8_e4m3, "e4m3", "e4m3")
CHOREO_SP_FP8(__nv_fp8_e4m3, __nv_fp8_e5m2, "e4m3", "e5m2")
CHOREO_SP_FP8(__nv_fp8_e5m2, __nv_fp8_e4m3, "e5m2", "e4m3")
CHOREO_SP_FP8(__nv_fp8_e5m2, __nv_fp8_e5m2, "e5m2", "e5m2")

template <int M, int N, int K, typename TA, typename TB, typename TC>
__device__ __forceinline__ void sp_mma(sync_frag<2, M, N, K, TC>& c,
                                       const sync_frag<0, M, N, K / 2, TA>& a,
                                       const sync_frag<1, M, N, K, TB>& b, const sp_meta<M, K>& e,
                                       int lane) {
  (void)lane;
  constexpr int na = sizeof(a.x) / 4, nb = sizeof(b.x) / 4;
  std::uint32_t ra[na], rb[nb];
  std::memcpy(ra, a.x, sizeof(ra));
  std::memcpy(rb, b.x, sizeof(rb));
  sp_op<K, TA, TB, TC>::run(c.x, ra, rb, e.x[0]);
}
#endif

// -- WMMA ----------------------------------------------------------------------------------------

#if defined(__CHOREO_CPU__)
// The whole tile in every lane: A (m, k) at m*K + k, B (k, n) at k*N + n, C (m, n) at m*N + n.
template <int Role, int M, int N, int K, typename T, bool KMajor>
struct wmma_frag {
  static constexpr int num_elements = Role == 0 ? M * K : Role == 1 ? K * N : M * N;
  T x[num_elements];
};
template <int M, int N, int K, typename T, bool KMajor>
using wmma_a = wmma_frag<0, M, N, K, T, KMajor>;
template <int M, int N, int K, typename T, bool KMajor>
using wmma_b = wmma_frag<1, M, N, K, T, KMajor>;
template <int M, int N, int K, typename T>
using wmma_c = wmma_frag<2, M, N, K, T, true>;
#else
namespace wm = nvcuda::wmma;
template <typename T>
struct wmma_elem {
  using type = T;
};
template <>
struct wmma_elem<float> {
  using type = wm::precision::tf32;
};
template <int M, int N, int K, typename T, bool KMajor>
using wmma_a = wm::fragment<wm::matrix_a, M, N, K, typename wmma_elem<T>::type,
                            typename std::conditional<KMajor, wm::row_major, wm::col_major>::type>;
template <int M, int N, int K, typename T, bool KMajor>
using wmma_b = wm::fragment<wm::matrix_b, M, N, K, typename wmma_elem<T>::type,
                            typename std::conditional<KMajor, wm::col_major, wm::row_major>::type>;
template <int M, int N, int K, typename T>
using wmma_c = wm::fragment<wm::accumulator, M, N, K, T>;
#endif

// WMMA reads and writes rows of `ldm` elements: the address must be 32-byte aligned and the
// pitch a multiple of 16 bytes (a misaligned tile traps on both backends).
template <typename S>
__device__ __forceinline__ void wmma_check(const S* p, long long ldm) {
  if (reinterpret_cast<std::uintptr_t>(p) % 32 != 0 || (ldm * sizeof(S)) % 16 != 0) __trap();
}

// Operand A (Role 0) or B (Role 1): K-major A is [M, K] row-major, else [K, M]; K-major B is
// [N, K] (col_major B), else [K, N].
template <int Role, bool Tf32, int M, int N, int K, typename T, bool KMajor, typename F,
          typename S>
__device__ __forceinline__ void wmma_load(F& f, int lane, const S* p, long long ldm) {
  (void)lane;
  wmma_check(p, ldm);
#if defined(__CHOREO_CPU__)
  for (int r = 0; r < (Role == 0 ? M : K); ++r)
    for (int c = 0; c < (Role == 0 ? K : N); ++c) {
      // Element (r, c) of A (m, k) or B (k, n).
      long long off;
      if (Role == 0) off = KMajor ? r * ldm + c : c * ldm + r;
      else off = KMajor ? c * ldm + r : r * ldm + c;
      f.x[r * (Role == 0 ? K : N) + c] = operand<T, Tf32>(p[off]);
    }
#else
  using E = typename std::conditional<Tf32, float, T>::type;
  wm::load_matrix_sync(f, reinterpret_cast<const E*>(p), static_cast<unsigned>(ldm));
  if constexpr (Tf32) {
    for (int i = 0; i < f.num_elements; ++i) f.x[i] = wm::__float_to_tf32(f.x[i]);
  }
#endif
}

// The accumulator from a row-major [M, N] tile.
template <int M, int N, int K, typename T, typename S>
__device__ __forceinline__ void wmma_load_c(wmma_c<M, N, K, T>& f, int lane, const S* p,
                                            long long ldm) {
  (void)lane;
  wmma_check(p, ldm);
#if defined(__CHOREO_CPU__)
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) f.x[m * N + n] = cvt<T>(p[m * ldm + n]);
#else
  wm::load_matrix_sync(f, reinterpret_cast<const T*>(p), static_cast<unsigned>(ldm),
                       wm::mem_row_major);
#endif
}

// The accumulator into a [M, N] (or, transposed, [N, M]) tile of D: D is T, or f16/f32 for a
// f32/f16 accumulator (converted element by element: both accumulators share a layout).
template <bool Transpose, int M, int N, int K, typename T, typename D>
__device__ __forceinline__ void wmma_store(const wmma_c<M, N, K, T>& f, int lane, D* p,
                                           long long ldm) {
  wmma_check(p, ldm);
#if defined(__CHOREO_CPU__)
  for (int e = lane; e < M * N; e += 32) {
    const int m = e / N, n = e % N;
    p[Transpose ? n * ldm + m : m * ldm + n] = cvt<D>(f.x[e]);
  }
#else
  (void)lane;
  const auto layout = Transpose ? wm::mem_col_major : wm::mem_row_major;
  if constexpr (std::is_same<D, T>::value) {
    wm::store_matrix_sync(p, f, static_cast<unsigned>(ldm), layout);
  } else {
    wmma_c<M, N, K, D> g;
    for (int i = 0; i < g.num_elements; ++i) g.x[i] = cvt<D>(f.x[i]);
    wm::store_matrix_sync(p, g, static_cast<unsigned>(ldm), layout);
  }
#endif
}

// A masked store of the accumulator (`mma.store.mask`, or a tile smaller than the accumulator):
// only the elements (m, n) with m < rows and n < cols are written, converted to D, at
// p[m * ldm + n] (p[n * ldm + m] transposed). store_matrix_sync cannot mask and the fragment
// layout is opaque, so on the GPU the warp stores the whole accumulator, row-major, into its
// own slot of a shared staging area (`Warps` slots: one per warp of the block, indexed by
// threadIdx.x / 32), and its lanes then copy the selected elements; __syncwarp() orders the
// slot's writes and reads. An unmasked, aligned store goes straight to memory.
template <bool Transpose, int Warps, int M, int N, int K, typename T, typename D>
__device__ __forceinline__ void wmma_store_mask(const wmma_c<M, N, K, T>& f, int lane, D* p,
                                                long long ldm, int rows, int cols) {
#if defined(__CHOREO_CPU__)
  for (int e = lane; e < M * N; e += 32) {
    const int m = e / N, n = e % N;
    if (m < rows && n < cols) p[Transpose ? n * ldm + m : m * ldm + n] = cvt<D>(f.x[e]);
  }
#else
  if (rows >= M && cols >= N && reinterpret_cast<std::uintptr_t>(p) % 32 == 0 &&
      (ldm * static_cast<long long>(sizeof(D))) % 16 == 0) {
    wmma_store<Transpose>(f, lane, p, ldm);
    return;
  }
  __shared__ __align__(32) T stage[Warps][M * N];
  T* s = stage[(threadIdx.x / 32) % Warps];
  __syncwarp();
  wm::store_matrix_sync(s, f, static_cast<unsigned>(N), wm::mem_row_major);
  __syncwarp();
  for (int e = lane; e < M * N; e += 32) {
    const int m = e / N, n = e % N;
    if (m < rows && n < cols) p[Transpose ? n * ldm + m : m * ldm + n] = cvt<D>(s[e]);
  }
  __syncwarp();
#endif
}

template <int M, int N, int K, typename T, typename FA, typename FB>
__device__ __forceinline__ void wmma_mma(wmma_c<M, N, K, T>& c, const FA& a, const FB& b) {
#if defined(__CHOREO_CPU__)
  using W = typename std::conditional<
      std::is_same<T, double>::value, double,
      typename std::conditional<std::is_integral<T>::value, long long, float>::type>::type;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      W s = static_cast<W>(c.x[m * N + n]);
      for (int k = 0; k < K; ++k)
        s += static_cast<W>(a.x[m * K + k]) * static_cast<W>(b.x[k * N + n]);
      if constexpr (std::is_integral<T>::value) {
        c.x[m * N + n] = static_cast<T>(static_cast<std::uint32_t>(s));
      } else {
        c.x[m * N + n] = cvt<T>(s);
      }
    }
#else
  wm::mma_sync(c, a, b, c);
#endif
}

}  // namespace CHOREO_MMA_NS
