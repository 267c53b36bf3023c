// The synchronization advisor (M5): rules over a metrics snapshot, one per
// mode, each stating the figures it judged.

#include "varsync/ext/sync_advice.hpp"

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace varsync {

namespace {

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g s", s);
  return buf;
}

std::string quoted(const std::string& name) {
  return "'" + name + "'";
}

sync_advice advice_for(const variable_metrics& v, uint64_t steps) {
  sync_advice a;
  a.variable = v.name;
  a.current = v.sync;
  a.agg = v.agg;
  a.steps = steps;
  a.steps_updated = v.steps_updated;
  a.replica_reads = v.replica_reads;
  a.replica_updates = v.replica_updates;
  a.cross_replica_reads = v.cross_replica_reads;
  a.bytes_moved = v.bytes_moved;
  a.collective_seconds = v.collective_seconds;
  return a;
}

// ON_WRITE (or AUTO) updated often but rarely read: suggest ON_READ.
void advise_on_write(const variable_metrics& v, const strategy_metrics& m,
                     const advisor_options& options, double replicas,
                     std::vector<sync_advice>& out) {
  if (v.steps_updated < options.min_observations)
    return;
  // A replica reads its own copy; per replica it is one read.
  const double reads = static_cast<double>(v.cross_replica_reads)
                       + static_cast<double>(v.replica_reads) / replicas;
  if (reads > options.rare_reads_per_update
                * static_cast<double>(v.steps_updated))
    return;
  auto a = advice_for(v, m.steps);
  a.suggested = synchronization::on_read;
  // ON_READ with none has no cross-replica value (R3).
  if (a.agg == aggregation::none)
    a.agg = aggregation::sum;
  a.reason = "ON_WRITE " + quoted(v.name) + " was updated in "
             + std::to_string(v.steps_updated) + " steps but read "
             + std::to_string(v.cross_replica_reads)
             + " times in cross-replica context and "
             + std::to_string(v.replica_reads)
             + " times in replica context: its "
             + std::to_string(v.collectives) + " collectives moved "
             + std::to_string(v.bytes_moved) + " bytes in "
             + seconds(v.collective_seconds)
             + "; ON_READ (aggregation "
             + std::string{to_string(a.agg)}
             + ") keeps updates local and aggregates only when read"
             // C4: the suggestion is only valid for one that is not.
             + (v.trainable ? "; ON_READ variables cannot be "
                              "trainable (C4): create it with "
                              "trainable = false, unless it is a "
                              "weight an optimizer trains"
                            : "");
  out.push_back(std::move(a));
}

// ON_READ read in cross-replica context every step: suggest ON_WRITE.
void advise_on_read(const variable_metrics& v, const strategy_metrics& m,
                    const advisor_options& options,
                    std::vector<sync_advice>& out) {
  if (m.steps < options.min_observations
      || v.cross_replica_reads < options.min_observations
      || static_cast<double>(v.cross_replica_reads)
           < options.cross_reads_per_step * static_cast<double>(m.steps))
    return;
  auto a = advice_for(v, m.steps);
  a.suggested = synchronization::on_write;
  if (a.agg == aggregation::none)
    a.agg = aggregation::sum;
  a.reason = "ON_READ " + quoted(v.name) + " was read "
             + std::to_string(v.cross_replica_reads)
             + " times in cross-replica context over "
             + std::to_string(m.steps)
             + " steps: each read aggregates every replica's "
               "component; ON_WRITE (aggregation "
             + std::string{to_string(a.agg)}
             + ") aggregates once per step that updates it and reads "
               "one copy";
  out.push_back(std::move(a));
}

// NONE read in cross-replica context: suggest ON_READ.
void advise_none(const variable_metrics& v, const strategy_metrics& m,
                 const advisor_options& options,
                 std::vector<sync_advice>& out) {
  if (v.cross_replica_reads < options.min_observations)
    return;
  auto a = advice_for(v, m.steps);
  a.suggested = synchronization::on_read;
  a.agg = v.agg == aggregation::none ? aggregation::sum : v.agg;
  a.reason = "NONE " + quoted(v.name) + " was read "
             + std::to_string(v.cross_replica_reads)
             + " times in cross-replica context, where it has no "
               "value of its own (each read fails or takes every "
               "component); ON_READ with the aggregation wanted ("
             + std::string{to_string(a.agg)}
             + "?) gives one value";
  out.push_back(std::move(a));
}

} // namespace

std::vector<sync_advice> advise(const strategy_metrics& m,
                                advisor_options options) {
  std::vector<sync_advice> out;
  const auto replicas
    = static_cast<double>(m.replicas.empty() ? 1 : m.replicas.size());
  for (auto& v : m.variables) {
    switch (v.sync) {
      case synchronization::on_write:
      case synchronization::auto_:
        advise_on_write(v, m, options, replicas, out);
        break;
      case synchronization::on_read:
        advise_on_read(v, m, options, out);
        break;
      case synchronization::none:
        advise_none(v, m, options, out);
        break;
    }
  }
  return out;
}

std::string to_json(const std::vector<sync_advice>& advice) {
  auto out = nlohmann::ordered_json::array();
  for (auto& a : advice)
    out.push_back({{"variable", a.variable},
                   {"current", std::string{to_string(a.current)}},
                   {"suggested", std::string{to_string(a.suggested)}},
                   {"aggregation", std::string{to_string(a.agg)}},
                   {"reason", a.reason},
                   {"steps", a.steps},
                   {"steps_updated", a.steps_updated},
                   {"replica_reads", a.replica_reads},
                   {"replica_updates", a.replica_updates},
                   {"cross_replica_reads", a.cross_replica_reads},
                   {"bytes_moved", a.bytes_moved},
                   {"collective_seconds", a.collective_seconds}});
  return out.dump(-1, ' ', false,
                  nlohmann::ordered_json::error_handler_t::replace);
}

} // namespace varsync
