// The support library of generated CUDA code (choreo-compiler, emit::cuda): call frames,
// device-memory guards, private streams, math helpers and the fill kernel. The translator
// pastes this file into every generated .cu after `#include "choreo.h"`, preceded by
// `#define CHOREO_SUPPORT_NS __choreo_support_<hash of this file>`; every name it defines
// starts with `__choreo`.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
using namespace choreo;

// The support library lives in a namespace named after a hash of its text: every generated file
// of the same translator version shares one definition (external linkage, so unused parts draw
// no warnings), and files from versions with a different library never clash.
namespace CHOREO_SUPPORT_NS {

// A private stream of the generated code on the current device, created on first use and kept
// for the life of the process. Kind 0 carries only allocations and copies that are
// waited for at once; kind 1 carries frees that wait (through events) for asynchronous launches.
inline cudaError_t __choreo_private_stream(int kind, cudaStream_t* stream) {
  constexpr int max_devices = 64;
  static std::mutex mutex;
  static cudaStream_t streams[2][max_devices] = {};
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device < 0 || device >= max_devices) return cudaErrorInvalidDevice;
  std::lock_guard<std::mutex> lock(mutex);
  cudaStream_t& slot = streams[kind][device];
  if (slot == nullptr) {
    err = cudaStreamCreateWithFlags(&slot, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
      slot = nullptr;
      return err;
    }
  }
  *stream = slot;
  return cudaSuccess;
}

// How a result element is written by __choreo_dump_result: kind 'f' (as a double, with the
// element type's mantissa bits, so a comparison knows its precision), 'i' or 'u' (as a 64-bit
// integer), or 0 for types that are not results (e.g. the bounds record), which are not written.
template <typename T, typename = void>
struct __choreo_result_kind {
  static constexpr char kind = 0;
  static constexpr int mantissa = 0;
};
template <typename T>
struct __choreo_result_kind<T, std::enable_if_t<std::is_integral<T>::value>> {
  static constexpr char kind = std::is_signed<T>::value ? 'i' : 'u';
  static constexpr int mantissa = 0;
};
template <typename T>
struct __choreo_result_kind<T, std::enable_if_t<std::is_floating_point<T>::value>> {
  static constexpr char kind = 'f';
  static constexpr int mantissa = std::numeric_limits<T>::digits - 1;
};
template <unsigned Bits, bool Signed, typename Tag>
struct __choreo_result_kind<subbyte_int<Bits, Signed, Tag>, void> {
  static constexpr char kind = Signed ? 'i' : 'u';
  static constexpr int mantissa = 0;
};
#define __CHOREO_RESULT_FLOAT(type, bits)     \
  template <>                                 \
  struct __choreo_result_kind<type, void> {   \
    static constexpr char kind = 'f';         \
    static constexpr int mantissa = bits;     \
  };
__CHOREO_RESULT_FLOAT(f16, 10)
__CHOREO_RESULT_FLOAT(bf16, 7)
__CHOREO_RESULT_FLOAT(tf32, 10)
__CHOREO_RESULT_FLOAT(f8_e4m3, 3)
__CHOREO_RESULT_FLOAT(f8_e5m2, 2)
__CHOREO_RESULT_FLOAT(f8_ue4m3, 3)
#if CHOREO_HAS_CUDA_FP6_FP4
__CHOREO_RESULT_FLOAT(f8_ue8m0, 0)
__CHOREO_RESULT_FLOAT(f6_e2m3, 3)
__CHOREO_RESULT_FLOAT(f6_e3m2, 2)
__CHOREO_RESULT_FLOAT(f4_e2m1, 1)
#endif
#undef __CHOREO_RESULT_FLOAT

// A debugging aid, off unless CHOREO_DUMP_RESULTS names a file: every result a C++ wrapper copies
// back to the host is appended to it as a text line "choreo-result KIND MANTISSA COUNT" and COUNT
// native-endian 8-byte values (see __choreo_result_kind). Running one program on two backends
// with two files and comparing them element by element is ci/run-e2e's cross-check. A file that
// cannot be written is skipped: the dump never changes what the call returns.
template <typename T>
void __choreo_dump_result(const T* data, std::size_t count) {
  using Kind = __choreo_result_kind<std::remove_cv_t<T>>;
  if constexpr (Kind::kind != 0) {
    const char* path = std::getenv("CHOREO_DUMP_RESULTS");
    if (path == nullptr || *path == '\0') return;
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    std::FILE* file = std::fopen(path, "ab");
    if (file == nullptr) return;
    std::fprintf(file, "choreo-result %c %d %zu\n", Kind::kind, Kind::mantissa, count);
    for (std::size_t i = 0; i < count; ++i) {
      if constexpr (Kind::kind == 'f') {
        double value;
        if constexpr (std::is_floating_point<T>::value) {
          value = static_cast<double>(data[i]);
        } else {
          value = static_cast<double>(to_f32(data[i]));
        }
        std::fwrite(&value, sizeof value, 1, file);
      } else if constexpr (Kind::kind == 'i') {
        const long long value = static_cast<long long>(data[i]);
        std::fwrite(&value, sizeof value, 1, file);
      } else {
        const unsigned long long value = static_cast<unsigned long long>(data[i]);
        std::fwrite(&value, sizeof value, 1, file);
      }
    }
    std::fclose(file);
  }
}

// The state of one call of a generated function: where spanned data lives (device memory, or
// host memory for a function without kernels called through its C++ wrapper), the first
// failure (a cudaError_t, or -1 for a failed runtime check with its message) and the streams
// of asynchronous launches that may still run.
class __choreo_frame {
 public:
  __choreo_frame(bool device_data, char* message, std::size_t capacity)
      : device_data_(device_data), message_(message), capacity_(capacity) {
    if (message_ != nullptr && capacity_ > 0) message_[0] = '\0';
  }
  __choreo_frame(const __choreo_frame&) = delete;
  __choreo_frame& operator=(const __choreo_frame&) = delete;

  bool device_data() const { return device_data_; }
  int status() const { return status_; }
  const char* message() const { return message_ != nullptr ? message_ : ""; }

  // Records a CUDA failure (the first failure of the call wins); true on success.
  bool cuda(cudaError_t err) {
    if (err != cudaSuccess && status_ == 0) status_ = static_cast<int>(err);
    return err == cudaSuccess;
  }

  // Records a failed runtime check and its printf-formatted message.
  void check_failed(const char* format, ...) {
    if (status_ != 0) return;
    status_ = -1;
    if (message_ == nullptr || capacity_ == 0) return;
    va_list args;
    va_start(args, format);
    std::vsnprintf(message_, capacity_, format, args);
    va_end(args);
  }

  cudaError_t alloc(void** ptr, std::size_t bytes) {
    *ptr = nullptr;
    if (!device_data_) {
      *ptr = std::malloc(bytes == 0 ? 1 : bytes);
      return *ptr != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
    }
    cudaStream_t stream = nullptr;
    cudaError_t err = __choreo_private_stream(0, &stream);
    if (err == cudaSuccess) err = cudaMallocAsync(ptr, bytes, stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
    return err;
  }

  // Frees memory from alloc(): at once when no asynchronous launch of this call may use it,
  // else in stream order after all of them.
  void release(void* ptr) {
    if (ptr == nullptr) return;
    if (!device_data_) {
      std::free(ptr);
      return;
    }
    cudaStream_t stream = nullptr;
    cudaError_t err = __choreo_private_stream(async_streams_.empty() ? 0 : 1, &stream);
    // The release stream waits for the asynchronous launches made since the last join (joined
    // here, at the first free after them, not at every launch: a launch costs no extra CUDA
    // call, and functions without device buffers of their own never join at all).
    if (err == cudaSuccess && unjoined_launches_) {
      for (cudaStream_t launched : async_streams_) {
        err = join(stream, launched);
        if (err != cudaSuccess) break;
      }
      if (err == cudaSuccess) unjoined_launches_ = false;
    }
    if (err == cudaSuccess) err = cudaFreeAsync(ptr, stream);
    cuda(err);
  }

  // After an asynchronous launch on `stream`: later frees of this call wait for it (see
  // release), and wait_async / copy_result know the stream. Makes no CUDA call.
  cudaError_t track_async(cudaStream_t stream) {
    unjoined_launches_ = true;
    if (std::find(async_streams_.begin(), async_streams_.end(), stream) == async_streams_.end()) {
      async_streams_.push_back(stream);
    }
    return cudaSuccess;
  }

  // Blocks until every asynchronous launch of this call has finished.
  cudaError_t wait_async() {
    for (cudaStream_t stream : async_streams_) {
      const cudaError_t err = cudaStreamSynchronize(stream);
      if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
  }

  // Copies the returned value into the caller's buffer, on `stream` and after every
  // asynchronous launch of this call. With `wait` the copy has finished on return; otherwise it
  // is left in stream order (and later frees of this call wait for it).
  cudaError_t copy_result(void* dst, const void* src, std::size_t bytes, bool wait,
                          cudaStream_t stream) {
    if (bytes == 0) return cudaSuccess;
    if (!device_data_) {
      std::memcpy(dst, src, bytes);
      return cudaSuccess;
    }
    for (cudaStream_t other : async_streams_) {
      if (other == stream) continue;
      const cudaError_t err = join(stream, other);
      if (err != cudaSuccess) return err;
    }
    const cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream);
    if (err != cudaSuccess) return err;
    return wait ? cudaStreamSynchronize(stream) : track_async(stream);
  }

  cudaError_t to_device(void* dst, const void* src, std::size_t bytes) {
    return copy_waited(dst, src, bytes, cudaMemcpyHostToDevice);
  }

  // Copies data back to the host; results (not internal records) also go to the
  // CHOREO_DUMP_RESULTS file when one is named (see __choreo_dump_result).
  template <typename T>
  cudaError_t to_host(T* dst, const void* src, std::size_t bytes) {
    const cudaError_t err = copy_waited(dst, src, bytes, cudaMemcpyDeviceToHost);
    if (err == cudaSuccess) __choreo_dump_result(dst, bytes / sizeof(T));
    return err;
  }

 private:
  // Makes `waiter` wait for the work enqueued on `stream` so far.
  static cudaError_t join(cudaStream_t waiter, cudaStream_t stream) {
    cudaEvent_t event = nullptr;
    cudaError_t err = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (err == cudaSuccess) err = cudaEventRecord(event, stream);
    if (err == cudaSuccess) err = cudaStreamWaitEvent(waiter, event, 0);
    if (event != nullptr) {
      const cudaError_t destroyed = cudaEventDestroy(event);
      if (err == cudaSuccess) err = destroyed;
    }
    return err;
  }

  cudaError_t copy_waited(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0) return cudaSuccess;
    if (!device_data_) {
      std::memcpy(dst, src, bytes);
      return cudaSuccess;
    }
    cudaStream_t stream = nullptr;
    cudaError_t err = __choreo_private_stream(0, &stream);
    if (err == cudaSuccess) err = cudaMemcpyAsync(dst, src, bytes, kind, stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
    return err;
  }

  bool device_data_;
  char* message_;
  std::size_t capacity_;
  int status_ = 0;
  std::vector<cudaStream_t> async_streams_;
  // Asynchronous launches happened that the release stream does not wait for yet.
  bool unjoined_launches_ = false;
};

// Memory from __choreo_frame::alloc, released when the guard goes out of scope (every exit path
// of the generated function runs through the end of the guard's scope).
class __choreo_buffer {
 public:
  explicit __choreo_buffer(__choreo_frame& frame) : frame_(frame) {}
  __choreo_buffer(const __choreo_buffer&) = delete;
  __choreo_buffer& operator=(const __choreo_buffer&) = delete;
  ~__choreo_buffer() { frame_.release(ptr); }
  void* ptr = nullptr;

 private:
  __choreo_frame& frame_;
};

// The C++ wrappers abort like upstream: a failed check prints its message, a CUDA failure its
// error.
inline void __choreo_abort_on_failure(const __choreo_frame& frame, int status) {
  if (status == 0) return;
  if (status < 0) choreo::runtime_check(false, frame.message());
  choreo::abend_true(status);
}

inline int __choreo_internal_failure(char* message, std::size_t capacity) {
  if (message != nullptr && capacity > 0) {
    std::snprintf(message, capacity, "internal error: a C++ exception escaped the generated code");
  }
  return -1;
}

inline choreo::f16 __choreo_f16_from_bits(std::uint16_t bits) {
  __half_raw raw;
  raw.x = bits;
  return choreo::f16(raw);
}
inline std::uint16_t __choreo_f16_bits(choreo::f16 value) { return static_cast<__half_raw>(value).x; }
inline choreo::bf16 __choreo_bf16_from_bits(std::uint16_t bits) {
  __nv_bfloat16_raw raw;
  raw.x = bits;
  return choreo::bf16(raw);
}
inline std::uint16_t __choreo_bf16_bits(choreo::bf16 value) {
  return static_cast<__nv_bfloat16_raw>(value).x;
}

// Math built-ins (spec §18) for f32 and f64; f16/bf16 arguments are computed in f32.
#define __CHOREO_MATH1(name, f32_expr, f64_expr)                              \
  __host__ __device__ inline float __choreo_##name(float x) { return f32_expr; } \
  __host__ __device__ inline double __choreo_##name(double x) { return f64_expr; }
#define __CHOREO_MATH2(name, f32_expr, f64_expr)                                       \
  __host__ __device__ inline float __choreo_##name(float x, float y) { return f32_expr; } \
  __host__ __device__ inline double __choreo_##name(double x, double y) { return f64_expr; }
__CHOREO_MATH1(sqrt, sqrtf(x), sqrt(x))
__CHOREO_MATH1(exp, expf(x), exp(x))
__CHOREO_MATH1(exp2, exp2f(x), exp2(x))
__CHOREO_MATH1(expm1, expm1f(x), expm1(x))
__CHOREO_MATH1(log, logf(x), log(x))
__CHOREO_MATH1(log1p, log1pf(x), log1p(x))
__CHOREO_MATH1(sin, sinf(x), sin(x))
__CHOREO_MATH1(cos, cosf(x), cos(x))
__CHOREO_MATH1(tan, tanf(x), tan(x))
__CHOREO_MATH1(asin, asinf(x), asin(x))
__CHOREO_MATH1(acos, acosf(x), acos(x))
__CHOREO_MATH1(atan, atanf(x), atan(x))
__CHOREO_MATH1(sinh, sinhf(x), sinh(x))
__CHOREO_MATH1(cosh, coshf(x), cosh(x))
__CHOREO_MATH1(tanh, tanhf(x), tanh(x))
__CHOREO_MATH1(ceil, ceilf(x), ceil(x))
__CHOREO_MATH1(floor, floorf(x), floor(x))
__CHOREO_MATH1(round, roundf(x), round(x))
__CHOREO_MATH1(fabs, fabsf(x), fabs(x))
__CHOREO_MATH1(sign, static_cast<float>((x > 0.0f) - (x < 0.0f)),
               static_cast<double>((x > 0.0) - (x < 0.0)))
__CHOREO_MATH1(gelu, 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)),
               0.5 * x * (1.0 + erf(x * 0.70710678118654752)))
__CHOREO_MATH1(sigmoid, 1.0f / (1.0f + expf(-x)), 1.0 / (1.0 + exp(-x)))
__CHOREO_MATH1(softplus, fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x))),
               fmax(x, 0.0) + log1p(exp(-fabs(x))))
__CHOREO_MATH2(pow, powf(x, y), pow(x, y))
__CHOREO_MATH2(atan2, atan2f(x, y), atan2(x, y))
__CHOREO_MATH2(max, fmaxf(x, y), fmax(x, y))
__CHOREO_MATH2(min, fminf(x, y), fmin(x, y))
#undef __CHOREO_MATH1
#undef __CHOREO_MATH2
__host__ __device__ inline float __choreo_rsqrt(float x) {
#if defined(__CUDA_ARCH__)
  return rsqrtf(x);
#else
  return 1.0f / sqrtf(x);
#endif
}
__host__ __device__ inline double __choreo_rsqrt(double x) {
#if defined(__CUDA_ARCH__)
  return rsqrt(x);
#else
  return 1.0 / sqrt(x);
#endif
}
__host__ __device__ inline float __choreo_frcp_rn(float x) {
#if defined(__CUDA_ARCH__)
  return __frcp_rn(x);
#else
  return 1.0f / x;
#endif
}
__host__ __device__ inline double __choreo_frcp_rn(double x) {
#if defined(__CUDA_ARCH__)
  return __drcp_rn(x);
#else
  return 1.0 / x;
#endif
}
__host__ __device__ inline float __choreo_fma(float x, float y, float z) { return fmaf(x, y, z); }
__host__ __device__ inline double __choreo_fma(double x, double y, double z) { return fma(x, y, z); }
__host__ __device__ inline bool __choreo_isfinite(float x) {
#if defined(__CUDA_ARCH__)
  return isfinite(x);
#else
  return std::isfinite(x);
#endif
}
__host__ __device__ inline bool __choreo_isfinite(double x) {
#if defined(__CUDA_ARCH__)
  return isfinite(x);
#else
  return std::isfinite(x);
#endif
}
template <typename T>
__host__ __device__ inline T __choreo_imax(T x, T y) { return x > y ? x : y; }
template <typename T>
__host__ __device__ inline T __choreo_imin(T x, T y) { return x < y ? x : y; }
template <typename T>
__host__ __device__ inline T __choreo_isign(T x) { return static_cast<T>((x > 0) - (x < 0)); }
template <typename T>
__host__ __device__ inline T __choreo_alignup(T x, T a) { return (x + a - 1) / a * a; }
template <typename T>
__host__ __device__ inline T __choreo_aligndown(T x, T a) { return x / a * a; }

// Whether a buffer of these extents has at most INT32_MAX elements, so that the index of any
// of its elements fits an `int` (the host's choice of a versioned kernel's `<true>`
// instantiation, which indexes such buffers in 32 bits). Overflow-safe for any rank.
template <typename... Extents>
constexpr bool __choreo_indices_fit_int(Extents... extents) {
  const unsigned long long e[] = {static_cast<unsigned long long>(extents)...};
  unsigned long long count = 1;
  for (unsigned long long d : e)
    if (d == 0) return true;
  for (unsigned long long d : e) {
    if (count > 2147483647ull / d) return false;
    count *= d;
  }
  return true;
}
static_assert(__choreo_indices_fit_int(8192u, 8192u) && __choreo_indices_fit_int(2147483647ull) &&
                  !__choreo_indices_fit_int(65536u, 32768u) &&
                  !__choreo_indices_fit_int(4294967295u, 4294967295u, 4294967295u) &&
                  __choreo_indices_fit_int(4294967295u, 0u, 4294967295u),
              "__choreo_indices_fit_int");

// Asynchronous copies global -> shared (`dma.copy.async`, sm_80+): one `cp.async` of 4, 8 or
// 16 bytes per call; a DMA commits its copies as one group, and `wait` waits until the groups
// committed after the waited one are the only ones that may still be pending.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define CHOREO_CP_ASYNC 1
#endif
template <int Bytes>
__device__ __forceinline__ void __choreo_cp_async(void* smem, const void* gmem) {
#ifdef CHOREO_CP_ASYNC
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (Bytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(gmem), "n"(Bytes)
                 : "memory");
  }
#elif defined(__CHOREO_CPU__)
  // CPU backend: the copy is complete when it returns, so commit and wait have nothing to do.
  // memcpy, not a chunk type: the host compiler's aliasing rules would not allow that.
  std::memcpy(smem, gmem, Bytes);
#else
  struct __align__(Bytes) chunk { unsigned char b[Bytes]; };
  *static_cast<chunk*>(smem) = *static_cast<const chunk*>(gmem);
#endif
}
__device__ __forceinline__ void __choreo_cp_async_commit() {
#ifdef CHOREO_CP_ASYNC
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most `newer` groups committed by this thread are pending (the number of
// groups committed after the one waited for; more than 7 waits for a little more).
__device__ __forceinline__ void __choreo_cp_async_wait(int newer) {
#ifdef CHOREO_CP_ASYNC
  switch (newer) {
    case 0: asm volatile("cp.async.wait_group 0;\n" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;\n" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;\n" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;\n" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;\n" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 5;\n" ::: "memory"); break;
    case 6: asm volatile("cp.async.wait_group 6;\n" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 7;\n" ::: "memory"); break;
  }
#else
  (void)newer;
#endif
}

// mbarriers (spec-tier3 §10.1): what shared events and TMA completion are built on. `bar` is an
// 8-byte, 8-aligned shared word. A fresh barrier is in phase 0; `wait(bar, p)` returns once the
// phase of parity p has completed, so parity 1 passes at once (a `ready` event). sm_90+ uses the
// acquire/release forms with transaction counts; sm_80/89 have arrivals only (no TMA there) and
// poll test_wait with a back-off. The CPU backend's runtime implements the same operations.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CHOREO_MBAR_SM90 1
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define CHOREO_MBAR 1
#endif
// Polls of a wait before it traps: a wait that can never complete (a program that triggers an
// event fewer times than it waits) becomes a launch failure instead of a hang. Counted in polls,
// not time, so a slow run (a sanitizer) never trips it; each poll suspends up to a few µs.
#define CHOREO_MBAR_MAX_POLLS (1ull << 28)
__device__ __forceinline__ unsigned __choreo_smem_addr(const void* p) {
#ifdef CHOREO_MBAR
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
#else
  (void)p;
  return 0;
#endif
}
// One thread initialises; __choreo_mbar_init_fence and a block barrier follow.
__device__ __forceinline__ void __choreo_mbar_init(unsigned long long* bar, unsigned count) {
#if defined(__CHOREO_CPU__)
  __choreo_thr->mbar_init(bar, count);
#elif defined(CHOREO_MBAR)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(__choreo_smem_addr(bar)),
               "r"(count)
               : "memory");
#else
  (void)bar;
  (void)count;
  __trap();
#endif
}
// Makes the initialisations visible to the other threads (after the block barrier that follows)
// and to the async proxy (TMA).
__device__ __forceinline__ void __choreo_mbar_init_fence() {
#ifdef CHOREO_MBAR_SM90
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// One arrival of the calling thread. On sm_90 the lanes of a warp that arrive together are
// counted by one arrive of their first lane (`count` = how many): a trigger of a 256-thread
// role is 8 shared-memory atomics, not 256. Each thread still contributes exactly one arrival,
// whoever issues it; the warp barrier orders the other lanes' accesses before the leader's
// release.
__device__ __forceinline__ void __choreo_mbar_arrive(unsigned long long* bar) {
#if defined(__CHOREO_CPU__)
  __choreo_thr->mbar_arrive(bar);
#elif defined(CHOREO_MBAR_SM90)
  const unsigned lanes = __activemask();
  __syncwarp(lanes);
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  if (lane == static_cast<unsigned>(__ffs(lanes) - 1)) {
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                     __choreo_smem_addr(bar)),
                 "r"(static_cast<unsigned>(__popc(lanes)))
                 : "memory");
  }
#elif defined(CHOREO_MBAR)
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared.b64 state, [%0];\n}\n" ::"r"(
                   __choreo_smem_addr(bar))
               : "memory");
#else
  (void)bar;
  __trap();
#endif
}
// One arrival that first expects `bytes` more transaction bytes in this phase (the TMA issuer's
// arm): the phase cannot complete before they land.
__device__ __forceinline__ void __choreo_mbar_arrive_expect_tx(unsigned long long* bar,
                                                               unsigned bytes) {
#if defined(__CHOREO_CPU__)
  __choreo_thr->mbar_arrive(bar, bytes);
#elif defined(CHOREO_MBAR_SM90)
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   __choreo_smem_addr(bar)),
               "r"(bytes)
               : "memory");
#else
  (void)bar;
  (void)bytes;
  __trap();
#endif
}
// Expects `bytes` more transaction bytes in this phase, without arriving.
__device__ __forceinline__ void __choreo_mbar_expect_tx(unsigned long long* bar, unsigned bytes) {
#if defined(__CHOREO_CPU__)
  __choreo_thr->mbar_expect_tx(bar, bytes);
#elif defined(CHOREO_MBAR_SM90)
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(
                   __choreo_smem_addr(bar)),
               "r"(bytes)
               : "memory");
#else
  (void)bar;
  (void)bytes;
  __trap();
#endif
}
#if defined(__CHOREO_CPU__)
// What the copy engine does when a copy's bytes have landed (the CPU backend's TMA).
inline void __choreo_mbar_complete_tx(unsigned long long* bar, unsigned bytes) {
  __choreo_thr->mbar_complete_tx(bar, bytes);
}
#endif
// Waits until the phase of parity `parity` has completed (acquire: the writes made before the
// arrivals of that phase, and the bytes it counted, are visible).
__device__ __forceinline__ void __choreo_mbar_wait(unsigned long long* bar, unsigned parity) {
#if defined(__CHOREO_CPU__)
  __choreo_thr->mbar_wait(bar, parity);
#elif defined(CHOREO_MBAR)
  const unsigned addr = __choreo_smem_addr(bar);
  for (unsigned long long polls = 0;; ++polls) {
    unsigned done;
#ifdef CHOREO_MBAR_SM90
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
#else
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.test_wait.parity.shared.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
    if (!done) __nanosleep(32);
#endif
    if (done) return;
    if (polls >= CHOREO_MBAR_MAX_POLLS) __trap();
  }
#else
  (void)bar;
  (void)parity;
  __trap();
#endif
}
// `trigger.cluster` (spec-tier3 §2.6): one arrival, with cluster-scope release, on the mbarrier
// at the same shared offset in every block of the cluster (mapa), this block's included; and
// the wait of such an event, acquiring at cluster scope (the arrivals' writes of every block).
__device__ __forceinline__ void __choreo_mbar_arrive_cluster(unsigned long long* bar) {
#if defined(__CHOREO_CPU__)
  const unsigned n = __choreo_thr->cluster_size();
  for (unsigned r = 0; r < n; ++r)
    __choreo_thr->mbar_arrive(static_cast<unsigned long long*>(__choreo_thr->cluster_map(bar, r)));
#elif defined(CHOREO_MBAR_SM90)
  unsigned n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  const unsigned addr = __choreo_smem_addr(bar);
  for (unsigned r = 0; r < n; ++r) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(r));
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote)
                 : "memory");
  }
#else
  (void)bar;
  __trap();
#endif
}
__device__ __forceinline__ void __choreo_mbar_wait_cluster(unsigned long long* bar,
                                                           unsigned parity) {
#if defined(__CHOREO_CPU__)
  __choreo_thr->mbar_wait(bar, parity);
#elif defined(CHOREO_MBAR_SM90)
  const unsigned addr = __choreo_smem_addr(bar);
  for (unsigned long long polls = 0;; ++polls) {
    unsigned done;
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
    if (done) return;
    if (polls >= CHOREO_MBAR_MAX_POLLS) __trap();
  }
#else
  (void)bar;
  (void)parity;
  __trap();
#endif
}
// Local events (spec-tier3 §2.4): per-thread flags. `trigger` sets one; `wait` spins until it
// is set, then clears it. Only the owning thread sets a local flag, so a wait of a clear one
// never returns: it traps after the mbarrier waits' poll limit (on the CPU, which yields to the
// block's other fibres between polls, after 2^16 polls).
#if defined(__CHOREO_CPU__)
#define CHOREO_FLAG_MAX_POLLS (1ull << 16)
#else
#define CHOREO_FLAG_MAX_POLLS CHOREO_MBAR_MAX_POLLS
#endif
__device__ __forceinline__ void __choreo_flag_set(volatile bool* flag) { *flag = true; }
__device__ __forceinline__ void __choreo_flag_wait(volatile bool* flag) {
  for (unsigned long long polls = 0; !*flag; ++polls) {
    if (polls >= CHOREO_FLAG_MAX_POLLS) __trap();
#if defined(__CHOREO_CPU__)
    __choreo_thr->yield();
#endif
  }
  *flag = false;
}
// Global events (spec-tier3 §2.4): a zeroed device byte per slot. `trigger` makes the thread's
// earlier writes visible device-wide, then sets the byte; `wait` spins until it is set (another
// block, an earlier kernel or the host sets it), then clears it. A wait that is never satisfied
// traps after the poll limit (on the CPU, which yields between polls, after 2^24 polls).
#if defined(__CHOREO_CPU__)
#define CHOREO_GFLAG_MAX_POLLS (1ull << 24)
#else
#define CHOREO_GFLAG_MAX_POLLS CHOREO_MBAR_MAX_POLLS
#endif
__device__ __forceinline__ void __choreo_gflag_set(unsigned char* flag) {
  __threadfence();
#if defined(__CHOREO_CPU__)
  __atomic_store_n(flag, static_cast<unsigned char>(1), __ATOMIC_RELEASE);
#else
  *static_cast<volatile unsigned char*>(flag) = 1;
#endif
}
__device__ __forceinline__ void __choreo_gflag_wait(unsigned char* flag) {
  for (unsigned long long polls = 0;; ++polls) {
#if defined(__CHOREO_CPU__)
    if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != 0) break;
    __choreo_thr->yield();
#else
    if (*static_cast<volatile unsigned char*>(flag) != 0) break;
    __nanosleep(64);
#endif
    if (polls >= CHOREO_GFLAG_MAX_POLLS) __trap();
  }
  __threadfence();
#if defined(__CHOREO_CPU__)
  __atomic_store_n(flag, static_cast<unsigned char>(0), __ATOMIC_RELAXED);
#else
  *static_cast<volatile unsigned char*>(flag) = 0;
#endif
}
// Shared events: the slot of `e[i]` (a dynamic index outside the array traps rather than use
// another barrier), and slot and parity of `e.at(k)` on a ring of n slots (generation k / n).
__device__ __forceinline__ int __choreo_event_slot(long long i, int n) {
  if (i < 0 || i >= n) __trap();
  return static_cast<int>(i);
}
__device__ __forceinline__ int __choreo_event_ring_slot(long long k, int n) {
  if (k < 0) __trap();
  return static_cast<int>(k % n);
}
__device__ __forceinline__ unsigned __choreo_event_ring_parity(long long k, int n) {
  return static_cast<unsigned>((k / n) & 1);
}
// The same for an order the compiler proved non-negative (lower::bounds): no check, and
// unsigned arithmetic (a mask and a shift for a power-of-two ring), in the order's width.
template <typename K>
__device__ __forceinline__ int __choreo_event_ring_slot_nn(K k, unsigned n) {
  return static_cast<int>(k % n);
}
template <typename K>
__device__ __forceinline__ unsigned __choreo_event_ring_parity_nn(K k, unsigned n) {
  return static_cast<unsigned>((k / n) & 1u);
}

// The record of the first element access of a call that failed its run-time bounds check
// (choreo-compiler's lower/abi.rs, BOUNDS_RECORD): zeroed by the caller, read when the call's
// device work has finished.
struct __choreo_bounds_record {
  unsigned int flag;
  unsigned int access;
  unsigned int dim;
  unsigned int reserved;
  long long index;
  long long extent;
};

// Notes a failed bounds check in `record` (the first failure of the call wins). Out of line:
// it is the cold path of every check, kept out of the kernels' registers and code.
__device__ inline void __choreo_note_out_of_bounds(__choreo_bounds_record* record,
                                                         unsigned int access, unsigned int dim,
                                                         long long index, long long extent) {
  if (record != nullptr && atomicCAS(&record->flag, 0u, 1u) == 0u) {
    record->access = access;
    record->dim = dim;
    record->index = index;
    record->extent = extent;
  }
}

// Whether 0 <= index < extent (one unsigned comparison: a negative index is a huge unsigned
// one; extents are never negative). When not, the access is skipped by the caller and noted,
// so the call fails instead of touching memory it was not given.
__device__ __forceinline__ bool __choreo_in_bounds(__choreo_bounds_record* record,
                                                   unsigned int access, unsigned int dim,
                                                   long long index, long long extent) {
  if (static_cast<unsigned long long>(index) < static_cast<unsigned long long>(extent)) {
    return true;
  }
  __choreo_note_out_of_bounds(record, access, dim, index, extent);
  return false;
}

// The same for an `int` index and a 32-bit extent: one 32-bit comparison.
__device__ __forceinline__ bool __choreo_in_bounds32(__choreo_bounds_record* record,
                                                     unsigned int access, unsigned int dim,
                                                     int index, unsigned int extent) {
  if (static_cast<unsigned int>(index) < extent) return true;
  __choreo_note_out_of_bounds(record, access, dim, index, extent);
  return false;
}

}  // namespace CHOREO_SUPPORT_NS
using namespace CHOREO_SUPPORT_NS;

namespace {

#if defined(__CHOREO_CPU__)
// CPU backend: kernels take the running thread first (see choreo_cpu.h).
template <typename T>
void __choreo_fill_kernel(const ::choreo::cpu::Thread* __choreo_thr, T* data,
                          std::uint64_t count, T value) {
#else
template <typename T>
__global__ void __choreo_fill_kernel(T* data, std::uint64_t count, T value) {
#endif
  const std::uint64_t step = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < count; i += step) {
    data[i] = value;
  }
}

// Sets `count` elements to `value` (the `{v}` initialiser of a buffer declared in host code).
template <typename T>
cudaError_t __choreo_fill(__choreo_frame& frame, T* data, std::uint64_t count, T value) {
  if (!frame.device_data()) {
    std::fill(data, data + count, value);
    return cudaSuccess;
  }
  if (count == 0) return cudaSuccess;
  cudaStream_t stream = nullptr;
  cudaError_t err = __choreo_private_stream(0, &stream);
  if (err != cudaSuccess) return err;
  const std::uint64_t threads = 256;
  const std::uint64_t blocks = std::min<std::uint64_t>((count + threads - 1) / threads, 1024);
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(blocks), 1, 1);
  config.blockDim = dim3(static_cast<unsigned>(threads), 1, 1);
  config.stream = stream;
#if defined(__CHOREO_CPU__)
  err = ::choreo::cpu::launch<__choreo_fill_kernel<T>>(&config, 0, data, count, value);
#else
  err = cudaLaunchKernelEx(&config, __choreo_fill_kernel<T>, data, count, value);
#endif
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  return err;
}

// A zeroed bounds record of a call of a C++ wrapper (device memory of the frame).
inline cudaError_t __choreo_bounds_alloc(__choreo_frame& frame, void** ptr) {
  cudaError_t err = frame.alloc(ptr, sizeof(__choreo_bounds_record));
  const __choreo_bounds_record zero = {};
  if (err == cudaSuccess) err = frame.to_device(*ptr, &zero, sizeof zero);
  return err;
}

// After the call's device work: a failed bounds check fails the call, with the access it
// noted (`sites` names the accesses by number).
inline void __choreo_bounds_check(__choreo_frame& frame, const void* record,
                                  const char* const* sites, std::size_t site_count) {
  __choreo_bounds_record copy = {};
  if (!frame.cuda(frame.to_host(&copy, record, sizeof copy)) || copy.flag == 0) return;
  const char* site = copy.access < site_count ? sites[copy.access] : "an element access";
  frame.check_failed("element access out of bounds: %s, dimension %u: index %lld, extent %lld",
                     site, copy.dim, copy.index, copy.extent);
}

}  // namespace

// Runs `call` (a cudaError_t expression); on failure records it and leaves the function.
#define __CHOREO_TRY(call)                           \
  do {                                               \
    if (!__frame.cuda(call)) goto __choreo_exit;     \
  } while (0)
// Checks `cond`; on failure records the printf-formatted message and leaves the function.
#define __CHOREO_CHECK(cond, ...)                    \
  do {                                               \
    if (!(cond)) {                                   \
      __frame.check_failed(__VA_ARGS__);             \
      goto __choreo_exit;                            \
    }                                                \
  } while (0)
