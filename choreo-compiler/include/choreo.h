// choreo.h: the C++ runtime header for code generated from Choreo (.co) programs and for the host
// C++ code written in them. Original implementation of the API described in
// shared/runtime-abi.md §8 and §9; header-only, needs nvcc (CUDA 12.8 or newer, -std=c++17).
// With __CHOREO_CPU__ defined it needs no CUDA: the host C++ compiler builds it against
// choreo_cpu.h (the CPU backend).
//
// Implemented (all in namespace `choreo` unless noted):
//   - prelude: the standard headers host code may rely on (<iostream>, <vector>, <random>, <cmath>,
//     <algorithm>, <functional>, <future>, <thread>, ...) and the CUDA runtime, fp16, bf16 and fp8
//     headers;
//   - element types (§9.1): s8..u64, f32, f64, f16/half (__half), bf16/bfp16/bfloat16
//     (__nv_bfloat16), f8/f8_e4m3, f8_e5m2 (__nv_fp8_*); the narrow types of spec-tier3 §8, own
//     one-byte trivially copyable structs, the same on the GPU and the CPU backend: f6_e2m3,
//     f6_e3m2, f4_e2m1 (ocp_float, OCP MX FP6/FP4 in the low bits, also exported at global scope),
//     f8_ue4m3, f8_ue8m0, sub-byte integers bin1 s2 s4 s6 u1 u2 u4 u6 (subbyte_int: the value in
//     the low bits of its byte, values wrap modulo 2^bits); tf32 (own, float storage rounded to 10
//     mantissa bits), the `_t` alias of each, and stream_t;
//   - arithmetic on the low-precision types: fp8 `+ - * /` returning float, comparisons
//     `== != < <= > >=` of the values for fp8, fp6, fp4 and the ue types (IEEE: -0 == +0, NaN
//     unequal to everything), fp6/fp4 `+ - * /` returning the operand type, and
//     `operator<<(std::ostream&, ...)` for all of them (printed as float). Those of the CUDA
//     types live in the global namespace, those of choreo.h's own types in namespace choreo, so
//     argument-dependent lookup finds them from any namespace;
//   - mdspan<Rank> (§9.6), spanned_view<T, Rank> (§9.5), spanned_data<T, Rank> (§9.4) with
//     bounds-checked chained operator[], fill, fill_random, element_count, bytes, rank, view;
//     make_spandata (variadic and braced forms), make_spanview (<T, Rank> and <Rank, T> orders, T*,
//     const T*, void*, const void*, array forms), copy_as_spanned (§9.2, §9.3, §8);
//   - conversions (§9.8): f16_to_f32, f32_to_f16, bf16_to_f32, f32_to_bf16, to_f32 for every element
//     type, utils::from_f32<U>;
//   - checks (§8, §9.7): choreo_assert (host and device; reports the caller's file and line) and
//     ::croq_assert, runtime_check (both overloads), abend_true, abend_false, verify_device_status,
//     __choreo_check_cuda_environment__ (only when __CHOREO_ENABLE_CUDA_RUNTIME_ENV_CHECK__ and
//     __CHOREO_REQUIRED_GPU_DEVICE_SM__ are defined; runs its checks once per process), the device trap
//     __co_abort__;
//   - random numbers: fill_random draws from one std::mt19937 per thread, seeded from
//     std::random_device, or from the environment variable CHOREO_RANDOM_SEED when it is set, or by
//     choreo::seed_random(n);
//   - timing (§9.10): TimerOption, timing();
//   - verification (§9.9): verify_matmul_row_col_subset, verify_matmul_row_row_subset,
//     SampledVerifierConfig, verify_matmul_row_row_sampled, verify_matmul_row_col_sampled;
//   - sparse 2:4 (§9.11): utils::Sparse2to4HostPolicyWGMMA / utils::SparsePolicyWGMMA with
//     init_structured_sparse_A and encode;
//   - debug RTTI structs rtti::mdspan, rtti::ituple, rtti::bounded_ituple, rtti::spanned;
//   - macros: __cok__ (opens namespace choreo), __co_device__ (= __device__),
//     __CHOREO_BLOCK_SINGLE__ / __CHOREO_GROUP_SINGLE__ (device-side "first thread of the block /
//     warp" predicates).
//
// Deliberately not implemented (they come with the compiler tiers that generate code for them):
//   - tier-2/3 device machinery: future, future_ring, naive_copy, tiled_copy, TMAAtom, tma_*,
//     aligned_up_ptr, MMA policy types, event barriers (CUTLASS-based);
//   - HeapSimulator (dynamic shared-memory reuse), verify_spmm_sampled, the sparse prepack and
//     prepack_v2 functions (their behaviour is not specified);
//   - the CuTe element types (-use-cuda-type=false) and the ATen (at::Tensor) make_spanview overload;
//     CUTLASS and CuTe are not included.
//
// Deliberate differences from upstream (supersets or fixes; upstream-style programs still compile):
//   - bounds, shape and dimension errors print "choreo runtime check failed: ..." with the offending
//     index and shape to stderr, then abort (upstream prints a bare message to stdout);
//   - operator[] of spanned_view/spanned_data takes a `long long` (upstream: int), so large size_t
//     subscripts are not silently truncated, and spanned_view::operator[] is a const member;
//   - choreo_assert flushes stdout before aborting, and reports the caller's location;
//   - abend_true/abend_false/verify_device_status also print the caller's file and line;
//   - spanned_data is move-assignable (upstream: move-constructible only).

#pragma once

// ---------------------------------------------------------------------------------------------
// Prelude. Host code in .co files may use all of these without including them (runtime-abi §1).
// ---------------------------------------------------------------------------------------------
// What choreo.h itself needs.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
// What upstream's header makes available to host code besides. Defining CHOREO_LEAN_PRELUDE
// leaves these out, which saves about 2 s of nvcc time per file (<future> is the expensive one),
// for code that includes what it uses.
#if !defined(CHOREO_LEAN_PRELUDE)
#include <array>
#include <chrono>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <numeric>
#include <sstream>
#include <thread>
#endif

#if defined(__CHOREO_CPU__)
// The CPU backend: the host compiler builds this code, choreo_cpu.h stands in for the CUDA
// headers (types, intrinsics, the runtime API; see ARCHITECTURE.md, "The CPU runtime").
#include "choreo_cpu.h"
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#endif

// The fp6/fp4 types (and f8_ue4m3, f8_ue8m0) are choreo.h's own, on every backend and CUDA
// version (CUDA's cuda_fp6.h/cuda_fp4.h are not used). Kept for code that tests it.
#define CHOREO_HAS_CUDA_FP6_FP4 1

#define CHOREO_HOST_DEVICE __host__ __device__

// The caller's location as default arguments: evaluated at the call site, unlike __FILE__/__LINE__.
#if defined(__GNUC__) || defined(__clang__)
#define CHOREO_CALLER_FILE __builtin_FILE()
#define CHOREO_CALLER_LINE __builtin_LINE()
#else
#define CHOREO_CALLER_FILE __FILE__
#define CHOREO_CALLER_LINE __LINE__
#endif

// `__cok__ { ... }` holds device helpers written in C++ inside a .co file.
#define __cok__ namespace choreo
#ifndef __co_device__
#define __co_device__ __device__
#endif

#if defined(__CUDACC__) || defined(__CHOREO_CPU__)
// Generated code flattens the block into threadIdx.x, so a warp is 32 consecutive threadIdx.x.
#define __CHOREO_BLOCK_SINGLE__ (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0)
#define __CHOREO_GROUP_SINGLE__ ((threadIdx.x % 32u) == 0)
#endif

namespace choreo {

// ---------------------------------------------------------------------------------------------
// Failure reporting (runtime-abi §8, §9.7).
// ---------------------------------------------------------------------------------------------

namespace detail {

// Everything printed so far must reach the terminal or pipe before the process dies: abort() does
// not flush stdio buffers, and a piped stdout is fully buffered.
[[noreturn]] inline void flush_and_abort() {
  std::fflush(stdout);
  std::fflush(stderr);
  std::abort();
}

[[noreturn]] inline void runtime_check_failed(const std::string& msg) {
  std::fflush(stdout);
  std::fprintf(stderr, "choreo runtime check failed: %s\n", msg.c_str());
  flush_and_abort();
}

}  // namespace detail

/// Host and device assertion. On failure prints `<file>:<line>: choreo assertion failed: <msg>`
/// (to stdout on the host, via device printf on the device) and aborts (host) or traps (device).
CHOREO_HOST_DEVICE inline void choreo_assert(bool cond, const char* msg,
                                             const char* file = CHOREO_CALLER_FILE,
                                             int line = CHOREO_CALLER_LINE) {
  if (cond) return;
#if defined(__CUDA_ARCH__)
  printf("%s:%d: choreo assertion failed: %s\n", file, line, msg);
  __trap();
#else
#if defined(__CHOREO_CPU__)
  // Host and device code are one function on the CPU: inside a kernel it traps like the GPU.
  if (::choreo::cpu::in_kernel()) {
    __choreo_thr->printf("%s:%d: choreo assertion failed: %s\n", file, line, msg);
    __choreo_thr->trap();
  }
#endif
  std::printf("%s:%d: choreo assertion failed: %s\n", file, line, msg);
  detail::flush_and_abort();
#endif
}

/// Aborts with `choreo runtime check failed: <msg>` on stderr when `cond` is false.
inline void runtime_check(bool cond, const char* msg) {
  if (!cond) detail::runtime_check_failed(msg == nullptr ? "(no message)" : msg);
}

/// Aborts with `choreo runtime check failed: <msg>` on stderr when `cond` is false.
inline void runtime_check(bool cond, const std::string& msg) {
  if (!cond) detail::runtime_check_failed(msg);
}

/// Aborts when `code` is nonzero, printing it as a CUDA error: `CUDA failure: <n> (<description>)`.
/// Host code wraps CUDA runtime calls in it: `abend_true(cudaMalloc(&p, n))`.
inline void abend_true(int code, const char* file = CHOREO_CALLER_FILE,
                       int line = CHOREO_CALLER_LINE) {
  if (code == 0) return;
  std::fflush(stdout);
  std::fprintf(stderr, "CUDA failure: %d (%s) at %s:%d\n", code,
               cudaGetErrorString(static_cast<cudaError_t>(code)), file, line);
  detail::flush_and_abort();
}

/// Aborts when `ok` is false.
inline void abend_false(bool ok, const char* file = CHOREO_CALLER_FILE,
                        int line = CHOREO_CALLER_LINE) {
  if (ok) return;
  std::fflush(stdout);
  std::fprintf(stderr, "choreo: unexpected failure (abend_false) at %s:%d\n", file, line);
  detail::flush_and_abort();
}

/// Aborts when the CUDA runtime has a pending error (a failed launch, a trap in a kernel, no
/// usable device...). Generated code calls it after `sync.global`.
inline void verify_device_status(const char* file = CHOREO_CALLER_FILE,
                                 int line = CHOREO_CALLER_LINE) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return;
  std::fflush(stdout);
  std::fprintf(stderr, "CUDA failure: %d (%s: %s) reported by verify_device_status at %s:%d\n",
               static_cast<int>(err), cudaGetErrorName(err), cudaGetErrorString(err), file, line);
  detail::flush_and_abort();
}

/// Device-side abort used by generated `assert` code: traps the kernel (the host sees the error at
/// its next synchronisation). On the host it aborts the process.
CHOREO_HOST_DEVICE inline void __co_abort__() {
#if defined(__CUDA_ARCH__)
  __trap();
#else
#if defined(__CHOREO_CPU__)
  if (::choreo::cpu::in_kernel()) __choreo_thr->trap();
#endif
  detail::flush_and_abort();
#endif
}

#if defined(__CHOREO_CPU__) && defined(__CHOREO_ENABLE_CUDA_RUNTIME_ENV_CHECK__)
/// The CPU backend has no driver or compute capability to check.
inline void __choreo_check_cuda_environment__() {}
#elif defined(__CHOREO_ENABLE_CUDA_RUNTIME_ENV_CHECK__) && defined(__CHOREO_REQUIRED_GPU_DEVICE_SM__)
namespace detail {

inline void check_cuda_environment() {
  int runtime_version = 0;
  cudaError_t err = cudaRuntimeGetVersion(&runtime_version);
  if (err != cudaSuccess || runtime_version < CUDART_VERSION) {
    std::fprintf(stderr,
                 "[choreo] CUDA runtime too old: version %d, this program was built for %d.\n",
                 runtime_version, CUDART_VERSION);
    std::exit(1);
  }
  int driver_version = 0;
  err = cudaDriverGetVersion(&driver_version);
  if (err != cudaSuccess) {
    std::fprintf(stderr, "[choreo] Cannot query the CUDA driver version: %s.\n",
                 cudaGetErrorString(err));
    std::exit(1);
  }
  if (driver_version < runtime_version) {
    // Only a warning: a newer runtime often still works through forward compatibility, and the
    // device query below gives the definitive answer.
    if (driver_version == 0) {
      std::fprintf(stderr, "[choreo] warning: no CUDA driver is installed.\n");
    } else {
      std::fprintf(stderr,
                   "[choreo] warning: the CUDA driver (version %d) is older than the CUDA runtime "
                   "(version %d).\n",
                   driver_version, runtime_version);
    }
  }
  int device_count = 0;
  err = cudaGetDeviceCount(&device_count);
  if (err != cudaSuccess || device_count <= 0) {
    std::fprintf(stderr, "[choreo] No CUDA-capable devices found. (cudaGetDeviceCount: %s)\n",
                 err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    std::exit(1);
  }
  int device = 0;
  int major = 0;
  int minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    std::fprintf(stderr, "[choreo] Cannot query the compute capability of the CUDA device.\n");
    std::exit(1);
  }
  const int sm = major * 10 + minor;
  if (sm < (__CHOREO_REQUIRED_GPU_DEVICE_SM__)) {
    std::fprintf(stderr,
                 "[choreo] Compute capability too low: device %d is sm_%d, this program needs "
                 "sm_%d or newer.\n",
                 device, sm, static_cast<int>(__CHOREO_REQUIRED_GPU_DEVICE_SM__));
    std::exit(1);
  }
}

}  // namespace detail

/// Checks, once per process, that the CUDA runtime, driver and device can run this program;
/// prints a `[choreo] ...` message and exits with status 1 when they cannot.
inline void __choreo_check_cuda_environment__() {
  // A function-local static is initialised exactly once, also under concurrent first calls.
  static const bool checked = (detail::check_cuda_environment(), true);
  (void)checked;
}
#endif

// ---------------------------------------------------------------------------------------------
// Element types (runtime-abi §9.1, spec §5.1).
// ---------------------------------------------------------------------------------------------

using s8 = std::int8_t;
using s16 = std::int16_t;
using s32 = std::int32_t;
using s64 = std::int64_t;
using u8 = std::uint8_t;
using u16 = std::uint16_t;
using u32 = std::uint32_t;
using u64 = std::uint64_t;
using f32 = float;
using f64 = double;

using f16 = __half;
using half = __half;
using bf16 = __nv_bfloat16;
using bfp16 = __nv_bfloat16;
using bfloat16 = __nv_bfloat16;

using f8_e4m3 = __nv_fp8_e4m3;
using f8_e5m2 = __nv_fp8_e5m2;
using f8 = f8_e4m3;

using stream_t = cudaStream_t;

namespace detail {

CHOREO_HOST_DEVICE inline std::uint32_t float_bits(float x) {
  std::uint32_t bits;
  __builtin_memcpy(&bits, &x, sizeof bits);
  return bits;
}

CHOREO_HOST_DEVICE inline float bits_float(std::uint32_t bits) {
  float x;
  __builtin_memcpy(&x, &bits, sizeof x);
  return x;
}

/// 2^k as a float, for -126 <= k <= 127.
CHOREO_HOST_DEVICE inline float pow2f(int k) {
  return bits_float(static_cast<std::uint32_t>(k + 127) << 23);
}

/// |a| / 2^s rounded to the nearest integer, ties to even, for a finite float `a` (given by the
/// bits of its magnitude) whose ulp is below 2^s. Integer arithmetic only: the result does not
/// depend on the floating-point rounding mode or on fast-math flags.
CHOREO_HOST_DEVICE inline std::uint32_t round_scaled(std::uint32_t magnitude_bits, int s) {
  const int biased = static_cast<int>(magnitude_bits >> 23);
  std::uint32_t mantissa = magnitude_bits & 0x7fffffu;
  int exponent;  // |a| = mantissa * 2^exponent
  if (biased == 0) {
    exponent = -149;
  } else {
    mantissa |= 0x800000u;
    exponent = biased - 150;
  }
  const int shift = s - exponent;
  if (shift <= 0) return mantissa;  // not reached: the callers' steps are above the ulp of |a|
  if (shift > 25) return 0;         // |a| < 2^24 * 2^exponent <= step / 2
  const std::uint32_t quotient = mantissa >> shift;
  const std::uint32_t rest = mantissa & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  return (rest > half || (rest == half && (quotient & 1u) != 0)) ? quotient + 1 : quotient;
}

/// The magnitudes of a small float format with `Exp` exponent bits (bias `Bias`), `Man` mantissa
/// bits, subnormals and no infinities: codes are `exponent << Man | mantissa`, without sign.
template <int Exp, int Man, int Bias>
struct minifloat {
  static constexpr int min_exp = 1 - Bias;

  /// The value of a magnitude code (exact in float).
  CHOREO_HOST_DEVICE static float value(std::uint32_t code) {
    const std::uint32_t e = code >> Man;
    const std::uint32_t m = code & ((1u << Man) - 1u);
    if (e == 0) return static_cast<float>(m) * pow2f(min_exp - Man);
    return static_cast<float>(m | (1u << Man)) * pow2f(static_cast<int>(e) - Bias - Man);
  }

  /// The code of the value nearest to |x| (ties to the even code); magnitudes at or beyond the
  /// value of `max_code` (infinities too) saturate to `max_code`. `x` is not NaN.
  CHOREO_HOST_DEVICE static std::uint32_t encode(float x, std::uint32_t max_code) {
    const std::uint32_t magnitude_bits = float_bits(x) & 0x7fffffffu;
    if (!(bits_float(magnitude_bits) < value(max_code))) return max_code;
    int k = static_cast<int>(magnitude_bits >> 23) - 127;  // floor(log2 |x|) for normal x
    if (k < min_exp) k = min_exp;                           // the subnormal step
    std::uint32_t q = round_scaled(magnitude_bits, k - Man);
    if (q < (1u << Man)) return q;  // zero or subnormal (k == min_exp)
    if (q == (2u << Man)) {         // rounded up into the next binade
      q >>= 1;
      ++k;
    }
    return (static_cast<std::uint32_t>(k + Bias) << Man) | (q - (1u << Man));
  }
};

}  // namespace detail

/// An OCP MX float of `Exp` exponent bits (bias `Bias`) and `Man` mantissa bits with a sign bit
/// above them, stored in the low `1 + Exp + Man` bits of one byte (the bits above are zero):
/// `f6_e2m3` (max 7.5), `f6_e3m2` (max 28), `f4_e2m1` (max 6). No infinities or NaNs.
/// Conversion from float rounds to nearest, ties to even, saturates to the largest finite value
/// (infinities too), keeps the sign of zero, and makes NaN the largest positive value (as CUDA's
/// `__nv_cvt_float_to_fp6/fp4` do). Reading ignores the bits above the format.
template <int Exp, int Man, int Bias>
struct ocp_float {
  using format = detail::minifloat<Exp, Man, Bias>;
  static constexpr int bits = 1 + Exp + Man;
  static constexpr std::uint32_t sign_bit = 1u << (Exp + Man);
  static constexpr std::uint32_t max_code = sign_bit - 1u;

  std::uint8_t storage;

  ocp_float() = default;
  CHOREO_HOST_DEVICE explicit ocp_float(float x) {
    if (x != x) {
      storage = static_cast<std::uint8_t>(max_code);
    } else {
      const std::uint32_t sign = (detail::float_bits(x) >> 31) != 0 ? sign_bit : 0u;
      storage = static_cast<std::uint8_t>(sign | format::encode(x, max_code));
    }
  }
  CHOREO_HOST_DEVICE explicit ocp_float(double x) : ocp_float(static_cast<float>(x)) {}
  template <typename V, std::enable_if_t<std::is_integral<V>::value, int> = 0>
  CHOREO_HOST_DEVICE explicit ocp_float(V x) : ocp_float(static_cast<float>(x)) {}
  CHOREO_HOST_DEVICE explicit operator float() const {
    const float magnitude = format::value(storage & max_code);
    return (storage & sign_bit) != 0 ? -magnitude : magnitude;
  }
  /// The value with these bits (the bits above the format are kept, and ignored when read).
  CHOREO_HOST_DEVICE static ocp_float from_bits(std::uint8_t bits) {
    ocp_float x;
    x.storage = bits;
    return x;
  }
};

using f6_e2m3 = ocp_float<2, 3, 1>;
using f6_e3m2 = ocp_float<3, 2, 3>;
using f4_e2m1 = ocp_float<2, 1, 1>;

/// Unsigned E4M3 (fp8 scale factor): the e4m3 encoding without its sign bit, in the low 7 bits
/// (bit 7 is zero, ignored when read). 0x7F is NaN; the largest value is 448 (0x7E). Conversion
/// from float rounds to nearest, ties to even, saturates to 448; negative values (and -0) become
/// 0; NaN stays NaN.
struct f8_ue4m3 {
  using format = detail::minifloat<4, 3, 7>;
  static constexpr std::uint32_t nan_code = 0x7f;
  static constexpr std::uint32_t max_code = 0x7e;

  std::uint8_t storage;

  f8_ue4m3() = default;
  CHOREO_HOST_DEVICE explicit f8_ue4m3(float x) {
    if (x != x) {
      storage = nan_code;
    } else {
      storage = static_cast<std::uint8_t>(x > 0.0f ? format::encode(x, max_code) : 0u);
    }
  }
  CHOREO_HOST_DEVICE explicit f8_ue4m3(double x) : f8_ue4m3(static_cast<float>(x)) {}
  template <typename V, std::enable_if_t<std::is_integral<V>::value, int> = 0>
  CHOREO_HOST_DEVICE explicit f8_ue4m3(V x) : f8_ue4m3(static_cast<float>(x)) {}
  CHOREO_HOST_DEVICE explicit operator float() const {
    const std::uint32_t code = storage & 0x7fu;
    return code == nan_code ? detail::bits_float(0x7fc00000u) : format::value(code);
  }
  CHOREO_HOST_DEVICE static f8_ue4m3 from_bits(std::uint8_t bits) {
    f8_ue4m3 x;
    x.storage = bits;
    return x;
  }
};

/// Unsigned E8M0 (MX scale factor): the value 2^(code - 127) for codes 0..254, and NaN for 0xFF;
/// no zero, no sign. Conversion from float rounds to the nearest power of two (ties, at
/// 1.5 * 2^k, to the even code), saturates to 2^127 (0xFE; infinity too) and to 2^-127 (0x00;
/// zero and negative values too); NaN becomes 0xFF.
struct f8_ue8m0 {
  static constexpr std::uint32_t nan_code = 0xff;
  static constexpr std::uint32_t max_code = 0xfe;

  std::uint8_t storage;

  f8_ue8m0() = default;
  CHOREO_HOST_DEVICE explicit f8_ue8m0(float x) {
    const std::uint32_t bits = detail::float_bits(x);
    if (x != x) {
      storage = nan_code;
    } else if ((bits >> 31) != 0 || x == 0.0f) {
      storage = 0;
    } else {
      // x = 2^(e - 127) * (1 + m / 2^23) for normal x, m * 2^-149 when e == 0.
      const std::uint32_t e = bits >> 23;
      const std::uint32_t m = bits & 0x7fffffu;
      std::uint32_t code;
      if (e == 0) {
        // Between 0 and 2^-126 (code 1); 2^-127 (code 0) is m = 0x400000, the midpoint
        // 1.5 * 2^-127 is m = 0x600000 and ties to the even code 0.
        code = m > 0x600000u ? 1u : 0u;
      } else {
        code = e;
        if (m > 0x400000u || (m == 0x400000u && (e & 1u) != 0)) ++code;
      }
      storage = static_cast<std::uint8_t>(code > max_code ? max_code : code);
    }
  }
  CHOREO_HOST_DEVICE explicit f8_ue8m0(double x) : f8_ue8m0(static_cast<float>(x)) {}
  template <typename V, std::enable_if_t<std::is_integral<V>::value, int> = 0>
  CHOREO_HOST_DEVICE explicit f8_ue8m0(V x) : f8_ue8m0(static_cast<float>(x)) {}
  CHOREO_HOST_DEVICE explicit operator float() const {
    if (storage == nan_code) return detail::bits_float(0x7fc00000u);
    // 2^-127 is the float subnormal 0x00400000; codes 1..254 are the float exponent itself.
    return detail::bits_float(storage == 0 ? 0x00400000u : static_cast<std::uint32_t>(storage) << 23);
  }
  CHOREO_HOST_DEVICE static f8_ue8m0 from_bits(std::uint8_t bits) {
    f8_ue8m0 x;
    x.storage = bits;
    return x;
  }
};

/// TensorFloat-32: a float whose mantissa is rounded (to nearest even) to 10 bits on construction.
struct tf32 {
  float value;

  tf32() = default;
  template <typename V, typename = std::enable_if_t<std::is_arithmetic<V>::value>>
  CHOREO_HOST_DEVICE tf32(V v) : value(round_to_tf32(static_cast<float>(v))) {}
  CHOREO_HOST_DEVICE operator float() const { return value; }

 private:
  CHOREO_HOST_DEVICE static float round_to_tf32(float x) {
    std::uint32_t bits = detail::float_bits(x);
    if ((bits & 0x7f800000u) == 0x7f800000u) return x;  // inf and NaN stay as they are
    bits += 0xfffu + ((bits >> 13) & 1u);
    return detail::bits_float(bits & 0xffffe000u);
  }
};

struct binary_tag {};

/// An integer of `Bits` bits (1..7), stored unpacked in one byte: the low `Bits` bits hold the
/// value (two's complement when signed), the bits above are zero, and reading ignores them (and
/// sign-extends a signed value). Construction from an integer keeps its low `Bits` bits, so
/// values wrap modulo 2^Bits like CUTLASS's integer_subbyte; a floating value is truncated
/// toward zero first. `bin1` (the binary_tag type) converts like bool instead: any nonzero
/// value (NaN too) becomes 1.
template <unsigned Bits, bool Signed, typename Tag = void>
struct subbyte_int {
  static_assert(Bits >= 1 && Bits <= 7, "sub-byte integers have 1 to 7 bits");
  static constexpr int bits = static_cast<int>(Bits);
  static constexpr bool binary = std::is_same<Tag, binary_tag>::value;
  static constexpr int min_value = Signed ? -(1 << (Bits - 1)) : 0;
  static constexpr int max_value = Signed ? (1 << (Bits - 1)) - 1 : (1 << Bits) - 1;
  static constexpr unsigned mask = (1u << Bits) - 1u;

  std::uint8_t storage;

  subbyte_int() = default;
  template <typename V, std::enable_if_t<std::is_integral<V>::value, int> = 0>
  CHOREO_HOST_DEVICE constexpr subbyte_int(V v)
      : storage(binary ? static_cast<std::uint8_t>(v != 0) : wrap(static_cast<long long>(v))) {}
  template <typename V, std::enable_if_t<std::is_floating_point<V>::value, int> = 0>
  CHOREO_HOST_DEVICE constexpr explicit subbyte_int(V v)
      : storage(binary ? static_cast<std::uint8_t>(v != 0) : wrap(truncate(v))) {}
  template <unsigned OtherBits, bool OtherSigned, typename OtherTag>
  CHOREO_HOST_DEVICE constexpr explicit subbyte_int(subbyte_int<OtherBits, OtherSigned, OtherTag> v)
      : subbyte_int(static_cast<int>(v)) {}
  CHOREO_HOST_DEVICE constexpr operator int() const {
    const int low = static_cast<int>(storage & mask);
    return (Signed && (low >> (Bits - 1)) != 0) ? low - (1 << Bits) : low;
  }
  /// The value with these bits (the bits above `Bits` are kept, and ignored when read).
  CHOREO_HOST_DEVICE static constexpr subbyte_int from_bits(std::uint8_t raw) {
    subbyte_int x{};
    x.storage = raw;
    return x;
  }

 private:
  CHOREO_HOST_DEVICE static constexpr std::uint8_t wrap(long long v) {
    return static_cast<std::uint8_t>(static_cast<unsigned long long>(v) & mask);
  }
  template <typename V>
  CHOREO_HOST_DEVICE static constexpr long long truncate(V v) {
    // Out-of-range and NaN float-to-integer conversions are undefined behaviour; clamp first.
    if (!(v == v)) return 0;
    if (v <= static_cast<V>(-1e18)) return -1000000000000000000ll;
    if (v >= static_cast<V>(1e18)) return 1000000000000000000ll;
    return static_cast<long long>(v);
  }
};

using bin1 = subbyte_int<1, false, binary_tag>;
using u1 = subbyte_int<1, false>;
using u2 = subbyte_int<2, false>;
using u4 = subbyte_int<4, false>;
using u6 = subbyte_int<6, false>;
using s2 = subbyte_int<2, true>;
using s4 = subbyte_int<4, true>;
using s6 = subbyte_int<6, true>;

// The `_t` spellings used for scalar parameters of generated wrappers.
using s8_t = s8;
using s16_t = s16;
using s32_t = s32;
using s64_t = s64;
using u8_t = u8;
using u16_t = u16;
using u32_t = u32;
using u64_t = u64;
using f32_t = f32;
using f64_t = f64;
using f16_t = f16;
using half_t = half;
using bf16_t = bf16;
using bfp16_t = bfp16;
using tf32_t = tf32;
using f8_t = f8;
using f8_e4m3_t = f8_e4m3;
using f8_e5m2_t = f8_e5m2;
using f8_ue4m3_t = f8_ue4m3;
using f8_ue8m0_t = f8_ue8m0;
using f6_e2m3_t = f6_e2m3;
using f6_e3m2_t = f6_e3m2;
using f4_e2m1_t = f4_e2m1;
using bin1_t = bin1;
using u1_t = u1;
using u2_t = u2;
using u4_t = u4;
using u6_t = u6;
using s2_t = s2;
using s4_t = s4;
using s6_t = s6;

/// True for the integer types narrower than a byte (stored one per byte).
template <typename T>
struct is_subbyte_integer : std::false_type {};
template <unsigned Bits, bool Signed, typename Tag>
struct is_subbyte_integer<subbyte_int<Bits, Signed, Tag>> : std::true_type {};

/// True for the floating types narrower than f32, whose arithmetic goes through f32.
template <typename T>
struct is_low_precision_float : std::false_type {};
template <>
struct is_low_precision_float<f16> : std::true_type {};
template <>
struct is_low_precision_float<bf16> : std::true_type {};
template <>
struct is_low_precision_float<tf32> : std::true_type {};
template <>
struct is_low_precision_float<f8_e4m3> : std::true_type {};
template <>
struct is_low_precision_float<f8_e5m2> : std::true_type {};
template <>
struct is_low_precision_float<f8_ue4m3> : std::true_type {};
template <>
struct is_low_precision_float<f8_ue8m0> : std::true_type {};
template <int Exp, int Man, int Bias>
struct is_low_precision_float<ocp_float<Exp, Man, Bias>> : std::true_type {};

// ---------------------------------------------------------------------------------------------
// Scalar conversions (runtime-abi §9.8).
// ---------------------------------------------------------------------------------------------

CHOREO_HOST_DEVICE inline float f16_to_f32(f16 x) { return __half2float(x); }
CHOREO_HOST_DEVICE inline f16 f32_to_f16(float x) { return __float2half(x); }
CHOREO_HOST_DEVICE inline float bf16_to_f32(bf16 x) { return __bfloat162float(x); }
CHOREO_HOST_DEVICE inline bf16 f32_to_bf16(float x) { return __float2bfloat16(x); }

CHOREO_HOST_DEVICE inline float to_f32(float x) { return x; }
CHOREO_HOST_DEVICE inline float to_f32(double x) { return static_cast<float>(x); }
CHOREO_HOST_DEVICE inline float to_f32(f16 x) { return __half2float(x); }
CHOREO_HOST_DEVICE inline float to_f32(bf16 x) { return __bfloat162float(x); }
CHOREO_HOST_DEVICE inline float to_f32(tf32 x) { return x.value; }
CHOREO_HOST_DEVICE inline float to_f32(f8_e4m3 x) { return static_cast<float>(x); }
CHOREO_HOST_DEVICE inline float to_f32(f8_e5m2 x) { return static_cast<float>(x); }
CHOREO_HOST_DEVICE inline float to_f32(f8_ue4m3 x) { return static_cast<float>(x); }
CHOREO_HOST_DEVICE inline float to_f32(f8_ue8m0 x) { return static_cast<float>(x); }
template <int Exp, int Man, int Bias>
CHOREO_HOST_DEVICE inline float to_f32(ocp_float<Exp, Man, Bias> x) {
  return static_cast<float>(x);
}
template <unsigned Bits, bool Signed, typename Tag>
CHOREO_HOST_DEVICE inline float to_f32(subbyte_int<Bits, Signed, Tag> x) {
  return static_cast<float>(static_cast<int>(x));
}
template <typename T, std::enable_if_t<std::is_integral<T>::value, int> = 0>
CHOREO_HOST_DEVICE inline float to_f32(T x) {
  return static_cast<float>(x);
}

namespace utils {

/// Converts a float to element type `U`: f16 and bf16 through the CUDA conversion functions,
/// everything else through `static_cast` (the fp8/fp6/fp4 constructors round to nearest and
/// saturate).
template <typename U>
CHOREO_HOST_DEVICE inline U from_f32(float x) {
  if constexpr (std::is_same<U, f16>::value) {
    return __float2half(x);
  } else if constexpr (std::is_same<U, bf16>::value) {
    return __float2bfloat16(x);
  } else {
    return static_cast<U>(x);
  }
}

}  // namespace utils

// ---------------------------------------------------------------------------------------------
// mdspan<Rank> (runtime-abi §9.6).
// ---------------------------------------------------------------------------------------------

template <std::size_t Rank>
class mdspan;

namespace detail {

template <std::size_t Rank>
std::string shape_text(const mdspan<Rank>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < Rank; ++i) {
    if (i != 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

}  // namespace detail

/// The extents of a rank-`Rank` span: a fixed array of `size_t`.
template <std::size_t Rank>
class mdspan {
  static_assert(Rank >= 1, "a span has at least one dimension");

 public:
  using value_type = std::size_t;
  using iterator = std::size_t*;
  using const_iterator = const std::size_t*;

  /// All extents zero.
  constexpr mdspan() : extents_{} {}

  /// From exactly `Rank` extents, or from one extent that is used for every dimension.
  mdspan(std::initializer_list<std::size_t> extents) : extents_{} {
    if (extents.size() == 1) {
      std::fill(begin(), end(), *extents.begin());
    } else if (extents.size() == Rank) {
      std::copy(extents.begin(), extents.end(), begin());
    } else {
      detail::runtime_check_failed("a rank-" + std::to_string(Rank) + " shape was given " +
                                   std::to_string(extents.size()) + " extents");
    }
  }

  std::size_t& operator[](std::size_t i) {
    check(i);
    return extents_[i];
  }
  const std::size_t& operator[](std::size_t i) const {
    check(i);
    return extents_[i];
  }

  static constexpr std::size_t size() { return Rank; }
  iterator begin() { return extents_; }
  iterator end() { return extents_ + Rank; }
  const_iterator begin() const { return extents_; }
  const_iterator end() const { return extents_ + Rank; }
  const std::size_t* data() const { return extents_; }

  /// The product of the extents.
  std::size_t element_count() const {
    std::size_t count = 1;
    for (std::size_t extent : extents_) count *= extent;
    return count;
  }

  friend bool operator==(const mdspan& a, const mdspan& b) {
    return std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const mdspan& a, const mdspan& b) { return !(a == b); }

  /// Prints the extents separated by single spaces.
  friend std::ostream& operator<<(std::ostream& os, const mdspan& shape) {
    for (std::size_t i = 0; i < Rank; ++i) os << (i == 0 ? "" : " ") << shape.extents_[i];
    return os;
  }

 private:
  void check(std::size_t i) const {
    if (i >= Rank) {
      detail::runtime_check_failed("mdspan index " + std::to_string(i) + " is out of range for rank " +
                                   std::to_string(Rank));
    }
  }

  std::size_t extents_[Rank];
};

// ---------------------------------------------------------------------------------------------
// Spans: shared element access (operator[], fill, fill_random).
// ---------------------------------------------------------------------------------------------

/// The engine behind fill_random: one per thread, seeded from CHOREO_RANDOM_SEED when that
/// environment variable holds a number, else from std::random_device.
inline std::mt19937& random_engine() {
  thread_local std::mt19937 engine = [] {
    const char* text = std::getenv("CHOREO_RANDOM_SEED");
    if (text != nullptr && *text != '\0') {
      char* end = nullptr;
      const unsigned long seed = std::strtoul(text, &end, 0);
      if (end != nullptr && *end == '\0') return std::mt19937(static_cast<std::uint32_t>(seed));
      std::fprintf(stderr, "[choreo] warning: ignoring CHOREO_RANDOM_SEED=\"%s\" (not a number)\n",
                   text);
    }
    std::random_device device;
    return std::mt19937(device());
  }();
  return engine;
}

/// Reseeds this thread's fill_random engine, making the following fills reproducible.
inline void seed_random(std::uint32_t seed) { random_engine().seed(seed); }

namespace detail {

template <std::size_t Rank>
[[noreturn]] void index_out_of_bounds(long long index, std::size_t dim,
                                      const mdspan<Rank>& shape) {
  runtime_check_failed("Index out of bounds: subscript " + std::to_string(index) +
                       " of dimension " + std::to_string(dim) + " is outside [0, " +
                       std::to_string(shape[dim]) + ") of a span of shape " + shape_text(shape));
}

template <std::size_t Rank>
inline std::size_t checked_index(long long index, std::size_t dim, const mdspan<Rank>& shape) {
  if (index < 0 || static_cast<unsigned long long>(index) >= shape[dim]) {
    index_out_of_bounds(index, dim, shape);
  }
  return static_cast<std::size_t>(index);
}

/// The result of `span[i]` on a span of rank > 1: `Applied` subscripts are applied and `offset`
/// is the row-major offset of the selected sub-span. The shape is held by value so that a proxy
/// outliving a temporary view stays valid.
template <typename T, std::size_t Rank, std::size_t Applied>
class subscript_proxy {
 public:
  subscript_proxy(T* data, const mdspan<Rank>& shape, std::size_t offset)
      : data_(data), shape_(shape), offset_(offset) {}

  /// The next subscript; yields `T&` once all `Rank` subscripts are given.
  decltype(auto) operator[](long long index) const {
    const std::size_t offset = offset_ * shape_[Applied] + checked_index(index, Applied, shape_);
    if constexpr (Applied + 1 == Rank) {
      return data_[offset];
    } else {
      return subscript_proxy<T, Rank, Applied + 1>(data_, shape_, offset);
    }
  }

 private:
  T* data_;
  mdspan<Rank> shape_;
  std::size_t offset_;
};

template <typename T, std::size_t Rank>
decltype(auto) subscript(T* data, const mdspan<Rank>& shape, long long index) {
  const std::size_t first = checked_index(index, 0, shape);
  if constexpr (Rank == 1) {
    return data[first];
  } else {
    return subscript_proxy<T, Rank, 1>(data, shape, first);
  }
}

template <typename T, typename V>
void fill(T* data, std::size_t count, V value) {
  std::fill(data, data + count, static_cast<T>(value));
}

template <typename T, typename LB, typename UB>
void fill_random(T* data, std::size_t count, LB lb, UB ub) {
  const T low = static_cast<T>(lb);
  const T high = static_cast<T>(ub);
  std::mt19937& engine = random_engine();
  const auto check_order = [](auto lo, auto hi) {
    if (!(lo <= hi)) {
      runtime_check_failed("fill_random: the lower bound " + std::to_string(lo) +
                           " is above the upper bound " + std::to_string(hi) +
                           " (after conversion to the element type)");
    }
  };
  if constexpr (std::is_integral<T>::value) {
    // uniform_int_distribution is not defined for character types; draw in 64 bits instead.
    using wide = std::conditional_t<std::is_unsigned<T>::value, unsigned long long, long long>;
    check_order(static_cast<wide>(low), static_cast<wide>(high));
    std::uniform_int_distribution<wide> dist(static_cast<wide>(low), static_cast<wide>(high));
    for (std::size_t i = 0; i < count; ++i) data[i] = static_cast<T>(dist(engine));
  } else if constexpr (std::is_floating_point<T>::value) {
    check_order(low, high);
    std::uniform_real_distribution<T> dist(low, high);
    for (std::size_t i = 0; i < count; ++i) data[i] = dist(engine);
  } else if constexpr (is_subbyte_integer<T>::value) {
    check_order(static_cast<int>(low), static_cast<int>(high));
    std::uniform_int_distribution<int> dist(static_cast<int>(low), static_cast<int>(high));
    for (std::size_t i = 0; i < count; ++i) data[i] = static_cast<T>(dist(engine));
  } else {
    static_assert(is_low_precision_float<T>::value, "fill_random: unsupported element type");
    const float lo = to_f32(low);
    const float hi = to_f32(high);
    check_order(lo, hi);
    std::uniform_real_distribution<float> dist(lo, hi);
    for (std::size_t i = 0; i < count; ++i) data[i] = utils::from_f32<T>(dist(engine));
  }
}

// The size queries shared by spanned_view and spanned_data; `Derived` provides shape().
template <typename Derived, typename T, std::size_t Rank>
class span_api {
 public:
  static constexpr std::size_t rank() { return Rank; }
  std::size_t element_count() const { return self().shape().element_count(); }
  std::size_t bytes() const { return element_count() * sizeof(T); }

 private:
  const Derived& self() const { return static_cast<const Derived&>(*this); }
};

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// spanned_view<T, Rank> (runtime-abi §9.5): a non-owning, copyable pointer + shape.
// ---------------------------------------------------------------------------------------------

/// A non-owning row-major view of `Rank`-dimensional data (host or device memory). Like a
/// pointer, a const view still gives mutable access to the elements.
template <typename T, std::size_t Rank>
class spanned_view : public detail::span_api<spanned_view<T, Rank>, T, Rank> {
 public:
  using element_type = T;

  spanned_view() = default;
  spanned_view(T* data, const mdspan<Rank>& shape) : data_(data), shape_(shape) {}

  T* data() const { return data_; }
  const mdspan<Rank>& shape() const { return shape_; }

  /// Bounds-checked subscript: `T&` for rank 1, else a proxy that takes the next subscript.
  decltype(auto) operator[](long long index) const { return detail::subscript(data_, shape_, index); }

  /// Sets every element to `static_cast<T>(value)`.
  template <typename V>
  void fill(V value) const {
    detail::fill(data(), this->element_count(), value);
  }

  /// Fills with uniform random values between `lb` and `ub` (both cast to T first): integers in
  /// [lb, ub], f32/f64 in [lb, ub), narrower floats drawn as f32 in [lb, ub) and rounded.
  template <typename LB, typename UB>
  void fill_random(LB lb, UB ub) const {
    detail::fill_random(data(), this->element_count(), lb, ub);
  }

 private:
  T* data_ = nullptr;
  mdspan<Rank> shape_;
};

// ---------------------------------------------------------------------------------------------
// spanned_data<T, Rank> (runtime-abi §9.4): owning, move-only host buffer + shape.
// ---------------------------------------------------------------------------------------------

/// An owning row-major host buffer of `Rank`-dimensional data. Move-only.
template <typename T, std::size_t Rank>
class spanned_data : public detail::span_api<spanned_data<T, Rank>, T, Rank> {
 public:
  using element_type = T;

  /// An empty buffer (no elements, all extents zero).
  spanned_data() = default;

  /// Allocates (uninitialised) storage for `shape`; every extent must be positive.
  explicit spanned_data(const mdspan<Rank>& shape) : shape_(shape) {
    std::size_t count = 1;
    for (std::size_t extent : shape) {
      if (extent == 0 || count > std::numeric_limits<std::size_t>::max() / sizeof(T) / extent) {
        detail::runtime_check_failed("error: invalid dimensions. Cannot allocate a span of shape " +
                                     detail::shape_text(shape));
      }
      count *= extent;
    }
    storage_.reset(new T[count]);
  }

  spanned_data(const spanned_data&) = delete;
  spanned_data& operator=(const spanned_data&) = delete;
  spanned_data(spanned_data&&) noexcept = default;
  spanned_data& operator=(spanned_data&&) noexcept = default;

  T* data() { return storage_.get(); }
  const T* data() const { return storage_.get(); }
  const mdspan<Rank>& shape() const { return shape_; }

  /// A view of the same memory and shape (the view does not keep the buffer alive).
  spanned_view<T, Rank> view() const { return spanned_view<T, Rank>(storage_.get(), shape_); }

  /// Bounds-checked subscript: `T&` for rank 1, else a proxy that takes the next subscript.
  decltype(auto) operator[](long long index) { return detail::subscript(data(), shape_, index); }
  decltype(auto) operator[](long long index) const {
    return detail::subscript(data(), shape_, index);
  }

  /// Sets every element to `static_cast<T>(value)`.
  template <typename V>
  void fill(V value) {
    detail::fill(data(), this->element_count(), value);
  }

  /// Fills with uniform random values between `lb` and `ub` (both cast to T first): integers in
  /// [lb, ub], f32/f64 in [lb, ub), narrower floats drawn as f32 in [lb, ub) and rounded.
  template <typename LB, typename UB>
  void fill_random(LB lb, UB ub) {
    detail::fill_random(data(), this->element_count(), lb, ub);
  }

 private:
  std::unique_ptr<T[]> storage_;
  mdspan<Rank> shape_;
};

// ---------------------------------------------------------------------------------------------
// Constructors (runtime-abi §9.2, §9.3, §8).
// ---------------------------------------------------------------------------------------------

namespace detail {

template <typename D>
std::size_t checked_dimension(D d) {
  static_assert(std::is_integral<D>::value || std::is_enum<D>::value,
                "make_spandata dimensions must be integers");
  if constexpr (std::is_enum<D>::value) {
    return checked_dimension(static_cast<std::underlying_type_t<D>>(d));
  } else {
    if constexpr (std::is_signed<D>::value) {
      if (d <= 0) {
        runtime_check_failed("error: invalid dimensions. make_spandata got the extent " +
                             std::to_string(static_cast<long long>(d)));
      }
    }
    return static_cast<std::size_t>(d);
  }
}

}  // namespace detail

/// `make_spandata<T>(d0, d1, ...)`: an owning buffer of shape [d0, d1, ...] (uninitialised).
template <typename T, typename... Dims,
          std::enable_if_t<(sizeof...(Dims) > 0) &&
                               ((std::is_integral<Dims>::value || std::is_enum<Dims>::value) && ...),
                           int> = 0>
spanned_data<T, sizeof...(Dims)> make_spandata(Dims... dims) {
  return spanned_data<T, sizeof...(Dims)>(
      mdspan<sizeof...(Dims)>{detail::checked_dimension(dims)...});
}

/// `make_spandata<T, Rank>({d0, ...})` (as generated code writes it) or
/// `make_spandata<T, Rank>(other.shape())`.
template <typename T, std::size_t Rank>
spanned_data<T, Rank> make_spandata(const mdspan<Rank>& shape) {
  return spanned_data<T, Rank>(shape);
}

/// `make_spanview<T, Rank>(ptr, {d0, ...})`.
template <typename T, std::size_t Rank>
spanned_view<T, Rank> make_spanview(T* data, const mdspan<Rank>& shape) {
  return spanned_view<T, Rank>(data, shape);
}
/// `make_spanview<T, Rank>(const_ptr, {...})`: the const is dropped, as wrappers take
/// `spanned_view<T, R>`; writing through it is the caller's responsibility.
template <typename T, std::size_t Rank>
spanned_view<T, Rank> make_spanview(const T* data, const mdspan<Rank>& shape) {
  return spanned_view<T, Rank>(const_cast<T*>(data), shape);
}
/// `make_spanview<T, Rank>(void_ptr, {...})`: reinterprets untyped memory as T.
template <typename T, std::size_t Rank>
spanned_view<T, Rank> make_spanview(void* data, const mdspan<Rank>& shape) {
  return spanned_view<T, Rank>(static_cast<T*>(data), shape);
}
template <typename T, std::size_t Rank>
spanned_view<T, Rank> make_spanview(const void* data, const mdspan<Rank>& shape) {
  return spanned_view<T, Rank>(static_cast<T*>(const_cast<void*>(data)), shape);
}

// The <Rank, T> order: a non-type first template argument makes the <T, Rank> overloads above
// fail substitution, and vice versa, so both spellings resolve without ambiguity.

/// `make_spanview<Rank, T>(ptr, {d0, ...})` (T may also be deduced: `make_spanview<2>(p, {..})`).
template <std::size_t Rank, typename T>
spanned_view<T, Rank> make_spanview(T* data, const mdspan<Rank>& shape) {
  return spanned_view<T, Rank>(data, shape);
}
template <std::size_t Rank, typename T>
spanned_view<T, Rank> make_spanview(const T* data, const mdspan<Rank>& shape) {
  return spanned_view<T, Rank>(const_cast<T*>(data), shape);
}

/// A rank-1 view of a C array.
template <typename T, std::size_t N>
spanned_view<T, 1> make_spanview(T (&array)[N]) {
  return spanned_view<T, 1>(array, mdspan<1>{N});
}
/// A rank-2 view of a two-dimensional C array.
template <typename T, std::size_t N, std::size_t M>
spanned_view<T, 2> make_spanview(T (&array)[N][M]) {
  return spanned_view<T, 2>(&array[0][0], mdspan<2>{N, M});
}

/// A fresh owning copy of `shape.element_count()` elements at `data`:
/// `copy_as_spanned(x.data(), x.shape())` or `copy_as_spanned<Rank>(ptr, {d0, ...})`.
template <std::size_t Rank, typename T>
spanned_data<T, Rank> copy_as_spanned(const T* data, const mdspan<Rank>& shape) {
  spanned_data<T, Rank> copy(shape);
  std::copy(data, data + copy.element_count(), copy.data());
  return copy;
}

// ---------------------------------------------------------------------------------------------
// Timing (runtime-abi §9.10).
// ---------------------------------------------------------------------------------------------

/// How `timing` runs the function: `warmup` untimed calls, then `repeat` timed ones.
struct TimerOption {
  int warmup = 10;
  int repeat = 100;
  bool sync = true;
};

/// The mean time in milliseconds of one call `fn(args...)`, measured with CUDA events on the
/// default stream after `opt.warmup` untimed calls.
template <typename F, typename... Args>
double timing(F&& fn, const TimerOption& opt, Args&&... args) {
  runtime_check(opt.repeat > 0, "timing: TimerOption::repeat must be positive");
  for (int i = 0; i < opt.warmup; ++i) fn(args...);
  if (opt.sync) abend_true(cudaDeviceSynchronize());
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  abend_true(cudaEventCreate(&start));
  abend_true(cudaEventCreate(&stop));
  abend_true(cudaEventRecord(start));
  for (int i = 0; i < opt.repeat; ++i) fn(args...);
  abend_true(cudaEventRecord(stop));
  abend_true(cudaEventSynchronize(stop));
  float elapsed_ms = 0.0f;
  abend_true(cudaEventElapsedTime(&elapsed_ms, start, stop));
  abend_true(cudaEventDestroy(start));
  abend_true(cudaEventDestroy(stop));
  return static_cast<double>(elapsed_ms) / opt.repeat;
}

// ---------------------------------------------------------------------------------------------
// Matmul verification (runtime-abi §9.9). The arguments may be spanned_data or spanned_view.
// ---------------------------------------------------------------------------------------------

namespace detail {

// Checks res[m, n] = lhs[m, k] x rhs, with rhs [k, n] (row-col) or [n, k] (row-row).
template <typename L, typename R, typename O>
void check_matmul_shapes(const L& lhs, const R& rhs, const O& res, bool rhs_is_n_by_k,
                         const char* who) {
  const std::size_t m = res.shape()[0];
  const std::size_t n = res.shape()[1];
  const std::size_t k = lhs.shape()[1];
  const std::size_t rhs_k = rhs.shape()[rhs_is_n_by_k ? 1 : 0];
  const std::size_t rhs_n = rhs.shape()[rhs_is_n_by_k ? 0 : 1];
  if (lhs.shape()[0] != m || rhs_k != k || rhs_n != n) {
    runtime_check_failed(std::string(who) + ": inconsistent shapes: lhs " +
                         shape_text(lhs.shape()) + ", rhs " + shape_text(rhs.shape()) +
                         ", result " + shape_text(res.shape()));
  }
}

template <typename L, typename R>
float matmul_reference(const L& lhs, const R& rhs, std::size_t i, std::size_t j,
                       bool rhs_is_n_by_k) {
  const std::size_t k = lhs.shape()[1];
  float ref = 0.0f;
  for (std::size_t kk = 0; kk < k; ++kk) {
    const float b = rhs_is_n_by_k ? to_f32(rhs[j][kk]) : to_f32(rhs[kk][j]);
    ref += to_f32(lhs[i][kk]) * b;
  }
  return ref;
}

template <typename L, typename R, typename O>
void verify_matmul_subset(const L& lhs, const R& rhs, const O& res, float base_tol, float rel_tol,
                          std::size_t max_i, std::size_t max_j, bool rhs_is_n_by_k,
                          const char* who) {
  check_matmul_shapes(lhs, rhs, res, rhs_is_n_by_k, who);
  const std::size_t m = res.shape()[0];
  const std::size_t n = res.shape()[1];
  const std::size_t step_i = std::max<std::size_t>(1, max_i == 0 ? m : m / max_i);
  const std::size_t step_j = std::max<std::size_t>(1, max_j == 0 ? n : n / max_j);
  for (std::size_t i = 0; i < m; i += step_i) {
    for (std::size_t j = 0; j < n; j += step_j) {
      const float ref = matmul_reference(lhs, rhs, i, j, rhs_is_n_by_k);
      const float got = to_f32(res[i][j]);
      const float diff = std::fabs(got - ref);
      if (!(diff <= base_tol + rel_tol * std::fabs(ref))) {
        std::printf("%s: mismatch at (%zu, %zu) gpu=%f ref=%f diff=%f\n", who, i, j, got, ref,
                    diff);
        choreo_assert(false, "values are not equal.");
      }
    }
  }
}

inline std::size_t gcd(std::size_t a, std::size_t b) {
  while (b != 0) {
    const std::size_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

}  // namespace detail

/// Checks a grid of about max_i x max_j entries of res = lhs x rhs (lhs [m, k], rhs [k, n]).
template <typename L, typename R, typename O>
void verify_matmul_row_col_subset(const L& lhs, const R& rhs, const O& res, float base_tol,
                                  float rel_tol, std::size_t max_i = 8, std::size_t max_j = 8) {
  detail::verify_matmul_subset(lhs, rhs, res, base_tol, rel_tol, max_i, max_j, false,
                               "verify_matmul_row_col_subset");
}

/// Like verify_matmul_row_col_subset with rhs given as [n, k].
template <typename L, typename R, typename O>
void verify_matmul_row_row_subset(const L& lhs, const R& rhs, const O& res, float base_tol,
                                  float rel_tol, std::size_t max_i = 8, std::size_t max_j = 8) {
  detail::verify_matmul_subset(lhs, rhs, res, base_tol, rel_tol, max_i, max_j, true,
                               "verify_matmul_row_row_subset");
}

/// Settings of the sampled matmul verifiers.
struct SampledVerifierConfig {
  std::size_t num_samples = 512;
  float base_tol = 1.0f;
  float rel_tol = 0.01f;
  bool verbose = false;
};

namespace detail {

template <typename L, typename R, typename O>
void verify_matmul_sampled(const L& lhs, const R& rhs, const O& res,
                           const SampledVerifierConfig& cfg, bool rhs_is_n_by_k, const char* who) {
  check_matmul_shapes(lhs, rhs, res, rhs_is_n_by_k, who);
  const std::size_t n = res.shape()[1];
  const std::size_t total = res.shape()[0] * n;
  if (total == 0 || cfg.num_samples == 0) return;
  // A stride coprime with n walks across rows and columns instead of revisiting one column.
  std::size_t stride = std::max<std::size_t>(1, total / cfg.num_samples);
  while (gcd(stride, n) != 1) ++stride;
  const std::size_t samples = std::min(cfg.num_samples, total);
  std::size_t failed = 0;
  for (std::size_t s = 0; s < samples; ++s) {
    const std::size_t idx = (s * stride) % total;
    const std::size_t i = idx / n;
    const std::size_t j = idx % n;
    const float ref = matmul_reference(lhs, rhs, i, j, rhs_is_n_by_k);
    const float got = to_f32(res[i][j]);
    const float diff = std::fabs(got - ref);
    if (!(diff <= cfg.base_tol + cfg.rel_tol * std::fabs(ref))) {
      if (failed < 5) {
        std::printf("mismatch at (%zu, %zu) gpu=%f ref=%f diff=%f\n", i, j, got, ref, diff);
      }
      ++failed;
    }
  }
  if (failed != 0) {
    std::printf("FAILED: %zu/%zu samples\n", failed, samples);
    choreo_assert(false, "sampled verification failed");
  } else if (cfg.verbose) {
    std::printf("%s: %zu samples passed\n", who, samples);
  }
}

}  // namespace detail

/// Checks up to cfg.num_samples entries of res = lhs x rhs^T (lhs [m, k], rhs [n, k]).
template <typename L, typename R, typename O>
void verify_matmul_row_row_sampled(const L& lhs, const R& rhs, const O& res,
                                   const SampledVerifierConfig& cfg = {}) {
  detail::verify_matmul_sampled(lhs, rhs, res, cfg, true, "verify_matmul_row_row_sampled");
}

/// Checks up to cfg.num_samples entries of res = lhs x rhs (lhs [m, k], rhs [k, n]).
template <typename L, typename R, typename O>
void verify_matmul_row_col_sampled(const L& lhs, const R& rhs, const O& res,
                                   const SampledVerifierConfig& cfg = {}) {
  detail::verify_matmul_sampled(lhs, rhs, res, cfg, false, "verify_matmul_row_col_sampled");
}

// ---------------------------------------------------------------------------------------------
// Sparse 2:4 host utilities (runtime-abi §9.11).
// ---------------------------------------------------------------------------------------------

namespace utils {

/// Host-side preparation of 2:4 structured-sparse A operands for WGMMA; `K` is the K extent of
/// one sparse MMA instruction.
template <typename T, int K>
struct Sparse2to4HostPolicyWGMMA {
  static constexpr int k_per_instruction = K;

  /// Zeroes `dense` and puts two nonzero values from U(-1, 1) at two distinct random positions of
  /// every group of four columns.
  template <typename Dense>
  static void init_structured_sparse_A(Dense& dense, std::mt19937& gen) {
    const std::size_t rows = dense.shape()[0];
    const std::size_t cols = dense.shape()[1];
    runtime_check(cols % 4 == 0, "init_structured_sparse_A: the column count " +
                                     std::to_string(cols) + " is not a multiple of 4");
    dense.fill(0);
    std::uniform_int_distribution<int> position(0, 3);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t g = 0; g < cols / 4; ++g) {
        int first = position(gen);
        int second = position(gen);
        while (second == first) second = position(gen);
        if (second < first) std::swap(first, second);
        dense[r][4 * g + first] = nonzero(value(gen), 1.0f);
        dense[r][4 * g + second] = nonzero(value(gen), -1.0f);
      }
    }
  }

  /// Packs the two kept values of each group of four into `packed[r][2g..2g+1]` and their
  /// positions (idx0 | idx1 << 2) into the low (even g) or high (odd g) nibble of `meta[r][g/2]`.
  /// A group without exactly two nonzeros is encoded as positions {0, 1}.
  template <typename Dense, typename Packed, typename Meta>
  static void encode(const Dense& dense, Packed& packed, Meta& meta) {
    const std::size_t rows = dense.shape()[0];
    const std::size_t cols = dense.shape()[1];
    const std::size_t groups = cols / 4;
    runtime_check(cols % 4 == 0 && packed.shape()[0] == rows && packed.shape()[1] == cols / 2 &&
                      meta.shape()[0] == rows && meta.shape()[1] >= (groups + 1) / 2,
                  "encode: expected dense [R, 4G], packed [R, 2G] and meta [R, >= ceil(G/2)], got "
                  "dense " + detail::shape_text(dense.shape()) + ", packed " +
                      detail::shape_text(packed.shape()) + ", meta " +
                      detail::shape_text(meta.shape()));
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t g = 0; g < groups; ++g) {
        int found[4] = {0, 0, 0, 0};
        int count = 0;
        for (int c = 0; c < 4; ++c) {
          if (to_f32(dense[r][4 * g + c]) != 0.0f) {
            if (count < 4) found[count] = c;
            ++count;
          }
        }
        const int idx0 = count == 2 ? found[0] : 0;
        const int idx1 = count == 2 ? found[1] : 1;
        packed[r][2 * g] = dense[r][4 * g + idx0];
        packed[r][2 * g + 1] = dense[r][4 * g + idx1];
        const unsigned code = static_cast<unsigned>(idx0 | (idx1 << 2));
        auto&& byte = meta[r][g / 2];
        if (g % 2 == 0) {
          byte = static_cast<std::uint8_t>(code);
        } else {
          byte = static_cast<std::uint8_t>(byte | (code << 4));
        }
      }
    }
  }

 private:
  // A drawn value that is 0, or rounds to 0 in T, would break the 2:4 pattern.
  static T nonzero(float x, float replacement) {
    if (x == 0.0f) x = replacement;
    T converted = from_f32<T>(x);
    if (to_f32(converted) == 0.0f) converted = from_f32<T>(x > 0.0f ? 1.0f : -1.0f);
    return converted;
  }
};

namespace detail {
template <typename T>
struct sparse_wgmma_k {
  static constexpr int value = sizeof(T) == 1 ? 64 : 32;  // fp8: 64, f16/bf16: 32
};
}  // namespace detail

/// The WGMMA sparse policy for element type T (K = 32 for f16/bf16, 64 for fp8).
template <typename T>
using SparsePolicyWGMMA = Sparse2to4HostPolicyWGMMA<T, detail::sparse_wgmma_k<T>::value>;

}  // namespace utils

// ---------------------------------------------------------------------------------------------
// Debug RTTI: plain structs that a debugger can inspect (runtime-abi §8).
// ---------------------------------------------------------------------------------------------

namespace rtti {
template <int N>
struct mdspan {
  int data[N];
};
template <int N>
struct ituple {
  int data[N];
};
template <int N>
struct bounded_ituple {
  int data[N];
  int ub[N];
};
template <typename T, int N>
struct spanned {
  mdspan<N> span;
  mdspan<N> stride;
  T* data;
};
}  // namespace rtti

}  // namespace choreo

// ---------------------------------------------------------------------------------------------
// Global scope: croq_assert, fp6/fp4 names, and operators on the CUDA low-precision types. The
// operators sit in the global namespace, where the CUDA types are, so that argument-dependent
// lookup finds them from inside any namespace.
// ---------------------------------------------------------------------------------------------

/// Same as choreo::choreo_assert.
CHOREO_HOST_DEVICE inline void croq_assert(bool cond, const char* msg,
                                           const char* file = CHOREO_CALLER_FILE,
                                           int line = CHOREO_CALLER_LINE) {
  choreo::choreo_assert(cond, msg, file, line);
}

#define CHOREO_FLOAT_RESULT_OPERATORS(T)                                                 \
  CHOREO_HOST_DEVICE inline float operator+(T a, T b) { return float(a) + float(b); }   \
  CHOREO_HOST_DEVICE inline float operator-(T a, T b) { return float(a) - float(b); }   \
  CHOREO_HOST_DEVICE inline float operator*(T a, T b) { return float(a) * float(b); }   \
  CHOREO_HOST_DEVICE inline float operator/(T a, T b) { return float(a) / float(b); }   \
  inline std::ostream& operator<<(std::ostream& os, T x) { return os << float(x); }

// cuda_fp8.h has no comparisons; host code checks fp8 results with them (as it does halves).
#define CHOREO_FLOAT_COMPARISONS(T)                                                    \
  CHOREO_HOST_DEVICE inline bool operator==(T a, T b) { return float(a) == float(b); } \
  CHOREO_HOST_DEVICE inline bool operator!=(T a, T b) { return float(a) != float(b); } \
  CHOREO_HOST_DEVICE inline bool operator<(T a, T b) { return float(a) < float(b); }   \
  CHOREO_HOST_DEVICE inline bool operator<=(T a, T b) { return float(a) <= float(b); } \
  CHOREO_HOST_DEVICE inline bool operator>(T a, T b) { return float(a) > float(b); }   \
  CHOREO_HOST_DEVICE inline bool operator>=(T a, T b) { return float(a) >= float(b); }

CHOREO_FLOAT_RESULT_OPERATORS(__nv_fp8_e4m3)
CHOREO_FLOAT_RESULT_OPERATORS(__nv_fp8_e5m2)
CHOREO_FLOAT_COMPARISONS(__nv_fp8_e4m3)
CHOREO_FLOAT_COMPARISONS(__nv_fp8_e5m2)

// The narrow types of choreo.h itself (namespace choreo, found there by argument-dependent
// lookup): fp6/fp4 arithmetic rounds back into the type, every one compares and prints by value.
namespace choreo {
template <int Exp, int Man, int Bias>
CHOREO_HOST_DEVICE inline ocp_float<Exp, Man, Bias> operator+(ocp_float<Exp, Man, Bias> a,
                                                             ocp_float<Exp, Man, Bias> b) {
  return ocp_float<Exp, Man, Bias>(float(a) + float(b));
}
template <int Exp, int Man, int Bias>
CHOREO_HOST_DEVICE inline ocp_float<Exp, Man, Bias> operator-(ocp_float<Exp, Man, Bias> a,
                                                             ocp_float<Exp, Man, Bias> b) {
  return ocp_float<Exp, Man, Bias>(float(a) - float(b));
}
template <int Exp, int Man, int Bias>
CHOREO_HOST_DEVICE inline ocp_float<Exp, Man, Bias> operator*(ocp_float<Exp, Man, Bias> a,
                                                             ocp_float<Exp, Man, Bias> b) {
  return ocp_float<Exp, Man, Bias>(float(a) * float(b));
}
template <int Exp, int Man, int Bias>
CHOREO_HOST_DEVICE inline ocp_float<Exp, Man, Bias> operator/(ocp_float<Exp, Man, Bias> a,
                                                             ocp_float<Exp, Man, Bias> b) {
  return ocp_float<Exp, Man, Bias>(float(a) / float(b));
}
template <int Exp, int Man, int Bias>
inline std::ostream& operator<<(std::ostream& os, ocp_float<Exp, Man, Bias> x) {
  return os << float(x);
}
CHOREO_FLOAT_COMPARISONS(f6_e2m3)
CHOREO_FLOAT_COMPARISONS(f6_e3m2)
CHOREO_FLOAT_COMPARISONS(f4_e2m1)
CHOREO_FLOAT_COMPARISONS(f8_ue4m3)
CHOREO_FLOAT_COMPARISONS(f8_ue8m0)
inline std::ostream& operator<<(std::ostream& os, f8_ue4m3 x) { return os << float(x); }
inline std::ostream& operator<<(std::ostream& os, f8_ue8m0 x) { return os << float(x); }
}  // namespace choreo
using choreo::f4_e2m1;
using choreo::f6_e2m3;
using choreo::f6_e3m2;

#undef CHOREO_FLOAT_RESULT_OPERATORS
#undef CHOREO_FLOAT_COMPARISONS

// __half and __nv_bfloat16 convert implicitly to several arithmetic types, which makes
// `std::cout << h` ambiguous; print them as float.
inline std::ostream& operator<<(std::ostream& os, __half x) { return os << __half2float(x); }
inline std::ostream& operator<<(std::ostream& os, __nv_bfloat16 x) {
  return os << __bfloat162float(x);
}

// ---- TMA (tier 3 §3, §4, §10.2) ------------------------------------------------------------
// Tensor maps, the copy engine's issue instructions and the swizzle of §4. A generated host
// wrapper encodes one map per TMA statement before the launch (`encode_tiled`, which checks
// what the driver would reject and returns a message instead of aborting) and passes it as a
// trailing `const __grid_constant__ CUtensorMap` kernel parameter. On the CPU a map is a plain
// structure with the same information and the "copy engine" is a box copy (zero fill for
// elements outside the tensor, stores to them dropped, the swizzled layout when swizzled); the
// generated code then completes the mbarrier as the hardware would.
#if defined(__CHOREO_CPU__)
#ifndef __grid_constant__
#define __grid_constant__
#endif
// The CPU backend's tensor map: what cuTensorMapEncodeTiled would encode.
struct CUtensorMap {
  unsigned char* base;
  unsigned rank;
  unsigned elem_bytes;
  unsigned swizzle;
  std::uint64_t dims[5];     // innermost first
  std::uint64_t strides[5];  // bytes; strides[0] = elem_bytes
  std::uint32_t box[5];      // innermost first
};
#else
#include <cuda.h>  // CUtensorMap and its enums (types only: the encoder is looked up at run time)
#endif

namespace choreo {
namespace tma {

// Byte offset `b` (relative to a base aligned to 8·N) with swizzle period N (§4.1).
CHOREO_HOST_DEVICE constexpr unsigned swizzle_offset(unsigned n, unsigned b) {
  return n == 128  ? b ^ (((b >> 7) & 7u) << 4)
         : n == 64 ? b ^ (((b >> 7) & 3u) << 4)
         : n == 32 ? b ^ (((b >> 7) & 1u) << 4)
                   : b;
}

// The physical address of logical element `elem` of a swizzled shared tile of `rows` x `cols`
// elements starting at `base` (§4.2): rows of N bytes, column groups stacked, 16-byte chunks
// permuted.
template <unsigned N, class T>
CHOREO_HOST_DEVICE inline T* swizzled(T* base, T* elem, unsigned rows, unsigned cols) {
  const unsigned k = static_cast<unsigned>(elem - base);
  const unsigned r = k / cols, c = k % cols;
  const unsigned w = N / static_cast<unsigned>(sizeof(T));
  const unsigned phys = (c % w) + r * w + (c / w) * rows * w;
  const unsigned byte = swizzle_offset(N, phys * static_cast<unsigned>(sizeof(T)));
  return reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(base) + byte);
}

// The checks of §3.4 (what the driver would reject), shared by both backends.
inline const char* check_map(unsigned rank, const void* base, const std::uint64_t* dims,
                             const std::uint64_t* strides, const std::uint32_t* box,
                             unsigned elem_bytes, unsigned swizzle) {
  if (rank < 1 || rank > 5) return "a tensor map has 1 to 5 dimensions";
  if (reinterpret_cast<std::uintptr_t>(base) % 16 != 0)
    return "the tensor's base address is not 16-byte aligned";
  for (unsigned k = 0; k < rank; ++k) {
    if (dims[k] == 0 || dims[k] > (1ull << 32)) return "a tensor extent is 0 or above 2^32";
    if (box[k] == 0 || box[k] > 256) return "a box extent is 0 or above 256";
    if (k > 0) {
      const std::uint64_t s = strides[k - 1];
      if (s % 16 != 0) return "a row stride of the tensor is not a multiple of 16 bytes";
      if (s >= (1ull << 40)) return "a stride of the tensor is 2^40 bytes or more";
    }
  }
  const std::uint64_t inner = static_cast<std::uint64_t>(box[0]) * elem_bytes;
  if (inner % 16 != 0) return "the box's inner extent is not a multiple of 16 bytes";
  if (swizzle != 0 && inner > swizzle) return "the box's inner extent exceeds the swizzle period";
  return nullptr;
}

#if defined(__CHOREO_CPU__)
template <class T>
inline const char* encode_tiled(CUtensorMap* map, unsigned rank, const void* base,
                                const std::uint64_t* dims, const std::uint64_t* strides,
                                const std::uint32_t* box, unsigned swizzle, unsigned promote) {
  (void)promote;
  const char* err = check_map(rank, base, dims, strides, box, sizeof(T), swizzle);
  if (err != nullptr) return err;
  *map = CUtensorMap{};
  map->base = static_cast<unsigned char*>(const_cast<void*>(base));
  map->rank = rank;
  map->elem_bytes = sizeof(T);
  map->swizzle = swizzle;
  for (unsigned k = 0; k < rank; ++k) {
    map->dims[k] = dims[k];
    map->box[k] = box[k];
    map->strides[k] = k == 0 ? sizeof(T) : strides[k - 1];
  }
  return nullptr;
}

// The box at `coords` between the tensor and the dense (swizzled) shared tile at `smem`:
// `load` reads zeros outside the tensor, a store drops those elements. Returns the box's bytes.
inline unsigned box_copy(const CUtensorMap* map, void* smem, const int* coords, bool load) {
  const unsigned rank = map->rank, size = map->elem_bytes;
  std::uint64_t count = 1;
  for (unsigned k = 0; k < rank; ++k) count *= map->box[k];
  unsigned char* tile = static_cast<unsigned char*>(smem);
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint64_t rest = i, offset = 0;
    bool inside = true;
    for (unsigned k = 0; k < rank; ++k) {
      const long long g = static_cast<long long>(coords[k]) + static_cast<long long>(rest % map->box[k]);
      rest /= map->box[k];
      if (g < 0 || static_cast<std::uint64_t>(g) >= map->dims[k]) inside = false;
      else offset += static_cast<std::uint64_t>(g) * map->strides[k];
    }
    unsigned char* s = tile + swizzle_offset(map->swizzle, static_cast<unsigned>(i * size));
    if (load) {
      if (inside) std::memcpy(s, map->base + offset, size);
      else std::memset(s, 0, size);
    } else if (inside) {
      std::memcpy(map->base + offset, s, size);
    }
  }
  return static_cast<unsigned>(count * size);
}

#define CHOREO_TMA_CPU(n, ...)                                                               \
  inline void load_##n##d(void* dst, const CUtensorMap* map, unsigned long long* bar, bool hint, \
                          unsigned long long policy, __VA_ARGS__) {                          \
    (void)bar;                                                                               \
    (void)hint;                                                                              \
    (void)policy;                                                                            \
    const int coords[] = {CHOREO_TMA_NAMES_##n};                                             \
    box_copy(map, dst, coords, true);                                                        \
  }                                                                                          \
  inline void store_##n##d(const CUtensorMap* map, const void* src, __VA_ARGS__) {           \
    const int coords[] = {CHOREO_TMA_NAMES_##n};                                             \
    box_copy(map, const_cast<void*>(src), coords, false);                                    \
  }
inline void fence_proxy_async() {}
inline void store_commit_and_wait_read() {}
// The CPU copies a store's box at issue: an asynchronous store is complete at once.
inline void store_commit() {}
inline void store_wait_all() {}
// A multicast load (§3.6): the box lands at the same shared offset in every block of `mask`
// (ranks of the issuer's cluster), and completes each one's mbarrier at the same offset.
// The CTA mask of every block of the issuer's cluster.
inline unsigned short cluster_mask() {
  const unsigned n = choreo_cpu_current_thread()->cluster_size();
  return static_cast<unsigned short>((1u << n) - 1u);
}
inline void multicast_box(void* dst, const CUtensorMap* map, unsigned long long* bar,
                          unsigned mask, const int* coords) {
  const choreo::cpu::Thread* t = choreo_cpu_current_thread();
  for (unsigned r = 0; r < 16; ++r) {
    if ((mask >> r & 1u) == 0) continue;
    const unsigned bytes = box_copy(map, t->cluster_map(dst, r), coords, true);
    t->mbar_complete_tx(t->cluster_map(bar, r), bytes);
  }
}
#define CHOREO_TMA_CPU_MULTICAST(n, ...)                                                       \
  inline void load_multicast_##n##d(void* dst, const CUtensorMap* map, unsigned long long* bar, \
                                    unsigned short mask, __VA_ARGS__) {                        \
    const int coords[] = {CHOREO_TMA_NAMES_##n};                                               \
    multicast_box(dst, map, bar, mask, coords);                                                \
  }
#else
template <class T>
constexpr CUtensorMapDataType data_type() {
  return std::is_same<T, float>::value            ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
         : std::is_same<T, double>::value         ? CU_TENSOR_MAP_DATA_TYPE_FLOAT64
         : std::is_same<T, __half>::value         ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
         : std::is_same<T, __nv_bfloat16>::value  ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
         : std::is_same<T, std::int32_t>::value   ? CU_TENSOR_MAP_DATA_TYPE_INT32
         : std::is_same<T, std::uint32_t>::value  ? CU_TENSOR_MAP_DATA_TYPE_UINT32
         : std::is_same<T, std::int64_t>::value   ? CU_TENSOR_MAP_DATA_TYPE_INT64
         : std::is_same<T, std::uint64_t>::value  ? CU_TENSOR_MAP_DATA_TYPE_UINT64
         : sizeof(T) == 2                         ? CU_TENSOR_MAP_DATA_TYPE_UINT16
         : sizeof(T) == 4                         ? CU_TENSOR_MAP_DATA_TYPE_UINT32
         : sizeof(T) == 8                         ? CU_TENSOR_MAP_DATA_TYPE_UINT64
                                                  : CU_TENSOR_MAP_DATA_TYPE_UINT8;
}

using encode_fn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                               const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                               const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                               CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled through the runtime's driver entry point (no -lcuda), looked up once.
inline encode_fn encoder() {
  static const encode_fn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
#if CUDART_VERSION >= 12050
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess)
      p = nullptr;
#else
    if (cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &p, cudaEnableDefault, &q) !=
        cudaSuccess)
      p = nullptr;
#endif
    return q == cudaDriverEntryPointSuccess ? reinterpret_cast<encode_fn>(p) : nullptr;
  }();
  return fn;
}

template <class T>
inline const char* encode_tiled(CUtensorMap* map, unsigned rank, const void* base,
                                const std::uint64_t* dims, const std::uint64_t* strides,
                                const std::uint32_t* box, unsigned swizzle, unsigned promote) {
  const char* err = check_map(rank, base, dims, strides, box, sizeof(T), swizzle);
  if (err != nullptr) return err;
  const encode_fn fn = encoder();
  if (fn == nullptr) return "the driver has no cuTensorMapEncodeTiled (CUDA 12.0+ driver needed)";
  const cuuint32_t ones[5] = {1, 1, 1, 1, 1};
  const CUtensorMapSwizzle swz = swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                 : swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                 : swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                 : CU_TENSOR_MAP_SWIZZLE_NONE;
  const CUtensorMapL2promotion l2 = promote == 64    ? CU_TENSOR_MAP_L2_PROMOTION_L2_64B
                                    : promote == 256 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                                                     : CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  const CUresult r = fn(map, data_type<T>(), rank, const_cast<void*>(base), dims, strides, box,
                        ones, CU_TENSOR_MAP_INTERLEAVE_NONE, swz, l2,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? nullptr : "cuTensorMapEncodeTiled rejected the tensor map";
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CHOREO_TMA_SM90 1
#endif

__device__ __forceinline__ unsigned shared_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// The PTX of one rank: `coords` is the operand list of the coordinates (from %4 for loads with
// a hint, from %3 without; from %2 for stores).
#ifdef CHOREO_TMA_SM90
#define CHOREO_TMA_CUDA(n, ...)                                                                   \
  __device__ __forceinline__ void load_##n##d(void* dst, const CUtensorMap* map,                 \
                                              unsigned long long* bar, bool hint,                 \
                                              unsigned long long policy, __VA_ARGS__) {           \
    if (hint) {                                                                                   \
      asm volatile("cp.async.bulk.tensor." #n                                                    \
                   "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"    \
                   " [%0], [%1, {" CHOREO_TMA_OPS_##n(4) "}], [%2], %3;\n" ::"r"(shared_addr(dst)), \
                   "l"(map), "r"(shared_addr(bar)), "l"(policy), CHOREO_TMA_REGS_##n             \
                   : "memory");                                                                   \
    } else {                                                                                      \
      asm volatile("cp.async.bulk.tensor." #n                                                    \
                   "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"                   \
                   " [%0], [%1, {" CHOREO_TMA_OPS_##n(3) "}], [%2];\n" ::"r"(shared_addr(dst)),   \
                   "l"(map), "r"(shared_addr(bar)), CHOREO_TMA_REGS_##n                          \
                   : "memory");                                                                   \
    }                                                                                             \
  }                                                                                               \
  __device__ __forceinline__ void store_##n##d(const CUtensorMap* map, const void* src,          \
                                               __VA_ARGS__) {                                     \
    asm volatile("cp.async.bulk.tensor." #n "d.global.shared::cta.tile.bulk_group"               \
                 " [%0, {" CHOREO_TMA_OPS_##n(2) "}], [%1];\n" ::"l"(map), "r"(shared_addr(src)), \
                 CHOREO_TMA_REGS_##n                                                              \
                 : "memory");                                                                     \
  }
#define CHOREO_TMA_CUDA_MULTICAST(n, ...)                                                         \
  __device__ __forceinline__ void load_multicast_##n##d(void* dst, const CUtensorMap* map,       \
                                                        unsigned long long* bar,                 \
                                                        unsigned short mask, __VA_ARGS__) {      \
    asm volatile("cp.async.bulk.tensor." #n                                                      \
                 "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster" \
                 " [%0], [%1, {" CHOREO_TMA_OPS_##n(4) "}], [%2], %3;\n" ::"r"(shared_addr(dst)), \
                 "l"(map), "r"(shared_addr(bar)), "h"(mask), CHOREO_TMA_REGS_##n                \
                 : "memory");                                                                     \
  }
__device__ __forceinline__ unsigned short cluster_mask() {
  unsigned n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return static_cast<unsigned short>((1u << n) - 1u);
}
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void store_commit_and_wait_read() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
// An asynchronous store (`tma.copy.async`, §3.3 ⚠): committed at issue; `wait` waits until
// every bulk copy this thread committed has completed (its global writes performed).
__device__ __forceinline__ void store_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void store_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}
#else
#define CHOREO_TMA_CUDA(n, ...)                                                                 \
  __device__ __forceinline__ void load_##n##d(void*, const CUtensorMap*, unsigned long long*,   \
                                              bool, unsigned long long, __VA_ARGS__) {          \
    __trap();                                                                                   \
  }                                                                                             \
  __device__ __forceinline__ void store_##n##d(const CUtensorMap*, const void*, __VA_ARGS__) {  \
    __trap();                                                                                   \
  }
#define CHOREO_TMA_CUDA_MULTICAST(n, ...)                                                   \
  __device__ __forceinline__ void load_multicast_##n##d(void*, const CUtensorMap*,            \
                                                        unsigned long long*, unsigned short,  \
                                                        __VA_ARGS__) {                        \
    __trap();                                                                                 \
  }
__device__ __forceinline__ unsigned short cluster_mask() { return 1; }
__device__ __forceinline__ void fence_proxy_async() {}
__device__ __forceinline__ void store_commit_and_wait_read() {}
__device__ __forceinline__ void store_commit() {}
__device__ __forceinline__ void store_wait_all() {}
#endif
#endif

// Operand lists per rank (from operand b on) and the coordinate registers and names.
#define CHOREO_TMA_OPS_1(b) CHOREO_TMA_L##b##_1
#define CHOREO_TMA_OPS_2(b) CHOREO_TMA_L##b##_2
#define CHOREO_TMA_OPS_3(b) CHOREO_TMA_L##b##_3
#define CHOREO_TMA_OPS_4(b) CHOREO_TMA_L##b##_4
#define CHOREO_TMA_OPS_5(b) CHOREO_TMA_L##b##_5
#define CHOREO_TMA_L2_1 "%2"
#define CHOREO_TMA_L2_2 "%2, %3"
#define CHOREO_TMA_L2_3 "%2, %3, %4"
#define CHOREO_TMA_L2_4 "%2, %3, %4, %5"
#define CHOREO_TMA_L2_5 "%2, %3, %4, %5, %6"
#define CHOREO_TMA_L3_1 "%3"
#define CHOREO_TMA_L3_2 "%3, %4"
#define CHOREO_TMA_L3_3 "%3, %4, %5"
#define CHOREO_TMA_L3_4 "%3, %4, %5, %6"
#define CHOREO_TMA_L3_5 "%3, %4, %5, %6, %7"
#define CHOREO_TMA_L4_1 "%4"
#define CHOREO_TMA_L4_2 "%4, %5"
#define CHOREO_TMA_L4_3 "%4, %5, %6"
#define CHOREO_TMA_L4_4 "%4, %5, %6, %7"
#define CHOREO_TMA_L4_5 "%4, %5, %6, %7, %8"
#define CHOREO_TMA_NAMES_1 c0
#define CHOREO_TMA_NAMES_2 c0, c1
#define CHOREO_TMA_NAMES_3 c0, c1, c2
#define CHOREO_TMA_NAMES_4 c0, c1, c2, c3
#define CHOREO_TMA_NAMES_5 c0, c1, c2, c3, c4
#define CHOREO_TMA_REGS_1 "r"(c0)
#define CHOREO_TMA_REGS_2 "r"(c0), "r"(c1)
#define CHOREO_TMA_REGS_3 "r"(c0), "r"(c1), "r"(c2)
#define CHOREO_TMA_REGS_4 "r"(c0), "r"(c1), "r"(c2), "r"(c3)
#define CHOREO_TMA_REGS_5 "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
#if defined(__CHOREO_CPU__)
#define CHOREO_TMA_RANK CHOREO_TMA_CPU
#define CHOREO_TMA_MULTICAST CHOREO_TMA_CPU_MULTICAST
#else
#define CHOREO_TMA_RANK CHOREO_TMA_CUDA
#define CHOREO_TMA_MULTICAST CHOREO_TMA_CUDA_MULTICAST
#endif
CHOREO_TMA_RANK(1, int c0)
CHOREO_TMA_RANK(2, int c0, int c1)
CHOREO_TMA_RANK(3, int c0, int c1, int c2)
CHOREO_TMA_RANK(4, int c0, int c1, int c2, int c3)
CHOREO_TMA_RANK(5, int c0, int c1, int c2, int c3, int c4)
CHOREO_TMA_MULTICAST(1, int c0)
CHOREO_TMA_MULTICAST(2, int c0, int c1)
CHOREO_TMA_MULTICAST(3, int c0, int c1, int c2)
CHOREO_TMA_MULTICAST(4, int c0, int c1, int c2, int c3)
CHOREO_TMA_MULTICAST(5, int c0, int c1, int c2, int c3, int c4)

}  // namespace tma
}  // namespace choreo
