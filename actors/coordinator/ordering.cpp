// The orderings of one process and of training mode (actors/coordinator/ordering.hpp);
// services mode's is actors/coordinator/services_ordering.cpp.

#include "actors/coordinator/ordering.hpp"

#include "actors/coordinator/coordinator_state.hpp"

namespace varsync {

namespace {

/// One process: operations run as they are admitted.
class local_ordering final : public ordering {
public:
  size_t in_flight_limit() const override {
    return max_in_flight;
  }
  bool every_process_takes_part() const override { return true; }
  bool take(caf::timespan, operation&, completion&) override { return false; }
  void barrier(caf::timespan, reply_fn<ok_atom> done) override {
    done(ok_atom::value); // every process is here
  }
};

/// Training mode: every process issues the same operations, and each runs
/// them one at a time in the order they arrived, so that concurrent async
/// calls issued alike everywhere meet alike (P4): an operation may wait
/// inside the coordinator (a read behind a write, a step behind its
/// replicas, an update between its two rounds).
class training_ordering final : public ordering {
public:
  explicit training_ordering(coordinator_state& c) : c_(c) {}
  size_t in_flight_limit() const override { return 1; }
  bool every_process_takes_part() const override { return true; }
  bool take(caf::timespan, operation&, completion&) override { return false; }
  void barrier(caf::timespan timeout, reply_fn<ok_atom> done) override {
    c_.agree(timeout, "barrier", {}, std::move(done));
  }

private:
  coordinator_state& c_;
};

} // namespace

std::unique_ptr<ordering> make_plain_ordering(coordinator_state& coordinator,
                                              bool across_processes) {
  if (across_processes)
    return std::make_unique<training_ordering>(coordinator);
  return std::make_unique<local_ordering>();
}

} // namespace varsync
