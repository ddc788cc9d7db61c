// A block whose threads wait at barriers that cannot complete: the runtime detects the
// deadlock, reports the kernel, block and barrier on stderr, unwinds the waiting threads and
// sets the sticky cudaErrorLaunchFailure.
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

static void stuck(const Thread* __choreo_thr) {
  Guard guard;
  if (threadIdx.x < 32) {
    __syncthreads();  // waits for the other warp, which never comes
  } else {
    __choreo_thr->bar_sync(3, 64);  // 64 threads expected, 32 arrive
  }
}

int main() {
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(3);
  c.blockDim = dim3(64);
  CHECK_OK(choreo::cpu::launch<stuck>(&c, choreo::cpu::kFibres));
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  // The waiting threads were unwound: every guard constructed was destroyed.
  CHECK(constructed.load() >= 64);
  CHECK(destroyed.load() == constructed.load());
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  std::printf("ok\n");
  return 0;
}
