// cuBLASLt, loaded at run time with dlopen (nothing is linked), for the `gemm-fp8` section of
// `choreo-bench gpu`: the fp8 product the Choreo `gemm_e4m3` (kernels/gemm.co) is timed
// against.
//
//   C[M, N] = A[M, K] · B[N, K]ᵀ   A, B e4m3 row-major (K-major), f32 accumulation, C bf16
//                                   row-major
//
// cuBLASLt is column-major, and on Hopper its fp8 GEMM takes only the "TN" form (op(A) = T,
// op(B) = N, both operands K-major). Our row-major C is the column-major Cᵀ [N, M] (ld N), and
// Cᵀ = B · Aᵀ: cuBLASLt's A is our B read as the column-major [K, N] (ld K) with op T, its B is
// our A read as the column-major [K, M] (ld K) with op N, its m = N, n = M, k = K. That is
// exactly the TN form, with no copy or transposition of the data.
//
// The descriptors use cuBLASLt's enum values (cublasLt.h of CUDA 12.x and 13.x; the header is
// not needed to build this file). Every entry returns 0 on success, a positive cublasStatus_t,
// a cudaError_t offset by kCudaBase, or a negative code explained by gemm_cublaslt_error.

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <library_types.h>  // cudaDataType (CUDA_R_8F_E4M3, CUDA_R_16BF, CUDA_R_32F)

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

using Handle = void*;
using Desc = void*;
using Layout = void*;
using Pref = void*;

struct Algo {
  std::uint64_t data[8];
};
struct HeuristicResult {
  Algo algo;
  std::size_t workspace_size;
  int state;
  float waves_count;
  int reserved[4];
};

using CreateFn = int (*)(Handle*);
using GetVersionFn = std::size_t (*)();
using DescCreateFn = int (*)(Desc*, int compute_type, cudaDataType scale_type);
using DescDestroyFn = int (*)(Desc);
using DescSetFn = int (*)(Desc, int attr, const void* buf, std::size_t size);
using LayoutCreateFn = int (*)(Layout*, cudaDataType type, std::uint64_t rows, std::uint64_t cols,
                               std::int64_t ld);
using LayoutDestroyFn = int (*)(Layout);
using PrefCreateFn = int (*)(Pref*);
using PrefDestroyFn = int (*)(Pref);
using PrefSetFn = int (*)(Pref, int attr, const void* buf, std::size_t size);
using HeuristicFn = int (*)(Handle, Desc, Layout, Layout, Layout, Layout, Pref, int,
                            HeuristicResult*, int*);
using MatmulFn = int (*)(Handle, Desc, const void* alpha, const void* a, Layout, const void* b,
                         Layout, const void* beta, const void* c, Layout, void* d, Layout,
                         const Algo*, void* workspace, std::size_t workspace_size, cudaStream_t);

// cublasComputeType_t, cublasOperation_t and the attribute enums (cublasLt.h).
constexpr int kCompute32F = 68;                 // CUBLAS_COMPUTE_32F
constexpr int kOpN = 0, kOpT = 1;               // CUBLAS_OP_N, CUBLAS_OP_T
constexpr int kDescTransA = 3;                  // CUBLASLT_MATMUL_DESC_TRANSA (int32)
constexpr int kDescTransB = 4;                  // CUBLASLT_MATMUL_DESC_TRANSB (int32)
constexpr int kDescAScale = 17;                 // CUBLASLT_MATMUL_DESC_A_SCALE_POINTER
constexpr int kDescBScale = 18;                 // CUBLASLT_MATMUL_DESC_B_SCALE_POINTER
constexpr int kDescFastAccum = 25;              // CUBLASLT_MATMUL_DESC_FAST_ACCUM (int8)
constexpr int kPrefMaxWorkspace = 1;            // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES (u64)
constexpr std::size_t kWorkspaceBytes = 32u << 20;

// Negative codes of the entries.
constexpr int kNotLoaded = -1;
constexpr int kNoAlgo = -2;
constexpr int kBadShape = -3;
// cudaError_t values are returned as kCudaBase + error (cublasStatus_t values are below 20).
constexpr int kCudaBase = 1000;

struct Lt {
  void* library = nullptr;
  Handle handle = nullptr;
  std::size_t version = 0;
  DescCreateFn desc_create = nullptr;
  DescDestroyFn desc_destroy = nullptr;
  DescSetFn desc_set = nullptr;
  LayoutCreateFn layout_create = nullptr;
  LayoutDestroyFn layout_destroy = nullptr;
  PrefCreateFn pref_create = nullptr;
  PrefDestroyFn pref_destroy = nullptr;
  PrefSetFn pref_set = nullptr;
  HeuristicFn heuristic = nullptr;
  MatmulFn matmul = nullptr;
  void* workspace = nullptr;
  float* one = nullptr;  // device 1.0f: the A and B scale factors fp8 takes
};
Lt lt;

// The descriptors and algorithm of one shape, kept for the next call with the same shape (the
// timing loop calls the same shape many times; the heuristic query stays out of it); one per
// accumulation mode, so that timing both modes interleaved does not re-plan each call.
struct Plan {
  int m = 0, n = 0, k = 0, fast_accum = -1;
  Desc desc = nullptr;
  Layout la = nullptr, lb = nullptr, lc = nullptr;
  Algo algo{};
  std::size_t workspace = 0;
};
Plan plans[2];

void drop_plan(Plan& plan) {
  if (plan.desc != nullptr) lt.desc_destroy(plan.desc);
  for (Layout l : {plan.la, plan.lb, plan.lc})
    if (l != nullptr) lt.layout_destroy(l);
  plan = Plan{};
}

// What the last failure was, for gemm_cublaslt_error.
char last_error[256] = "";

int fail(int code, const char* what, int status) {
  std::snprintf(last_error, sizeof last_error, "%s returned %d", what, status);
  return code;
}

#define LT_TRY(call, what)                          \
  do {                                              \
    const int lt_status_ = (call);                  \
    if (lt_status_ != 0) {                          \
      drop_plan(plan);                              \
      return fail(lt_status_, what, lt_status_);    \
    }                                               \
  } while (0)

int make_plan(int m, int n, int k, int fast_accum) {
  Plan& plan = plans[fast_accum];
  if (plan.desc != nullptr && plan.m == m && plan.n == n && plan.k == k &&
      plan.fast_accum == fast_accum)
    return 0;
  drop_plan(plan);
  plan.m = m, plan.n = n, plan.k = k, plan.fast_accum = fast_accum;
  LT_TRY(lt.desc_create(&plan.desc, kCompute32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const std::int32_t op_t = kOpT, op_n = kOpN;
  LT_TRY(lt.desc_set(plan.desc, kDescTransA, &op_t, sizeof op_t), "set TRANSA");
  LT_TRY(lt.desc_set(plan.desc, kDescTransB, &op_n, sizeof op_n), "set TRANSB");
  const float* one = lt.one;
  LT_TRY(lt.desc_set(plan.desc, kDescAScale, &one, sizeof one), "set A_SCALE_POINTER");
  LT_TRY(lt.desc_set(plan.desc, kDescBScale, &one, sizeof one), "set B_SCALE_POINTER");
  const std::int8_t fast = static_cast<std::int8_t>(fast_accum);
  LT_TRY(lt.desc_set(plan.desc, kDescFastAccum, &fast, sizeof fast), "set FAST_ACCUM");
  // Column-major: A_lt = our B as [K, N] (ld K), B_lt = our A as [K, M] (ld K), C/D = our C as
  // [N, M] (ld N).
  LT_TRY(lt.layout_create(&plan.la, CUDA_R_8F_E4M3, k, n, k), "layout of A");
  LT_TRY(lt.layout_create(&plan.lb, CUDA_R_8F_E4M3, k, m, k), "layout of B");
  LT_TRY(lt.layout_create(&plan.lc, CUDA_R_16BF, n, m, n), "layout of C");
  Pref pref = nullptr;
  LT_TRY(lt.pref_create(&pref), "cublasLtMatmulPreferenceCreate");
  const std::uint64_t bytes = kWorkspaceBytes;
  int status = lt.pref_set(pref, kPrefMaxWorkspace, &bytes, sizeof bytes);
  HeuristicResult result{};
  int found = 0;
  if (status == 0)
    status = lt.heuristic(lt.handle, plan.desc, plan.la, plan.lb, plan.lc, plan.lc, pref, 1,
                          &result, &found);
  lt.pref_destroy(pref);
  if (status != 0) {
    drop_plan(plan);
    return fail(status, "cublasLtMatmulAlgoGetHeuristic", status);
  }
  if (found == 0 || result.state != 0) {
    drop_plan(plan);
    std::snprintf(last_error, sizeof last_error,
                  "cublasLtMatmulAlgoGetHeuristic found no algorithm for e4m3 x e4m3 -> bf16 TN "
                  "%dx%dx%d (state %d)",
                  m, n, k, result.state);
    return kNoAlgo;
  }
  plan.algo = result.algo;
  plan.workspace = result.workspace_size;
  return 0;
}

}  // namespace

extern "C" {

// Loads cuBLASLt with dlopen (`$CHOREO_BENCH_CUBLASLT`, libcublasLt.so.13, libcublasLt.so,
// libcublasLt.so.12, the CUDA install, PyTorch's pip copy), creates a handle, a 32 MiB
// workspace and the device scale factor 1.0. Returns 0 when ready (`version` gets
// cublasLtGetVersion(), e.g. 130100), 1 when the library or a symbol was not found, 2 when
// cublasLtCreate failed, kCudaBase + a cudaError_t when the allocations failed.
int gemm_cublaslt_load(std::size_t* version) {
  if (lt.handle == nullptr) {
    const char* candidates[] = {std::getenv("CHOREO_BENCH_CUBLASLT"),
                                "libcublasLt.so.13",
                                "libcublasLt.so",
                                "libcublasLt.so.12",
                                "/usr/local/cuda/lib64/libcublasLt.so.13",
                                "/usr/local/cuda/lib64/libcublasLt.so",
                                "/usr/local/cuda/lib64/libcublasLt.so.12",
                                "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/"
                                "libcublasLt.so.13"};
    for (const char* name : candidates) {
      if (name == nullptr || *name == '\0') continue;
      lt.library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lt.library != nullptr) break;
    }
    if (lt.library == nullptr) return 1;
    const auto sym = [](const char* name) { return dlsym(lt.library, name); };
    const auto create = reinterpret_cast<CreateFn>(sym("cublasLtCreate"));
    const auto get_version = reinterpret_cast<GetVersionFn>(sym("cublasLtGetVersion"));
    lt.desc_create = reinterpret_cast<DescCreateFn>(sym("cublasLtMatmulDescCreate"));
    lt.desc_destroy = reinterpret_cast<DescDestroyFn>(sym("cublasLtMatmulDescDestroy"));
    lt.desc_set = reinterpret_cast<DescSetFn>(sym("cublasLtMatmulDescSetAttribute"));
    lt.layout_create = reinterpret_cast<LayoutCreateFn>(sym("cublasLtMatrixLayoutCreate"));
    lt.layout_destroy = reinterpret_cast<LayoutDestroyFn>(sym("cublasLtMatrixLayoutDestroy"));
    lt.pref_create = reinterpret_cast<PrefCreateFn>(sym("cublasLtMatmulPreferenceCreate"));
    lt.pref_destroy = reinterpret_cast<PrefDestroyFn>(sym("cublasLtMatmulPreferenceDestroy"));
    lt.pref_set = reinterpret_cast<PrefSetFn>(sym("cublasLtMatmulPreferenceSetAttribute"));
    lt.heuristic = reinterpret_cast<HeuristicFn>(sym("cublasLtMatmulAlgoGetHeuristic"));
    lt.matmul = reinterpret_cast<MatmulFn>(sym("cublasLtMatmul"));
    if (create == nullptr || lt.desc_create == nullptr || lt.desc_destroy == nullptr ||
        lt.desc_set == nullptr || lt.layout_create == nullptr || lt.layout_destroy == nullptr ||
        lt.pref_create == nullptr || lt.pref_destroy == nullptr || lt.pref_set == nullptr ||
        lt.heuristic == nullptr || lt.matmul == nullptr)
      return 1;
    cudaError_t e = cudaMalloc(&lt.workspace, kWorkspaceBytes);
    if (e != cudaSuccess) return kCudaBase + e;
    e = cudaMalloc(&lt.one, sizeof(float));
    if (e != cudaSuccess) return kCudaBase + e;
    const float one = 1.0f;
    e = cudaMemcpy(lt.one, &one, sizeof one, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return kCudaBase + e;
    if (create(&lt.handle) != 0) {
      lt.handle = nullptr;
      return 2;
    }
    if (get_version != nullptr) lt.version = get_version();
  }
  if (version != nullptr) *version = lt.version;
  return 0;
}

// C = A · Bᵀ with cublasLtMatmul on stream `s` (see the file's comment for the mapping): A
// e4m3 [m, k], B e4m3 [n, k], C bf16 [m, n], all row-major, alpha 1, beta 0, A and B scales
// 1.0, `fast_accum` 1 to accumulate in the tensor cores' f32 accumulators throughout (the
// algorithm of gemm_e4m3), 0 for cuBLASLt's default (partial sums promoted periodically). Not
// waited for. m, n, k must be multiples of 16 (cuBLASLt's fp8 alignment).
int gemm_cublaslt_fp8(cudaStream_t s, const void* a, const void* b, void* c, int m, int n, int k,
                      int fast_accum) {
  if (lt.handle == nullptr) return kNotLoaded;
  if (m <= 0 || n <= 0 || k <= 0 || m % 16 != 0 || n % 16 != 0 || k % 16 != 0) return kBadShape;
  const int mode = fast_accum != 0 ? 1 : 0;
  const int status = make_plan(m, n, k, mode);
  if (status != 0) return status;
  const Plan& plan = plans[mode];
  const float alpha = 1.0f, beta = 0.0f;
  const int run = lt.matmul(lt.handle, plan.desc, &alpha, b, plan.la, a, plan.lb, &beta, c,
                            plan.lc, c, plan.lc, &plan.algo, lt.workspace, plan.workspace, s);
  if (run != 0) return fail(run, "cublasLtMatmul", run);
  return 0;
}

// A message for a non-zero code of gemm_cublaslt_fp8 (nullptr for none).
const char* gemm_cublaslt_error(int code) {
  switch (code) {
    case 0:
      return nullptr;
    case kNotLoaded:
      return "cuBLASLt is not loaded";
    case kBadShape:
      return "unsupported shape for cuBLASLt fp8 (M, N, K must be positive multiples of 16)";
    default:
      if (code >= kCudaBase) return cudaGetErrorString(static_cast<cudaError_t>(code - kCudaBase));
      return last_error[0] != '\0' ? last_error : nullptr;
  }
}

}  // extern "C"
