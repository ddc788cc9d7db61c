// probe8: find the register/shared-memory layout of 8-bit 2:4-sparse MMA on an H200 (sm_90a).
//
// Build and run (see README.md):
//   nvcc -std=c++17 -O2 -arch=sm_90a -o probe ci/probes/sparse8/probe.cu && ./probe > raw.txt
//   python3 ci/probes/sparse8/decode.py raw.txt
//
// Two instructions are probed, each with one-hot experiments, many per launch:
//   "mma": mma.sp(::ordered_metadata).sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32, sparsity
//          selector 0 (one warp per experiment series). A unit = (thread t, register r, byte b)
//          numbered 16t + 4r + b (512 units: 16 bytes of 4 registers per thread); B unit the same
//          over B's 4 registers (512 units).
//   "wg":  wgmma.mma_async.sp.sync.aligned.m64n8k64.f32.e4m3.e4m3, SS mode, sparsity selector 0,
//          both operands K-major (one warpgroup per series), with the descriptors the compiler
//          writes (its dense and 16-bit sparse WGMMA pass on the H200 with them): A unit = byte
//          offset in A's shared tile (2048 bytes: the compressed 64 x 32 in rows of 32 bytes,
//          32-byte swizzle, SBO 256); B unit = byte offset in B's shared tile (512 bytes: 8 x 64
//          in rows of 64 bytes, 64-byte swizzle, SBO 512). Offsets are physical (after the
//          swizzle: byte b of the logical row-major tile is at b ^ ((b >> 7) & 1) << 4 for A,
//          b ^ ((b >> 7) & 3) << 4 for B).
//   "mma16": the control, mma.sp m16n8k32 f16 -> f32 (selector 0), whose layout the compiler
//          has and the H200 confirmed (e2e 180/181): the same experiments over A/B units 8t + 2r
//          + h (half h of register r of thread t; 256 each), B codes the f16 1 + code / 64. The
//          decoder must find the compiler's layout for it, which checks probe and decoder.
//   All: f32 accumulators, D has the standard (dense) fragment layout, which the probe uses to
//   place each output at its (row m, column n).
//
// Values: A one-hot = e4m3 1.0 (0x38). B modes: 0 = all ones (0x38); 1 = "enc lo": B unit u holds
// the e4m3 byte 0x38 + (u & 63); 2 = "enc hi": 0x38 + (u >> 6). Every such byte is a normal e4m3
// number (1.0 .. 240), so an output equal to one of them names the B unit that met the A byte
// (lo and hi together: the whole unit number). Products and single-term sums are exact in f32.
//
// Metadata: a 32-bit register per thread. "pattern v" = the nibble v in all 8 nibbles of every
// thread's register (v in 4, 8, C, 9, D, E: the six ordered index pairs (i0, i1) = (v & 3, v >> 2)).
//
// Experiments (every record is one line of the raw output):
//   L <instr> <unit> <pattern> <mode> <count> m,n,value ...
//       A = one-hot at <unit>, B in <mode>, metadata <pattern>; the nonzero outputs (count, then
//       at most 16 of them). All 6 patterns x 3 modes for every A unit.
//   M <instr> <unit> <thread> <field> <count> m,n,value ...
//       A = one-hot at <unit>, B mode 1, metadata pattern 8 (i0 = 0, i1 = 2) everywhere except
//       2-bit field <field> (bits 2f, 2f+1) of thread <thread>'s register: set to 1 when f is
//       even (an i0 field: 0 -> 1) or 3 when odd (an i1 field: 2 -> 3), both still ordered pairs.
//       Written only when the output differs from pattern 8's (so: which (thread, field) moves
//       which A unit, and where to). Every thread x field x A unit is tried.
// Sparsity selector 1 is not probed: ptxas accepts only 0 for both fp8 instructions.
// Header lines start with '#'; the last line is "# end <records>" (a truncated file lacks it).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#ifndef PROBE_MMA_SP
#if defined(__CUDACC_VER_MAJOR__) && \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 5))
#define PROBE_MMA_SP "mma.sp::ordered_metadata"
#else
#define PROBE_MMA_SP "mma.sp"
#endif
#endif
#define PROBE_MMA_INS PROBE_MMA_SP ".sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32"
#define PROBE_MMA16_INS PROBE_MMA_SP ".sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"
#define PROBE_WG_INS "wgmma.mma_async.sp.sync.aligned.m64n8k64.f32.e4m3.e4m3"

#define CHECK(x)                                                                         \
  do {                                                                                   \
    cudaError_t err_ = (x);                                                              \
    if (err_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,                    \
                   cudaGetErrorString(err_));                                            \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

constexpr int kMaxHits = 16;
constexpr unsigned kOne = 0x38;   // e4m3 1.0
constexpr unsigned kBase = 0x8u;  // metadata nibble of the M experiments: (i0, i1) = (0, 2)
__constant__ unsigned kPatterns[6] = {0x4, 0x8, 0xC, 0x9, 0xD, 0xE};

struct Rec {
  int kind;   // 0 L, 1 M
  int instr;  // 0 mma, 1 wg, 2 mma16
  int unit;
  int p1;     // L: pattern, M/S: thread
  int p2;     // L: mode, M/S: field
  int count;  // nonzero outputs
  unsigned char m[kMaxHits], n[kMaxHits];
  float v[kMaxHits];
};

struct Sink {
  Rec* recs;
  unsigned* count;
  unsigned cap;
};

// The value of B unit u in a mode, as an e4m3 byte.
__host__ __device__ inline unsigned b_byte(int u, int mode) {
  return mode == 0 ? kOne : mode == 1 ? kOne + (u & 63) : kOne + (u >> 6);
}

__host__ __device__ inline unsigned replicate(unsigned nib) {
  unsigned r = 0;
  for (int i = 0; i < 8; ++i) r |= nib << (4 * i);
  return r;
}

// Metadata register of an M experiment for thread `lane`: pattern 8 with field f of thread te
// changed (te < 0: no change).
__host__ __device__ inline unsigned meta_field(int lane, int te, int f) {
  unsigned r = replicate(kBase);
  if (lane == te) {
    const unsigned nv = (f % 2 == 0) ? 1u : 3u;
    r = (r & ~(3u << (2 * f))) | (nv << (2 * f));
  }
  return r;
}

// Writes a record of the nonzero outputs of D (rows x 8, row-major in `d`).
__device__ void emit(const Sink& s, int kind, int instr, int unit, int p1, int p2, const float* d,
                     int rows) {
  const unsigned i = atomicAdd(s.count, 1u);
  if (i >= s.cap) return;
  Rec& r = s.recs[i];
  r.kind = kind;
  r.instr = instr;
  r.unit = unit;
  r.p1 = p1;
  r.p2 = p2;
  int c = 0;
  for (int m = 0; m < rows; ++m)
    for (int n = 0; n < 8; ++n) {
      const float v = d[m * 8 + n];
      if (v != 0.0f) {
        if (c < kMaxHits) {
          r.m[c] = static_cast<unsigned char>(m);
          r.n[c] = static_cast<unsigned char>(n);
          r.v[c] = v;
        }
        ++c;
      }
    }
  r.count = c;
}

// ---- mma.sync m16n8k64 ------------------------------------------------------------------------

template <int Sel>
__device__ __forceinline__ void mma_sp(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[4],
                                       unsigned e) {
  d[0] = d[1] = d[2] = d[3] = 0.0f;
  asm volatile(PROBE_MMA_INS
               " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, %13;\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]),
                 "r"(b[3]), "r"(e), "n"(Sel));
}

// D of m16n8 (f32): register i of lane -> row g + 8 (i / 2), column 2q + i % 2.
__device__ __forceinline__ void mma_store_d(float* sd, const float (&d)[4], int lane) {
  const int g = lane / 4, q = lane % 4;
  for (int i = 0; i < 4; ++i) sd[(g + 8 * (i / 2)) * 8 + 2 * q + i % 2] = d[i];
}

__device__ __forceinline__ void mma_regs(unsigned (&a)[4], unsigned (&b)[4], int lane, int alpha,
                                         int mode) {
  for (int r = 0; r < 4; ++r) {
    a[r] = 0;
    b[r] = 0;
    for (int y = 0; y < 4; ++y) {
      const int u = 16 * lane + 4 * r + y;
      if (u == alpha) a[r] |= kOne << (8 * y);
      b[r] |= b_byte(u, mode) << (8 * y);
    }
  }
}

// One warp per A unit: the L series, then the M series, of the warp-level form `Form` (its
// `regs` fills the operands of one experiment, its `exec` runs the instruction; `kId` names it
// in the records).
template <class Form>
__global__ void warp_probe(Sink s) {
  __shared__ float sd_all[4][16 * 8];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int alpha = blockIdx.x * 4 + warp;
  float* sd = sd_all[warp];
  unsigned a[4], b[4];
  float d[4];
  for (int mode = 0; mode < 3; ++mode) {
    Form::regs(a, b, lane, alpha, mode);
    for (int p = 0; p < 6; ++p) {
      Form::exec(d, a, b, replicate(kPatterns[p]));
      mma_store_d(sd, d, lane);
      __syncwarp();
      if (lane == 0) emit(s, 0, Form::kId, alpha, static_cast<int>(kPatterns[p]), mode, sd, 16);
      __syncwarp();
    }
  }
  Form::regs(a, b, lane, alpha, 1);
  float base[4];
  Form::exec(base, a, b, meta_field(lane, -1, 0));
  for (int te = 0; te < 32; ++te)
    for (int f = 0; f < 16; ++f) {
      Form::exec(d, a, b, meta_field(lane, te, f));
      bool diff = false;
      for (int i = 0; i < 4; ++i) diff |= d[i] != base[i];
      if (__any_sync(0xffffffffu, diff)) {
        mma_store_d(sd, d, lane);
        __syncwarp();
        if (lane == 0) emit(s, 1, Form::kId, alpha, te, f, sd, 16);
        __syncwarp();
      }
    }
}

// mma.sp m16n8k64 e4m3 (record id 0).
struct Fp8Form {
  static constexpr int kId = 0;
  __device__ static void regs(unsigned (&a)[4], unsigned (&b)[4], int lane, int alpha, int mode) {
    mma_regs(a, b, lane, alpha, mode);
  }
  __device__ static void exec(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[4],
                              unsigned e) {
    mma_sp<0>(d, a, b, e);
  }
};

// ---- control: mma.sp m16n8k32 f16 (the layout the compiler uses, confirmed on the H200) ------

// B unit u's f16 bits in a mode: 1.0 + code / 64 (codes 0..63: exact in f16).
__host__ __device__ inline unsigned b_half(int u, int mode) {
  return mode == 0 ? 0x3C00u : mode == 1 ? 0x3C00u + ((u & 63) << 4) : 0x3C00u + ((u >> 6) << 4);
}

__device__ __forceinline__ void mma16_sp(float (&d)[4], const unsigned (&a)[4],
                                         const unsigned (&b)[4], unsigned e) {
  d[0] = d[1] = d[2] = d[3] = 0.0f;
  asm volatile(PROBE_MMA16_INS
               " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 0;\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]),
                 "r"(b[3]), "r"(e));
}

// Units: half h of register r of thread t = 8t + 2r + h (256 A units, 256 B units).
__device__ __forceinline__ void mma16_regs(unsigned (&a)[4], unsigned (&b)[4], int lane,
                                           int alpha, int mode) {
  for (int r = 0; r < 4; ++r) {
    a[r] = 0;
    b[r] = 0;
    for (int h = 0; h < 2; ++h) {
      const int u = 8 * lane + 2 * r + h;
      if (u == alpha) a[r] |= 0x3C00u << (16 * h);
      b[r] |= b_half(u, mode) << (16 * h);
    }
  }
}

// The 16-bit form whose layout is known (record id 2): it checks the probe and the decoder on
// the device (the decoder must find the compiler's layout).
struct F16Form {
  static constexpr int kId = 2;
  __device__ static void regs(unsigned (&a)[4], unsigned (&b)[4], int lane, int alpha, int mode) {
    mma16_regs(a, b, lane, alpha, mode);
  }
  __device__ static void exec(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[4],
                              unsigned e) {
    mma16_sp(d, a, b, e);
  }
};

// ---- wgmma.mma_async.sp m64n8k64 (SS) ---------------------------------------------------------

constexpr int kA = 2048;  // A tile bytes (64 x 32 compressed)
constexpr int kB = 512;   // B tile bytes (8 x 64)

// A K-major descriptor with swizzle mode `mode` (1: 128 B, 2: 64 B, 3: 32 B), as the compiler
// writes them (wgmma.cuh desc_kmajor: LBO 16, SBO 8 rows of the swizzle width).
__device__ __forceinline__ std::uint64_t desc(const void* p, unsigned sbo, unsigned mode) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
  return static_cast<std::uint64_t>((addr & 0x3FFFF) >> 4) |
         static_cast<std::uint64_t>(16u >> 4) << 16 |
         static_cast<std::uint64_t>((sbo & 0x3FFFF) >> 4) << 32 |
         static_cast<std::uint64_t>(mode) << 62;
}

__device__ __forceinline__ void wg_sp(float (&d)[4], std::uint64_t da, std::uint64_t db,
                                      unsigned e) {
  d[0] = d[1] = d[2] = d[3] = 0.0f;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %7, 0;\n" PROBE_WG_INS
      " {%0, %1, %2, %3}, %4, %5, %6, 0, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(da), "l"(db), "r"(e), "r"(0));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  asm volatile("" : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])::"memory");
#else
  (void)da, (void)db, (void)e;
  __trap();  // nvcc's -arch=sm_90a also writes compute_90 PTX, which lacks wgmma
#endif
}

// D of m64n8 (f32): register r of thread t -> row 16 (t / 32) + (t % 32) / 4 + 8 (r / 2),
// column 2 (t % 4) + r % 2.
__device__ __forceinline__ void wg_store_d(float* sd, const float (&d)[4], int t) {
  for (int r = 0; r < 4; ++r)
    sd[(16 * (t / 32) + (t % 32) / 4 + 8 * (r / 2)) * 8 + 2 * (t % 4) + r % 2] = d[r];
}

// One warpgroup (block of 128 threads) per A unit.
__global__ void __launch_bounds__(128) wg_probe(Sink s) {
  __shared__ __align__(1024) unsigned char sa[kA];
  __shared__ __align__(1024) unsigned char sb[kB];
  __shared__ float sd[64 * 8];
  const int t = threadIdx.x, alpha = blockIdx.x;
  for (int i = t; i < kA; i += 128) sa[i] = i == alpha ? kOne : 0;
  const std::uint64_t da = desc(sa, 256, 3), db = desc(sb, 512, 2);  // A 32 B, B 64 B swizzle
  float d[4];
  for (int mode = 0; mode < 3; ++mode) {
    __syncthreads();
    for (int i = t; i < kB; i += 128) sb[i] = static_cast<unsigned char>(b_byte(i, mode));
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    for (int p = 0; p < 6; ++p) {
      wg_sp(d, da, db, replicate(kPatterns[p]));
      wg_store_d(sd, d, t);
      __syncthreads();
      if (t == 0) emit(s, 0, 1, alpha, static_cast<int>(kPatterns[p]), mode, sd, 64);
      __syncthreads();
    }
  }
  __syncthreads();
  for (int i = t; i < kB; i += 128) sb[i] = static_cast<unsigned char>(b_byte(i, 1));
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  float base[4];
  wg_sp(base, da, db, meta_field(t, -1, 0));
  for (int te = 0; te < 128; ++te)
    for (int f = 0; f < 16; ++f) {
      wg_sp(d, da, db, meta_field(t, te, f));
      bool diff = false;
      for (int i = 0; i < 4; ++i) diff |= d[i] != base[i];
      if (__syncthreads_or(diff)) {
        wg_store_d(sd, d, t);
        __syncthreads();
        if (t == 0) emit(s, 1, 1, alpha, te, f, sd, 64);
        __syncthreads();
      }
    }
}

// ---- host ---------------------------------------------------------------------------------------

// Runs one probe kernel and prints its records (sorted); false when the kernel failed (the
// context is then lost: no later kernel can run, but what was printed stays).
template <typename Launch>
bool run(FILE* out, const char* name, Launch launch, Rec* recs, unsigned* count, unsigned cap,
         unsigned& total) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  CHECK(cudaMemset(count, 0, sizeof(unsigned)));
  CHECK(cudaEventRecord(e0));
  launch(Sink{recs, count, cap});
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::fprintf(out, "# error %s: %s\n", name, cudaGetErrorString(err));
    std::fprintf(stderr, "probe: %s failed: %s\n", name, cudaGetErrorString(err));
    return false;
  }
  CHECK(cudaEventRecord(e1));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  unsigned n = 0;
  CHECK(cudaMemcpy(&n, count, sizeof(unsigned), cudaMemcpyDeviceToHost));
  if (n > cap) {
    std::fprintf(out, "# error %s: %u records, only %u kept\n", name, n, cap);
    n = cap;
  }
  std::vector<Rec> h(n);
  CHECK(cudaMemcpy(h.data(), recs, sizeof(Rec) * n, cudaMemcpyDeviceToHost));
  std::sort(h.begin(), h.end(), [](const Rec& x, const Rec& y) {
    if (x.kind != y.kind) return x.kind < y.kind;
    if (x.unit != y.unit) return x.unit < y.unit;
    if (x.p1 != y.p1) return x.p1 < y.p1;
    return x.p2 < y.p2;
  });
  std::fprintf(out, "# run %s records %u time_ms %.3f\n", name, n, ms);
  static const char* kinds[] = {"L", "M"};
  static const char* instrs[] = {"mma", "wg", "mma16"};
  for (const Rec& r : h) {
    std::fprintf(out, "%s %s %d %d %d %d", kinds[r.kind], instrs[r.instr], r.unit, r.p1, r.p2,
                 r.count);
    for (int i = 0; i < std::min(r.count, kMaxHits); ++i)
      std::fprintf(out, " %d,%d,%.9g", r.m[i], r.n[i], r.v[i]);
    std::fprintf(out, "\n");
  }
  std::fflush(out);
  std::fprintf(stderr, "probe: %s: %u records in %.1f ms\n", name, n, ms);
  total += n;
  return true;
}

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : nullptr;
  FILE* out = path ? std::fopen(path, "w") : stdout;
  if (!out) {
    std::perror(path);
    return 1;
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const unsigned cap = 1u << 20;
  Rec* recs = nullptr;
  unsigned* count = nullptr;
  CHECK(cudaMalloc(&recs, sizeof(Rec) * cap));
  CHECK(cudaMalloc(&count, sizeof(unsigned)));
  std::fprintf(out, "# probe8 sparse8 raw v1\n");
  std::fprintf(out, "# device %s sm_%d%d\n", prop.name, prop.major, prop.minor);
  std::fprintf(out, "# instr mma %s selector 0\n", PROBE_MMA_INS);
  std::fprintf(out, "# instr mma16 %s selector 0 (control: the known 16-bit layout)\n",
               PROBE_MMA16_INS);
  std::fprintf(out, "# instr wg %s SS kmajor A(swizzle 32, sbo 256) B(swizzle 64, sbo 512) "
               "spsel 0\n", PROBE_WG_INS);
  unsigned total = 0;
  const bool ok =
      run(out, "mma16", [](Sink s) { warp_probe<F16Form><<<256 / 4, 128>>>(s); }, recs, count, cap,
          total) &&
      run(out, "mma", [](Sink s) { warp_probe<Fp8Form><<<512 / 4, 128>>>(s); }, recs, count, cap, total) &&
      run(out, "wg", [](Sink s) { wg_probe<<<kA, 128>>>(s); }, recs, count, cap, total);
  std::fprintf(out, "# end %u\n", total);
  if (path) std::fclose(out);
  return ok ? 0 : 1;
}
