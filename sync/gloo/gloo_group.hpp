#pragma once
// A group of processes that reduce host memory through Gloo over TCP: the
// transport under the cross-process collective. Rendezvous goes through the
// control plane (control_store); Gloo's calls block, so a group is used from
// one thread of its own (a detached actor or a plain thread), never from a
// CAF scheduler thread.
//
// Reductions use varsync's host kernels (devices/host_kernels.hpp) as Gloo's
// reduce function, so NaN propagation and the 16-bit types behave as in one
// process; the mean is the sum followed by one division; integer sums and
// products that do not fit the dtype fail with `overflow` on every rank
// (V4). Every rank ends with the same bits (each element is reduced once and
// sent to all), though summation order differs from the in-process
// collective.

#include <chrono>
#include <csignal>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "messages/rendezvous_store.hpp"
#include "sync/transport/data_transport.hpp"
#include "varsync/dtype.hpp"
#include "varsync/synchronization.hpp"

namespace varsync {

struct gloo_group_options {
  int rank = 0;
  int size = 1;
  /// The address Gloo's TCP transport listens on: loopback unless the group
  /// spans hosts.
  std::string bind_host = "127.0.0.1";
  /// Bounds every collective (and the rendezvous, unless join_timeout).
  std::chrono::milliseconds timeout{30000};
  /// Bounds the rendezvous; 0: `timeout`.
  std::chrono::milliseconds join_timeout{0};
  /// Distinguishes groups that share a store.
  std::string name = "varsync";
};

class gloo_group final : public data_transport {
public:
  /// Joins the group: every rank's call returns once all `size` ranks have
  /// connected (a full mesh), or fails with `timeout` naming the deadline
  /// when a rank never arrives. invalid_argument for a bad rank or size.
  static caf::expected<std::unique_ptr<gloo_group>>
  join(caf::actor_system& sys, rendezvous_store_actor store,
       gloo_group_options options);

  ~gloo_group();
  gloo_group(const gloo_group&) = delete;
  gloo_group& operator=(const gloo_group&) = delete;

  int rank() const override;
  int size() const override;
  /// "gloo over TCP, rank 1 of 2".
  std::string describe() const override;

  /// Blocks SIGPIPE in the calling thread and returns the mask before:
  /// Gloo writes to its sockets without MSG_NOSIGNAL, so a thread that runs
  /// collectives would be killed by a peer's death instead of getting an
  /// error. Every thread that uses a group must block it.
  static sigset_t block_sigpipe();
  static void restore_signals(const sigset_t& old);
  /// block_sigpipe() for the thread that runs the collectives.
  void block_signals() override;

  /// data[i] = op over the ranks' data[i], in place, for `count` elements.
  /// invalid_argument for the mean of an integer dtype (convert first);
  /// overflow on every rank for an integer result that does not fit;
  /// replica_failed naming the failure when a peer is gone or misses the
  /// deadline (the group is then unusable: create a new one).
  caf::error all_reduce(reduce_op op, dtype type, void* data,
                        int64_t count) override;

  /// data = root's data on every rank (`bytes` on each); replica_failed as
  /// for all_reduce.
  caf::error broadcast(void* data, size_t bytes, int root) override;

  /// out = the ranks' `bytes` of `in`, in rank order (out holds size()
  /// times `bytes`); replica_failed as for all_reduce.
  caf::error all_gather(const void* in, void* out, size_t bytes) override;

  struct impl;

private:
  explicit gloo_group(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace varsync
