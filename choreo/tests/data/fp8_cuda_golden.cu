// Generates fp8_cuda_golden.txt, the golden table of `choreo/tests/fp8.rs`: CUDA's own host
// conversions (cuda_fp8.hpp) between f32 and the fp8 types, on a fixed set of inputs. Host code
// only, so it needs nvcc but no GPU:
//
//   source ci/env.sh
//   nvcc -std=c++17 -o /tmp/fp8_cuda_golden choreo/tests/data/fp8_cuda_golden.cu
//   /tmp/fp8_cuda_golden > choreo/tests/data/fp8_cuda_golden.txt
//
// Lines (hexadecimal, no prefix):
//   `d CODE E4M3 E5M2`: the f32 bits of `float(x)` for the fp8 value x with bits CODE, in both
//   formats (CUDA's decoding, through __half);
//   `e F32 E4M3_SAT E4M3_NOSAT E5M2_SAT E5M2_NOSAT`: the codes of the f32 value with bits F32,
//   converted by __nv_cvt_float_to_fp8 with __NV_SATFINITE (what the constructors
//   __nv_fp8_e4m3(float) / __nv_fp8_e5m2(float) do) and with __NV_NOSAT.
#include <cuda_fp8.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <vector>

static float from_bits(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

static std::uint32_t to_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

static float decode(std::uint8_t code, __nv_fp8_interpretation_t format) {
  if (format == __NV_E4M3) {
    __nv_fp8_e4m3 value;
    value.__x = code;
    return static_cast<float>(value);
  }
  __nv_fp8_e5m2 value;
  value.__x = code;
  return static_cast<float>(value);
}

// xorshift32: a fixed sequence, so the table is reproducible.
static std::uint32_t next_random(std::uint32_t& state) {
  state ^= state << 13;
  state ^= state >> 17;
  state ^= state << 5;
  return state;
}

int main() {
  for (int code = 0; code < 256; ++code) {
    std::printf("d %02x %08x %08x\n", code, to_bits(decode(code, __NV_E4M3)),
                to_bits(decode(code, __NV_E5M2)));
  }

  std::vector<float> inputs;
  // Every value of both formats, and the midpoints between neighbouring codes with the floats
  // right next to them: where rounding decides.
  for (__nv_fp8_interpretation_t format : {__NV_E4M3, __NV_E5M2}) {
    for (int code = 0; code < 256; ++code) inputs.push_back(decode(code, format));
    for (int code = 0; code < 0x7f; ++code) {
      const float low = decode(code, format), high = decode(code + 1, format);
      if (!(low - low == 0.0f) || !(high - high == 0.0f)) continue;  // infinity or NaN
      const float midpoint = (low + high) / 2.0f;  // exact: few significant bits
      const std::uint32_t bits = to_bits(midpoint);
      for (float value : {midpoint, from_bits(bits + 1), from_bits(bits - 1)}) {
        inputs.push_back(value);
        inputs.push_back(-value);
      }
    }
  }
  // Around the largest finite values (448, 57344) and their overflow thresholds (464, 61440).
  for (std::uint32_t bits : {0x43e00000u, 0x43e80000u, 0x43e7ffffu, 0x43e80001u, 0x47600000u,
                             0x47700000u, 0x476fffffu, 0x47700001u}) {
    inputs.push_back(from_bits(bits));
    inputs.push_back(-from_bits(bits));
  }
  // Specials: zeros, infinities, NaNs (quiet, signalling, negative), f32 extremes and
  // subnormals.
  for (std::uint32_t bits :
       {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
        0x7f800001u, 0xff800001u, 0x7fffffffu, 0x7f7fffffu, 0xff7fffffu, 0x00800000u,
        0x80800000u, 0x00000001u, 0x80000001u, 0x007fffffu}) {
    inputs.push_back(from_bits(bits));
  }
  std::uint32_t state = 0x2545f491u;
  // Arbitrary bit patterns (mostly far outside both ranges) ...
  for (int i = 0; i < 256; ++i) inputs.push_back(from_bits(next_random(state)));
  // ... and uniform values inside the range of e4m3, of e5m2, and near the subnormals.
  for (float range : {500.0f, 65000.0f, 0.03125f}) {
    for (int i = 0; i < 256; ++i) {
      const float unit = static_cast<float>(next_random(state) >> 8) / 16777216.0f;  // [0, 1)
      inputs.push_back((2.0f * unit - 1.0f) * range);
    }
  }

  std::set<std::uint32_t> seen;
  for (float value : inputs) {
    if (!seen.insert(to_bits(value)).second) continue;
    const unsigned e4m3_sat = __nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E4M3);
    const unsigned e4m3_nosat = __nv_cvt_float_to_fp8(value, __NV_NOSAT, __NV_E4M3);
    const unsigned e5m2_sat = __nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E5M2);
    const unsigned e5m2_nosat = __nv_cvt_float_to_fp8(value, __NV_NOSAT, __NV_E5M2);
    // The constructors are what generated device and host code use.
    if (__nv_fp8_e4m3(value).__x != e4m3_sat || __nv_fp8_e5m2(value).__x != e5m2_sat) {
      std::fprintf(stderr, "constructor and __NV_SATFINITE differ for %08x\n", to_bits(value));
      return 1;
    }
    std::printf("e %08x %02x %02x %02x %02x\n", to_bits(value), e4m3_sat, e4m3_nosat, e5m2_sat,
                e5m2_nosat);
  }
  return 0;
}
