// A failed device assertion in a loop-mode kernel: the sticky cudaErrorAssert.
#define __CHOREO_CPU__ 1
#include "choreo_cpu.h"

#include "check.h"

using choreo::cpu::Thread;

static void asserting(const Thread* __choreo_thr, const int* values) {
  if (values[threadIdx.x] < 0) __choreo_thr->assert_fail();
}

int main() {
  int* values = nullptr;
  CHECK_OK(cudaMalloc(&values, 8 * sizeof(int)));
  for (int i = 0; i < 8; ++i) values[i] = i == 6 ? -1 : i;
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(4);
  c.blockDim = dim3(8);
  CHECK_OK(choreo::cpu::launch<asserting>(&c, 0, values));
  CHECK(cudaDeviceSynchronize() == cudaErrorAssert);
  CHECK(cudaMemcpy(values, values, 4, cudaMemcpyDeviceToDevice) == cudaErrorAssert);
  std::printf("ok\n");
  return 0;
}
