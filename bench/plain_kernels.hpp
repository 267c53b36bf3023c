#pragma once
// The host all-reduce of an ON_WRITE SUM assign_add written plainly (no
// actors, no messages), for the floors the suite measures beside varsync:
// for every element i, c = comp[0][i] + sum_r grad[r][i]; comp[r][i] = c.
// With one replica that is comp[0][i] += grad[0][i]. Restrict-qualified
// pointers so that the loops vectorize; [lo, hi) is one thread's slice.

#include <cstddef>

namespace bench {

inline void plain_add(float* __restrict c0, const float* __restrict g0,
                      size_t lo, size_t hi) {
  for (size_t i = lo; i < hi; ++i)
    c0[i] += g0[i];
}

inline void onepass2(float* __restrict c0, float* __restrict c1,
                     const float* __restrict g0, const float* __restrict g1,
                     size_t lo, size_t hi) {
  for (size_t i = lo; i < hi; ++i) {
    float c = c0[i] + g0[i] + g1[i];
    c0[i] = c;
    c1[i] = c;
  }
}

inline void onepass4(float* __restrict c0, float* __restrict c1,
                     float* __restrict c2, float* __restrict c3,
                     const float* __restrict g0, const float* __restrict g1,
                     const float* __restrict g2, const float* __restrict g3,
                     size_t lo, size_t hi) {
  for (size_t i = lo; i < hi; ++i) {
    float c = c0[i] + g0[i] + g1[i] + g2[i] + g3[i];
    c0[i] = c;
    c1[i] = c;
    c2[i] = c;
    c3[i] = c;
  }
}

} // namespace bench
