#include "varsync/ext/sampler.hpp"

#include <algorithm>
#include <new>
#include <string>
#include <utility>

#include "input/epoch_order.hpp"
#include "varsync/error.hpp"

namespace varsync::input {

namespace {

caf::error bad(std::string what) {
  return make_error(errc::invalid_argument, "distributed_sampler: " + std::move(what));
}

std::string str(int64_t x) { return std::to_string(x); }

// The order holds N int64 items: a dataset too large for memory is an
// error value, not an exception.
caf::expected<std::vector<int64_t>> draw_order(const sampler_options& o,
                                               int64_t epoch) {
  try {
    return epoch_order(o.num_items, o.seed, epoch, o.shuffle);
  } catch (const std::bad_alloc&) {
    return make_error(errc::out_of_memory,
                      "distributed_sampler: no memory for the order of "
                        + str(o.num_items) + " items");
  }
}

} // namespace

int64_t step_items::global_count() const {
  int64_t n = 0;
  for (const auto& share : items)
    n += static_cast<int64_t>(share.size());
  return n;
}

distributed_sampler::distributed_sampler(sampler_options options, int num_replicas)
  : options_(std::move(options)), num_replicas_(num_replicas) {}

caf::expected<distributed_sampler>
distributed_sampler::create(sampler_options options, int num_replicas) {
  if (num_replicas < 1)
    return bad("expected at least one replica, got " + str(num_replicas));
  if (options.num_items < 1)
    return bad("the dataset is empty (num_items " + str(options.num_items)
               + "); expected at least one item");
  if (options.global_batch_size == 0)
    options.global_batch_size = num_replicas;
  auto per_replica = input::per_replica_batch_size(options.global_batch_size,
                                                   num_replicas);
  if (!per_replica)
    return bad(message_of(per_replica.error()));
  if (options.end != uneven_end::drop && options.end != uneven_end::pad
      && options.end != uneven_end::partial)
    return bad("uneven_end " + str(static_cast<int>(options.end))
               + " is not drop, pad or partial");
  if (options.end == uneven_end::drop
      && options.num_items < options.global_batch_size)
    return bad("uneven_end::drop would drop every item: " + str(options.num_items)
               + " items make no global batch of "
               + str(options.global_batch_size));
  return distributed_sampler{std::move(options), num_replicas};
}

int64_t distributed_sampler::item_at(int64_t p) const {
  const int64_t n = options_.num_items;
  // Padding repeats the order from its start, cyclically (as torch does).
  return order_[static_cast<size_t>(p < n ? p : (p - n) % n)];
}

int64_t distributed_sampler::step_span(int64_t offset) const {
  const int64_t n = options_.num_items;
  const int64_t b = options_.global_batch_size;
  if (offset >= n)
    return 0;
  switch (options_.end) {
    case uneven_end::drop: return n - offset >= b ? b : 0;
    case uneven_end::pad: return b;
    case uneven_end::partial: return std::min(b, n - offset);
  }
  return 0;
}

int64_t distributed_sampler::offset_after(int64_t offset) const {
  const int64_t n = options_.num_items;
  const int64_t b = options_.global_batch_size;
  int64_t next = std::min(offset + b, n);
  // The remainder drop leaves counts as handed out, so that a checkpoint
  // resumed with a smaller batch does not serve it.
  if (options_.end == uneven_end::drop && n - next < b)
    next = n;
  return next;
}

bool distributed_sampler::epoch_done() const {
  return !position_.started || step_span(position_.offset) == 0;
}

caf::error distributed_sampler::begin_epoch(int64_t epoch) {
  if (epoch < 0)
    return bad("expected an epoch >= 0, got " + str(epoch));
  if (position_.started && epoch <= position_.epoch)
    return bad("the order of epoch " + str(epoch)
               + " was already drawn (the sampler is in epoch "
               + str(position_.epoch)
               + "); expected an epoch after it: each epoch's seed is used "
                 "once (restore a checkpoint to repeat an epoch)");
  auto order = draw_order(options_, epoch);
  if (!order)
    return std::move(order.error());
  order_ = std::move(*order);
  position_ = sampler_position{true, epoch, 0, 0};
  return caf::none;
}

caf::expected<step_items> distributed_sampler::next() {
  if (!position_.started)
    return bad("no epoch is running; expected begin_epoch first");
  const int64_t offset = position_.offset;
  const int64_t span = step_span(offset);
  if (span == 0)
    return bad("epoch " + str(position_.epoch) + " is exhausted after "
               + str(position_.step) + " steps; expected begin_epoch("
               + str(position_.epoch + 1) + ")");
  step_items out{position_.epoch, position_.step, {}};
  out.items.resize(static_cast<size_t>(num_replicas_));
  const int64_t per_replica = per_replica_batch_size();
  for (int r = 0; r < num_replicas_; ++r) {
    // Replica r takes the batch's positions r, r + R, ...: the same items
    // torch's DistributedSampler gives rank r, batched in order.
    auto& mine = out.items[static_cast<size_t>(r)];
    for (int64_t j = 0; j < per_replica; ++j) {
      const int64_t p = r + j * num_replicas_;
      if (p < span)
        mine.push_back(item_at(offset + p));
    }
  }
  position_.offset = offset_after(offset);
  ++position_.step;
  return out;
}

caf::expected<std::vector<std::vector<int64_t>>>
distributed_sampler::remaining_shares() const {
  auto copy = *this;
  std::vector<std::vector<int64_t>> shares(static_cast<size_t>(num_replicas_));
  if (!position_.started)
    return bad("no epoch is running; expected begin_epoch first");
  while (!copy.epoch_done()) {
    auto step = copy.next();
    if (!step)
      return std::move(step.error());
    for (size_t r = 0; r < shares.size(); ++r)
      shares[r].insert(shares[r].end(), step->items[r].begin(),
                       step->items[r].end());
  }
  return shares;
}

caf::error distributed_sampler::resume(const sampler_position& position) {
  if (!position.started) {
    position_ = sampler_position{};
    order_.clear();
    return caf::none;
  }
  if (position.epoch < 0 || position.step < 0 || position.offset < 0
      || position.offset > options_.num_items)
    return make_error(errc::checkpoint_corrupt,
                      "distributed_sampler: position epoch " + str(position.epoch)
                        + ", offset " + str(position.offset) + ", step "
                        + str(position.step) + " is outside a dataset of "
                        + str(options_.num_items) + " items");
  auto order = draw_order(options_, position.epoch);
  if (!order)
    return std::move(order.error());
  order_ = std::move(*order);
  position_ = position;
  return caf::none;
}

} // namespace varsync::input
