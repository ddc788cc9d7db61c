// The CUDA environment check and verify_device_status (runtime-abi §8). Without a usable device
// both must end the process with a clear message; with one they must pass.
//
// Modes: "probe" prints "devices: <n>" (0 when the CUDA runtime cannot reach a device); "env"
// runs __choreo_check_cuda_environment__ twice; "env-sm-too-high" runs it requiring a compute
// capability no device has; "verify" runs verify_device_status.
//
// Generated code defines the required SM as a number; a variable lets one program test both.
static int required_sm = 90;
#define __CHOREO_ENABLE_CUDA_RUNTIME_ENV_CHECK__
#define __CHOREO_REQUIRED_GPU_DEVICE_SM__ required_sm
#include "choreo.h"

#include "check.h"

int main(int argc, char** argv) {
  const std::string mode = test_mode(argc, argv);
  if (mode == "probe") {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    std::printf("devices: %d\n", count);
    return 0;
  }
  if (mode == "env-sm-too-high") {
    required_sm = 990;
    choreo::__choreo_check_cuda_environment__();
    std::printf("environment ok\n");
    return 0;
  }
  if (mode == "env") {
    choreo::__choreo_check_cuda_environment__();
    choreo::__choreo_check_cuda_environment__();  // the second call does nothing
    std::printf("environment ok\n");
    return 0;
  }
  if (mode == "verify") {
    choreo::verify_device_status();
    std::printf("device status ok\n");
    return 0;
  }
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
