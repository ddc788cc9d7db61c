// mbarriers in fibre mode (what shared events and TMA completion are built on): a
// producer/consumer ring of two slots with full/empty barriers whose waits follow the phase
// parity, and transaction bytes that complete a phase only once they have landed (expected
// before or after the copy completes). errors_mbarrier.cpp has the waits that cannot complete.
#define __CHOREO_CPU__ 1
#include "choreo_cpu.h"

#include <cstring>
#include <vector>

#include "check.h"

using choreo::cpu::kFibres;
using choreo::cpu::Thread;

constexpr int kSlots = 2;
constexpr int kRounds = 7;
constexpr int kConsumers = 64;

// Block layout: warp 0's lane 0 produces, threads 32..95 consume.
struct Ring {
  unsigned long long full[kSlots];
  unsigned long long empty[kSlots];
  int data[kSlots][kConsumers];
};

static void ring(const Thread* __choreo_thr, int* out) {
  Ring* r = reinterpret_cast<Ring*>(__choreo_thr->smem);
  const unsigned t = threadIdx.x;
  if (t == 0) {
    for (int s = 0; s < kSlots; ++s) {
      __choreo_thr->mbar_init(&r->full[s], 1);
      __choreo_thr->mbar_init(&r->empty[s], kConsumers);
    }
  }
  __syncthreads();
  if (t == 0) {
    for (int k = 0; k < kRounds; ++k) {
      const int s = k % kSlots;
      // `empty` starts ready: its first wait uses parity 1.
      __choreo_thr->mbar_wait(&r->empty[s], ((k / kSlots) & 1) ^ 1);
      for (int i = 0; i < kConsumers; ++i) r->data[s][i] = 1000 * k + i + 100000 * blockIdx.x;
      __choreo_thr->mbar_arrive(&r->full[s]);
    }
  } else if (t >= 32) {
    const int i = static_cast<int>(t) - 32;
    int sum = 0;
    for (int k = 0; k < kRounds; ++k) {
      const int s = k % kSlots;
      __choreo_thr->mbar_wait(&r->full[s], (k / kSlots) & 1);
      sum += r->data[s][i];
      __choreo_thr->mbar_arrive(&r->empty[s]);
    }
    out[blockIdx.x * kConsumers + i] = sum;
  }
}

// Transaction bytes: a phase with one arrival and 256 expected bytes completes only when the
// "copy" has landed, whichever comes first.
static void tx(const Thread* __choreo_thr, int* out) {
  unsigned long long* bar = reinterpret_cast<unsigned long long*>(__choreo_thr->smem);
  int* landed = reinterpret_cast<int*>(__choreo_thr->smem + 8);
  if (threadIdx.x == 0) {
    __choreo_thr->mbar_init(bar, 1);
    *landed = 0;
  }
  __syncthreads();
  // Phase 0: arm first, the copy lands later (thread 1, after the others started waiting).
  if (threadIdx.x == 0) __choreo_thr->mbar_arrive(bar, 256);
  if (threadIdx.x == 1) {
    __choreo_thr->yield();
    *landed = 1;
    __choreo_thr->mbar_complete_tx(bar, 128);
    __choreo_thr->yield();
    __choreo_thr->mbar_complete_tx(bar, 128);
  }
  __choreo_thr->mbar_wait(bar, 0);
  out[threadIdx.x] = *landed;
  __syncthreads();
  // Phase 1: the bytes land before they are expected.
  if (threadIdx.x == 1) __choreo_thr->mbar_complete_tx(bar, 64);
  __syncthreads();
  if (threadIdx.x == 0) {
    __choreo_thr->mbar_expect_tx(bar, 64);
    __choreo_thr->mbar_arrive(bar);
  }
  __choreo_thr->mbar_wait(bar, 1);
  out[blockDim.x + threadIdx.x] = 2;
}

int main() {
  constexpr int kBlocks = 5;
  int* out = nullptr;
  CHECK_OK(cudaMalloc(&out, kBlocks * kConsumers * sizeof(int)));
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(kBlocks);
  c.blockDim = dim3(96);
  c.dynamicSmemBytes = sizeof(Ring);
  CHECK_OK(choreo::cpu::launch<ring>(&c, kFibres, out));
  CHECK_OK(cudaDeviceSynchronize());
  for (int b = 0; b < kBlocks; ++b) {
    for (int i = 0; i < kConsumers; ++i) {
      int want = 0;
      for (int k = 0; k < kRounds; ++k) want += 1000 * k + i + 100000 * b;
      CHECK(out[b * kConsumers + i] == want);
    }
  }

  c.gridDim = dim3(2);
  c.blockDim = dim3(8);
  c.dynamicSmemBytes = 16;
  CHECK_OK(choreo::cpu::launch<tx>(&c, kFibres, out));
  CHECK_OK(cudaDeviceSynchronize());
  for (int i = 0; i < 8; ++i) CHECK(out[i] == 1 && out[8 + i] == 2);
  CHECK_OK(cudaFree(out));

  std::printf("ok\n");
  return 0;
}
