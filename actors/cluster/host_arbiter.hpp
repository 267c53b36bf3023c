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

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace varsync {

struct host_arbiter_options {
  /// The arbiter's file, shared by the processes of one strategy (a path
  /// under /dev/shm, say "/dev/shm/varsync-arbiter-<cluster id>").
  std::string path;
  /// This process's rank in the strategy.
  int rank = 0;
  /// How long a holder's lead lasts unless renewed (and how long a stopped
  /// holder keeps the others waiting).
  std::chrono::milliseconds lease{1000};
};

class host_arbiter {
public:
  /// The lead as the file records it.
  struct lead {
    /// 0: no process ever held it.
    uint64_t epoch = 0;
    int rank = -1;
    int32_t pid = 0;
    /// The holder's process is alive (it holds its epoch's lock).
    bool alive = false;
    /// Its lease has not run out.
    bool leased = false;
  };

  /// Opens the file, creating it if needed. invalid_argument for an empty
  /// path, a negative rank or a lease that is not positive; the path's
  /// error when it cannot be opened, or holds something else.
  static caf::expected<std::unique_ptr<host_arbiter>>
  open(host_arbiter_options options);

  ~host_arbiter();
  host_arbiter(const host_arbiter&) = delete;
  host_arbiter& operator=(const host_arbiter&) = delete;

  /// The lead now.
  caf::expected<lead> current() const;
  /// Takes the lead unless a live holder's lease runs: the new epoch (one
  /// past the last). Fails with replica_failed naming the holder and how
  /// long its lease still runs otherwise; this process holding the lead
  /// already is not an error (its epoch, renewed).
  caf::expected<uint64_t> try_acquire();
  /// Extends this process's lease of `epoch`: `fenced` when the epoch
  /// moved on (another process took the lead; this one may order nothing
  /// under it again). A lease that ran out while nobody took over is
  /// renewed: nothing was ordered under another epoch meanwhile.
  caf::error renew(uint64_t epoch);
  /// Gives the lead up (an orderly exit): the next candidate takes it at
  /// once. Nothing when `epoch` is not this process's.
  void release(uint64_t epoch);

  const host_arbiter_options& options() const;

  /// Removes the file (the strategy ended in order and no process uses it
  /// any more); its name is free for the next run.
  void remove_file();

  struct impl;

private:
  explicit host_arbiter(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace varsync
