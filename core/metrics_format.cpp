// Renders a metrics snapshot as JSON and in the Prometheus text format, and
// the flight recorder's report (a strategy description) as JSON.

#include "core/flight_dump_format.hpp"
#include "varsync/ext/metrics.hpp"
#include "varsync/strategy_description.hpp"

#include <charconv>
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

namespace varsync {

namespace {

using json = nlohmann::ordered_json;

json variable_json(const variable_metrics& v) {
  return {{"id", v.id},
          {"name", v.name},
          {"sync", std::string{to_string(v.sync)}},
          {"aggregation", std::string{to_string(v.agg)}},
          {"bytes", v.bytes},
          {"replica_reads", v.replica_reads},
          {"replica_updates", v.replica_updates},
          {"cross_replica_reads", v.cross_replica_reads},
          {"cross_replica_updates", v.cross_replica_updates},
          {"steps_updated", v.steps_updated},
          {"collectives", v.collectives},
          {"bytes_moved", v.bytes_moved},
          {"collective_seconds", v.collective_seconds},
          {"waiting_seconds", v.waiting_seconds},
          {"trainable", v.trainable}};
}

// Label values escape backslash, double quote and newline (0.0.4 format).
std::string label_value(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string number(double x) {
  if (std::isnan(x))
    return "NaN";
  if (std::isinf(x))
    return x > 0 ? "+Inf" : "-Inf";
  // Shortest text that reads back as the same double.
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), x);
  return std::string(buf, r.ptr);
}

std::string number(uint64_t x) {
  return std::to_string(x);
}

// One metric family: HELP and TYPE once, then its samples.
class exposition {
public:
  void family(const char* name, const char* type, const char* help) {
    out_ += "# HELP varsync_";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE varsync_";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
    name_ = name;
  }
  template <class T>
  void sample(const std::string& labels, T value) {
    out_ += "varsync_";
    out_ += name_;
    if (!labels.empty()) {
      out_ += '{';
      out_ += labels;
      out_ += '}';
    }
    out_ += ' ';
    out_ += number(value);
    out_ += '\n';
  }
  std::string take() { return std::move(out_); }

private:
  std::string out_;
  std::string name_;
};

std::string label(const char* key, const std::string& value) {
  return std::string{key} + "=\"" + label_value(value) + "\"";
}

} // namespace

std::string to_json(const strategy_metrics& m) {
  json replicas = json::array();
  for (auto& r : m.replicas)
    replicas.push_back({{"replica", r.replica},
                        {"device", r.device},
                        {"step_rounds", r.step_rounds},
                        {"slowest", r.slowest},
                        {"kept_waiting_seconds", r.kept_waiting_seconds},
                        {"stalls", r.stalls},
                        {"deferred", r.deferred},
                        {"refusals", r.refusals},
                        {"failed", r.failed},
                        {"counts_stale", r.counts_stale}});
  json processes = json::array();
  for (auto& p : m.process_rounds)
    processes.push_back({{"rank", p.rank},
                         {"slowest", p.slowest},
                         {"kept_waiting_seconds", p.kept_waiting_seconds},
                         {"stalls", p.stalls}});
  json variables = json::array();
  for (auto& v : m.variables)
    variables.push_back(variable_json(v));
  json out = {{"process_rank", m.process_rank},
              {"processes", m.processes},
              {"uptime_seconds", m.uptime_seconds},
              {"steps", m.steps},
              {"collectives", m.collectives},
              {"collective_seconds", m.collective_seconds},
              {"bytes_moved", m.bytes_moved},
              {"waiting_for_processes_seconds",
               m.waiting_for_processes_seconds},
              {"in_flight", m.in_flight},
              {"queued_operations", m.queued_operations},
              {"queued_bytes", m.queued_bytes},
              {"outstanding_calls", m.outstanding_calls},
              {"deferred_on_replicas", m.deferred_on_replicas},
              {"completed", m.completed},
              {"refusals", m.refusals},
              {"deadlines_hit", m.deadlines_hit},
              {"errors", m.errors},
              {"local_adds_dropped", m.local_adds_dropped},
              {"writes_sent", m.writes_sent},
              {"write_groups", m.write_groups},
              {"services_inline_bytes", m.services_inline_bytes},
              {"services_data_plane_bytes", m.services_data_plane_bytes},
              {"services_group_rounds", m.services_group_rounds},
              {"services_grouped_updates", m.services_grouped_updates},
              {"stall_threshold_seconds", m.stall_threshold_seconds},
              {"replicas", std::move(replicas)},
              {"process_rounds", std::move(processes)},
              {"variables", std::move(variables)}};
  // Names are bytes: invalid UTF-8 is replaced, never thrown about.
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

// The strategy's own counters and gauges, labelled by process.
void strategy_families(exposition& e, const strategy_metrics& m,
                       const std::string& process) {
  auto strategy_counter = [&](const char* name, const char* help, auto value) {
    e.family(name, "counter", help);
    e.sample(process, value);
  };
  auto strategy_gauge = [&](const char* name, const char* help, auto value) {
    e.family(name, "gauge", help);
    e.sample(process, value);
  };
  strategy_gauge("uptime_seconds", "Seconds since the strategy was created.",
                 m.uptime_seconds);
  strategy_counter("steps_total", "Replica steps run.", m.steps);
  strategy_counter("collectives_total", "Collectives completed.",
                   m.collectives);
  strategy_counter("collective_seconds_total",
                   "Wall time spent in collectives.", m.collective_seconds);
  strategy_counter("bytes_moved_total",
                   "Bytes collectives read from this process's replicas.",
                   m.bytes_moved);
  strategy_counter("waiting_for_processes_seconds_total",
                   "Time this process waited for the others at collective "
                   "rounds.",
                   m.waiting_for_processes_seconds);
  strategy_gauge("in_flight", "Operations running in the coordinator.",
                 m.in_flight);
  strategy_gauge("queued_operations",
                 "Operations waiting for admission by the coordinator.",
                 m.queued_operations);
  strategy_gauge("queued_bytes",
                 "Tensor bytes of the operations waiting for admission.",
                 m.queued_bytes);
  strategy_gauge("outstanding_calls",
                 "Blocking and async API calls sent and not yet answered.",
                 m.outstanding_calls);
  strategy_gauge("deferred_on_replicas",
                 "Local requests the replicas hold back now.",
                 m.deferred_on_replicas);
  strategy_counter("operations_completed_total",
                   "Operations that completed without error.", m.completed);
  strategy_counter("refusals_total", "Requests refused as overloaded.",
                   m.refusals);
  strategy_counter("deadlines_hit_total",
                   "Operations that hit their deadline (timeout, "
                   "committed_late).",
                   m.deadlines_hit);
  strategy_counter("errors_total", "Operations that failed otherwise.",
                   m.errors);
  strategy_counter("local_adds_dropped_total",
                   "Fire-and-forget local adds that were not applied.",
                   m.local_adds_dropped);
  strategy_counter("writes_sent_total",
                   "Cross-replica writes sent to the replicas (group "
                   "commit).",
                   m.writes_sent);
  strategy_counter("write_groups_total",
                   "Groups of cross-replica writes sent together, one "
                   "message per replica each.",
                   m.write_groups);
  strategy_counter("services_inline_bytes_total",
                   "Services mode: tensor bytes this process's operations "
                   "carried inline over CAF to the sequencer.",
                   m.services_inline_bytes);
  strategy_counter("services_data_plane_bytes_total",
                   "Services mode: tensor bytes this process's operations "
                   "sent through the process group instead.",
                   m.services_data_plane_bytes);
  strategy_counter("services_group_rounds_total",
                   "Services mode: agreement rounds that decided "
                   "cross-replica updates together (group commit).",
                   m.services_group_rounds);
  strategy_counter("services_grouped_updates_total",
                   "Services mode: cross-replica updates decided by those "
                   "rounds.",
                   m.services_grouped_updates);
  strategy_gauge("stall_threshold_seconds",
                 "The stall warning's threshold (0: off).",
                 m.stall_threshold_seconds);
}

void replica_families(exposition& e, const strategy_metrics& m,
                      const std::string& process) {
  auto replica_labels = [&](const replica_metrics& r) {
    return process + "," + label("replica", std::to_string(r.replica)) + ","
           + label("device", r.device);
  };
  auto per_replica = [&](const char* name, const char* type, const char* help,
                         auto field) {
    if (m.replicas.empty())
      return;
    e.family(name, type, help);
    for (auto& r : m.replicas)
      e.sample(replica_labels(r), field(r));
  };
  per_replica("replica_step_rounds_total", "counter",
              "Step rounds the replica answered.",
              [](auto& r) { return r.step_rounds; });
  per_replica("replica_slowest_total", "counter",
              "Step rounds in which the replica answered last.",
              [](auto& r) { return r.slowest; });
  per_replica("replica_kept_waiting_seconds_total", "counter",
              "Time the replica kept the others waiting.",
              [](auto& r) { return r.kept_waiting_seconds; });
  per_replica("replica_stalls_total", "counter",
              "Rounds in which the replica kept the others waiting longer "
              "than the stall threshold.",
              [](auto& r) { return r.stalls; });
  per_replica("replica_deferred", "gauge",
              "Local requests the replica holds back now.",
              [](auto& r) { return r.deferred; });
  per_replica("replica_refusals_total", "counter",
              "Local requests the replica refused as overloaded.",
              [](auto& r) { return r.refusals; });
  per_replica("replica_failed", "gauge", "1 if the replica has failed.",
              [](auto& r) { return uint64_t{r.failed ? 1u : 0u}; });
}

void process_families(exposition& e, const strategy_metrics& m,
                      const std::string& process) {
  auto per_process = [&](const char* name, const char* help, auto field) {
    if (m.process_rounds.empty())
      return;
    e.family(name, "counter", help);
    for (auto& p : m.process_rounds)
      e.sample(process + "," + label("peer", std::to_string(p.rank)),
               field(p));
  };
  per_process("process_slowest_total",
              "Collective rounds in which the peer process arrived last.",
              [](auto& p) { return p.slowest; });
  per_process("process_kept_waiting_seconds_total",
              "Time the peer process kept the others waiting.",
              [](auto& p) { return p.kept_waiting_seconds; });
  per_process("process_stalls_total",
              "Rounds in which the peer process kept the others waiting "
              "longer than the stall threshold.",
              [](auto& p) { return p.stalls; });
}

void variable_families(exposition& e, const strategy_metrics& m,
                       const std::string& process) {
  auto variable_labels = [&](const variable_metrics& v) {
    return process + "," + label("variable", v.name) + ","
           + label("sync", std::string{to_string(v.sync)}) + ","
           + label("aggregation", std::string{to_string(v.agg)});
  };
  if (!m.variables.empty()) {
    e.family("variable_bytes", "gauge", "Bytes of one component.");
    for (auto& v : m.variables)
      e.sample(variable_labels(v), v.bytes);
    e.family("variable_reads_total", "counter",
             "Reads by context (replica: summed over the replicas).");
    for (auto& v : m.variables) {
      e.sample(variable_labels(v) + ",context=\"replica\"", v.replica_reads);
      e.sample(variable_labels(v) + ",context=\"cross_replica\"",
               v.cross_replica_reads);
    }
    e.family("variable_updates_total", "counter",
             "Updates by context (replica: summed over the replicas).");
    for (auto& v : m.variables) {
      e.sample(variable_labels(v) + ",context=\"replica\"",
               v.replica_updates);
      e.sample(variable_labels(v) + ",context=\"cross_replica\"",
               v.cross_replica_updates);
    }
    auto per_variable = [&](const char* name, const char* help, auto field) {
      e.family(name, "counter", help);
      for (auto& v : m.variables)
        e.sample(variable_labels(v), field(v));
    };
    per_variable("variable_steps_updated_total",
                 "Steps that ended with an ON_WRITE update of the variable.",
                 [](auto& v) { return v.steps_updated; });
    per_variable("variable_collectives_total",
                 "Collectives the variable took part in.",
                 [](auto& v) { return v.collectives; });
    per_variable("variable_bytes_moved_total",
                 "Bytes its collectives read from this process's replicas.",
                 [](auto& v) { return v.bytes_moved; });
    per_variable("variable_collective_seconds_total",
                 "Wall time of the collectives it took part in.",
                 [](auto& v) { return v.collective_seconds; });
    per_variable("variable_waiting_seconds_total",
                 "Time its steps waited for the slowest replica.",
                 [](auto& v) { return v.waiting_seconds; });
  }
}

} // namespace

std::string to_prometheus(const strategy_metrics& m) {
  exposition e;
  const auto process = label("process", std::to_string(m.process_rank));
  strategy_families(e, m, process);
  replica_families(e, m, process);
  process_families(e, m, process);
  variable_families(e, m, process);
  return e.take();
}

namespace {

json flight_json(const strategy_description& d) {
  json ops = json::array();
  for (auto& r : d.recent_operations)
    ops.push_back({{"id", r.id},
                   {"kind", r.kind},
                   {"variable", r.variable},
                   {"origin", r.origin},
                   {"sequence", r.sequence},
                   {"epoch", r.epoch},
                   {"phase", r.phase},
                   {"age_us", r.age_us},
                   {"duration_us", r.duration_us},
                   {"error", r.error}});
  return {{"process", d.process_rank},
          {"dispatched", d.operations_dispatched},
          {"operations", std::move(ops)}};
}

} // namespace

std::string to_json(const strategy_description& d) {
  // Names come from users: invalid UTF-8 is replaced, never thrown.
  return flight_json(d).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string flight_dump_json(const strategy_description& d,
                             const std::string& reason,
                             const std::string& detail, int64_t pid,
                             int64_t unix_ms) {
  auto out = flight_json(d);
  out["reason"] = reason;
  out["detail"] = detail;
  out["pid"] = pid;
  out["unix_ms"] = unix_ms;
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

} // namespace varsync
