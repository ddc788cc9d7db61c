// Low-precision types against known bit patterns (the values CUDA's host conversions give):
// round to nearest even, subnormals, overflow (infinity for half/bf16; fp8 __NV_SATFINITE
// saturates, __NV_NOSAT gives NaN/infinity), NaN; and arithmetic through float.
#define __CHOREO_CPU__ 1
#include "choreo_cpu.h"

#include <cfloat>
#include <cmath>
#include <limits>

#include "check.h"

static unsigned h(float f) { return __half_as_ushort(__float2half(f)); }
static unsigned b(float f) { return __bfloat16_as_ushort(__float2bfloat16(f)); }
static unsigned e4(float f) { return __nv_fp8_e4m3(f).__x; }
static unsigned e5(float f) { return __nv_fp8_e5m2(f).__x; }
static float from_e4(unsigned bits) {
  __nv_fp8_e4m3 v;
  v.__x = static_cast<__nv_fp8_storage_t>(bits);
  return static_cast<float>(v);
}
static float from_e5(unsigned bits) {
  __nv_fp8_e5m2 v;
  v.__x = static_cast<__nv_fp8_storage_t>(bits);
  return static_cast<float>(v);
}

int main() {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();

  // binary16.
  CHECK(h(1.0f) == 0x3c00);
  CHECK(h(-2.0f) == 0xc000);
  CHECK(h(-0.0f) == 0x8000);
  CHECK(h(0.1f) == 0x2e66);
  CHECK(h(1.0f / 3.0f) == 0x3555);
  CHECK(h(65504.0f) == 0x7bff);
  CHECK(h(65519.0f) == 0x7bff);
  CHECK(h(65520.0f) == 0x7c00);  // the midpoint to 65536 rounds to even: infinity
  CHECK(h(1e10f) == 0x7c00);
  CHECK(h(-1e10f) == 0xfc00);
  CHECK(h(inf) == 0x7c00);
  CHECK(h(nan) == 0x7fff);
  CHECK(h(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);       // tie, even stays
  CHECK(h(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);   // tie, odd rounds up
  CHECK(h(std::ldexp(1.0f, -24)) == 0x0001);              // smallest subnormal
  CHECK(h(std::ldexp(1.0f, -25)) == 0x0000);              // half of it: tie to even 0
  CHECK(h(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(h(std::ldexp(3.0f, -25)) == 0x0002);              // 1.5 subnormal ulps: tie to 2
  CHECK(h(std::ldexp(1023.0f, -24)) == 0x03ff);           // largest subnormal
  CHECK(h(std::ldexp(1.0f, -14)) == 0x0400);              // smallest normal
  CHECK(__half_as_ushort(__double2half(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40))) ==
        0x3c01);  // one rounding from double
  CHECK(__half2float(__ushort_as_half(0x0001)) == std::ldexp(1.0f, -24));
  CHECK(__half2float(__ushort_as_half(0x7bff)) == 65504.0f);
  CHECK(__half2float(__ushort_as_half(0xfc00)) == -inf);
  CHECK(std::isnan(__half2float(__ushort_as_half(0x7e00))));
  CHECK(__half2float(__ushort_as_half(0x3555)) == 0.333251953125f);

  // bfloat16.
  CHECK(b(1.0f) == 0x3f80);
  CHECK(b(3.140625f) == 0x4049);
  CHECK(b(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);
  CHECK(b(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
  CHECK(b(1.0f + std::ldexp(1.0f, -23)) == 0x3f80);
  CHECK(b(FLT_MAX) == 0x7f80);
  CHECK(b(-inf) == 0xff80);
  CHECK(b(nan) == 0x7fff);
  CHECK(b(std::ldexp(1.0f, -133)) == 0x0001);
  CHECK(b(std::ldexp(1.0f, -149)) == 0x0000);
  CHECK(__bfloat162float(__ushort_as_bfloat16(0x4049)) == 3.140625f);

  // fp8 e4m3 (__NV_SATFINITE, what the constructor uses).
  CHECK(e4(1.0f) == 0x38);
  CHECK(e4(0.5f) == 0x30);
  CHECK(e4(-3.5f) == 0xc6);
  CHECK(e4(448.0f) == 0x7e);
  CHECK(e4(464.0f) == 0x7e);
  CHECK(e4(465.0f) == 0x7e);
  CHECK(e4(1e9f) == 0x7e);
  CHECK(e4(inf) == 0x7e);
  CHECK(e4(-inf) == 0xfe);
  CHECK(e4(nan) == 0x7f);
  CHECK(e4(std::ldexp(1.0f, -9)) == 0x01);
  CHECK(e4(std::ldexp(1.0f, -10)) == 0x00);
  CHECK(e4(std::ldexp(1.5f, -10)) == 0x01);
  CHECK(e4(std::ldexp(1.0f, -6)) == 0x08);
  CHECK(e4(1.0625f) == 0x38);  // tie, even stays
  CHECK(e4(1.1875f) == 0x3a);  // tie, odd rounds up
  CHECK(__nv_cvt_float_to_fp8(1e9f, __NV_NOSAT, __NV_E4M3) == 0x7f);
  CHECK(from_e4(0x7e) == 448.0f);
  CHECK(from_e4(0x01) == std::ldexp(1.0f, -9));
  CHECK(from_e4(0x08) == std::ldexp(1.0f, -6));
  CHECK(from_e4(0xc6) == -3.5f);
  CHECK(std::isnan(from_e4(0x7f)) && std::isnan(from_e4(0xff)));

  // fp8 e5m2.
  CHECK(e5(1.0f) == 0x3c);
  CHECK(e5(57344.0f) == 0x7b);
  CHECK(e5(61440.0f) == 0x7b);
  CHECK(e5(inf) == 0x7b);
  CHECK(e5(nan) == 0x7e);
  CHECK(e5(std::ldexp(1.0f, -16)) == 0x01);
  CHECK(e5(std::ldexp(1.0f, -17)) == 0x00);
  CHECK(e5(std::ldexp(1.5f, -16)) == 0x02);  // 1.5 subnormal ulps: tie to 2
  CHECK(__nv_cvt_float_to_fp8(1e9f, __NV_NOSAT, __NV_E5M2) == 0x7c);
  CHECK(from_e5(0x7b) == 57344.0f);
  CHECK(from_e5(0x7c) == inf);
  CHECK(std::isnan(from_e5(0x7e)));

  // Arithmetic and comparisons through float; conversions from integers.
  const __half x = 1.5f, y = 2.25f;
  CHECK(x + y == __half(3.75f));
  CHECK(y - x == __half(0.75f));
  CHECK(x * y == __half(3.375f));
  CHECK(x < y && !(y < x) && x != y);
  __half acc = 0;
  for (int i = 0; i < 10; ++i) acc += __half(1);
  CHECK(static_cast<float>(acc) == 10.0f);
  CHECK(__half2float(__hfma(x, y, __half(1.0f))) == 4.375f);
  const __nv_bfloat16 bx = 2, by = 3.0f;
  CHECK(static_cast<float>(bx * by) == 6.0f);
  CHECK(static_cast<float>(__nv_fp8_e4m3(3)) == 3.0f);
  CHECK(static_cast<int>(__nv_fp8_e4m3(-2.0f)) == -2);
  CHECK(static_cast<float>(__nv_fp8_e5m2(__half(0.25f))) == 0.25f);

  // A few intrinsics.
  CHECK(__saturatef(2.0f) == 1.0f && __saturatef(-1.0f) == 0.0f && __saturatef(nan) == 0.0f);
  CHECK(__popc(0xf0f0u) == 8 && __clz(1) == 31 && __ffs(8) == 4);
  CHECK(__brev(1u) == 0x80000000u);
  CHECK(__float_as_uint(1.0f) == 0x3f800000u && __int_as_float(0x40000000) == 2.0f);
  CHECK(rsqrtf(4.0f) == 0.5f && __fdividef(1.0f, 4.0f) == 0.25f);
  CHECK(min(3, 5u) == 3u && max(2.0f, 1.0f) == 2.0f && max(-1ll, 4ll) == 4ll);
  const long long c0 = clock64();
  CHECK(clock64() >= c0);
  std::printf("ok\n");
  return 0;
}
