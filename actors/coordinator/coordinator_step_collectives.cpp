// The coordinator: collectives inside coroutine steps (X1-X5). Replicas whose
// step waits at a collective answer `suspended` with their contribution; the
// coordinator checks that they wait at the same one, runs it, and sends each
// replica the result; they answer again, until every replica has ended the
// step. Across processes each collective is one round of the processes'
// sequence (every process runs the step), so a failure at any point fails
// the step on every process in the same round.

#include "actors/coordinator/coordinator_state.hpp"

#include "actors/coordinator/coordinator_helpers.hpp"
#include "varsync/error.hpp"
#include "sync/collectives/step_collectives.hpp"

namespace varsync {

using namespace coordinator_helpers;

caf::error coordinator_state::check_step_collectives(
  const std::vector<step_report>& reports) const {
  return varsync::check_step_collectives(
    reports, processes ? processes->first_replica : 0);
}

void coordinator_state::run_step_collective(
  caf::timespan timeout, std::vector<step_report>& reports,
  reply_fn<std::vector<tensor>> done) {
  auto request = std::move(reports.front().collective);
  const auto what = "the step's " + varsync::describe(request);
  if (!ordering_->every_process_takes_part())
    return done(make_error(
      errc::invalid_argument,
      what + ": a collective inside a step needs the replicas of every "
             "process, and in services mode a step runs on this process's "
             "replicas only (use training mode); the step was abandoned, "
             "none of its on_write updates was applied"));
  // Replica r's values, in this process's replica order.
  std::vector<std::vector<tensor>> local;
  local.reserve(reports.size());
  local.push_back(std::move(request.values));
  for (size_t r = 1; r < reports.size(); ++r)
    local.push_back(std::move(reports[r].collective.values));
  if (request.kind == step_collective_kind::all_reduce) {
    std::vector<std::vector<tensor>> by_value(local.front().size());
    for (size_t k = 0; k < by_value.size(); ++k)
      for (auto& values : local)
        by_value[k].push_back(std::move(values[k]));
    return all_reduce(timeout, request.op, std::move(by_value),
                      std::move(done));
  }
  // all_gather and broadcast reduce nothing: by value in one process.
  // The all_gather result (a broadcast shares the root's values).
  uint64_t bytes = 0;
  if (request.kind == step_collective_kind::all_gather) {
    for (auto& values : local)
      for (auto& v : values)
        bytes = saturating_add(bytes, v.nbytes());
    if (processes)
      bytes = saturating_mul(bytes / std::max<size_t>(local.size(), 1),
                             static_cast<uint64_t>(total_replicas()));
  }
  if (auto err = budget_.check(bytes, what))
    return processes ? fail_agreed(*this, timeout, what, std::move(err),
                                   std::move(done))
                     : done(std::move(err));
  request.values = local.front();
  if (processes)
    return gather_step_values(timeout, std::move(request), std::move(local),
                              std::move(done));
  done(combine_step_values(request, local));
}

void coordinator_state::gather_step_values(
  caf::timespan timeout, step_collective request,
  std::vector<std::vector<tensor>> local, reply_fn<std::vector<tensor>> done) {
  auto plan = new_plan("step: " + varsync::describe(request));
  // Every replica's values travel whole: the processes do not know each
  // other's shapes, so they must be equal (the plans' fingerprints differ
  // otherwise).
  for (size_t k = 0; k < request.values.size(); ++k) {
    auto& first = local.front()[k];
    for (size_t r = 1; r < local.size(); ++r)
      if (local[r][k].shape() != first.shape())
        return fail_agreed(*this, timeout, plan->description,
          make_error(errc::shape_mismatch,
                     "the step's " + varsync::describe(request) + ": value "
                       + std::to_string(k) + " has shape "
                       + to_string(local[r][k].shape()) + " on replica "
                       + std::to_string(processes->first_replica
                                        + static_cast<int>(r))
                       + " but " + to_string(first.shape()) + " on replica "
                       + std::to_string(processes->first_replica)
                       + "; across processes every replica's values must "
                         "have equal shapes"),
          std::move(done));
    auto& item = plan->add_item();
    item.type = first.type();
    item.count = first.size();
    item.gather = true;
    item.source = collective_source::contributions;
    item.target = collective_target::output;
    for (auto& values : local)
      item.contributions.push_back(values[k]);
    item.result = tensor::empty(
      item.type, tensor_shape{static_cast<int64_t>(total_replicas()), item.count});
  }
  run_collective(
    timeout, plan,
    [this, plan, request = std::move(request),
     done = std::move(done)](caf::expected<ok_atom> r) {
      if (!r)
        return done(std::move(r.error()));
      const auto n = static_cast<size_t>(total_replicas());
      std::vector<std::vector<tensor>> parts(n);
      for (size_t k = 0; k < plan->items.size(); ++k) {
        auto& all = plan->items[k].result;
        auto& like = request.values[k];
        const auto size = like.nbytes();
        for (size_t g = 0; g < n; ++g)
          parts[g].push_back(tensor::from_bytes(
            like.type(), like.shape(),
            static_cast<const std::byte*>(all.raw()) + g * size, size));
      }
      done(combine_step_values(request, parts));
    });
}

} // namespace varsync
