// The coordinator's metrics (M1-M4): what it counts as operations run, and
// the snapshot it assembles from its counts and its replicas'.

#include "actors/coordinator/coordinator_metrics.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "actors/coordinator/coordinator_state.hpp"
#include "core/logging.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace {

double seconds_of(caf::timespan t) {
  return std::chrono::duration<double>(t).count();
}

// A replica busy in a long step answers late: its counts are then those of
// the previous snapshot.
constexpr auto usage_wait = std::chrono::milliseconds(500);

} // namespace

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

caf::timespan coordinator_record::step_round(
  const reply_times& t, const std::vector<device_id>& devices,
  int first_replica, uint64_t seq) {
  const size_t n = t.at.size();
  if (replicas_.size() < n)
    replicas_.resize(n);
  for (size_t i = 0; i < n; ++i)
    ++replicas_[i].rounds;
  if (n < 2)
    return caf::timespan{0};
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
                  first_replica + static_cast<int>(last),
                  last < devices.size() ? to_string(devices[last])
                                        : std::string{"?"},
                  seconds_of(lag), seq, seconds_of(stall_threshold_),
                  r.unwarned_stalls);
      r.last_warning = now;
      r.unwarned_stalls = 0;
    }
  }
  return std::chrono::duration_cast<caf::timespan>(t.at[last] - first);
}

void coordinator_state::note_step_round(const reply_times& times,
                                        caf::timespan& waited, uint64_t seq) {
  waited += record_.step_round(
    times, replicas_.devices(), processes ? processes->first_replica : 0, seq);
}

void coordinator_state::count_step_updates(
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

void coordinator_state::collective_completed(
  const collective_plan& plan, reply_times::clock::time_point started) {
  caf::timespan took{0};
  if (started != reply_times::clock::time_point{})
    took = std::chrono::duration_cast<caf::timespan>(
      reply_times::clock::now() - started);
  record_.collective_time += took;
  for (auto& item : plan.items) {
    const auto bytes = static_cast<uint64_t>(item.count) * size_of(item.type)
                       * static_cast<uint64_t>(plan.num_replicas);
    record_.bytes_moved += bytes;
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

strategy_metrics coordinator_state::metrics_here() const {
  strategy_metrics m;
  m.process_rank = processes ? processes->rank : 0;
  m.processes = processes ? processes->processes : 1;
  m.uptime_seconds = std::chrono::duration<double>(
                       coordinator_record::clock::now() - record_.created)
                       .count();
  m.steps = steps_.started();
  m.collectives = collectives_.completed();
  m.collective_seconds = seconds_of(record_.collective_time);
  m.bytes_moved = record_.bytes_moved;
  m.in_flight = admission_.in_flight();
  m.queued_operations = admission_.queued();
  m.queued_bytes = admission_.queued_bytes();
  m.completed = record_.completed();
  m.refusals = record_.refusals();
  m.deadlines_hit = record_.deadlines();
  m.errors = record_.errors();
  m.local_adds_dropped = local_adds_dropped_->load();
  m.writes_sent = writes_.writes_sent();
  m.write_groups = writes_.groups_sent();
  ordering_->report(m);
  m.stall_threshold_seconds = seconds_of(record_.stall_threshold());
  if (processes && processes->rounds) {
    m.process_rounds = processes->rounds->snapshot();
    m.waiting_for_processes_seconds = processes->rounds->waited_seconds();
  }
  for (auto& [id, e] : variables_.entries())
    if (e.ready)
      m.variables.push_back(metrics_of(id, e));
  std::sort(m.variables.begin(), m.variables.end(),
            [](auto& a, auto& b) { return a.name < b.name; });
  return m;
}

void coordinator_state::add_replica_metrics(
  strategy_metrics& m, std::vector<std::optional<replica_usage>>& got) {
  std::unordered_map<uint64_t, size_t> at;
  for (size_t k = 0; k < m.variables.size(); ++k)
    at.emplace(m.variables[k].id, k);
  const int first = processes ? processes->first_replica : 0;
  for (size_t i = 0; i < replicas_.size(); ++i) {
    replica_metrics r;
    r.replica = first + static_cast<int>(i);
    r.device = to_string(replicas_.devices()[i]);
    r.failed = replicas_.failed(i);
    if (i < record_.replicas().size()) {
      auto& t = record_.replicas()[i];
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

void coordinator_state::metrics(caf::timespan timeout,
                                reply_fn<strategy_metrics> done) {
  struct pending {
    std::vector<std::optional<replica_usage>> got;
    size_t left = 0;
    reply_fn<strategy_metrics> done;
  };
  auto st = std::make_shared<pending>();
  st->got.resize(replicas_.size());
  st->done = std::move(done);
  auto finish = [this, st] {
    auto m = metrics_here();
    add_replica_metrics(m, st->got);
    st->done(std::move(m));
  };
  last_usage_.resize(replicas_.size());
  const auto wait = std::min<caf::timespan>(
    timeout, std::chrono::duration_cast<caf::timespan>(usage_wait));
  for (size_t i = 0; i < replicas_.size(); ++i)
    if (!replicas_.failed(i))
      ++st->left;
  if (st->left == 0)
    return finish();
  for (size_t i = 0; i < replicas_.size(); ++i) {
    if (replicas_.failed(i))
      continue;
    self_->request(replicas_[i], wait, usage_atom::value)
      .then(
        [st, i, finish](replica_usage& u) {
          st->got[i] = std::move(u);
          if (--st->left == 0)
            finish();
        },
        [st, finish](caf::error&) {
          if (--st->left == 0)
            finish();
        });
  }
}

} // namespace varsync
