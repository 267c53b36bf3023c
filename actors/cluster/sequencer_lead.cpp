#include "actors/cluster/sequencer_lead.hpp"

#include <string>
#include <utility>

#include "actors/cluster/arbiter.hpp"
#include "core/logging.hpp"
#include "varsync/error.hpp"

namespace varsync {

sequencer_lead::sequencer_lead(std::shared_ptr<arbiter> arbiter,
                               uint64_t epoch)
  : arbiter_(std::move(arbiter)),
    epoch_(epoch),
    safe_until_(clock::now() + 2 * arbiter_->options().lease / 3) {
}

std::chrono::milliseconds sequencer_lead::renew_every() const {
  return arbiter_ ? arbiter_->options().lease / 3
                  : std::chrono::milliseconds{0};
}

caf::error sequencer_lead::renew() {
  if (!arbiter_ || fenced_)
    return fenced_;
  // Measured before the renewal: the lease may start later, never earlier.
  const auto start = clock::now();
  if (auto err = arbiter_->renew(epoch_)) {
    // Not an answer (etcd did not reply in time): the lead may still be
    // ours; try again at the next tick while no one else can hold it.
    if (!has_code(err, errc::fenced) && start < safe_until_) {
      log()->warn("services mode: {}; the lead is kept until its lease "
                  "may have run out",
                  describe(err));
      return {};
    }
    fenced_ = has_code(err, errc::fenced)
                ? make_error(errc::fenced,
                             "services mode: process "
                               + std::to_string(arbiter_->options().rank)
                               + " ordered operations in epoch "
                               + std::to_string(epoch_)
                               + " and lost the lead (it stopped for longer "
                                 "than its lease): "
                               + message_of(err))
                : make_error(errc::fenced,
                             "services mode: process "
                               + std::to_string(arbiter_->options().rank)
                               + " cannot renew its lead of epoch "
                               + std::to_string(epoch_)
                               + ", so it orders nothing more: "
                               + describe(err));
    return fenced_;
  }
  safe_until_ = start + 2 * arbiter_->options().lease / 3;
  return {};
}

caf::error sequencer_lead::check() {
  if (!arbiter_ || fenced_)
    return fenced_;
  if (clock::now() < safe_until_)
    return {};
  return renew();
}

void sequencer_lead::release(bool last) {
  if (!arbiter_ || fenced_)
    return;
  arbiter_->release(epoch_);
  if (last)
    arbiter_->forget();
}

} // namespace varsync
