// A barrier in a kernel launched without kFibres cannot be honoured (its threads run one after
// the other): the launch fails with the sticky cudaErrorLaunchFailure and says why, instead of
// computing a wrong result. A block of one thread needs no fibres.
#define __CHOREO_CPU__ 1
#include "choreo_cpu.h"

#include "check.h"

using choreo::cpu::Thread;

static void with_barrier(const Thread* __choreo_thr, int* out) {
  out[threadIdx.x] = 1;
  __syncthreads();
  out[threadIdx.x] += out[(threadIdx.x + 1) % blockDim.x];
}

int main() {
  int* out = nullptr;
  CHECK_OK(cudaMalloc(&out, 32 * sizeof(int)));
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(1);
  c.blockDim = dim3(1);
  CHECK_OK(choreo::cpu::launch<with_barrier>(&c, 0, out));
  CHECK_OK(cudaDeviceSynchronize());
  CHECK(out[0] == 2);
  c.blockDim = dim3(32);
  CHECK_OK(choreo::cpu::launch<with_barrier>(&c, 0, out));
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  std::printf("ok\n");
  return 0;
}
