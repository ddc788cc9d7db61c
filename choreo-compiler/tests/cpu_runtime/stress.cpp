// Many streams, kernels, copies and events at once: a chain of increments passed between four
// streams through events must see every earlier increment (ordering), while independent chains
// run side by side; the legacy stream and non-blocking streams mix in; no hang, exact results.
#define __CHOREO_CPU__ 1
#include "choreo_cpu.h"

#include <vector>

#include "check.h"

using choreo::cpu::Thread;

static void add_one(const Thread* __choreo_thr, int* data, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] += 1;
}

static void add_one_fibres(const Thread* __choreo_thr, int* data, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  int v = i < n ? data[i] : 0;
  __syncthreads();
  if (i < n) data[i] = v + 1;
}

int main() {
  const int streams = 4, rounds = 40, n = 1000;
  cudaStream_t s[streams];
  for (int k = 0; k < streams; ++k) {
    CHECK_OK(cudaStreamCreateWithFlags(&s[k], k % 2 == 0 ? cudaStreamDefault
                                                          : cudaStreamNonBlocking));
  }
  std::vector<cudaEvent_t> events(rounds);
  for (auto& e : events) CHECK_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));

  // One chain hopping between the streams: round r runs on stream r % 4 after round r - 1.
  int* chain = nullptr;
  CHECK_OK(cudaMalloc(&chain, n * sizeof(int)));
  CHECK_OK(cudaMemset(chain, 0, n * sizeof(int)));
  CHECK_OK(cudaDeviceSynchronize());
  // Independent data per stream, incremented every round on its own stream.
  std::vector<int*> own(streams);
  for (auto& p : own) {
    CHECK_OK(cudaMalloc(&p, n * sizeof(int)));
    CHECK_OK(cudaMemset(p, 0, n * sizeof(int)));
  }
  CHECK_OK(cudaDeviceSynchronize());
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3((n + 127) / 128);
  c.blockDim = dim3(128);
  for (int r = 0; r < rounds; ++r) {
    cudaStream_t here = s[r % streams];
    if (r > 0) CHECK_OK(cudaStreamWaitEvent(here, events[r - 1], 0));
    c.stream = here;
    if (r % 3 == 0) {
      CHECK_OK(choreo::cpu::launch<add_one_fibres>(&c, choreo::cpu::kFibres, chain, n));
    } else {
      CHECK_OK(choreo::cpu::launch<add_one>(&c, 0, chain, n));
    }
    CHECK_OK(cudaEventRecord(events[r], here));
    for (int k = 0; k < streams; ++k) {
      c.stream = s[k];
      CHECK_OK(choreo::cpu::launch<add_one>(&c, 0, own[k], n));
    }
    if (r % 10 == 5) {
      // The legacy stream joins in now and then (it orders with the blocking streams).
      c.stream = nullptr;
      CHECK_OK(choreo::cpu::launch<add_one>(&c, 0, own[0], n));
      CHECK_OK(choreo::cpu::launch<add_one>(&c, 0, own[2], n));
    }
  }
  CHECK_OK(cudaEventSynchronize(events[rounds - 1]));
  std::vector<int> back(n);
  CHECK_OK(cudaMemcpyAsync(back.data(), chain, n * sizeof(int), cudaMemcpyDeviceToHost,
                           s[(rounds - 1) % streams]));
  CHECK_OK(cudaStreamSynchronize(s[(rounds - 1) % streams]));
  for (int v : back) CHECK(v == rounds);
  CHECK_OK(cudaDeviceSynchronize());
  for (int k = 0; k < streams; ++k) {
    CHECK_OK(cudaMemcpy(back.data(), own[k], n * sizeof(int), cudaMemcpyDeviceToHost));
    const int want = rounds + (k == 0 || k == 2 ? rounds / 10 : 0);
    for (int v : back) CHECK(v == want);
  }
  for (auto& e : events) CHECK_OK(cudaEventDestroy(e));
  for (auto& p : own) CHECK_OK(cudaFree(p));
  CHECK_OK(cudaFree(chain));
  for (auto& st : s) CHECK_OK(cudaStreamDestroy(st));
  std::printf("ok\n");
  return 0;
}
