// The check of the `attention` section: a plain CUDA attention forward for selected query
// rows, written independently of `attention.co` for correctness, not speed (no tensor cores,
// f32 throughout, two passes over the keys with the exact row maximum). Entries return a
// cudaError_t as int (0 = success) and never throw.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace {

constexpr int kHeadDim = 128;
constexpr int kThreads = 128;

// Block r computes row rows[r] = (bh, i) of O: q, k, v, bf16 [BH, S, 128]; out f32 [R, 128];
// scores: f32 scratch [R, S]. Thread t first computes the scores of keys t, t + 128, … (those
// the row may see: all, or j <= i when causal), then the row's maximum and sum, then
// out[r][t] = Σ_j exp(s_j - max) v[j][t] / sum.
__global__ void attention_rows(const __nv_bfloat16* __restrict__ q,
                               const __nv_bfloat16* __restrict__ k,
                               const __nv_bfloat16* __restrict__ v, const int* __restrict__ rows,
                               float* __restrict__ scores, float* __restrict__ out, int s,
                               int causal, float scale) {
  __shared__ float qrow[kHeadDim];
  __shared__ float part[kThreads];
  const int r = blockIdx.x, t = threadIdx.x;
  const int bh = rows[2 * r], i = rows[2 * r + 1];
  const long long head = static_cast<long long>(bh) * s * kHeadDim;
  qrow[t] = __bfloat162float(q[head + static_cast<long long>(i) * kHeadDim + t]);
  __syncthreads();
  const int keys = causal ? i + 1 : s;
  float* sr = scores + static_cast<long long>(r) * s;
  float mx = -INFINITY;
  for (int j = t; j < keys; j += kThreads) {
    const __nv_bfloat16* kj = k + head + static_cast<long long>(j) * kHeadDim;
    float acc = 0.0f;
    for (int c = 0; c < kHeadDim; ++c) acc += qrow[c] * __bfloat162float(kj[c]);
    sr[j] = acc * scale;
    mx = fmaxf(mx, acc * scale);
  }
  part[t] = mx;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (t < w) part[t] = fmaxf(part[t], part[t + w]);
    __syncthreads();
  }
  mx = part[0];
  __syncthreads();
  float sum = 0.0f;
  for (int j = t; j < keys; j += kThreads) {
    const float e = expf(sr[j] - mx);
    sr[j] = e;
    sum += e;
  }
  part[t] = sum;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (t < w) part[t] += part[t + w];
    __syncthreads();
  }
  sum = part[0];
  // Every thread's writes of sr are visible after the barriers above.
  float acc = 0.0f;
  for (int j = 0; j < keys; ++j)
    acc += sr[j] * __bfloat162float(v[head + static_cast<long long>(j) * kHeadDim + t]);
  out[static_cast<long long>(r) * kHeadDim + t] = acc / sum;
}

}  // namespace

extern "C" {

// The reference rows: `rows` (device, 2·n ints: bh, i), `scores` (device, n·s floats),
// `out` (device, n·128 floats); head dimension 128.
int ref_attention_rows(cudaStream_t stream, const void* q, const void* k, const void* v,
                       const int* rows, int n, float* scores, float* out, int s, int causal,
                       float scale) {
  if (n <= 0) return cudaSuccess;
  attention_rows<<<n, kThreads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k),
      static_cast<const __nv_bfloat16*>(v), rows, scores, out, s, causal, scale);
  return cudaGetLastError();
}

}  // extern "C"
