#pragma once
// Distributed input (docs/input.md, rules I1-I9 of docs/semantics.md): a
// sampler that shares the N items of a dataset among a strategy's replicas,
// by global replica id, in one process or across processes, the way torch's
// DistributedSampler and TensorFlow's distributed datasets do.
//
// Every process computes the same shares from the same options, without
// communication: the epoch's order is a permutation of 0 .. N-1 drawn from
// (seed, epoch) by a portable generator (splitmix64 and Fisher-Yates), and
// each step hands out the next global batch of that order, replica r taking
// the batch's items r, r + R, r + 2R, ... (R replicas).

#include <cstdint>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

namespace varsync::input {

/// What an epoch does with the items left over when N is not a multiple of
/// the global batch size.
enum class uneven_end : uint8_t {
  /// Drop them: every step has a full global batch (torch's drop_last).
  drop,
  /// Fill the last global batch by repeating items from the start of the
  /// epoch's order (torch's padding, drop_last = false).
  pad,
  /// Neither: the last step's batches are smaller and may differ in size
  /// between replicas (by one item at most; a replica may get none).
  partial,
};

struct sampler_options {
  /// N: the dataset's items are 0 .. N-1.
  int64_t num_items = 0;
  /// The items of one step over every replica; a multiple of the replica
  /// count. 0: one item per replica.
  int64_t global_batch_size = 0;
  /// With `epoch`, chooses the epoch's order (unused without shuffle).
  uint64_t seed = 0;
  /// False: every epoch takes the items in order 0 .. N-1.
  bool shuffle = true;
  uneven_end end = uneven_end::pad;
};

/// Where a sampler stands: what a checkpoint keeps (sampler_checkpoint.hpp).
struct sampler_position {
  /// False until the first begin_epoch.
  bool started = false;
  int64_t epoch = 0;
  /// Items of the epoch's order handed out or dropped: always a prefix of
  /// the order, so the rest can be shared by any number of replicas.
  int64_t offset = 0;
  /// Steps handed out in this epoch.
  int64_t step = 0;
};

/// One step's items: items[r] are replica r's (global id), in order.
struct step_items {
  int64_t epoch = 0;
  int64_t step = 0;
  std::vector<std::vector<int64_t>> items;
  /// The items of the step over every replica (for an exact global mean).
  int64_t global_count() const;
};

/// TF's InputContext.get_per_replica_batch_size: global / replicas, or
/// invalid_argument when the replicas do not divide it (or either is < 1).
caf::expected<int64_t> per_replica_batch_size(int64_t global_batch_size,
                                              int num_replicas);

class distributed_sampler {
public:
  /// A sampler for `num_replicas` replicas (all of the strategy's, in every
  /// process). invalid_argument, naming what was expected: no replicas, an
  /// empty dataset, a global batch size the replicas do not divide, or a
  /// dataset that `drop` would leave without a single full batch.
  static caf::expected<distributed_sampler> create(sampler_options options,
                                                   int num_replicas);

  const sampler_options& options() const { return options_; }
  int num_replicas() const { return num_replicas_; }
  int64_t per_replica_batch_size() const {
    return options_.global_batch_size / num_replicas_;
  }
  const sampler_position& position() const { return position_; }
  /// True before the first epoch and once the current one is exhausted.
  bool epoch_done() const;

  /// Starts `epoch` (>= 0) at its first item. Each epoch's order is used
  /// once: an epoch that is not after the current one (its seed already
  /// consumed) is invalid_argument and changes nothing (restore a
  /// checkpoint to go back). out_of_memory when the order (8 bytes an
  /// item) does not fit.
  caf::error begin_epoch(int64_t epoch);

  /// The next step's items of every replica. invalid_argument when no epoch
  /// is running or it is exhausted (changes nothing).
  caf::expected<step_items> next();

  /// What each replica gets from here to the end of the epoch, the next
  /// steps' items joined (position() unchanged). At the start of an epoch
  /// with shuffle = false and one item per replica per step: the shares of
  /// torch's DistributedSampler.
  caf::expected<std::vector<std::vector<int64_t>>> remaining_shares() const;

  /// Continues from `position` (a checkpoint's, perhaps written with other
  /// replica counts): the rest of its epoch is shared among this sampler's
  /// replicas. checkpoint_corrupt for a position outside the dataset,
  /// nothing changed.
  caf::error resume(const sampler_position& position);

private:
  distributed_sampler(sampler_options options, int num_replicas);

  /// The item at position p of the epoch's order (p >= N: the padding).
  int64_t item_at(int64_t p) const;
  /// How many positions the step at `offset` spans (0: the epoch is over).
  int64_t step_span(int64_t offset) const;
  /// Where the epoch stands after the step at `offset`.
  int64_t offset_after(int64_t offset) const;

  sampler_options options_;
  int num_replicas_ = 0;
  sampler_position position_;
  std::vector<int64_t> order_;
};

} // namespace varsync::input
