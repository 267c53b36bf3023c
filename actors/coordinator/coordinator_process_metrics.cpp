// M9: every process's metrics snapshot, in rank order. Across processes two
// gathers through the processes' collective rounds: the lengths of the
// serialized snapshots, then the snapshots padded to the longest (the
// processes' plans must have equal shapes). Each process contributes its
// snapshot in its first replica's slot and zeros in the others, so the
// non-empty rows come in rank order.

#include "actors/coordinator/coordinator_state.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <initializer_list>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "actors/coordinator/coordinator_helpers.hpp"
#include "varsync/error.hpp"

namespace varsync {

using namespace coordinator_helpers;

namespace {

constexpr const char* what_all = "metrics of every process";
/// A snapshot longer than this is refused (names of 10,000s of variables).
constexpr int64_t max_snapshot_bytes = int64_t{64} << 20;

/// "metrics of every process: " and the parts, appended (GCC 12 warns,
/// -Warray-bounds, about the temporaries of a chain of +).
std::string said(std::initializer_list<std::string_view> parts) {
  std::string out = what_all;
  out += ": ";
  for (auto p : parts)
    out.append(p);
  return out;
}

/// A gather item of `words` int64 per replica: `row` (padded with zeros)
/// in this process's first replica's slot, zeros in the others.
void add_row(collective_plan& plan, int local, int total,
             const std::vector<char>& row, int64_t words) {
  auto& item = plan.add_item();
  item.type = dtype::int64;
  item.count = words;
  item.gather = true;
  item.source = collective_source::contributions;
  item.target = collective_target::output;
  for (int r = 0; r < local; ++r) {
    auto t = tensor::zeros(dtype::int64, {words});
    if (r == 0 && !row.empty())
      std::memcpy(t.mutable_raw(), row.data(), row.size());
    item.contributions.push_back(std::move(t));
  }
  item.result = tensor::empty(dtype::int64, {int64_t{total}, words});
}

} // namespace

void coordinator_state::metrics_of_processes(
  caf::timespan timeout, reply_fn<std::vector<strategy_metrics>> done) {
  if (!processes)
    return metrics(timeout, [done](caf::expected<strategy_metrics> r) {
      if (!r)
        return done(std::move(r.error()));
      done(std::vector<strategy_metrics>{std::move(*r)});
    });
  auto left = remaining(timeout, "metrics_of_processes");
  if (!left)
    return fail_agreed(*this, timeout, what_all, std::move(left.error()),
                       std::move(done));
  metrics(*left, [this, timeout = *left,
                  done](caf::expected<strategy_metrics> r) mutable {
    std::vector<char> bytes;
    caf::error local;
    if (!r) {
      local = std::move(r.error());
    } else {
      caf::binary_serializer sink{self_->system(), bytes};
      if (auto err = sink(*r))
        local = make_error(errc::invalid_argument,
                           said({"this process's snapshot could not be "
                                 "serialized: ",
                                 self_->system().render(err)}));
    }
    // The lengths first: the second round's shape is the longest.
    auto plan = new_plan(said({"lengths"}));
    plan->local_error = local;
    const auto length = static_cast<int64_t>(bytes.size());
    std::vector<char> row(sizeof(length));
    std::memcpy(row.data(), &length, sizeof(length));
    add_row(*plan, num_replicas(), total_replicas(), row, 1);
    run_collective(timeout, plan,
                   [this, timeout, plan, bytes = std::move(bytes),
                    done = std::move(done)](caf::expected<ok_atom> r) mutable {
                     if (!r)
                       return done(std::move(r.error()));
                     gather_snapshots(timeout, plan->items[0].result,
                                      std::move(bytes), std::move(done));
                   });
  });
}

void coordinator_state::gather_snapshots(
  caf::timespan timeout, const tensor& lengths, std::vector<char> bytes,
  reply_fn<std::vector<strategy_metrics>> done) {
  auto each = lengths.to_vector<int64_t>();
  const auto longest = *std::max_element(each.begin(), each.end());
  // Every process saw the same lengths: it fails alike without a round.
  if (longest <= 0 || longest > max_snapshot_bytes
      || std::any_of(each.begin(), each.end(),
                     [](int64_t n) { return n < 0; }))
    return done(make_error(
      errc::replica_failed,
      said({"a process announced a snapshot of ", std::to_string(longest),
            " bytes (at most ", std::to_string(max_snapshot_bytes),
            "); nothing was changed"})));
  const int64_t words = (longest + 7) / 8;
  auto plan = new_plan(what_all);
  plan->local_error = budget_.check(
    static_cast<uint64_t>(words) * 8 * static_cast<uint64_t>(total_replicas()),
    what_all);
  add_row(*plan, num_replicas(), total_replicas(), bytes, words);
  run_collective(
    timeout, plan,
    [this, plan, each = std::move(each), words,
     done = std::move(done)](caf::expected<ok_atom> r) mutable {
      if (!r)
        return done(std::move(r.error()));
      auto* rows = static_cast<const char*>(plan->items[0].result.raw());
      std::vector<strategy_metrics> out;
      for (size_t i = 0; i < each.size(); ++i) {
        if (each[i] == 0)
          continue;
        strategy_metrics m;
        caf::binary_deserializer source{
          self_->system(), rows + i * static_cast<size_t>(words) * 8,
          static_cast<size_t>(each[i])};
        const auto rank = static_cast<int>(out.size());
        if (source(m) || m.process_rank != rank)
          return done(make_error(errc::replica_failed,
                                 said({"the snapshot of process ",
                                       std::to_string(rank),
                                       " could not be read"})));
        out.push_back(std::move(m));
      }
      if (static_cast<int>(out.size()) != processes->processes)
        return done(make_error(
          errc::replica_failed,
          said({std::to_string(out.size()), " snapshots came from ",
                std::to_string(processes->processes), " processes"})));
      done(std::move(out));
    });
}

} // namespace varsync
