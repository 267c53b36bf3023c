#include "input/epoch_order.hpp"

#include <numeric>
#include <utility>

namespace varsync::input {

namespace {

constexpr uint64_t golden_gamma = 0x9E3779B97F4A7C15ull;

} // namespace

uint64_t splitmix64::mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t splitmix64::next() {
  state_ += golden_gamma;
  return mix(state_);
}

uint64_t splitmix64::below(uint64_t bound) {
  // 2^64 mod bound, computed in 64 bits: the draws under it are the ones
  // that would make the low residues more likely.
  const uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const uint64_t x = next();
    if (x >= threshold)
      return x % bound;
  }
}

uint64_t epoch_state(uint64_t seed, int64_t epoch) {
  return splitmix64::mix(seed ^ splitmix64::mix(static_cast<uint64_t>(epoch)
                                                + golden_gamma));
}

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch,
                                 bool shuffle) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle)
    return order;
  splitmix64 gen{epoch_state(seed, epoch)};
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(gen.below(static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

} // namespace varsync::input
