// Kernels in fibre mode: __syncthreads inside loops (a tiled transpose through shared memory,
// a block reduction), exited threads counting as arrived, __syncwarp with a mask, named
// barriers (a producer/consumer handoff), a cooperative grid barrier, barriers called from
// __device__ functions, and a CUDA-dialect kernel (cudaLaunchKernelEx) with static __shared__.
#define __CHOREO_CPU__ 1
#include "choreo_cpu.h"

#include <vector>

#include "check.h"

using choreo::cpu::kCooperative;
using choreo::cpu::kFibres;
using choreo::cpu::Thread;

constexpr int kTile = 32;
constexpr int kRows = 8;  // a block is kTile x kRows threads, each moving kTile / kRows rows

static void transpose(const Thread* __choreo_thr, const float* in, float* out, int w, int h) {
  float(*tile)[kTile + 1] = reinterpret_cast<float(*)[kTile + 1]>(__choreo_thr->smem);
  // Twice over, so that the barriers are reused within one launch.
  for (int round = 0; round < 2; ++round) {
    int x = blockIdx.x * kTile + threadIdx.x;
    int y = blockIdx.y * kTile + threadIdx.y;
    for (int j = 0; j < kTile; j += kRows) {
      if (x < w && y + j < h) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * w + x];
    }
    __syncthreads();
    x = blockIdx.y * kTile + threadIdx.x;
    y = blockIdx.x * kTile + threadIdx.y;
    for (int j = 0; j < kTile; j += kRows) {
      if (x < h && y + j < w) out[(y + j) * h + x] = tile[threadIdx.x][threadIdx.y + j] + round;
    }
    __syncthreads();
  }
}

// A __device__ function: the barrier macro reaches the current fibre through __choreo_thr.
__device__ void block_barrier() { __syncthreads(); }

static void reduce(const Thread* __choreo_thr, const int* in, int* out, int live_threads) {
  int* partial = reinterpret_cast<int*>(__choreo_thr->smem);
  const unsigned t = threadIdx.x;
  // Threads past live_threads exit at once; the barriers below still complete.
  if (static_cast<int>(t) >= live_threads) return;
  partial[t] = in[blockIdx.x * blockDim.x + t];
  block_barrier();
  for (unsigned stride = 1; stride < static_cast<unsigned>(live_threads); stride *= 2) {
    int v = 0;
    if (t % (2 * stride) == 0 && t + stride < static_cast<unsigned>(live_threads)) {
      v = partial[t + stride];
    }
    __syncthreads();
    partial[t] += v;
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

// Lanes 0..15 of warp 1 rotate values through shared memory, synchronised by __syncwarp with
// their mask only; the other threads never reach it.
static void warp_rotate(const Thread* __choreo_thr, int* out) {
  int* slots = reinterpret_cast<int*>(__choreo_thr->smem);
  const unsigned lane = threadIdx.x % 32;
  if (threadIdx.x / 32 != 1 || lane >= 16) return;
  for (int round = 0; round < 3; ++round) {
    slots[lane] = static_cast<int>(lane * 10 + round);
    __syncwarp(0x0000ffffu);
    const int got = slots[(lane + 1) % 16];
    __syncwarp(0x0000ffffu);
    out[round * 16 + lane] = got;
  }
}

// Named barriers (e2e 76): warp 0 produces and arrives at barrier 1, warp 1 waits there and
// consumes; then the other way round through barrier 2.
static void handoff(const Thread* __choreo_thr, int* out) {
  int* buf = reinterpret_cast<int*>(__choreo_thr->smem);
  const unsigned t = threadIdx.x;
  const unsigned lane = t % 32;
  if (t < 32) {
    buf[lane] = static_cast<int>(lane + 1);
    __choreo_thr->bar_arrive(1, 64);
    __choreo_thr->bar_sync(2, 64);
    out[32 + lane] = buf[32 + lane];
  } else {
    __choreo_thr->bar_sync(1, 64);
    out[lane] = buf[lane];
    buf[32 + lane] = static_cast<int>(100 + lane);
    __choreo_thr->bar_arrive(2, 64);
  }
}

// A cooperative grid: every block writes its part, the grid barrier, block 0 adds them up.
static void grid_sum(const Thread* __choreo_thr, const int* in, int* partial, int* total) {
  int* s = reinterpret_cast<int*>(__choreo_thr->smem);
  const unsigned t = threadIdx.x;
  s[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  if (t == 0) {
    int acc = 0;
    for (unsigned i = 0; i < blockDim.x; ++i) acc += s[i];
    partial[blockIdx.x] = acc;
  }
  cooperative_groups::this_grid().sync();
  if (blockIdx.x == 0 && t == 0) {
    int acc = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) acc += partial[b];
    *total = acc;
  }
  __choreo_thr->grid_sync();
}

// A kernel in the CUDA dialect (no Thread parameter), launched with cudaLaunchKernelEx: static
// __shared__ memory and barriers reach the thread through the global __choreo_thr.
__global__ void cuda_dialect_reverse(const int* in, int* out) {
  __shared__ int tile[128];
  const unsigned t = threadIdx.x;
  tile[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = tile[blockDim.x - 1 - t];
}

// Thread 0 spins on a flag that the block's last thread sets, with no barrier in between: the
// fence in the loop lets the other fibres run.
static void spin_on_flag(const Thread* __choreo_thr, int* out) {
  volatile int* flag = reinterpret_cast<volatile int*>(__choreo_thr->smem);
  if (threadIdx.x == 0) {
    *flag = 0;
    __syncthreads();
    while (*flag == 0) __threadfence_block();
    out[blockIdx.x] = *flag;
  } else {
    __syncthreads();
    if (threadIdx.x == blockDim.x - 1) *flag = 7;
  }
}

// Warp shuffles and votes: a butterfly sum, a down-shift reduction, a ballot.
static void warp_ops(const Thread* __choreo_thr, int* out) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  int v = lane + 1;
  for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
  float f = static_cast<float>(lane);
  for (unsigned d = 16; d > 0; d /= 2) f += __shfl_down_sync(0xffffffffu, f, d);
  const int from3 = __shfl_sync(0xffffffffu, lane * 10, 3);
  const int up = __shfl_up_sync(0xffffffffu, lane, 1);
  const unsigned odd = __ballot_sync(0xffffffffu, lane % 2);
  const int all = __all_sync(0xffffffffu, lane < 32);
  const int any = __any_sync(0xffffffffu, lane == 31);
  int* o = out + (blockIdx.x * 2 + warp) * 8;
  if (lane == 0) {
    o[0] = v;
    o[1] = static_cast<int>(f);
    o[2] = static_cast<int>(odd == 0xaaaaaaaau);
    o[3] = all;
    o[4] = any;
    o[5] = static_cast<int>((__activemask() & 1u) != 0);  // which others are active varies
  }
  if (lane == 5) o[6] = from3;
  if (lane == 0) o[7] = up;  // lane 0 keeps its own value
}

// __syncthreads_count/_and/_or, several in a row (the slots alternate), with early exits.
static void predicates(const Thread* __choreo_thr, int* out) {
  const unsigned t = threadIdx.x;
  if (t >= 100) return;  // 100 live threads of 128
  int* o = out + blockIdx.x * 6;
  for (int round = 0; round < 3; ++round) {
    const int odd = __syncthreads_count(t % 2);
    const int all_small = __syncthreads_and(t < 100);
    const int any_big = __syncthreads_or(t == 99);
    const int none = __syncthreads_or(0);
    const int not_all = __syncthreads_and(t != 5);
    __syncthreads();
    if (t == 0 && round == 2) {
      o[0] = odd;
      o[1] = all_small;
      o[2] = any_big;
      o[3] = none;
      o[4] = not_all;
      o[5] = __syncthreads_count(1) + 1000;  // only thread 0: the others have not arrived...
    } else if (round == 2) {
      __syncthreads_count(1);  // ...so they arrive here
    }
  }
}

static cudaLaunchConfig_t config(dim3 grid, dim3 block, std::size_t smem) {
  cudaLaunchConfig_t c = {};
  c.gridDim = grid;
  c.blockDim = block;
  c.dynamicSmemBytes = smem;
  return c;
}

int main() {
  // Transpose of a 100 x 70 matrix (partial tiles at the edges).
  const int w = 100, h = 70;
  std::vector<float> host(w * h);
  for (int i = 0; i < w * h; ++i) host[i] = static_cast<float>(i);
  float *in = nullptr, *out = nullptr;
  CHECK_OK(cudaMalloc(&in, w * h * sizeof(float)));
  CHECK_OK(cudaMalloc(&out, w * h * sizeof(float)));
  CHECK_OK(cudaMemcpy(in, host.data(), w * h * sizeof(float), cudaMemcpyHostToDevice));
  cudaLaunchConfig_t c = config(dim3((w + kTile - 1) / kTile, (h + kTile - 1) / kTile),
                                dim3(kTile, kRows), kTile * (kTile + 1) * sizeof(float));
  CHECK_OK(choreo::cpu::launch<transpose>(&c, kFibres, in, out, w, h));
  std::vector<float> back(w * h);
  CHECK_OK(cudaMemcpy(back.data(), out, w * h * sizeof(float), cudaMemcpyDeviceToHost));
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) CHECK(back[x * h + y] == host[y * w + x] + 1.0f);
  }

  // Block reductions, 1024 threads, some of them exiting early.
  const int blocks = 6, threads = 1024;
  std::vector<int> values(blocks * threads);
  for (int i = 0; i < blocks * threads; ++i) values[i] = i % 97;
  int *vin = nullptr, *vout = nullptr;
  CHECK_OK(cudaMalloc(&vin, values.size() * sizeof(int)));
  CHECK_OK(cudaMalloc(&vout, blocks * sizeof(int)));
  CHECK_OK(cudaMemcpy(vin, values.data(), values.size() * sizeof(int), cudaMemcpyHostToDevice));
  for (int live : {threads, 700}) {
    c = config(dim3(blocks), dim3(threads), threads * sizeof(int));
    CHECK_OK(choreo::cpu::launch<reduce>(&c, kFibres, vin, vout, live));
    CHECK_OK(cudaDeviceSynchronize());
    for (int b = 0; b < blocks; ++b) {
      int want = 0;
      for (int t = 0; t < live; ++t) want += values[b * threads + t];
      CHECK(vout[b] == want);
    }
  }

  // __syncwarp with a mask.
  int* rot = nullptr;
  CHECK_OK(cudaMalloc(&rot, 48 * sizeof(int)));
  c = config(dim3(2), dim3(96), 16 * sizeof(int));
  CHECK_OK(choreo::cpu::launch<warp_rotate>(&c, kFibres, rot));
  CHECK_OK(cudaDeviceSynchronize());
  for (int round = 0; round < 3; ++round) {
    for (int lane = 0; lane < 16; ++lane) {
      CHECK(rot[round * 16 + lane] == ((lane + 1) % 16) * 10 + round);
    }
  }

  // Named barriers.
  int* ho = nullptr;
  CHECK_OK(cudaMalloc(&ho, 64 * sizeof(int)));
  c = config(dim3(3), dim3(64), 64 * sizeof(int));
  CHECK_OK(choreo::cpu::launch<handoff>(&c, kFibres, ho));
  CHECK_OK(cudaDeviceSynchronize());
  for (int lane = 0; lane < 32; ++lane) {
    CHECK(ho[lane] == lane + 1);
    CHECK(ho[32 + lane] == 100 + lane);
  }

  // Cooperative grid barrier, through the launch attribute and through the flag.
  const int gblocks = 8, gthreads = 64;
  std::vector<int> gin(gblocks * gthreads);
  for (int i = 0; i < gblocks * gthreads; ++i) gin[i] = i;
  int *gdev = nullptr, *partial = nullptr, *total = nullptr;
  CHECK_OK(cudaMalloc(&gdev, gin.size() * sizeof(int)));
  CHECK_OK(cudaMalloc(&partial, gblocks * sizeof(int)));
  CHECK_OK(cudaMalloc(&total, sizeof(int)));
  CHECK_OK(cudaMemcpy(gdev, gin.data(), gin.size() * sizeof(int), cudaMemcpyHostToDevice));
  c = config(dim3(gblocks), dim3(gthreads), gthreads * sizeof(int));
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  c.attrs = &attr;
  c.numAttrs = 1;
  CHECK_OK(choreo::cpu::launch<grid_sum>(&c, kFibres, gdev, partial, total));
  CHECK_OK(cudaDeviceSynchronize());
  const int want = gblocks * gthreads * (gblocks * gthreads - 1) / 2;
  CHECK(*total == want);
  *total = 0;
  c.attrs = nullptr;
  c.numAttrs = 0;
  CHECK_OK(choreo::cpu::launch<grid_sum>(&c, kFibres | kCooperative, gdev, partial, total));
  CHECK_OK(cudaDeviceSynchronize());
  CHECK(*total == want);

  // Warp shuffles and votes.
  int* wo = nullptr;
  CHECK_OK(cudaMalloc(&wo, 2 * 2 * 8 * sizeof(int)));
  c = config(dim3(2), dim3(64), 0);
  CHECK_OK(choreo::cpu::launch<warp_ops>(&c, kFibres, wo));
  CHECK_OK(cudaDeviceSynchronize());
  for (int w = 0; w < 4; ++w) {
    const int* o = wo + w * 8;
    CHECK(o[0] == 32 * 33 / 2);
    CHECK(o[1] == 31 * 32 / 2);
    CHECK(o[2] == 1 && o[3] == 1 && o[4] == 1 && o[5] == 1);
    CHECK(o[6] == 30);
    CHECK(o[7] == 0);
  }

  // Barriers with predicates.
  int* po = nullptr;
  CHECK_OK(cudaMalloc(&po, 2 * 6 * sizeof(int)));
  c = config(dim3(2), dim3(128), 0);
  CHECK_OK(choreo::cpu::launch<predicates>(&c, kFibres, po));
  CHECK_OK(cudaDeviceSynchronize());
  for (int b = 0; b < 2; ++b) {
    const int* o = po + b * 6;
    CHECK(o[0] == 50 && o[1] == 1 && o[2] == 1 && o[3] == 0 && o[4] == 0 && o[5] == 1100);
  }

  // Spinning with a fence.
  int* spun = nullptr;
  CHECK_OK(cudaMalloc(&spun, 3 * sizeof(int)));
  c = config(dim3(3), dim3(64), sizeof(int));
  CHECK_OK(choreo::cpu::launch<spin_on_flag>(&c, kFibres, spun));
  CHECK_OK(cudaDeviceSynchronize());
  CHECK(spun[0] == 7 && spun[1] == 7 && spun[2] == 7);

  // The CUDA dialect.
  int *rin = nullptr, *rout = nullptr;
  CHECK_OK(cudaMalloc(&rin, 4 * 128 * sizeof(int)));
  CHECK_OK(cudaMalloc(&rout, 4 * 128 * sizeof(int)));
  for (int i = 0; i < 4 * 128; ++i) rin[i] = i;
  c = config(dim3(4), dim3(128), 0);
  CHECK_OK(cudaLaunchKernelEx(&c, cuda_dialect_reverse, rin, rout));
  CHECK_OK(cudaDeviceSynchronize());
  for (int b = 0; b < 4; ++b) {
    for (int t = 0; t < 128; ++t) CHECK(rout[b * 128 + t] == b * 128 + 127 - t);
  }

  std::printf("ok\n");
  return 0;
}
