// Kernels in loop mode (no barriers): indices of 3-D grids and blocks, dynamic shared memory,
// atomics from many blocks, device printf in block order, __device__ functions reading the
// built-ins through the global __choreo_thr, argument conversion, launch errors, and two
// streams' kernels running at the same time.
#define __CHOREO_CPU__ 1
#include "choreo_cpu.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "check.h"

using choreo::cpu::Thread;

static void index_kernel(const Thread* __choreo_thr, unsigned* out) {
  const unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const unsigned thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
  out[block * per_block + thread] = block * 1000 + thread;
}

// A __device__ function has no __choreo_thr parameter: the macros read the current thread.
__device__ unsigned global_index() { return blockIdx.x * blockDim.x + threadIdx.x; }

static void sum_kernel([[maybe_unused]] const Thread* __choreo_thr, unsigned long long* total,
                       int* counts, float* fsum, __half* half_sum, unsigned n) {
  const unsigned i = global_index();
  if (i < n) {
    atomicAdd(total, static_cast<unsigned long long>(i));
    atomicAdd(&counts[i % 7], 1);
    atomicMax(&counts[7], static_cast<int>(i));
    atomicAdd(fsum, 1.0f);
    atomicAdd_block(&counts[8], 1);
    if (i < 64) atomicAdd(half_sum, __half(1.0f));
  }
}

static void smem_kernel(const Thread* __choreo_thr, int* out) {
  // Loop mode: one thread at a time, so the last writer of a slot is the highest thread.
  int* tile = reinterpret_cast<int*>(__choreo_thr->smem);
  CHECK(reinterpret_cast<std::uintptr_t>(tile) % 128 == 0);
  tile[threadIdx.x] = static_cast<int>(blockIdx.x * 100 + threadIdx.x);
  if (threadIdx.x == blockDim.x - 1) {
    int s = 0;
    for (unsigned t = 0; t < blockDim.x; ++t) s += tile[t];
    out[blockIdx.x] = s;
  }
}

static void print_kernel(const Thread* __choreo_thr) {
  if (threadIdx.x == 0) __choreo_thr->printf("block %u\n", blockIdx.x);
}

// Converted parameter types: a double argument to a float parameter, an int to unsigned char.
static void convert_kernel(const Thread* __choreo_thr, float f, unsigned char c, float* out) {
  (void)__choreo_thr;
  out[0] = f;
  out[1] = c;
}

static std::atomic<int> flag{0};
static void spin_kernel(const Thread* __choreo_thr, int* seen) {
  (void)__choreo_thr;
  // Bounded (a broken runtime fails instead of hanging), generously: the machine may be busy.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (flag.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  *seen = flag.load();
}
static void set_kernel(const Thread* __choreo_thr) {
  (void)__choreo_thr;
  flag.store(1);
}

static cudaLaunchConfig_t config(dim3 grid, dim3 block, cudaStream_t stream = nullptr,
                                 std::size_t smem = 0) {
  cudaLaunchConfig_t c = {};
  c.gridDim = grid;  // through the threadIdx/gridDim macros: config.gridDim is the field
  c.blockDim = block;
  c.dynamicSmemBytes = smem;
  c.stream = stream;
  return c;
}

int main() {
  // Indices.
  const dim3 grid(3, 2, 2), block(4, 2, 3);
  const unsigned total_threads = 12 * 24;
  unsigned* idx = nullptr;
  CHECK_OK(cudaMalloc(&idx, total_threads * sizeof(unsigned)));
  cudaLaunchConfig_t c = config(grid, block);
  CHECK(c.gridDim.x == 3 && c.blockDim.z == 3);
  CHECK_OK(choreo::cpu::launch<index_kernel>(&c, 0, idx));
  std::vector<unsigned> host(total_threads);
  CHECK_OK(cudaMemcpy(host.data(), idx, total_threads * sizeof(unsigned), cudaMemcpyDeviceToHost));
  for (unsigned b = 0; b < 12; ++b) {
    for (unsigned t = 0; t < 24; ++t) CHECK(host[b * 24 + t] == b * 1000 + t);
  }
  CHECK_OK(cudaFree(idx));

  // Atomics from many blocks: exact integer results.
  const unsigned n = 100000;
  unsigned long long* sum = nullptr;
  int* counts = nullptr;
  float* fsum = nullptr;
  CHECK_OK(cudaMalloc(&sum, sizeof *sum));
  CHECK_OK(cudaMalloc(&counts, 9 * sizeof(int)));
  CHECK_OK(cudaMalloc(&fsum, sizeof(float)));
  CHECK_OK(cudaMemset(sum, 0, sizeof *sum));
  CHECK_OK(cudaMemset(counts, 0, 9 * sizeof(int)));
  __half* half_sum = nullptr;
  CHECK_OK(cudaMalloc(&half_sum, sizeof(__half)));
  CHECK_OK(cudaMemset(half_sum, 0, sizeof(__half)));
  CHECK_OK(cudaMemset(fsum, 0, sizeof(float)));
  c = config(dim3((n + 255) / 256), dim3(256));
  // sum_kernel's index comes from a __device__ function, through the global __choreo_thr.
  CHECK_OK(choreo::cpu::launch<sum_kernel>(&c, choreo::cpu::kDeviceThread, sum, counts, fsum,
                                           half_sum, n));
  CHECK_OK(cudaDeviceSynchronize());
  CHECK(*sum == static_cast<unsigned long long>(n) * (n - 1) / 2);
  int expect_counts = 0;
  for (int r = 0; r < 7; ++r) expect_counts += counts[r];
  CHECK(expect_counts == static_cast<int>(n));
  CHECK(counts[7] == static_cast<int>(n - 1));
  CHECK(*fsum == static_cast<float>(n));  // integers below 2^24 add exactly
  CHECK(counts[8] == static_cast<int>(n));
  CHECK(__half2float(*half_sum) == 64.0f);

  // Dynamic shared memory, per block.
  int* out = nullptr;
  CHECK_OK(cudaMalloc(&out, 16 * sizeof(int)));
  c = config(dim3(16), dim3(64), nullptr, 64 * sizeof(int));
  CHECK_OK(choreo::cpu::launch<smem_kernel>(&c, 0, out));
  CHECK_OK(cudaDeviceSynchronize());
  for (int b = 0; b < 16; ++b) CHECK(out[b] == b * 100 * 64 + 63 * 64 / 2);

  // Device printf, in block order when the kernel completes.
  std::fflush(stdout);
  c = config(dim3(8), dim3(32));
  CHECK_OK(choreo::cpu::launch<print_kernel>(&c, 0));
  CHECK_OK(cudaDeviceSynchronize());
  // The test harness checks the order of the lines "block 0".."block 7".

  // Argument conversion.
  float* conv = nullptr;
  CHECK_OK(cudaMalloc(&conv, 2 * sizeof(float)));
  c = config(dim3(1), dim3(1));
  CHECK_OK(choreo::cpu::launch<convert_kernel>(&c, 0, 2.5, 300, conv));
  CHECK_OK(cudaDeviceSynchronize());
  CHECK(conv[0] == 2.5f && conv[1] == 44.0f);

  // Launch configuration errors are not sticky.
  c = config(dim3(0), dim3(1));
  CHECK(choreo::cpu::launch<print_kernel>(&c, 0) == cudaErrorInvalidConfiguration);
  c = config(dim3(1), dim3(1025));
  CHECK(choreo::cpu::launch<print_kernel>(&c, 0) == cudaErrorInvalidConfiguration);
  c = config(dim3(1), dim3(1), nullptr, 300 * 1024);
  CHECK(choreo::cpu::launch<print_kernel>(&c, 0) == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK_OK(cudaGetLastError());
  CHECK_OK(cudaDeviceSynchronize());

  // Two streams' kernels overlap: the first spins until the second has run.
  cudaStream_t s1, s2;
  CHECK_OK(cudaStreamCreate(&s1));
  CHECK_OK(cudaStreamCreate(&s2));
  int* seen = nullptr;
  CHECK_OK(cudaMalloc(&seen, sizeof(int)));
  c = config(dim3(1), dim3(1), s1);
  CHECK_OK(choreo::cpu::launch<spin_kernel>(&c, 0, seen));
  c = config(dim3(1), dim3(1), s2);
  CHECK_OK(choreo::cpu::launch<set_kernel>(&c, 0));
  CHECK_OK(cudaDeviceSynchronize());
  CHECK(*seen == 1);
  CHECK_OK(cudaStreamDestroy(s1));
  CHECK_OK(cudaStreamDestroy(s2));

  std::printf("ok\n");
  return 0;
}
