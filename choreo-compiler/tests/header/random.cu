// fill_random: ranges per element type, and seeding (runtime-abi §9.4).
//
// Modes: "" runs the checks; "print" prints the first values of a fresh fill (the harness runs it
// with and without CHOREO_RANDOM_SEED to check that the seed decides the sequence).
#include "choreo.h"

#include "check.h"

using namespace choreo;

// Checks that every element of `d`, read as float, lies in [lo, hi], and returns the number of
// distinct values seen with the smallest and largest one.
template <typename Span>
static void check_range(const Span& d, float lo, float hi, float* min_seen, float* max_seen,
                        size_t* distinct) {
  std::vector<float> values;
  for (size_t i = 0; i < d.element_count(); ++i) {
    const float x = to_f32(d.data()[i]);
    if (!(x >= lo && x <= hi)) {
      std::fprintf(stderr, "element %zu = %f is outside [%f, %f]\n", i, x, lo, hi);
      std::exit(1);
    }
    values.push_back(x);
  }
  std::sort(values.begin(), values.end());
  *min_seen = values.front();
  *max_seen = values.back();
  *distinct = size_t(std::unique(values.begin(), values.end()) - values.begin());
}

template <typename T, typename LB, typename UB>
static void check_integers_cover(LB lb, UB ub, size_t n) {
  auto d = make_spandata<T>(n);
  d.fill_random(lb, ub);
  float lo, hi;
  size_t distinct;
  check_range(d, float(lb), float(ub), &lo, &hi, &distinct);
  // Both ends are inclusive, and every value in between shows up.
  CHECK_EQ(lo, float(lb));
  CHECK_EQ(hi, float(ub));
  CHECK_EQ(distinct, size_t(ub - lb + 1));
}

int main(int argc, char** argv) {
  const std::string mode = test_mode(argc, argv);
  if (mode == "print") {
    auto d = make_spandata<s32>(8);
    d.fill_random(0, 1000000000);
    for (size_t i = 0; i < 8; ++i) std::printf("%d ", d[i]);
    std::printf("\n");
    return 0;
  }
  if (!mode.empty()) {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }

  // Integers: uniform in [lb, ub], both inclusive.
  check_integers_cover<s32>(-3, 3, 4000);
  check_integers_cover<s8>(-128, 127, 40000);
  check_integers_cover<u8>(0, 255, 40000);
  check_integers_cover<u64>(10, 20, 4000);
  check_integers_cover<s64>(-5, 5, 4000);
  // Sub-byte integers: uniform int in [lb, ub], stored in the type.
  check_integers_cover<s4>(-8, 7, 4000);
  check_integers_cover<u4>(0, 15, 4000);
  check_integers_cover<s2>(-2, 1, 4000);
  check_integers_cover<bin1>(0, 1, 1000);

  float lo, hi;
  size_t distinct;

  // f32 and f64: uniform in [lb, ub), with float or int bounds.
  auto f = make_spandata<float>(100, 100);
  f.fill_random(-2.0f, 2.0f);
  check_range(f, -2.0f, 2.0f, &lo, &hi, &distinct);
  CHECK(hi < 2.0f);
  CHECK(lo < -1.9f && hi > 1.9f);
  CHECK(distinct > 9000);
  double mean = 0;
  for (size_t i = 0; i < f.element_count(); ++i) mean += f.data()[i];
  mean /= double(f.element_count());
  CHECK(std::fabs(mean) < 0.1);  // the mean's standard deviation is 0.012
  auto g = make_spandata<double>(1000);
  g.fill_random(1, 10);
  check_range(g, 1.0f, 10.0f, &lo, &hi, &distinct);
  CHECK(distinct > 990);

  // Narrow floats: drawn as f32 between the converted bounds, then rounded into the type.
  auto h = make_spandata<f16>(4000);
  h.fill_random(-10.0f, 10.0f);
  check_range(h, -10.0f, 10.0f, &lo, &hi, &distinct);
  CHECK(lo < -9.0f && hi > 9.0f && distinct > 1000);
  auto bh = make_spandata<bf16>(4000);
  bh.fill_random(-0.5f, 1.0f);
  check_range(bh, -0.5f, 1.0f, &lo, &hi, &distinct);
  CHECK(lo < -0.4f && hi > 0.9f && distinct > 100);
  auto e4 = make_spandata<f8_e4m3>(4000);
  e4.fill_random(1.0f, 10.0f);
  check_range(e4, 1.0f, 10.0f, &lo, &hi, &distinct);
  CHECK(lo < 1.5f && hi > 9.0f && distinct > 20);
  auto e5 = make_spandata<f8_e5m2>(4000);
  e5.fill_random(-1, 1);
  check_range(e5, -1.0f, 1.0f, &lo, &hi, &distinct);
  CHECK(lo < -0.8f && hi > 0.8f && distinct > 20);
  auto fp4 = make_spandata<f4_e2m1>(4000);
  fp4.fill_random(-6, 6);
  check_range(fp4, -6.0f, 6.0f, &lo, &hi, &distinct);
  CHECK_EQ(lo, -6.0f);
  CHECK_EQ(hi, 6.0f);
  CHECK_EQ(distinct, 15u);  // all e2m1 values: +-{0.5 1 1.5 2 3 4 6} and 0
  auto fp6 = make_spandata<f6_e2m3>(4000);
  fp6.fill_random(0.0f, 2.0f);
  check_range(fp6, 0.0f, 2.0f, &lo, &hi, &distinct);
  CHECK(distinct > 10);
  auto scales = make_spandata<f8_ue8m0>(1000);
  scales.fill_random(1, 64);
  check_range(scales, 1.0f, 64.0f, &lo, &hi, &distinct);
  CHECK(distinct >= 5);  // powers of two only
  for (size_t i = 0; i < scales.element_count(); ++i) {
    const float x = to_f32(scales[i]);
    CHECK_EQ(std::exp2(std::round(std::log2(x))), x);
  }
  auto unsigned_scales = make_spandata<f8_ue4m3>(1000);
  unsigned_scales.fill_random(0, 2);
  check_range(unsigned_scales, 0.0f, 2.0f, &lo, &hi, &distinct);
  CHECK(distinct > 20);
  auto t = make_spandata<tf32>(1000);
  t.fill_random(-1.0f, 1.0f);
  check_range(t, -1.0f, 1.0f, &lo, &hi, &distinct);
  CHECK(distinct > 500);

  // Views fill the memory they point at.
  float raw[64] = {};
  make_spanview<float, 2>(raw, {8, 8}).fill_random(5.0f, 6.0f);
  for (float x : raw) CHECK(x >= 5.0f && x < 6.0f);

  // Equal bounds give that value.
  auto same = make_spandata<int>(10);
  same.fill_random(4, 4);
  for (size_t i = 0; i < 10; ++i) CHECK_EQ(same[i], 4);

  // seed_random makes the sequence reproducible.
  auto first = make_spandata<float>(64);
  auto second = make_spandata<float>(64);
  auto third = make_spandata<float>(64);
  seed_random(1234);
  first.fill_random(0.0f, 1.0f);
  seed_random(1234);
  second.fill_random(0.0f, 1.0f);
  seed_random(1235);
  third.fill_random(0.0f, 1.0f);
  size_t equal_to_third = 0;
  for (size_t i = 0; i < 64; ++i) {
    CHECK_EQ(first[i], second[i]);
    equal_to_third += first[i] == third[i];
  }
  CHECK(equal_to_third < 4);

  std::printf("Test Passed\n");
  return 0;
}
