// The replica actor's queue: operations deferred while a collective or a
// waiting step holds the replica, admission of local requests (V3), and
// the local operations of actors bound to the replica.

#include "actors/replica/replica_state.hpp"

#include <string>

#include "core/logging.hpp"
#include "varsync/error.hpp"

namespace varsync::replica_internal {

caf::error replica_state::refuse_if_full() const {
  if (deferred_.size() < cfg_.max_deferred)
    return {};
  ++refusals_;
  return make_error(errc::overloaded,
                    "replica " + std::to_string(cfg_.rank) + " ("
                      + to_string(cfg_.device) + "): refused, "
                      + std::to_string(deferred_.size())
                      + " operations already wait (max_queued_operations); "
                        "nothing was changed, retry later");
}

replica_usage replica_state::usage() const {
  replica_usage out;
  store_.count_usage(out);
  out.deferred = deferred_.size();
  out.refusals = refusals_;
  return out;
}

caf::expected<ok_atom> replica_state::local_update(uint64_t id, update_op op,
                                                   const tensor& x) {
  auto c = store_.find(id);
  if (!c)
    return std::move(c.error());
  if (auto err = steps_.update(*(*c)->info, op, x))
    return err;
  return ok_atom::value;
}

caf::expected<ok_atom> replica_state::local_scatter(uint64_t id, scatter_op op,
                                                    const indexed_slices& x) {
  auto c = store_.find(id);
  if (!c)
    return std::move(c.error());
  if (auto err = steps_.scatter(*(*c)->info, op, x.indices, x.values))
    return err;
  return ok_atom::value;
}

void replica_state::drop_local_add(uint64_t id, const caf::error& err) {
  cfg_.local_adds_dropped->fetch_add(1, std::memory_order_relaxed);
  if (warned_local_add_.insert(id).second)
    log()->warn("replica {} ({}): local_add of variable #{} not applied "
                "(further ones are only counted in local_adds_dropped): {}",
                cfg_.rank, to_string(cfg_.device), id, describe(err));
}

void replica_state::drain() {
  while (!held() && !deferred_.empty()) {
    auto next = std::move(deferred_.front());
    deferred_.pop_front();
    next();
  }
}

void replica_state::resume() {
  faults_.resumed();
  if (held() || deferred_.empty())
    return;
  auto next = std::move(deferred_.front());
  deferred_.pop_front();
  next();
  if (!deferred_.empty())
    schedule_resume();
}

} // namespace varsync::replica_internal
