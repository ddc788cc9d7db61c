// The WGMMA statements of generated code (choreo-compiler, emit::cuda; spec-tier3 §5.2–§5.5,
// §6.1, §10.3): accumulators, fills, updates, stores and the descriptors of direct shared
// operands, on top of the WGMMA device library (`wgmma.cuh`, namespace CHOREO_WGMMA_NS). The
// translator pastes this file after `mma.cuh` and `wgmma.cuh` into files whose functions execute
// WGMMA; its names live in CHOREO_MMA_NS.
//
// GPU (nvcc, sm_90a): the instructions of wgmma.cuh. CPU (__CHOREO_CPU__): wgmma.cuh's SS path,
// in which each thread computes its own WGMMA_ACC elements at issue from the shared operands (so
// fences, commits and waits have nothing to do).
namespace CHOREO_MMA_NS {

// A WGMMA accumulator: 64 x N over the 128 threads of a warpgroup in the WGMMA_ACC layout
// (§6.1); `num_elements` elements per thread, two per register for f16.
template <class Op, int N>
struct wg_acc {
  using M = CHOREO_WGMMA_NS::Mma<Op, N>;
  using reg = typename M::Acc;
  static constexpr int regs = M::kRegs;
  static constexpr bool half = CHOREO_WGMMA_NS::Traits<Op>::acc == CHOREO_WGMMA_NS::AccKind::F16;
  static constexpr bool integral =
      CHOREO_WGMMA_NS::Traits<Op>::acc == CHOREO_WGMMA_NS::AccKind::S32;
  static constexpr int num_elements = half ? 2 * regs : regs;
  // The arithmetic type of an element.
  using value = typename std::conditional<integral, std::int32_t, float>::type;
  reg r[regs];

  __device__ __forceinline__ value get(int e) const {
    if constexpr (half) {
      const std::uint32_t packed = static_cast<std::uint32_t>(r[e / 2]);
      return CHOREO_WGMMA_NS::half_bits_to_float(
          static_cast<std::uint16_t>(packed >> (16 * (e % 2))));
    } else {
      return static_cast<value>(r[e]);
    }
  }
  __device__ __forceinline__ void set(int e, value v) {
    if constexpr (half) {
      std::uint32_t packed = static_cast<std::uint32_t>(r[e / 2]);
      const std::uint32_t h = CHOREO_WGMMA_NS::float_to_half_bits(static_cast<float>(v));
      packed = (packed & ~(0xffffu << (16 * (e % 2)))) | (h << (16 * (e % 2)));
      r[e / 2] = static_cast<reg>(packed);
    } else {
      r[e] = static_cast<reg>(v);
    }
  }
};

// The thread's index in its warpgroup.
__device__ __forceinline__ int wg_thread() { return static_cast<int>(threadIdx.x) & 127; }

// Every element = v (converted to the accumulator's type); the registers are written outside
// any WGMMA, so the next one fences them (§10.3).
template <class Op, int N, typename V>
__device__ __forceinline__ void fill(wg_acc<Op, N>& f, V v) {
  using E = typename wg_acc<Op, N>::value;
  const E e = cvt<E>(v);
  for (int i = 0; i < wg_acc<Op, N>::num_elements; ++i) f.set(i, e);
}

// `frag op= v` (spec-tier3 §5.6): Op 0 +, 1 -, 2 *, 3 /.
template <int Op, class O, int N, typename V>
__device__ __forceinline__ void update(wg_acc<O, N>& f, V v) {
  using E = typename wg_acc<O, N>::value;
  using W = typename wide<E>::type;
  const W s = static_cast<W>(cvt<E>(v));
  for (int i = 0; i < wg_acc<O, N>::num_elements; ++i) {
    const W x = static_cast<W>(f.get(i));
    f.set(i, cvt<E>(Op == 0 ? x + s : Op == 1 ? x - s : Op == 2 ? x * s : x / s));
  }
}

// The accumulator's elements (m, n) with m < rows and n < cols, converted to D, at
// p[m * sm + n * sn] (WGMMA_ACC: element e of thread t is (acc_row(t, e), acc_col(t, e))).
template <class Op, int N, typename D>
__device__ __forceinline__ void wg_store(const wg_acc<Op, N>& f, int t, D* p, long long sm,
                                         long long sn, int rows, int cols) {
  // Elements 2j and 2j + 1 of a thread are columns n and n + 1 of one row, n even. With unit
  // column stride, an even row stride and a base aligned to a pair, every pair is aligned: the
  // test is made once per store, not per pair (the epilogue of a GEMM tile is 64 pairs per
  // thread), and each pair inside the bounds is one store of 2·sizeof(D) bytes.
  struct alignas(2 * sizeof(D)) pair {
    D lo, hi;
  };
  static_assert(CHOREO_WGMMA_NS::acc_col(0, 0) % 2 == 0 && CHOREO_WGMMA_NS::acc_col(0, 1) == 1,
                "element 2j is an even column, 2j + 1 the next one");
  const bool paired =
      sn == 1 && sm % 2 == 0 && reinterpret_cast<std::uintptr_t>(p) % sizeof(pair) == 0;
  for (int e = 0; e < wg_acc<Op, N>::num_elements; e += 2) {
    const int m = CHOREO_WGMMA_NS::acc_row(t, e), n = CHOREO_WGMMA_NS::acc_col(t, e);
    D* q = p + m * sm + n * sn;
    if (paired && m < rows && n + 1 < cols) {
      *reinterpret_cast<pair*>(q) = pair{cvt<D>(f.get(e)), cvt<D>(f.get(e + 1))};
      continue;
    }
    if (m < rows && n < cols) *q = cvt<D>(f.get(e));
    if (m < rows && n + 1 < cols) q[sn] = cvt<D>(f.get(e + 1));
  }
}

// The block scale (spec-tier3 §5.4): acc(m, n) += tmp(m, n) · SA(m) · sb, with SA(m) =
// sa[m * ssa] (element e of thread t is row acc_row(t, e)), then tmp = 0 for the next
// executions. The registers are written outside any WGMMA, so the next one fences them.
template <class Op, int N>
__device__ __forceinline__ void wg_scale(wg_acc<Op, N>& acc, wg_acc<Op, N>& tmp, int t,
                                         const float* sa, long long ssa, float sb) {
  using E = typename wg_acc<Op, N>::value;
  for (int e = 0; e < wg_acc<Op, N>::num_elements; ++e) {
    const float s = sa[CHOREO_WGMMA_NS::acc_row(t, e) * ssa];
    const float d = static_cast<float>(acc.get(e)) + static_cast<float>(tmp.get(e)) * s * sb;
    acc.set(e, cvt<E>(d));
    tmp.set(e, E(0));
  }
}

// The matrix descriptor (§10.3) of the WGMMA operand whose element (0, 0) (K-major: (mn, k);
// MN-major: (k, mn)) is `e`, in a shared buffer of rows x cols elements at `base` that a copy
// with swizzle Swz filled (§4.2: rows of Swz bytes, column groups of W = Swz / sizeof(T)
// columns stacked, rows·Swz bytes apart). The descriptor's address is the unswizzled byte
// offset (the hardware swizzles the final address); K-major: 8-row groups 8·Swz apart (SBO);
// MN-major: 8-k groups 8·Swz apart (SBO), W-wide MN groups rows·Swz apart (LBO). The operand
// must start on an 8-row group (K-major) or 8-k group and a column group (MN-major), and a
// K-major atom must not cross a column group: the CPU backend traps on anything else (on the GPU
// a conditional trap would be a divergent path, which makes ptxas serialise the wgmmas).
template <unsigned Swz, bool MnMajor, int AtomK, typename T>
__device__ __forceinline__ std::uint64_t wg_desc(const T* base, const T* e, unsigned rows,
                                                 unsigned cols) {
  const unsigned k = static_cast<unsigned>(e - base);
  const unsigned r = k / cols, c = k % cols;
  constexpr unsigned w = Swz / static_cast<unsigned>(sizeof(T));
#if defined(__CHOREO_CPU__)
  if (r % 8 != 0 || (MnMajor ? c % w != 0 : (c % w) % AtomK != 0)) __trap();
#endif
  const unsigned phys = (c % w) + r * w + (c / w) * rows * w;
  // Rows of exactly one column group (`cols` a constant after inlining): phys == k, the
  // address is e's own (spelled out, since nvcc does not fold the sum above back into k).
  const std::uint32_t addr =
      cols == w ? CHOREO_WGMMA_NS::smem_address(e)
                : CHOREO_WGMMA_NS::smem_address(base) + phys * static_cast<unsigned>(sizeof(T));
  if constexpr (MnMajor) {
    return CHOREO_WGMMA_NS::desc_mnmajor(addr, static_cast<int>(Swz), rows * Swz);
  } else {
    return CHOREO_WGMMA_NS::desc_kmajor(addr, static_cast<int>(Swz));
  }
}

// The descriptor `d` (from wg_desc) with its address advanced by `step` 16-byte units: the
// descriptor of a later K atom whose offset from `d`'s is constant. The address field is the
// low 14 bits and stays in shared memory (below 2^18 bytes), so the add never carries out of
// the low word; on the GPU the high word (SBO, swizzle) is passed through untouched, which
// keeps nvcc from widening the add to 64 bits.
__device__ __forceinline__ std::uint64_t wg_desc_add(std::uint64_t d, std::uint32_t step) {
#if defined(__CUDA_ARCH__) && !defined(__CHOREO_CPU__)
  std::uint64_t r;
  asm("{\n.reg .b32 lo, hi;\nmov.b64 {lo, hi}, %1;\nadd.u32 lo, lo, %2;\nmov.b64 %0, {lo, hi};\n}\n"
      : "=l"(r)
      : "l"(d), "r"(step));
  return r;
#else
  return d + step;
#endif
}

// RS mode (§10.3): operand A in registers, a 64 x K tile of B-byte elements (16-bit: K a
// multiple of 16, tf32: of 8, 8-bit: of 32, the K of one instruction): per K atom kt, 4 `.b32`
// registers per thread in the layout of wgmma.cuh's a_frag_row / a_frag_col (the mma.sync A
// fragment layout per warp), 4 / B elements each. Only the registers hold the operand, on the
// CPU too: its wg_rs and wg_sp_rs gather the rows of the thread's warp from the warp's lanes
// (wg_gather_a).
template <int K, int B = 2>
struct wg_afrag {
  static_assert(B == 1 || B == 2 || B == 4, "RS-mode operands have 1, 2 or 4-byte elements");
  static constexpr int atom_k = CHOREO_WGMMA_NS::a_atom_k(B);
  static_assert(K % atom_k == 0, "the tile's K is a multiple of the instruction's");
  static constexpr int atoms = K / atom_k;
  std::uint32_t r[atoms][4];
};

#if defined(__CHOREO_CPU__)
// The raw bits of one B-byte element of an RS-mode operand.
template <int B>
using wg_afrag_bits = typename std::conditional<
    B == 1, std::uint8_t,
    typename std::conditional<B == 2, std::uint16_t, std::uint32_t>::type>::type;

// The warp's 16 rows of A's atom kt, rebuilt from its lanes' registers through the RS layout:
// rows[r][c] = the bits of element (16w + r, c) of the atom, w the calling thread's warp (the
// CPU checks what `mma.load` put in the registers, not the shared tile it came from). Every
// lane of the warp shuffles, so all of them must call this (the RS instructions do: all 128
// threads of the warpgroup execute them).
template <int K, int B>
__device__ __forceinline__ void wg_gather_a(const wg_afrag<K, B>& a, int kt,
                                            wg_afrag_bits<B> (&rows)[16][wg_afrag<K, B>::atom_k]) {
  for (int s = 0; s < 32; ++s) {
    for (int j = 0; j < 4; ++j) {
      const std::uint32_t v = __shfl_sync(0xffffffffu, a.r[kt][j], s);
      for (int b = 0; b < 4 / B; ++b) {
        rows[CHOREO_WGMMA_NS::a_frag_row(s, j)][CHOREO_WGMMA_NS::a_frag_col(s, j, b, B)] =
            static_cast<wg_afrag_bits<B>>(v >> (8 * B * b));
      }
    }
  }
}
#endif

// `mma.load` of A: element (m, k) at p[m * sm + k * sk] (through the swizzle Swz of a shared
// buffer of rows x cols elements at `base`, if any); register j of atom kt packs elements
// (a_frag_row(t, j), a_frag_col(t, j, b, B) + atom_k·kt), element b in bits 8Bb .. 8B(b+1)-1
// (tf32: the f32 bits, of which the tensor cores read 19, as from shared memory).
template <unsigned Swz, int K, int B, typename S>
__device__ __forceinline__ void wg_load_a(wg_afrag<K, B>& f, int t, const S* p, long long sm,
                                          long long sk, const S* base, unsigned rows,
                                          unsigned cols) {
  static_assert(sizeof(S) == B, "the fragment's element size is the source's");
  constexpr int per = 4 / B;
  for (int kt = 0; kt < wg_afrag<K, B>::atoms; ++kt) {
    for (int j = 0; j < 4; ++j) {
      std::uint32_t v = 0;
      for (int b = 0; b < per; ++b) {
        const int m = CHOREO_WGMMA_NS::a_frag_row(t, j);
        const int k = CHOREO_WGMMA_NS::a_frag_col(t, j, b, B) + wg_afrag<K, B>::atom_k * kt;
        std::uint32_t e = 0;
        std::memcpy(&e, at<Swz>(p + m * sm + k * sk, base, rows, cols), B);
        v |= e << (8 * B * b);
      }
      f.r[kt][j] = v;
    }
  }
}

// One RS instruction: d += A(atom kt) · B(the atom at descriptor db).
template <int TB, class Op, int N, int K, int B>
__device__ __forceinline__ void wg_rs(wg_acc<Op, N>& d, const wg_afrag<K, B>& a, int kt,
                                      std::uint64_t db) {
#if defined(__CHOREO_CPU__)
  // The warp's 16 rows of the atom, converted once (this thread's accumulator elements read
  // only its own warp's rows).
  using Tr = CHOREO_WGMMA_NS::Traits<Op>;
  constexpr bool integral = wg_acc<Op, N>::integral;
  using W = typename std::conditional<integral, long long, float>::type;
  constexpr int ak = wg_afrag<K, B>::atom_k;
  static_assert(ak == Tr::k, "the operand's atom is the instruction's K");
  wg_afrag_bits<B> bits[16][ak];
  wg_gather_a(a, kt, bits);
  W rows[16][ak];
  for (int r = 0; r < 16; ++r) {
    for (int k = 0; k < ak; ++k) {
      const auto* bytes = reinterpret_cast<const unsigned char*>(&bits[r][k]);
      if constexpr (integral) {
        rows[r][k] = CHOREO_WGMMA_NS::detail::load_int(Tr::a, bytes);
      } else {
        rows[r][k] = CHOREO_WGMMA_NS::detail::load_elem(Tr::a, bytes);
      }
    }
  }
  const int t = wg_thread();
  for (int e = 0; e < wg_acc<Op, N>::num_elements; ++e) {
    const int m = CHOREO_WGMMA_NS::acc_row(t, e), n = CHOREO_WGMMA_NS::acc_col(t, e);
    W sum = 0;
    for (int k = 0; k < ak; ++k) {
      const auto* bp = CHOREO_WGMMA_NS::detail::operand(db, TB != 0, n, k, Tr::b);
      if constexpr (integral) {
        sum += rows[m % 16][k] * CHOREO_WGMMA_NS::detail::load_int(Tr::b, bp);
      } else {
        sum += rows[m % 16][k] * CHOREO_WGMMA_NS::detail::load_elem(Tr::b, bp);
      }
    }
    using V = typename wg_acc<Op, N>::value;
    d.set(e, static_cast<V>(static_cast<W>(d.get(e)) + sum));
  }
#else
  CHOREO_WGMMA_NS::Mma<Op, N>::template rs<TB>(d.r, a.r[kt], db, 1);
#endif
}

}  // namespace CHOREO_MMA_NS
