#include "varsync/strategy.hpp"

#include <atomic>
#include <cstdlib>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include <caf/logger.hpp>
#include <caf/policy/work_sharing.hpp>
#include <caf/policy/work_stealing.hpp>
#include <caf/scheduler/coordinator.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "actors/actor_thread.hpp"
#include "actors/coordinator/coordinator_actor.hpp"
#include "core/logging.hpp"
#include "messages/system_lifetime.hpp"
#include "varsync/config.hpp"
#include "sync/collectives/device_collective_registry.hpp"
#include "sync/distributed_reduce.hpp"
#include "sync/policy/sync_policy.hpp"
#include "api/strategy_access.hpp"
#include "api/strategy_core.hpp"
#include "api/strategy_calls.hpp"
#include "api/strategy_create.hpp"
#include "api/strategy_helpers.hpp"

namespace varsync {

using namespace api_helpers;

namespace {

caf::expected<std::vector<device_id>>
parse_devices(const std::vector<std::string>& names) {
  std::vector<device_id> out;
  for (auto& name : names) {
    auto id = parse_device(name);
    if (!id)
      return std::move(id.error());
    out.push_back(*id);
  }
  return out;
}

caf::expected<config_settings> apply_config_from(const caf::actor_system& sys) {
  auto settings = read_config(sys.config());
  if (!settings)
    return settings;
  if (!settings->log_level.empty())
    set_log_level(settings->log_level);
  else if (!settings->unknown_log_level.empty())
    log()->warn("ignoring unknown varsync.log-level '{}'",
                settings->unknown_log_level);
  return settings;
}

// The actor system's destruction waits for the strategy's actors (they are
// hidden from its first wait). If a handle is still held then, nothing
// would ever stop them: the strategy is stopped, with an error in the log.
void watch_lifetime(detail::system_lifetime& lifetime,
                    const std::shared_ptr<detail::strategy_core>& core) {
  std::vector<caf::strong_actor_ptr> actors;
  actors.push_back(caf::actor_cast<caf::strong_actor_ptr>(core->coordinator()));
  for (auto& r : core->replicas())
    actors.push_back(caf::actor_cast<caf::strong_actor_ptr>(r));
  auto what = "the strategy (" + core->description() + ")";
  lifetime.watch(std::move(actors), what,
                 [weak = std::weak_ptr<detail::strategy_core>{core}, what] {
                   auto held = weak.lock();
                   if (!held)
                     return; // its last handle is gone: it is stopping
                   log()->error(
                     "{} is still held while its actor system is being "
                     "destroyed: the strategy is shut down now, and its "
                     "handles fail with shut_down from here on. Drop every "
                     "strategy handle (or call shutdown()) before the actor "
                     "system goes away",
                     what);
                   held->system_gone();
                 });
}

} // namespace


// -- construction ---------------------------------------------------------------

strategy::strategy(std::shared_ptr<detail::strategy_core> core,
                   std::chrono::milliseconds timeout)
  : core_(std::move(core)), timeout_(timeout) {
}

strategy::~strategy() = default;

namespace {

caf::expected<strategy>
make_strategy(std::shared_ptr<detail::system_host> owned,
              caf::actor_system& sys, strategy_options options,
              std::vector<replica_fault> faults);

} // namespace

namespace {

caf::error check_options(const strategy_options& options) {
  if (options.timeout.count() < 0)
    return make_error(errc::invalid_argument,
                      "the timeout must not be negative");
  if (options.max_queued_operations && *options.max_queued_operations == 0)
    return make_error(errc::invalid_argument,
                      "max_queued_operations must be positive (there is no "
                      "unbounded queue)");
  if (options.max_queued_bytes && *options.max_queued_bytes == 0)
    return make_error(errc::invalid_argument,
                      "max_queued_bytes must be positive (there is no "
                      "unbounded queue)");
  if (options.stall_warning.count() < 0)
    return make_error(errc::invalid_argument,
                      "stall_warning must not be negative (0: no warnings)");
  if (!options.flight_dump_dir.empty()) {
    struct stat st {};
    if (::stat(options.flight_dump_dir.c_str(), &st) != 0
        || !S_ISDIR(st.st_mode)
        || ::access(options.flight_dump_dir.c_str(), W_OK | X_OK) != 0)
      return make_error(errc::invalid_argument,
                        "flight_dump_dir '" + options.flight_dump_dir
                          + "' (or VARSYNC_FLIGHT_DIR) is not a writable "
                            "directory (M8); nothing was started");
  }
  return {};
}

/// M8: the dump directory from the environment where the options name none.
void flight_dump_dir_from_environment(strategy_options& options) {
  if (!options.flight_dump_dir.empty())
    return;
  if (const char* dir = std::getenv("VARSYNC_FLIGHT_DIR"))
    options.flight_dump_dir = dir;
}

} // namespace

caf::expected<strategy>
detail::create_strategy(caf::actor_system* sys, strategy_options options,
                        std::vector<replica_fault> faults) {
  flight_dump_dir_from_environment(options);
  if (auto err = check_options(options))
    return err;
  if (sys != nullptr)
    return make_strategy(nullptr, *sys, std::move(options), std::move(faults));
  auto devices = parse_devices(options.devices);
  if (!devices)
    return std::move(devices.error());
  auto cfg = std::make_unique<caf::actor_system_config>();
  register_types(*cfg);
  auto threads = options.scheduler_threads;
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  cfg->set("scheduler.max-threads", threads);
  cfg->set("logger.verbosity", caf::atom("quiet"));
  tune_scheduler(*cfg);
  auto host = detail::start_system_host(std::move(cfg));
  if (!host)
    return std::move(host.error());
  auto& ref = detail::system_of(**host);
  return make_strategy(std::move(*host), ref, std::move(options),
                       std::move(faults));
}

caf::expected<strategy> strategy::create(strategy_options options) {
  return detail::create_strategy(nullptr, std::move(options), {});
}

caf::expected<strategy> strategy::create(caf::actor_system& sys,
                                         strategy_options options) {
  return detail::create_strategy(&sys, std::move(options), {});
}

namespace {

/// The coordinator's configuration: the options, else the actor system's
/// config (`settings`).
coordinator_config coordinator_config_of(const strategy_options& options,
                                         const config_settings& settings,
                                         std::vector<device_id> devices,
                                         std::vector<replica_fault> faults,
                                         bool hidden) {
  coordinator_config cc;
  cc.devices = std::move(devices);
  cc.hidden = hidden;
  cc.default_timeout = to_timespan(options.timeout);
  cc.faults = std::move(faults);
  cc.step_exception = options.step_exception;
  cc.memory_budget_bytes = options.memory_budget_bytes.value_or(0) > 0
                             ? *options.memory_budget_bytes
                             : settings.memory_budget_bytes;
  cc.max_queued_operations
    = options.max_queued_operations.value_or(settings.max_queued_operations);
  cc.max_queued_bytes
    = options.max_queued_bytes.value_or(settings.max_queued_bytes);
  cc.small_step_bytes = options.small_step_bytes;
  cc.collect_metrics = options.collect_metrics;
  cc.stall_threshold = to_timespan(options.stall_warning);
  cc.flight_recorder = options.flight_recorder;
  cc.flight_dump_dir = options.flight_dump_dir;
  return cc;
}

/// Joins the other processes if the options name a cluster of several
/// (blocks until every process has joined, or the join timeout): where
/// this process stands, and the membership for the coordinator (`cc`).
caf::expected<detail::strategy_core::process_place>
join_cluster(const strategy_options& options, coordinator_config& cc) {
  detail::strategy_core::process_place place;
  if (!options.cluster)
    return place;
  if (options.cluster->world_size <= 1) {
    if (auto err = validate(*options.cluster))
      return err;
    return place;
  }
  // Whether NCCL can span the processes (the joiner combines every
  // process's answer).
  auto m = join_process_group(*options.cluster,
                              static_cast<int>(cc.devices.size()),
                              one_gpu_per_replica(cc.devices));
  if (!m)
    return std::move(m.error());
  // The shutdown leaves the group in order; process 0 of services mode
  // waits for the others first (their last operations need it).
  place = {m->group->rank(), m->group->size(), m->first_replica,
           m->total_replicas, m->mode, m->group,
           m->mode == cluster_mode::services && m->group->rank() == 0,
           options.cluster->operation_timeout};
  cc.processes = std::move(*m);
  return place;
}

std::string describe_strategy(const strategy_options& options,
                              const detail::strategy_core::process_place& place,
                              size_t replicas_here) {
  std::string description = "mirrored strategy over";
  for (auto& d : options.devices)
    description += " " + d;
  if (place.processes > 1)
    description += std::string{"; "} + to_string(place.mode)
                   + " mode, process " + std::to_string(place.rank) + " of "
                   + std::to_string(place.processes) + ", replicas "
                   + std::to_string(place.first_replica) + ".."
                   + std::to_string(place.first_replica + replicas_here - 1)
                   + " of " + std::to_string(place.total_replicas);
  return description;
}

/// The replicas, for actors bound to them, and the collective the
/// coordinator was given (blocking round trips at creation; never on the
/// hot path).
std::pair<std::vector<replica_actor>, std::string>
ask_coordinator(caf::actor_system& sys,
                const coordinator_internal_actor& coordinator) {
  std::vector<replica_actor> replicas;
  std::string collective = "unknown";
  caf::scoped_actor self{sys};
  self->request(coordinator, std::chrono::seconds(10), replicas_atom::value)
    .receive([&](std::vector<replica_actor>& xs) { replicas = std::move(xs); },
             [&](caf::error&) {});
  self->request(coordinator, std::chrono::seconds(10), describe_atom::value)
    .receive(
      [&](strategy_description& d) { collective = std::move(d.collective); },
      [&](caf::error&) {});
  return {std::move(replicas), std::move(collective)};
}

caf::expected<strategy>
make_strategy(std::shared_ptr<detail::system_host> owned,
              caf::actor_system& sys, strategy_options options,
              std::vector<replica_fault> faults) {
  // A failed creation destroys the system it started.
  auto fail = [&owned, &sys](caf::error err) -> caf::expected<strategy> {
    if (owned) {
      detail::forget_thread_logger(sys);
      detail::discard_system_host(*owned);
    }
    return err;
  };
  auto settings = apply_config_from(sys);
  if (!settings)
    return fail(std::move(settings.error()));
  if (options.timeout.count() == 0)
    options.timeout = settings->timeout;
  auto devices = parse_devices(options.devices);
  if (!devices)
    return fail(std::move(devices.error()));
  auto lifetime = detail::system_lifetime::of(sys);
  auto cc = coordinator_config_of(options, *settings, *devices,
                                  std::move(faults), lifetime != nullptr);
  auto place = join_cluster(options, cc);
  if (!place)
    return fail(std::move(place.error()));
  auto coordinator = spawn_coordinator(sys, cc);
  if (!coordinator)
    return fail(std::move(coordinator.error()));
  auto description = describe_strategy(options, *place, devices->size());
  auto [replicas, collective] = ask_coordinator(sys, *coordinator);
  description += "; bulk data: " + collective;
  log()->info("{}", description);
  if (owned)
    detail::forget_thread_logger(sys);
  auto core = std::make_shared<detail::strategy_core>(
    std::move(owned), sys, std::move(*coordinator), std::move(replicas),
    options.devices, description, memory_budget{cc.memory_budget_bytes},
    cc.max_queued_operations, cc.max_queued_bytes);
  core->place = *place;
  if (lifetime)
    watch_lifetime(*lifetime, core);
  return detail::strategy_access::handle(std::move(core), options.timeout);
}

} // namespace

// -- properties -------------------------------------------------------------------

namespace {

// A blocking call is its async operation plus a wait: every operation is
// written once, in async_strategy.
template <class T, class Start>
caf::expected<T> blocking(const strategy& s, Start start) {
  auto api = s.async();
  return detail::strategy_access::core(s)->await<T>(
    s.timeout(), [&](callback<T> done) { start(api, std::move(done)); });
}

template <class Start>
caf::error blocking_done(const strategy& s, Start start) {
  auto r = blocking<ok_atom>(s, [&](const async_strategy& api,
                                    callback<ok_atom> done) {
    start(api, [done = std::move(done)](caf::error err) {
      if (err)
        done(std::move(err));
      else
        done(ok_atom::value);
    });
  });
  return to_error(std::move(r));
}

} // namespace

strategy strategy::with_timeout(std::chrono::milliseconds timeout) const {
  return strategy{core_, timeout.count() > 0 ? timeout : timeout_};
}

std::optional<strategy> weak_strategy::lock() const {
  auto core = core_.lock();
  if (!core || core->stopped())
    return std::nullopt;
  return strategy{std::move(core), timeout_};
}

int strategy::num_replicas() const {
  return core_->num_replicas();
}

int strategy::num_local_replicas() const {
  return core_->num_local_replicas();
}

int strategy::first_local_replica() const {
  return core_->place.first_replica;
}

int strategy::process_rank() const { return core_->place.rank; }

int strategy::num_processes() const { return core_->place.processes; }

bool strategy::services_mode() const {
  return core_->place.processes > 1
         && core_->place.mode == cluster_mode::services;
}

const std::vector<std::string>& strategy::devices() const {
  return core_->devices();
}

caf::error strategy::check_host_memory(uint64_t bytes,
                                       const std::string& what) const {
  return core_->budget().check(bytes, what);
}

std::string strategy::description() const {
  return core_->description();
}

caf::expected<strategy_description> strategy::stats() const {
  return blocking<strategy_description>(*this, [](auto& api, auto done) {
    api.stats(std::move(done));
  });
}

caf::expected<strategy_metrics> strategy::metrics() const {
  return blocking<strategy_metrics>(*this, [](auto& api, auto done) {
    api.metrics(std::move(done));
  });
}

caf::expected<std::vector<strategy_metrics>>
strategy::metrics_of_processes() const {
  return blocking<std::vector<strategy_metrics>>(
    *this, [](auto& api, auto done) {
      api.metrics_of_processes(std::move(done));
    });
}

async_strategy strategy::async() const {
  return async_strategy{*this};
}

void strategy::shutdown() const {
  core_->shutdown();
}

// -- variables --------------------------------------------------------------------

caf::expected<variable> strategy::create_variable(variable_spec spec) const {
  return blocking<variable>(*this, [&](auto& api, auto done) {
    api.create_variable(std::move(spec), std::move(done));
  });
}

caf::expected<variable>
strategy::create_variable(std::string name, tensor initial_value,
                          synchronization sync, aggregation agg,
                          std::optional<bool> trainable) const {
  return blocking<variable>(*this, [&](auto& api, auto done) {
    api.create_variable(std::move(name), std::move(initial_value), sync, agg,
                        trainable, std::move(done));
  });
}

caf::expected<variable> strategy::lookup(const std::string& name) const {
  return blocking<variable>(*this, [&](auto& api, auto done) {
    api.lookup(name, std::move(done));
  });
}

caf::expected<variable>
strategy::wait_for_variable(const std::string& name) const {
  return blocking<variable>(*this, [&](auto& api, auto done) {
    api.wait_for_variable(name, std::move(done));
  });
}

caf::error strategy::barrier() const {
  return blocking_done(*this, [](auto& api, done_callback done) {
    api.barrier(std::move(done));
  });
}

caf::error strategy::agree(caf::error local, std::string what) const {
  return blocking_done(*this, [&](auto& api, done_callback done) {
    api.agree(std::move(local), std::move(what), std::move(done));
  });
}

caf::expected<std::vector<variable>> strategy::variables() const {
  return blocking<std::vector<variable>>(*this, [](auto& api, auto done) {
    api.variables(std::move(done));
  });
}

caf::error strategy::destroy(const variable& v) const {
  return blocking_done(*this, [&](auto& api, done_callback done) {
    api.destroy(v, std::move(done));
  });
}

// -- cross-replica context --------------------------------------------------------

caf::expected<tensor> strategy::read(const variable& v) const {
  return blocking<tensor>(*this, [&](auto& api, auto done) {
    api.read(v, std::move(done));
  });
}

caf::error strategy::update(const variable& v, update_op op,
                            const tensor& value) const {
  return blocking_done(*this, [&](auto& api, done_callback done) {
    api.update(v, op, value, std::move(done));
  });
}

caf::error strategy::scatter(const variable& v, scatter_op op,
                             indexed_slices slices) const {
  return blocking_done(*this, [&](auto& api, done_callback done) {
    api.scatter(v, op, std::move(slices), std::move(done));
  });
}

caf::error strategy::assign(const variable& v, const tensor& x) const {
  return update(v, update_op::assign, x);
}

caf::error strategy::assign_add(const variable& v, const tensor& x) const {
  return update(v, update_op::assign_add, x);
}

caf::error strategy::assign_sub(const variable& v, const tensor& x) const {
  return update(v, update_op::assign_sub, x);
}

namespace {

// The blocking scalar update hands its answer to the coordinator as it is:
// through the async API's error-only callback it would be wrapped twice
// (an allocation each), on the path of every scalar counter update.
caf::error scalar_update(const strategy& s, const variable& v, update_op op,
                         double value) {
  auto core = detail::strategy_access::core(s);
  auto start = [&](reply_fn<ok_atom> done) {
    if (auto err = require_handle(v))
      return done(std::move(err));
    auto x = scalar_for(v.info(), value);
    if (!x)
      return done(std::move(x.error()));
    core->submit(ops::update{v.id(), op, std::move(*x)},
                 to_timespan(s.timeout()), std::move(done));
  };
  return to_error(core->await<ok_atom>(s.timeout(), start));
}

} // namespace

caf::error strategy::assign(const variable& v, double x) const {
  return scalar_update(*this, v, update_op::assign, x);
}

caf::error strategy::assign_add(const variable& v, double x) const {
  return scalar_update(*this, v, update_op::assign_add, x);
}

caf::error strategy::assign_sub(const variable& v, double x) const {
  return scalar_update(*this, v, update_op::assign_sub, x);
}

caf::expected<std::vector<tensor>>
strategy::local_values(const variable& v) const {
  return blocking<std::vector<tensor>>(*this, [&](auto& api, auto done) {
    api.local_values(v, std::move(done));
  });
}

caf::expected<std::vector<tensor>>
strategy::all_values(const variable& v) const {
  return blocking<std::vector<tensor>>(*this, [&](auto& api, auto done) {
    api.all_values(v, std::move(done));
  });
}

caf::expected<std::vector<std::optional<tensor>>>
strategy::survivor_values(const variable& v) const {
  return blocking<std::vector<std::optional<tensor>>>(
    *this, [&](auto& api, auto done) {
      api.survivor_values(v, std::move(done));
    });
}

// -- replica steps ------------------------------------------------------------------

caf::error strategy::run_step(replica_step_ptr step) const {
  return blocking_done(*this, [&](auto& api, done_callback done) {
    api.run(std::move(step), std::move(done));
  });
}

// -- distributed values ---------------------------------------------------------------

caf::expected<tensor> strategy::reduce(reduce_op op,
                                       const per_replica<tensor>& values) const {
  if (auto err = check_running(*core_))
    return err;
  if (auto err = check_local("reduce", num_processes()))
    return err;
  if (auto err = check_count("reduce", values.size(), num_replicas()))
    return err;
  if (auto err = check_budget(*core_, reduce_bytes(op, values.values(), false),
                              "reduce"))
    return err;
  return reduce_values(op, values.values());
}

caf::expected<tensor> strategy::reduce(reduce_op op,
                                       const per_replica<tensor>& values,
                                       int64_t axis) const {
  if (auto err = check_running(*core_))
    return err;
  if (auto err = check_local("reduce", num_processes()))
    return err;
  if (auto err = check_count("reduce", values.size(), num_replicas()))
    return err;
  if (auto err = check_budget(*core_, reduce_bytes(op, values.values(), true),
                              "reduce along axis " + std::to_string(axis)))
    return err;
  return reduce_values(op, values.values(), axis);
}

caf::expected<tensor> strategy::reduce(reduce_op op,
                                       const mirrored<tensor>& value) const {
  if (auto err = check_running(*core_))
    return err;
  if (value.num_replicas() != num_replicas())
    return make_error(errc::invalid_argument,
                      "reduce: the mirrored value spans "
                        + std::to_string(value.num_replicas())
                        + " replicas but the strategy has "
                        + std::to_string(num_replicas()));
  // D5 (TF differs): every replica holds x, so mean is x and sum is N·x.
  if (op == reduce_op::mean) {
    if (is_floating(value.value().type()))
      return value.value();
    if (auto err = check_budget(
          *core_, saturating_mul(static_cast<uint64_t>(value.value().size()), 8),
          "reduce"))
      return err;
    return to_float64(value.value());
  }
  std::vector<tensor> copies(static_cast<size_t>(num_replicas()),
                             value.value());
  if (auto err = check_budget(*core_, reduce_bytes(op, copies, false),
                              "reduce"))
    return err;
  return reduce_values(op, copies);
}

caf::expected<tensor> strategy::gather(const per_replica<tensor>& values,
                                       int64_t axis) const {
  if (auto err = check_running(*core_))
    return err;
  if (auto err = check_local("gather", num_processes()))
    return err;
  if (auto err = check_count("gather", values.size(), num_replicas()))
    return err;
  uint64_t output = 0;
  for (auto& x : values.values())
    output = saturating_add(output, x.nbytes());
  if (auto err = check_budget(*core_, output, "gather"))
    return err;
  return gather_values(values.values(), axis);
}

caf::expected<mirrored<tensor>>
strategy::all_reduce(reduce_op op, const per_replica<tensor>& values) const {
  return blocking<mirrored<tensor>>(*this, [&](auto& api, auto done) {
    api.all_reduce(op, values, std::move(done));
  });
}

caf::expected<std::vector<mirrored<tensor>>>
strategy::batch_all_reduce(reduce_op op,
                           const std::vector<per_replica<tensor>>& values) const {
  return blocking<std::vector<mirrored<tensor>>>(
    *this, [&](auto& api, auto done) {
      api.batch_all_reduce(op, values, std::move(done));
    });
}


} // namespace varsync
