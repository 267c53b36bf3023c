#include "sync/collectives/across_processes.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <span>
#include <vector>

#include "core/logging.hpp"
#include "devices/host_kernels.hpp"
#include "sync/scatter_update.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace {

// FNV-1a, then a final mix: the processes compare these, nothing secret.
struct hasher {
  uint64_t h = 1469598103934665603ull;
  void add(const void* data, size_t n) {
    auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
      h ^= p[i];
      h *= 1099511628211ull;
    }
  }
  template <class T>
  void add_value(T v) {
    add(&v, sizeof(v));
  }
};

using namespace cross_process_wire;

void put_text(agreement_record& r, const std::string& s) {
  auto n = std::min(s.size(), sizeof(r.text) - 1);
  std::memcpy(r.text, s.data(), n);
  r.text[n] = '\0';
}

std::string item_name(const collective_plan& plan, size_t k) {
  auto& name = plan.items[k].name;
  return name.empty() ? "item " + std::to_string(k) : "'" + name + "'";
}

caf::error agree(const collective_plan& plan, process_group& group,
                 const std::vector<std::byte>& payload,
                 std::vector<agreement_message>& all,
                 const caf::error& local_error) {
  agreement_message mine_msg{};
  auto& mine = mine_msg.record;
  if (!payload.empty())
    std::memcpy(mine_msg.payload, payload.data(),
                std::min(payload.size(), small_payload_limit));
  mine.fingerprint = fingerprint_of(plan);
  mine.busy_micros = group.rounds().busy_micros();
  if (local_error) {
    auto code = code_of(local_error);
    mine.code = static_cast<uint32_t>(code == errc::none ? errc::replica_failed
                                                         : code);
    put_text(mine, code == errc::none ? caf::to_string(local_error)
                                      : message_of(local_error));
  } else {
    put_text(mine, plan.description);
  }
  std::vector<agreement_message> msgs(static_cast<size_t>(group.size()));
  const auto arrived = std::chrono::steady_clock::now();
  if (auto err = group.all_gather(&mine_msg, msgs.data(), sizeof(mine_msg)))
    return err;
  std::vector<uint32_t> busy;
  for (auto& m : msgs)
    busy.push_back(m.record.busy_micros);
  group.rounds().record(busy, group.rank(),
                        std::chrono::steady_clock::now() - arrived,
                        plan.description);
  all = std::move(msgs);
  std::vector<agreement_record*> recs;
  for (auto& m : all) {
    m.record.text[sizeof(m.record.text) - 1] = '\0';
    recs.push_back(&m.record);
  }
  auto at = [&recs](size_t r) -> agreement_record& { return *recs[r]; };
  // A local failure first: this process's own error is the best one here.
  if (local_error)
    return local_error;
  for (size_t r = 0; r < recs.size(); ++r)
    if (at(r).code > static_cast<uint32_t>(errc::overloaded))
      return make_error(errc::replica_failed,
                        "process " + std::to_string(r)
                          + " sent an agreement record with the unknown "
                            "error code "
                          + std::to_string(at(r).code) + " for "
                          + plan.description + "; nothing was changed");
  for (size_t r = 0; r < recs.size(); ++r)
    if (at(r).code != 0)
      return make_error(static_cast<errc>(at(r).code),
                        "process " + std::to_string(r) + " failed "
                          + plan.description + ": " + at(r).text
                          + "; nothing was changed");
  for (size_t r = 0; r < recs.size(); ++r)
    if (at(r).fingerprint != at(0).fingerprint)
      return make_error(errc::mismatched_replica_updates,
                        "the processes issued different operations: process "
                          + std::to_string(r) + " issued " + at(r).text
                          + " while process 0 issued " + at(0).text
                          + "; nothing was changed");
  return {};
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

// The small path's second half: combine the processes' partial results
// (in rank order) and apply them.
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
      const auto combine = item.rop == reduce_op::mean ? reduce_op::sum
                                                       : item.rop;
      host::reduce(combine, item.type, y.data(), parts, 0, item.count);
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
                         process_group& group,
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

} // namespace

caf::error agree_across_processes(const collective_plan& plan,
                                  process_group& group,
                                  const caf::error& local) {
  std::vector<agreement_message> all;
  return agree(plan, group, {}, all, local ? local : plan.local_error);
}

caf::error vote_across_processes(const caf::error& local, process_group& group,
                                 const std::string& what) {
  struct commit_record {
    uint32_t code = 0; // errc, 0: can apply
    char text[124] = {};
  };
  commit_record mine;
  if (local) {
    auto code = code_of(local);
    mine.code = static_cast<uint32_t>(code == errc::none ? errc::replica_failed
                                                         : code);
    auto msg = code == errc::none ? caf::to_string(local) : message_of(local);
    auto n = std::min(msg.size(), sizeof(mine.text) - 1);
    std::memcpy(mine.text, msg.data(), n);
  }
  std::vector<commit_record> all(static_cast<size_t>(group.size()));
  if (auto err = group.all_gather(&mine, all.data(), sizeof(mine)))
    return local ? local : err;
  if (local)
    return local;
  for (size_t r = 0; r < all.size(); ++r) {
    auto& v = all[r];
    if (v.code == 0)
      continue;
    v.text[sizeof(v.text) - 1] = '\0';
    const auto code = v.code > static_cast<uint32_t>(errc::overloaded)
                        ? errc::replica_failed
                        : static_cast<errc>(v.code);
    return make_error(code, "process " + std::to_string(r) + " could not "
                              "complete " + what + ": " + v.text
                              + "; nothing was changed");
  }
  return {};
}

uint64_t fingerprint_of_bytes(const void* data, size_t bytes) {
  hasher h;
  // Eight bytes at a time: values may be large.
  auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h.h = (h.h ^ w) * 0x100000001b3ull;
    h.h ^= h.h >> 29;
  }
  h.add(p + i, bytes - i);
  h.add_value(bytes);
  return h.h;
}

uint64_t fingerprint_of(const collective_plan& plan) {
  hasher h;
  h.add(plan.description.data(), plan.description.size());
  h.add_value(plan.items.size());
  for (auto& item : plan.items) {
    h.add(item.name.data(), item.name.size());
    h.add_value(static_cast<uint8_t>(item.type));
    // A scatter's rows are this process's own (S1): what must agree is the
    // op and the row length, not how many rows each process names.
    h.add_value(item.scatter ? item.row_elems : item.count);
    h.add_value(item.scatter);
    h.add_value(static_cast<uint8_t>(item.sop));
    h.add_value(static_cast<uint8_t>(item.rop));
    h.add_value(item.first_only);
    h.add_value(item.require_equal);
    h.add_value(item.gather);
    h.add_value(item.from_process);
    h.add_value(static_cast<uint8_t>(item.uop));
    h.add_value(static_cast<uint8_t>(item.source));
    h.add_value(static_cast<uint8_t>(item.target));
  }
  return h.h;
}

caf::error run_cross_process(const collective_plan& plan,
                             collective_buffers& buffers, process_group& group,
                             const std::vector<int>& replicas_per_rank) {
  int total_replicas = 0;
  for (auto n : replicas_per_rank)
    total_replicas += n;
  const auto slots = static_cast<size_t>(plan.num_replicas);
  // Small floating plans take one round: each process's partial results
  // travel with its agreement record and every process combines them in
  // rank order (the same bits everywhere). The choice depends on the plan
  // only, so processes that agree choose alike.
  bool small = !plan.local_error && !plan.items.empty();
  size_t payload_bytes = 0;
  std::vector<size_t> offset(plan.items.size());
  for (size_t k = 0; k < plan.items.size(); ++k) {
    auto& item = plan.items[k];
    small = small && is_floating(item.type) && !item.gather && !item.scatter
            && item.from_process < 0;
    // Each item at a multiple of its dtype's size: the kernels read and
    // write its elements in place (a float64 after a float32 was misaligned).
    const auto width = size_of(item.type);
    offset[k] = (payload_bytes + width - 1) / width * width;
    payload_bytes = offset[k] + static_cast<size_t>(item.count) * width;
  }
  small = small && payload_bytes <= small_payload_limit;
  std::vector<std::byte> payload;
  if (small) {
    payload.resize(payload_bytes);
    for (size_t k = 0; k < plan.items.size(); ++k) {
      auto& item = plan.items[k];
      auto* y = payload.data() + offset[k];
      std::span<const void* const> inputs{buffers.items[k].inputs.data(),
                                         slots};
      if (item.first_only || item.require_equal) {
        if (item.count > 0)
          std::memcpy(y, inputs[0],
                      static_cast<size_t>(item.count) * size_of(item.type));
      } else {
        const auto combine = item.rop == reduce_op::mean ? reduce_op::sum
                                                         : item.rop;
        host::reduce(combine, item.type, y, inputs, 0, item.count);
      }
    }
  }
  std::vector<agreement_message> all;
  if (auto err = agree(plan, group, payload, all, plan.local_error))
    return err;
  if (small)
    return finish_small(plan, buffers, all, offset, total_replicas);
  const size_t n_items = plan.items.size();
  // Every item's result lives in a buffer until every process has voted.
  // Items reduced with the same dtype and operation share one buffer, so
  // that a step of many small updates costs one round per kind, not one per
  // variable.
  // The buffers come from the host buffer pool, uninitialized: a fresh
  // zeroed vector per step cost a write pass and a page fault per 4 KiB
  // (measured: 8% of a 64 MiB step's CPU time).
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
  std::vector<packed> packs;
  std::vector<std::byte*> result(n_items, nullptr);
  std::vector<std::vector<std::byte>> own(n_items); // broadcast items
  std::vector<std::pair<size_t, size_t>> where(n_items); // pack, offset
  auto combine_of = [](const collective_item& item) {
    return item.rop == reduce_op::mean ? reduce_op::sum : item.rop;
  };
  for (size_t k = 0; k < n_items; ++k) {
    auto& item = plan.items[k];
    const auto bytes = static_cast<size_t>(item.count) * size_of(item.type);
    if (item.first_only || item.require_equal || item.gather || item.scatter
        || item.from_process >= 0)
      continue;
    size_t p = 0;
    while (p < packs.size()
           && (packs[p].type != item.type
               || packs[p].combine != combine_of(item)))
      ++p;
    if (p == packs.size())
      packs.push_back({item.type, combine_of(item), 0, {}, {}});
    where[k] = {p, packs[p].bytes};
    packs[p].bytes += bytes;
  }
  for (auto& pk : packs) {
    const auto count = static_cast<int64_t>(pk.bytes / size_of(pk.type));
    pk.data = tensor::empty(pk.type, {count});
    if (pk.widened())
      pk.wide = tensor::empty(dtype::int64, {count});
  }
  auto wide_of = [&packs, &where](size_t k) {
    auto& pk = packs[where[k].first];
    return pk.widened() ? pk.wide.mutable_data<int64_t>()
                            + where[k].second / sizeof(int32_t)
                        : nullptr;
  };
  vote_record vote;
  auto note = [&vote](vote_kind kind, size_t k, int64_t at) {
    if (vote.kind == vote_ok)
      vote = {kind, static_cast<int32_t>(k), at};
  };
  // Local phase: this process's replicas reduced into the packs.
  std::vector<const int32_t*> in32; // widened items' inputs, sized once
  for (size_t k = 0; k < n_items; ++k) {
    auto& item = plan.items[k];
    if (item.first_only || item.require_equal || item.gather || item.scatter
        || item.from_process >= 0)
      continue;
    std::span<const void* const> inputs{buffers.items[k].inputs.data(),
                                         slots};
    auto* y = static_cast<std::byte*>(packs[where[k].first].data.mutable_raw())
              + where[k].second;
    result[k] = y;
    if (auto* wide = wide_of(k)) {
      in32.resize(slots);
      for (size_t r = 0; r < slots; ++r)
        in32[r] = static_cast<const int32_t*>(inputs[r]);
      auto at = host::reduce_int32_widened(combine_of(item), wide, in32, 0,
                                           item.count);
      if (at >= 0)
        note(vote_local_overflow, k, at);
      continue;
    }
    if (!is_floating(item.type)) {
      auto at = host::first_overflow(combine_of(item), update_op::assign,
                                     item.type, inputs, nullptr, 0, item.count);
      if (at >= 0)
        note(vote_local_overflow, k, at);
    }
    host::reduce(combine_of(item), item.type, y, inputs, 0, item.count);
  }
  // Between processes: one all-reduce per pack (an overflow there fails
  // every process alike), one broadcast per first-replica or equal-value
  // item.
  for (auto& pk : packs) {
    const auto count = static_cast<int64_t>(pk.bytes / size_of(pk.type));
    if (auto err = group.all_reduce(pk.combine,
                                    pk.widened() ? dtype::int64 : pk.type,
                                    pk.widened() ? pk.wide.mutable_raw()
                                                 : pk.data.mutable_raw(),
                                    count)) {
      if (has_code(err, errc::overflow))
        return make_error(errc::overflow,
                          plan.description + ": the "
                            + std::string{to_string(pk.combine)} + " of "
                            + std::string{to_string(pk.type)}
                            + " values over every process does not fit the "
                              "dtype; nothing was changed");
      return err;
    }
  }
  // The widened results back to int32: every process holds the same sums,
  // so each fails alike without a vote.
  for (size_t k = 0; k < n_items; ++k) {
    auto* wide = result[k] != nullptr ? wide_of(k) : nullptr;
    if (wide == nullptr)
      continue;
    auto& item = plan.items[k];
    auto at = host::narrow_to_int32(static_cast<int32_t*>(
                                      static_cast<void*>(result[k])),
                                    wide, 0, item.count);
    if (at >= 0)
      return make_error(errc::overflow,
                        "variable " + item_name(plan, k) + " ("
                          + plan.description + "): the "
                          + std::string{to_string(item.rop)}
                          + " of int32 values over every replica does not "
                            "fit the dtype at element "
                          + std::to_string(at) + "; nothing was changed");
  }
  std::vector<scatter_rows> scattered(n_items);
  for (size_t k = 0; k < n_items; ++k) {
    auto& item = plan.items[k];
    const auto bytes = static_cast<size_t>(item.count) * size_of(item.type);
    if (item.from_process >= 0) {
      if (item.from_process >= group.size())
        return make_error(errc::replica_failed,
                          plan.description + ": data from process "
                            + std::to_string(item.from_process) + " of "
                            + std::to_string(group.size())
                            + "; nothing was changed");
      if (bytes > 0)
        if (auto err = group.broadcast(buffers.items[k].output, bytes,
                                       item.from_process))
          return err;
      continue;
    }
    if (item.scatter) {
      std::vector<scatter_rows> parts;
      if (auto err = exchange_rows(item, buffers.items[k].inputs[0], group,
                                   parts))
        return err;
      if (item.require_equal
          && (parts[0].rows != item.rows
              || !host::bitwise_equal(parts[0].values.raw(),
                                      buffers.items[k].inputs[0],
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
      auto y = combine_scatter_contributions(rows_info, item.sop, across,
                                             parts, item_name(plan, k));
      if (!y)
        return make_error(static_cast<errc>(y.error().code()),
                          message_of(y.error()) + " (" + plan.description
                            + ")");
      if (item.rop == reduce_op::mean && !y->rows.empty())
        host::split_assign(item.type, y->values.mutable_raw(),
                           y->values.raw(), 0, y->values.size(), 0,
                           total_replicas);
      // V4: each component here, checked before any is written.
      if (!is_floating(item.type))
        for (size_t r = 0; r < slots; ++r) {
          auto at = host::scatter_first_overflow(
            item.sop, item.type, buffers.items[k].components[r],
            item.row_elems, y->rows, y->values.raw(), 0, y->values.size());
          if (at >= 0) {
            note(vote_apply_overflow, k, at);
            break;
          }
        }
      scattered[k] = std::move(*y);
      continue;
    }
    if (item.gather) {
      // Each process in turn sends its replicas' components to all.
      auto& y = own[k];
      y.resize(bytes * static_cast<size_t>(total_replicas));
      size_t at = 0;
      for (int p = 0; p < static_cast<int>(replicas_per_rank.size()); ++p) {
        const auto n = static_cast<size_t>(replicas_per_rank[static_cast<size_t>(p)]);
        if (p == group.rank())
          for (size_t r = 0; r < slots; ++r)
            if (bytes > 0)
              std::memcpy(y.data() + at + r * bytes,
                          buffers.items[k].inputs[r], bytes);
        if (auto err = group.broadcast(y.data() + at, n * bytes, p))
          return err;
        at += n * bytes;
      }
      result[k] = y.data();
    } else if (item.first_only || item.require_equal) {
      // Global replica 0 lives in process 0: its input is the value (first
      // replica), or the value every input must equal (aggregation none).
      auto& y = own[k];
      y.resize(bytes);
      if (bytes > 0)
        std::memcpy(y.data(), buffers.items[k].inputs[0], bytes);
      std::vector<std::byte> mine;
      if (item.require_equal)
        mine = y;
      if (auto err = group.broadcast(y.data(), bytes, 0))
        return err;
      if (item.require_equal && !host::bitwise_equal(mine.data(), y.data(), bytes))
        note(vote_unequal, k, -1);
      result[k] = y.data();
    } else if (item.rop == reduce_op::mean) {
      host::split_assign(item.type, result[k], result[k], 0, item.count, 0,
                         total_replicas);
    }
    // V4: the update of each component here, checked before any is written.
    if (item.target == collective_target::components
        && !is_floating(item.type) && item.uop != update_op::assign) {
      const void* only[] = {result[k]};
      for (size_t r = 0; r < slots; ++r) {
        auto at = host::first_overflow(reduce_op::sum, item.uop, item.type,
                                       only, buffers.items[k].components[r], 0,
                                       item.count);
        if (at >= 0) {
          note(vote_apply_overflow, k, at);
          break;
        }
      }
    }
  }
  // A vote only where some process may refuse: equal-value checks and
  // integers (the plans are equal, so every process decides alike).
  bool may_refuse = false;
  for (auto& item : plan.items)
    may_refuse = may_refuse || item.require_equal
                 || (!is_floating(item.type) && item.from_process < 0);
  if (!may_refuse)
    return apply_results(plan, buffers, result, scattered);
  // Every process votes; one that cannot apply stops all.
  std::vector<vote_record> votes(static_cast<size_t>(group.size()));
  if (auto err = group.all_gather(&vote, votes.data(), sizeof(vote)))
    return err;
  for (size_t r = 0; r < votes.size(); ++r) {
    auto& v = votes[r];
    if (v.kind == vote_ok)
      continue;
    if (v.kind < vote_local_overflow || v.kind > vote_unequal || v.item < 0
        || static_cast<size_t>(v.item) >= plan.items.size())
      return make_error(errc::replica_failed,
                        "process " + std::to_string(r)
                          + " sent an invalid vote for " + plan.description
                          + "; nothing was changed");
    auto k = static_cast<size_t>(v.item);
    auto& item = plan.items[k];
    auto where = "variable " + item_name(plan, k) + " (" + plan.description
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
  return apply_results(plan, buffers, result, scattered);
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
      m_.group->block_signals();
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
