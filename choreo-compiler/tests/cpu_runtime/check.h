// Shared by the CPU runtime's test programs (tests/cpu_runtime.rs): CHECK prints the failed
// condition and exits with status 1.
#pragma once
#include <cstdio>
#include <cstdlib>

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::printf("%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);       \
      std::fflush(stdout);                                                       \
      std::exit(1);                                                              \
    }                                                                            \
  } while (0)
#define CHECK_OK(call) CHECK((call) == cudaSuccess)
