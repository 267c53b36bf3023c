#include "actors/coordinator/admission.hpp"

#include <string>

#include "varsync/error.hpp"

namespace varsync {

caf::error admission::refuse_if_full(size_t bytes) const {
  if (in_flight_ < limit_ && waiting_.empty())
    return {}; // runs at once
  if (waiting_.size() >= max_queued_operations_)
    return make_error(errc::overloaded,
                      "refused: " + std::to_string(waiting_.size())
                        + " requests already wait for the coordinator "
                          "(max_queued_operations); nothing was changed, "
                          "retry later");
  // A request larger than the bound alone still waits in an empty queue.
  if (!waiting_.empty() && queued_bytes_ + bytes > max_queued_bytes_)
    return make_error(errc::overloaded,
                      "refused: the requests waiting for the coordinator "
                      "hold "
                        + std::to_string(queued_bytes_)
                        + " bytes of tensors (max_queued_bytes "
                        + std::to_string(max_queued_bytes_)
                        + "); nothing was changed, retry later");
  return {};
}

void admission::release() {
  --in_flight_;
  if (draining_)
    return; // the loop below, further up the stack, starts the next one
  draining_ = true;
  while (in_flight_ < limit_ && !waiting_.empty()) {
    auto next = std::move(waiting_.front());
    waiting_.pop_front();
    queued_bytes_ -= next.bytes;
    ++in_flight_;
    queued_for_ = std::chrono::duration_cast<caf::timespan>(clock::now()
                                                            - next.since);
    next.run();
    queued_for_ = caf::timespan{0};
  }
  draining_ = false;
}

} // namespace varsync
