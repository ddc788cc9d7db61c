// Hand-written CUDA kernels for the example app, until the build integration translates `.co`
// kernels. Each kernel has an `extern "C"` launcher that enqueues it on a stream and returns the
// launch status; nothing here synchronises or aborts.
#include <cuda_runtime.h>
#include <cstdint>

namespace {

__global__ void saxpy_kernel(float a, const float* x, const float* y, float* out, uint64_t n) {
    uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) out[i] = a * x[i] + y[i];
}

// One block per row: a tree reduction in shared memory.
__global__ void row_sum_kernel(const float* m, float* sums, uint64_t cols) {
    __shared__ float partial[256];
    const float* row = m + (uint64_t)blockIdx.x * cols;
    float acc = 0.0f;
    for (uint64_t c = threadIdx.x; c < cols; c += blockDim.x) acc += row[c];
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) sums[blockIdx.x] = partial[0];
}

unsigned blocks_for(uint64_t n, unsigned threads) {
    uint64_t b = (n + threads - 1) / threads;
    if (b == 0) b = 1;
    if (b > 65535u * 32u) b = 65535u * 32u;  // grid-stride loop covers the rest
    return (unsigned)b;
}

}  // namespace

extern "C" cudaError_t example_saxpy(float a, const float* x, const float* y, float* out, uint64_t n,
                                     cudaStream_t stream) {
    const unsigned threads = 256;
    saxpy_kernel<<<blocks_for(n, threads), threads, 0, stream>>>(a, x, y, out, n);
    return cudaGetLastError();
}

extern "C" cudaError_t example_row_sum(const float* m, float* sums, uint64_t rows, uint64_t cols,
                                       cudaStream_t stream) {
    if (rows == 0) return cudaSuccess;
    if (rows > 0x7fffffffu) return cudaErrorInvalidValue;
    row_sum_kernel<<<(unsigned)rows, 256, 0, stream>>>(m, sums, cols);
    return cudaGetLastError();
}
