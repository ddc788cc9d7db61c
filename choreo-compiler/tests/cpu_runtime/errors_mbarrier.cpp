// An mbarrier wait that can never complete (32 of 64 expected arrivals): the runtime reports
// the deadlock with the kernel, block and what the threads wait for, and the launch fails with
// the sticky cudaErrorLaunchFailure instead of hanging.
#define __CHOREO_CPU__ 1
#include "choreo_cpu.h"

#include "check.h"

using choreo::cpu::Thread;

static void stuck(const Thread* __choreo_thr) {
  unsigned long long* bar = reinterpret_cast<unsigned long long*>(__choreo_thr->smem);
  if (threadIdx.x == 0) __choreo_thr->mbar_init(bar, 64);
  __syncthreads();
  if (threadIdx.x < 32) __choreo_thr->mbar_arrive(bar);
  __choreo_thr->mbar_wait(bar, 0);
}

int main() {
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(2);
  c.blockDim = dim3(64);
  c.dynamicSmemBytes = 8;
  CHECK_OK(choreo::cpu::launch<stuck>(&c, choreo::cpu::kFibres));
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  std::printf("ok\n");
  return 0;
}
