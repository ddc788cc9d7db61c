// Sparse WGMMA (choreo-compiler, emit::cuda; spec-tier3 §5.3 table G `.sp`, §5.4 "Sparse",
// §10.3): `wgmma.mma_async.sp` with A the 2:4-compressed [64, K/2] tile (a shared-memory
// descriptor, SS, or registers, RS: a wg_afrag of wgmma_ops.cuh, 16 or 8-bit elements) and
// B the [N, K] tile (a descriptor; both K-major), and the metadata of A in one 32-bit register
// per thread and instruction. Pasted after wgmma.cuh and wgmma_ops.cuh into files that
// execute a sparse WGMMA; the translator writes the instruction `SpMma<Op, N>` of each
// (operation, N) pair the file uses (emit::cuda::wgmma_n).
//
// Metadata in memory (and in Choreo): META u8 [64, K/8] (K the logical K of the execution),
// byte k/8 of row m, low nibble for the group of four k mod 8 in 0..3, high nibble for 4..7;
// nibble = i0 | i1 << 2, the positions (i0 < i1) of the group's two kept values, which appear in
// that order in the compressed A.
//
// The metadata register (GPU), derived from the PTX ISA's sparse wgmma metadata layout and the
// mma.sp layout that e2e 180/181 confirmed on an H200:
// - each warp w (threads 32w..32w+31) of the warpgroup covers rows 16w..16w+15 of A, like its
//   accumulator rows (WGMMA_ACC); in it, thread lane (g = lane / 4, q = lane % 4) serves rows
//   16w + g and 16w + g + 8 -- exactly the m16 rows of an mma.sp of that warp;
// - 16-bit types: one instruction covers a logical K of 32, K / 4 = 8 groups of 4 bits per
//   row, 2 chunks of 16 logical k (16 bits per row); with sparsity selector 0, thread q < 2
//   (the "thread pair" that selector 0 names) holds chunk q: bits 0..15 the 16 bits of row
//   16w + g (group j of the chunk at bits 4j..4j+3), bits 16..31 those of row 16w + g + 8; the
//   bytes of a chunk are META[row][K/8 · kt + 2q] (low) and META[row][K/8 · kt + 2q + 1] (high)
//   for instruction kt of the execution;
// - fp8: one instruction covers a logical K of 64, 16 groups per row, and all four threads of a
//   group hold metadata (selector 0 is the only one). Measured on an H200
//   (`ci/probes/sparse8/`, not derived): thread q holds ONE row, 16w + g + 8 (q & 1), and half
//   of its groups, 8 (q >> 1) .. 8 (q >> 1) + 7, in order (group 8 (q >> 1) + j at bits
//   4j..4j+3): the four bytes META[16w + g + 8 (q & 1)][K/8 · kt + 4 (q >> 1) + b], b = 0..3.
//   (The 16-bit-style guess, rows g and g + 8 in one register, gave wrong sums.)
// The CPU backend computes the same sums from the same META (each thread its own accumulator
// elements), so a wrong GPU mapping shows as a GPU/CPU mismatch in the e2e cross-check.
namespace CHOREO_WGMMA_NS {

// One sparse instruction: `SpMma<Op, N>::ss(d, desc_a, desc_b, e, scale_d)`, or with A in
// registers `SpMma<Op, N>::rs(d, a[4], desc_b, e, scale_d)` (the 4 registers of a dense RS
// atom over the compressed columns: k16 for 16-bit types, k32 for 8-bit ones), Op the dense
// tag (its Traits::k is half the sparse instruction's logical K).
template <class Op, int N>
struct SpMma;

namespace detail {
#if defined(__CHOREO_CPU__)
// d (+)= Â · Bᵀ for one sparse instruction: Â the 64 x K matrix that the compressed atom
// (64 x K/2, compressed element (row, c) is a(row, c), a float) and the metadata rows
// meta[m * pitch ..] describe, B the N x K atom at db. A comes from a descriptor (SS) or
// from registers (RS); only the accessor differs.
template <class Op, int N, class A, class Acc, int R>
inline void sp_cpu(Acc (&d)[R], A a, std::uint64_t db, const std::uint8_t* meta, int pitch,
                   int scale_d) {
  using T = Traits<Op>;
  constexpr int K = 2 * T::k;
  accumulate_cpu<Op>(d, scale_d, [&](int row, int col) {
    float sum = 0.0f;
    for (int g = 0; g < K / 4; ++g) {
      const int nib = (meta[row * pitch + g / 2] >> (4 * (g % 2))) & 0xF;
      const int i0 = nib & 3, i1 = nib >> 2;
      sum += a(row, 2 * g) * load_elem(T::b, operand(db, false, col, 4 * g + i0, T::b));
      sum += a(row, 2 * g + 1) * load_elem(T::b, operand(db, false, col, 4 * g + i1, T::b));
    }
    return sum;
  });
}
#endif
// Another architecture than sm_90a (and the host pass; the CPU takes sp_cpu instead).
CHOREO_WGMMA_DEVICE void sp_unavailable() {
#if defined(__CUDA_ARCH__)
  __trap();
#elif defined(__CHOREO_CPU__)
  std::fprintf(stderr, "choreo: a sparse WGMMA instruction outside the CPU path\n");
  std::abort();
#endif
}
}  // namespace detail

}  // namespace CHOREO_WGMMA_NS

namespace CHOREO_MMA_NS {

// The metadata of a sparse WGMMA over a logical K of `K` (instructions of logical K `AK`):
// GPU: one register per instruction (the layout above); CPU: the whole u8 [64, K/8] tile.
template <int K, int AK>
struct wg_sp_meta {
  static_assert(K % AK == 0 && AK % 16 == 0, "sparse WGMMA metadata covers whole instructions");
  static constexpr int atoms = K / AK;
  std::uint32_t r[atoms];
#if defined(__CHOREO_CPU__)
  std::uint8_t x[64 * (K / 8)];
#endif
};

// `mma.load` of the metadata: byte (m, c) at p[m * sm + c * sc] (through the swizzle Swz of a
// shared buffer of rows x cols elements at `base`, if any); t is the thread in its warpgroup.
template <unsigned Swz, int K, int AK, typename S>
__device__ __forceinline__ void wg_sp_meta_load(wg_sp_meta<K, AK>& f, int t, const S* p,
                                                long long sm, long long sc, const S* base,
                                                unsigned rows, unsigned cols) {
  const auto byte = [&](int m, int c) {
    return static_cast<std::uint32_t>(
        static_cast<std::uint8_t>(*at<Swz>(p + m * sm + c * sc, base, rows, cols)));
  };
  const int w = t / 32, g = (t % 32) / 4, q = t % 4;
  const int r0 = 16 * w + g, r1 = r0 + 8;
  for (int kt = 0; kt < K / AK; ++kt) {
    std::uint32_t v = 0;
    if constexpr (AK == 64) {
      // fp8 (the layout measured by ci/probes/sparse8): one row, four consecutive bytes.
      const int r = (q & 1) ? r1 : r0, c = kt * (AK / 8) + 4 * (q >> 1);
      v = byte(r, c) | byte(r, c + 1) << 8 | byte(r, c + 2) << 16 | byte(r, c + 3) << 24;
    } else if (q < AK / 16) {
      const int c = kt * (AK / 8) + 2 * q;
      v = byte(r0, c) | byte(r0, c + 1) << 8 | byte(r1, c) << 16 | byte(r1, c + 1) << 24;
    }
    f.r[kt] = v;
  }
#if defined(__CHOREO_CPU__)
  for (int m = 0; m < 64; ++m)
    for (int c = 0; c < K / 8; ++c) f.x[m * (K / 8) + c] = static_cast<std::uint8_t>(byte(m, c));
#endif
}

// A metadata tile outside its buffer (a guarded `mma.load`) reads as zeros.
template <int K, int AK, typename V>
__device__ __forceinline__ void fill(wg_sp_meta<K, AK>& f, V) {
  for (int i = 0; i < K / AK; ++i) f.r[i] = 0;
#if defined(__CHOREO_CPU__)
  for (int i = 0; i < 64 * (K / 8); ++i) f.x[i] = 0;
#endif
}

// Instruction kt of a sparse execution: acc += Â(atom kt) · B(atom kt)ᵀ.
template <class Op, int N, int K, int AK>
__device__ __forceinline__ void wg_sp_mma(wg_acc<Op, N>& acc, std::uint64_t da, std::uint64_t db,
                                          const wg_sp_meta<K, AK>& e, int kt) {
  static_assert(2 * CHOREO_WGMMA_NS::Traits<Op>::k == AK, "one instruction per metadata atom");
#if defined(__CHOREO_CPU__)
  using T = CHOREO_WGMMA_NS::Traits<Op>;
  const auto a = [&](int row, int c) {
    const auto* p = CHOREO_WGMMA_NS::detail::operand(da, false, row, c, T::a);
    return CHOREO_WGMMA_NS::detail::load_elem(T::a, p);
  };
  CHOREO_WGMMA_NS::detail::sp_cpu<Op, N>(acc.r, a, db, e.x + kt * (AK / 8), K / 8, 1);
#else
  CHOREO_WGMMA_NS::SpMma<Op, N>::ss(acc.r, da, db, e.r[kt], 1);
#endif
}

// Instruction kt of a sparse execution with A in registers (RS): A's compressed atom kt (the
// columns of one dense RS atom of the [64, K/2] fragment, in its layout: 16 of 16-bit elements,
// 32 of 8-bit ones) and the metadata register kt.
template <class Op, int N, int KA, int B, int K, int AK>
__device__ __forceinline__ void wg_sp_rs(wg_acc<Op, N>& acc, const wg_afrag<KA, B>& a, int kt,
                                         std::uint64_t db, const wg_sp_meta<K, AK>& e) {
  static_assert(2 * CHOREO_WGMMA_NS::Traits<Op>::k == AK, "one instruction per metadata atom");
  constexpr int C = wg_afrag<KA, B>::atom_k;  // compressed columns per instruction
  static_assert(2 * KA == K && 2 * C == AK, "one dense RS atom of A per sparse instruction");
  static_assert(B == 1 || B == 2, "sparse RS operands have 8 or 16-bit elements");
#if defined(__CHOREO_CPU__)
  // The warp's 16 rows of the atom's C compressed columns (wg_gather_a): this thread's
  // accumulator elements read only its own warp's rows.
  using T = CHOREO_WGMMA_NS::Traits<Op>;
  wg_afrag_bits<B> rows[16][C];
  wg_gather_a(a, kt, rows);
  const auto elem = [&](int row, int c) {
    const auto* p = reinterpret_cast<const unsigned char*>(&rows[row % 16][c]);
    return CHOREO_WGMMA_NS::detail::load_elem(T::a, p);
  };
  CHOREO_WGMMA_NS::detail::sp_cpu<Op, N>(acc.r, elem, db, e.x + kt * (AK / 8), K / 8, 1);
#else
  CHOREO_WGMMA_NS::SpMma<Op, N>::rs(acc.r, a.r[kt], db, e.r[kt], 1);
#endif
}

}  // namespace CHOREO_MMA_NS
