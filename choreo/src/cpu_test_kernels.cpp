// CPU kernels for choreo's own tests, compiled with the CPU runtime by build.rs (they are a few
// hundred bytes; programs that do not call them do not keep them). They are written like the
// CPU dialect of generated code, against the include directory build.rs writes (so that it is
// known to be complete): the file starts as a generated one does, a kernel takes the runtime's
// Thread first, and it is launched with ::choreo::cpu::launch on a stream handle that the Rust
// side passes.
//
// - choreo_rs_test_fill: out[i] = value for i < len, over blocks of 64 threads (src/cpu_tests.rs
//   calls it the way a generated wrapper calls a CPU entry);
// - choreo_rs_test_trap: a kernel that traps, which leaves the sticky cudaErrorLaunchFailure
//   (tests/cpu_sticky_error.rs, a process of its own since the error is process-wide).
#define __CHOREO_CPU__ 1
#include "choreo.h"

#include <cstdint>

namespace {

void fill_kernel(const ::choreo::cpu::Thread* __choreo_thr, std::uint32_t* out, std::uint64_t len,
                 std::uint32_t value) {
  const std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < len) out[i] = value;
}

void trap_kernel(const ::choreo::cpu::Thread* __choreo_thr) { __trap(); }

}  // namespace

extern "C" int choreo_rs_test_fill(std::uint32_t* out, std::uint64_t len, std::uint32_t value,
                                   cudaStream_t stream) {
  if (len == 0) return 0;
  cudaLaunchConfig_t config{};
  config.blockDim = dim3(64);
  config.gridDim = dim3(static_cast<unsigned>((len + 63) / 64));
  config.stream = stream;
  return static_cast<int>(::choreo::cpu::launch<fill_kernel>(&config, 0u, out, len, value));
}

extern "C" int choreo_rs_test_trap(cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.blockDim = dim3(1);
  config.gridDim = dim3(1);
  config.stream = stream;
  return static_cast<int>(::choreo::cpu::launch<trap_kernel>(&config, 0u));
}
