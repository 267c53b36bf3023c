#pragma once
// Who may order the operations of a strategy whose processes share a host
// (issue 36's arbiter on one host): the kernel decides, never a vote of
// the processes. A small file (in /dev/shm) holds the current epoch, its
// holder and the holder's lease; an OFD lock on the file's first bytes
// makes each change atomic, and the holder keeps a second OFD lock, on a
// byte of its own epoch, for as long as it lives: the kernel drops it when
// the holder dies, however it dies. So a candidate takes the lead at once
// from a holder that died, after its lease from one that stopped
// answering (SIGSTOP, a long pause), and never from a live holder whose
// lease runs. Each take-over is a new epoch, one past the last: a holder
// that wakes up after its lease finds the epoch moved on when it renews
// (fencing), and the operations it numbered under the old epoch are
// refused by whoever knows the new one.
//
// Services mode's sequencer holds its lead through one (sequencer_lead.hpp,
// P16); taking over from a lost sequencer is not there yet.
// Blocking, short system calls; one object per process and file.

#include <memory>
#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/cluster/arbiter.hpp"

namespace varsync {

/// `path`: the arbiter's file, shared by the processes of one strategy (a
/// path under /dev/shm, say "/dev/shm/varsync-arbiter-<cluster id>").
using host_arbiter_options = arbiter_options;

class host_arbiter final : public arbiter {
public:
  /// Opens the file, creating it if needed. invalid_argument for an empty
  /// path, a negative rank or a lease that is not positive; the path's
  /// error when it cannot be opened, or holds something else.
  static caf::expected<std::unique_ptr<host_arbiter>>
  open(host_arbiter_options options);

  ~host_arbiter() override;
  host_arbiter(const host_arbiter&) = delete;
  host_arbiter& operator=(const host_arbiter&) = delete;

  caf::expected<lead> current() const override;
  /// Fails with replica_failed naming the holder and how long its lease
  /// still runs while a live holder's lease runs.
  caf::expected<uint64_t> try_acquire() override;
  /// A lease that ran out while nobody took over is renewed: nothing was
  /// ordered under another epoch meanwhile.
  caf::error renew(uint64_t epoch) override;
  void release(uint64_t epoch) override;
  /// Removes the file; its name is free for the next run.
  void forget() override;
  const arbiter_options& options() const override;

  struct impl;

private:
  explicit host_arbiter(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace varsync
