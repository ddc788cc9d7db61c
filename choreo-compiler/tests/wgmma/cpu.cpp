// The WGMMA library (src/emit/cuda/wgmma.cuh) on the host, `__CHOREO_CPU__` path (tests/
// wgmma_library.rs): descriptor encoding and decoding, the K-step advance, the WGMMA_ACC
// layout, and SS-mode products computed by the CPU path from tiles laid out as TMA writes them
// (tier 3 §4.2, an independent formula) against a naive GEMM. Prints "ok" on success.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static unsigned char* g_smem = nullptr;
static int g_thread = 0;
#define CHOREO_WGMMA_CPU_SMEM_BASE() (g_smem)
#define CHOREO_WGMMA_CPU_THREAD() (g_thread)
#include "wgmma.cuh"

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::printf("%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)

namespace w = choreo_wgmma;

// §4.1/§4.2, written independently of the library: the byte of element (r, c) of a swizzled
// [R, C] tile of `s`-byte elements.
static unsigned swz(unsigned n, unsigned b) {
  const unsigned mask = n == 128 ? 7 : n == 64 ? 3 : n == 32 ? 1 : 0;
  return b ^ (((b >> 7) & mask) << 4);
}
static unsigned tile_byte(unsigned n, unsigned s, unsigned rows, unsigned r, unsigned c) {
  const unsigned wd = n / s;
  return swz(n, ((c % wd) + r * wd + (c / wd) * rows * wd) * s);
}

static void descriptors() {
  // The well-known encoding of a 128B-swizzled K-major tile at shared address 0x400.
  const std::uint64_t d = w::desc_kmajor(0x400, 128);
  CHECK(d == (0x40ull | (1ull << 16) | (64ull << 32) | (1ull << 62)));
  const w::DescFields f = w::desc_decode(d);
  CHECK(f.addr == 0x400 && f.lbo == 16 && f.sbo == 1024 && f.base_offset == 0);
  CHECK(f.swizzle == w::Swizzle::B128);
  CHECK(w::desc_decode(w::desc_kmajor(0x800, 64)).swizzle == w::Swizzle::B64);
  CHECK(w::desc_decode(w::desc_kmajor(0x800, 64)).sbo == 512);
  CHECK(w::desc_decode(w::desc_kmajor(0x800, 32)).swizzle == w::Swizzle::B32);
  CHECK(w::desc_decode(w::desc_encode(0x3FFF0, 0x3FFF0, 0x10, w::Swizzle::None, 5)).addr ==
        0x3FFF0);
  const w::DescFields g = w::desc_decode(w::desc_encode(0x12340, 0x2000, 0x30, w::Swizzle::B32, 5));
  CHECK(g.addr == 0x12340 && g.lbo == 0x2000 && g.sbo == 0x30 && g.base_offset == 5);
  CHECK(g.swizzle == w::Swizzle::B32);
  const w::DescFields m = w::desc_decode(w::desc_mnmajor(0x1000, 128, 8192));
  CHECK(m.lbo == 8192 && m.sbo == 1024 && m.swizzle == w::Swizzle::B128);
  // The K step: 32 bytes = 2 in the address field.
  CHECK(w::desc_advance(d, 32) == d + 2);
  CHECK(w::desc_decode(w::desc_advance(d, 96)).addr == 0x400 + 96);
  // K-step offsets in a 128-row bf16 tile of 128 columns (two 64-column groups).
  CHECK(w::kmajor_k_offset(0, 16, 2, 128, 128) == 0);
  CHECK(w::kmajor_k_offset(3, 16, 2, 128, 128) == 96);
  CHECK(w::kmajor_k_offset(4, 16, 2, 128, 128) == 128 * 128);
  CHECK(w::kmajor_k_offset(5, 16, 2, 128, 128) == 128 * 128 + 32);
  CHECK(w::kmajor_k_offset(1, 32, 1, 64, 64) == 32);
  CHECK(w::kmajor_k_offset(2, 32, 1, 64, 64) == 64 * 64);
  CHECK(w::mnmajor_k_offset(1, 16, 128) == 2048);
}

static void accumulator_layout() {
  for (int n : {8, 64, 256}) {
    std::vector<int> seen(64 * n, 0);
    for (int t = 0; t < 128; ++t) {
      for (int r = 0; r < n / 2; ++r) {
        const int row = w::acc_row(t, r), col = w::acc_col(t, r);
        CHECK(row >= 0 && row < 64 && col >= 0 && col < n);
        ++seen[row * n + col];
      }
    }
    for (int x : seen) CHECK(x == 1);
  }
  // Spot values of §6.1: thread 37 (warp 1, lane 5), register 6.
  CHECK(w::acc_row(37, 6) == 16 + 1 + 8 && w::acc_col(37, 6) == 8 + 2);
  // The RS A fragment equals accumulator registers 8c..8c+7 packed in pairs.
  for (int t = 0; t < 128; ++t) {
    for (int j = 0; j < 4; ++j) {
      CHECK(w::a_frag_row(t, j) == w::acc_row(t, 2 * j));
      CHECK(w::a_frag_col(t, j) == w::acc_col(t, 2 * j));
    }
  }
}

static void conversions() {
  CHECK(w::half_bits_to_float(0x3C00) == 1.0f && w::half_bits_to_float(0xC000) == -2.0f);
  CHECK(w::half_bits_to_float(0x0001) == 5.9604644775390625e-8f);
  CHECK(w::float_to_half_bits(1.0f) == 0x3C00 && w::float_to_half_bits(65504.0f) == 0x7BFF);
  CHECK(w::float_to_half_bits(1.0f + 1.0f / 2048) == 0x3C00);     // tie → even
  CHECK(w::float_to_half_bits(1.0f + 3.0f / 2048) == 0x3C02);     // tie → even (up)
  CHECK(w::float_to_half_bits(1e6f) == 0x7C00);
  CHECK(w::float_to_half_bits(5.9604644775390625e-8f) == 0x0001);
  for (std::uint32_t h = 0; h < 0x7C00; ++h) {
    CHECK(w::float_to_half_bits(w::half_bits_to_float(static_cast<std::uint16_t>(h))) == h);
  }
  CHECK(w::bf16_bits_to_float(0x3F80) == 1.0f);
  CHECK(w::minifloat(0x38, 4, 3, 7, true) == 1.0f);    // e4m3 1.0
  CHECK(w::minifloat(0x7E, 4, 3, 7, true) == 448.0f);  // e4m3 max
  CHECK(w::minifloat(0x3C, 5, 2, 15, false) == 1.0f);  // e5m2 1.0
  CHECK(w::minifloat(0x01, 4, 3, 7, true) == 0.001953125f);  // e4m3 min subnormal 2^-9
}

// Encodes `v` (a small integer, exact in every type) as element type `e`.
static void store(w::Elem e, unsigned char* p, int v) {
  switch (e) {
    case w::Elem::F16: {
      const std::uint16_t h = w::float_to_half_bits(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case w::Elem::BF16: {
      const std::uint16_t h = static_cast<std::uint16_t>(w::float_to_bits(static_cast<float>(v)) >> 16);
      std::memcpy(p, &h, 2);
      break;
    }
    case w::Elem::TF32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case w::Elem::E4M3: {  // small integers -3..3: sign, exponent, 3 mantissa bits
      static const unsigned char pos[] = {0x00, 0x38, 0x40, 0x44};
      *p = static_cast<unsigned char>(pos[v < 0 ? -v : v] | (v < 0 ? 0x80 : 0));
      break;
    }
    case w::Elem::E5M2: {
      static const unsigned char pos[] = {0x00, 0x3C, 0x40, 0x42};
      *p = static_cast<unsigned char>(pos[v < 0 ? -v : v] | (v < 0 ? 0x80 : 0));
      break;
    }
    case w::Elem::S8: *p = static_cast<unsigned char>(static_cast<signed char>(v)); break;
    case w::Elem::U8: *p = static_cast<unsigned char>(v < 0 ? -v : v); break;
  }
}
static int sample(w::Elem e, unsigned seed) {
  const int v = static_cast<int>((seed * 2654435761u >> 13) % 7) - 3;  // -3..3
  return e == w::Elem::U8 ? (v < 0 ? -v : v) : v;
}

// D[64, N] = A[64, K] · B[N, K]ᵀ over `ktotal` with the CPU path, operands K-major (or
// MN-major: `mn`) in swizzled tiles at 1024-aligned offsets, against a naive GEMM.
template <class Op, int N, bool mn_major = false>
static void product(int swz_bytes, int ktotal) {
  using T = w::Traits<Op>;
  using M = w::Mma<Op, N>;
  const unsigned sa = w::elem_bytes(T::a), sb = w::elem_bytes(T::b);
  std::vector<unsigned char> buffer(1 << 18, 0);  // shared addresses have 18 bits
  g_smem = buffer.data();
  unsigned char* tile_a = g_smem + 0;
  unsigned char* tile_b = g_smem + (1 << 17);
  std::vector<int> a(64 * ktotal), b(N * ktotal);
  for (int i = 0; i < 64 * ktotal; ++i) a[i] = sample(T::a, i + 1);
  for (int i = 0; i < N * ktotal; ++i) b[i] = sample(T::b, i + 7777);
  const unsigned sw = static_cast<unsigned>(swz_bytes);
  for (int r = 0; r < 64; ++r)
    for (int k = 0; k < ktotal; ++k) {
      // MN-major: the tile is [K, 64] (k rows, m columns).
      const unsigned at = mn_major ? tile_byte(sw, sa, ktotal, k, r) : tile_byte(sw, sa, 64, r, k);
      store(T::a, tile_a + at, a[r * ktotal + k]);
    }
  for (int r = 0; r < N; ++r)
    for (int k = 0; k < ktotal; ++k) {
      const unsigned at = mn_major ? tile_byte(sw, sb, ktotal, k, r) : tile_byte(sw, sb, N, r, k);
      store(T::b, tile_b + at, b[r * ktotal + k]);
    }
  const std::uint32_t addr_a = w::smem_address(tile_a), addr_b = w::smem_address(tile_b);
  const std::uint64_t da = mn_major ? w::desc_mnmajor(addr_a, swz_bytes, ktotal * swz_bytes)
                                    : w::desc_kmajor(addr_a, swz_bytes);
  const std::uint64_t db = mn_major ? w::desc_mnmajor(addr_b, swz_bytes, ktotal * swz_bytes)
                                    : w::desc_kmajor(addr_b, swz_bytes);
  for (int t = 0; t < 128; ++t) {
    g_thread = t;
    typename M::Acc d[M::kRegs];
    std::memset(d, 0xFF, sizeof d);  // garbage: scale_d = 0 must ignore it
    for (int kt = 0; kt < ktotal / T::k; ++kt) {
      const std::uint32_t off_a = mn_major ? w::mnmajor_k_offset(kt, T::k, swz_bytes)
                                           : w::kmajor_k_offset(kt, T::k, sa, swz_bytes, 64);
      const std::uint32_t off_b = mn_major ? w::mnmajor_k_offset(kt, T::k, swz_bytes)
                                           : w::kmajor_k_offset(kt, T::k, sb, swz_bytes, N);
      if constexpr (mn_major) {
        M::template ss<1, 1>(d, w::desc_advance(da, off_a), w::desc_advance(db, off_b), kt > 0);
      } else {
        M::ss(d, w::desc_advance(da, off_a), w::desc_advance(db, off_b), kt > 0);
      }
    }
    constexpr int per = T::acc == w::AccKind::F16 ? 2 : 1;
    for (int j = 0; j < M::kRegs; ++j) {
      for (int h = 0; h < per; ++h) {
        const int r = j * per + h;
        const int row = w::acc_row(t, r), col = w::acc_col(t, r);
        long long want = 0;
        for (int k = 0; k < ktotal; ++k) want += static_cast<long long>(a[row * ktotal + k]) * b[col * ktotal + k];
        double got;
        if (T::acc == w::AccKind::F32) {
          float f;
          std::memcpy(&f, &d[j], 4);
          got = f;
        } else if (T::acc == w::AccKind::S32) {
          std::int32_t i;
          std::memcpy(&i, &d[j], 4);
          got = i;
        } else {
          std::uint32_t packed;
          std::memcpy(&packed, &d[j], 4);
          got = w::half_bits_to_float(static_cast<std::uint16_t>(packed >> (16 * h)));
        }
        if (got != static_cast<double>(want)) {
          std::printf("swizzle %d, N %d, K %d%s: thread %d reg %d (row %d, col %d) = %g, want %lld\n",
                      swz_bytes, N, ktotal, mn_major ? ", MN-major" : "", t, r, row, col, got,
                      want);
          std::exit(1);
        }
      }
    }
  }
}

int main() {
  descriptors();
  accumulator_layout();
  conversions();
  for (int swz : {128, 64, 32}) {
    product<w::F32BF16BF16, 64>(swz, 128);
    product<w::F32F16F16, 32>(swz, 64);
    product<w::F16F16F16, 16>(swz, 64);
    product<w::F32TF32TF32, 8>(swz, 32);
    product<w::F32E4M3E5M2, 16>(swz, 128);
    product<w::S32S8U8, 8>(swz, 128);
    product<w::F32F16F16, 64, true>(swz, 64);
  }
  product<w::F32BF16BF16, 256>(128, 64);
  product<w::F32BF16BF16, 128, true>(128, 64);
  std::printf("ok\n");
  return 0;
}
