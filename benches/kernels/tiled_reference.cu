// Hand-written CUDA references of the `tiled` section of `choreo-bench gpu`: the kernels of
// `tiled.co` written the way a CUDA programmer would (same tile sizes, launch shape and order of
// arithmetic), launched with `<<<>>>`, plus cuBLAS's sgemm loaded at run time with dlopen (for
// scale only). Every entry returns a cudaError_t as int (0 = success) and never throws.

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdlib>

namespace {

// ---- transpose ----------------------------------------------------------------------------

constexpr int kTransposeN = 8192;

// o = aᵀ through a padded 32 x 33 shared tile; 256 threads per tile (ty = tid / 32, tx = tid %
// 32, as Choreo flattens `{ty, tx} by [8, 32]`), 4 elements per thread. blockIdx.x = bi,
// blockIdx.y = bj.
__global__ void transpose_tiled(const float* __restrict__ a, float* __restrict__ o) {
  __shared__ float tile[32][33];
  const int bi = blockIdx.x, bj = blockIdx.y;
  const int ty = threadIdx.x / 32, tx = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    tile[k * 8 + ty][tx] = a[(bi * 32 + k * 8 + ty) * kTransposeN + bj * 32 + tx];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    o[(bj * 32 + k * 8 + ty) * kTransposeN + bi * 32 + tx] = tile[tx][k * 8 + ty];
  }
}

// ---- SGEMM --------------------------------------------------------------------------------

constexpr int kGemmN = 4096;  // M = N = K
constexpr int kBM = 128, kBN = 128, kBK = 16;
constexpr int kGemmThreads = 256;

template <int Bytes>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (Bytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(gmem), "n"(Bytes)
                 : "memory");
  }
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

// Starts this thread's copies of the [128, 16] tile of a and the [16, 128] tile of b of k-step
// `kt` into `as` / `bs` and commits them: thread t copies row t / 2, columns 8 (t % 2) .. + 7 of
// the a tile and row t / 16, columns 8 (t % 16) .. + 7 of the b tile, with `Bytes` per
// cp.async: 16 (what the generated kernel issues when the pointers are aligned) or 4 (its
// fallback).
template <int Bytes>
__device__ __forceinline__ void load_tiles(float* as, float* bs, const float* __restrict__ a,
                                           const float* __restrict__ b, int bm, int bn, int kt) {
  const int t = threadIdx.x;
  const int ar = t / 2, ac = (t % 2) * 8;
  const int br = t / 16, bc = (t % 16) * 8;
  float* const sa = &as[ar * kBK + ac];
  float* const sb = &bs[br * kBN + bc];
  const float* const ga = &a[(bm * kBM + ar) * kGemmN + kt * kBK + ac];
  const float* const gb = &b[(kt * kBK + br) * kGemmN + bn * kBN + bc];
#pragma unroll
  for (int q = 0; q < 8; q += Bytes / 4) cp_async<Bytes>(sa + q, ga + q);
#pragma unroll
  for (int q = 0; q < 8; q += Bytes / 4) cp_async<Bytes>(sb + q, gb + q);
  cp_async_commit();
}

// acc[i][j] += as[ty + 16 i][kk] * bs[kk][tx + 16 j] for kk, i, j in that order (the order of
// the generated kernel, so both give the same bits).
__device__ __forceinline__ void multiply_tiles(float (&acc)[8][8], const float* as,
                                               const float* bs, int ty, int tx) {
#pragma unroll
  for (int kk = 0; kk < kBK; ++kk) {
    float ra[8], rb[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) ra[i] = as[(ty + 16 * i) * kBK + kk];
#pragma unroll
    for (int j = 0; j < 8; ++j) rb[j] = bs[kk * kBN + tx + 16 * j];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] += ra[i] * rb[j];
    }
  }
}

// c = a · b: 128 x 128 block tiles (blockIdx.x = bm, blockIdx.y = bn), BK = 16, 256 threads
// with 8 x 8 micro-tiles, two slots of shared tiles: the tiles of step k + 1 are in flight
// (cp.async) while step k computes, then one wait + barrier per step: the algorithm of
// `sgemm_tiled` in tiled.co, with the same launch bounds.
template <int Bytes>
__global__ void __launch_bounds__(kGemmThreads, 2)
    sgemm_tiled(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c) {
  __shared__ __align__(16) float as[2][kBM * kBK];
  __shared__ __align__(16) float bs[2][kBK * kBN];
  const int bm = blockIdx.x, bn = blockIdx.y;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  float acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
  }
  constexpr int kSteps = kGemmN / kBK;
  load_tiles<Bytes>(as[0], bs[0], a, b, bm, bn, 0);
  cp_async_wait<0>();
  __syncthreads();
  for (int kt = 0; kt < kSteps - 1; ++kt) {
    const int cur = kt & 1;
    load_tiles<Bytes>(as[cur ^ 1], bs[cur ^ 1], a, b, bm, bn, kt + 1);
    multiply_tiles(acc, as[cur], bs[cur], ty, tx);
    cp_async_wait<0>();  // this thread's copies of step kt + 1 have landed ...
    __syncthreads();     // ... everyone's, and everyone is done with slot cur
  }
  multiply_tiles(acc, as[(kSteps - 1) & 1], bs[(kSteps - 1) & 1], ty, tx);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      c[(bm * kBM + ty + 16 * i) * kGemmN + bn * kBN + tx + 16 * j] = acc[i][j];
    }
  }
}

// ---- softmax ------------------------------------------------------------------------------

constexpr int kSoftmaxN = 8192;  // rows = columns

// y = exp(x - max) / sum per row: one block of 256 threads per row, 32 elements per thread in
// registers (columns t + 256 k), the max and the sum each reduced by a shared-memory tree (the
// algorithm of `softmax_rows` in tiled.co).
__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y) {
  __shared__ float redm[256];
  __shared__ float reds[256];
  const int p = blockIdx.x, t = threadIdx.x;
  const float* row = x + static_cast<long long>(p) * kSoftmaxN;
  float v[32];
#pragma unroll
  for (int k = 0; k < 32; ++k) v[k] = row[k * 256 + t];
  float m = v[0];
#pragma unroll
  for (int k = 0; k < 32; ++k) m = fmaxf(m, v[k]);
  redm[t] = m;
  __syncthreads();
#pragma unroll
  for (int h = 128; h > 0; h /= 2) {
    if (t < h) redm[t] = fmaxf(redm[t], redm[t + h]);
    __syncthreads();
  }
  const float rmax = redm[0];
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < 32; ++k) {
    v[k] = expf(v[k] - rmax);
    sum += v[k];
  }
  reds[t] = sum;
  __syncthreads();
#pragma unroll
  for (int h = 128; h > 0; h /= 2) {
    if (t < h) reds[t] = reds[t] + reds[t + h];
    __syncthreads();
  }
  const float inv = 1.0f / reds[0];
  float* out = y + static_cast<long long>(p) * kSoftmaxN;
#pragma unroll
  for (int k = 0; k < 32; ++k) out[k * 256 + t] = v[k] * inv;
}

// ---- cuBLAS, loaded at run time -----------------------------------------------------------

using cublasHandle = void*;
using CreateFn = int (*)(cublasHandle*);
using SetStreamFn = int (*)(cublasHandle, cudaStream_t);
using SgemmFn = int (*)(cublasHandle, int, int, int, int, int, const float*, const float*, int,
                        const float*, int, const float*, float*, int);

struct Cublas {
  void* library = nullptr;
  cublasHandle handle = nullptr;
  SetStreamFn set_stream = nullptr;
  SgemmFn sgemm = nullptr;
};

Cublas cublas;

}  // namespace

extern "C" {

// Warms the kernels up (module loading) so no measurement pays for it.
int ref_tiled_load_kernels() {
  cudaFuncAttributes attributes;
  cudaError_t err = cudaFuncGetAttributes(&attributes, transpose_tiled);
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attributes, sgemm_tiled<4>);
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attributes, sgemm_tiled<16>);
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attributes, softmax_rows);
  return err;
}

// o = aᵀ, both 8192 x 8192.
int ref_transpose_tiled(cudaStream_t s, const float* a, float* o) {
  transpose_tiled<<<dim3(kTransposeN / 32, kTransposeN / 32), 256, 0, s>>>(a, o);
  return cudaGetLastError();
}

// c = a · b, all 4096 x 4096; `bytes_per_copy` is 4 (the generated kernel's cp.async width) or
// 16.
int ref_sgemm_tiled(cudaStream_t s, const float* a, const float* b, float* c, int bytes_per_copy) {
  const dim3 grid(kGemmN / kBM, kGemmN / kBN);
  if (bytes_per_copy == 4) {
    sgemm_tiled<4><<<grid, kGemmThreads, 0, s>>>(a, b, c);
  } else if (bytes_per_copy == 16) {
    sgemm_tiled<16><<<grid, kGemmThreads, 0, s>>>(a, b, c);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

// y = softmax of each row of x, both 8192 x 8192.
int ref_softmax_rows(cudaStream_t s, const float* x, float* y) {
  softmax_rows<<<kSoftmaxN, 256, 0, s>>>(x, y);
  return cudaGetLastError();
}

// Loads cuBLAS with dlopen (`$CHOREO_BENCH_CUBLAS`, else libcublas.so from the loader's path,
// else from /usr/local/cuda/lib64, else PyTorch's pip copy on the GPU machines' image) and
// creates a handle. Returns 0 when it is ready, 1 when the
// library or a symbol was not found, 2 when cublasCreate failed.
int ref_cublas_load() {
  if (cublas.handle != nullptr) return 0;
  const char* candidates[] = {std::getenv("CHOREO_BENCH_CUBLAS"),
                              "libcublas.so",
                              "libcublas.so.13",
                              "libcublas.so.12",
                              "/usr/local/cuda/lib64/libcublas.so",
                              "/usr/local/cuda/lib64/libcublas.so.13",
                              "/usr/local/cuda/lib64/libcublas.so.12",
                              "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/"
                              "libcublas.so.13"};
  for (const char* name : candidates) {
    if (name == nullptr || *name == '\0') continue;
    cublas.library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (cublas.library != nullptr) break;
  }
  if (cublas.library == nullptr) return 1;
  const auto create = reinterpret_cast<CreateFn>(dlsym(cublas.library, "cublasCreate_v2"));
  cublas.set_stream = reinterpret_cast<SetStreamFn>(dlsym(cublas.library, "cublasSetStream_v2"));
  cublas.sgemm = reinterpret_cast<SgemmFn>(dlsym(cublas.library, "cublasSgemm_v2"));
  if (create == nullptr || cublas.set_stream == nullptr || cublas.sgemm == nullptr) return 1;
  if (create(&cublas.handle) != 0) {
    cublas.handle = nullptr;
    return 2;
  }
  return 0;
}

// c = a · b (row-major 4096 x 4096, f32, default math mode: no TF32) with cuBLAS on `s`: in
// cuBLAS's column-major terms cᵀ = bᵀ · aᵀ. Returns the cuBLAS status (0 = success), or -1
// when cuBLAS is not loaded.
int ref_cublas_sgemm(cudaStream_t s, const float* a, const float* b, float* c) {
  if (cublas.handle == nullptr) return -1;
  int status = cublas.set_stream(cublas.handle, s);
  if (status != 0) return status;
  const float one = 1.0f, zero = 0.0f;
  constexpr int kOpN = 0;  // CUBLAS_OP_N
  return cublas.sgemm(cublas.handle, kOpN, kOpN, kGemmN, kGemmN, kGemmN, &one, b, kGemmN, a,
                      kGemmN, &zero, c, kGemmN);
}

}  // extern "C"
