#pragma once
// Oracle for the fuzz targets: a violated property prints what was expected
// and aborts, which libFuzzer records as a crash with the reproducer.

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, what)                                                 \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: %s\n", __FILE__,     \
                   __LINE__, #cond, what);                                     \
      std::abort();                                                            \
    }                                                                          \
  } while (false)
