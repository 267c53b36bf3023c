// The coordinator's metrics (M1-M4): what it counts as operations run, and
// the snapshot it assembles from its counts and its replicas'.

#include "actors/coordinator/coordinator_metrics.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "actors/coordinator/admission.hpp"
#include "actors/coordinator/collective_runner.hpp"
#include "actors/coordinator/coordinator_settings.hpp"
#include "actors/coordinator/ordering.hpp"
#include "actors/coordinator/replica_set.hpp"
#include "actors/coordinator/step_driver.hpp"
#include "actors/coordinator/variable_registry.hpp"
#include "actors/coordinator/write_batcher.hpp"
#include "core/logging.hpp"
#include "sync/collectives/collective_plan.hpp"
#include "varsync/ext/metrics.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace {

double seconds_of(caf::timespan t) {
  return std::chrono::duration<double>(t).count();
}

} // namespace

void coordinator_record::configure(size_t replicas, int first_replica,
                                   caf::timespan stall_threshold,
                                   bool enabled) {
  replicas_.assign(replicas, replica_timing{});
  last_usage_.assign(replicas, replica_usage{});
  first_replica_ = first_replica;
  stall_threshold_ = stall_threshold;
  enabled_ = enabled;
}

void coordinator_record::failed(const caf::error& err) {
  switch (err.category() == error_category ? static_cast<errc>(err.code())
                                           : errc::none) {
    case errc::overloaded:
      ++refusals_;
      break;
    case errc::timeout:
    case errc::committed_late:
      ++deadlines_;
      break;
    default:
      ++errors_;
  }
}

void coordinator_record::step_round(const reply_times& t,
                                    const std::vector<device_id>& devices,
                                    uint64_t seq, caf::timespan& waited) {
  const size_t n = t.at.size();
  if (replicas_.size() < n)
    replicas_.resize(n);
  for (size_t i = 0; i < n; ++i)
    ++replicas_[i].rounds;
  if (n < 2)
    return;
  size_t last = 0;
  for (size_t i = 1; i < n; ++i)
    if (t.at[i] > t.at[last])
      last = i;
  auto first = *std::min_element(t.at.begin(), t.at.end());
  clock::time_point second{};
  for (size_t i = 0; i < n; ++i)
    if (i != last)
      second = std::max(second, t.at[i]);
  const auto lag = std::chrono::duration_cast<caf::timespan>(t.at[last]
                                                             - second);
  auto& r = replicas_[last];
  ++r.slowest;
  r.kept_waiting += lag;
  if (stall_threshold_ > caf::timespan{0} && lag > stall_threshold_) {
    ++r.stalls;
    ++r.unwarned_stalls;
    const auto now = t.at[last];
    if (r.last_warning == clock::time_point{}
        || now - r.last_warning >= warning_interval) {
      log()->warn("stall: replica {} ({}) kept the other replicas waiting "
                  "{:.3f} s in step {} (it answered last; threshold {:.3f} "
                  "s; {} stalls of it since the last warning)",
                  first_replica_ + static_cast<int>(last),
                  last < devices.size() ? to_string(devices[last])
                                        : std::string{"?"},
                  seconds_of(lag), seq, seconds_of(stall_threshold_),
                  r.unwarned_stalls);
      r.last_warning = now;
      r.unwarned_stalls = 0;
    }
  }
  waited += std::chrono::duration_cast<caf::timespan>(t.at[last] - first);
}

void coordinator_record::step_updates(
  const std::vector<recorded_update>& ys, uint64_t seq, caf::timespan waited) {
  for (auto& y : ys) {
    auto* e = variables_.any(y.variable_id);
    if (e == nullptr || e->counts().last_step == seq)
      continue;
    auto& u = e->counts();
    u.last_step = seq;
    ++u.steps_updated;
    u.waiting += waited;
  }
}

void coordinator_record::collective_completed(const collective_plan& plan,
                                              clock::time_point started) {
  caf::timespan took{0};
  if (started != reply_times::clock::time_point{})
    took = std::chrono::duration_cast<caf::timespan>(
      reply_times::clock::now() - started);
  collective_time_ += took;
  for (auto& item : plan.items) {
    const auto bytes = static_cast<uint64_t>(item.count) * size_of(item.type)
                       * static_cast<uint64_t>(plan.num_replicas);
    bytes_moved_ += bytes;
    auto* e = variables_.any(item.variable_id);
    if (e == nullptr)
      continue;
    auto& u = e->counts();
    ++u.collectives;
    u.bytes_moved += bytes;
    u.collective_time += took;
  }
}

namespace {

variable_metrics metrics_of(uint64_t id, const variable_entry& e) {
  auto& info = *e.info;
  variable_metrics v;
  v.id = id;
  v.name = info.name;
  v.sync = info.sync;
  v.agg = info.agg;
  v.trainable = info.trainable;
  v.bytes = static_cast<uint64_t>(element_count(info.shape))
            * size_of(info.type);
  if (e.usage) {
    auto& u = *e.usage;
    v.cross_replica_reads = u.cross_reads;
    v.cross_replica_updates = u.cross_updates;
    v.steps_updated = u.steps_updated;
    v.collectives = u.collectives;
    v.bytes_moved = u.bytes_moved;
    v.collective_seconds = seconds_of(u.collective_time);
    v.waiting_seconds = seconds_of(u.waiting);
  }
  return v;
}

} // namespace

strategy_metrics coordinator_record::snapshot(
  const metrics_sources& parts,
  std::vector<std::optional<replica_usage>>& got) {
  strategy_metrics m;
  auto& processes = parts.processes;
  m.process_rank = processes ? processes->rank : 0;
  m.processes = processes ? processes->processes : 1;
  m.uptime_seconds
    = std::chrono::duration<double>(clock::now() - created_).count();
  m.steps = parts.steps.started();
  m.collectives = parts.collectives.completed();
  m.collective_seconds = seconds_of(collective_time_);
  m.bytes_moved = bytes_moved_;
  m.in_flight = parts.admitted.in_flight();
  m.queued_operations = parts.admitted.queued();
  m.queued_bytes = parts.admitted.queued_bytes();
  m.completed = completed_;
  m.refusals = refusals_;
  m.deadlines_hit = deadlines_;
  m.errors = errors_;
  m.local_adds_dropped = parts.local_adds_dropped;
  m.writes_sent = parts.writes.writes_sent();
  m.write_groups = parts.writes.groups_sent();
  parts.order.report(m);
  m.stall_threshold_seconds = seconds_of(stall_threshold_);
  if (processes && processes->rounds) {
    m.process_rounds = processes->rounds->snapshot();
    m.waiting_for_processes_seconds = processes->rounds->waited_seconds();
  }
  for (auto& [id, e] : variables_.entries())
    if (e.ready)
      m.variables.push_back(metrics_of(id, e));
  std::sort(m.variables.begin(), m.variables.end(),
            [](auto& a, auto& b) { return a.name < b.name; });
  add_replicas(m, parts.replicas, got);
  return m;
}

void coordinator_record::add_replicas(
  strategy_metrics& m, const replica_set& replicas,
  std::vector<std::optional<replica_usage>>& got) {
  std::unordered_map<uint64_t, size_t> at;
  for (size_t k = 0; k < m.variables.size(); ++k)
    at.emplace(m.variables[k].id, k);
  last_usage_.resize(replicas.size());
  for (size_t i = 0; i < replicas.size(); ++i) {
    replica_metrics r;
    r.replica = first_replica_ + static_cast<int>(i);
    r.device = to_string(replicas.devices()[i]);
    r.failed = replicas.failed(i);
    if (i < replicas_.size()) {
      auto& t = replicas_[i];
      r.step_rounds = t.rounds;
      r.slowest = t.slowest;
      r.stalls = t.stalls;
      r.kept_waiting_seconds = seconds_of(t.kept_waiting);
    }
    if (got[i])
      last_usage_[i] = std::move(*got[i]);
    else
      r.counts_stale = true;
    auto& u = last_usage_[i];
    r.deferred = got[i] ? u.deferred : 0;
    r.refusals = u.refusals;
    m.deferred_on_replicas += r.deferred;
    m.refusals += u.refusals;
    for (size_t k = 0; k < u.ids.size(); ++k) {
      auto j = at.find(u.ids[k]);
      if (j == at.end())
        continue;
      m.variables[j->second].replica_reads += u.reads[k];
      m.variables[j->second].replica_updates += u.updates[k];
    }
    m.replicas.push_back(std::move(r));
  }
}

} // namespace varsync
