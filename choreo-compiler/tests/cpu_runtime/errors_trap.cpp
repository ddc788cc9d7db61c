// A trap in a fibre kernel while the block's other threads wait at a barrier: the launch
// fails with the sticky cudaErrorLaunchFailure, every later call returns it, later kernels do
// not run, and the waiting threads' stacks are unwound.
#define __CHOREO_CPU__ 1
#include "choreo_cpu.h"

#include <atomic>

#include "check.h"

using choreo::cpu::Thread;

static std::atomic<int> constructed{0};
static std::atomic<int> destroyed{0};
struct Guard {
  Guard() { constructed.fetch_add(1); }
  ~Guard() { destroyed.fetch_add(1); }
};

static void trapping(const Thread* __choreo_thr, int* out) {
  Guard guard;
  if (blockIdx.x == 1 && threadIdx.x == 5) __trap();
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

static void later(const Thread* __choreo_thr, int* out) {
  (void)__choreo_thr;
  *out = 42;
}

int main() {
  int* out = nullptr;
  CHECK_OK(cudaMalloc(&out, 64 * sizeof(int)));
  CHECK_OK(cudaMemset(out, 0, 64 * sizeof(int)));
  int* flag = nullptr;
  CHECK_OK(cudaMallocHost(&flag, sizeof(int)));
  *flag = 0;
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(2);
  c.blockDim = dim3(32);
  CHECK_OK(choreo::cpu::launch<trapping>(&c, choreo::cpu::kFibres, out));
  c.gridDim = dim3(1);
  c.blockDim = dim3(1);
  // The trap may already have happened (then the launch reports it) or not.
  const cudaError_t second = choreo::cpu::launch<later>(&c, 0, flag);
  CHECK(second == cudaSuccess || second == cudaErrorLaunchFailure);
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  CHECK(*flag == 0);  // enqueued after the failure: never ran
  // Block 1's threads were stopped and unwound: every guard constructed was destroyed (threads
  // not started when the trap came never run).
  CHECK(constructed.load() >= 6);
  CHECK(destroyed.load() == constructed.load());
  int blocked = 0;
  for (int i = 32; i < 64; ++i) blocked += out[i];
  CHECK(blocked == 0);
  // Sticky: every call returns the error, cudaGetLastError does not clear it.
  void* p = nullptr;
  CHECK(cudaMalloc(&p, 16) == cudaErrorLaunchFailure);
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  CHECK(cudaStreamSynchronize(nullptr) == cudaErrorLaunchFailure);
  CHECK(choreo::cpu::launch<later>(&c, 0, flag) == cudaErrorLaunchFailure);
  std::printf("ok\n");
  return 0;
}
