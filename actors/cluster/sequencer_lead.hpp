#pragma once
// The sequencer's lead under an arbiter (P16): the epoch it orders under,
// kept by renewing its lease on a timer and checked before each operation
// is numbered. A lease that may have run out (the process was stopped,
// the timer came late) is renewed before anything is numbered, so that a
// sequencer that lost its lead while stopped numbers nothing under it;
// the epoch each operation carries lets the others refuse anything that
// slipped out between the check and a take-over.

#include <chrono>
#include <cstdint>
#include <memory>

#include <caf/error.hpp>

namespace varsync {

class arbiter;

class sequencer_lead {
public:
  using clock = std::chrono::steady_clock;

  /// No arbiter: epoch 0, every check passes.
  sequencer_lead() = default;
  /// Holds `epoch` of `arbiter`, just acquired by this process.
  sequencer_lead(std::shared_ptr<arbiter> arbiter, uint64_t epoch);

  bool arbitrated() const { return arbiter_ != nullptr; }
  uint64_t epoch() const { return epoch_; }
  /// How often the timer renews: a third of the lease.
  std::chrono::milliseconds renew_every() const;

  /// Renews the lease; `fenced` once the lead moved on (and from then on).
  caf::error renew();
  /// Before an operation is numbered: renews first unless the last
  /// renewal is recent enough that no other process can hold the lead.
  caf::error check();
  /// An orderly end: gives the lead up, and has the arbiter forget this
  /// strategy when `last` (no other process uses it any more).
  void release(bool last);

private:
  std::shared_ptr<arbiter> arbiter_;
  uint64_t epoch_ = 0;
  /// Until then no other process can have taken the lead (two thirds of
  /// a lease after the last renewal began).
  clock::time_point safe_until_;
  caf::error fenced_;
};

} // namespace varsync
