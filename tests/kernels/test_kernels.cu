// Kernels for the GPU variants of the tests (tests/tests/*.rs, `NAME::on_gpu`), compiled by
// tests/build.rs with nvcc. Their CPU versions, with the same launchers, are
// test_kernels_cpu.cpp.
//
// Every launcher is `extern "C"`, takes the stream to launch on, and returns the launch status
// instead of aborting, like the entry points that choreo generates.

#include <cstddef>
#include <cstdint>

#include <cuda_fp8.h>
#include <cuda_runtime.h>

namespace {

constexpr unsigned kThreads = 256;
constexpr size_t kMaxBlocks = 1024;

unsigned blocks_for(size_t n) {
    size_t blocks = (n + kThreads - 1) / kThreads;
    if (blocks == 0) blocks = 1;
    if (blocks > kMaxBlocks) blocks = kMaxBlocks;
    return static_cast<unsigned>(blocks);
}

// Launch errors are reported by cudaGetLastError, which also returns errors left behind by
// earlier, unrelated calls of this thread: clear it before launching.
void clear_last_error() { (void)cudaGetLastError(); }

__device__ __forceinline__ unsigned long long globaltimer_ns() {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    return now;
}

// Thread 0 of every block busy-waits `spin_ns` nanoseconds of wall-clock time, then the block
// writes `value` to its grid-stride share of `out`. So no element is written before the spin.
__global__ void spin_then_write_kernel(uint32_t* out, size_t n, unsigned long long spin_ns,
                                       uint32_t value) {
    if (threadIdx.x == 0) {
        const unsigned long long start = globaltimer_ns();
        while (globaltimer_ns() - start < spin_ns) {
            __nanosleep(1000);
        }
    }
    __syncthreads();
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        out[i] = value;
    }
}

// Thread 0 of every block waits until the host opens the gate (`gate[0] != 0`, in mapped
// pinned memory) or `timeout_ns` have passed, in which case it sets `gate[1]`; then the block
// writes `value` to its grid-stride share of `out`. The host decides when the kernel finishes.
__global__ void wait_then_write_kernel(volatile uint32_t* gate, uint32_t* out, size_t n,
                                       unsigned long long timeout_ns, uint32_t value) {
    if (threadIdx.x == 0) {
        const unsigned long long start = globaltimer_ns();
        while (gate[0] == 0) {
            if (globaltimer_ns() - start >= timeout_ns) {
                gate[1] = 1;
                break;
            }
            __nanosleep(1000);
        }
    }
    __syncthreads();
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        out[i] = value;
    }
}

// One side of a rendezvous of two kernels on two streams, over four words of mapped pinned
// memory `[arrived 0, arrived 1, met 0, met 1]`: announces its arrival (`me` is 0 or 1), waits
// until the other side has arrived or `timeout_ns` have passed, and sets `met me` only if it
// saw the other side. Both sides meet only if they run at the same time, so afterwards
// `met 0 && met 1` proves that the device ran the two kernels concurrently; a device that
// runs one kernel at a time (as compute-sanitizer does) leaves one side unmet.
__global__ void rendezvous_kernel(volatile uint32_t* words, unsigned me,
                                  unsigned long long timeout_ns) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    words[me] = 1;
    __threadfence_system();
    const unsigned other = 1 - me;
    const unsigned long long start = globaltimer_ns();
    while (words[other] == 0) {
        if (globaltimer_ns() - start >= timeout_ns) return;
        __nanosleep(1000);
    }
    words[2 + me] = 1;
    __threadfence_system();
}

// Executes a trap instruction: the kernel fails, and the CUDA context is unusable afterwards
// (a sticky error: every later CUDA call of the process fails).
__global__ void trap_kernel() { __trap(); }

__global__ void add_one_kernel(uint32_t* data, size_t n) {
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        data[i] += 1;
    }
}

__global__ void saxpy_kernel(float a, const float* x, float* y, size_t n) {
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        y[i] = a * x[i] + y[i];
    }
}

// Converts with CUDA's own conversion (on sm_89+ the `cvt.rn.satfinite` instruction).
__global__ void f32_to_fp8_kernel(const float* input, uint8_t* output, size_t n, int e5m2) {
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        output[i] = __nv_cvt_float_to_fp8(input[i], __NV_SATFINITE, e5m2 ? __NV_E5M2 : __NV_E4M3);
    }
}

}  // namespace

extern "C" cudaError_t choreo_test_spin_then_write(uint32_t* out, size_t n, uint64_t spin_ns,
                                                   uint32_t value, cudaStream_t stream) {
    clear_last_error();
    spin_then_write_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, n, spin_ns, value);
    return cudaGetLastError();
}

extern "C" cudaError_t choreo_test_wait_then_write(uint32_t* gate, uint32_t* out, size_t n,
                                                   uint64_t timeout_ns, uint32_t value,
                                                   cudaStream_t stream) {
    clear_last_error();
    wait_then_write_kernel<<<blocks_for(n), kThreads, 0, stream>>>(gate, out, n, timeout_ns, value);
    return cudaGetLastError();
}

extern "C" cudaError_t choreo_test_rendezvous(uint32_t* words, unsigned me, uint64_t timeout_ns,
                                              cudaStream_t stream) {
    clear_last_error();
    rendezvous_kernel<<<1, 32, 0, stream>>>(words, me, timeout_ns);
    return cudaGetLastError();
}

extern "C" cudaError_t choreo_test_trap(cudaStream_t stream) {
    clear_last_error();
    trap_kernel<<<1, 1, 0, stream>>>();
    return cudaGetLastError();
}

extern "C" cudaError_t choreo_test_add_one(uint32_t* data, size_t n, cudaStream_t stream) {
    clear_last_error();
    add_one_kernel<<<blocks_for(n), kThreads, 0, stream>>>(data, n);
    return cudaGetLastError();
}

extern "C" cudaError_t choreo_test_saxpy(float a, const float* x, float* y, size_t n,
                                         cudaStream_t stream) {
    clear_last_error();
    saxpy_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, x, y, n);
    return cudaGetLastError();
}

extern "C" cudaError_t choreo_test_f32_to_fp8_device(const float* input, uint8_t* output,
                                                     size_t n, int e5m2, cudaStream_t stream) {
    clear_last_error();
    f32_to_fp8_kernel<<<blocks_for(n), kThreads, 0, stream>>>(input, output, n, e5m2);
    return cudaGetLastError();
}

// CUDA's host implementation of the fp8 conversions (cuda_fp8.hpp), as the reference for the
// Rust ones; needs no GPU.
extern "C" uint8_t choreo_test_host_f32_to_fp8(float x, int saturate, int e5m2) {
    return __nv_cvt_float_to_fp8(x, saturate ? __NV_SATFINITE : __NV_NOSAT,
                                 e5m2 ? __NV_E5M2 : __NV_E4M3);
}

extern "C" float choreo_test_host_fp8_to_f32(uint8_t code, int e5m2) {
    const __half_raw raw = __nv_cvt_fp8_to_halfraw(code, e5m2 ? __NV_E5M2 : __NV_E4M3);
    return __half2float(__half(raw));
}
