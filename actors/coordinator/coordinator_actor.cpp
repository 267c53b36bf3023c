#include "actors/coordinator/coordinator_actor.hpp"

#include <atomic>
#include <memory>
#include <string>
#include <tuple>

#include <caf/actor_system.hpp>
#include <caf/system_messages.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include "actors/actor_thread.hpp"
#include "actors/collective_selection.hpp"
#include "actors/coordinator/coordinator_state.hpp"
#include "actors/coordinator/actor_adapter.hpp"
#include "actors/replica/replica_actor.hpp"
#include "actors/spawn_hidden.hpp"
#include "varsync/error.hpp"
#include "core/logging.hpp"
#include "sync/distributed_reduce.hpp"

#include "actors/coordinator/coordinator_helpers.hpp"

namespace varsync {

using namespace coordinator_helpers;

// -- strategy -----------------------------------------------------------------------

strategy_description coordinator_state::describe() const {
  strategy_description out;
  for (auto& d : replicas_.devices())
    out.devices.push_back(to_string(d));
  out.collective = collective_.description;
  out.collectives_run = collectives_.completed();
  out.local_adds_dropped = local_adds_dropped_->load();
  out.failures = replicas_.describe_failures();
  out.process_rank = processes ? processes->rank : 0;
  if (flight_) {
    out.recent_operations = flight_->records([this](uint64_t id) {
      auto info = variables_.shared_info(id);
      return info ? info->name : "#" + std::to_string(id);
    });
    out.operations_dispatched = flight_->dispatched();
  }
  return out;
}

namespace {

/// Stops the replicas, after the device collective's driver where there is
/// one: a run in progress (bounded by its deadline) may still use the
/// replicas' device memory, which they free when they exit.
void stop_replicas_after_driver(const std::vector<replica_actor>& replicas,
                                const collective_driver_actor& driver) {
  auto stop_replicas = [replicas](const caf::error&) {
    for (auto& r : replicas)
      caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
  };
  if (!driver) {
    stop_replicas({});
    return;
  }
  // Attached to a driver that is already gone, it runs at once.
  caf::actor_cast<caf::strong_actor_ptr>(driver)->get()->attach_functor(
    stop_replicas);
  caf::anon_send_exit(driver, caf::exit_reason::user_shutdown);
}

} // namespace

void coordinator_state::shutdown() {
  stop_replicas_after_driver(replicas_.handles(), collective_.driver
                                          ? *collective_.driver
                                          : collective_driver_actor{});
  self_->quit(caf::exit_reason::user_shutdown);
}

void coordinator_state::bind_replicas() {
  replicas_.bind();
}

namespace {

// A replica busy in a long step answers late: its counts are then those of
// the previous snapshot.
constexpr auto usage_wait = std::chrono::milliseconds(500);

} // namespace

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
    st->done(record_.snapshot(metrics_sources{admission_, writes_, steps_,
                                              collectives_, *ordering_,
                                              replicas_, processes,
                                              local_adds_dropped_->load()},
                              st->got));
  };
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

caf::result<strategy_metrics> coordinator_state::metrics_now() {
  auto rp = self_->make_response_promise<strategy_metrics>();
  metrics(default_timeout_, [rp](caf::expected<strategy_metrics> r) mutable {
    if (r)
      rp.deliver(std::move(*r));
    else
      rp.deliver(std::move(r.error()));
  });
  return rp;
}

namespace {

// The public protocol's operations (varsync/actor_protocol.hpp): every
// request is admitted (see admit) and releases its slot when it delivers
// its response; accept() adapts a request to its operation value.
auto operation_handlers(coordinator_state& c) {
  return std::make_tuple(
    [&c](create_atom, variable_spec& spec) -> caf::result<variable_info> {
      return accept(c, ops::create{std::move(spec)});
    },
    [&c](lookup_atom, std::string& name) -> caf::result<variable_info> {
      return accept(c, ops::lookup{std::move(name)});
    },
    [&c](list_atom) -> caf::result<std::vector<variable_info>> {
      return accept(c, ops::list{});
    },
    [&c](destroy_atom, uint64_t id) -> caf::result<ok_atom> {
      return accept(c, ops::destroy{id});
    },
    [&c](read_atom, uint64_t id) -> caf::result<tensor> {
      return accept(c, ops::read{id});
    },
    [&c](update_atom, uint64_t id, update_op op,
         tensor& value) -> caf::result<ok_atom> {
      return accept(c, ops::update{id, op, std::move(value)});
    },
    [&c](scatter_atom, uint64_t id, scatter_op op,
         indexed_slices& slices) -> caf::result<ok_atom> {
      return accept(c, ops::scatter{id, op, std::move(slices)});
    },
    [&c](values_atom, uint64_t id) -> caf::result<std::vector<tensor>> {
      return accept(c, ops::local_values{id});
    },
    [&c](run_atom, const replica_step_ptr& step) -> caf::result<ok_atom> {
      return accept(c, ops::run{step});
    },
    [&c](allreduce_atom, reduce_op op,
         std::vector<std::vector<tensor>>& values)
      -> caf::result<std::vector<tensor>> {
      return accept(c, ops::all_reduce{op, std::move(values)});
    },
    [&c](wait_for_atom, std::string& name) -> caf::result<variable_info> {
      return accept(c, ops::wait_for{std::move(name)});
    },
    [&c](barrier_atom) -> caf::result<ok_atom> {
      return accept(c, ops::barrier{});
    },
    [&c](process_metrics_atom)
      -> caf::result<std::vector<strategy_metrics>> {
      return accept(c, ops::metrics_of_processes{});
    },
    [&c](agree_atom, caf::error& local,
         std::string& what) -> caf::result<ok_atom> {
      return accept(c, ops::agree{std::move(what), std::move(local)});
    });
}

} // namespace

coordinator_internal_actor::behavior_type coordinator_state::make_behavior() {
  bind_replicas();
  return std::apply(
    [this](auto&&... operations) -> coordinator_internal_actor::behavior_type {
      return {
        std::move(operations)...,
        [this](describe_atom) -> caf::result<strategy_description> {
          return describe();
        },
        // Never queued behind operations: a snapshot is most wanted when they
        // pile up.
        [this](metrics_atom) -> caf::result<strategy_metrics> {
          return metrics_now();
        },
        [this](client_now_atom, const client_call_ptr& call) {
          start_call(call, false);
        },
        [this](replicas_atom) -> caf::result<std::vector<replica_actor>> {
          return replicas_.handles();
        },
        [this](client_atom, const client_call_ptr& call) {
          // Waiting for a variable holds no slot (see accept).
          if (std::holds_alternative<ops::wait_for>(call->op))
            return start_call(call, false);
          admit([this, call, recorded = note_if_queued(call->op)] {
            start_call(call, true, recorded);
          }, call->bytes);
        },
        [this](shutdown_atom) { shutdown(); },
        [this](sequenced_atom, sequenced_operation& op) {
          ordering_->ordered(std::move(op));
        },
        [this](sequencer_down_atom, caf::error& reason) {
          ordering_->lost(std::move(reason));
        },
        [this](deadline_atom) { deadlines_.tick(); },
        [this](flight_dump_atom, uint8_t why, const std::string& detail) {
          if (why < flight_dumps::reason_names.size())
            dumps_.write(static_cast<flight_dumps::reason>(why), detail,
                         describe());
        },
        [this](flush_writes_atom) { writes_.on_flush_message(); },
      };
    },
    operation_handlers(*this));
}

// -- spawning -------------------------------------------------------------------------

namespace {

class coordinator_actor_impl : public coordinator_internal_actor::base {
public:
  coordinator_actor_impl(caf::actor_config& cfg, std::vector<device_id> devices,
                         std::vector<replica_actor> replicas,
                         coordinator_settings settings)
    : coordinator_internal_actor::base(cfg),
      state_(this, std::move(devices), std::move(replicas),
             std::move(settings)) {
    // nop
  }

  behavior_type make_behavior() override { return state_.make_behavior(); }

  // User code runs inside (async callbacks, replica steps): mark the thread
  // so that blocking strategy calls from there fail at once.
  resume_result resume(caf::execution_unit* ctx, size_t max_throughput) override {
    detail::varsync_actor_scope scope;
    return coordinator_internal_actor::base::resume(ctx, max_throughput);
  }

private:
  coordinator_state state_;
};

/// V4: the config's enums and bounds, checked before any replica exists.
caf::error check_config(const coordinator_config& cfg) {
  if (cfg.devices.empty())
    return make_error(errc::invalid_argument,
                      "a strategy needs at least one device");
  // V4: enums of the config are checked before any replica exists.
  if (static_cast<uint8_t>(cfg.step_exception)
      > static_cast<uint8_t>(on_step_exception::fail_step))
    return make_error(errc::invalid_argument,
                      "step exception policy "
                        + std::to_string(static_cast<int>(cfg.step_exception))
                        + " is not one of 0 (stop_replica), 1 (fail_step)");
  for (auto& d : cfg.devices)
    if ((d.kind != device_kind::host && d.kind != device_kind::cuda)
        || d.index < 0)
      return make_error(errc::invalid_argument,
                        "device kind "
                          + std::to_string(static_cast<int>(d.kind))
                          + " index " + std::to_string(d.index)
                          + " is not a device: kinds are 0 (cpu), 1 (cuda) "
                            "and indices are not negative");
  if (cfg.max_queued_operations == 0 || cfg.max_queued_bytes == 0)
    return make_error(errc::invalid_argument,
                      "the overload bounds must be positive");
  return {};
}

/// Injected faults (varsync::testing) must name a replica of the strategy
/// (0 to total - 1, across processes) and a point they can fire at: a
/// fault that could never fire would let a test pass for the wrong reason.
caf::error check_faults(const std::vector<replica_fault>& faults, int total) {
  for (auto& f : faults) {
    std::string what = "the injected fault for replica "
                       + std::to_string(f.replica) + " ('" + f.reason + "')";
    if (f.replica < 0 || f.replica >= total)
      return make_error(errc::invalid_argument,
                        what + ": the strategy has replicas 0 to "
                          + std::to_string(total - 1));
    if (f.at_operation < 1)
      return make_error(errc::invalid_argument,
                        what + ": operations count from 1 (at_operation 0)");
    const bool fires = f.what == replica_fault::kind::fail
                       || (f.what == replica_fault::kind::delay
                           && f.delay.count() > 0);
    if (!fires)
      return make_error(errc::invalid_argument,
                        what + ": a fault fails the replica, or delays it "
                               "by a positive time");
  }
  return {};
}

/// Services mode: the group's sequencer hands the ordered operations (and
/// its failure) to `coordinator`, which it does not keep alive.
void attach_sequencer(process_group& group,
                      const coordinator_internal_actor& coordinator) {
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(coordinator);
  auto to_coordinator = [weak](auto... xs) {
    if (auto strong = weak.lock())
      caf::anon_send(caf::actor_cast<coordinator_internal_actor>(strong),
                     std::move(xs)...);
  };
  sequence_receiver receiver;
  receiver.deliver = [to_coordinator](sequenced_operation op) {
    to_coordinator(sequenced_atom::value, std::move(op));
  };
  receiver.failed = [to_coordinator](caf::error reason) {
    to_coordinator(sequencer_down_atom::value, std::move(reason));
  };
  group.control().attach_sequencer(std::move(receiver));
}

/// The strategy's place among its processes (none in one process).
caf::expected<std::optional<process_layout>>
layout_of(const coordinator_config& cfg) {
  std::optional<process_layout> layout;
  if (!cfg.processes)
    return layout;
  auto& m = *cfg.processes;
  if (!m.group
      || m.replicas_per_rank.size() != static_cast<size_t>(m.group->size())
      || m.replicas_per_rank[static_cast<size_t>(m.group->rank())]
           != static_cast<int>(cfg.devices.size()))
    return make_error(errc::invalid_argument,
                      "the process group does not match this process's "
                      "devices");
  layout = process_layout{
    m.group->rank(), m.group->size(), m.first_replica, m.total_replicas, {},
    {}};
  if (m.mode == cluster_mode::services)
    layout->submit_sequenced = [group = m.group](sequenced_operation op) {
      group->control().submit(std::move(op));
    };
  m.group->rounds().configure(cfg.stall_threshold);
  layout->rounds = std::shared_ptr<process_rounds>(m.group,
                                                   &m.group->rounds());
  return layout;
}

} // namespace

namespace {

/// The coordinator's settings from its config and what spawning found.
coordinator_settings
settings_of(const coordinator_config& cfg, selected_collective collective,
            std::optional<process_layout> layout,
            std::shared_ptr<std::atomic<uint64_t>> dropped) {
  coordinator_settings settings;
  settings.default_timeout = cfg.default_timeout;
  settings.collective = std::move(collective);
  settings.budget = memory_budget{cfg.memory_budget_bytes};
  settings.max_queued_operations = cfg.max_queued_operations;
  settings.max_queued_bytes = cfg.max_queued_bytes;
  settings.local_adds_dropped = std::move(dropped);
  settings.small_step_bytes = cfg.small_step_bytes;
  settings.processes = std::move(layout);
  settings.collect_metrics = cfg.collect_metrics;
  settings.stall_threshold = cfg.stall_threshold;
  settings.flight_recorder = cfg.flight_recorder;
  settings.flight_dump_dir = cfg.flight_dump_dir;
  return settings;
}

} // namespace

caf::expected<coordinator_internal_actor> spawn_coordinator(caf::actor_system& sys,
                                                   coordinator_config cfg) {
  if (auto err = check_config(cfg))
    return err;
  auto placed = layout_of(cfg);
  if (!placed)
    return std::move(placed.error());
  auto layout = std::move(*placed);
  std::shared_ptr<process_group> sequencing_group;
  if (cfg.processes)
    sequencing_group = cfg.processes->group;
  const int first = layout ? layout->first_replica : 0;
  const int total = layout ? layout->total_replicas
                           : static_cast<int>(cfg.devices.size());
  if (auto err = check_faults(cfg.faults, total))
    return err;
  auto dropped = std::make_shared<std::atomic<uint64_t>>(0);
  // Chosen first: the replicas keep contributions where it reads them.
  auto selected = select_collective(sys, cfg.devices, std::move(cfg.processes),
                                    cfg.hidden);
  if (!selected)
    return std::move(selected.error());
  std::vector<replica_actor> replicas;
  auto stop_all = [&] {
    for (auto& r : replicas)
      caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
    if (selected->driver)
      caf::anon_send_exit(*selected->driver, caf::exit_reason::user_shutdown);
  };
  for (size_t i = 0; i < cfg.devices.size(); ++i) {
    for (size_t j = 0; j < i; ++j)
      if (cfg.devices[j] == cfg.devices[i]
          && cfg.devices[i].kind == device_kind::host) {
        stop_all();
        return make_error(errc::invalid_argument,
                          "device " + to_string(cfg.devices[i])
                            + " is listed twice");
      }
    replica_config rc{first + static_cast<int>(i), total, cfg.devices[i], {},
                      cfg.step_exception, cfg.max_queued_operations, dropped,
                      static_cast<int>(i)};
    rc.collective_checks_device = selected->checks_device_contributions;
    rc.hidden = cfg.hidden;
    for (auto& f : cfg.faults)
      if (f.replica == first + static_cast<int>(i))
        rc.faults.push_back(f);
    auto replica = spawn_replica(sys, rc);
    if (!replica) {
      stop_all();
      return std::move(replica.error());
    }
    replicas.push_back(std::move(*replica));
  }
  // The driver's handle, or none (a plain handle: GCC warns about an
  // optional one copied into the functor below).
  collective_driver_actor driver;
  if (selected->driver)
    driver = *selected->driver;
  auto collective = selected->description;
  const bool sequenced = layout && layout->submit_sequenced;
  auto coordinator = spawn_maybe_hidden<coordinator_actor_impl>(
    sys, cfg.hidden, cfg.devices, replicas,
    settings_of(cfg, std::move(*selected), std::move(layout), dropped));
  // The replicas (and the device collective driver) go down with their
  // coordinator.
  coordinator->attach_functor([replicas, driver](const caf::error&) {
    stop_replicas_after_driver(replicas, driver);
  });
  if (sequenced)
    attach_sequencer(*sequencing_group, coordinator);
  log()->info("strategy over {} replicas started; collective: {}",
              replicas.size(), collective);
  return coordinator;
}

} // namespace varsync
