// Checks and failure reporting (runtime-abi §8, §9.7). Every mode except "pass" must abort; the
// harness checks how (signal, message and stream).
#include "choreo.h"

#include "check.h"

using namespace choreo;

int main(int argc, char** argv) {
  const std::string mode = test_mode(argc, argv);
  auto rank1 = make_spandata<int>(4);
  auto rank3 = make_spandata<float>(2, 3, 4);
  int raw[10] = {};
  auto view = make_spanview<int, 2>(raw, {2, 5});
  rank1.fill(0);
  rank3.fill(0);

  if (mode == "pass") {
    // Passing checks print nothing and return.
    runtime_check(true, "never printed");
    runtime_check(true, std::string("never printed"));
    choreo_assert(true, "never printed");
    croq_assert(true, "never printed");
    abend_true(0);
    abend_true(cudaSuccess);
    abend_false(true);
    // The last valid index of every dimension is accepted.
    rank1[3] = 1;
    rank3[1][2][3] = 1.0f;
    view[1][4] = 1;
    CHECK_EQ(raw[9], 1);
    std::printf("Test Passed\n");
    return 0;
  }
  std::printf("before the failure\n");  // must still reach a pipe: the abort flushes stdout
  if (mode == "oob-rank1") {
    rank1[4] = 1;
  } else if (mode == "oob-middle") {
    rank3[1][3][0] = 1.0f;
  } else if (mode == "oob-last") {
    std::printf("%d\n", view[1][5]);
  } else if (mode == "oob-negative") {
    std::printf("%d\n", view[-1][0]);
  } else if (mode == "oob-huge") {
    const size_t huge = size_t(1) << 40;
    rank1[huge] = 1;
  } else if (mode == "runtime-check") {
    runtime_check(false, "shape inconsistent on the 1st parameter ('x', dim: 0): expect: 8");
  } else if (mode == "runtime-check-string") {
    runtime_check(false, std::string("got ") + std::to_string(7) + " items");
  } else if (mode == "choreo-assert") {
    choreo_assert(1 + 1 == 3, "arithmetic is broken");  // CHECKS_ASSERT_LINE
  } else if (mode == "croq-assert") {
    croq_assert(false, "croq message");  // CHECKS_CROQ_LINE
  } else if (mode == "explicit-location") {
    choreo_assert(false, "generated", "kernel.co", 42);
  } else if (mode == "abend-true") {
    abend_true(cudaErrorInvalidValue);
  } else if (mode == "abend-false") {
    abend_false(false);
  } else if (mode == "zero-extent") {
    auto bad = make_spandata<float>(3, 0);
    (void)bad;
  } else if (mode == "negative-extent") {
    int n = -2;
    auto bad = make_spandata<float>(n);
    (void)bad;
  } else if (mode == "braced-zero-extent") {
    auto bad = make_spandata<float, 2>({4, 0});
    (void)bad;
  } else if (mode == "extent-count") {
    const mdspan<2> bad{1, 2, 3};
    (void)bad;
  } else if (mode == "mdspan-index") {
    const mdspan<2> shape{1, 2};
    std::printf("%zu\n", shape[2]);
  } else if (mode == "fill-random-bounds") {
    rank1.fill_random(5, 1);
  } else if (mode == "fill-random-narrow-bounds") {
    auto nibbles = make_spandata<s4>(4);
    nibbles.fill_random(0, 15);  // 15 wraps to -1 in s4
  } else if (mode == "co-abort") {
    __co_abort__();
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  std::printf("not reached\n");
  return 0;
}
