// Fragment operations of generated code (choreo-compiler, emit::cuda; spec-tier3 §6): the
// element coordinates of the fragment layouts of §6.1, the accumulator bridges of `apply` and
// `copy`, row reductions, `all_reduce_sum` and the RS-mode WGMMA operands built from a fragment
// (`to_afrag`, `to_afrag_quad`). The translator pastes this file only into files whose
// functions use shaped fragments or fragment operations, preceded by
// `#define CHOREO_FRAG_NS __choreo_frag_<hash of this file>[_cpu]`.
//
// Layout codes: 0 WGMMA_ACC (64 x N, 128 threads), 1 SYNC_ACC (16 x 8, 32 lanes), 2 and 3
// REPLICATED_1D of the rows of WGMMA_ACC / SYNC_ACC (two registers per thread, four copies of
// each row: the threads t with equal t / 4), 4 UNIFORM (element r·T + t, row-major).
// The same text runs on the GPU and on the CPU (whose warp shuffles exchange the registers of
// the fibres of a warp).
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace CHOREO_FRAG_NS {

// The arithmetic type of an element type: double, long long for integers, float otherwise
// (f16, bf16 and the narrow floats).
template <typename T>
struct wide {
  using type = typename std::conditional<
      std::is_same<T, double>::value, double,
      typename std::conditional<std::is_integral<T>::value, long long, float>::type>::type;
};

template <typename D, typename S>
__device__ __forceinline__ D to(S v) {
  using W = typename std::conditional<
      std::is_integral<D>::value && std::is_integral<S>::value, long long,
      typename std::conditional<std::is_same<D, double>::value || std::is_same<S, double>::value,
                                double, float>::type>::type;
  return static_cast<D>(static_cast<W>(v));
}

// Coordinate K (0 row, 1 column, 2 flat element) of register r of this thread in layout L of a
// fragment with Cols columns (1 for 1-D), distributed over T threads.
template <int L, int K, int Cols, int T>
__device__ __forceinline__ int index(int r) {
  const int t = static_cast<int>(threadIdx.x) & (T - 1);
  int row = 0, col = 0;
  if constexpr (L == 0) {
    row = 16 * (t / 32) + (t % 32) / 4 + 8 * ((r % 4) / 2);
    col = 8 * (r / 4) + 2 * (t % 4) + r % 2;
  } else if constexpr (L == 1) {
    row = t / 4 + 8 * (r / 2);
    col = 2 * (t % 4) + r % 2;
  } else if constexpr (L == 2) {
    row = 16 * (t / 32) + (t % 32) / 4 + 8 * r;
  } else if constexpr (L == 3) {
    row = t / 4 + 8 * r;
  } else {
    const int e = r * T + t;
    if constexpr (K == 2) return e;
    row = e / Cols;
    col = e % Cols;
  }
  return K == 0 ? row : K == 1 ? col : row * Cols + col;
}

// The REPLICATED_1D register that holds the row of register r of a 2-D fragment of layout L
// (0 WGMMA_ACC, 1 SYNC_ACC).
template <int L>
__device__ __forceinline__ int row_reg(int r) {
  return L == 0 ? (r % 4) / 2 : r / 2;
}

// Element e of an accumulator: WGMMA accumulators have get/set (16-bit ones pack two
// elements per register), mma.sync ones an array x.
template <typename F>
__device__ __forceinline__ auto get(const F& f, int e, int) -> decltype(f.get(e)) {
  return f.get(e);
}
template <typename F>
__device__ __forceinline__ auto get(const F& f, int e, long)
    -> typename std::remove_cv<typename std::remove_reference<decltype(f.x[e])>::type>::type {
  return f.x[e];
}
template <typename F, typename V>
__device__ __forceinline__ auto set(F& f, int e, V v, int) -> decltype(f.set(e, v), void()) {
  using E = decltype(f.get(e));
  f.set(e, to<E>(v));
}
template <typename F, typename V>
__device__ __forceinline__ auto set(F& f, int e, V v, long) -> decltype(void(f.x[e])) {
  using E = typename std::remove_reference<decltype(f.x[e])>::type;
  f.x[e] = to<E>(v);
}

// The thread's `regs` elements of accumulator f into buf (converted), and back.
template <typename F, typename B>
__device__ __forceinline__ void unpack(const F& f, B* buf, int regs) {
  for (int e = 0; e < regs; ++e) buf[e] = to<B>(get(f, e, 0));
}
template <typename F, typename B>
__device__ __forceinline__ void pack(F& f, const B* buf, int regs) {
  for (int e = 0; e < regs; ++e) set(f, e, buf[e], 0);
}

// copy(dst, src) between fragments of one layout.
template <typename D, typename S>
__device__ __forceinline__ void copy(D* dst, const S* src, int regs) {
  for (int e = 0; e < regs; ++e) dst[e] = to<D>(src[e]);
}

// `frag op= v` (spec-tier3 §5.6) of a shaped fragment: Op 0 +, 1 -, 2 *, 3 /.
template <int Op, typename B, typename V>
__device__ __forceinline__ void update(B* buf, int regs, V v) {
  using W = typename wide<B>::type;
  const W s = to<W>(to<B>(v));
  for (int e = 0; e < regs; ++e) {
    const W x = to<W>(buf[e]);
    buf[e] = to<B>(Op == 0 ? x + s : Op == 1 ? x - s : Op == 2 ? x * s : x / s);
  }
}

template <typename W>
__device__ __forceinline__ W quad_shuffle(W v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask);
}

// reduce_max / reduce_sum(dst, src, 1) of a 2-D fragment of layout L (0 WGMMA_ACC, 1 SYNC_ACC):
// the thread's registers of each of its two rows, then the quad's (xor 2, xor 1): every copy
// of a row gets the row's maximum or sum.
template <bool Max, int L, typename D, typename S>
__device__ __forceinline__ void reduce(D* dst, const S* src, int regs) {
  using W = typename wide<S>::type;
  for (int h = 0; h < 2; ++h) {
    bool first = true;
    W acc = W(0);
    for (int r = 0; r < regs; ++r) {
      if (row_reg<L>(r) != h) continue;
      const W x = to<W>(src[r]);
      acc = first ? x : Max ? (x > acc ? x : acc) : acc + x;
      first = false;
    }
    for (int m = 2; m >= 1; m /= 2) {
      const W o = quad_shuffle(acc, m);
      acc = Max ? (o > acc ? o : acc) : acc + o;
    }
    dst[h] = to<D>(acc);
  }
}

// all_reduce_sum(v) of a REPLICATED_1D fragment: each copy becomes the sum of the four.
template <typename D>
__device__ __forceinline__ void all_reduce_sum(D* v) {
  using W = typename wide<D>::type;
  for (int h = 0; h < 2; ++h) {
    W acc = to<W>(v[h]);
    for (int m = 2; m >= 1; m /= 2) acc += quad_shuffle(acc, m);
    v[h] = to<D>(acc);
  }
}

// RS mode from a fragment (spec-tier3 §5.4, §10.3): operand A (`wg_afrag<K, 2>`, 16-bit) from
// columns c0 .. c0 + K of a 64 x N fragment of 16-bit elements in WGMMA_ACC layout. Operand
// register j of K atom kt holds (a_frag_row(t, j), columns c0 + 16kt + a_frag_col(t, j, {0, 1}))
// = (row 16(t/32) + (t%32)/4 + 8(j%2), columns c0 + 16kt + 8(j/2) + 2(t%4) + {0, 1}): the
// fragment's registers 4(c0/8 + 2kt + j/2) + 2(j%2) + {0, 1} of the same thread.
template <int K, typename A, typename B>
__device__ __forceinline__ void to_afrag(A& a, const B* buf, int c0) {
  static_assert(sizeof(B) == 2, "RS-mode operands from an accumulator are 16-bit");
  const auto bits = [&](int r) {
    std::uint16_t h;
    std::memcpy(&h, &buf[r], 2);
    return static_cast<std::uint32_t>(h);
  };
  for (int kt = 0; kt < K / 16; ++kt) {
    for (int j = 0; j < 4; ++j) {
      const int r = 4 * (c0 / 8 + 2 * kt + j / 2) + 2 * (j % 2);
      a.r[kt][j] = bits(r) | bits(r + 1) << 16;
    }
  }
}

// `c ? x : y` that the GPU compiler cannot turn into a load from a lane-dependent address: with
// x and y two registers of a local array, `c ? buf[i + 1] : buf[i]` becomes `buf[i + c]`, which
// puts the whole array in local memory. `selp` keeps both operands in registers.
__device__ __forceinline__ std::uint32_t pick(bool c, std::uint32_t x, std::uint32_t y) {
#if defined(__CUDA_ARCH__)
  std::uint32_t r;
  asm("{\n.reg .pred p;\nsetp.ne.u32 p, %3, 0;\nselp.b32 %0, %1, %2, p;\n}\n"
      : "=r"(r)
      : "r"(x), "r"(y), "r"(static_cast<std::uint32_t>(c)));
  return r;
#else
  return c ? x : y;
#endif
}

// RS mode from an 8-bit or tf32 fragment (spec-tier3 §5.4, §10.3): operand A (`wg_afrag<K, B>`,
// B = sizeof(E) = 1: atoms of 32 columns; 4: tf32, atoms of 8) from columns c0 .. c0 + K (c0 a
// multiple of the atom) of a 64 x N fragment of E in WGMMA_ACC layout (already converted by
// `copy`: e4m3/e5m2/s8/u8 bytes, or f32 whose bits the tensor cores read as tf32, as `mma.load`
// passes them). Unlike the 16-bit case the operand's columns are not the thread's own: the
// accumulator gives lane (g, q) columns 2q, 2q + 1 of each 8-column block, the operand wants
// 4q .. 4q + 3 (+16) for 8-bit and q (+4) for tf32 (wgmma.cuh's a_frag_row / a_frag_col), all in
// the same rows g, g + 8, so the four lanes of a quad (equal g) exchange registers. Each round
// pairs every reader with a distinct source lane (a shuffle delivers one value per source), so
// a K atom costs four 32-bit shuffles, the data the thread receives. Register indices stay
// constant where c0 is (`pick`, no indexing by lane), so the arrays can live in registers.
template <int K, typename A, typename E>
__device__ __forceinline__ void to_afrag_quad(A& a, const E* buf, int c0) {
  constexpr int B = static_cast<int>(sizeof(E));
  static_assert(B == 1 || B == 4, "to_afrag_quad moves 8-bit or tf32 elements (to_afrag: 16-bit)");
  constexpr int atom = B == 1 ? 32 : 8;
  static_assert(K % atom == 0, "the operand's K is a multiple of the instruction's");
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int q = lane & 3, quad = lane & ~3;
  const int b0 = c0 / 8;  // the chunk's first 8-column block
  const auto bits = [&](int r) {
    std::uint32_t v = 0;
    std::memcpy(&v, &buf[r], B);
    return v;
  };
  for (int kt = 0; kt < K / atom; ++kt) {
    if constexpr (B == 1) {
      // Registers 4c .. 4c + 3 of lane q' hold (row g, columns 8c + 2q' + {0, 1}) and (row
      // g + 8, the same columns): one word. Reader q wants, for half s of the atom (registers
      // 2s: row g, 2s + 1: row g + 8), columns 16s + 4q + {0 .. 3}, i.e. block 4kt + 2s + q/2
      // from lanes 2(q%2) (bytes 0, 1) and 2(q%2) + 1 (bytes 2, 3). In round p it reads
      // bh = p ^ (q/2) from lane 2(q%2) + bh, which in that round sends block blk + (p ^ bh):
      // the reader's (only one reader reads each lane per round).
      const auto word = [&](int c) {  // the bytes of registers 4c .. 4c + 3, from the low bits
        return bits(4 * c) | bits(4 * c + 1) << 8 | bits(4 * c + 2) << 16 | bits(4 * c + 3) << 24;
      };
      for (int s = 0; s < 2; ++s) {
        const int blk = b0 + 4 * kt + 2 * s;
        std::uint32_t lo = 0, hi = 0;  // rows g and g + 8: registers 2s and 2s + 1
        for (int p = 0; p < 2; ++p) {
          const std::uint32_t send = pick((p ^ (q & 1)) != 0, word(blk + 1), word(blk));
          const int bh = p ^ (q >> 1);
          const std::uint32_t got = __shfl_sync(0xffffffffu, send, quad + 2 * (q & 1) + bh);
          lo |= (got & 0xffffu) << (16 * bh);
          hi |= (got >> 16) << (16 * bh);
        }
        a.r[kt][2 * s] = lo;
        a.r[kt][2 * s + 1] = hi;
      }
    } else {
      // Block kt of lane q' holds (row g + 8h, column 2q' + e) in register 4(b0 + kt) + 2h + e.
      // Reader q wants, for half s (registers 2s + h), column q + 4s: lane 2s + q/2 holds it
      // in its registers of parity e = q%2. In round p the reader takes s = p ^ (q%2) from
      // lane 2s + q/2, which in that round sends parity p ^ (its own q/2): the reader's.
      const int r0 = 4 * (b0 + kt);
      for (int p = 0; p < 2; ++p) {
        const int e = p ^ (q >> 1);
        const int s = p ^ (q & 1);
        const int src = quad + 2 * s + (q >> 1);
        const std::uint32_t g0 =
            __shfl_sync(0xffffffffu, pick(e != 0, bits(r0 + 1), bits(r0)), src);
        const std::uint32_t g1 =
            __shfl_sync(0xffffffffu, pick(e != 0, bits(r0 + 3), bits(r0 + 2)), src);
        if (s == 0) {
          a.r[kt][0] = g0;
          a.r[kt][1] = g1;
        } else {
          a.r[kt][2] = g0;
          a.r[kt][3] = g1;
        }
      }
    }
  }
}

}  // namespace CHOREO_FRAG_NS
