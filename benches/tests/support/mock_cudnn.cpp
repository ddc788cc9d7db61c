// A mock libcudnn.so.9 for tests/cudnn_sdpa_mock.rs: the backend-API entries that
// kernels/cudnn_sdpa.cu uses, with just enough behaviour to drive its control flow without a
// GPU or cuDNN. Every descriptor is accepted and finalizes, except:
//
// - the heuristics always offer 3 engine configurations (engines 10, 11, 12);
// - the execution plan of configuration 0 refuses to finalize (CUDNN_STATUS_NOT_SUPPORTED);
// - the plan of configuration 1 finalizes but fails to execute (CUDNN_STATUS_EXECUTION_FAILED);
// - with $MOCK_CUDNN=nofinalize, no execution plan finalizes;
// - an execution whose variant pack is not the tensor ids 1, 2, ... n (n = 5, or 6 with the
//   causal mask's value) fails with CUDNN_STATUS_BAD_PARAM.
//
// Built by the test with the host C++ compiler; not part of the bench.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct Desc {
  int type;
  int config = -1;
  std::int64_t uids[16] = {};
  std::int64_t uid_count = 0;
};

bool mode(const char* name) {
  const char* value = std::getenv("MOCK_CUDNN");
  return value != nullptr && std::strcmp(value, name) == 0;
}

}  // namespace

extern "C" {

std::size_t cudnnGetVersion() { return 92801; }
std::size_t cudnnGetCudartVersion() { return 13000; }
const char* cudnnGetErrorString(int status) {
  switch (status) {
    case 0:
      return "CUDNN_STATUS_SUCCESS";
    case 2000:
      return "CUDNN_STATUS_BAD_PARAM";
    case 3000:
      return "CUDNN_STATUS_NOT_SUPPORTED";
    case 5000:
      return "CUDNN_STATUS_EXECUTION_FAILED";
  }
  return "CUDNN_STATUS_UNKNOWN";
}
void cudnnGetLastErrorString(char* message, std::size_t size) {
  std::snprintf(message, size, "mock cuDNN");
}
int cudnnCreate(void** handle) {
  *handle = std::malloc(8);
  return 0;
}
int cudnnDestroy(void* handle) {
  std::free(handle);
  return 0;
}
int cudnnSetStream(void*, void*) { return 0; }
int cudnnBackendCreateDescriptor(int type, void** desc) {
  *desc = new Desc{type};
  return 0;
}
int cudnnBackendDestroyDescriptor(void* desc) {
  delete static_cast<Desc*>(desc);
  return 0;
}
int cudnnBackendSetAttribute(void* desc, int name, int, std::int64_t count, const void* value) {
  Desc* d = static_cast<Desc*>(desc);
  if (name == 401)  // CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG
    d->config = static_cast<Desc*>(*static_cast<void* const*>(value))->config;
  if (name == 1000 && count <= 16) {  // CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS
    std::memcpy(d->uids, value, sizeof(std::int64_t) * count);
    d->uid_count = count;
  }
  return 0;
}
int cudnnBackendFinalize(void* desc) {
  Desc* d = static_cast<Desc*>(desc);
  if (d->type == 5 && (d->config == 0 || mode("nofinalize"))) return 3000;
  return 0;
}
int cudnnBackendGetAttribute(void* desc, int name, int, std::int64_t requested,
                             std::int64_t* count, void* out) {
  Desc* d = static_cast<Desc*>(desc);
  *count = 1;
  switch (name) {
    case 202: {  // CUDNN_ATTR_ENGINEHEUR_RESULTS
      *count = 3;
      void** configs = static_cast<void**>(out);
      for (int i = 0; i < 3 && i < requested; ++i) static_cast<Desc*>(configs[i])->config = i;
      return 0;
    }
    case 300:  // CUDNN_ATTR_ENGINECFG_ENGINE
      static_cast<Desc*>(*static_cast<void**>(out))->config = d->config;
      return 0;
    case 1301:  // CUDNN_ATTR_ENGINE_GLOBAL_INDEX
      *static_cast<std::int64_t*>(out) = 10 + d->config;
      return 0;
    case 402:  // CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE
      *static_cast<std::int64_t*>(out) = 0;
      return 0;
  }
  return 0;
}
int cudnnBackendExecute(void*, void* plan, void* pack) {
  const Desc* p = static_cast<const Desc*>(pack);
  if (p->uid_count != 5 && p->uid_count != 6) return 2000;
  for (std::int64_t i = 0; i < p->uid_count; ++i)
    if (p->uids[i] != i + 1) return 2000;
  return static_cast<Desc*>(plan)->config == 1 ? 5000 : 0;
}

}  // extern "C"
