// choreo_cpu.h: the CUDA surface for the CPU backend of choreo (issue 13). Generated CPU files
// begin `#define __CHOREO_CPU__ 1` and `#include "choreo.h"`, which includes this header instead
// of the CUDA headers. It supplies what the CUDA headers supply to the generated code and to the
// host code of .co files (types, qualifiers, intrinsics, a subset of the CUDA runtime API), so the
// same C++ compiles with the host's C++ compiler (C++17, g++ >= 10, clang >= 11, no CUDA).
//
// Sections: 1. the C API of choreo_cpu_runtime.cpp (a mirror of the CUDA runtime functions the
// Rust runtime calls, prefixed `choreo_cpu_`) and the CUDA names forwarding to it; 2. the CUDA
// surface of device code (qualifiers, vector types, half/bfloat16/fp8, math, atomics); 3. the
// kernel-facing API (choreo::cpu::Thread, launch<Kernel>, the threadIdx/... macros).
// The contract between these parts is docs/cpu-backend-interface.md of the repository; ARCHITECTURE.md ("The CPU
// runtime") says why it looks like this and where it differs from CUDA.
#pragma once

// The CPU and CUDA objects of one .co file are linked into one program, and choreo.h's inline
// functions and templates compile to different code in the two modes (they call this header's
// runtime instead of CUDA's) under the same mangled names, which the linker would merge. In
// CPU mode the namespace `choreo` therefore has a name of its own; code that writes
// `choreo::…` (generated code, the .co file's host code) is renamed with it.
#define choreo choreo_on_cpu

// Every standard header this one needs, and <memory>, is included before the qualifier macros
// below: libstdc++ spells `__attribute__((__noinline__))`, which the `__noinline__` macro would
// break in a header included after it (the same trap as with CUDA's own headers).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>
#include <memory>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

// ---------------------------------------------------------------------------------------------
// 1. The C API and the CUDA runtime names.
// ---------------------------------------------------------------------------------------------

// Opaque handles. nullptr is the legacy default stream, as in CUDA.
typedef struct choreo_cpu_stream* cudaStream_t;
typedef struct choreo_cpu_event* cudaEvent_t;
typedef void (*cudaHostFn_t)(void* user_data);

// The values are CUDA's, so that codes printed or passed through the Rust runtime mean the same.
enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorAssert = 710,
  cudaErrorLaunchFailure = 719,
  cudaErrorCooperativeLaunchTooLarge = 720,
  cudaErrorNotSupported = 801,
  cudaErrorUnknown = 999
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};

enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxBlockDimX = 2,
  cudaDevAttrMaxBlockDimY = 3,
  cudaDevAttrMaxBlockDimZ = 4,
  cudaDevAttrMaxGridDimX = 5,
  cudaDevAttrMaxGridDimY = 6,
  cudaDevAttrMaxGridDimZ = 7,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrTotalConstantMemory = 9,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrMaxRegistersPerBlock = 12,
  cudaDevAttrClockRate = 13,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrIntegrated = 18,
  cudaDevAttrConcurrentKernels = 31,
  cudaDevAttrL2CacheSize = 38,
  cudaDevAttrMaxThreadsPerMultiProcessor = 39,
  cudaDevAttrUnifiedAddressing = 41,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
  cudaDevAttrMaxRegistersPerMultiprocessor = 82,
  cudaDevAttrManagedMemory = 83,
  cudaDevAttrCooperativeLaunch = 95,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
};

enum : unsigned {
  cudaStreamDefault = 0u,
  cudaStreamNonBlocking = 1u,
  cudaEventDefault = 0u,
  cudaEventBlockingSync = 1u,
  cudaEventDisableTiming = 2u,
  cudaEventInterprocess = 4u,
  cudaHostAllocDefault = 0u,
  cudaHostAllocPortable = 1u,
  cudaHostAllocMapped = 2u,
  cudaHostAllocWriteCombined = 4u
};

// The CUDA version whose API this mirrors (what cudaRuntimeGetVersion reports).
#define CHOREO_CPU_CUDART_VERSION 12080
#ifndef CUDART_VERSION
#define CUDART_VERSION CHOREO_CPU_CUDART_VERSION
#endif

namespace choreo {
namespace cpu {
struct Thread;
}  // namespace cpu
}  // namespace choreo

// What launch<Kernel> hands the runtime: the configuration, the arguments (converted to the
// kernel's parameter types, owned by the runtime from here on: it calls destroy_args once, also
// when the launch fails) and the per-kernel runners instantiated in launch<Kernel>.
struct choreo_cpu_launch_desc {
  unsigned grid[3];
  unsigned block[3];
  std::size_t smem_bytes;
  cudaStream_t stream;
  unsigned flags;
  const char* name;  // __PRETTY_FUNCTION__ of the launch, for messages
  void* args;
  void (*destroy_args)(void* args);
  // Loop mode: every thread of one block, one after the other, the kernel inlined.
  void (*run_block)(const void* args, choreo::cpu::Thread* thread);
  // Fibre mode: one thread (the body of a fibre).
  void (*run_thread)(const void* args, choreo::cpu::Thread* thread);
  // Blocks per thread-block cluster (consecutive along x); 0 or 1: no clusters.
  unsigned cluster;
};

extern "C" {
int choreo_cpu_cudaGetDeviceCount(int* count);
int choreo_cpu_cudaGetDevice(int* device);
int choreo_cpu_cudaSetDevice(int device);
int choreo_cpu_cudaDeviceGetAttribute(int* value, int attr, int device);
int choreo_cpu_cudaDeviceSynchronize(void);
int choreo_cpu_cudaRuntimeGetVersion(int* version);
int choreo_cpu_cudaDriverGetVersion(int* version);
int choreo_cpu_cudaMalloc(void** ptr, std::size_t size);
int choreo_cpu_cudaFree(void* ptr);
int choreo_cpu_cudaMallocAsync(void** ptr, std::size_t size, cudaStream_t stream);
int choreo_cpu_cudaFreeAsync(void* ptr, cudaStream_t stream);
int choreo_cpu_cudaMemcpy(void* dst, const void* src, std::size_t count, int kind);
int choreo_cpu_cudaMemcpyAsync(void* dst, const void* src, std::size_t count, int kind,
                               cudaStream_t stream);
int choreo_cpu_cudaMemset(void* ptr, int value, std::size_t count);
int choreo_cpu_cudaMemsetAsync(void* ptr, int value, std::size_t count, cudaStream_t stream);
int choreo_cpu_cudaMallocHost(void** ptr, std::size_t size);
int choreo_cpu_cudaHostAlloc(void** ptr, std::size_t size, unsigned flags);
int choreo_cpu_cudaFreeHost(void* ptr);
int choreo_cpu_cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes);
int choreo_cpu_cudaStreamCreate(cudaStream_t* stream);
int choreo_cpu_cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
int choreo_cpu_cudaStreamDestroy(cudaStream_t stream);
int choreo_cpu_cudaStreamSynchronize(cudaStream_t stream);
int choreo_cpu_cudaStreamQuery(cudaStream_t stream);
int choreo_cpu_cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags);
int choreo_cpu_cudaEventCreate(cudaEvent_t* event);
int choreo_cpu_cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
int choreo_cpu_cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
int choreo_cpu_cudaEventSynchronize(cudaEvent_t event);
int choreo_cpu_cudaEventQuery(cudaEvent_t event);
int choreo_cpu_cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
int choreo_cpu_cudaEventDestroy(cudaEvent_t event);
int choreo_cpu_cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data);
int choreo_cpu_cudaGetLastError(void);
int choreo_cpu_cudaPeekAtLastError(void);
const char* choreo_cpu_cudaGetErrorName(int error);
const char* choreo_cpu_cudaGetErrorString(int error);
// The number of threads of the pool that runs blocks (CHOREO_CPU_THREADS or the hardware's).
unsigned choreo_cpu_worker_count(void);
// Enqueues a kernel launch (see choreo_cpu_launch_desc); what ::choreo::cpu::launch calls.
int choreo_cpu_launch(const choreo_cpu_launch_desc* desc);
// The Thread that runs on the calling OS thread: a kernel's thread, or a host stand-in.
const choreo::cpu::Thread* choreo_cpu_current_thread(void);
}

#define CHOREO_CPU_FORWARD(name, params, args) \
  inline cudaError_t name params { return static_cast<cudaError_t>(choreo_cpu_##name args); }
CHOREO_CPU_FORWARD(cudaGetDeviceCount, (int* count), (count))
CHOREO_CPU_FORWARD(cudaGetDevice, (int* device), (device))
CHOREO_CPU_FORWARD(cudaSetDevice, (int device), (device))
CHOREO_CPU_FORWARD(cudaDeviceGetAttribute, (int* value, cudaDeviceAttr attr, int device),
                   (value, static_cast<int>(attr), device))
CHOREO_CPU_FORWARD(cudaDeviceSynchronize, (), ())
CHOREO_CPU_FORWARD(cudaRuntimeGetVersion, (int* version), (version))
CHOREO_CPU_FORWARD(cudaDriverGetVersion, (int* version), (version))
CHOREO_CPU_FORWARD(cudaMalloc, (void** ptr, std::size_t size), (ptr, size))
CHOREO_CPU_FORWARD(cudaFree, (void* ptr), (ptr))
CHOREO_CPU_FORWARD(cudaMallocAsync, (void** ptr, std::size_t size, cudaStream_t stream),
                   (ptr, size, stream))
CHOREO_CPU_FORWARD(cudaFreeAsync, (void* ptr, cudaStream_t stream), (ptr, stream))
CHOREO_CPU_FORWARD(cudaMemcpy, (void* dst, const void* src, std::size_t count, cudaMemcpyKind kind),
                   (dst, src, count, static_cast<int>(kind)))
CHOREO_CPU_FORWARD(cudaMemcpyAsync,
                   (void* dst, const void* src, std::size_t count, cudaMemcpyKind kind,
                    cudaStream_t stream = nullptr),
                   (dst, src, count, static_cast<int>(kind), stream))
CHOREO_CPU_FORWARD(cudaMemset, (void* ptr, int value, std::size_t count), (ptr, value, count))
CHOREO_CPU_FORWARD(cudaMemsetAsync,
                   (void* ptr, int value, std::size_t count, cudaStream_t stream = nullptr),
                   (ptr, value, count, stream))
CHOREO_CPU_FORWARD(cudaMallocHost, (void** ptr, std::size_t size), (ptr, size))
CHOREO_CPU_FORWARD(cudaHostAlloc, (void** ptr, std::size_t size, unsigned flags),
                   (ptr, size, flags))
CHOREO_CPU_FORWARD(cudaFreeHost, (void* ptr), (ptr))
CHOREO_CPU_FORWARD(cudaMemGetInfo, (std::size_t * free_bytes, std::size_t* total_bytes),
                   (free_bytes, total_bytes))
CHOREO_CPU_FORWARD(cudaStreamCreate, (cudaStream_t * stream), (stream))
CHOREO_CPU_FORWARD(cudaStreamCreateWithFlags, (cudaStream_t * stream, unsigned flags),
                   (stream, flags))
CHOREO_CPU_FORWARD(cudaStreamDestroy, (cudaStream_t stream), (stream))
CHOREO_CPU_FORWARD(cudaStreamSynchronize, (cudaStream_t stream), (stream))
CHOREO_CPU_FORWARD(cudaStreamQuery, (cudaStream_t stream), (stream))
CHOREO_CPU_FORWARD(cudaStreamWaitEvent,
                   (cudaStream_t stream, cudaEvent_t event, unsigned flags = 0),
                   (stream, event, flags))
CHOREO_CPU_FORWARD(cudaEventCreate, (cudaEvent_t * event), (event))
CHOREO_CPU_FORWARD(cudaEventCreateWithFlags, (cudaEvent_t * event, unsigned flags), (event, flags))
CHOREO_CPU_FORWARD(cudaEventRecord, (cudaEvent_t event, cudaStream_t stream = nullptr),
                   (event, stream))
CHOREO_CPU_FORWARD(cudaEventSynchronize, (cudaEvent_t event), (event))
CHOREO_CPU_FORWARD(cudaEventQuery, (cudaEvent_t event), (event))
CHOREO_CPU_FORWARD(cudaEventElapsedTime, (float* ms, cudaEvent_t start, cudaEvent_t end),
                   (ms, start, end))
CHOREO_CPU_FORWARD(cudaEventDestroy, (cudaEvent_t event), (event))
CHOREO_CPU_FORWARD(cudaLaunchHostFunc, (cudaStream_t stream, cudaHostFn_t fn, void* user_data),
                   (stream, fn, user_data))
CHOREO_CPU_FORWARD(cudaGetLastError, (), ())
CHOREO_CPU_FORWARD(cudaPeekAtLastError, (), ())
#undef CHOREO_CPU_FORWARD

inline const char* cudaGetErrorName(cudaError_t error) {
  return choreo_cpu_cudaGetErrorName(static_cast<int>(error));
}
inline const char* cudaGetErrorString(cudaError_t error) {
  return choreo_cpu_cudaGetErrorString(static_cast<int>(error));
}

// The special stream handles. The per-thread default stream is served by the legacy stream
// (stronger ordering than CUDA's, never weaker).
#define cudaStreamLegacy (reinterpret_cast<cudaStream_t>(0x1))
#define cudaStreamPerThread (reinterpret_cast<cudaStream_t>(0x2))

// What cudaGetDeviceProperties reports: the fields host code commonly reads, from the
// attributes (the CUDA structure has many more).
struct cudaDeviceProp {
  char name[256];
  std::size_t totalGlobalMem;
  std::size_t sharedMemPerBlock;
  std::size_t sharedMemPerBlockOptin;
  std::size_t sharedMemPerMultiprocessor;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int clockRate;
  int multiProcessorCount;
  int maxThreadsPerMultiProcessor;
  int major;
  int minor;
  int concurrentKernels;
  int cooperativeLaunch;
  int l2CacheSize;
};
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return cudaErrorInvalidValue;
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "choreo CPU device");
  std::size_t free_bytes = 0;
  cudaError_t err = cudaMemGetInfo(&free_bytes, &prop->totalGlobalMem);
  int v = 0;
  const auto get = [&](cudaDeviceAttr attr, int* out) {
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(out, attr, device);
  };
  get(cudaDevAttrMaxSharedMemoryPerBlock, &v);
  prop->sharedMemPerBlock = static_cast<std::size_t>(v);
  get(cudaDevAttrMaxSharedMemoryPerBlockOptin, &v);
  prop->sharedMemPerBlockOptin = static_cast<std::size_t>(v);
  get(cudaDevAttrMaxSharedMemoryPerMultiprocessor, &v);
  prop->sharedMemPerMultiprocessor = static_cast<std::size_t>(v);
  get(cudaDevAttrMaxRegistersPerBlock, &prop->regsPerBlock);
  get(cudaDevAttrWarpSize, &prop->warpSize);
  get(cudaDevAttrMaxThreadsPerBlock, &prop->maxThreadsPerBlock);
  get(cudaDevAttrMaxBlockDimX, &prop->maxThreadsDim[0]);
  get(cudaDevAttrMaxBlockDimY, &prop->maxThreadsDim[1]);
  get(cudaDevAttrMaxBlockDimZ, &prop->maxThreadsDim[2]);
  get(cudaDevAttrMaxGridDimX, &prop->maxGridSize[0]);
  get(cudaDevAttrMaxGridDimY, &prop->maxGridSize[1]);
  get(cudaDevAttrMaxGridDimZ, &prop->maxGridSize[2]);
  get(cudaDevAttrClockRate, &prop->clockRate);
  get(cudaDevAttrMultiProcessorCount, &prop->multiProcessorCount);
  get(cudaDevAttrMaxThreadsPerMultiProcessor, &prop->maxThreadsPerMultiProcessor);
  get(cudaDevAttrComputeCapabilityMajor, &prop->major);
  get(cudaDevAttrComputeCapabilityMinor, &prop->minor);
  get(cudaDevAttrConcurrentKernels, &prop->concurrentKernels);
  get(cudaDevAttrCooperativeLaunch, &prop->cooperativeLaunch);
  get(cudaDevAttrL2CacheSize, &prop->l2CacheSize);
  return err;
}

// __constant__ and __device__ variables are ordinary globals: the symbol copies are copies in
// the legacy stream's order, like cudaMemcpy.
template <class T>
inline cudaError_t cudaMemcpyToSymbol(const T& symbol, const void* src, std::size_t count,
                                      std::size_t offset = 0,
                                      cudaMemcpyKind kind = cudaMemcpyHostToDevice) {
  if (offset + count > sizeof(T)) return cudaErrorInvalidValue;
  void* dst = const_cast<char*>(reinterpret_cast<const char*>(&symbol)) + offset;
  return cudaMemcpy(dst, src, count, kind);
}
template <class T>
inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, std::size_t count,
                                        std::size_t offset = 0,
                                        cudaMemcpyKind kind = cudaMemcpyDeviceToHost) {
  if (offset + count > sizeof(T)) return cudaErrorInvalidValue;
  return cudaMemcpy(dst, reinterpret_cast<const char*>(&symbol) + offset, count, kind);
}

// The typed overloads of the CUDA runtime headers.
template <class T>
inline cudaError_t cudaMalloc(T** ptr, std::size_t size) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), size);
}
template <class T>
inline cudaError_t cudaMallocAsync(T** ptr, std::size_t size, cudaStream_t stream) {
  return cudaMallocAsync(reinterpret_cast<void**>(ptr), size, stream);
}
template <class T>
inline cudaError_t cudaMallocHost(T** ptr, std::size_t size) {
  return cudaMallocHost(reinterpret_cast<void**>(ptr), size);
}
template <class T>
inline cudaError_t cudaHostAlloc(T** ptr, std::size_t size, unsigned flags) {
  return cudaHostAlloc(reinterpret_cast<void**>(ptr), size, flags);
}

// ---------------------------------------------------------------------------------------------
// 2. The CUDA surface of device code.
// ---------------------------------------------------------------------------------------------

// Qualifiers. Device and host code are the same code here. `__shared__` variables declared in
// a kernel (CUDA's static shared memory) become `thread_local` (static at block scope): a block
// runs on one OS thread (loop mode and fibre mode alike), so its threads share the variable and
// blocks running at the same time on other workers have their own. Dynamic shared memory is
// Thread::smem (an `extern __shared__` array declares a thread_local nobody defines).
#define __host__
#define __device__
#define __global__
#define __constant__
#define __managed__
#define __shared__ thread_local
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __maxnreg__(n)
#if !defined(__clang__)
// GCC has no __builtin_assume; an unreachable branch tells it the same.
#define __builtin_assume(cond) ((cond) ? static_cast<void>(0) : __builtin_unreachable())
#endif

// Vector types (CUDA's alignment, so that structures containing them have CUDA's layout).
struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};
#define CHOREO_CPU_VEC2(name, T, align) \
  struct __attribute__((aligned(align))) name { T x, y; };
#define CHOREO_CPU_VEC3(name, T) \
  struct name { T x, y, z; };
#define CHOREO_CPU_VEC4(name, T, align) \
  struct __attribute__((aligned(align))) name { T x, y, z, w; };
CHOREO_CPU_VEC2(char2, signed char, 2)
CHOREO_CPU_VEC2(uchar2, unsigned char, 2)
CHOREO_CPU_VEC4(char4, signed char, 4)
CHOREO_CPU_VEC4(uchar4, unsigned char, 4)
CHOREO_CPU_VEC2(short2, short, 4)
CHOREO_CPU_VEC2(ushort2, unsigned short, 4)
CHOREO_CPU_VEC4(short4, short, 8)
CHOREO_CPU_VEC4(ushort4, unsigned short, 8)
CHOREO_CPU_VEC2(int2, int, 8)
CHOREO_CPU_VEC3(int3, int)
CHOREO_CPU_VEC4(int4, int, 16)
CHOREO_CPU_VEC2(uint2, unsigned, 8)
CHOREO_CPU_VEC4(uint4, unsigned, 16)
CHOREO_CPU_VEC2(float2, float, 8)
CHOREO_CPU_VEC3(float3, float)
CHOREO_CPU_VEC4(float4, float, 16)
CHOREO_CPU_VEC2(double2, double, 16)
CHOREO_CPU_VEC2(longlong2, long long, 16)
CHOREO_CPU_VEC2(ulonglong2, unsigned long long, 16)
#undef CHOREO_CPU_VEC2
#undef CHOREO_CPU_VEC3
#undef CHOREO_CPU_VEC4
inline constexpr int2 make_int2(int x, int y) { return int2{x, y}; }
inline constexpr int3 make_int3(int x, int y, int z) { return int3{x, y, z}; }
inline constexpr int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
inline constexpr uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline constexpr uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }
inline constexpr uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return uint4{x, y, z, w};
}
inline constexpr float2 make_float2(float x, float y) { return float2{x, y}; }
inline constexpr float3 make_float3(float x, float y, float z) { return float3{x, y, z}; }
inline constexpr float4 make_float4(float x, float y, float z, float w) {
  return float4{x, y, z, w};
}
inline constexpr double2 make_double2(double x, double y) { return double2{x, y}; }

constexpr int warpSize = 32;

// ---- Low-precision floating types ------------------------------------------------------------

namespace choreo {
namespace cpu {
namespace detail {

inline std::uint32_t f32_bits(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
inline float bits_f32(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}
inline std::uint64_t f64_bits(double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// |x| (finite, not NaN) rounded to nearest even in a binary format with `mant` mantissa bits and
// smallest normal exponent `emin` (gradual underflow): the magnitude's encoding, which may reach
// or pass the format's infinity/NaN codes (the caller saturates or makes it infinite). One
// rounding from the exact value: a float converts to double exactly, so converting floats through
// here rounds once, as CUDA does.
inline std::uint32_t round_magnitude(double x, int mant, int emin) {
  const std::uint64_t bits = f64_bits(x) & 0x7fffffffffffffffull;
  if (bits == 0) return 0;
  const int exp_field = static_cast<int>(bits >> 52);
  if (exp_field == 0) return 0;  // double subnormals are far below every target's range
  const int e = exp_field - 1023;
  const std::uint64_t sig = (bits & 0xfffffffffffffull) | (1ull << 52);
  int shift = 52 - mant;
  std::uint64_t code;
  if (e >= emin) {
    code = (static_cast<std::uint64_t>(e - emin + 1) << mant) |
           ((sig >> shift) & ((1ull << mant) - 1));
  } else {
    shift += emin - e;  // subnormal: fewer significant bits
    if (shift > 53) return 0;  // below half the smallest subnormal
    code = sig >> shift;
  }
  const std::uint64_t rest = sig & ((1ull << shift) - 1);
  const std::uint64_t half = 1ull << (shift - 1);
  if (rest > half || (rest == half && (code & 1u) != 0)) ++code;  // carries into the exponent
  return code > 0xffffffffull ? 0xffffffffu : static_cast<std::uint32_t>(code);
}

// float/double -> IEEE binary16, round to nearest even; NaN -> 0x7fff (CUDA's canonical NaN).
inline std::uint16_t to_f16_bits(double x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000u : 0u;
  if (std::isnan(x)) return 0x7fffu;
  if (std::isinf(x)) return static_cast<std::uint16_t>(sign | 0x7c00u);
  const std::uint32_t code = round_magnitude(x, 10, -14);
  return static_cast<std::uint16_t>(sign | (code >= 0x7c00u ? 0x7c00u : code));
}
inline float f16_bits_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu;
  const std::uint32_t m = h & 0x3ffu;
  if (e == 0) {
    const float v = std::ldexp(static_cast<float>(m), -24);
    return sign != 0 ? -v : v;
  }
  if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
  return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}
// float/double -> bfloat16, round to nearest even; NaN -> 0x7fff (CUDA's canonical NaN).
inline std::uint16_t to_bf16_bits(double x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000u : 0u;
  if (std::isnan(x)) return 0x7fffu;
  if (std::isinf(x)) return static_cast<std::uint16_t>(sign | 0x7f80u);
  const std::uint32_t code = round_magnitude(x, 7, -126);
  return static_cast<std::uint16_t>(sign | (code >= 0x7f80u ? 0x7f80u : code));
}
inline float bf16_bits_to_f32(std::uint16_t b) {
  return bits_f32(static_cast<std::uint32_t>(b) << 16);
}

}  // namespace detail
}  // namespace cpu
}  // namespace choreo

struct __half_raw {
  unsigned short x;
};
struct __nv_bfloat16_raw {
  unsigned short x;
};

// __half and __nv_bfloat16: 16-bit storage, implicit conversions from the arithmetic types
// (rounded to nearest even) and to float, arithmetic and comparisons through float, as the
// CUDA host headers have them.
#define CHOREO_CPU_HALF_TYPE(T, RAW, TO_BITS, TO_F32)                                         \
  struct T {                                                                                 \
    unsigned short __x;                                                                      \
    T() = default;                                                                           \
    constexpr T(const RAW& r) : __x(r.x) {}                                                  \
    T(float f) : __x(::choreo::cpu::detail::TO_BITS(f)) {}                                   \
    T(double d) : __x(::choreo::cpu::detail::TO_BITS(d)) {}                                  \
    template <class I, std::enable_if_t<std::is_integral<I>::value, int> = 0>                \
    T(I i) : __x(::choreo::cpu::detail::TO_BITS(static_cast<double>(i))) {}                  \
    T& operator=(const RAW& r) {                                                             \
      __x = r.x;                                                                             \
      return *this;                                                                          \
    }                                                                                        \
    operator RAW() const { return RAW{__x}; }                                                \
    operator float() const { return ::choreo::cpu::detail::TO_F32(__x); }                    \
    T& operator+=(const T& o) { return *this = T(float(*this) + float(o)); }                 \
    T& operator-=(const T& o) { return *this = T(float(*this) - float(o)); }                 \
    T& operator*=(const T& o) { return *this = T(float(*this) * float(o)); }                 \
    T& operator/=(const T& o) { return *this = T(float(*this) / float(o)); }                 \
    T& operator++() { return *this += T(1.0f); }                                             \
    T& operator--() { return *this -= T(1.0f); }                                             \
    T operator++(int) {                                                                      \
      T old = *this;                                                                         \
      ++*this;                                                                               \
      return old;                                                                            \
    }                                                                                        \
    T operator--(int) {                                                                      \
      T old = *this;                                                                         \
      --*this;                                                                               \
      return old;                                                                            \
    }                                                                                        \
  };                                                                                         \
  inline T operator+(const T& a, const T& b) { return T(float(a) + float(b)); }              \
  inline T operator-(const T& a, const T& b) { return T(float(a) - float(b)); }              \
  inline T operator*(const T& a, const T& b) { return T(float(a) * float(b)); }              \
  inline T operator/(const T& a, const T& b) { return T(float(a) / float(b)); }              \
  inline T operator+(const T& a) { return a; }                                               \
  inline T operator-(const T& a) {                                                           \
    T r = a;                                                                                 \
    r.__x = static_cast<unsigned short>(r.__x ^ 0x8000u);                                    \
    return r;                                                                                \
  }                                                                                          \
  inline bool operator==(const T& a, const T& b) { return float(a) == float(b); }            \
  inline bool operator!=(const T& a, const T& b) { return float(a) != float(b); }            \
  inline bool operator<(const T& a, const T& b) { return float(a) < float(b); }              \
  inline bool operator<=(const T& a, const T& b) { return float(a) <= float(b); }            \
  inline bool operator>(const T& a, const T& b) { return float(a) > float(b); }              \
  inline bool operator>=(const T& a, const T& b) { return float(a) >= float(b); }
CHOREO_CPU_HALF_TYPE(__half, __half_raw, to_f16_bits, f16_bits_to_f32)
CHOREO_CPU_HALF_TYPE(__nv_bfloat16, __nv_bfloat16_raw, to_bf16_bits, bf16_bits_to_f32)
#undef CHOREO_CPU_HALF_TYPE
typedef __half half;
typedef __nv_bfloat16 nv_bfloat16;

struct __half2 {
  __half x, y;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline __half __double2half(double d) { return __half(d); }
inline float __half2float(__half h) { return static_cast<float>(h); }
inline __half __int2half_rn(int i) { return __half(i); }
inline int __half2int_rz(__half h) {
  const float f = static_cast<float>(h);
  return std::isnan(f) ? 0 : static_cast<int>(f);
}
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline short __half_as_short(__half h) { return static_cast<short>(h.__x); }
inline __half __ushort_as_half(unsigned short b) { return __half(__half_raw{b}); }
inline __half __short_as_half(short b) {
  return __half(__half_raw{static_cast<unsigned short>(b)});
}
inline __half __hadd(__half a, __half b) { return a + b; }
inline __half __hsub(__half a, __half b) { return a - b; }
inline __half __hmul(__half a, __half b) { return a * b; }
inline __half __hdiv(__half a, __half b) { return a / b; }
inline __half __hneg(__half a) { return -a; }
inline __half __habs(__half a) {
  return __ushort_as_half(static_cast<unsigned short>(a.__x & 0x7fffu));
}
inline __half __hfma(__half a, __half b, __half c) {
  // The exact product and sum of three halves fit a double, so this rounds once, like fma.
  return __half(static_cast<double>(float(a)) * float(b) + float(c));
}
inline __half __hmax(__half a, __half b) {
  return float(a) >= float(b) || float(b) != float(b) ? a : b;
}
inline __half __hmin(__half a, __half b) {
  return float(a) <= float(b) || float(b) != float(b) ? a : b;
}
inline bool __heq(__half a, __half b) { return a == b; }
inline bool __hne(__half a, __half b) { return a != b; }
inline bool __hlt(__half a, __half b) { return a < b; }
inline bool __hle(__half a, __half b) { return a <= b; }
inline bool __hgt(__half a, __half b) { return a > b; }
inline bool __hge(__half a, __half b) { return a >= b; }
inline bool __hisnan(__half a) { return float(a) != float(a); }
inline __half2 __halves2half2(__half a, __half b) { return __half2{a, b}; }
inline __half2 __floats2half2_rn(float a, float b) { return __half2{__half(a), __half(b)}; }

inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
inline float __bfloat162float(__nv_bfloat16 b) { return static_cast<float>(b); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short b) {
  return __nv_bfloat16(__nv_bfloat16_raw{b});
}
inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return a + b; }
inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) { return a - b; }
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return a * b; }
inline __nv_bfloat16 __hdiv(__nv_bfloat16 a, __nv_bfloat16 b) { return a / b; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162{__nv_bfloat16(a), __nv_bfloat16(b)};
}

// fp8 (cuda_fp8.h): the conversions of the CUDA host code, bit for bit: round to nearest even,
// with __NV_SATFINITE (what the constructors use) finite overflow and infinities become the
// largest finite value, NaN stays NaN.
typedef unsigned char __nv_fp8_storage_t;
enum __nv_saturation_t { __NV_NOSAT = 0, __NV_SATFINITE = 1 };
enum __nv_fp8_interpretation_t { __NV_E4M3 = 0, __NV_E5M2 = 1 };

inline __nv_fp8_storage_t __nv_cvt_double_to_fp8(double x, __nv_saturation_t saturate,
                                                 __nv_fp8_interpretation_t interpretation) {
  const bool e4m3 = interpretation == __NV_E4M3;
  const unsigned char sign = std::signbit(x) ? 0x80u : 0u;
  if (std::isnan(x)) {
    if (e4m3) return static_cast<unsigned char>(sign | 0x7fu);
    // E5M2 keeps the top mantissa bits of the NaN, made quiet (as CUDA's host code does).
    const unsigned char top =
        static_cast<unsigned char>((::choreo::cpu::detail::f64_bits(x) >> 50) & 0x3u);
    return static_cast<unsigned char>(sign | 0x7eu | top);
  }
  const unsigned max_norm = e4m3 ? 0x7eu : 0x7bu;
  unsigned code = 0;
  bool overflow = false;
  if (std::isinf(x)) {
    overflow = true;
  } else {
    code = e4m3 ? ::choreo::cpu::detail::round_magnitude(x, 3, -6)
                : ::choreo::cpu::detail::round_magnitude(x, 2, -14);
    overflow = code > max_norm;
  }
  if (overflow) {
    if (saturate == __NV_SATFINITE) {
      code = max_norm;
    } else {
      code = e4m3 ? 0x7fu : 0x7cu;  // E4M3 has no infinity: NaN
    }
  }
  return static_cast<unsigned char>(sign | code);
}
inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t saturate,
                                                __nv_fp8_interpretation_t interpretation) {
  return __nv_cvt_double_to_fp8(static_cast<double>(x), saturate, interpretation);
}
inline float __choreo_cpu_fp8_to_float(__nv_fp8_storage_t v,
                                       __nv_fp8_interpretation_t interpretation) {
  if (interpretation == __NV_E5M2) {
    return ::choreo::cpu::detail::f16_bits_to_f32(static_cast<std::uint16_t>(v << 8));
  }
  const bool negative = (v & 0x80u) != 0;
  const unsigned e = (v >> 3) & 0xfu;
  const unsigned m = v & 0x7u;
  float r;
  if ((v & 0x7fu) == 0x7fu) {
    r = std::numeric_limits<float>::quiet_NaN();
  } else if (e == 0) {
    r = std::ldexp(static_cast<float>(m), -9);
  } else {
    r = std::ldexp(static_cast<float>(8u + m), static_cast<int>(e) - 10);
  }
  return negative ? -r : r;
}
inline __half_raw __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t v,
                                          __nv_fp8_interpretation_t interpretation) {
  return __half_raw{
      ::choreo::cpu::detail::to_f16_bits(__choreo_cpu_fp8_to_float(v, interpretation))};
}
inline __nv_fp8_storage_t __nv_cvt_halfraw_to_fp8(__half_raw h, __nv_saturation_t saturate,
                                                  __nv_fp8_interpretation_t interpretation) {
  return __nv_cvt_float_to_fp8(::choreo::cpu::detail::f16_bits_to_f32(h.x), saturate,
                               interpretation);
}
inline __nv_fp8_storage_t __nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw b,
                                                      __nv_saturation_t saturate,
                                                      __nv_fp8_interpretation_t interpretation) {
  return __nv_cvt_float_to_fp8(::choreo::cpu::detail::bf16_bits_to_f32(b.x), saturate,
                               interpretation);
}

#define CHOREO_CPU_FP8_TYPE(T, INTERP)                                                       \
  struct T {                                                                                \
    __nv_fp8_storage_t __x;                                                                 \
    T() = default;                                                                          \
    explicit T(float f) : __x(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, INTERP)) {}          \
    explicit T(double d) : __x(__nv_cvt_double_to_fp8(d, __NV_SATFINITE, INTERP)) {}        \
    explicit T(__half h) : T(static_cast<float>(h)) {}                                      \
    explicit T(__nv_bfloat16 b) : T(static_cast<float>(b)) {}                               \
    template <class I, std::enable_if_t<std::is_integral<I>::value, int> = 0>               \
    explicit T(I i) : T(static_cast<double>(i)) {}                                          \
    explicit operator float() const { return __choreo_cpu_fp8_to_float(__x, INTERP); }      \
    explicit operator double() const { return static_cast<float>(*this); }                  \
    explicit operator __half() const { return __half(static_cast<float>(*this)); }          \
    explicit operator __nv_bfloat16() const {                                               \
      return __nv_bfloat16(static_cast<float>(*this));                                      \
    }                                                                                       \
    explicit operator bool() const { return (__x & 0x7fu) != 0; }                           \
    template <class I, std::enable_if_t<std::is_integral<I>::value &&                       \
                                            !std::is_same<I, bool>::value, int> = 0>        \
    explicit operator I() const {                                                           \
      const float f = static_cast<float>(*this);                                            \
      return std::isnan(f) ? I(0) : static_cast<I>(f);                                      \
    }                                                                                       \
  };
CHOREO_CPU_FP8_TYPE(__nv_fp8_e4m3, __NV_E4M3)
CHOREO_CPU_FP8_TYPE(__nv_fp8_e5m2, __NV_E5M2)
#undef CHOREO_CPU_FP8_TYPE

// ---- Math ------------------------------------------------------------------------------------

// CUDA declares min/max for the arithmetic types in the global namespace, also for host code.
#define CHOREO_CPU_MINMAX(A, B, R)                 \
  inline R min(A a, B b) {                         \
    const R x = static_cast<R>(a);                 \
    const R y = static_cast<R>(b);                 \
    return x < y ? x : y;                          \
  }                                                \
  inline R max(A a, B b) {                         \
    const R x = static_cast<R>(a);                 \
    const R y = static_cast<R>(b);                 \
    return x > y ? x : y;                          \
  }
CHOREO_CPU_MINMAX(int, int, int)
CHOREO_CPU_MINMAX(unsigned, unsigned, unsigned)
CHOREO_CPU_MINMAX(int, unsigned, unsigned)
CHOREO_CPU_MINMAX(unsigned, int, unsigned)
CHOREO_CPU_MINMAX(long, long, long)
CHOREO_CPU_MINMAX(unsigned long, unsigned long, unsigned long)
CHOREO_CPU_MINMAX(long long, long long, long long)
CHOREO_CPU_MINMAX(unsigned long long, unsigned long long, unsigned long long)
#undef CHOREO_CPU_MINMAX
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }
inline double min(float a, double b) { return std::fmin(static_cast<double>(a), b); }
inline double max(float a, double b) { return std::fmax(static_cast<double>(a), b); }
inline double min(double a, float b) { return std::fmin(a, static_cast<double>(b)); }
inline double max(double a, float b) { return std::fmax(a, static_cast<double>(b)); }

// The fast (approximate) intrinsics compute the precise function: results can differ from a
// GPU's in the last bits, never by more than the GPU's documented error.
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __exp10f(float x) { return std::pow(10.0f, x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __log10f(float x) { return std::log10(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanf(float x) { return std::tan(x); }
inline void __sincosf(float x, float* s, float* c) {
  *s = std::sin(x);
  *c = std::cos(x);
}
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fsub_rn(float x, float y) { return x - y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fmaf_rn(float x, float y, float z) { return std::fma(x, y, z); }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / std::sqrt(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline double __drcp_rn(double x) { return 1.0 / x; }
inline double __dadd_rn(double x, double y) { return x + y; }
inline double __dmul_rn(double x, double y) { return x * y; }
inline double __fma_rn(double x, double y, double z) { return std::fma(x, y, z); }
inline float __saturatef(float x) {
  // NaN -> 0, as on the GPU.
  return x >= 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f);
}
inline int __float_as_int(float x) { return static_cast<int>(::choreo::cpu::detail::f32_bits(x)); }
inline unsigned __float_as_uint(float x) { return ::choreo::cpu::detail::f32_bits(x); }
inline float __int_as_float(int x) {
  return ::choreo::cpu::detail::bits_f32(static_cast<std::uint32_t>(x));
}
inline float __uint_as_float(unsigned x) { return ::choreo::cpu::detail::bits_f32(x); }
inline long long __double_as_longlong(double x) {
  return static_cast<long long>(::choreo::cpu::detail::f64_bits(x));
}
inline double __longlong_as_double(long long x) {
  double d;
  std::memcpy(&d, &x, sizeof d);
  return d;
}
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(std::floor(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(std::ceil(x)); }
inline unsigned __float2uint_rn(float x) { return static_cast<unsigned>(std::nearbyint(x)); }
inline unsigned __float2uint_rz(float x) { return static_cast<unsigned>(x); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline float __uint2float_rn(unsigned x) { return static_cast<float>(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) {
  return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x));
}
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
  return (x >> 16) | (x << 16);
}
inline unsigned long long __brevll(unsigned long long x) {
  return (static_cast<unsigned long long>(__brev(static_cast<unsigned>(x))) << 32) |
         __brev(static_cast<unsigned>(x >> 32));
}
inline int __mul24(int x, int y) { return ((x << 8) >> 8) * ((y << 8) >> 8); }
inline unsigned __umul24(unsigned x, unsigned y) { return (x & 0xffffffu) * (y & 0xffffffu); }
inline int __mulhi(int x, int y) {
  return static_cast<int>((static_cast<long long>(x) * y) >> 32);
}
inline unsigned __umulhi(unsigned x, unsigned y) {
  return static_cast<unsigned>((static_cast<unsigned long long>(x) * y) >> 32);
}
// __extension__: 128-bit integers are a GCC/clang extension (-Wpedantic would say so).
__extension__ typedef unsigned __int128 __choreo_cpu_u128;
__extension__ typedef __int128 __choreo_cpu_s128;
inline unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
  return static_cast<unsigned long long>((static_cast<__choreo_cpu_u128>(x) * y) >> 64);
}
inline long long __mul64hi(long long x, long long y) {
  return static_cast<long long>((static_cast<__choreo_cpu_s128>(x) * y) >> 64);
}
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
// The cycle counters: nanoseconds of a steady clock here (monotonic, like the GPU's).
inline long long clock64() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000ll + ts.tv_nsec;
}

// ---- Atomics and fences ----------------------------------------------------------------------
// Relaxed, as CUDA's atomics are; floats through a compare-and-swap loop on their bits.

namespace choreo {
namespace cpu {
namespace detail {
template <class T, class F>
inline T atomic_update(T* address, F update) {
  T old = __atomic_load_n(address, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(address, &old, update(old), true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
  }
  return old;
}
template <class T, class Bits>
inline T atomic_float_update(T* address, T (*update)(T, T), T value) {
  static_assert(sizeof(T) == sizeof(Bits), "bit pattern of the float");
  Bits* bits = reinterpret_cast<Bits*>(address);
  Bits old = __atomic_load_n(bits, __ATOMIC_RELAXED);
  for (;;) {
    T old_value;
    std::memcpy(&old_value, &old, sizeof old);
    const T new_value = update(old_value, value);
    Bits desired;
    std::memcpy(&desired, &new_value, sizeof desired);
    if (__atomic_compare_exchange_n(bits, &old, desired, true, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED)) {
      return old_value;
    }
  }
}
}  // namespace detail
}  // namespace cpu
}  // namespace choreo

#define CHOREO_CPU_ATOMIC_INT(T)                                                            \
  inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }      \
  inline T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }      \
  inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }    \
  inline T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }      \
  inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }        \
  inline T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }      \
  inline T atomicMin(T* p, T v) {                                                           \
    return ::choreo::cpu::detail::atomic_update(p, [v](T o) { return v < o ? v : o; });     \
  }                                                                                         \
  inline T atomicMax(T* p, T v) {                                                           \
    return ::choreo::cpu::detail::atomic_update(p, [v](T o) { return v > o ? v : o; });     \
  }                                                                                         \
  inline T atomicCAS(T* p, T compare, T v) {                                                \
    __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED); \
    return compare;                                                                         \
  }
CHOREO_CPU_ATOMIC_INT(int)
CHOREO_CPU_ATOMIC_INT(unsigned)
CHOREO_CPU_ATOMIC_INT(unsigned long long)
#undef CHOREO_CPU_ATOMIC_INT
inline long long atomicMin(long long* p, long long v) {
  return ::choreo::cpu::detail::atomic_update(p, [v](long long o) { return v < o ? v : o; });
}
inline long long atomicMax(long long* p, long long v) {
  return ::choreo::cpu::detail::atomic_update(p, [v](long long o) { return v > o ? v : o; });
}
inline unsigned short atomicCAS(unsigned short* p, unsigned short compare, unsigned short v) {
  __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return compare;
}
inline unsigned atomicInc(unsigned* p, unsigned limit) {
  return ::choreo::cpu::detail::atomic_update(
      p, [limit](unsigned o) { return o >= limit ? 0u : o + 1u; });
}
inline unsigned atomicDec(unsigned* p, unsigned limit) {
  return ::choreo::cpu::detail::atomic_update(
      p, [limit](unsigned o) { return (o == 0u || o > limit) ? limit : o - 1u; });
}
inline float atomicAdd(float* p, float v) {
  return ::choreo::cpu::detail::atomic_float_update<float, std::uint32_t>(
      p, [](float a, float b) { return a + b; }, v);
}
inline double atomicAdd(double* p, double v) {
  return ::choreo::cpu::detail::atomic_float_update<double, std::uint64_t>(
      p, [](double a, double b) { return a + b; }, v);
}
inline float atomicSub(float* p, float v) {
  return ::choreo::cpu::detail::atomic_float_update<float, std::uint32_t>(
      p, [](float a, float b) { return a - b; }, v);
}
inline float atomicMin(float* p, float v) {
  return ::choreo::cpu::detail::atomic_float_update<float, std::uint32_t>(
      p, [](float a, float b) { return std::fmin(a, b); }, v);
}
inline float atomicMax(float* p, float v) {
  return ::choreo::cpu::detail::atomic_float_update<float, std::uint32_t>(
      p, [](float a, float b) { return std::fmax(a, b); }, v);
}
inline double atomicMin(double* p, double v) {
  return ::choreo::cpu::detail::atomic_float_update<double, std::uint64_t>(
      p, [](double a, double b) { return std::fmin(a, b); }, v);
}
inline double atomicMax(double* p, double v) {
  return ::choreo::cpu::detail::atomic_float_update<double, std::uint64_t>(
      p, [](double a, double b) { return std::fmax(a, b); }, v);
}
inline float atomicExch(float* p, float v) {
  return ::choreo::cpu::detail::atomic_float_update<float, std::uint32_t>(
      p, [](float, float b) { return b; }, v);
}
inline double atomicExch(double* p, double v) {
  return ::choreo::cpu::detail::atomic_float_update<double, std::uint64_t>(
      p, [](double, double b) { return b; }, v);
}
// 16-bit floats: a compare-and-swap loop on the storage.
#define CHOREO_CPU_ATOMIC_16(T)                                                                \
  inline T atomicAdd(T* p, T v) {                                                              \
    unsigned short* bits = &p->__x;                                                            \
    unsigned short old = __atomic_load_n(bits, __ATOMIC_RELAXED);                              \
    for (;;) {                                                                                 \
      T old_value;                                                                             \
      old_value.__x = old;                                                                     \
      const T sum = T(static_cast<float>(old_value) + static_cast<float>(v));                 \
      if (__atomic_compare_exchange_n(bits, &old, sum.__x, true, __ATOMIC_RELAXED,             \
                                      __ATOMIC_RELAXED)) {                                     \
        return old_value;                                                                      \
      }                                                                                        \
    }                                                                                          \
  }
CHOREO_CPU_ATOMIC_16(__half)
CHOREO_CPU_ATOMIC_16(__nv_bfloat16)
#undef CHOREO_CPU_ATOMIC_16

// The _block and _system scopes are the same operations here.
#define CHOREO_CPU_ATOMIC_SCOPES(op)                                 \
  template <class T, class U>                                        \
  inline T op##_block(T* p, U v) {                                   \
    return op(p, static_cast<T>(v));                                 \
  }                                                                  \
  template <class T, class U>                                        \
  inline T op##_system(T* p, U v) {                                  \
    return op(p, static_cast<T>(v));                                 \
  }
CHOREO_CPU_ATOMIC_SCOPES(atomicAdd)
CHOREO_CPU_ATOMIC_SCOPES(atomicSub)
CHOREO_CPU_ATOMIC_SCOPES(atomicExch)
CHOREO_CPU_ATOMIC_SCOPES(atomicMin)
CHOREO_CPU_ATOMIC_SCOPES(atomicMax)
CHOREO_CPU_ATOMIC_SCOPES(atomicAnd)
CHOREO_CPU_ATOMIC_SCOPES(atomicOr)
CHOREO_CPU_ATOMIC_SCOPES(atomicXor)
#undef CHOREO_CPU_ATOMIC_SCOPES
template <class T, class U>
inline T atomicCAS_block(T* p, U compare, U v) {
  return atomicCAS(p, static_cast<T>(compare), static_cast<T>(v));
}
template <class T, class U>
inline T atomicCAS_system(T* p, U compare, U v) {
  return atomicCAS(p, static_cast<T>(compare), static_cast<T>(v));
}

// The fences are defined with the kernel-facing API below (they are scheduling points).

// ---------------------------------------------------------------------------------------------
// 3. The kernel-facing API.
// ---------------------------------------------------------------------------------------------

enum cudaLaunchAttributeID {
  cudaLaunchAttributeIgnore = 0,
  cudaLaunchAttributeAccessPolicyWindow = 1,
  cudaLaunchAttributeCooperative = 2,
  cudaLaunchAttributeSynchronizationPolicy = 3,
  cudaLaunchAttributeClusterDimension = 4,
  cudaLaunchAttributeClusterSchedulingPolicyPreference = 5,
  cudaLaunchAttributeProgrammaticStreamSerialization = 6,
  cudaLaunchAttributeProgrammaticEvent = 7,
  cudaLaunchAttributePriority = 8
};
union cudaLaunchAttributeValue {
  char pad[64];
  int cooperative;
  int priority;
  struct {
    unsigned x, y, z;
  } clusterDim;
  int programmaticStreamSerializationAllowed;
};
struct cudaLaunchAttribute {
  cudaLaunchAttributeID id;
  char pad[8 - sizeof(cudaLaunchAttributeID)];
  cudaLaunchAttributeValue val;
};

struct cudaLaunchConfig_t;
namespace choreo {
namespace cpu {
namespace detail {
// `threadIdx`, `blockIdx`, `blockDim` and `gridDim` are macros expanding to
// `__choreo_thr->NAME` (see the end of this header), so a member access `config.gridDim` reads
// `config.__choreo_thr->gridDim`: this empty member makes that the configuration's own field.
struct LaunchConfigSelf {
  inline cudaLaunchConfig_t* operator->();
  inline const cudaLaunchConfig_t* operator->() const;
};
}  // namespace detail
}  // namespace cpu
}  // namespace choreo

struct cudaLaunchConfig_t {
  dim3 gridDim;
  dim3 blockDim;
  std::size_t dynamicSmemBytes;
  cudaStream_t stream;
  cudaLaunchAttribute* attrs;
  unsigned int numAttrs;
  ::choreo::cpu::detail::LaunchConfigSelf __choreo_thr;
};
inline cudaLaunchConfig_t* choreo::cpu::detail::LaunchConfigSelf::operator->() {
  return reinterpret_cast<cudaLaunchConfig_t*>(reinterpret_cast<char*>(this) -
                                               offsetof(cudaLaunchConfig_t, __choreo_thr));
}
inline const cudaLaunchConfig_t* choreo::cpu::detail::LaunchConfigSelf::operator->() const {
  return reinterpret_cast<const cudaLaunchConfig_t*>(reinterpret_cast<const char*>(this) -
                                                     offsetof(cudaLaunchConfig_t, __choreo_thr));
}

enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
  cudaFuncAttributeNonPortableClusterSizeAllowed = 14
};
struct cudaFuncAttributes {
  std::size_t sharedSizeBytes;
  std::size_t constSizeBytes;
  std::size_t localSizeBytes;
  int maxThreadsPerBlock;
  int numRegs;
  int ptxVersion;
  int binaryVersion;
  int cacheModeCA;
  int maxDynamicSharedSizeBytes;
  int preferredShmemCarveout;
};
// Kernels need no loading or attributes on the CPU: these accept any kernel and succeed.
template <class Kernel>
inline cudaError_t cudaFuncSetAttribute(Kernel, cudaFuncAttribute, int) {
  return cudaSuccess;
}
template <class Kernel>
inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, Kernel) {
  if (attributes == nullptr) return cudaErrorInvalidValue;
  *attributes = cudaFuncAttributes{};
  attributes->maxThreadsPerBlock = 1024;
  attributes->maxDynamicSharedSizeBytes = 227 * 1024;
  return cudaSuccess;
}
// Every block fits: a cooperative grid is limited only by the fibres' memory.
template <class Kernel>
inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, Kernel, int,
                                                                 std::size_t) {
  if (blocks == nullptr) return cudaErrorInvalidValue;
  *blocks = 65536;
  return cudaSuccess;
}

namespace choreo {
namespace cpu {

namespace detail {
struct Block;
}

// Launch flags. kFibres: the threads of a block synchronise (every thread a fibre).
// kCooperative: a grid barrier (all blocks' threads fibres of one scheduler). kDeviceThread: a
// loop-mode kernel calls `__device__` functions that read threadIdx & co. through the global
// `__choreo_thr` (the runner then keeps the thread-local one up to date, a store per thread;
// generated kernels never need it, since foreign code makes them fibre kernels).
enum : unsigned { kFibres = 1u, kCooperative = 2u, kDeviceThread = 4u };

// One CUDA thread of a running kernel: what `threadIdx` & co. read, and the barriers.
struct Thread {
  uint3 threadIdx;
  uint3 blockIdx;
  dim3 blockDim;
  dim3 gridDim;
  // This block's dynamic shared memory: 128-byte aligned, uninitialised (as in CUDA).
  unsigned char* smem;

  // Block barrier (__syncthreads); threads that have exited count as arrived.
  void sync_threads() const;
  // The block barrier with a predicate: __syncthreads_count / _and / _or.
  int sync_threads_count(int predicate) const;
  int sync_threads_and(int predicate) const;
  int sync_threads_or(int predicate) const;
  // The lanes of `mask` in this thread's warp (32 consecutive linear thread indices).
  void sync_warp(unsigned mask = 0xffffffffu) const;
  // Named barriers (PTX bar.sync / bar.arrive): `count` threads in all arrive at barrier `id`.
  void bar_sync(unsigned id, unsigned count) const;
  void bar_arrive(unsigned id, unsigned count) const;
  // Grid barrier; cooperative launches only.
  void grid_sync() const;
  // mbarriers (PTX mbarrier.*): `bar` is an 8-byte shared word. init sets the arrival count of
  // every phase; arrive counts one arrival (after expecting `expect_bytes` transaction bytes);
  // complete_tx is what a copy engine does when its bytes have landed; wait returns once the
  // phase of parity `parity` has completed (a fresh barrier is in phase 0: parity 1 passes).
  void mbar_init(void* bar, unsigned count) const;
  void mbar_arrive(void* bar, unsigned expect_bytes = 0) const;
  void mbar_expect_tx(void* bar, unsigned bytes) const;
  void mbar_complete_tx(void* bar, unsigned bytes) const;
  void mbar_wait(const void* bar, unsigned parity) const;
  // Cluster barrier (barrier.cluster.arrive + wait): every thread of the block's cluster; the
  // block barrier in a launch without clusters. Exited threads count as arrived.
  void cluster_sync() const;
  // This block's rank in its cluster (%cluster_ctarank): blockIdx.x % blocks per cluster.
  unsigned cluster_rank() const;
  // The address in the shared memory of the block of rank `rank` of this block's cluster that
  // corresponds to `p` in this block's (PTX mapa): blocks of a cluster share one layout. A
  // launch without clusters has rank 0 only. An address outside this block's shared memory, or a
  // rank outside the cluster, fails the launch.
  void* cluster_map(const void* p, unsigned rank) const;
  // The number of blocks of this block's cluster (%cluster_nctarank): 1 without clusters.
  unsigned cluster_size() const;
  // Lets the block's other fibres run (a no-op in loop mode and on the host): what fences and
  // __nanosleep do, so that a thread spinning on a flag another thread of its block sets
  // makes progress under fibres, which are not preempted.
  void yield() const;
  // Warp exchange (what the shuffles and votes are built on; fibre mode): every lane of `mask`
  // offers `value`; returns the value lane `source` offered (its own when `source` did not
  // take part).
  unsigned long long warp_exchange(unsigned mask, unsigned long long value,
                                   unsigned source) const;
  // The lanes of `mask` whose `predicate` is true (__ballot_sync).
  unsigned warp_ballot(unsigned mask, bool predicate) const;
  // The lanes of this thread's warp that have not exited (__activemask).
  unsigned warp_active() const;
  // Device printf: buffered per block, written in block order when the kernel completes.
  int printf(const char* format, ...) const __attribute__((format(printf, 2, 3)));
  // Stops the block; the launch fails with the sticky cudaErrorLaunchFailure.
  [[noreturn]] void trap() const;
  // A failed device assertion: as trap, with the sticky cudaErrorAssert.
  [[noreturn]] void assert_fail() const;

  // Runtime-private.
  detail::Block* block_;
  unsigned linear_;  // threadIdx as a linear index within the block
  void* fibre_;      // the fibre running this thread; nullptr in loop mode and on the host
  bool mirror_;      // loop mode: copy each index here too (the launch's kDeviceThread)
};

namespace detail {

template <class F>
struct kernel_traits;
template <class... P>
struct kernel_traits<void (*)(const Thread*, P...)> {
  using args = std::tuple<std::decay_t<P>...>;
};
template <class... P>
struct kernel_traits<void (*)(const Thread*, P...) noexcept> {
  using args = std::tuple<std::decay_t<P>...>;
};

template <auto Kernel, class Args, std::size_t... I>
inline void call_kernel(const Thread* thread, const Args& args, std::index_sequence<I...>) {
  Kernel(thread, std::get<I>(args)...);
}

// Loop mode: all threads of one block in a loop; the kernel is known here and inlines.
// The kernel sees local copies of its arguments and of the thread: no store of the kernel can
// change them (their addresses do not escape), so the compiler keeps them in registers across
// the loop instead of reloading them per thread. With kDeviceThread the runtime's thread (what
// the thread-local `__choreo_thr` gives `__device__` functions) gets each index as well.
template <auto Kernel, class Args>
void run_block(const void* args, Thread* thread) {
  const Args a = *static_cast<const Args*>(args);
  Thread local = *thread;
  const dim3 b = local.blockDim;
  const bool mirror = thread->mirror_;
  unsigned linear = 0;
  for (unsigned z = 0; z < b.z; ++z) {
    for (unsigned y = 0; y < b.y; ++y) {
      for (unsigned x = 0; x < b.x; ++x) {
        local.threadIdx = uint3{x, y, z};
        local.linear_ = linear++;
        if (mirror) {
          thread->threadIdx = local.threadIdx;
          thread->linear_ = local.linear_;
        }
        call_kernel<Kernel>(&local, a, std::make_index_sequence<std::tuple_size<Args>::value>{});
      }
    }
  }
}

// Fibre mode: the body of one thread's fibre.
template <auto Kernel, class Args>
void run_thread(const void* args, Thread* thread) {
  call_kernel<Kernel>(thread, *static_cast<const Args*>(args),
                      std::make_index_sequence<std::tuple_size<Args>::value>{});
}

template <class Args>
void destroy_args(void* args) {
  delete static_cast<Args*>(args);
}

template <auto Kernel>
const char* kernel_name() {
  return __PRETTY_FUNCTION__;
}

// What the global `__choreo_thr` is: `->` gives the thread running on this OS thread, so the
// macros work in __device__ functions without a `__choreo_thr` parameter.
struct CurrentThread {
  const Thread* operator->() const { return choreo_cpu_current_thread(); }
};

}  // namespace detail

// Launches `Kernel` (a `void(const Thread*, params...)`) over config's grid; `flags`: kFibres,
// kCooperative (also set by a cudaLaunchAttributeCooperative attribute). The arguments are
// converted to the parameter types and copied, as cudaLaunchKernelEx does.
template <auto Kernel, class... Args>
cudaError_t launch(const cudaLaunchConfig_t* config, unsigned flags, Args... args) {
  using ArgTuple = typename detail::kernel_traits<decltype(Kernel)>::args;
  if (config == nullptr) return static_cast<cudaError_t>(choreo_cpu_launch(nullptr));
  choreo_cpu_launch_desc desc;
  desc.cluster = 1;
  for (unsigned i = 0; config->attrs != nullptr && i < config->numAttrs; ++i) {
    if (config->attrs[i].id == cudaLaunchAttributeCooperative && config->attrs[i].val.cooperative) {
      flags |= kCooperative;
    }
    if (config->attrs[i].id == cudaLaunchAttributeClusterDimension) {
      const auto& c = config->attrs[i].val.clusterDim;
      desc.cluster = c.x * c.y * c.z;
    }
  }
  desc.grid[0] = config->gridDim.x;
  desc.grid[1] = config->gridDim.y;
  desc.grid[2] = config->gridDim.z;
  desc.block[0] = config->blockDim.x;
  desc.block[1] = config->blockDim.y;
  desc.block[2] = config->blockDim.z;
  desc.smem_bytes = config->dynamicSmemBytes;
  desc.stream = config->stream;
  desc.flags = flags;
  desc.name = detail::kernel_name<Kernel>();
  desc.args = new (std::nothrow) ArgTuple(args...);
  desc.destroy_args = &detail::destroy_args<ArgTuple>;
  desc.run_block = &detail::run_block<Kernel, ArgTuple>;
  desc.run_thread = &detail::run_thread<Kernel, ArgTuple>;
  return static_cast<cudaError_t>(choreo_cpu_launch(&desc));
}

namespace detail {
// CUDA-dialect kernels (no Thread parameter; see cudaLaunchKernelEx below): the kernel is a
// run-time pointer stored first in the argument tuple.
template <class Args, std::size_t... I>
inline void call_pointer(const Args& args, std::index_sequence<I...>) {
  std::get<0>(args)(std::get<I + 1>(args)...);
}
template <class Args>
void run_thread_pointer(const void* args, Thread*) {
  const Args& a = *static_cast<const Args*>(args);
  call_pointer(a, std::make_index_sequence<std::tuple_size<Args>::value - 1>{});
}
template <class Args>
void run_block_pointer(const void* args, Thread* thread) {
  const dim3 b = thread->blockDim;
  unsigned linear = 0;
  for (unsigned z = 0; z < b.z; ++z) {
    for (unsigned y = 0; y < b.y; ++y) {
      for (unsigned x = 0; x < b.x; ++x) {
        thread->threadIdx = uint3{x, y, z};
        thread->linear_ = linear++;
        run_thread_pointer<Args>(args, thread);
      }
    }
  }
}
}  // namespace detail

// Whether the calling OS thread runs a kernel's thread now.
inline bool in_kernel() { return choreo_cpu_current_thread()->block_ != nullptr; }

}  // namespace cpu
}  // namespace choreo

// A kernel in the CUDA dialect (no leading Thread parameter: what the CUDA emitter writes) also
// runs: its built-ins reach the current thread through the global `__choreo_thr`, and since
// nothing says whether it has barriers it always runs in fibre mode. Slower than
// choreo::cpu::launch (no inlining, a thread-local read per built-in), but it lets CUDA code
// that was not written for the CPU backend run unchanged.
template <class... P, class... A>
inline cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t* config, void (*kernel)(P...),
                                      A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "cudaLaunchKernelEx: wrong number of arguments");
  using Args = std::tuple<void (*)(P...), std::decay_t<P>...>;
  if (config == nullptr || kernel == nullptr) {
    return static_cast<cudaError_t>(choreo_cpu_launch(nullptr));
  }
  unsigned flags = ::choreo::cpu::kFibres;
  for (unsigned i = 0; config->attrs != nullptr && i < config->numAttrs; ++i) {
    if (config->attrs[i].id == cudaLaunchAttributeCooperative && config->attrs[i].val.cooperative) {
      flags |= ::choreo::cpu::kCooperative;
    }
  }
  choreo_cpu_launch_desc desc;
  desc.grid[0] = config->gridDim.x;
  desc.grid[1] = config->gridDim.y;
  desc.grid[2] = config->gridDim.z;
  desc.block[0] = config->blockDim.x;
  desc.block[1] = config->blockDim.y;
  desc.block[2] = config->blockDim.z;
  desc.smem_bytes = config->dynamicSmemBytes;
  desc.stream = config->stream;
  desc.flags = flags;
  desc.name = "a CUDA-dialect kernel (cudaLaunchKernelEx)";
  desc.cluster = 1;
  for (unsigned i = 0; config->attrs != nullptr && i < config->numAttrs; ++i) {
    if (config->attrs[i].id == cudaLaunchAttributeClusterDimension) {
      const auto& c = config->attrs[i].val.clusterDim;
      desc.cluster = c.x * c.y * c.z;
    }
  }
  desc.args = new (std::nothrow) Args(kernel, std::forward<A>(args)...);
  desc.destroy_args = &::choreo::cpu::detail::destroy_args<Args>;
  desc.run_block = &::choreo::cpu::detail::run_block_pointer<Args>;
  desc.run_thread = &::choreo::cpu::detail::run_thread_pointer<Args>;
  return static_cast<cudaError_t>(choreo_cpu_launch(&desc));
}

// Threads of a block may run on one OS thread (fibres) or several blocks on several: a full
// fence covers both; it is also a scheduling point (see Thread::yield).
inline void __threadfence() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  choreo_cpu_current_thread()->yield();
}
inline void __threadfence_block() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  choreo_cpu_current_thread()->yield();
}
inline void __threadfence_system() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  choreo_cpu_current_thread()->yield();
}
inline void __nanosleep(unsigned) { choreo_cpu_current_thread()->yield(); }

// Warp shuffles and votes (fibre mode; they synchronise the lanes of `mask` like __syncwarp).
namespace choreo {
namespace cpu {
namespace detail {
template <class T>
inline T warp_shuffle(unsigned mask, T value, unsigned source) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                "warp shuffles move values of up to 8 bytes");
  unsigned long long bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = choreo_cpu_current_thread()->warp_exchange(mask, bits, source);
  T result;
  std::memcpy(&result, &bits, sizeof(T));
  return result;
}
inline unsigned lane_id() { return choreo_cpu_current_thread()->linear_ % 32u; }
}  // namespace detail
}  // namespace cpu
}  // namespace choreo

template <class T>
inline T __shfl_sync(unsigned mask, T value, int source, int width = 32) {
  const unsigned lane = ::choreo::cpu::detail::lane_id();
  const unsigned w = static_cast<unsigned>(width);
  return ::choreo::cpu::detail::warp_shuffle(
      mask, value, (lane & ~(w - 1)) | (static_cast<unsigned>(source) & (w - 1)));
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = 32) {
  const unsigned lane = ::choreo::cpu::detail::lane_id();
  const unsigned w = static_cast<unsigned>(width);
  const unsigned source = (lane & (w - 1)) >= delta ? lane - delta : lane;
  return ::choreo::cpu::detail::warp_shuffle(mask, value, source);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = 32) {
  const unsigned lane = ::choreo::cpu::detail::lane_id();
  const unsigned w = static_cast<unsigned>(width);
  const unsigned source = (lane & (w - 1)) + delta < w ? lane + delta : lane;
  return ::choreo::cpu::detail::warp_shuffle(mask, value, source);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
  const unsigned lane = ::choreo::cpu::detail::lane_id();
  const unsigned w = static_cast<unsigned>(width);
  unsigned source = lane ^ static_cast<unsigned>(lane_mask);
  if ((source & ~(w - 1)) != (lane & ~(w - 1)) || source >= 32) source = lane;
  return ::choreo::cpu::detail::warp_shuffle(mask, value, source);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return choreo_cpu_current_thread()->warp_ballot(mask, predicate != 0);
}
inline int __all_sync(unsigned mask, int predicate) {
  const ::choreo::cpu::Thread* t = choreo_cpu_current_thread();
  const unsigned in = mask | (1u << (t->linear_ % 32u));
  return (t->warp_ballot(mask, predicate != 0) & in & t->warp_active()) ==
         (in & t->warp_active());
}
inline int __any_sync(unsigned mask, int predicate) {
  return choreo_cpu_current_thread()->warp_ballot(mask, predicate != 0) != 0;
}
inline unsigned __activemask() { return choreo_cpu_current_thread()->warp_active(); }
inline unsigned __lanemask_lt() {
  return (1u << ::choreo::cpu::detail::lane_id()) - 1u;
}

// The thread running on this OS thread, for code outside kernels' bodies (see CurrentThread);
// inside a kernel the parameter of the same name hides it.
inline constexpr ::choreo::cpu::detail::CurrentThread __choreo_thr{};

// Cooperative groups: the grid group of a cooperative launch (what the emitter uses).
namespace cooperative_groups {
struct grid_group {
  void sync() const { __choreo_thr->grid_sync(); }
};
inline grid_group this_grid() { return grid_group{}; }
struct thread_block {
  void sync() const { __choreo_thr->sync_threads(); }
};
inline thread_block this_thread_block() { return thread_block{}; }
}  // namespace cooperative_groups

// The device built-ins. Unparenthesised on purpose: a postfix expression binds tightest, so
// `threadIdx.x` or `-blockDim.x` mean what they say, and `config.gridDim` still names a field
// (see LaunchConfigSelf). The runtime's own file does not want them.
#if !defined(CHOREO_CPU_RUNTIME_IMPLEMENTATION)
#define threadIdx __choreo_thr->threadIdx
#define blockIdx __choreo_thr->blockIdx
#define blockDim __choreo_thr->blockDim
#define gridDim __choreo_thr->gridDim
#define __syncthreads() (__choreo_thr->sync_threads())
#define __syncthreads_count(predicate) (__choreo_thr->sync_threads_count(predicate))
#define __syncthreads_and(predicate) (__choreo_thr->sync_threads_and(predicate))
#define __syncthreads_or(predicate) (__choreo_thr->sync_threads_or(predicate))
#define __syncwarp(...) (__choreo_thr->sync_warp(__VA_ARGS__))
#define __trap() (__choreo_thr->trap())
#endif
