// A hand-written CUDA file compiled into the same library as the .co kernels. `choreo.h` is
// found through the generated folder, `hand.h` next to this file.
#include "choreo.h"
#include "hand.h"

__global__ void hand_fill(float* out, float value) { out[threadIdx.x] = value; }

// Host code only, so the fixture binary can call it on a machine without a GPU.
extern "C" int hand_add(int a, int b) { return a + b + HAND_BONUS; }
