// I9: with shuffle = false and one item per replica per step, the shares are
// those torch.utils.data.DistributedSampler(shuffle=False) gives each rank:
// the indices padded by repeating from the start to ceil(N/R)·R items
// (drop_last=False, uneven_end::pad), or cut to floor(N/R)·R
// (drop_last=True, uneven_end::drop), then rank r takes
// indices[r:total_size:R]. The shuffled orders differ from torch's
// (docs/input.md says why).

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "varsync/error.hpp"
#include "varsync/ext/sampler.hpp"

using namespace varsync;
using namespace varsync::input;

namespace {

using shares = std::vector<std::vector<int64_t>>;

shares varsync_shares(int64_t n, int replicas, uneven_end end) {
  auto s = distributed_sampler::create(
    {.num_items = n, .seed = 123, .shuffle = false, .end = end}, replicas);
  REQUIRE(s);
  REQUIRE_FALSE(s->begin_epoch(0));
  auto out = s->remaining_shares();
  REQUIRE(out);
  return *out;
}

/// torch/utils/data/distributed.py, __init__ and __iter__ with
/// shuffle=False, line for line.
shares torch_shares(int64_t n, int replicas, bool drop_last) {
  const int64_t r = replicas;
  int64_t num_samples = 0;
  if (drop_last && n % r != 0)
    num_samples = (n - r + r - 1) / r; // math.ceil((len - R) / R), len >= R
  else
    num_samples = (n + r - 1) / r;     // math.ceil(len / R)
  const int64_t total_size = num_samples * r;
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < n; ++i)
    indices.push_back(i);
  if (!drop_last) {
    const int64_t padding_size = total_size - n;
    // indices += indices[:padding_size], or the list repeated as needed.
    for (int64_t i = 0; i < padding_size; ++i)
      indices.push_back(indices[static_cast<size_t>(i % n)]);
  } else {
    indices.resize(static_cast<size_t>(total_size));
  }
  shares out(static_cast<size_t>(r));
  for (int64_t k = 0; k < r; ++k)
    for (int64_t i = k; i < total_size; i += r)
      out[static_cast<size_t>(k)].push_back(indices[static_cast<size_t>(i)]);
  return out;
}

} // namespace

TEST_CASE("I9: torch's DistributedSampler shares, written out") {
  // N = 10, R = 4: padded to 12 with 0, 1; cut to 8.
  CHECK(varsync_shares(10, 4, uneven_end::pad)
        == shares{{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}});
  CHECK(varsync_shares(10, 4, uneven_end::drop)
        == shares{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  // N = 7, R = 2: padded to 8 with 0; cut to 6.
  CHECK(varsync_shares(7, 2, uneven_end::pad) == shares{{0, 2, 4, 6}, {1, 3, 5, 0}});
  CHECK(varsync_shares(7, 2, uneven_end::drop) == shares{{0, 2, 4}, {1, 3, 5}});
  // N = 3, R = 8: padding longer than the dataset repeats it (0 1 2 0 1).
  CHECK(varsync_shares(3, 8, uneven_end::pad)
        == shares{{0}, {1}, {2}, {0}, {1}, {2}, {0}, {1}});
  // Even: no padding, nothing dropped.
  CHECK(varsync_shares(8, 4, uneven_end::pad) == shares{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(varsync_shares(8, 4, uneven_end::drop) == shares{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
}

TEST_CASE("I9: torch's DistributedSampler shares, N 1..60, R 1..9") {
  for (int replicas = 1; replicas <= 9; ++replicas) {
    for (int64_t n = 1; n <= 60; ++n) {
      INFO("N " << n << ", R " << replicas);
      CHECK(varsync_shares(n, replicas, uneven_end::pad)
            == torch_shares(n, replicas, false));
      if (n >= replicas) // torch's drop_last leaves nothing below that
        CHECK(varsync_shares(n, replicas, uneven_end::drop)
              == torch_shares(n, replicas, true));
    }
  }
}
