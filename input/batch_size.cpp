#include "varsync/error.hpp"
#include "varsync/ext/sampler.hpp"

#include <string>

namespace varsync::input {

caf::expected<int64_t> per_replica_batch_size(int64_t global_batch_size,
                                              int num_replicas) {
  if (num_replicas < 1)
    return make_error(errc::invalid_argument,
                      "per_replica_batch_size: expected at least one replica, "
                      "got " + std::to_string(num_replicas));
  if (global_batch_size < 1)
    return make_error(errc::invalid_argument,
                      "per_replica_batch_size: expected a global batch size of "
                      "at least 1, got " + std::to_string(global_batch_size));
  // TF's get_per_replica_batch_size raises here too: an uneven split would
  // weight the replicas' gradients differently.
  if (global_batch_size % num_replicas != 0)
    return make_error(errc::invalid_argument,
                      "per_replica_batch_size: the global batch size "
                      + std::to_string(global_batch_size)
                      + " is not divisible by the " + std::to_string(num_replicas)
                      + " replicas; expected a multiple of "
                      + std::to_string(num_replicas));
  return global_batch_size / num_replicas;
}

} // namespace varsync::input
