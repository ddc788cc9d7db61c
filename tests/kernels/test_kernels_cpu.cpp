// The CPU versions of the hand-written test kernels (test_kernels.cu), compiled by
// tests/build.rs with the host's C++ compiler (always: they need no CUDA toolkit) against the
// CPU runtime's header, like the CPU dialect of generated code: the file starts as a generated
// one does, a kernel takes the runtime's Thread first, and it is launched with
// ::choreo::cpu::launch on the stream handle the Rust side passes (a CPU runtime stream). The
// runtime itself is the one the `choreo` crate compiles and links.
//
// Every launcher has the signature of its CUDA twin in test_kernels.cu (`choreo_test_cpu_`
// instead of `choreo_test_`), so src/lib.rs calls either with the same arguments. Clocks are
// the host's steady clock instead of the GPU's global timer; the words polled by gates and
// rendezvous are plain host memory that the Rust side never frees.

#define __CHOREO_CPU__ 1
#include "choreo.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>

namespace {

constexpr unsigned kThreads = 256;
constexpr std::size_t kMaxBlocks = 1024;

unsigned blocks_for(std::size_t n) {
  std::size_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks == 0) blocks = 1;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return static_cast<unsigned>(blocks);
}

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

// A pause between two polls of a word the host (or another stream) sets: the OS thread sleeps,
// which leaves the cores to the threads that will set it (the tests run on two shared cores).
void poll_pause() { std::this_thread::sleep_for(std::chrono::microseconds(50)); }

std::uint32_t load(const std::uint32_t* word) { return __atomic_load_n(word, __ATOMIC_SEQ_CST); }

void store(std::uint32_t* word, std::uint32_t value) {
  __atomic_store_n(word, value, __ATOMIC_SEQ_CST);
}

// The grid-stride write of `value` to `out` that ends the spin and gated kernels.
void write_share(const ::choreo::cpu::Thread* __choreo_thr, std::uint32_t* out, std::size_t n,
                 std::uint32_t value) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = value;
  }
}

// Thread 0 of every block waits until `spin_ns` nanoseconds of the host's clock have passed
// since the first block started (`*start`, set by it), then the block writes `value` to its
// grid-stride share of `out`. So no element is written before the wait. (On a GPU every block
// waits from its own start, all at once; the CPU runs the blocks a few at a time, and a wait
// per block would add up.)
void spin_then_write_kernel(const ::choreo::cpu::Thread* __choreo_thr, std::uint64_t* start,
                            std::uint32_t* out, std::size_t n, std::uint64_t spin_ns,
                            std::uint32_t value) {
  if (threadIdx.x == 0) {
    std::uint64_t begun = 0;
    const std::uint64_t now = now_ns();
    if (__atomic_compare_exchange_n(start, &begun, now, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST)) {
      begun = now;
    }
    while (now_ns() - begun < spin_ns) poll_pause();
  }
  __syncthreads();
  write_share(__choreo_thr, out, n, value);
}

void delete_start(void* start) { delete static_cast<std::uint64_t*>(start); }

// Thread 0 of every block waits until the host opens the gate (`gate[0] != 0`) or `timeout_ns`
// have passed, in which case it sets `gate[1]`; then the block writes `value` to its
// grid-stride share of `out`. The host decides when the kernel finishes.
void wait_then_write_kernel(const ::choreo::cpu::Thread* __choreo_thr, std::uint32_t* gate,
                            std::uint32_t* out, std::size_t n, std::uint64_t timeout_ns,
                            std::uint32_t value) {
  if (threadIdx.x == 0) {
    const std::uint64_t start = now_ns();
    while (load(&gate[0]) == 0) {
      if (now_ns() - start >= timeout_ns) {
        store(&gate[1], 1);
        break;
      }
      poll_pause();
    }
  }
  __syncthreads();
  write_share(__choreo_thr, out, n, value);
}

// One side of a rendezvous of two kernels on two streams over `[arrived 0, arrived 1, met 0,
// met 1]`, as in test_kernels.cu: `met me` is set only if the other side arrived in time.
void rendezvous_kernel(const ::choreo::cpu::Thread* __choreo_thr, std::uint32_t* words,
                       unsigned me, std::uint64_t timeout_ns) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  store(&words[me], 1);
  const unsigned other = 1 - me;
  const std::uint64_t start = now_ns();
  while (load(&words[other]) == 0) {
    if (now_ns() - start >= timeout_ns) return;
    poll_pause();
  }
  store(&words[2 + me], 1);
}

// Traps: the CPU runtime records the sticky cudaErrorLaunchFailure, as a GPU's context would.
void trap_kernel(const ::choreo::cpu::Thread* __choreo_thr) { __trap(); }

void add_one_kernel(const ::choreo::cpu::Thread* __choreo_thr, std::uint32_t* data,
                    std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    data[i] += 1;
  }
}

void saxpy_kernel(const ::choreo::cpu::Thread* __choreo_thr, float a, const float* x, float* y,
                  std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    y[i] = a * x[i] + y[i];
  }
}

// Converts with the CPU runtime's version of CUDA's conversion (choreo_cpu.h).
void f32_to_fp8_kernel(const ::choreo::cpu::Thread* __choreo_thr, const float* input,
                       std::uint8_t* output, std::size_t n, int e5m2) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    output[i] = __nv_cvt_float_to_fp8(input[i], __NV_SATFINITE, e5m2 ? __NV_E5M2 : __NV_E4M3);
  }
}

cudaLaunchConfig_t config_for(unsigned blocks, unsigned threads, cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.stream = stream;
  return config;
}

}  // namespace

extern "C" int choreo_test_cpu_spin_then_write(std::uint32_t* out, std::size_t n,
                                               std::uint64_t spin_ns, std::uint32_t value,
                                               cudaStream_t stream) {
  const cudaLaunchConfig_t config = config_for(blocks_for(n), kThreads, stream);
  auto* start = new std::uint64_t(0);
  const cudaError_t err = ::choreo::cpu::launch<spin_then_write_kernel>(
      &config, ::choreo::cpu::kFibres, start, out, n, spin_ns, value);
  if (err != cudaSuccess) {
    delete start;
    return static_cast<int>(err);
  }
  // Freed in stream order, after the kernel.
  return static_cast<int>(cudaLaunchHostFunc(stream, delete_start, start));
}

extern "C" int choreo_test_cpu_wait_then_write(std::uint32_t* gate, std::uint32_t* out,
                                               std::size_t n, std::uint64_t timeout_ns,
                                               std::uint32_t value, cudaStream_t stream) {
  const cudaLaunchConfig_t config = config_for(blocks_for(n), kThreads, stream);
  return static_cast<int>(::choreo::cpu::launch<wait_then_write_kernel>(
      &config, ::choreo::cpu::kFibres, gate, out, n, timeout_ns, value));
}

extern "C" int choreo_test_cpu_rendezvous(std::uint32_t* words, unsigned me,
                                          std::uint64_t timeout_ns, cudaStream_t stream) {
  const cudaLaunchConfig_t config = config_for(1, 32, stream);
  return static_cast<int>(
      ::choreo::cpu::launch<rendezvous_kernel>(&config, 0u, words, me, timeout_ns));
}

extern "C" int choreo_test_cpu_trap(cudaStream_t stream) {
  const cudaLaunchConfig_t config = config_for(1, 1, stream);
  return static_cast<int>(::choreo::cpu::launch<trap_kernel>(&config, 0u));
}

extern "C" int choreo_test_cpu_add_one(std::uint32_t* data, std::size_t n, cudaStream_t stream) {
  const cudaLaunchConfig_t config = config_for(blocks_for(n), kThreads, stream);
  return static_cast<int>(::choreo::cpu::launch<add_one_kernel>(&config, 0u, data, n));
}

extern "C" int choreo_test_cpu_saxpy(float a, const float* x, float* y, std::size_t n,
                                     cudaStream_t stream) {
  const cudaLaunchConfig_t config = config_for(blocks_for(n), kThreads, stream);
  return static_cast<int>(::choreo::cpu::launch<saxpy_kernel>(&config, 0u, a, x, y, n));
}

extern "C" int choreo_test_cpu_f32_to_fp8_device(const float* input, std::uint8_t* output,
                                                 std::size_t n, int e5m2, cudaStream_t stream) {
  const cudaLaunchConfig_t config = config_for(blocks_for(n), kThreads, stream);
  return static_cast<int>(
      ::choreo::cpu::launch<f32_to_fp8_kernel>(&config, 0u, input, output, n, e5m2));
}
