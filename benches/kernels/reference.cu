// Hand-written CUDA references for `choreo-bench gpu`: the same kernels as `bench.co`, written
// the way a CUDA programmer would, launched with `<<<>>>`, plus the C++ launch loop that is the
// "raw launch from C++" reference of the launch-overhead benchmark. Every entry returns a
// cudaError_t as int (0 = success) and never throws.

#include <chrono>
#include <cuda_runtime.h>

namespace {

// Same arithmetic as `seed_async` in bench.co: `iters` dependent multiply-adds per element.
__global__ void spin(float* data, int n, int iters, float offset) {
  const int i = blockIdx.x * 128 + threadIdx.x;
  if (i < n) {
    float x = data[i];
    for (int k = 0; k < iters; ++k) x = x * 0.9999f + offset;
    data[i] = x;
  }
}

// c = a + b, one element per thread, 256 threads per block (as `add` in bench.co).
__global__ void add(const float* __restrict__ a, const float* __restrict__ b,
                    float* __restrict__ c, unsigned n) {
  const unsigned i = blockIdx.x * 256u + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// c = a + b, four elements per thread 256 apart, loads before stores (as `add4` in bench.co).
__global__ void add4(const float* __restrict__ a, const float* __restrict__ b,
                     float* __restrict__ c, unsigned n) {
  const unsigned i = blockIdx.x * 1024u + threadIdx.x;
  if (i + 768 < n) {
    float x[4], y[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) x[k] = a[i + 256 * k];
#pragma unroll
    for (int k = 0; k < 4; ++k) y[k] = b[i + 256 * k];
#pragma unroll
    for (int k = 0; k < 4; ++k) c[i + 256 * k] = x[k] + y[k];
  } else {
    for (unsigned k = 0; k < 4; ++k) {
      const unsigned j = i + 256 * k;
      if (j < n) c[j] = a[j] + b[j];
    }
  }
}

// c = a + b with 16-byte accesses (four elements per thread), the bandwidth-tuned variant; the
// tail (n not a multiple of 4) is done by the last thread.
__global__ void add_vec4(const float4* __restrict__ a, const float4* __restrict__ b,
                         float4* __restrict__ c, unsigned n4) {
  const unsigned i = blockIdx.x * 256u + threadIdx.x;
  if (i < n4) {
    const float4 x = a[i];
    const float4 y = b[i];
    c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

unsigned blocks_for(unsigned n, unsigned threads) { return (n + threads - 1) / threads; }

}  // namespace

extern "C" {

// The seed's two kernels launched on two streams without waiting (the hand-written twin of
// `seed_async`).
int ref_seed_two_streams(cudaStream_t s0, cudaStream_t s1, float* a, int m, float* b, int n,
                         int iters) {
  spin<<<blocks_for(m, 128), 128, 0, s0>>>(a, m, iters, 0.0001f);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  spin<<<blocks_for(n, 128), 128, 0, s1>>>(b, n, iters, 0.0002f);
  return cudaGetLastError();
}

// The same two kernels one after the other, each waited for (the twin of `seed_sync`).
int ref_seed_serial(cudaStream_t s0, cudaStream_t s1, float* a, int m, float* b, int n,
                    int iters) {
  spin<<<blocks_for(m, 128), 128, 0, s0>>>(a, m, iters, 0.0001f);
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaStreamSynchronize(s0);
  if (err != cudaSuccess) return err;
  spin<<<blocks_for(n, 128), 128, 0, s1>>>(b, n, iters, 0.0002f);
  err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaStreamSynchronize(s1);
  return err;
}

// One raw launch of `add` (the launcher that Rust calls through a plain extern "C" function).
int ref_add(cudaStream_t s, const float* a, const float* b, float* c, unsigned n) {
  add<<<blocks_for(n, 256), 256, 0, s>>>(a, b, c, n);
  return cudaGetLastError();
}

// Four elements per thread (the twin of `add4`).
int ref_add4(cudaStream_t s, const float* a, const float* b, float* c, unsigned n) {
  add4<<<blocks_for(n, 1024), 256, 0, s>>>(a, b, c, n);
  return cudaGetLastError();
}

// The 16-byte variant; `n` must be a multiple of 4 and the pointers 16-byte aligned.
int ref_add_vec4(cudaStream_t s, const float* a, const float* b, float* c, unsigned n) {
  if (n % 4 != 0) return cudaErrorInvalidValue;
  const unsigned n4 = n / 4;
  add_vec4<<<blocks_for(n4, 256), 256, 0, s>>>(reinterpret_cast<const float4*>(a),
                                                 reinterpret_cast<const float4*>(b),
                                                 reinterpret_cast<float4*>(c), n4);
  return cudaGetLastError();
}

// `calls` raw `<<<>>>` launches of `add` in a C++ loop; `*seconds` is the host time of the loop
// (the launches are enqueued, not waited for). The launch error is checked once after the loop,
// as a CUDA programmer timing raw launches would.
int ref_add_loop(cudaStream_t s, const float* a, const float* b, float* c, unsigned n, int calls,
                 double* seconds) {
  const unsigned blocks = blocks_for(n, 256);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) add<<<blocks, 256, 0, s>>>(a, b, c, n);
  const auto end = std::chrono::steady_clock::now();
  *seconds = std::chrono::duration<double>(end - start).count();
  return cudaGetLastError();
}

// Warms the kernels up (module loading) so no measurement pays for it.
int ref_load_kernels() {
  cudaFuncAttributes attributes;
  cudaError_t err = cudaFuncGetAttributes(&attributes, spin);
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attributes, add);
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attributes, add4);
  if (err == cudaSuccess) err = cudaFuncGetAttributes(&attributes, add_vec4);
  return err;
}

}  // extern "C"
