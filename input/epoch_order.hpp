#pragma once
// The order of an epoch's items: a permutation of 0 .. N-1 drawn from (seed,
// epoch) by a generator whose every output is defined here, so every
// process, compiler and standard library draws the same one (std::shuffle
// and the std:: distributions are implementation-defined). docs/input.md
// states the algorithm.

#include <cstdint>
#include <vector>

namespace varsync::input {

/// splitmix64 (Steele, Lea, Flood 2014; Vigna's reference code).
class splitmix64 {
public:
  explicit splitmix64(uint64_t state) : state_(state) {}
  /// state += 0x9E3779B97F4A7C15, then mix(state).
  uint64_t next();
  /// splitmix64's output function.
  static uint64_t mix(uint64_t z);
  /// Uniform in [0, bound) (bound >= 1), without modulo bias: draws below
  /// 2^64 mod bound are rejected.
  uint64_t below(uint64_t bound);

private:
  uint64_t state_;
};

/// The generator's starting state for an epoch: mix(seed ^ mix(epoch + γ)).
uint64_t epoch_state(uint64_t seed, int64_t epoch);

/// 0 .. n-1, shuffled (Fisher-Yates from the last position down, j drawn
/// by below(i + 1)) with the epoch's generator when `shuffle`.
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch,
                                 bool shuffle);

} // namespace varsync::input
