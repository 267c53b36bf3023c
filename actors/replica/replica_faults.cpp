// Test support: counting a replica's operations against its injected faults.

#include "actors/replica/replica_faults.hpp"

#include <algorithm>
#include <string>

#include "core/logging.hpp"
#include "varsync/error.hpp"

namespace varsync::replica_internal {

replica_faults::outcome replica_faults::count(uint64_t operations) {
  operations_ += operations;
  auto result = outcome::none;
  for (auto& f : faults_) {
    if (operations_ < f.at_operation)
      continue;
    if (f.what == replica_fault::kind::fail) {
      log()->warn("replica {} ({}): {} at operation {}", rank_,
                  to_string(device_), f.reason, operations_);
      failure_ = make_error(errc::device_error,
                            "replica " + std::to_string(rank_) + " ("
                              + to_string(device_) + "): " + f.reason);
      return outcome::failed;
    }
    result = outcome::delay;
  }
  return result;
}

caf::error replica_faults::failed_error() const {
  return make_error(errc::replica_failed,
                    "replica " + std::to_string(rank_) + " ("
                      + to_string(device_) + ") has failed");
}

std::chrono::milliseconds replica_faults::delay() const {
  std::chrono::milliseconds d{0};
  for (auto& f : faults_)
    if (f.what == replica_fault::kind::delay && operations_ >= f.at_operation)
      d = std::max(d, f.delay);
  return d;
}

} // namespace varsync::replica_internal
