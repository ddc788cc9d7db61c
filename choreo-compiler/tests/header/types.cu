// Element types, their aliases, conversions and operators (runtime-abi §9.1, §9.8).
#include "choreo.h"

#include "check.h"

using namespace choreo;  // as the generated prologue does

#define SAME(a, b) static_assert(std::is_same<a, b>::value, #a " is not " #b)

// --- the type map ---------------------------------------------------------------------------
SAME(s8, std::int8_t);
SAME(s16, std::int16_t);
SAME(s32, std::int32_t);
SAME(s64, std::int64_t);
SAME(u8, std::uint8_t);
SAME(u16, std::uint16_t);
SAME(u32, std::uint32_t);
SAME(u64, std::uint64_t);
SAME(f32, float);
SAME(f64, double);
SAME(f16, __half);
SAME(choreo::half, __half);
SAME(bf16, __nv_bfloat16);
SAME(bfp16, __nv_bfloat16);
SAME(bfloat16, __nv_bfloat16);
SAME(f8_e4m3, __nv_fp8_e4m3);
SAME(f8_e5m2, __nv_fp8_e5m2);
SAME(f8, __nv_fp8_e4m3);
// The narrow types of spec-tier3 §8 are choreo.h's own (not CUDA's fp6/fp4/e8m0 types).
static_assert(std::is_same<f6_e2m3, ocp_float<2, 3, 1>>::value, "f6_e2m3");
static_assert(std::is_same<f6_e3m2, ocp_float<3, 2, 3>>::value, "f6_e3m2");
static_assert(std::is_same<f4_e2m1, ocp_float<2, 1, 1>>::value, "f4_e2m1");
SAME(stream_t, cudaStream_t);
SAME(f8_e4m3_t, f8_e4m3);
SAME(f8_e5m2_t, f8_e5m2);
SAME(f6_e2m3_t, f6_e2m3);
SAME(f6_e3m2_t, f6_e3m2);
SAME(f4_e2m1_t, f4_e2m1);
SAME(f16_t, f16);
SAME(bf16_t, bf16);
SAME(s32_t, s32);
SAME(u4_t, u4);
// fp6/fp4 are also exported at global scope.
SAME(::f6_e2m3, choreo::f6_e2m3);
SAME(::f6_e3m2, choreo::f6_e3m2);
SAME(::f4_e2m1, choreo::f4_e2m1);
static_assert(!std::is_same<bin1, u1>::value, "bin1 and u1 are distinct types");

// Every element type is stored in its natural size; sub-byte types take one byte each.
static_assert(sizeof(f16) == 2 && sizeof(bf16) == 2 && sizeof(tf32) == 4, "16/32-bit sizes");
static_assert(sizeof(f8_e4m3) == 1 && sizeof(f8_e5m2) == 1 && sizeof(f8_ue4m3) == 1 &&
                  sizeof(f8_ue8m0) == 1,
              "fp8 sizes");
static_assert(sizeof(f6_e2m3) == 1 && sizeof(f6_e3m2) == 1 && sizeof(f4_e2m1) == 1, "fp6/fp4");
static_assert(sizeof(bin1) == 1 && sizeof(u1) == 1 && sizeof(u2) == 1 && sizeof(u4) == 1 &&
                  sizeof(u6) == 1 && sizeof(s2) == 1 && sizeof(s4) == 1 && sizeof(s6) == 1,
              "sub-byte sizes");
static_assert(std::is_trivially_copyable<s4>::value && std::is_trivially_copyable<tf32>::value &&
                  std::is_trivially_copyable<f8_ue4m3>::value &&
                  std::is_trivially_copyable<f8_ue8m0>::value &&
                  std::is_trivially_copyable<f4_e2m1>::value &&
                  std::is_trivially_copyable<bin1>::value,
              "element types are copied with memcpy");

// fp8 arithmetic yields float; fp6/fp4 arithmetic stays in the type.
SAME(decltype(f8_e4m3(1.0f) + f8_e4m3(1.0f)), float);
SAME(decltype(f8_e5m2(1.0f) / f8_e5m2(1.0f)), float);
SAME(decltype(f6_e2m3(1.0f) * f6_e2m3(1.0f)), f6_e2m3);
SAME(decltype(f4_e2m1(1.0f) - f4_e2m1(1.0f)), f4_e2m1);

// The device side of the same API must compile for sm_90a. Launched only by device.cu.
__global__ void device_conversions(const f8_e4m3* a, const f6_e3m2* b, float* out) {
  if (__CHOREO_BLOCK_SINGLE__) {
    out[0] = a[0] + a[1];
    out[1] = to_f32(b[0] * b[1]);
    out[2] = to_f32(utils::from_f32<f16>(out[0])) + to_f32(tf32(out[1])) + to_f32(s4(-3));
    out[3] = to_f32(utils::from_f32<f8_ue4m3>(0.3f));
  }
  choreo_assert(out[0] == out[0], "not NaN");
  croq_assert(true, "fine");
  if (out[3] < 0.0f) __co_abort__();
}

static float f32_of(float x) { return x; }

int main() {
  // half: the CUDA operators and conversions that host code uses.
  half h = 0.5f;
  h = h * h + h;
  h += half(1.0f);
  CHECK_EQ(float(h), 1.75f);
  CHECK(h == half(1.75f));
  CHECK(h != half(1.0f));
  CHECK_EQ(__half2float(__float2half(2.5f)), 2.5f);
  CHECK_EQ(float(bf16(2.0f) * bf16(3.0f)), 6.0f);
  CHECK_EQ(__bfloat162float(__float2bfloat16(-4.0f)), -4.0f);

  // Named conversions round to nearest even.
  CHECK_EQ(f16_to_f32(f32_to_f16(1.0f / 3.0f)), 0.333251953125f);
  CHECK_EQ(f16_to_f32(f32_to_f16(0.1f)), 0.0999755859375f);
  CHECK_EQ(bf16_to_f32(f32_to_bf16(1.0f / 3.0f)), 0.333984375f);

  // to_f32 of every element type.
  CHECK_EQ(to_f32(2.5), 2.5f);
  CHECK_EQ(to_f32(-7), -7.0f);
  CHECK_EQ(to_f32(u8(200)), 200.0f);
  CHECK_EQ(to_f32(s64(-5)), -5.0f);
  CHECK_EQ(to_f32(true), 1.0f);
  CHECK_EQ(to_f32(f32_to_f16(0.75f)), 0.75f);
  CHECK_EQ(to_f32(f32_to_bf16(0.75f)), 0.75f);
  CHECK_EQ(to_f32(f8_e4m3(0.3f)), 0.3125f);    // e4m3: step 1/32 in [0.25, 0.5)
  CHECK_EQ(to_f32(f8_e5m2(0.3f)), 0.3125f);    // e5m2: step 1/16 in [0.25, 0.5)
  CHECK_EQ(to_f32(f8_e4m3(1000.0f)), 448.0f);  // saturates to the largest finite value
  CHECK_EQ(to_f32(f8_e5m2(1e6f)), 57344.0f);
  CHECK_EQ(to_f32(f8_ue8m0(0.25f)), 0.25f);
  CHECK_EQ(to_f32(f6_e2m3(0.3f)), 0.25f);    // e2m3: step 1/8 below 1
  CHECK_EQ(to_f32(f6_e3m2(0.3f)), 0.3125f);  // e3m2: step 1/16 in [0.25, 0.5)
  CHECK_EQ(to_f32(f4_e2m1(2.6f)), 3.0f);     // e2m1 values: 0 .5 1 1.5 2 3 4 6
  CHECK_EQ(to_f32(f4_e2m1(100.0f)), 6.0f);
  CHECK_EQ(to_f32(f8_ue4m3(0.3f)), 0.3125f);
  CHECK_EQ(to_f32(f8_ue4m3(-1.0f)), 0.0f);  // no sign bit
  CHECK_EQ(to_f32(f8_ue4m3(1000.0f)), 448.0f);
  CHECK(std::isnan(to_f32(f8_ue4m3(std::nanf("")))));
  CHECK_EQ(to_f32(tf32(1.0f + 0x1p-11f)), 1.0f);                    // a tie rounds to even
  CHECK_EQ(to_f32(tf32(1.0f + 3 * 0x1p-12f)), 1.0f + 0x1p-10f);    // rounds up
  CHECK_EQ(to_f32(tf32(1.0f + 0x1p-10f)), 1.0f + 0x1p-10f);        // exact
  CHECK(std::isinf(to_f32(tf32(std::numeric_limits<float>::infinity()))));

  // utils::from_f32.
  CHECK_EQ(to_f32(utils::from_f32<f16>(0.5f)), 0.5f);
  CHECK_EQ(to_f32(utils::from_f32<bf16>(-0.5f)), -0.5f);
  CHECK_EQ(to_f32(utils::from_f32<f8_e4m3>(0.3f)), 0.3125f);
  CHECK_EQ(to_f32(utils::from_f32<f4_e2m1>(2.6f)), 3.0f);
  CHECK_EQ(utils::from_f32<int>(2.7f), 2);
  CHECK_EQ(int(utils::from_f32<s4>(-2.9f)), -2);
  CHECK_EQ(utils::from_f32<float>(1.25f), 1.25f);

  // Construction as host code writes it.
  f8_e4m3 e4 = choreo::f8_e4m3(1.5f);
  CHECK_EQ(static_cast<float>(e4), 1.5f);
  CHECK_EQ(float(choreo::f4_e2m1(-1.5f)), -1.5f);

  // fp8 operators compute in float.
  const f8_e4m3 a(1.5f), b(0.5f);
  CHECK_EQ(a + b, 2.0f);
  CHECK_EQ(a - b, 1.0f);
  CHECK_EQ(a * b, 0.75f);
  CHECK_EQ(a / b, 3.0f);
  CHECK_EQ(f8_e5m2(3.0f) * f8_e5m2(0.5f), 1.5f);
  // fp8 comparisons compare the values.
  CHECK(a == f8_e4m3(1.5f) && a != b && b < a && b <= a && a > b && a >= a);
  CHECK(f8_e4m3(0.0f) == f8_e4m3(-0.0f));  // different bits, equal values
  const f8_e5m2 nan(std::nanf(""));
  CHECK(!(nan == nan) && nan != nan && !(nan < nan) && !(nan >= nan));
  CHECK(f8_e5m2(-1.0f) < f8_e5m2(0.25f));
  // fp6/fp4 operators round the result back into the type.
  CHECK_EQ(float(f6_e2m3(1.5f) + f6_e2m3(0.5f)), 2.0f);
  CHECK_EQ(float(f6_e3m2(3.0f) - f6_e3m2(1.0f)), 2.0f);
  CHECK_EQ(float(f4_e2m1(1.5f) * f4_e2m1(2.0f)), 3.0f);
  CHECK_EQ(float(f4_e2m1(6.0f) * f4_e2m1(6.0f)), 6.0f);  // saturates
  CHECK_EQ(float(f4_e2m1(3.0f) / f4_e2m1(2.0f)), 1.5f);

  // Every code of the narrow floats decodes and re-encodes to itself (bits above the format
  // cleared; NaN codes stay NaN); OCP FP4 values; ue8m0 ties to the even code.
  for (unsigned code = 0; code < 256; ++code) {
    const auto b = static_cast<std::uint8_t>(code);
    CHECK_EQ(f4_e2m1(float(f4_e2m1::from_bits(b))).storage, code & 0xFu);
    CHECK_EQ(f6_e2m3(float(f6_e2m3::from_bits(b))).storage, code & 0x3Fu);
    CHECK_EQ(f6_e3m2(float(f6_e3m2::from_bits(b))).storage, code & 0x3Fu);
    CHECK_EQ(f8_ue4m3(float(f8_ue4m3::from_bits(b))).storage, code & 0x7Fu);
    CHECK_EQ(f8_ue8m0(float(f8_ue8m0::from_bits(b))).storage, code);
  }
  const float fp4_values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (unsigned code = 0; code < 8; ++code) {
    CHECK_EQ(float(f4_e2m1::from_bits(static_cast<std::uint8_t>(code))), fp4_values[code]);
    CHECK_EQ(float(f4_e2m1::from_bits(static_cast<std::uint8_t>(code | 8))), -fp4_values[code]);
  }
  CHECK_EQ(float(f4_e2m1(2.5f)), 2.0f);  // ties to the even code
  CHECK_EQ(float(f4_e2m1(5.0f)), 4.0f);
  CHECK_EQ(float(f4_e2m1(0.25f)), 0.0f);
  CHECK_EQ(f4_e2m1(-0.0f).storage, 0x8u);
  CHECK_EQ(float(f4_e2m1(std::nanf(""))), 6.0f);  // NaN: the largest positive value
  CHECK_EQ(float(f6_e2m3(100.0f)), 7.5f);
  CHECK_EQ(float(f6_e3m2(-100.0f)), -28.0f);
  CHECK_EQ(float(f8_ue8m0(3.0f)), 2.0f);  // 1.5 * 2: the even code 128
  CHECK_EQ(float(f8_ue8m0(6.0f)), 8.0f);  // 1.5 * 4: the even code 130
  CHECK_EQ(f8_ue8m0(0.0f).storage, 0u);   // no zero: the smallest value 2^-127
  CHECK_EQ(f8_ue8m0(std::numeric_limits<float>::infinity()).storage, 0xFEu);
  CHECK(std::isnan(float(f8_ue8m0(std::nanf("")))));

  // Sub-byte integers keep the low bits (two's complement when signed).
  CHECK_EQ(int(s4(7)), 7);
  CHECK_EQ(int(s4(8)), -8);
  CHECK_EQ(int(s4(-9)), 7);
  CHECK_EQ(int(u4(17)), 1);
  CHECK_EQ(int(u2(5)), 1);
  CHECK_EQ(int(s2(2)), -2);
  CHECK_EQ(int(u1(3)), 1);
  CHECK_EQ(int(bin1(1)), 1);
  CHECK_EQ(int(s6(31)), 31);
  CHECK_EQ(int(s6(32)), -32);
  CHECK_EQ(int(u6(70)), 6);
  CHECK_EQ(int(s4(2.9f)), 2);
  CHECK_EQ(int(s4(std::nanf(""))), 0);
  CHECK_EQ(s4(-1).storage, 0x0Fu);  // the value in the low bits, zero above
  CHECK_EQ(int(s4::from_bits(0xF9)), -7);  // the bits above are ignored when read
  CHECK_EQ(int(bin1(2)), 1);  // bin1 converts like bool
  CHECK_EQ(int(bin1(0.5f)), 1);
  CHECK_EQ(s4::min_value, -8);
  CHECK_EQ(s4::max_value, 7);
  CHECK_EQ(u6::max_value, 63);
  const s4 x = 3, y = 4;
  CHECK_EQ(int(static_cast<s4>(x + y)), 7);
  CHECK_EQ(int(static_cast<s4>(y + y)), -8);
  CHECK(x != y);
  CHECK_EQ(int(static_cast<u4>(s4(-1))), 15);  // between sub-byte types: same wrapping
  CHECK_EQ(int(static_cast<s2>(u4(3))), -1);
  CHECK_EQ(to_f32(s4(-3)), -3.0f);
  CHECK_EQ(to_f32(u4(15)), 15.0f);

  // Printing: the CUDA types print as float, sub-byte integers as numbers.
  std::ostringstream os;
  os << half(1.5f) << ' ' << bf16(2.5f) << ' ' << f8_e4m3(0.5f) << ' ' << f8_e5m2(-2.0f) << ' '
     << f6_e2m3(0.75f) << ' ' << f4_e2m1(3.0f) << ' ' << f8_ue4m3(0.5f) << ' ' << s4(-3) << ' '
     << u4(9) << ' ' << tf32(0.5f);
  CHECK_EQ(os.str(), std::string("1.5 2.5 0.5 -2 0.75 3 0.5 -3 9 0.5"));

  // The scalar parameter types a wrapper uses accept these values.
  CHECK_EQ(f32_of(to_f32(choreo::f8_e4m3_t(2.0f))), 2.0f);

  std::printf("Test Passed\n");
  return 0;
}
