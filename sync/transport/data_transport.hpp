#pragma once
// The data plane of the processes of a strategy: blocking collectives over
// host memory between the ranks of a group, and nothing else (who belongs,
// who orders what and who is still alive is the control plane's,
// sync/transport/control_plane.hpp). Two transports implement it: a shared memory
// segment when every process runs on one host (sync/shm) and Gloo over TCP
// (sync/gloo); the joiner chooses one once, when the group is joined
// (actors/cluster/gloo_process_group.cpp), and every collective then goes to
// it. Blocking: a transport is used from a thread of its own (the
// strategy's process collective actor), never from a CAF scheduler thread.

#include <cstddef>
#include <cstdint>
#include <string>

#include <caf/error.hpp>

#include "varsync/dtype.hpp"
#include "varsync/synchronization.hpp"

namespace varsync {

class data_transport {
public:
  virtual ~data_transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "gloo over TCP, rank 1 of 2 (...)".
  virtual std::string describe() const = 0;

  /// Prepares the calling thread for the collectives (a transport may need
  /// signals blocked there); called once by the thread that runs them.
  virtual void block_signals() {}

  /// data = op over the ranks' data, in place (the transport's contract:
  /// host kernels' arithmetic, overflow on every rank, replica_failed when a
  /// peer is gone or late; after that the transport is unusable).
  virtual caf::error all_reduce(reduce_op op, dtype type, void* data,
                                int64_t count)
    = 0;
  /// data = root's data on every rank.
  virtual caf::error broadcast(void* data, size_t bytes, int root) = 0;
  /// out = every rank's `bytes` of `in`, in rank order.
  virtual caf::error all_gather(const void* in, void* out, size_t bytes) = 0;
};

// What every transport refuses, in the same words (the transport's `who`
// first): invalid_argument for an invalid op or dtype, the mean of an
// integer dtype (convert to float64 first), a bad buffer or root.
caf::error check_all_reduce_input(const std::string& who, reduce_op op,
                                  dtype type, const void* data,
                                  int64_t count);
caf::error check_broadcast_input(const std::string& who, const void* data,
                                 size_t bytes, int root, int size);
caf::error check_all_gather_input(const std::string& who, const void* in,
                                  const void* out, size_t bytes);
/// overflow on every rank (V4): an integer result that does not fit.
caf::error all_reduce_overflow(const std::string& who, reduce_op op,
                               dtype type);

} // namespace varsync
