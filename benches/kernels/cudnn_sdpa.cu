// cuDNN's scaled-dot-product attention forward (flash attention), loaded at run time with dlopen
// (nothing is linked, no cuDNN header is needed): the reference the Choreo attention forward is
// timed against (`src/cudnn_sdpa.rs` wraps these entries).
//
//   O = softmax(Q · Kᵀ · scale [+ causal mask]) · V    Q, K, V, O bf16 [B, 1, S, D] (BHSD,
//                                                       strides S·D, S·D, D, 1), f32 compute
//
// with B = batch · heads. The operation graph is built with cuDNN's backend (graph) API the way
// cudnn_frontend's SDPA node builds it, so that the heuristics pick the fused flash-attention
// engine:
//
//   S  = matmul(Q, Kᵀ)                 Kᵀ: K's tensor with the last two dims and strides swapped
//   S1 = pointwise MUL(S, scale)       scale: a by-value (host) f32 [1, 1, 1, 1] tensor
//   causal only:
//     r  = pointwise GEN_INDEX(S1, axis 2)     (int32)
//     c  = pointwise GEN_INDEX(S1, axis 3)     (int32)
//     m  = pointwise CMP_GE(r, c)              (boolean: keep the lower triangle and diagonal)
//     S1 = pointwise BINARY_SELECT(S1, masked, m)    (y = m ? S1 : masked; masked: a by-value
//          f32, -inf from cuDNN 9.10, the lowest float before, as cudnn_frontend picks it)
//   mx = reduction MAX(S1)  [B, 1, S, 1]
//   e  = pointwise EXP(pointwise SUB(S1, mx))
//   sm = reduction ADD(e)   [B, 1, S, 1]
//   st = pointwise ADD(mx, pointwise LOG(sm))   f32 [B, 1, S, 1]: the softmax stats, virtual
//        (inference) or an output (training form)
//   P  = pointwise DIV(e, sm)          (bf16)
//   O  = matmul(P, V)
//
// Every intermediate is a virtual f32 tensor (the index tensors int32, the mask boolean), but P,
// the second product's A, is bf16 (the i/o type), as the frontend sets it.
//
// Forms, in the order tried: where cudnn_frontend would use it (cuDNN >= 9.13.1; for causal
// attention >= 9.21, with the mask as a DIAGONAL_BAND_MASK subgraph), the single SDPA_FWD
// operation (the frontend's default "unified" implementation); the graph above with the stats
// virtual (inference, as the frontend's composite softmax builds it: without the LOG and ADD,
// cuDNN 9.28's heuristics offer no engine); the same graph with the stats as an output (the
// training form). The heuristics are asked in mode A for each form in turn, then in the
// fallback mode (functional, unfused engines: slow), and the first engine configuration whose
// execution plan finalizes is taken; the plan's name says which form, mode and engine. If that
// plan fails at its first execution, the next finalizable candidate is built and run instead (a
// few times). The plan, its workspace (cudaMalloc) and descriptors are cached per (B, S, D,
// causal): the timing loop only builds a variant pack and executes.
//
// The enum values below are copied from cuDNN 9's `cudnn_graph.h` (9.28.1; every value used
// exists, with the same number, since 9.0.0 unless said otherwise). Every entry returns 0 on
// success or non-zero with a message naming the call that failed, cuDNN's status string and
// cuDNN's last error message (cudnnGetLastErrorString).

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <link.h>  // dlinfo's link_map: the loaded cuDNN's full path

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

namespace {

using Handle = void*;  // cudnnHandle_t
using Desc = void*;    // cudnnBackendDescriptor_t

// cudnnStatus_t (cudnn_graph.h).
constexpr int kSuccess = 0;  // CUDNN_STATUS_SUCCESS

// cudnnDataType_t.
constexpr int kFloat = 0;      // CUDNN_DATA_FLOAT
constexpr int kInt32 = 4;      // CUDNN_DATA_INT32
constexpr int kBfloat16 = 9;   // CUDNN_DATA_BFLOAT16
constexpr int kBoolean = 11;   // CUDNN_DATA_BOOLEAN

// cudnnBackendAttributeType_t.
constexpr int kTypeHandle = 0;             // CUDNN_TYPE_HANDLE
constexpr int kTypeDataType = 1;           // CUDNN_TYPE_DATA_TYPE
constexpr int kTypeBoolean = 2;            // CUDNN_TYPE_BOOLEAN
constexpr int kTypeInt64 = 3;              // CUDNN_TYPE_INT64
constexpr int kTypeVoidPtr = 6;            // CUDNN_TYPE_VOID_PTR
constexpr int kTypeHeurMode = 8;           // CUDNN_TYPE_HEUR_MODE
constexpr int kTypePointwiseMode = 14;     // CUDNN_TYPE_POINTWISE_MODE
constexpr int kTypeBackendDescriptor = 15; // CUDNN_TYPE_BACKEND_DESCRIPTOR
constexpr int kTypeReductionOp = 18;       // CUDNN_TYPE_REDUCTION_OPERATOR_TYPE

// cudnnBackendDescriptorType_t.
constexpr int kPointwiseDesc = 0;           // CUDNN_BACKEND_POINTWISE_DESCRIPTOR
constexpr int kEngineDesc = 2;              // CUDNN_BACKEND_ENGINE_DESCRIPTOR
constexpr int kEngineCfgDesc = 3;           // CUDNN_BACKEND_ENGINECFG_DESCRIPTOR
constexpr int kEngineHeurDesc = 4;          // CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR
constexpr int kExecutionPlanDesc = 5;       // CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR
constexpr int kOpPointwiseDesc = 13;        // CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR
constexpr int kOpGraphDesc = 15;            // CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR
constexpr int kVariantPackDesc = 16;        // CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR
constexpr int kTensorDesc = 17;             // CUDNN_BACKEND_TENSOR_DESCRIPTOR
constexpr int kMatmulDesc = 18;             // CUDNN_BACKEND_MATMUL_DESCRIPTOR
constexpr int kOpMatmulDesc = 19;           // CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR
constexpr int kReductionDesc = 21;          // CUDNN_BACKEND_REDUCTION_DESCRIPTOR
constexpr int kOpReductionDesc = 22;        // CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR
constexpr int kOpSdpaFwdDesc = 41;          // CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR (9.13)
constexpr int kOpBandMaskDesc = 44;  // CUDNN_BACKEND_OPERATION_DIAGONAL_BAND_MASK_DESCRIPTOR (9.20)

// cudnnBackendAttributeName_t.
constexpr int kPointwiseMode = 0;              // CUDNN_ATTR_POINTWISE_MODE
constexpr int kPointwiseMathPrec = 1;          // CUDNN_ATTR_POINTWISE_MATH_PREC
constexpr int kPointwiseAxis = 9;              // CUDNN_ATTR_POINTWISE_AXIS
constexpr int kEngineHeurMode = 200;           // CUDNN_ATTR_ENGINEHEUR_MODE
constexpr int kEngineHeurOpGraph = 201;        // CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH
constexpr int kEngineHeurResults = 202;        // CUDNN_ATTR_ENGINEHEUR_RESULTS
constexpr int kEngineCfgEngine = 300;          // CUDNN_ATTR_ENGINECFG_ENGINE
constexpr int kPlanHandle = 400;               // CUDNN_ATTR_EXECUTION_PLAN_HANDLE
constexpr int kPlanEngineConfig = 401;         // CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG
constexpr int kPlanWorkspaceSize = 402;        // CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE
constexpr int kOpPointwisePwDesc = 750;        // CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR
constexpr int kOpPointwiseX = 751;             // CUDNN_ATTR_OPERATION_POINTWISE_XDESC
constexpr int kOpPointwiseB = 752;             // CUDNN_ATTR_OPERATION_POINTWISE_BDESC
constexpr int kOpPointwiseY = 753;             // CUDNN_ATTR_OPERATION_POINTWISE_YDESC
constexpr int kOpPointwiseT = 758;             // CUDNN_ATTR_OPERATION_POINTWISE_TDESC
constexpr int kOpGraphHandle = 800;            // CUDNN_ATTR_OPERATIONGRAPH_HANDLE
constexpr int kOpGraphOps = 801;               // CUDNN_ATTR_OPERATIONGRAPH_OPS
constexpr int kTensorAlignment = 900;          // CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT
constexpr int kTensorDataType = 901;           // CUDNN_ATTR_TENSOR_DATA_TYPE
constexpr int kTensorDims = 902;               // CUDNN_ATTR_TENSOR_DIMENSIONS
constexpr int kTensorStrides = 903;            // CUDNN_ATTR_TENSOR_STRIDES
constexpr int kTensorUid = 906;                // CUDNN_ATTR_TENSOR_UNIQUE_ID
constexpr int kTensorVirtual = 907;            // CUDNN_ATTR_TENSOR_IS_VIRTUAL
constexpr int kTensorByValue = 908;            // CUDNN_ATTR_TENSOR_IS_BY_VALUE
constexpr int kPackUids = 1000;                // CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS
constexpr int kPackPointers = 1001;            // CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS
constexpr int kPackWorkspace = 1003;           // CUDNN_ATTR_VARIANT_PACK_WORKSPACE
constexpr int kEngineGlobalIndex = 1301;       // CUDNN_ATTR_ENGINE_GLOBAL_INDEX
constexpr int kMatmulCompType = 1500;          // CUDNN_ATTR_MATMUL_COMP_TYPE
constexpr int kOpMatmulA = 1520;               // CUDNN_ATTR_OPERATION_MATMUL_ADESC
constexpr int kOpMatmulB = 1521;               // CUDNN_ATTR_OPERATION_MATMUL_BDESC
constexpr int kOpMatmulC = 1522;               // CUDNN_ATTR_OPERATION_MATMUL_CDESC
constexpr int kOpMatmulDesc_ = 1523;           // CUDNN_ATTR_OPERATION_MATMUL_DESC
constexpr int kReductionOperator = 1600;       // CUDNN_ATTR_REDUCTION_OPERATOR
constexpr int kReductionCompType = 1601;       // CUDNN_ATTR_REDUCTION_COMP_TYPE
constexpr int kOpReductionX = 1610;            // CUDNN_ATTR_OPERATION_REDUCTION_XDESC
constexpr int kOpReductionY = 1611;            // CUDNN_ATTR_OPERATION_REDUCTION_YDESC
constexpr int kOpReductionDesc_ = 1612;        // CUDNN_ATTR_OPERATION_REDUCTION_DESC
constexpr int kSdpaFwdQ = 2800;                // CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC (9.13)
constexpr int kSdpaFwdK = 2801;                // CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC (9.13)
constexpr int kSdpaFwdV = 2802;                // CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC (9.13)
constexpr int kSdpaFwdO = 2803;                // CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC (9.13)
constexpr int kSdpaFwdScale = 2805;            // CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC (9.13)
constexpr int kSdpaFwdSubgraph = 2811;         // CUDNN_ATTR_OPERATION_SDPA_FWD_SUBGRAPH (9.21)
constexpr int kSdpaFwdSubgraphIn = 2812;       // ..._SDPA_FWD_SUBGRAPH_INPUT_UID (9.21)
constexpr int kSdpaFwdSubgraphOut = 2813;      // ..._SDPA_FWD_SUBGRAPH_OUTPUT_UID (9.21)
constexpr int kBandMaskX = 3000;               // CUDNN_ATTR_OPERATION_DIAGONAL_BAND_MASK_XDESC (9.20)
constexpr int kBandMaskB = 3005;               // CUDNN_ATTR_OPERATION_DIAGONAL_BAND_MASK_BDESC (9.20)
constexpr int kBandMaskY = 3006;               // CUDNN_ATTR_OPERATION_DIAGONAL_BAND_MASK_YDESC (9.20)
constexpr int kBandMaskCmp = 3007;             // ..._DIAGONAL_BAND_MASK_COMPARISON_MODE (9.20)

// cudnnPointwiseMode_t.
constexpr int kPwAdd = 0;             // CUDNN_POINTWISE_ADD
constexpr int kPwMul = 1;             // CUDNN_POINTWISE_MUL
constexpr int kPwDiv = 6;             // CUDNN_POINTWISE_DIV
constexpr int kPwSub = 9;             // CUDNN_POINTWISE_SUB
constexpr int kPwExp = 13;            // CUDNN_POINTWISE_EXP
constexpr int kPwLog = 15;            // CUDNN_POINTWISE_LOG
constexpr int kPwCmpGe = 303;         // CUDNN_POINTWISE_CMP_GE
constexpr int kPwGenIndex = 501;      // CUDNN_POINTWISE_GEN_INDEX
constexpr int kPwBinarySelect = 601;  // CUDNN_POINTWISE_BINARY_SELECT

// cudnnReduceTensorOp_t.
constexpr int kReduceAdd = 0;  // CUDNN_REDUCE_TENSOR_ADD
constexpr int kReduceMax = 3;  // CUDNN_REDUCE_TENSOR_MAX

// cudnnBackendHeurMode_t.
constexpr int kHeurFallback = 2;  // CUDNN_HEUR_MODE_FALLBACK
constexpr int kHeurA = 3;         // CUDNN_HEUR_MODE_A

// The oldest cuDNN accepted (cudnnGetVersion: major·10000 + minor·100 + patch for cuDNN 9), the
// first whose SDPA_FWD operation cudnn_frontend uses (9.13.1), and the first where it takes a
// score subgraph (the causal mask as a DIAGONAL_BAND_MASK operation).
constexpr std::size_t kMinVersion = 90000;
constexpr std::size_t kSdpaOpVersion = 91301;
constexpr std::size_t kSdpaSubgraphVersion = 92100;

using GetVersionFn = std::size_t (*)();  // cudnnGetVersion, cudnnGetCudartVersion
using GetErrorStringFn = const char* (*)(int);
using GetLastErrorStringFn = void (*)(char*, std::size_t);
using CreateFn = int (*)(Handle*);
using DestroyFn = int (*)(Handle);
using SetStreamFn = int (*)(Handle, cudaStream_t);
using CreateDescFn = int (*)(int, Desc*);
using DestroyDescFn = int (*)(Desc);
using FinalizeFn = int (*)(Desc);
using SetAttrFn = int (*)(Desc, int, int, std::int64_t, const void*);
using GetAttrFn = int (*)(Desc, int, int, std::int64_t, std::int64_t*, void*);
using ExecuteFn = int (*)(Handle, Desc, Desc);

// The library, loaded once for the process (never unloaded).
struct Library {
  void* library = nullptr;
  std::string path;
  std::size_t version = 0;
  GetVersionFn get_version = nullptr;
  GetVersionFn get_cudart_version = nullptr;  // optional
  void* cublaslt = nullptr;                   // the cuBLASLt cuDNN's engines use, preloaded
  GetErrorStringFn error_string = nullptr;
  GetLastErrorStringFn last_error = nullptr;  // optional
  CreateFn create = nullptr;
  DestroyFn destroy = nullptr;
  SetStreamFn set_stream = nullptr;
  CreateDescFn create_desc = nullptr;
  DestroyDescFn destroy_desc = nullptr;
  FinalizeFn finalize = nullptr;
  SetAttrFn set_attr = nullptr;
  GetAttrFn get_attr = nullptr;
  ExecuteFn execute = nullptr;
};
Library lib;

void write(char* out, std::size_t len, const std::string& text) {
  if (out == nullptr || len == 0) return;
  std::snprintf(out, len, "%s", text.c_str());
}

// "<what>: <status string> (status N); cuDNN says: <last error>".
std::string status_text(const char* what, int status) {
  std::string text = what;
  text += ": ";
  const char* name = lib.error_string != nullptr ? lib.error_string(status) : nullptr;
  text += name != nullptr ? name : "?";
  text += " (status " + std::to_string(status) + ")";
  if (lib.last_error != nullptr) {
    char last[1024] = "";
    lib.last_error(last, sizeof last);
    if (last[0] != '\0') {
      text += "; cuDNN says: ";
      text += last;
    }
  }
  return text;
}

std::string cuda_text(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

// Loads the library and its symbols once. Returns "" or why it failed.
std::string load_library() {
  if (lib.library != nullptr) return "";
  const char* env = std::getenv("CHOREO_CUDNN_LIB");
  const char* candidates[] = {
      env,
      "libcudnn.so.9",
      "libcudnn.so",
      "/usr/lib/x86_64-linux-gnu/libcudnn.so.9",
      "/usr/local/cuda/lib64/libcudnn.so.9",
      "/usr/local/cuda/lib/libcudnn.so.9",
      "/usr/local/cuda/targets/x86_64-linux/lib/libcudnn.so.9",
      "/usr/local/cudnn/lib/libcudnn.so.9",
      "/usr/local/cudnn/lib64/libcudnn.so.9",
      // PyTorch's pip copy (the cuBLASLt loader of kernels/cublaslt.cu looks in the same venv).
      "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
  };
  std::string tried;
  for (const char* name : candidates) {
    if (name == nullptr || *name == '\0') continue;
    void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      lib.library = handle;
      lib.path = name;
      break;
    }
    const char* why = dlerror();
    if (!tried.empty()) tried += "; ";
    tried += why != nullptr ? why : name;
    if (name == env) {
      // An explicit choice that does not load is an error, not a reason to look elsewhere.
      return "$CHOREO_CUDNN_LIB=" + std::string(env) + " does not load: " + tried;
    }
  }
  if (lib.library == nullptr)
    return "libcudnn.so.9 not found ($CHOREO_CUDNN_LIB names it; tried: " + tried + ")";
  struct link_map* map = nullptr;
  if (dlinfo(lib.library, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0')
    lib.path = map->l_name;
  struct Sym {
    const char* name;
    void** slot;
    bool required;
  };
  const Sym syms[] = {
      {"cudnnGetVersion", reinterpret_cast<void**>(&lib.get_version), true},
      {"cudnnGetCudartVersion", reinterpret_cast<void**>(&lib.get_cudart_version), false},
      {"cudnnGetErrorString", reinterpret_cast<void**>(&lib.error_string), true},
      {"cudnnGetLastErrorString", reinterpret_cast<void**>(&lib.last_error), false},
      {"cudnnCreate", reinterpret_cast<void**>(&lib.create), true},
      {"cudnnDestroy", reinterpret_cast<void**>(&lib.destroy), true},
      {"cudnnSetStream", reinterpret_cast<void**>(&lib.set_stream), true},
      {"cudnnBackendCreateDescriptor", reinterpret_cast<void**>(&lib.create_desc), true},
      {"cudnnBackendDestroyDescriptor", reinterpret_cast<void**>(&lib.destroy_desc), true},
      {"cudnnBackendFinalize", reinterpret_cast<void**>(&lib.finalize), true},
      {"cudnnBackendSetAttribute", reinterpret_cast<void**>(&lib.set_attr), true},
      {"cudnnBackendGetAttribute", reinterpret_cast<void**>(&lib.get_attr), true},
      {"cudnnBackendExecute", reinterpret_cast<void**>(&lib.execute), true},
  };
  for (const Sym& sym : syms) {
    *sym.slot = dlsym(lib.library, sym.name);
    if (*sym.slot == nullptr && sym.required) {
      const std::string why = lib.path + " has no " + sym.name + " (not cuDNN 9?)";
      dlclose(lib.library);
      lib = Library{};
      return why;
    }
  }
  lib.version = lib.get_version();
  if (lib.version < kMinVersion) {
    const std::string why = lib.path + " is cuDNN " + std::to_string(lib.version) +
                            " (cudnnGetVersion); the backend graph needs cuDNN 9";
    dlclose(lib.library);
    lib = Library{};
    return why;
  }
  // cuDNN's precompiled engines dlopen libcublasLt.so.<CUDA major> by name when the heuristics
  // first run, and abort the process (not an error status) when it is not found on the
  // loader's path. Load it first from the places the bench's cuBLASLt loader looks
  // (kernels/cublaslt.cu): a later dlopen of the same soname then finds it already loaded.
  const std::size_t cudart = lib.get_cudart_version != nullptr ? lib.get_cudart_version() : 0;
  const std::string major = cudart >= 1000 ? std::to_string(cudart / 1000) : "13";
  const std::string soname = "libcublasLt.so." + major;
  const char* lt_env = std::getenv("CHOREO_BENCH_CUBLASLT");
  const std::string dir = lib.path.substr(0, lib.path.rfind('/') + 1);
  const std::string lt_candidates[] = {
      lt_env != nullptr ? lt_env : "",
      soname,  // first: a copy already loaded (the gemm-fp8 section's) is reused, not doubled
      dir + soname,                        // next to cuDNN
      dir + "../../cublas/lib/" + soname,  // pip layouts (cuDNN's own RUNPATH)
      dir + "../../cu" + major + "/lib/" + soname,
      "/usr/local/cuda/lib64/" + soname,
      "/usr/local/cuda/targets/x86_64-linux/lib/" + soname,
      "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu" + major + "/lib/" + soname,
      "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib/" + soname,
  };
  for (const std::string& name : lt_candidates) {
    if (name.empty()) continue;
    lib.cublaslt = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (lib.cublaslt != nullptr) break;
  }
  if (lib.cublaslt == nullptr) {
    const std::string why = lib.path + " (cuDNN " + std::to_string(lib.version) + ", CUDA " +
                            std::to_string(cudart) + ") needs " + soname +
                            ", which was not found ($CHOREO_BENCH_CUBLASLT names it); without "
                            "it cuDNN aborts the process in its heuristics";
    dlclose(lib.library);
    lib = Library{};
    return why;
  }
  return "";
}

// The problem of one plan.
struct Shape {
  std::int64_t b, s, d;
  bool causal;
  bool operator==(const Shape& o) const {
    return b == o.b && s == o.s && d == o.d && causal == o.causal;
  }
};

// Tensor unique ids of the non-virtual tensors (the variant pack's) and the first virtual one.
constexpr std::int64_t kUidQ = 1, kUidK = 2, kUidV = 3, kUidO = 4, kUidScale = 5, kUidNegInf = 6,
                       kUidStats = 7, kUidVirtual = 100;

// The graph forms tried, in order.
enum class Form { Inference, WithStats, SdpaOp };

const char* form_name(Form form) {
  switch (form) {
    case Form::Inference:
      return "fused graph, inference";
    case Form::WithStats:
      return "fused graph with stats";
    case Form::SdpaOp:
      return "SDPA_FWD operation";
  }
  return "?";
}

// Builds descriptors and owns them; the first failure is kept in `error` and turns every later
// call into a no-op, so a builder reads straight through and checks `ok()` at the end.
struct Builder {
  std::vector<Desc> owned;
  std::string error;
  std::int64_t next_uid = kUidVirtual;

  bool ok() const { return error.empty(); }

  void release() {
    for (auto it = owned.rbegin(); it != owned.rend(); ++it) lib.destroy_desc(*it);
    owned.clear();
  }

  bool check(int status, const std::string& what) {
    if (!ok()) return false;
    if (status != kSuccess) error = status_text(what.c_str(), status);
    return ok();
  }

  Desc make(int type, const std::string& what) {
    if (!ok()) return nullptr;
    Desc desc = nullptr;
    if (!check(lib.create_desc(type, &desc), "cudnnBackendCreateDescriptor(" + what + ")"))
      return nullptr;
    owned.push_back(desc);
    return desc;
  }

  void set(Desc desc, int name, int type, std::int64_t count, const void* value,
           const std::string& what) {
    if (!ok()) return;
    check(lib.set_attr(desc, name, type, count, value), "cudnnBackendSetAttribute(" + what + ")");
  }

  void set_desc(Desc desc, int name, Desc value, const std::string& what) {
    set(desc, name, kTypeBackendDescriptor, 1, &value, what);
  }

  void finalize(Desc desc, const std::string& what) {
    if (!ok()) return;
    check(lib.finalize(desc), "cudnnBackendFinalize(" + what + ")");
  }

  // A descriptor of `type` (`what` in messages) whose attributes `fill(desc)` sets, finalized.
  template <class Fill>
  Desc described(int type, const std::string& what, Fill fill) {
    Desc desc = make(type, what);
    fill(desc);
    finalize(desc, what);
    return desc;
  }

  // One operand of an operation: the descriptor `desc` as its attribute `name` (`suffix` in
  // messages); an `optional` one is left out when null.
  struct Operand {
    int name;
    Desc desc;
    const char* suffix;
    bool optional = false;
  };

  // The operation descriptor `type` called `name` with its `operands` in order, finalized.
  Desc operation(int type, const std::string& name, std::initializer_list<Operand> operands) {
    return described(type, "operation " + name, [&](Desc op) {
      for (const Operand& o : operands)
        if (!o.optional || o.desc != nullptr) set_desc(op, o.name, o.desc, name + o.suffix);
    });
  }

  // A 4-d tensor: `uid` 0 takes the next virtual id.
  Desc tensor(const std::string& name, std::int64_t uid, int dtype, const std::int64_t (&dims)[4],
              const std::int64_t (&strides)[4], bool is_virtual, bool by_value = false) {
    return described(kTensorDesc, "tensor " + name, [&](Desc t) {
      if (uid == 0) uid = next_uid++;
      const std::int64_t alignment = 16;
      set(t, kTensorUid, kTypeInt64, 1, &uid, name + ".UNIQUE_ID");
      set(t, kTensorDataType, kTypeDataType, 1, &dtype, name + ".DATA_TYPE");
      set(t, kTensorDims, kTypeInt64, 4, dims, name + ".DIMENSIONS");
      set(t, kTensorStrides, kTypeInt64, 4, strides, name + ".STRIDES");
      set(t, kTensorAlignment, kTypeInt64, 1, &alignment, name + ".BYTE_ALIGNMENT");
      set(t, kTensorVirtual, kTypeBoolean, 1, &is_virtual, name + ".IS_VIRTUAL");
      if (by_value) set(t, kTensorByValue, kTypeBoolean, 1, &by_value, name + ".IS_BY_VALUE");
    });
  }

  // y = mode(x[, b][, t]) with math precision `prec` (and `axis` for GEN_INDEX).
  Desc pointwise(const std::string& name, int mode, int prec, Desc x, Desc b, Desc t, Desc y,
                 std::int64_t axis = -1) {
    Desc pw = described(kPointwiseDesc, "pointwise " + name, [&](Desc d) {
      set(d, kPointwiseMode, kTypePointwiseMode, 1, &mode, name + ".MODE");
      set(d, kPointwiseMathPrec, kTypeDataType, 1, &prec, name + ".MATH_PREC");
      if (axis >= 0) set(d, kPointwiseAxis, kTypeInt64, 1, &axis, name + ".AXIS");
    });
    return operation(kOpPointwiseDesc, name,
                     {{kOpPointwisePwDesc, pw, ".PW_DESCRIPTOR"},
                      {kOpPointwiseX, x, ".XDESC"},
                      {kOpPointwiseB, b, ".BDESC", true},
                      {kOpPointwiseT, t, ".TDESC", true},
                      {kOpPointwiseY, y, ".YDESC"}});
  }

  Desc matmul(const std::string& name, Desc a, Desc b, Desc c) {
    const int comp = kFloat;
    Desc mm = described(kMatmulDesc, "matmul " + name, [&](Desc d) {
      set(d, kMatmulCompType, kTypeDataType, 1, &comp, name + ".COMP_TYPE");
    });
    return operation(kOpMatmulDesc, name,
                     {{kOpMatmulA, a, ".ADESC"},
                      {kOpMatmulB, b, ".BDESC"},
                      {kOpMatmulC, c, ".CDESC"},
                      {kOpMatmulDesc_, mm, ".DESC"}});
  }

  Desc reduction(const std::string& name, int reduce_op, Desc x, Desc y) {
    const int comp = kFloat;
    Desc red = described(kReductionDesc, "reduction " + name, [&](Desc d) {
      set(d, kReductionOperator, kTypeReductionOp, 1, &reduce_op, name + ".OPERATOR");
      set(d, kReductionCompType, kTypeDataType, 1, &comp, name + ".COMP_TYPE");
    });
    return operation(kOpReductionDesc, name,
                     {{kOpReductionX, x, ".XDESC"},
                      {kOpReductionY, y, ".YDESC"},
                      {kOpReductionDesc_, red, ".DESC"}});
  }
};

// A ready plan: its descriptors, execution plan, workspace and stats buffer.
struct Plan {
  Shape shape{};
  Builder built;  // owns every descriptor, the execution plan last
  Desc plan = nullptr;
  Form form = Form::Inference;
  void* workspace = nullptr;
  std::int64_t workspace_size = 0;
  void* stats = nullptr;  // f32 [B, 1, S, 1] for Form::WithStats
  std::string name;
  int skip = 0;           // finalizable candidates passed over to reach this one
  bool executed = false;  // ran once without an error

  void release() {
    built.release();
    plan = nullptr;
    if (workspace != nullptr) cudaFree(workspace);
    if (stats != nullptr) cudaFree(stats);
    workspace = stats = nullptr;
  }
};

struct Context {
  Handle handle = nullptr;
  std::vector<Plan*> plans;
};

// The operations of `form` for `shape` into `g`; returns them in graph order.
std::vector<Desc> build_ops(Builder& g, const Shape& shape, Form form) {
  const std::int64_t b = shape.b, s = shape.s, d = shape.d;
  const std::int64_t qdims[4] = {b, 1, s, d}, qstrides[4] = {s * d, s * d, d, 1};
  const std::int64_t ktdims[4] = {b, 1, d, s}, ktstrides[4] = {s * d, s * d, 1, d};
  const std::int64_t sdims[4] = {b, 1, s, s}, sstrides[4] = {s * s, s * s, s, 1};
  const std::int64_t rdims[4] = {b, 1, s, 1}, rstrides[4] = {s, s, 1, 1};
  const std::int64_t one[4] = {1, 1, 1, 1};
  std::vector<Desc> ops;
  Desc q = g.tensor("Q", kUidQ, kBfloat16, qdims, qstrides, false);
  Desc v = g.tensor("V", kUidV, kBfloat16, qdims, qstrides, false);
  Desc o = g.tensor("O", kUidO, kBfloat16, qdims, qstrides, false);
  Desc scale = g.tensor("scale", kUidScale, kFloat, one, one, false, true);
  if (form == Form::SdpaOp) {
    // K itself (not Kᵀ), as the operation takes it.
    Desc k = g.tensor("K", kUidK, kBfloat16, qdims, qstrides, false);
    Desc op = g.make(kOpSdpaFwdDesc, "operation sdpa_fwd");
    g.set_desc(op, kSdpaFwdQ, q, "sdpa_fwd.QDESC");
    g.set_desc(op, kSdpaFwdK, k, "sdpa_fwd.KDESC");
    g.set_desc(op, kSdpaFwdV, v, "sdpa_fwd.VDESC");
    g.set_desc(op, kSdpaFwdO, o, "sdpa_fwd.ODESC");
    g.set_desc(op, kSdpaFwdScale, scale, "sdpa_fwd.SCALEDESC");
    if (shape.causal) {
      // The causal mask as the frontend's UnifiedSDPANode gives it (cuDNN >= 9.21): a subgraph
      // on the scores, one DIAGONAL_BAND_MASK keeping row >= column (CMP_GE, no bounds or
      // sequence lengths: top-left aligned), masked to -inf; an operation graph of its own,
      // without a handle, named to the SDPA operation with its input and output tensor ids.
      const std::int64_t in_uid = g.next_uid;
      Desc in = g.tensor("subgraph input", 0, kFloat, sdims, sstrides, true);
      Desc neg = g.tensor("masked value", kUidNegInf, kFloat, one, one, false, true);
      const std::int64_t out_uid = g.next_uid;
      Desc out = g.tensor("subgraph output", 0, kFloat, sdims, sstrides, true);
      Desc mask = g.make(kOpBandMaskDesc, "operation causal diagonal_band_mask");
      g.set_desc(mask, kBandMaskX, in, "diagonal_band_mask.XDESC");
      g.set_desc(mask, kBandMaskB, neg, "diagonal_band_mask.BDESC");
      g.set_desc(mask, kBandMaskY, out, "diagonal_band_mask.YDESC");
      const int cmp = kPwCmpGe;
      g.set(mask, kBandMaskCmp, kTypePointwiseMode, 1, &cmp, "diagonal_band_mask.COMPARISON_MODE");
      g.finalize(mask, "operation causal diagonal_band_mask");
      Desc sub = g.make(kOpGraphDesc, "score subgraph");
      g.set(sub, kOpGraphOps, kTypeBackendDescriptor, 1, &mask, "score subgraph OPS");
      g.finalize(sub, "score subgraph");
      g.set_desc(op, kSdpaFwdSubgraph, sub, "sdpa_fwd.SUBGRAPH");
      g.set(op, kSdpaFwdSubgraphIn, kTypeInt64, 1, &in_uid, "sdpa_fwd.SUBGRAPH_INPUT_UID");
      g.set(op, kSdpaFwdSubgraphOut, kTypeInt64, 1, &out_uid, "sdpa_fwd.SUBGRAPH_OUTPUT_UID");
    }
    g.finalize(op, "operation sdpa_fwd");
    ops.push_back(op);
    return ops;
  }
  Desc kt = g.tensor("K^T", kUidK, kBfloat16, ktdims, ktstrides, false);
  Desc s0 = g.tensor("S", 0, kFloat, sdims, sstrides, true);
  ops.push_back(g.matmul("bmm1", q, kt, s0));
  Desc s1 = g.tensor("S*scale", 0, kFloat, sdims, sstrides, true);
  ops.push_back(g.pointwise("attn_scale", kPwMul, kFloat, s0, scale, nullptr, s1));
  if (shape.causal) {
    Desc neg = g.tensor("masked value", kUidNegInf, kFloat, one, one, false, true);
    Desc row = g.tensor("row_index", 0, kInt32, sdims, sstrides, true);
    Desc col = g.tensor("col_index", 0, kInt32, sdims, sstrides, true);
    Desc keep = g.tensor("row>=col", 0, kBoolean, sdims, sstrides, true);
    Desc masked = g.tensor("S_masked", 0, kFloat, sdims, sstrides, true);
    ops.push_back(g.pointwise("gen_row_index", kPwGenIndex, kInt32, s1, nullptr, nullptr, row, 2));
    ops.push_back(g.pointwise("gen_col_index", kPwGenIndex, kInt32, s1, nullptr, nullptr, col, 3));
    ops.push_back(g.pointwise("row_greater_than_col", kPwCmpGe, kBoolean, row, col, nullptr, keep));
    ops.push_back(g.pointwise("binary_select", kPwBinarySelect, kFloat, s1, neg, keep, masked));
    s1 = masked;
  }
  Desc mx = g.tensor("max", 0, kFloat, rdims, rstrides, true);
  ops.push_back(g.reduction("softmax_max", kReduceMax, s1, mx));
  Desc sub = g.tensor("S-max", 0, kFloat, sdims, sstrides, true);
  ops.push_back(g.pointwise("softmax_sub", kPwSub, kFloat, s1, mx, nullptr, sub));
  Desc e = g.tensor("exp", 0, kFloat, sdims, sstrides, true);
  ops.push_back(g.pointwise("softmax_exp", kPwExp, kFloat, sub, nullptr, nullptr, e));
  Desc sum = g.tensor("sum", 0, kFloat, rdims, rstrides, true);
  ops.push_back(g.reduction("softmax_sum", kReduceAdd, e, sum));
  {
    // The stats `max + log(sum)` are always part of the pattern (cudnn_frontend's composite
    // softmax adds them as a virtual tensor when they are not asked for, and the engines match
    // that graph); an output only in the training form.
    const bool is_output = form == Form::WithStats;
    Desc lg = g.tensor("log(sum)", 0, kFloat, rdims, rstrides, true);
    Desc stats = g.tensor("stats", is_output ? kUidStats : 0, kFloat, rdims, rstrides, !is_output);
    ops.push_back(g.pointwise("softmax_log", kPwLog, kFloat, sum, nullptr, nullptr, lg));
    ops.push_back(g.pointwise("softmax_stats", kPwAdd, kFloat, mx, lg, nullptr, stats));
  }
  // P, the second product's A, in the i/o type ("requirement by cudnn backend to take in bmm2
  // aType as i/o type", cudnn_frontend's SDPA node): the engine rounds P to bf16.
  Desc p = g.tensor("P", 0, kBfloat16, sdims, sstrides, true);
  ops.push_back(g.pointwise("softmax_div", kPwDiv, kFloat, e, sum, nullptr, p));
  ops.push_back(g.matmul("bmm2", p, v, o));
  return ops;
}

// Tries to make `plan` for `form` with the heuristics of mode `heur_mode`; on failure returns
// false and appends why to `why`.
bool try_form(Context& ctx, Plan& plan, Form form, int heur_mode, std::string& why,
              int& to_skip) {
  const char* mode_name = heur_mode == kHeurA ? "HEUR_MODE_A" : "HEUR_MODE_FALLBACK";
  const std::string attempt = std::string("[") + form_name(form) + ", " + mode_name + "] ";
  Builder& g = plan.built;
  std::vector<Desc> ops = build_ops(g, plan.shape, form);
  Desc graph = g.make(kOpGraphDesc, "operation graph");
  g.set(graph, kOpGraphOps, kTypeBackendDescriptor, static_cast<std::int64_t>(ops.size()),
        ops.data(), "OPERATIONGRAPH_OPS");
  g.set(graph, kOpGraphHandle, kTypeHandle, 1, &ctx.handle, "OPERATIONGRAPH_HANDLE");
  g.finalize(graph, "operation graph");
  Desc heur = g.make(kEngineHeurDesc, "engine heuristics");
  g.set_desc(heur, kEngineHeurOpGraph, graph, "ENGINEHEUR_OPERATION_GRAPH");
  g.set(heur, kEngineHeurMode, kTypeHeurMode, 1, &heur_mode, "ENGINEHEUR_MODE");
  g.finalize(heur, "engine heuristics");
  std::int64_t count = 0;
  if (g.ok())
    g.check(lib.get_attr(heur, kEngineHeurResults, kTypeBackendDescriptor, 0, &count, nullptr),
            "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS count)");
  if (!g.ok()) {
    why += attempt + g.error + "\n";
    return false;
  }
  if (count <= 0) {
    why += attempt + "the heuristics returned no engine configuration\n";
    return false;
  }
  std::vector<Desc> cfgs;
  for (std::int64_t i = 0; i < count; ++i) cfgs.push_back(g.make(kEngineCfgDesc, "engine config"));
  std::int64_t got = 0;
  if (g.ok())
    g.check(lib.get_attr(heur, kEngineHeurResults, kTypeBackendDescriptor, count, &got,
                         cfgs.data()),
            "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS)");
  if (!g.ok()) {
    why += attempt + g.error + "\n";
    return false;
  }
  std::string refused;
  for (std::int64_t i = 0; i < got; ++i) {
    // The engine's global index, for the report (best effort).
    std::int64_t engine_index = -1;
    Desc engine = nullptr;
    if (lib.create_desc(kEngineDesc, &engine) == kSuccess) {
      std::int64_t n = 0;
      if (lib.get_attr(cfgs[i], kEngineCfgEngine, kTypeBackendDescriptor, 1, &n, &engine) ==
          kSuccess)
        lib.get_attr(engine, kEngineGlobalIndex, kTypeInt64, 1, &n, &engine_index);
      lib.destroy_desc(engine);
    }
    Desc exec = nullptr;
    int status = lib.create_desc(kExecutionPlanDesc, &exec);
    const std::string which = "config " + std::to_string(i) + " (engine " +
                              std::to_string(engine_index) + ")";
    if (status != kSuccess) {
      refused += "    " + which + ": " +
                 status_text("cudnnBackendCreateDescriptor(EXECUTION_PLAN)", status) + "\n";
      continue;
    }
    status = lib.set_attr(exec, kPlanHandle, kTypeHandle, 1, &ctx.handle);
    const char* step = "cudnnBackendSetAttribute(EXECUTION_PLAN_HANDLE)";
    if (status == kSuccess) {
      status = lib.set_attr(exec, kPlanEngineConfig, kTypeBackendDescriptor, 1, &cfgs[i]);
      step = "cudnnBackendSetAttribute(EXECUTION_PLAN_ENGINE_CONFIG)";
    }
    if (status == kSuccess) {
      status = lib.finalize(exec);
      step = "cudnnBackendFinalize(EXECUTION_PLAN)";
    }
    std::int64_t workspace = 0;
    if (status == kSuccess) {
      std::int64_t n = 0;
      status = lib.get_attr(exec, kPlanWorkspaceSize, kTypeInt64, 1, &n, &workspace);
      step = "cudnnBackendGetAttribute(EXECUTION_PLAN_WORKSPACE_SIZE)";
    }
    if (status != kSuccess) {
      refused += "    " + which + ": " + status_text(step, status) + "\n";
      lib.destroy_desc(exec);
      continue;
    }
    if (to_skip > 0) {
      // Finalized, but an earlier build of this shape failed to execute with it.
      --to_skip;
      refused += "    " + which + ": finalized, but failed at its first execution (above)\n";
      lib.destroy_desc(exec);
      continue;
    }
    g.owned.push_back(exec);
    if (!refused.empty()) why += attempt + "refused before the one taken:\n" + refused;
    plan.plan = exec;
    plan.form = form;
    plan.workspace_size = workspace;
    plan.name = "cuDNN " + std::to_string(lib.version / 10000) + "." +
                std::to_string(lib.version / 100 % 100) + "." + std::to_string(lib.version % 100) +
                " SDPA (" + form_name(form) + ", " + mode_name + " engine " +
                std::to_string(engine_index) + ")";
    return true;
  }
  why += attempt + "the heuristics gave " + std::to_string(got) +
         " engine configuration(s); none finalized:\n" + refused;
  return false;
}

// Makes the plan of `shape` (all forms and heuristics modes in turn); "" or why none worked.
// `plan.skip` finalizable candidates are passed over (they failed at execution before).
std::string make_plan(Context& ctx, Plan& plan, std::string why = "") {
  int to_skip = plan.skip;
  // The SDPA_FWD operation first where cudnn_frontend would use it (its default picks that
  // "unified" implementation over the composite graph whenever it supports the problem).
  std::vector<Form> forms;
  if (lib.version >= (plan.shape.causal ? kSdpaSubgraphVersion : kSdpaOpVersion))
    forms.push_back(Form::SdpaOp);
  forms.push_back(Form::Inference);
  forms.push_back(Form::WithStats);
  // Mode A for every form before the fallback mode: the fallback engines of a form cuDNN does
  // not fuse are slow, unfused ones, while another form may have a fused engine.
  for (int mode : {kHeurA, kHeurFallback}) {
    for (Form form : forms) {
      plan.built = Builder{};
      if (try_form(ctx, plan, form, mode, why, to_skip)) {
        if (plan.workspace_size > 0) {
          const cudaError_t e = cudaMalloc(&plan.workspace, plan.workspace_size);
          if (e != cudaSuccess) {
            plan.release();
            return why + cuda_text(("cudaMalloc of the " + std::to_string(plan.workspace_size) +
                                    "-byte cuDNN workspace")
                                       .c_str(),
                                   e);
          }
        }
        if (form == Form::WithStats) {
          const std::size_t bytes = sizeof(float) * plan.shape.b * plan.shape.s;
          const cudaError_t e = cudaMalloc(&plan.stats, bytes);
          if (e != cudaSuccess) {
            plan.release();
            return why + cuda_text("cudaMalloc of the softmax stats", e);
          }
        }
        // Once per shape, outside any timing: what was refused before this plan, so that one
        // run on the GPU machine shows why a later form or mode was taken.
        if (!why.empty())
          std::fprintf(stderr, "choreo-bench: cuDNN SDPA B=%lld S=%lld D=%lld%s: %s, after:\n%s",
                       static_cast<long long>(plan.shape.b), static_cast<long long>(plan.shape.s),
                       static_cast<long long>(plan.shape.d), plan.shape.causal ? " causal" : "",
                       plan.name.c_str(), why.c_str());
        return "";
      }
      plan.release();
    }
  }
  return "no cuDNN execution plan for SDPA B=" + std::to_string(plan.shape.b) +
         " S=" + std::to_string(plan.shape.s) + " D=" + std::to_string(plan.shape.d) +
         (plan.shape.causal ? " causal" : " non-causal") + " (cuDNN " +
         std::to_string(lib.version) + " from " + lib.path + "):\n" + why;
}

Plan* find_plan(Context& ctx, const Shape& shape, std::string& why) {
  for (Plan* plan : ctx.plans)
    if (plan->shape == shape) return plan;
  Plan* plan = new Plan;
  plan->shape = shape;
  why = make_plan(ctx, *plan);
  if (!why.empty()) {
    delete plan;
    return nullptr;
  }
  ctx.plans.push_back(plan);
  return plan;
}


// How many finalizable candidates a shape may pass over because they failed to execute.
constexpr int kMaxExecutionRetries = 4;

struct Buffers {
  const void* q;
  const void* k;
  const void* v;
  void* o;
};

// One execution of `plan` on `stream`: "" or which call failed and why.
std::string execute(Context& ctx, Plan& plan, cudaStream_t stream, Buffers io, float scale) {
  // The value of masked scores, as cudnn_frontend picks it: -inf from cuDNN 9.10, the lowest
  // float before ("older cuDNN version prefers lowest for softmax mask"). Causal rows always
  // keep their diagonal, so no row is all -inf.
  float masked = lib.version < 91000 ? std::numeric_limits<float>::lowest()
                                     : -std::numeric_limits<float>::infinity();
  std::int64_t uids[7] = {kUidQ, kUidK, kUidV, kUidO, kUidScale};
  void* ptrs[7] = {const_cast<void*>(io.q), const_cast<void*>(io.k), const_cast<void*>(io.v),
                   io.o, &scale};
  std::int64_t n = 5;
  if (plan.shape.causal) {
    uids[n] = kUidNegInf;
    ptrs[n++] = &masked;
  }
  if (plan.form == Form::WithStats) {
    uids[n] = kUidStats;
    ptrs[n++] = plan.stats;
  }
  Desc pack = nullptr;
  int status = lib.create_desc(kVariantPackDesc, &pack);
  const char* step = "cudnnBackendCreateDescriptor(VARIANT_PACK)";
  if (status == kSuccess) {
    status = lib.set_attr(pack, kPackUids, kTypeInt64, n, uids);
    step = "cudnnBackendSetAttribute(VARIANT_PACK_UNIQUE_IDS)";
  }
  if (status == kSuccess) {
    status = lib.set_attr(pack, kPackPointers, kTypeVoidPtr, n, ptrs);
    step = "cudnnBackendSetAttribute(VARIANT_PACK_DATA_POINTERS)";
  }
  if (status == kSuccess) {
    status = lib.set_attr(pack, kPackWorkspace, kTypeVoidPtr, 1, &plan.workspace);
    step = "cudnnBackendSetAttribute(VARIANT_PACK_WORKSPACE)";
  }
  if (status == kSuccess) {
    status = lib.finalize(pack);
    step = "cudnnBackendFinalize(VARIANT_PACK)";
  }
  if (status == kSuccess) {
    status = lib.set_stream(ctx.handle, stream);
    step = "cudnnSetStream";
  }
  if (status == kSuccess) {
    status = lib.execute(ctx.handle, plan.plan, pack);
    step = "cudnnBackendExecute";
  }
  std::string text;
  if (status != kSuccess) text = status_text(step, status) + " [" + plan.name + "]";
  if (pack != nullptr) lib.destroy_desc(pack);
  return text;
}

}  // namespace

extern "C" {

// Loads cuDNN (dlopen: `$CHOREO_CUDNN_LIB`, else libcudnn.so.9 from the loader's path, the usual
// install directories and PyTorch's pip copy) once, and creates a context with its own cuDNN
// handle in `*ctx`. `*version` gets cudnnGetVersion() (e.g. 92801 for 9.28.1). Returns 0, or 1
// when cuDNN is absent or too old, 2 when cudnnCreate failed; `err` (of `len` bytes) says why.
int sdpa_cudnn_create(void** ctx, std::size_t* version, char* err, std::size_t len) {
  *ctx = nullptr;
  static std::mutex loading;  // load_library fills the process-wide `lib` once
  std::string why;
  {
    const std::lock_guard<std::mutex> lock(loading);
    why = load_library();
  }
  if (!why.empty()) {
    write(err, len, why);
    return 1;
  }
  Handle handle = nullptr;
  const int status = lib.create(&handle);
  if (status != kSuccess) {
    write(err, len, status_text(("cudnnCreate (" + lib.path + ")").c_str(), status));
    return 2;
  }
  Context* context = new Context;
  context->handle = handle;
  *ctx = context;
  if (version != nullptr) *version = lib.version;
  return 0;
}

// Frees every plan (its workspace after the device is idle) and the handle.
void sdpa_cudnn_destroy(void* ctx) {
  if (ctx == nullptr) return;
  Context* context = static_cast<Context*>(ctx);
  cudaDeviceSynchronize();
  for (Plan* plan : context->plans) {
    plan->release();
    delete plan;
  }
  lib.destroy(context->handle);
  delete context;
}

// O = softmax(Q · Kᵀ · scale [+ causal mask]) · V on `stream` (not waited for): q, k, v, o
// device addresses of bf16 [b, s, d] contiguous. Builds and caches the plan on the first call
// of a shape. Returns 0, or 1 with `err` saying which call failed and why.
int sdpa_cudnn_forward(void* ctx, cudaStream_t stream, const void* q, const void* k, const void* v,
                       void* o, std::int64_t b, std::int64_t s, std::int64_t d, int causal,
                       float scale, char* err, std::size_t len) {
  Context* context = static_cast<Context*>(ctx);
  if (context == nullptr) {
    write(err, len, "cuDNN SDPA: no context");
    return 1;
  }
  std::string why;
  Plan* plan = find_plan(*context, Shape{b, s, d, causal != 0}, why);
  if (plan == nullptr) {
    write(err, len, why);
    return 1;
  }
  std::string failures;
  for (;;) {
    const std::string error = execute(*context, *plan, stream, {q, k, v, o}, scale);
    if (error.empty()) {
      if (!plan->executed && !failures.empty())
        std::fprintf(stderr, "choreo-bench: cuDNN SDPA: %s runs, after:\n%s", plan->name.c_str(),
                     failures.c_str());
      plan->executed = true;
      return 0;
    }
    // A plan that finalized may still refuse to run (a launch the engine cannot make on this
    // GPU): on its first execution, build the shape's next candidate and try that, a few times.
    failures += "  " + error + "\n";
    if (plan->executed || plan->skip >= kMaxExecutionRetries) {
      write(err, len, failures);
      return 1;
    }
    const Shape shape = plan->shape;
    const int skip = plan->skip + 1;
    plan->release();
    *plan = Plan{};
    plan->shape = shape;
    plan->skip = skip;
    why = make_plan(*context, *plan, "earlier candidates failed at execution:\n" + failures);
    if (!why.empty()) {
      // Leave no half-built plan in the cache.
      for (auto it = context->plans.begin(); it != context->plans.end(); ++it)
        if (*it == plan) {
          context->plans.erase(it);
          break;
        }
      delete plan;
      write(err, len, why);  // it starts with `failures`
      return 1;
    }
  }
}

// The description of the cached plan of a shape ("cuDNN 9.x.y SDPA (form, mode engine N)") into
// `out`; 0 when there is one, 1 when that shape has no plan yet.
int sdpa_cudnn_plan_name(void* ctx, std::int64_t b, std::int64_t s, std::int64_t d, int causal,
                         char* out, std::size_t len) {
  Context* context = static_cast<Context*>(ctx);
  if (context == nullptr) return 1;
  const Shape shape{b, s, d, causal != 0};
  for (Plan* plan : context->plans)
    if (plan->shape == shape) {
      write(out, len, plan->name);
      return 0;
    }
  return 1;
}

}  // extern "C"
