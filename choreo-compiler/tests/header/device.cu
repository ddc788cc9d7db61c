// The device side of choreo.h on a real GPU: conversions and operators in kernels, the
// single-thread predicates, device choreo_assert, timing(). Needs a CUDA device (sm_90a); without
// one the first CUDA call fails and the program aborts.
//
// Modes: "" runs the checks; "device-assert" runs a kernel whose choreo_assert fails, which must
// trap the kernel and make the host abort at the next synchronisation.
#include "choreo.h"

#include "check.h"

using namespace choreo;

__global__ void conversions(const f8_e4m3* a, const f6_e3m2* b, const f4_e2m1* c, float* out) {
  if (__CHOREO_BLOCK_SINGLE__ && blockIdx.x == 0) {
    out[0] = a[0] + a[1];              // fp8 operator+ yields float
    out[1] = a[0] * a[1];
    out[2] = to_f32(b[0] * b[1]);      // fp6 stays fp6
    out[3] = to_f32(c[0] + c[1]);      // fp4 stays fp4
    out[4] = to_f32(utils::from_f32<f16>(0.1f));
    out[5] = to_f32(utils::from_f32<bf16>(1.0f / 3.0f));
    out[6] = to_f32(tf32(1.0f + 3 * 0x1p-12f));
    out[7] = to_f32(static_cast<s4>(s4(7) + s4(1)));
    out[8] = to_f32(f8_ue4m3(0.3f));
  }
}

__global__ void count_single_threads(unsigned* block_single, unsigned* group_single) {
  if (__CHOREO_BLOCK_SINGLE__) atomicAdd(block_single, 1u);
  if (__CHOREO_GROUP_SINGLE__) atomicAdd(group_single, 1u);
}

__global__ void failing_assert(const int* value) {
  choreo_assert(*value == 0, "device value must be zero");  // DEVICE_ASSERT_LINE
}

__global__ void busy(float* x) { x[threadIdx.x] = x[threadIdx.x] * 0.5f + 1.0f; }

int main(int argc, char** argv) {
  const std::string mode = test_mode(argc, argv);
  if (mode == "device-assert") {
    int* value = nullptr;
    abend_true(cudaMalloc(&value, sizeof(int)));
    abend_true(cudaMemset(value, 1, sizeof(int)));
    failing_assert<<<1, 1>>>(value);
    abend_true(cudaDeviceSynchronize());
    std::printf("not reached\n");
    return 0;
  }
  if (!mode.empty()) {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }

  // Inputs built on the host, copied to the device through make_spanview'd device pointers.
  const f8_e4m3 a_host[2] = {f8_e4m3(1.5f), f8_e4m3(0.5f)};
  const f6_e3m2 b_host[2] = {f6_e3m2(3.0f), f6_e3m2(0.5f)};
  const f4_e2m1 c_host[2] = {f4_e2m1(1.5f), f4_e2m1(1.5f)};
  f8_e4m3* a = nullptr;
  f6_e3m2* b = nullptr;
  f4_e2m1* c = nullptr;
  float* out = nullptr;
  abend_true(cudaMalloc(&a, sizeof a_host));
  abend_true(cudaMalloc(&b, sizeof b_host));
  abend_true(cudaMalloc(&c, sizeof c_host));
  abend_true(cudaMalloc(&out, 9 * sizeof(float)));
  auto a_view = make_spanview<f8_e4m3, 1>(a, {2});
  abend_true(cudaMemcpy(a_view.data(), a_host, a_view.bytes(), cudaMemcpyHostToDevice));
  abend_true(cudaMemcpy(b, b_host, sizeof b_host, cudaMemcpyHostToDevice));
  abend_true(cudaMemcpy(c, c_host, sizeof c_host, cudaMemcpyHostToDevice));
  conversions<<<2, 64>>>(a, b, c, out);
  abend_true(cudaDeviceSynchronize());
  verify_device_status();
  auto got = make_spandata<float>(9);
  abend_true(cudaMemcpy(got.data(), out, got.bytes(), cudaMemcpyDeviceToHost));
  CHECK_EQ(got[0], 2.0f);
  CHECK_EQ(got[1], 0.75f);
  CHECK_EQ(got[2], 1.5f);
  CHECK_EQ(got[3], 3.0f);
  CHECK_EQ(got[4], 0.0999755859375f);
  CHECK_EQ(got[5], 0.333984375f);
  CHECK_EQ(got[6], 1.0f + 0x1p-10f);
  CHECK_EQ(got[7], -8.0f);
  CHECK_EQ(got[8], 0.3125f);

  // 3 blocks of 96 threads: 3 block leaders, 9 warp leaders.
  unsigned* counters = nullptr;
  abend_true(cudaMalloc(&counters, 2 * sizeof(unsigned)));
  abend_true(cudaMemset(counters, 0, 2 * sizeof(unsigned)));
  count_single_threads<<<3, 96>>>(counters, counters + 1);
  abend_true(cudaDeviceSynchronize());
  unsigned counts[2] = {0, 0};
  abend_true(cudaMemcpy(counts, counters, sizeof counts, cudaMemcpyDeviceToHost));
  CHECK_EQ(counts[0], 3u);
  CHECK_EQ(counts[1], 9u);

  // timing() runs warmup + repeat calls and reports a positive mean.
  float* x = nullptr;
  abend_true(cudaMalloc(&x, 256 * sizeof(float)));
  int calls = 0;
  TimerOption opt;
  CHECK_EQ(opt.warmup, 10);
  CHECK_EQ(opt.repeat, 100);
  CHECK(opt.sync);
  opt.warmup = 3;
  opt.repeat = 7;
  const double ms = timing(
      [&](float* p, int threads) {
        ++calls;
        busy<<<1, threads>>>(p);
      },
      opt, x, 256);
  CHECK_EQ(calls, 10);
  CHECK(ms > 0.0 && ms < 1000.0);
  verify_device_status();

  abend_true(cudaFree(a));
  abend_true(cudaFree(b));
  abend_true(cudaFree(c));
  abend_true(cudaFree(out));
  abend_true(cudaFree(counters));
  abend_true(cudaFree(x));
  std::printf("Test Passed\n");
  return 0;
}
