#pragma once
// Fan-out that uses every scheduler thread. CAF 0.17 queues an actor that a
// message wakes on the sending worker's own queue, behind the sender, where
// idle workers find it only by stealing: every few polls while they spin,
// then only when their sleep times out. The replicas of a step or of a
// collective's work phase would then run one after the other. While a
// spread_sends lives, `self` sends as if from outside the scheduler: each
// woken receiver goes to a worker chosen round-robin, which is woken if it
// sleeps.

#include <caf/execution_unit.hpp>

namespace varsync {

template <class Self>
class spread_sends {
public:
  explicit spread_sends(Self* self) : self_(self), saved_(self->context()) {
    self_->context(nullptr);
  }
  ~spread_sends() { self_->context(saved_); }
  spread_sends(const spread_sends&) = delete;
  spread_sends& operator=(const spread_sends&) = delete;

private:
  Self* self_;
  caf::execution_unit* saved_;
};

} // namespace varsync
