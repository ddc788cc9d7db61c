// Streams: in-order execution, two streams overlapping for real, events with
// cudaStreamWaitEvent, the legacy default stream's ordering, non-blocking streams, memory.
#define __CHOREO_CPU__ 1
#include "choreo_cpu.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "check.h"

__constant__ float coefficients[4];

namespace {

std::atomic<int> flag{0};

// Spins (with a generous limit, so a broken runtime fails instead of hanging) until `flag`
// reaches the wanted value.
bool wait_flag(int wanted) {
  for (int i = 0; i < 20000; ++i) {
    if (flag.load() >= wanted) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

std::atomic<bool> overlap_seen{false};
void wait_for_b(void*) { overlap_seen = wait_flag(1); }
void set_flag(void*) { flag.store(1); }

std::vector<int> order;
void push(void* value) {
  order.push_back(static_cast<int>(reinterpret_cast<std::intptr_t>(value)));
}
void* tag(int v) { return reinterpret_cast<void*>(static_cast<std::intptr_t>(v)); }

std::atomic<int> released{0};
void block_until_released(void*) {
  for (int i = 0; i < 20000 && released.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

int main() {
  // Overlap: a host func on stream A waits for a flag that only a host func on stream B sets;
  // with serialised streams it would time out.
  cudaStream_t a, b;
  CHECK_OK(cudaStreamCreate(&a));
  CHECK_OK(cudaStreamCreate(&b));
  CHECK_OK(cudaLaunchHostFunc(a, wait_for_b, nullptr));
  CHECK_OK(cudaLaunchHostFunc(b, set_flag, nullptr));
  CHECK_OK(cudaStreamSynchronize(a));
  CHECK(overlap_seen.load());

  // In-order execution on one stream.
  for (int i = 0; i < 100; ++i) CHECK_OK(cudaLaunchHostFunc(a, push, tag(i)));
  CHECK_OK(cudaStreamSynchronize(a));
  CHECK(order.size() == 100);
  for (int i = 0; i < 100; ++i) CHECK(order[i] == i);

  // Events: b waits for a's event without blocking the host.
  order.clear();
  released = 0;
  cudaEvent_t e;
  CHECK_OK(cudaEventCreate(&e));
  CHECK_OK(cudaLaunchHostFunc(a, block_until_released, nullptr));
  CHECK_OK(cudaLaunchHostFunc(a, push, tag(1)));
  CHECK_OK(cudaEventRecord(e, a));
  CHECK_OK(cudaStreamWaitEvent(b, e, 0));
  CHECK_OK(cudaLaunchHostFunc(b, push, tag(2)));
  CHECK(cudaEventQuery(e) == cudaErrorNotReady);
  CHECK(cudaStreamQuery(b) == cudaErrorNotReady);
  released = 1;
  CHECK_OK(cudaStreamSynchronize(b));
  CHECK(order.size() == 2 && order[0] == 1 && order[1] == 2);
  CHECK_OK(cudaEventQuery(e));
  CHECK_OK(cudaEventSynchronize(e));

  // Timing.
  cudaEvent_t t0, t1;
  CHECK_OK(cudaEventCreate(&t0));
  CHECK_OK(cudaEventCreate(&t1));
  CHECK_OK(cudaEventRecord(t0, a));
  CHECK_OK(cudaEventRecord(t1, a));
  CHECK_OK(cudaEventSynchronize(t1));
  float ms = -1.0f;
  CHECK_OK(cudaEventElapsedTime(&ms, t0, t1));
  CHECK(ms >= 0.0f);
  cudaEvent_t untimed;
  CHECK_OK(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));
  CHECK_OK(cudaEventRecord(untimed, a));
  CHECK_OK(cudaEventSynchronize(untimed));
  CHECK(cudaEventElapsedTime(&ms, t0, untimed) == cudaErrorInvalidResourceHandle);
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);  // non-sticky: reported once
  CHECK_OK(cudaGetLastError());

  // The legacy default stream waits for earlier work of blocking streams, and later work of
  // blocking streams waits for it.
  order.clear();
  released = 0;
  CHECK_OK(cudaLaunchHostFunc(a, block_until_released, nullptr));
  CHECK_OK(cudaLaunchHostFunc(a, push, tag(1)));
  CHECK_OK(cudaLaunchHostFunc(nullptr, push, tag(2)));
  CHECK_OK(cudaLaunchHostFunc(b, push, tag(3)));
  released = 1;
  CHECK_OK(cudaDeviceSynchronize());
  CHECK(order.size() == 3 && order[0] == 1 && order[1] == 2 && order[2] == 3);

  // A non-blocking stream does not wait for the legacy stream.
  cudaStream_t nb;
  CHECK_OK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
  flag = 0;
  overlap_seen = false;
  CHECK_OK(cudaLaunchHostFunc(nullptr, wait_for_b, nullptr));
  CHECK_OK(cudaLaunchHostFunc(nb, set_flag, nullptr));
  CHECK_OK(cudaDeviceSynchronize());
  CHECK(overlap_seen.load());

  // Memory.
  const int n = 1000;
  int* d = nullptr;
  CHECK_OK(cudaMalloc(&d, n * sizeof(int)));
  CHECK(reinterpret_cast<std::uintptr_t>(d) % 256 == 0);
  std::size_t free0 = 0, total = 0;
  CHECK_OK(cudaMemGetInfo(&free0, &total));
  CHECK(free0 <= total);
  CHECK_OK(cudaMemset(d, 0, n * sizeof(int)));
  std::vector<int> host(n, 7), back(n, -1);
  CHECK_OK(cudaMemcpy(back.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int v : back) CHECK(v == 0);
  CHECK_OK(cudaMemcpyAsync(d, host.data(), n * sizeof(int), cudaMemcpyHostToDevice, a));
  CHECK_OK(cudaMemsetAsync(d, 0xff, sizeof(int), a));
  CHECK_OK(cudaMemcpyAsync(back.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost, a));
  CHECK_OK(cudaStreamSynchronize(a));
  CHECK(back[0] == -1 && back[1] == 7 && back[n - 1] == 7);
  CHECK_OK(cudaFree(d));
  std::size_t free1 = 0;
  CHECK_OK(cudaMemGetInfo(&free1, &total));
  CHECK(free1 >= free0);
  void* async_mem = nullptr;
  CHECK_OK(cudaMallocAsync(&async_mem, 4096, b));
  CHECK_OK(cudaFreeAsync(async_mem, b));
  float* pinned = nullptr;
  CHECK_OK(cudaMallocHost(&pinned, 64 * sizeof(float)));
  pinned[63] = 1.0f;
  CHECK_OK(cudaFreeHost(pinned));

  // Non-sticky argument errors.
  CHECK(cudaMemcpy(back.data(), d, 4, static_cast<cudaMemcpyKind>(17)) ==
        cudaErrorInvalidMemcpyDirection);
  CHECK(cudaPeekAtLastError() == cudaErrorInvalidMemcpyDirection);
  CHECK(cudaGetLastError() == cudaErrorInvalidMemcpyDirection);
  CHECK_OK(cudaGetLastError());
  CHECK(cudaSetDevice(1) == cudaErrorInvalidDevice);
  CHECK(cudaFree(reinterpret_cast<void*>(0x1000)) == cudaErrorInvalidValue);
  CHECK(cudaStreamDestroy(nullptr) == cudaErrorInvalidResourceHandle);
  CHECK_OK(cudaSetDevice(0));
  // A later success does not clear the last error; reading it does.
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
  CHECK_OK(cudaGetLastError());

  // Device queries.
  int count = 0, dev = -1, sms = 0, major = -1, optin = 0;
  CHECK_OK(cudaGetDeviceCount(&count));
  CHECK(count == 1);
  CHECK_OK(cudaGetDevice(&dev));
  CHECK(dev == 0);
  CHECK_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(sms == static_cast<int>(choreo_cpu_worker_count()) && sms >= 1);
  CHECK_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  CHECK(major == 0);
  CHECK_OK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  CHECK(optin == 227 * 1024);
  int version = 0;
  CHECK_OK(cudaRuntimeGetVersion(&version));
  CHECK(version >= 12000);
  CHECK(std::string(cudaGetErrorName(cudaErrorLaunchFailure)) == "cudaErrorLaunchFailure");
  cudaDeviceProp prop;
  CHECK_OK(cudaGetDeviceProperties(&prop, 0));
  CHECK(prop.multiProcessorCount == sms && prop.warpSize == 32 && prop.major == 0);
  CHECK(prop.sharedMemPerBlockOptin == 227 * 1024 && prop.totalGlobalMem > 0);

  // Symbols and the special stream handles.
  const float coef[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  CHECK_OK(cudaMemcpyToSymbol(coefficients, coef, sizeof coef));
  float coef_back[2] = {};
  CHECK_OK(cudaMemcpyFromSymbol(coef_back, coefficients, sizeof coef_back, 2 * sizeof(float)));
  CHECK(coefficients[1] == 2.0f && coef_back[0] == 3.0f && coef_back[1] == 4.0f);
  CHECK(cudaMemcpyToSymbol(coefficients, coef, sizeof coef, 4) == cudaErrorInvalidValue);
  order.clear();
  CHECK_OK(cudaLaunchHostFunc(cudaStreamPerThread, push, tag(1)));
  CHECK_OK(cudaLaunchHostFunc(cudaStreamLegacy, push, tag(2)));
  CHECK_OK(cudaStreamSynchronize(cudaStreamPerThread));
  CHECK(order.size() == 2 && order[0] == 1 && order[1] == 2);
  CHECK(cudaStreamDestroy(cudaStreamLegacy) == cudaErrorInvalidResourceHandle);
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);

  CHECK_OK(cudaEventDestroy(e));
  CHECK_OK(cudaEventDestroy(t0));
  CHECK_OK(cudaEventDestroy(t1));
  CHECK_OK(cudaEventDestroy(untimed));
  CHECK_OK(cudaStreamDestroy(a));
  CHECK_OK(cudaStreamDestroy(b));
  CHECK_OK(cudaStreamDestroy(nb));
  CHECK(cudaStreamSynchronize(a) == cudaErrorInvalidResourceHandle);
  std::printf("ok\n");
  return 0;
}
