#pragma once
// Processes on one host that reduce host memory through a shared segment:
// the transport under the cross-process collective when every process of a
// strategy runs on the same host (Gloo over TCP otherwise). Gloo's TCP I/O
// thread polls while a sender holds a pair's lock, which on a small machine
// takes the CPU from the processes doing the work (docs/multiprocess.md);
// here the callers themselves copy and reduce, and wait on a futex in the
// segment.
//
// The segment holds, per rank, two slots (alternate chunks use alternate
// slots, so a rank may fill the next chunk's slot while others still read
// the last chunk's result) and a barrier. An all-reduce of a chunk: every
// rank copies the other ranks' slices of its data into its slot; barrier;
// rank r reduces slice r over every rank's data in rank order (its own
// from its buffer, the others' from their slots) into its buffer and its
// slot; barrier; every rank copies the other slices' results out of their
// ranks' slots. Every rank ends with the same bits, and moves a slice less
// than a copy of all its data would (2 ranks: 0.5-0.9x the time of
// copying it all in and out, from 256 KiB to 64 MiB). With more ranks than
// cores, where the measurements disagree, each rank still copies all its
// data in and the whole result out of rank 0's slot. Larger buffers go in
// chunks of the slot size.
//
// Blocking, and used from one thread per process (as gloo_group). A wait
// past the deadline, a peer process that exited (seen through its process
// id when it shares this process's pid namespace), or `abandon()`
// returning an error fails the call with replica_failed naming the ranks
// that did not arrive; the group is then unusable.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "sync/transport/data_transport.hpp"
#include "varsync/dtype.hpp"
#include "varsync/synchronization.hpp"

namespace varsync {

struct shared_memory_group_options {
  int rank = 0;
  int size = 1;
  /// Bytes each rank copies per chunk (each rank has two slots).
  size_t slot_bytes = size_t{2} << 20;
  /// Bounds every wait of a collective.
  std::chrono::milliseconds timeout{30000};
  /// Polled while waiting: an error stops the wait (the strategy lost a
  /// process through its control plane).
  std::function<caf::error()> abandon;
  /// How all_reduce moves a chunk (see above): sliced with no more ranks
  /// than cores, else whole; tests choose.
  enum class layout { automatic, sliced, whole } chunk_layout
    = layout::automatic;
};

class shared_memory_group final : public data_transport {
public:
  /// Rank 0 creates the segment under a fresh name (see name()).
  static caf::expected<std::unique_ptr<shared_memory_group>>
  create(shared_memory_group_options options);
  /// The other ranks open rank 0's segment; fails when it is not on this
  /// host (no such segment) or was made for another group size.
  static caf::expected<std::unique_ptr<shared_memory_group>>
  open(const std::string& name, shared_memory_group_options options);

  ~shared_memory_group();
  shared_memory_group(const shared_memory_group&) = delete;
  shared_memory_group& operator=(const shared_memory_group&) = delete;

  /// The segment's name, for the other ranks' open().
  const std::string& name() const;
  /// Removes the name (rank 0, once every rank has opened it): the memory
  /// goes when the last process unmaps it, whatever way it exits.
  void unlink();

  int rank() const override;
  int size() const override;
  /// "shared memory (one host), rank 1 of 2".
  std::string describe() const override;

  /// data[i] = op over the ranks' data[i], in place. Same contract as
  /// gloo_group::all_reduce: invalid_argument for an integer mean or a bad
  /// buffer, overflow on every rank for an integer result that does not
  /// fit, replica_failed when a peer is gone or late (`data` then holds
  /// some results and some inputs, as with Gloo).
  caf::error all_reduce(reduce_op op, dtype type, void* data,
                        int64_t count) override;
  /// data = root's data on every rank.
  caf::error broadcast(void* data, size_t bytes, int root) override;
  /// out = the ranks' `bytes` of `in`, in rank order.
  caf::error all_gather(const void* in, void* out, size_t bytes) override;

  struct impl;

private:
  explicit shared_memory_group(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace varsync
