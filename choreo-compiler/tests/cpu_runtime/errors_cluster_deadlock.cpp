// A cluster whose threads wait at barriers that cannot complete (one thread at the cluster
// barrier, the rest of its block at __syncthreads): the runtime detects the deadlock, reports
// the kernel, blocks and barriers on stderr and sets the sticky cudaErrorLaunchFailure.
#define __CHOREO_CPU__ 1
#include "choreo_cpu.h"

#include "check.h"

using choreo::cpu::Thread;

static void stuck_cluster(const Thread* __choreo_thr) {
  if (threadIdx.x == 0) {
    __choreo_thr->cluster_sync();
  } else {
    __syncthreads();
  }
}

int main() {
  cudaLaunchAttribute a = {};
  a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim.x = 2;
  a.val.clusterDim.y = 1;
  a.val.clusterDim.z = 1;
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(4);
  c.blockDim = dim3(64);
  c.attrs = &a;
  c.numAttrs = 1;
  CHECK_OK(choreo::cpu::launch<stuck_cluster>(&c, choreo::cpu::kFibres));
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  std::printf("ok\n");
  return 0;
}
