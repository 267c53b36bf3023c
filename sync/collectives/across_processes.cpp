#include "sync/collectives/across_processes.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "core/logging.hpp"
#include "devices/host_kernels.hpp"
#include "sync/scatter_update.hpp"
#include "varsync/error.hpp"

// run_cross_process in named stages:
//
//   0. agree_across_processes  a plan with no items: the outcome alone (with
//                            a statement: agree_stating); done
//   1. choose_small_path     the small-plan shortcut, decided by the plan
//   2. reduce_small          (small) this process's partial results
//   3. agreement_round       (sync/collectives/agreement.cpp)
//   4. finish_small          (small) combine the partial results, apply; done
//   5. large_run::pack       items grouped by dtype and operation
//   6. large_run::reduce_locally      over this process's replicas
//   7. large_run::reduce_packs        one all-reduce per pack
//   8. large_run::narrow_widened      int32 results back from int64
//   9. large_run::move_items          broadcasts, gathers, row exchange,
//                                     the checks before any write
//  10. large_run::vote                a commit vote where a process may refuse
//  11. apply_results

namespace varsync {

namespace {

using namespace cross_process_wire;

void passed(const collective_plan& plan, const char* phase) {
  if (plan.on_phase)
    plan.on_phase(phase);
}

std::string item_name(const collective_plan& plan, size_t k) {
  auto& name = plan.items[k].name;
  return name.empty() ? "item " + std::to_string(k) : "'" + name + "'";
}

reduce_op combine_of(const collective_item& item) {
  return item.rop == reduce_op::mean ? reduce_op::sum : item.rop;
}

// Writes every item's result: the output, or uop on each component here.
caf::error apply_results(const collective_plan& plan,
                         const collective_buffers& buffers,
                         const std::vector<std::byte*>& result,
                         const std::vector<scatter_rows>& scatter_result = {}) {
  const auto slots = static_cast<size_t>(plan.num_replicas);
  for (size_t k = 0; k < plan.items.size(); ++k) {
    auto& item = plan.items[k];
    const auto bytes = static_cast<size_t>(item.count) * size_of(item.type);
    if (item.target == collective_target::output) {
      if (item.from_process >= 0)
        continue; // broadcast into the output already
      const auto n = item.gather ? plan.total_replicas : 1;
      if (bytes > 0)
        std::memcpy(buffers.items[k].output, result[k],
                    bytes * static_cast<size_t>(n));
      continue;
    }
    if (item.scatter) {
      auto& rows = scatter_result[k];
      const auto n = static_cast<int64_t>(rows.rows.size()) * item.row_elems;
      for (size_t r = 0; r < slots; ++r)
        host::scatter_apply(item.sop, item.type,
                            buffers.items[k].components[r], item.row_elems,
                            rows.rows, rows.values.raw(), 0, n);
      continue;
    }
    for (size_t r = 0; r < slots; ++r)
      host::apply_update(item.uop, item.type, buffers.items[k].components[r],
                         result[k],
                         0, item.count);
  }
  return {};
}

// Stage 1. Small floating plans take one round: each process's partial
// results travel with its agreement record and every process combines them
// in rank order (the same bits everywhere). The choice depends on the plan
// only, so processes that agree choose alike. The result: each item's
// offset in the payload, or nothing for the large path.
struct small_path {
  std::vector<size_t> offset;
  size_t payload_bytes = 0;
};

std::optional<small_path> choose_small_path(const collective_plan& plan) {
  bool small = !plan.local_error && !plan.items.empty();
  small_path path;
  path.offset.resize(plan.items.size());
  for (size_t k = 0; k < plan.items.size(); ++k) {
    auto& item = plan.items[k];
    small = small && is_floating(item.type) && !item.gather && !item.scatter
            && item.from_process < 0;
    // Each item at a multiple of its dtype's size: the kernels read and
    // write its elements in place (a float64 after a float32 was misaligned).
    const auto width = size_of(item.type);
    path.offset[k] = (path.payload_bytes + width - 1) / width * width;
    path.payload_bytes = path.offset[k]
                         + static_cast<size_t>(item.count) * width;
  }
  if (!small || path.payload_bytes > small_payload_limit)
    return std::nullopt;
  return path;
}

// Stage 2: this process's partial results, the agreement round's payload.
std::vector<std::byte> reduce_small(const collective_plan& plan,
                                    const collective_buffers& buffers,
                                    const small_path& path) {
  const auto slots = static_cast<size_t>(plan.num_replicas);
  std::vector<std::byte> payload(path.payload_bytes);
  for (size_t k = 0; k < plan.items.size(); ++k) {
    auto& item = plan.items[k];
    auto* y = payload.data() + path.offset[k];
    std::span<const void* const> inputs{buffers.items[k].inputs.data(),
                                        slots};
    if (item.first_only || item.require_equal) {
      if (item.count > 0)
        std::memcpy(y, inputs[0],
                    static_cast<size_t>(item.count) * size_of(item.type));
    } else {
      host::reduce(combine_of(item), item.type, y, inputs, 0, item.count);
    }
  }
  return payload;
}

// Stage 4, the small path's second half: combine the processes' partial
// results (in rank order) and apply them.
caf::error finish_small(const collective_plan& plan,
                        const collective_buffers& buffers,
                        std::vector<agreement_message>& all,
                        const std::vector<size_t>& offset,
                        int total_replicas) {
  std::vector<std::vector<std::byte>> ys(plan.items.size());
  std::vector<std::byte*> result(plan.items.size());
  std::vector<const void*> parts(all.size());
  for (size_t k = 0; k < plan.items.size(); ++k) {
    auto& item = plan.items[k];
    const auto bytes = static_cast<size_t>(item.count) * size_of(item.type);
    for (size_t r = 0; r < all.size(); ++r)
      parts[r] = all[r].payload + offset[k];
    auto& y = ys[k];
    y.resize(bytes);
    if (item.first_only || item.require_equal) {
      if (item.require_equal)
        for (size_t r = 1; r < all.size(); ++r)
          if (!host::bitwise_equal(parts[r], parts[0], bytes))
            return make_error(
              errc::aggregation_required,
              "variable " + item_name(plan, k) + " (" + plan.description
                + "): aggregation none needs equal values from every "
                  "replica, but process "
                + std::to_string(r)
                + "'s differ from process 0's; give the variable an "
                  "aggregation or contribute equal values. Nothing was "
                  "changed");
      if (bytes > 0)
        std::memcpy(y.data(), parts[0], bytes);
    } else {
      host::reduce(combine_of(item), item.type, y.data(), parts, 0,
                   item.count);
      if (item.rop == reduce_op::mean)
        host::split_assign(item.type, y.data(), y.data(), 0, item.count, 0,
                           total_replicas);
    }
    result[k] = y.data();
  }
  return apply_results(plan, buffers, result);
}

// S1 across processes: every process's rows of scatter item `k` (their
// number differs), each process in turn broadcasting to all, in rank
// order; only process 0's where the item takes replica 0's rows or needs
// every process's to equal them.
caf::error exchange_rows(const collective_item& item, const void* mine,
                         data_transport& group,
                         std::vector<scatter_rows>& out) {
  const auto width = size_of(item.type) * static_cast<size_t>(item.row_elems);
  const bool only_first = item.first_only || item.require_equal;
  std::vector<int64_t> counts(static_cast<size_t>(group.size()));
  const auto my_rows = static_cast<int64_t>(item.rows.size());
  if (auto err = group.all_gather(&my_rows, counts.data(), sizeof(int64_t)))
    return err;
  const int senders = only_first ? 1 : group.size();
  out.assign(static_cast<size_t>(senders), {});
  for (int p = 0; p < senders; ++p) {
    const auto k = counts[static_cast<size_t>(p)];
    if (k < 0 || k > (int64_t{1} << 40) / std::max<int64_t>(item.row_elems, 1))
      return make_error(errc::replica_failed,
                        "process " + std::to_string(p)
                          + " announced an impossible row count for a "
                            "scatter; nothing was changed");
    auto& part = out[static_cast<size_t>(p)];
    part.rows.resize(static_cast<size_t>(k));
    part.values = tensor::empty(item.type, {k, item.row_elems});
    if (p == group.rank()) {
      std::copy(item.rows.begin(), item.rows.end(), part.rows.begin());
      if (k > 0)
        std::memcpy(part.values.mutable_raw(), mine,
                    static_cast<size_t>(k) * width);
    }
    if (k == 0)
      continue;
    if (auto err = group.broadcast(part.rows.data(),
                                   static_cast<size_t>(k) * sizeof(int64_t), p))
      return err;
    if (auto err = group.broadcast(part.values.mutable_raw(),
                                   static_cast<size_t>(k) * width, p))
      return err;
  }
  return {};
}

// Stages 5 to 10: the large path. Every item's result lives in a buffer
// until every process has voted. Items reduced with the same dtype and
// operation share one buffer (a pack), so that a step of many small updates
// costs one round per kind, not one per variable. The buffers come from the
// host buffer pool, uninitialized: a fresh zeroed vector per step cost a
// write pass and a page fault per 4 KiB (measured: 8% of a 64 MiB step's
// CPU time).
class large_run {
public:
  large_run(const collective_plan& plan, collective_buffers& buffers,
            data_transport& group, const std::vector<int>& replicas_per_rank,
            int total_replicas)
    : plan_(plan),
      buffers_(buffers),
      group_(group),
      replicas_per_rank_(replicas_per_rank),
      total_replicas_(total_replicas),
      slots_(static_cast<size_t>(plan.num_replicas)),
      result_(plan.items.size(), nullptr),
      own_(plan.items.size()),
      where_(plan.items.size()),
      scattered_(plan.items.size()) {
  }

  caf::error run() {
    pack();
    reduce_locally();
    if (auto err = reduce_packs())
      return err;
    if (auto err = narrow_widened())
      return err;
    if (auto err = move_items())
      return err;
    passed(plan_, "data");
    if (auto err = vote())
      return err;
    passed(plan_, "voted");
    return apply_results(plan_, buffers_, result_, scattered_);
  }

private:
  struct packed {
    dtype type;
    reduce_op combine;
    size_t bytes = 0;
    tensor data;
    /// int32 sums and products travel in int64 (V4: a sum may pass through
    /// values outside int32 on the way, as in one process); `data` then
    /// receives the range-checked result.
    tensor wide;
    bool widened() const {
      return type == dtype::int32
             && (combine == reduce_op::sum || combine == reduce_op::prod);
    }
  };

  static bool reduced(const collective_item& item) {
    return !(item.first_only || item.require_equal || item.gather
             || item.scatter || item.from_process >= 0);
  }

  void note(vote_kind kind, size_t k, int64_t at) {
    if (vote_.kind == vote_ok)
      vote_ = {kind, static_cast<int32_t>(k), at};
  }

  int64_t* wide_of(size_t k) {
    auto& pk = packs_[where_[k].first];
    return pk.widened() ? pk.wide.mutable_data<int64_t>()
                            + where_[k].second / sizeof(int32_t)
                        : nullptr;
  }

  // Stage 5: the reduced items into packs, by dtype and operation.
  void pack() {
    for (size_t k = 0; k < plan_.items.size(); ++k) {
      auto& item = plan_.items[k];
      if (!reduced(item))
        continue;
      const auto bytes = static_cast<size_t>(item.count) * size_of(item.type);
      size_t p = 0;
      while (p < packs_.size()
             && (packs_[p].type != item.type
                 || packs_[p].combine != combine_of(item)))
        ++p;
      if (p == packs_.size())
        packs_.push_back({item.type, combine_of(item), 0, {}, {}});
      where_[k] = {p, packs_[p].bytes};
      packs_[p].bytes += bytes;
    }
    for (auto& pk : packs_) {
      const auto count = static_cast<int64_t>(pk.bytes / size_of(pk.type));
      pk.data = tensor::empty(pk.type, {count});
      if (pk.widened())
        pk.wide = tensor::empty(dtype::int64, {count});
    }
  }

  // Stage 6: this process's replicas reduced into the packs.
  void reduce_locally() {
    std::vector<const int32_t*> in32; // widened items' inputs, sized once
    for (size_t k = 0; k < plan_.items.size(); ++k) {
      auto& item = plan_.items[k];
      if (!reduced(item))
        continue;
      std::span<const void* const> inputs{buffers_.items[k].inputs.data(),
                                          slots_};
      auto* y = static_cast<std::byte*>(
                  packs_[where_[k].first].data.mutable_raw())
                + where_[k].second;
      result_[k] = y;
      if (auto* wide = wide_of(k)) {
        in32.resize(slots_);
        for (size_t r = 0; r < slots_; ++r)
          in32[r] = static_cast<const int32_t*>(inputs[r]);
        auto at = host::reduce_int32_widened(combine_of(item), wide, in32, 0,
                                             item.count);
        if (at >= 0)
          note(vote_local_overflow, k, at);
        continue;
      }
      if (!is_floating(item.type)) {
        auto at = host::first_overflow(combine_of(item), update_op::assign,
                                       item.type, inputs, nullptr, 0,
                                       item.count);
        if (at >= 0)
          note(vote_local_overflow, k, at);
      }
      host::reduce(combine_of(item), item.type, y, inputs, 0, item.count);
    }
  }

  // Stage 7: one all-reduce per pack between the processes (an overflow
  // there fails every process alike).
  caf::error reduce_packs() {
    for (auto& pk : packs_) {
      const auto count = static_cast<int64_t>(pk.bytes / size_of(pk.type));
      auto err = group_.all_reduce(pk.combine,
                                   pk.widened() ? dtype::int64 : pk.type,
                                   pk.widened() ? pk.wide.mutable_raw()
                                                : pk.data.mutable_raw(),
                                   count);
      if (!err)
        continue;
      if (has_code(err, errc::overflow))
        return make_error(errc::overflow,
                          plan_.description + ": the "
                            + std::string{to_string(pk.combine)} + " of "
                            + std::string{to_string(pk.type)}
                            + " values over every process does not fit the "
                              "dtype; nothing was changed");
      return err;
    }
    return {};
  }

  // Stage 8: the widened results back to int32: every process holds the
  // same sums, so each fails alike without a vote.
  caf::error narrow_widened() {
    for (size_t k = 0; k < plan_.items.size(); ++k) {
      auto* wide = result_[k] != nullptr ? wide_of(k) : nullptr;
      if (wide == nullptr)
        continue;
      auto& item = plan_.items[k];
      auto at = host::narrow_to_int32(static_cast<int32_t*>(
                                        static_cast<void*>(result_[k])),
                                      wide, 0, item.count);
      if (at >= 0)
        return make_error(errc::overflow,
                          "variable " + item_name(plan_, k) + " ("
                            + plan_.description + "): the "
                            + std::string{to_string(item.rop)}
                            + " of int32 values over every replica does not "
                              "fit the dtype at element "
                            + std::to_string(at) + "; nothing was changed");
    }
    return {};
  }

  // Stage 9: what each item moves besides the packs, in item order (the
  // same sequence of collectives on every process).
  caf::error move_items() {
    for (size_t k = 0; k < plan_.items.size(); ++k) {
      auto& item = plan_.items[k];
      caf::error err;
      if (item.from_process >= 0) {
        err = broadcast_from_process(k);
      } else if (item.scatter) {
        err = exchange_scatter(k);
      } else {
        if (item.gather)
          err = gather(k);
        else if (item.first_only || item.require_equal)
          err = broadcast_first(k);
        else if (item.rop == reduce_op::mean)
          host::split_assign(item.type, result_[k], result_[k], 0, item.count,
                             0, total_replicas_);
        if (!err)
          check_apply(k);
      }
      if (err)
        return err;
    }
    return {};
  }

  // Data from one process (item.from_process) into every output.
  caf::error broadcast_from_process(size_t k) {
    auto& item = plan_.items[k];
    const auto bytes = static_cast<size_t>(item.count) * size_of(item.type);
    if (item.from_process >= group_.size())
      return make_error(errc::replica_failed,
                        plan_.description + ": data from process "
                          + std::to_string(item.from_process) + " of "
                          + std::to_string(group_.size())
                          + "; nothing was changed");
    if (bytes > 0)
      return group_.broadcast(buffers_.items[k].output, bytes,
                              item.from_process);
    return {};
  }

  // S1: every process's rows, combined alike everywhere.
  caf::error exchange_scatter(size_t k) {
    auto& item = plan_.items[k];
    std::vector<scatter_rows> parts;
    if (auto err = exchange_rows(item, buffers_.items[k].inputs[0], group_,
                                 parts))
      return err;
    if (item.require_equal
        && (parts[0].rows != item.rows
            || !host::bitwise_equal(parts[0].values.raw(),
                                    buffers_.items[k].inputs[0],
                                    parts[0].values.nbytes())))
      note(vote_unequal, k, -1);
    variable_info rows_info; // what the row rules need to know
    rows_info.name = item.name;
    rows_info.type = item.type;
    rows_info.shape = {0, item.row_elems};
    // Process 0's rows, or the sum in rank order (equality was voted on
    // above). Every process combines the same rows, so each fails alike
    // (overflow, a zero divisor) without a vote.
    const contribution_rule across{
      reduce_op::sum, item.first_only || item.require_equal, false};
    auto y = combine_scatter_contributions(rows_info, item.sop, across, parts,
                                           item_name(plan_, k));
    if (!y)
      return make_error(static_cast<errc>(y.error().code()),
                        message_of(y.error()) + " (" + plan_.description
                          + ")");
    if (item.rop == reduce_op::mean && !y->rows.empty())
      host::split_assign(item.type, y->values.mutable_raw(), y->values.raw(),
                         0, y->values.size(), 0, total_replicas_);
    // V4: each component here, checked before any is written.
    if (!is_floating(item.type))
      for (size_t r = 0; r < slots_; ++r) {
        auto at = host::scatter_first_overflow(
          item.sop, item.type, buffers_.items[k].components[r],
          item.row_elems, y->rows, y->values.raw(), 0, y->values.size());
        if (at >= 0) {
          note(vote_apply_overflow, k, at);
          break;
        }
      }
    scattered_[k] = std::move(*y);
    return {};
  }

  // Each process in turn sends its replicas' components to all.
  caf::error gather(size_t k) {
    auto& item = plan_.items[k];
    const auto bytes = static_cast<size_t>(item.count) * size_of(item.type);
    auto& y = own_[k];
    y.resize(bytes * static_cast<size_t>(total_replicas_));
    size_t at = 0;
    for (int p = 0; p < static_cast<int>(replicas_per_rank_.size()); ++p) {
      const auto n
        = static_cast<size_t>(replicas_per_rank_[static_cast<size_t>(p)]);
      if (p == group_.rank())
        for (size_t r = 0; r < slots_; ++r)
          if (bytes > 0)
            std::memcpy(y.data() + at + r * bytes,
                        buffers_.items[k].inputs[r], bytes);
      if (auto err = group_.broadcast(y.data() + at, n * bytes, p))
        return err;
      at += n * bytes;
    }
    result_[k] = y.data();
    return {};
  }

  // Global replica 0 lives in process 0: its input is the value (first
  // replica), or the value every input must equal (aggregation none).
  caf::error broadcast_first(size_t k) {
    auto& item = plan_.items[k];
    const auto bytes = static_cast<size_t>(item.count) * size_of(item.type);
    auto& y = own_[k];
    y.resize(bytes);
    if (bytes > 0)
      std::memcpy(y.data(), buffers_.items[k].inputs[0], bytes);
    std::vector<std::byte> mine;
    if (item.require_equal)
      mine = y;
    if (auto err = group_.broadcast(y.data(), bytes, 0))
      return err;
    if (item.require_equal
        && !host::bitwise_equal(mine.data(), y.data(), bytes))
      note(vote_unequal, k, -1);
    result_[k] = y.data();
    return {};
  }

  // V4: the update of each component here, checked before any is written.
  void check_apply(size_t k) {
    auto& item = plan_.items[k];
    if (item.target != collective_target::components
        || is_floating(item.type) || item.uop == update_op::assign)
      return;
    const void* only[] = {result_[k]};
    for (size_t r = 0; r < slots_; ++r) {
      auto at = host::first_overflow(reduce_op::sum, item.uop, item.type, only,
                                     buffers_.items[k].components[r], 0,
                                     item.count);
      if (at >= 0) {
        note(vote_apply_overflow, k, at);
        break;
      }
    }
  }

  // Stage 10: a vote only where some process may refuse: equal-value
  // checks and integers (the plans are equal, so every process decides
  // alike). Every process votes; one that cannot apply stops all.
  caf::error vote() {
    bool may_refuse = false;
    for (auto& item : plan_.items)
      may_refuse = may_refuse || item.require_equal
                   || (!is_floating(item.type) && item.from_process < 0);
    if (!may_refuse)
      return {};
    std::vector<vote_record> votes(static_cast<size_t>(group_.size()));
    if (auto err = group_.all_gather(&vote_, votes.data(), sizeof(vote_)))
      return err;
    for (size_t r = 0; r < votes.size(); ++r)
      if (auto err = refusal(r, votes[r]))
        return err;
    return {};
  }

  // Process r's vote as the error it stands for (none: it can apply).
  caf::error refusal(size_t r, const vote_record& v) const {
    if (v.kind == vote_ok)
      return {};
    if (v.kind < vote_local_overflow || v.kind > vote_unequal || v.item < 0
        || static_cast<size_t>(v.item) >= plan_.items.size())
      return make_error(errc::replica_failed,
                        "process " + std::to_string(r)
                          + " sent an invalid vote for " + plan_.description
                          + "; nothing was changed");
    auto k = static_cast<size_t>(v.item);
    auto& item = plan_.items[k];
    auto where = "variable " + item_name(plan_, k) + " (" + plan_.description
                 + "): ";
    switch (v.kind) {
      case vote_unequal:
        return make_error(errc::aggregation_required,
                          where + "aggregation none needs equal values from "
                                  "every replica, but process "
                            + std::to_string(r)
                            + "'s differ from process 0's; give the "
                              "variable an aggregation or contribute equal "
                              "values. Nothing was changed");
      case vote_local_overflow:
        return make_error(errc::overflow,
                          where + "the " + std::string{to_string(item.rop)}
                            + " of " + std::string{to_string(item.type)}
                            + " values of process " + std::to_string(r)
                            + "'s replicas does not fit the dtype at element "
                            + std::to_string(v.element)
                            + "; nothing was changed");
      default:
        return make_error(errc::overflow,
                          where
                            + std::string{item.scatter ? to_string(item.sop)
                                                       : to_string(item.uop)}
                            + " overflows "
                            + std::string{to_string(item.type)}
                            + " at element " + std::to_string(v.element)
                            + " on a replica of process " + std::to_string(r)
                            + "; nothing was changed");
    }
  }

  const collective_plan& plan_;
  collective_buffers& buffers_;
  data_transport& group_;
  const std::vector<int>& replicas_per_rank_;
  const int total_replicas_;
  const size_t slots_;
  std::vector<packed> packs_;
  std::vector<std::byte*> result_;
  std::vector<std::vector<std::byte>> own_; // broadcast items
  std::vector<std::pair<size_t, size_t>> where_; // pack, offset
  std::vector<scatter_rows> scattered_;
  vote_record vote_;
};

} // namespace

caf::error run_cross_process(const collective_plan& plan,
                             collective_buffers& buffers, process_group& group,
                             const std::vector<int>& replicas_per_rank) {
  // An outcome the processes share and nothing else (a training step, a
  // checkpoint, a barrier, a destroy): the agreement round is the whole
  // operation.
  if (plan.items.empty()) {
    auto err = plan.stated ? agree_stating(plan, group)
                           : agree_across_processes(plan, group);
    if (!err)
      passed(plan, "agreed");
    return err;
  }
  int total_replicas = 0;
  for (auto n : replicas_per_rank)
    total_replicas += n;
  const auto small = choose_small_path(plan);
  std::vector<std::byte> payload;
  if (small)
    payload = reduce_small(plan, buffers, *small);
  std::vector<agreement_message> all;
  if (auto err = agreement_round(plan, group, payload, all, plan.local_error))
    return err;
  passed(plan, small ? "data" : "agreed"); // a small plan's data came with it
  if (small)
    return finish_small(plan, buffers, all, small->offset, total_replicas);
  return large_run{plan, buffers, group.transport(), replicas_per_rank,
                   total_replicas}
    .run();
}

namespace {

class across_processes final : public collective_algorithm {
public:
  explicit across_processes(process_membership m)
    : m_(std::move(m)),
      description_(m_.group->describe() + ", "
                   + std::to_string(m_.total_replicas) + " replicas in all") {
  }

  const std::string& description() const override {
    return description_;
  }

  collective_workers workers() const override {
    return collective_workers::driver;
  }

  caf::error run(const collective_plan& plan, collective_buffers& buffers,
                 int, int) override {
    if (!prepared_) { // the driver's own thread, from now on
      m_.group->transport().block_signals();
      prepared_ = true;
    }
    auto err = run_cross_process(plan, buffers, *m_.group,
                                 m_.replicas_per_rank);
    if (err)
      log()->debug("collective across processes failed: {}", describe(err));
    return err;
  }

private:
  process_membership m_;
  std::string description_;
  bool prepared_ = false;
};

} // namespace

std::shared_ptr<collective_algorithm>
make_across_processes(process_membership membership) {
  return std::make_shared<across_processes>(std::move(membership));
}

} // namespace varsync
