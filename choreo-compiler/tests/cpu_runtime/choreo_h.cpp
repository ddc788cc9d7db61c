// choreo.h in CPU mode (__CHOREO_CPU__): host code like the e2e programs' mains (make_spandata,
// fill_random, spanned views, copy_as_spanned, abend_true around runtime calls, timing) and a
// kernel using choreo's element types, launched the way the CPU emitter launches.
#define __CHOREO_CPU__ 1
#include "choreo.h"

#include "check.h"

using choreo::cpu::Thread;

static void scale(const Thread* __choreo_thr, const float* x, float* y, float k,
                  choreo::f16* h) {
  const unsigned r = blockIdx.x, c = threadIdx.x;
  y[r * blockDim.x + c] = x[r * blockDim.x + c] * k;
  if (__CHOREO_BLOCK_SINGLE__) h[r] = choreo::f32_to_f16(static_cast<float>(r) + 0.5f);
  choreo::choreo_assert(k > 0.0f, "k must be positive");  // holds: no trap
}

int main() {
  choreo::seed_random(101);
  auto x = choreo::make_spandata<choreo::f32>(8, 64);
  x.fill_random(-4.0f, 4.0f);
  auto x_before = choreo::copy_as_spanned(x.data(), x.shape());
  const float k = 1.75f;
  auto y = choreo::make_spandata<choreo::f32>(8, 64);
  auto halves = choreo::make_spandata<choreo::f16>(8);

  float *dx = nullptr, *dy = nullptr;
  choreo::f16* dh = nullptr;
  choreo::abend_true(cudaMalloc(&dx, x.bytes()));
  choreo::abend_true(cudaMalloc(&dy, y.bytes()));
  choreo::abend_true(cudaMalloc(&dh, halves.bytes()));
  choreo::abend_true(cudaMemcpy(dx, x.data(), x.bytes(), cudaMemcpyHostToDevice));
  cudaLaunchConfig_t launch = {};
  launch.gridDim = dim3(8, 1, 1);
  launch.blockDim = dim3(64, 1, 1);
  launch.stream = nullptr;
  choreo::abend_true(choreo::cpu::launch<scale>(&launch, 0, dx, dy, k, dh));
  choreo::abend_true(cudaDeviceSynchronize());
  choreo::verify_device_status();
  choreo::abend_true(cudaMemcpy(y.data(), dy, y.bytes(), cudaMemcpyDeviceToHost));
  choreo::abend_true(cudaMemcpy(halves.data(), dh, halves.bytes(), cudaMemcpyDeviceToHost));

  CHECK(y.shape()[0] == 8 && y.shape()[1] == 64);
  auto view = y.view();
  for (int r = 0; r < 8; ++r) {
    for (int c = 0; c < 64; ++c) {
      CHECK(y[r][c] == x_before[r][c] * k);
      CHECK(view[r][c] == y[r][c]);
      CHECK(x[r][c] >= -4.0f && x[r][c] <= 4.0f);
    }
    CHECK(choreo::to_f32(halves[r]) == static_cast<float>(r) + 0.5f);
  }

  // Element types and conversions of choreo.h.
  const choreo::f8_e4m3 e(2.5f);
  CHECK(choreo::to_f32(e) == 2.5f);
  CHECK(e + e == 5.0f);
  CHECK(choreo::utils::from_f32<choreo::bf16>(1.0f) == choreo::bf16(1.0f));
  const choreo::f8_ue4m3 ue(-3.0f);
  CHECK(static_cast<float>(ue) == 0.0f);
  // The narrow types of spec-tier3 §8 exist on the CPU too (choreo.h's own, one byte each).
  CHECK(static_cast<float>(choreo::f4_e2m1(2.5f)) == 2.0f);  // ties to the even code
  CHECK(static_cast<float>(choreo::f6_e3m2(100.0f)) == 28.0f);
  CHECK(static_cast<float>(choreo::f8_ue8m0(3.0f)) == 2.0f);
  CHECK(int(choreo::s4(9)) == -7 && choreo::s4(-1).storage == 0x0F);
  CHECK(int(choreo::bin1(4)) == 1);
  CHECK(sizeof(choreo::f6_e2m3) == 1 && sizeof(choreo::u6) == 1);
  const choreo::tf32 t(1.0f + 1.0f / 4096.0f);
  CHECK(static_cast<float>(t) == 1.0f);

  // timing() drives events and synchronisation.
  int calls = 0;
  choreo::TimerOption opt;
  opt.warmup = 1;
  opt.repeat = 3;
  const double ms = choreo::timing([&] { ++calls; }, opt);
  CHECK(calls == 4 && ms >= 0.0);

  choreo::abend_true(cudaFree(dx));
  choreo::abend_true(cudaFree(dy));
  choreo::abend_true(cudaFree(dh));
  std::printf("ok\n");
  return 0;
}
