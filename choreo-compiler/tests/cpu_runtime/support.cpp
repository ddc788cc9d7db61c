// The support library of generated code (src/emit/cuda/support.cuh) in CPU mode: call frames
// with device buffers on the private streams, the fill kernel, result copies, bounds records
// noted from a kernel, the cp.async helpers (a synchronous copy) and the math helpers.
#define __CHOREO_CPU__ 1
#include "choreo.h"
#define CHOREO_SUPPORT_NS __choreo_support_cpu_test
#include "../../src/emit/cuda/support.cuh"

#include "check.h"

using choreo::cpu::Thread;

static void bounded(const Thread* __choreo_thr, __choreo_bounds_record* record, float* out,
                    long long extent) {
  const long long i = static_cast<long long>(threadIdx.x) - 1;  // thread 0 is out of bounds
  if (__choreo_in_bounds(record, 3, 0, i, extent)) out[i] = 1.0f;
}

static void staged(const Thread* __choreo_thr, const float* in, float* out) {
  float* tile = reinterpret_cast<float*>(__choreo_thr->smem);
  __choreo_cp_async<16>(&tile[threadIdx.x * 4], &in[threadIdx.x * 4]);
  __choreo_cp_async_commit();
  __choreo_cp_async_wait(0);
  __syncthreads();
  const unsigned other = (threadIdx.x + 1) % blockDim.x;
  for (int j = 0; j < 4; ++j) out[threadIdx.x * 4 + j] = tile[other * 4 + j];
}

int main() {
  char message[256] = {};
  __choreo_frame frame(true, message, sizeof message);
  const std::uint64_t n = 10000;
  __choreo_buffer buf(frame);
  CHECK_OK(frame.alloc(&buf.ptr, n * sizeof(int)));
  CHECK_OK(__choreo_fill(frame, static_cast<int*>(buf.ptr), n, 7));
  std::vector<int> host(n);
  CHECK_OK(frame.to_host(host.data(), buf.ptr, n * sizeof(int)));
  for (int v : host) CHECK(v == 7);

  // A result copied in stream order after an asynchronous launch's stream.
  cudaStream_t s;
  CHECK_OK(cudaStreamCreate(&s));
  CHECK(frame.cuda(frame.track_async(s)));
  std::vector<int> result(n, 0);
  CHECK_OK(frame.copy_result(result.data(), buf.ptr, n * sizeof(int), true, s));
  CHECK(result[n - 1] == 7);
  CHECK_OK(frame.wait_async());

  // Bounds record noted by a kernel.
  void* record = nullptr;
  CHECK_OK(__choreo_bounds_alloc(frame, &record));
  __choreo_buffer out(frame);
  CHECK_OK(frame.alloc(&out.ptr, 4 * sizeof(float)));
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(1, 1, 1);
  c.blockDim = dim3(5, 1, 1);
  CHECK_OK(choreo::cpu::launch<bounded>(&c, 0, static_cast<__choreo_bounds_record*>(record),
                                        static_cast<float*>(out.ptr), 4));
  CHECK_OK(cudaDeviceSynchronize());
  const char* sites[] = {"a", "b", "c", "the store to out"};
  __choreo_bounds_check(frame, record, sites, 4);
  CHECK(frame.status() == -1);
  CHECK(std::string(frame.message()).find("the store to out") != std::string::npos);
  CHECK(std::string(frame.message()).find("index -1, extent 4") != std::string::npos);

  // cp.async helpers in a fibre kernel.
  float *din = nullptr, *dout = nullptr;
  CHECK_OK(cudaMalloc(&din, 128 * sizeof(float)));
  CHECK_OK(cudaMalloc(&dout, 128 * sizeof(float)));
  for (int i = 0; i < 128; ++i) din[i] = static_cast<float>(i);
  c.blockDim = dim3(32, 1, 1);
  c.dynamicSmemBytes = 128 * sizeof(float);
  CHECK_OK(choreo::cpu::launch<staged>(&c, choreo::cpu::kFibres, din, dout));
  CHECK_OK(cudaDeviceSynchronize());
  for (int t = 0; t < 32; ++t) {
    for (int j = 0; j < 4; ++j) {
      CHECK(dout[t * 4 + j] == static_cast<float>(((t + 1) % 32) * 4 + j));
    }
  }

  // Math helpers.
  CHECK(__choreo_rsqrt(4.0f) == 0.5f && __choreo_frcp_rn(2.0) == 0.5);
  CHECK(__choreo_imax(3, 9) == 9 && __choreo_alignup(13, 8) == 16);
  CHECK(__choreo_isfinite(1.0f) && !__choreo_isfinite(std::numeric_limits<double>::infinity()));
  CHECK(__choreo_sigmoid(0.0f) == 0.5f);
  CHECK(__choreo_f16_bits(__choreo_f16_from_bits(0x3c00)) == 0x3c00);

  CHECK_OK(cudaStreamDestroy(s));
  std::printf("ok\n");
  return 0;
}
