// Thread-block clusters (cudaLaunchAttributeClusterDimension): the blocks of a cluster are
// consecutive along x and run together, so the cluster barrier (Thread::cluster_sync) orders
// their writes for each other; cluster_rank is blockIdx.x % the cluster size. Invalid cluster
// shapes are launch errors, as in CUDA.
#define __CHOREO_CPU__ 1
#include "choreo_cpu.h"

#include "check.h"

using choreo::cpu::Thread;

// Each block writes a value, waits for its cluster, then reads its ring neighbour's value;
// a second round overwrites the values after another cluster barrier.
static void ring(const Thread* __choreo_thr, int* scratch, int* out, unsigned cluster) {
  const unsigned rank = __choreo_thr->cluster_rank();
  const unsigned first = blockIdx.x - rank;
  if (threadIdx.x == 0) scratch[blockIdx.x] = static_cast<int>(blockIdx.x) * 10;
  __choreo_thr->cluster_sync();
  if (threadIdx.x == 0) {
    out[blockIdx.x * 3] = scratch[first + (rank + 1) % cluster];
    out[blockIdx.x * 3 + 1] = static_cast<int>(rank);
  }
  __choreo_thr->cluster_sync();
  if (threadIdx.x == 0) scratch[blockIdx.x] = -static_cast<int>(rank);
  __choreo_thr->cluster_sync();
  if (threadIdx.x == 0) out[blockIdx.x * 3 + 2] = scratch[first + (rank + cluster - 1) % cluster];
}

// Distributed shared memory (PTX mapa) and remote mbarriers: each block writes its rank into
// the shared word of every block of its cluster, then arrives on every block's mbarrier (count:
// one arrival per block); after its own barrier completes, a block sees every rank's word.
static void remote(const Thread* __choreo_thr, int* out, unsigned cluster) {
  unsigned char* smem = __choreo_thr->smem;
  unsigned long long* bar = reinterpret_cast<unsigned long long*>(smem);
  int* words = reinterpret_cast<int*>(smem + 8);
  const unsigned rank = __choreo_thr->cluster_rank();
  if (threadIdx.x == 0) __choreo_thr->mbar_init(bar, cluster);
  __choreo_thr->cluster_sync();
  if (threadIdx.x == 0) {
    CHECK(__choreo_thr->cluster_size() == cluster);
    for (unsigned r = 0; r < cluster; ++r) {
      int* w = static_cast<int*>(__choreo_thr->cluster_map(words + rank, r));
      *w = static_cast<int>(rank) + 100;
      __choreo_thr->mbar_arrive(static_cast<unsigned long long*>(__choreo_thr->cluster_map(bar, r)));
    }
  }
  __choreo_thr->mbar_wait(bar, 0);
  if (threadIdx.x < cluster) out[blockIdx.x * 16 + threadIdx.x] = words[threadIdx.x];
  __choreo_thr->cluster_sync();  // no block leaves while others may still write its memory
}

static cudaLaunchConfig_t config(unsigned blocks, unsigned threads, cudaLaunchAttribute* a) {
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(blocks);
  c.blockDim = dim3(threads);
  c.attrs = a;
  c.numAttrs = a == nullptr ? 0 : 1;
  return c;
}

int main() {
  for (unsigned cluster : {1u, 2u, 4u, 16u}) {
    const unsigned blocks = 32;
    int *scratch = nullptr, *out = nullptr;
    CHECK_OK(cudaMalloc(&scratch, blocks * sizeof(int)));
    CHECK_OK(cudaMalloc(&out, blocks * 3 * sizeof(int)));
    cudaLaunchAttribute a = {};
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = cluster;
    a.val.clusterDim.y = 1;
    a.val.clusterDim.z = 1;
    cudaLaunchConfig_t c = config(blocks, 64, &a);
    CHECK_OK(choreo::cpu::launch<ring>(&c, choreo::cpu::kFibres, scratch, out, cluster));
    CHECK_OK(cudaDeviceSynchronize());
    for (unsigned b = 0; b < blocks; ++b) {
      const unsigned rank = b % cluster, first = b - rank;
      CHECK(out[b * 3] == static_cast<int>(first + (rank + 1) % cluster) * 10);
      CHECK(out[b * 3 + 1] == static_cast<int>(rank));
      CHECK(out[b * 3 + 2] == -static_cast<int>((rank + cluster - 1) % cluster));
    }
    CHECK_OK(cudaFree(scratch));
    CHECK_OK(cudaFree(out));
  }
  for (unsigned cluster : {1u, 2u, 4u}) {
    const unsigned blocks = 8;
    int* out = nullptr;
    CHECK_OK(cudaMalloc(&out, blocks * 16 * sizeof(int)));
    cudaLaunchAttribute a = {};
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = cluster;
    a.val.clusterDim.y = 1;
    a.val.clusterDim.z = 1;
    cudaLaunchConfig_t c = config(blocks, 32, &a);
    c.dynamicSmemBytes = 8 + 16 * sizeof(int);
    CHECK_OK(choreo::cpu::launch<remote>(&c, choreo::cpu::kFibres, out, cluster));
    CHECK_OK(cudaDeviceSynchronize());
    for (unsigned b = 0; b < blocks; ++b)
      for (unsigned r = 0; r < cluster; ++r) CHECK(out[b * 16 + r] == static_cast<int>(r) + 100);
    CHECK_OK(cudaFree(out));
  }
  // A grid that is not whole clusters, a cluster above 16 blocks, a cooperative cluster launch.
  int* none = nullptr;
  cudaLaunchAttribute a = {};
  a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim.x = 4;
  a.val.clusterDim.y = 1;
  a.val.clusterDim.z = 1;
  cudaLaunchConfig_t c = config(6, 32, &a);
  CHECK(choreo::cpu::launch<ring>(&c, choreo::cpu::kFibres, none, none, 4u) ==
        cudaErrorInvalidConfiguration);
  a.val.clusterDim.x = 32;
  c = config(64, 32, &a);
  CHECK(choreo::cpu::launch<ring>(&c, choreo::cpu::kFibres, none, none, 32u) ==
        cudaErrorInvalidConfiguration);
  a.val.clusterDim.x = 2;
  c = config(8, 32, &a);
  CHECK(choreo::cpu::launch<ring>(&c, choreo::cpu::kCooperative, none, none, 2u) ==
        cudaErrorInvalidConfiguration);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  CHECK(cudaGetLastError() == cudaSuccess);  // not sticky
  std::printf("ok\n");
  return 0;
}
