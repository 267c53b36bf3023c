#pragma once
// Who may order the operations of services mode (P16): an arbiter that
// exists already, never a vote of the processes. One holder at a time
// leads, for an epoch that only grows, and keeps its lead by renewing a
// lease; a candidate takes the lead only from a holder that died or whose
// lease ran out, and each take-over is a new, larger epoch, so that a
// holder that wakes up finds itself fenced when it renews. On one host the
// kernel arbitrates (host_arbiter.hpp), across hosts etcd
// (etcd_arbiter.hpp). Calls block briefly (system calls, or an HTTP
// request to etcd bounded by the lease); one object per process.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace varsync {

struct arbiter_options {
  /// Where the lead is kept: the host arbiter's file, etcd's key.
  std::string path;
  /// This process's rank in the strategy.
  int rank = 0;
  /// How long a holder's lead lasts unless renewed (and how long a stopped
  /// holder keeps the others waiting).
  std::chrono::milliseconds lease{1000};
};

class arbiter {
public:
  /// The lead as the arbiter records it.
  struct lead {
    /// 0: no process holds it (or ever held it).
    uint64_t epoch = 0;
    int rank = -1;
    int32_t pid = 0;
    /// The holder's process is alive (as far as the arbiter can tell).
    bool alive = false;
    /// Its lease has not run out.
    bool leased = false;
  };

  virtual ~arbiter() = default;

  /// The lead now.
  virtual caf::expected<lead> current() const = 0;
  /// Takes the lead unless a live holder's lease runs: the new epoch,
  /// larger than any before. replica_failed naming the holder otherwise;
  /// this process holding the lead already is not an error (its epoch,
  /// renewed).
  virtual caf::expected<uint64_t> try_acquire() = 0;
  /// Extends this process's lease of `epoch`: `fenced` when it cannot
  /// (another process took the lead, or the arbiter dropped it): this
  /// process may order nothing under `epoch` again.
  virtual caf::error renew(uint64_t epoch) = 0;
  /// Gives the lead up (an orderly exit): the next candidate takes it at
  /// once. Nothing when `epoch` is not this process's.
  virtual void release(uint64_t epoch) = 0;
  /// Removes what the arbiter keeps for this strategy (its orderly end,
  /// no process left to use it).
  virtual void forget() = 0;
  virtual const arbiter_options& options() const = 0;
};

/// Opens the arbiter `spec` names (cluster_spec::arbiter: "host",
/// "host:<path>", "etcd:http://<host>:<port>[/<key>]") for `rank`. `name`
/// tells this strategy's lead from others' where `spec` names no file or
/// key (the group and rendezvous address).
caf::expected<std::unique_ptr<arbiter>>
open_arbiter(const std::string& spec, const std::string& name, int rank,
             std::chrono::milliseconds lease);

/// Where open_arbiter keeps the lead: the file or the etcd key.
std::string arbiter_location(const std::string& spec, const std::string& name);

} // namespace varsync
