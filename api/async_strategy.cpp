#include "varsync/strategy.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include <caf/logger.hpp>
#include <caf/policy/work_sharing.hpp>
#include <caf/policy/work_stealing.hpp>
#include <caf/scheduler/coordinator.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "actors/actor_thread.hpp"
#include "actors/coordinator/coordinator_actor.hpp"
#include "core/logging.hpp"
#include "varsync/config.hpp"
#include "sync/distributed_reduce.hpp"
#include "sync/policy/sync_policy.hpp"
#include "api/strategy_core.hpp"
#include "api/strategy_calls.hpp"
#include "api/strategy_helpers.hpp"

namespace varsync {

using namespace api_helpers;

// -- async API ----------------------------------------------------------------------------

namespace {

caf::expected<std::vector<std::vector<tensor>>>
collective_inputs(reduce_op op, const std::vector<per_replica<tensor>>& values,
                  int num_replicas, const memory_budget& budget) {
  std::vector<std::vector<tensor>> inputs;
  inputs.reserve(values.size());
  // D6's float64 copies of integer values, before any is made.
  uint64_t converted = 0;
  for (auto& group : values) {
    if (auto err = check_count("all_reduce", group.size(), num_replicas))
      return err;
    if (op == reduce_op::mean)
      for (auto& x : group.values())
        if (!is_floating(x.type()))
          converted = saturating_add(
            converted, saturating_mul(static_cast<uint64_t>(x.size()), 8));
  }
  if (auto err = budget.check(converted, "all_reduce (mean of integers as "
                                         "float64)"))
    return err;
  for (auto& group : values) {
    std::vector<tensor> row = group.values();
    // D6: the mean of integers is float64.
    if (op == reduce_op::mean)
      for (auto& x : row)
        if (!is_floating(x.type()))
          x = to_float64(x);
    inputs.push_back(std::move(row));
  }
  return inputs;
}

reply_fn<ok_atom> as_done(done_callback done) {
  return [done = std::move(done)](caf::expected<ok_atom> r) {
    done(r ? caf::error{} : std::move(r.error()));
  };
}

// The handle shares the description the coordinator keeps (one copy per
// variable, not one per handle).
reply_fn<shared_variable_info> as_variable(reply_fn<variable> done) {
  return [done = std::move(done)](caf::expected<shared_variable_info> r) {
    if (!r)
      return done(std::move(r.error()));
    done(variable{std::move(*r)});
  };
}

} // namespace

void async_strategy::stats(callback<strategy_description> done) const {
  // Never queued behind operations: the flight recorder (M7) is most
  // wanted when they pile up or hang.
  s_.core_->submit_now(ops::describe{}, to_timespan(s_.timeout_),
                       std::move(done));
}

void async_strategy::metrics(callback<strategy_metrics> done) const {
  s_.core_->metrics(std::move(done));
}

void async_strategy::metrics_of_processes(
  callback<std::vector<strategy_metrics>> done) const {
  s_.core_->submit(ops::metrics_of_processes{}, to_timespan(s_.timeout_),
                   std::move(done));
}

void async_strategy::create_variable(variable_spec spec,
                                     callback<variable> done) const {
  s_.core_->submit(ops::create{std::move(spec)}, to_timespan(s_.timeout_),
                   as_variable(std::move(done)));
}

void async_strategy::create_variable(std::string name, tensor initial_value,
                                     synchronization sync, aggregation agg,
                                     std::optional<bool> trainable,
                                     callback<variable> done) const {
  variable_spec spec;
  spec.name = std::move(name);
  spec.initial_value = std::move(initial_value);
  spec.sync = sync;
  spec.agg = agg;
  spec.trainable = trainable;
  create_variable(std::move(spec), std::move(done));
}

void async_strategy::lookup(const std::string& name,
                            callback<variable> done) const {
  s_.core_->submit(ops::lookup{name}, to_timespan(s_.timeout_),
                   as_variable(std::move(done)));
}

void async_strategy::wait_for_variable(const std::string& name,
                                       callback<variable> done) const {
  s_.core_->submit(ops::wait_for{name}, to_timespan(s_.timeout_),
                   as_variable(std::move(done)));
}

void async_strategy::barrier(done_callback done) const {
  s_.core_->submit(ops::barrier{}, to_timespan(s_.timeout_),
                   as_done(std::move(done)));
}

void async_strategy::agree(caf::error local, std::string what,
                           done_callback done) const {
  s_.core_->submit(ops::agree{std::move(what), std::move(local)},
                   to_timespan(s_.timeout_), as_done(std::move(done)));
}

void async_strategy::variables(callback<std::vector<variable>> done) const {
  s_.core_->submit(
    ops::list{}, to_timespan(s_.timeout_),
    [done = std::move(done)](caf::expected<std::vector<variable_info>> r) {
      if (!r)
        return done(std::move(r.error()));
      std::vector<variable> out;
      out.reserve(r->size());
      for (auto& info : *r)
        out.emplace_back(std::move(info));
      done(std::move(out));
    });
}

void async_strategy::destroy(const variable& v, done_callback done) const {
  if (auto err = require_handle(v))
    return done(std::move(err));
  s_.core_->submit(ops::destroy{v.id()}, to_timespan(s_.timeout_),
                   as_done(std::move(done)));
}

void async_strategy::read(const variable& v, callback<tensor> done) const {
  if (auto err = require_handle(v))
    return done(std::move(err));
  s_.core_->submit(ops::read{v.id()}, to_timespan(s_.timeout_),
                   std::move(done));
}

void async_strategy::update(const variable& v, update_op op, tensor value,
                            done_callback done) const {
  if (auto err = require_handle(v))
    return done(std::move(err));
  s_.core_->submit(ops::update{v.id(), op, std::move(value)},
                   to_timespan(s_.timeout_), as_done(std::move(done)));
}

void async_strategy::scatter(const variable& v, scatter_op op,
                             indexed_slices slices, done_callback done) const {
  if (auto err = require_handle(v))
    return done(std::move(err));
  s_.core_->submit(ops::scatter{v.id(), op, std::move(slices)},
                   to_timespan(s_.timeout_), as_done(std::move(done)));
}

void async_strategy::update(const variable& v, update_op op, double value,
                            done_callback done) const {
  if (auto err = require_handle(v))
    return done(std::move(err));
  auto x = scalar_for(v.info(), value);
  if (!x)
    return done(std::move(x.error()));
  update(v, op, std::move(*x), std::move(done));
}

void async_strategy::local_values(const variable& v,
                                  callback<std::vector<tensor>> done) const {
  if (auto err = require_handle(v))
    return done(std::move(err));
  s_.core_->submit(ops::local_values{v.id()}, to_timespan(s_.timeout_),
                   std::move(done));
}

void async_strategy::all_values(const variable& v,
                                callback<std::vector<tensor>> done) const {
  if (auto err = require_handle(v))
    return done(std::move(err));
  s_.core_->submit(ops::all_values{v.id()}, to_timespan(s_.timeout_),
                   std::move(done));
}

void async_strategy::survivor_values(
  const variable& v, callback<std::vector<std::optional<tensor>>> done) const {
  if (auto err = require_handle(v))
    return done(std::move(err));
  s_.core_->submit(ops::survivor_values{v.id()}, to_timespan(s_.timeout_),
                   std::move(done));
}

void async_strategy::run(replica_step_ptr step, done_callback done) const {
  s_.core_->submit(ops::run{std::move(step)}, to_timespan(s_.timeout_),
                   as_done(std::move(done)));
}

void async_strategy::reduce(reduce_op op, const per_replica<tensor>& values,
                            callback<tensor> done) const {
  done(s_.reduce(op, values));
}

void async_strategy::reduce(reduce_op op, const per_replica<tensor>& values,
                            int64_t axis, callback<tensor> done) const {
  done(s_.reduce(op, values, axis));
}

void async_strategy::reduce(reduce_op op, const mirrored<tensor>& value,
                            callback<tensor> done) const {
  done(s_.reduce(op, value));
}

void async_strategy::gather(const per_replica<tensor>& values, int64_t axis,
                            callback<tensor> done) const {
  done(s_.gather(values, axis));
}

void async_strategy::all_reduce(reduce_op op, per_replica<tensor> values,
                                callback<mirrored<tensor>> done) const {
  std::vector<per_replica<tensor>> batch;
  batch.push_back(std::move(values));
  batch_all_reduce(op, std::move(batch),
                   [done = std::move(done)](
                     caf::expected<std::vector<mirrored<tensor>>> r) {
                     if (!r)
                       return done(std::move(r.error()));
                     done(std::move(r->front()));
                   });
}

void async_strategy::batch_all_reduce(
  reduce_op op, std::vector<per_replica<tensor>> values,
  callback<std::vector<mirrored<tensor>>> done) const {
  // This process's replicas contribute; the result is every replica's.
  auto n = s_.num_replicas();
  auto inputs = collective_inputs(op, values, s_.num_local_replicas(),
                                  s_.core_->budget());
  if (!inputs)
    return done(std::move(inputs.error()));
  s_.core_->submit(
    ops::all_reduce{op, std::move(*inputs)}, to_timespan(s_.timeout_),
    [n, done = std::move(done)](caf::expected<std::vector<tensor>> r) {
      if (!r)
        return done(std::move(r.error()));
      std::vector<mirrored<tensor>> out;
      for (auto& x : *r)
        out.emplace_back(std::move(x), n);
      done(std::move(out));
    });
}

} // namespace varsync
