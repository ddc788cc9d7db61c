// Assertion macros for the header test programs. A failed CHECK exits with status 1 (not abort),
// so the Rust harness can tell a broken expectation from an expected choreo abort.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

#define CHECK_EQ(a, b)                                                                   \
  do {                                                                                   \
    /* copies: a reference to a span element reached through a proxy trips GCC 13's  */ \
    /* -Wdangling-reference heuristic, although the element outlives the proxy       */ \
    const auto check_eq_a_ = (a);                                                        \
    const auto check_eq_b_ = (b);                                                        \
    if (!(check_eq_a_ == check_eq_b_)) {                                                 \
      std::ostringstream check_eq_msg_;                                                  \
      check_eq_msg_ << check_eq_a_ << " != " << check_eq_b_;                             \
      std::fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%s)\n", __FILE__, __LINE__, \
                   #a, #b, check_eq_msg_.str().c_str());                                 \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

// The mode a test program runs in: its first argument, or "" without one.
inline std::string test_mode(int argc, char** argv) { return argc > 1 ? argv[1] : ""; }
