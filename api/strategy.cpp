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
#include "actors/coordinator_actor.hpp"
#include "core/logging.hpp"
#include "varsync/config.hpp"
#include "sync/collective_path.hpp"
#include "sync/distributed_reduce.hpp"
#include "sync/sync_policy.hpp"
#include "api/strategy_core.hpp"

namespace varsync {

namespace detail {

namespace {

// A client call is started by the coordinator or abandoned by a blocking
// caller whose deadline passed, whichever comes first.
enum : int { call_pending, call_started, call_abandoned };

// The state of the call that await() is starting on this thread.
thread_local std::shared_ptr<std::atomic<int>>* starting_call = nullptr;

// Calls `fn` once: with the outcome, or with shut_down when the last copy
// is dropped unanswered (the coordinator stopped with the operation in
// flight), so that no caller waits for an answer that cannot come.
template <class T>
struct reply_once {
  reply_fn<T> fn;
  void operator()(caf::expected<T> r) {
    auto f = std::move(fn);
    fn = nullptr;
    if (f)
      f(std::move(r));
  }
  ~reply_once() {
    if (fn)
      fn(make_error(errc::shut_down,
                    "the strategy shut down before the operation completed"));
  }
};

template <class T>
class call_impl final : public client_call {
public:
  using op_type = std::function<void(coordinator_state&, reply_fn<T>)>;

  call_impl(op_type op, reply_fn<T> done)
    : op_(std::move(op)), done_(std::move(done)) {
  }

  ~call_impl() override {
    if (done_) // never ran: the coordinator is gone
      done_(make_error(errc::shut_down, "the strategy has shut down"));
  }

  // Admitted like every request (coordinator_state::admit); the slot is
  // released when the operation completes.
  void invoke(coordinator_state& coordinator) override {
    int expected = call_pending;
    if (!state_->compare_exchange_strong(expected, call_started)) {
      done_ = nullptr; // the caller has its answer: timeout, nothing changed
      coordinator.release_slot();
      return;
    }
    auto once = std::make_shared<reply_once<T>>();
    once->fn = std::move(done_);
    done_ = nullptr;
    // The deadline counts from the request, not from when the coordinator
    // got to it.
    coordinator.run_requested_at(submitted_, [&] {
      op_(coordinator,
          coordinator.releasing<T>(
            [once](caf::expected<T> r) { (*once)(std::move(r)); }));
    });
  }

private:
  op_type op_;
  reply_fn<T> done_;
  std::shared_ptr<std::atomic<int>> state_
    = starting_call ? *starting_call
                    : std::make_shared<std::atomic<int>>(call_pending);
  std::chrono::steady_clock::time_point submitted_
    = std::chrono::steady_clock::now();
};

// Timeouts of 100 years or more mean "no deadline": converted to nanoseconds
// and added to a clock reading they would overflow int64 (292 years).
constexpr std::chrono::milliseconds no_deadline_from{
  std::chrono::hours{24 * 365 * 100}};

caf::timespan to_timespan(std::chrono::milliseconds ms) {
  if (ms >= no_deadline_from)
    return caf::timespan::max(); // the coordinator's "no deadline"
  return std::chrono::duration_cast<caf::timespan>(ms);
}

} // namespace

namespace {

// Strategies whose owned actor system is still shutting down after their
// last handle went away. Never destroyed (system threads may outlive static
// destruction); a static guard gives them a bounded time at process exit.
struct pending_shutdowns {
  std::mutex mtx;
  std::condition_variable cv;
  size_t count = 0;

  static pending_shutdowns& get() {
    static auto* instance = new pending_shutdowns;
    static exit_guard guard;
    return *instance;
  }

  void add() {
    std::lock_guard<std::mutex> lock{mtx};
    ++count;
  }

  void remove() {
    std::lock_guard<std::mutex> lock{mtx};
    --count;
    cv.notify_all();
  }

  bool wait(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock{mtx};
    return cv.wait_for(lock, limit, [this] { return count == 0; });
  }

  struct exit_guard {
    ~exit_guard() { get().wait(std::chrono::seconds(10)); }
  };
};

} // namespace

// CAF 0.17's actor_system destructor waits for per-thread state of the
// thread that constructed the system, which that thread gives up only when
// it destroys the system or exits: destroyed on any other thread while the
// constructing one lives, it hangs. And destroyed on one of its own threads
// (an async callback, a worker of a checkpoint actor) it waits for itself.
// So a thread of its own builds the system, keeps it until released, then
// destroys it; releasing never waits, from whatever thread.
class system_host {
public:
  explicit system_host(std::unique_ptr<caf::actor_system_config> cfg)
    : cfg_(std::move(cfg)) {
  }

  caf::error start() {
    auto self = shared_from_this_ptr();
    std::thread{[self] { self->run(); }}.detach();
    std::unique_lock<std::mutex> lock{mtx_};
    cv_.wait(lock, [this] { return state_ != state::starting; });
    return std::move(start_error_);
  }

  caf::actor_system& system() { return *sys_; }

  /// Lets the thread destroy the system once the actors are gone. `keep`
  /// holds the last actor handles, released there while the system lives.
  void release(std::function<void()> keep) {
    pending_shutdowns::get().add();
    std::lock_guard<std::mutex> lock{mtx_};
    keep_ = std::move(keep);
    state_ = state::released;
    cv_.notify_all();
  }

  void await_destroyed() {
    std::unique_lock<std::mutex> lock{mtx_};
    cv_.wait(lock, [this] { return state_ == state::destroyed; });
  }

  bool await_destroyed(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock{mtx_};
    return cv_.wait_for(lock, limit,
                        [this] { return state_ == state::destroyed; });
  }

  std::weak_ptr<system_host> weak_self;

private:
  enum class state { starting, running, released, destroyed };

  std::shared_ptr<system_host> shared_from_this_ptr() {
    return weak_self.lock();
  }

  void run() {
    try {
      sys_ = std::make_unique<caf::actor_system>(*cfg_);
    } catch (const std::exception& ex) {
      std::lock_guard<std::mutex> lock{mtx_};
      start_error_ = make_error(errc::invalid_argument,
                                std::string{"cannot start the actor system: "}
                                  + ex.what());
      state_ = state::destroyed;
      cv_.notify_all();
      return;
    }
    std::function<void()> keep;
    {
      std::unique_lock<std::mutex> lock{mtx_};
      state_ = state::running;
      cv_.notify_all();
      cv_.wait(lock, [this] { return state_ == state::released; });
      keep = std::move(keep_);
    }
    keep = nullptr;
    // Waits for the actors (they got their exit messages), then the config.
    sys_.reset();
    cfg_.reset();
    {
      std::lock_guard<std::mutex> lock{mtx_};
      state_ = state::destroyed;
      cv_.notify_all();
    }
    pending_shutdowns::get().remove();
  }

  std::unique_ptr<caf::actor_system_config> cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::mutex mtx_;
  std::condition_variable cv_;
  state state_ = state::starting;
  caf::error start_error_;
  std::function<void()> keep_;
};

caf::expected<std::shared_ptr<system_host>>
start_system_host(std::unique_ptr<caf::actor_system_config> cfg) {
  auto host = std::make_shared<system_host>(std::move(cfg));
  host->weak_self = host;
  try {
    if (auto err = host->start())
      return err;
  } catch (const std::system_error& ex) {
    return make_error(errc::invalid_argument,
                      std::string{"cannot start a thread for the actor "
                                  "system: "}
                        + ex.what());
  }
  return host;
}

caf::actor_system& system_of(system_host& host) {
  return host.system();
}

void forget_thread_logger(caf::actor_system& sys) {
  if (caf::logger::current_logger() == &sys.logger())
    caf::logger::set_current_actor_system(nullptr);
}

namespace {

template <class Policy>
void add_workers(caf::actor_system& sys, std::vector<std::thread::id>& out) {
  auto* sched = dynamic_cast<caf::scheduler::coordinator<Policy>*>(
    &sys.scheduler());
  if (sched == nullptr)
    return;
  for (size_t i = 0; i < sched->num_workers(); ++i)
    out.push_back(sched->worker_by_id(i)->get_thread().get_id());
}

// Started with the system, so they all exist once a strategy is created.
std::vector<std::thread::id> scheduler_threads_of(caf::actor_system& sys) {
  std::vector<std::thread::id> out;
  add_workers<caf::policy::work_stealing>(sys, out);
  add_workers<caf::policy::work_sharing>(sys, out);
  return out;
}

} // namespace

strategy_core::strategy_core(std::shared_ptr<system_host> owned,
                             caf::actor_system& sys,
                             coordinator_internal_actor coordinator,
                             std::vector<replica_actor> replicas,
                             std::vector<std::string> devices,
                             std::string description,
                             memory_budget budget,
                             size_t max_queued_operations,
                             size_t max_queued_bytes)
  : owned_(std::move(owned)),
    sys_(&sys),
    scheduler_threads_(scheduler_threads_of(sys)),
    coordinator_(std::move(coordinator)),
    replicas_(std::move(replicas)),
    devices_(std::move(devices)),
    description_(std::move(description)),
    budget_(std::move(budget)),
    max_queued_operations_(max_queued_operations),
    max_queued_bytes_(max_queued_bytes) {
}

strategy_core::~strategy_core() {
  shutdown();
  if (!owned_)
    return; // a user's actor system: its owner destroys it
  // This thread's hold on the system's logger would stall its destruction.
  forget_thread_logger(*sys_);
  owned_->release([coordinator = std::move(coordinator_),
                   replicas = std::move(replicas_)] {});
  // The creating thread waits (bounded: another thread that still holds the
  // logger, see forget_thread_logger, delays it until that thread exits);
  // any other thread may be one of the system's own and does not wait.
  if (std::this_thread::get_id() == owner_
      && !owned_->await_destroyed(std::chrono::seconds(10)))
    log()->warn("the strategy's actor system is still shutting down after "
                "10 s; a thread that used it (a scoped_actor) may hold it up "
                "until that thread exits");
}

void strategy_core::shutdown() {
  if (stopped_.exchange(true))
    return;
  caf::anon_send(coordinator_, shutdown_atom::value);
}

template <class T>
void strategy_core::submit(
  std::function<void(coordinator_state&, reply_fn<T>)> op, reply_fn<T> done,
  size_t bytes) {
  if (stopped_.load()) {
    done(make_error(errc::shut_down, "the strategy has shut down"));
    return;
  }
  // Count first, then check: concurrent submitters never pass the bounds
  // together. A single call larger than the byte bound still runs when
  // nothing else is outstanding.
  auto counts = outstanding_;
  auto ops = counts->operations.fetch_add(1) + 1;
  auto queued = counts->bytes.fetch_add(bytes) + bytes;
  if (ops > max_queued_operations_
      || (queued > max_queued_bytes_ && queued != bytes)) {
    counts->operations.fetch_sub(1);
    counts->bytes.fetch_sub(bytes);
    done(make_error(
      errc::overloaded,
      ops > max_queued_operations_
        ? "refused: " + std::to_string(max_queued_operations_)
            + " calls of this strategy are outstanding "
              "(max_queued_operations); nothing was changed, retry later"
        : "refused: the calls outstanding hold more than "
            + std::to_string(max_queued_bytes_)
            + " bytes of tensors (max_queued_bytes); nothing was changed, "
              "retry later"));
    return;
  }
  // The slot is given back when the call is answered (before `done` runs, so
  // that `done` may submit the next call), or when the call is dropped
  // unanswered (a blocking caller abandoned it).
  struct slot {
    std::shared_ptr<outstanding> counts;
    size_t bytes;
    std::atomic<bool> held{true};
    void release() {
      if (held.exchange(false)) {
        counts->operations.fetch_sub(1);
        counts->bytes.fetch_sub(bytes);
      }
    }
    ~slot() { release(); }
  };
  auto held = std::make_shared<slot>();
  held->counts = std::move(counts);
  held->bytes = bytes;
  reply_fn<T> counted = [held, done = std::move(done)](caf::expected<T> r) {
    held->release();
    done(std::move(r));
  };
  client_call_ptr call = std::make_shared<call_impl<T>>(std::move(op),
                                                        std::move(counted));
  caf::anon_send(coordinator_, client_atom::value, std::move(call));
}

// Where a blocking caller waits for its outcome. No spinning: on 2 cores a
// spinning caller takes the CPU that the coordinator and replicas need
// (measured: medians went from ~12 us to milliseconds).
template <class T>
class blocking_slot {
public:
  void set(caf::expected<T> value) {
    value_.emplace(std::move(value));
    {
      std::lock_guard<std::mutex> guard{mtx_};
      ready_.store(true, std::memory_order_release);
    }
    cv_.notify_one();
  }

  bool wait_until(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> guard{mtx_};
    return cv_.wait_until(guard, deadline, [this] {
      return ready_.load(std::memory_order_acquire);
    });
  }

  void wait() {
    std::unique_lock<std::mutex> guard{mtx_};
    cv_.wait(guard, [this] { return ready_.load(std::memory_order_acquire); });
  }

  caf::expected<T> take() { return std::move(*value_); }

private:
  std::atomic<bool> ready_{false};
  std::mutex mtx_;
  std::condition_variable cv_;
  std::optional<caf::expected<T>> value_;
};

caf::error strategy_core::check_may_block() const {
  auto self = std::this_thread::get_id();
  bool own_thread = on_varsync_actor_thread();
  for (auto& id : scheduler_threads_)
    own_thread = own_thread || id == self;
  if (!own_thread)
    return {};
  return make_error(
    errc::would_block,
    "a blocking strategy call on a thread that runs the strategy's actors (an "
    "async callback, a replica step or an actor) would wait for itself until "
    "the deadline; use the callback API (s.async()...), the replica_context "
    "inside a step, or send requests to the coordinator (coordinator_of, "
    "varsync/actor_api.hpp)");
}

template <class T, class Start>
caf::expected<T> strategy_core::await(std::chrono::milliseconds timeout,
                                      Start&& start) {
  if (auto err = check_may_block())
    return err;
  auto slot = std::make_shared<blocking_slot<T>>();
  // The client call that start() submits shares this state, so that this
  // caller can abandon it if the coordinator has not started it in time.
  auto state = std::make_shared<std::atomic<int>>(call_pending);
  starting_call = &state;
  start(reply_fn<T>{
    [slot](caf::expected<T> result) { slot->set(std::move(result)); }});
  starting_call = nullptr;
  if (timeout >= no_deadline_from) {
    slot->wait();
    return slot->take();
  }
  // The coordinator enforces the deadline towards the replicas; the grace
  // period covers the hop back.
  auto deadline = std::chrono::steady_clock::now() + timeout
                  + std::chrono::milliseconds(100);
  if (!slot->wait_until(deadline)) {
    int expected = call_pending;
    if (state->compare_exchange_strong(expected, call_abandoned))
      return make_error(errc::timeout,
                        "the coordinator did not start the operation within "
                          + std::to_string(timeout.count())
                          + " ms; it never will, nothing was changed");
    // Started: the coordinator answers by its own deadline (timeout before
    // the commit point, committed_late after it) or when it stops.
    slot->wait();
  }
  return slot->take();
}

} // namespace detail

bool await_strategy_shutdowns(std::chrono::milliseconds limit) {
  return detail::pending_shutdowns::get().wait(limit);
}

namespace {

using detail::to_timespan;

caf::error to_error(caf::expected<ok_atom> r) {
  return r ? caf::error{} : std::move(r.error());
}

caf::error require_handle(const variable& v) {
  if (!v.valid())
    return make_error(errc::invalid_argument, "the variable handle is empty");
  return {};
}

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

tensor to_float64(const tensor& x) {
  auto out = tensor::empty(dtype::float64, x.shape());
  auto* dst = out.mutable_data<double>();
  for (int64_t i = 0; i < x.size(); ++i)
    dst[i] = x.as_double(i);
  return out;
}

caf::error check_running(const detail::strategy_core& core) {
  if (core.stopped())
    return make_error(errc::shut_down, "the strategy has shut down");
  return {};
}

caf::error check_count(const char* what, size_t count, int num_replicas) {
  if (count != static_cast<size_t>(num_replicas))
    return make_error(errc::invalid_argument,
                      std::string{what} + ": expected "
                        + std::to_string(num_replicas)
                        + " per-replica values but got "
                        + std::to_string(count));
  return {};
}

// The bytes a reduction of `values` allocates: its output (float64 for the
// mean of integers) and, along an axis, the double accumulators.
uint64_t reduce_bytes(reduce_op op, const std::vector<tensor>& values,
                      bool along_axis) {
  if (values.empty())
    return 0;
  auto count = static_cast<uint64_t>(values[0].size());
  auto element = op == reduce_op::mean && !is_floating(values[0].type())
                   ? uint64_t{8}
                   : uint64_t{size_of(values[0].type())};
  return saturating_mul(count, along_axis ? element + 8 : element);
}

caf::error check_budget(const detail::strategy_core& core, uint64_t bytes,
                        const std::string& what) {
  return core.budget().check(bytes, what);
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
              caf::actor_system& sys, strategy_options options);

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
  return {};
}

} // namespace

caf::expected<strategy> strategy::create(strategy_options options) {
  if (auto err = check_options(options))
    return err;
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
  auto host = detail::start_system_host(std::move(cfg));
  if (!host)
    return std::move(host.error());
  auto& ref = detail::system_of(**host);
  return make_strategy(std::move(*host), ref, options);
}

caf::expected<strategy> strategy::create(caf::actor_system& sys,
                                         strategy_options options) {
  if (auto err = check_options(options))
    return err;
  return make_strategy(nullptr, sys, options);
}

namespace {

caf::expected<strategy>
make_strategy(std::shared_ptr<detail::system_host> owned,
              caf::actor_system& sys, strategy_options options) {
  // A failed creation destroys the system it started.
  auto fail = [&owned, &sys](caf::error err) -> caf::expected<strategy> {
    if (owned) {
      detail::forget_thread_logger(sys);
      owned->release({});
      owned->await_destroyed();
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
  coordinator_config cc;
  cc.devices = *devices;
  cc.default_timeout = to_timespan(options.timeout);
  cc.faults = options.faults;
  cc.step_exception = options.step_exception;
  cc.memory_budget_bytes = options.memory_budget_bytes.value_or(0) > 0
                             ? *options.memory_budget_bytes
                             : settings->memory_budget_bytes;
  cc.max_queued_operations
    = options.max_queued_operations.value_or(settings->max_queued_operations);
  cc.max_queued_bytes
    = options.max_queued_bytes.value_or(settings->max_queued_bytes);
  auto coordinator = spawn_coordinator(sys, cc);
  if (!coordinator)
    return fail(std::move(coordinator.error()));
  std::string description = "mirrored strategy over";
  for (auto& d : options.devices)
    description += " " + d;
  description += "; bulk data: " + describe_collective(*devices);
  log()->info("{}", description);
  // The replicas, for actors bound to them (one blocking round trip at
  // creation; never on the hot path).
  std::vector<replica_actor> replicas;
  {
    caf::scoped_actor self{sys};
    self->request(*coordinator, std::chrono::seconds(10), replicas_atom::value)
      .receive([&](std::vector<replica_actor>& xs) { replicas = std::move(xs); },
               [&](caf::error&) {});
  }
  if (owned)
    detail::forget_thread_logger(sys);
  auto core = std::make_shared<detail::strategy_core>(
    std::move(owned), sys, std::move(*coordinator),
    std::move(replicas), options.devices, description,
    memory_budget{cc.memory_budget_bytes}, cc.max_queued_operations,
    cc.max_queued_bytes);
  return strategy::from_core(std::move(core), options.timeout);
}

} // namespace

// -- properties -------------------------------------------------------------------

namespace {

// A blocking call is its async operation plus a wait: every operation is
// written once, in async_strategy.
template <class T, class Start>
caf::expected<T> blocking(const strategy& s, Start start) {
  auto api = s.async();
  return s.core()->await<T>(s.timeout(),
                            [&](callback<T> done) { start(api, std::move(done)); });
}

caf::error blocking_done(const strategy& s,
                         std::function<void(const async_strategy&,
                                            done_callback)> start) {
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

int strategy::num_replicas() const {
  return core_->num_replicas();
}

const std::vector<std::string>& strategy::devices() const {
  return core_->devices();
}

std::string strategy::description() const {
  return core_->description();
}

caf::expected<strategy_description> strategy::stats() const {
  return blocking<strategy_description>(*this, [](auto& api, auto done) {
    api.stats(std::move(done));
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

caf::error scalar_update(const strategy& s, const variable& v, update_op op,
                         double value) {
  return blocking_done(s, [&](auto& api, done_callback done) {
    api.update(v, op, value, std::move(done));
  });
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

reply_fn<variable_info> as_variable(callback<variable> done) {
  return [done = std::move(done)](caf::expected<variable_info> r) {
    if (r)
      done(variable{std::move(*r)});
    else
      done(std::move(r.error()));
  };
}

} // namespace

void async_strategy::stats(callback<strategy_description> done) const {
  s_.core_->submit<strategy_description>(
    [](coordinator_state& c, reply_fn<strategy_description> d) {
      c.describe(std::move(d));
    },
    std::move(done));
}

void async_strategy::create_variable(variable_spec spec,
                                     callback<variable> done) const {
  auto ts = to_timespan(s_.timeout_);
  auto bytes = spec.initial_value.nbytes();
  s_.core_->submit<variable_info>(
    [ts, spec = std::move(spec)](coordinator_state& c,
                                 reply_fn<variable_info> d) mutable {
      c.create(ts, std::move(spec), std::move(d));
    },
    as_variable(std::move(done)), bytes);
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
  s_.core_->submit<variable_info>(
    [name](coordinator_state& c, reply_fn<variable_info> d) {
      c.lookup(name, std::move(d));
    },
    as_variable(std::move(done)));
}

void async_strategy::variables(callback<std::vector<variable>> done) const {
  s_.core_->submit<std::vector<variable_info>>(
    [](coordinator_state& c, reply_fn<std::vector<variable_info>> d) {
      c.list(std::move(d));
    },
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
  auto ts = to_timespan(s_.timeout_);
  auto id = v.id();
  s_.core_->submit<ok_atom>(
    [ts, id](coordinator_state& c, reply_fn<ok_atom> d) {
      c.destroy(ts, id, std::move(d));
    },
    as_done(std::move(done)));
}

void async_strategy::read(const variable& v, callback<tensor> done) const {
  if (auto err = require_handle(v))
    return done(std::move(err));
  auto ts = to_timespan(s_.timeout_);
  auto id = v.id();
  s_.core_->submit<tensor>(
    [ts, id](coordinator_state& c, reply_fn<tensor> d) {
      c.read(ts, id, std::move(d));
    },
    std::move(done));
}

void async_strategy::update(const variable& v, update_op op, tensor value,
                            done_callback done) const {
  if (auto err = require_handle(v))
    return done(std::move(err));
  auto ts = to_timespan(s_.timeout_);
  auto id = v.id();
  auto bytes = value.nbytes();
  s_.core_->submit<ok_atom>(
    [ts, id, op, value = std::move(value)](coordinator_state& c,
                                           reply_fn<ok_atom> d) mutable {
      c.update(ts, id, op, std::move(value), std::move(d));
    },
    as_done(std::move(done)), bytes);
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
  auto ts = to_timespan(s_.timeout_);
  auto id = v.id();
  s_.core_->submit<std::vector<tensor>>(
    [ts, id](coordinator_state& c, reply_fn<std::vector<tensor>> d) {
      c.local_values(ts, id, std::move(d));
    },
    std::move(done));
}

void async_strategy::survivor_values(
  const variable& v, callback<std::vector<std::optional<tensor>>> done) const {
  if (auto err = require_handle(v))
    return done(std::move(err));
  auto ts = to_timespan(s_.timeout_);
  auto id = v.id();
  s_.core_->submit<std::vector<std::optional<tensor>>>(
    [ts, id](coordinator_state& c,
             reply_fn<std::vector<std::optional<tensor>>> d) {
      c.survivor_values(ts, id, std::move(d));
    },
    std::move(done));
}

void async_strategy::run(replica_step_ptr step, done_callback done) const {
  auto ts = to_timespan(s_.timeout_);
  s_.core_->submit<ok_atom>(
    [ts, step = std::move(step)](coordinator_state& c, reply_fn<ok_atom> d) {
      c.run(ts, step, std::move(d));
    },
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
  auto n = s_.num_replicas();
  auto inputs = collective_inputs(op, values, n, s_.core_->budget());
  if (!inputs)
    return done(std::move(inputs.error()));
  auto ts = to_timespan(s_.timeout_);
  size_t bytes = 0;
  for (auto& row : *inputs)
    for (auto& x : row)
      bytes += x.nbytes();
  s_.core_->submit<std::vector<tensor>>(
    [ts, op, inputs = std::move(*inputs)](
      coordinator_state& c, reply_fn<std::vector<tensor>> d) mutable {
      c.all_reduce(ts, op, std::move(inputs), std::move(d));
    },
    [n, done = std::move(done)](caf::expected<std::vector<tensor>> r) {
      if (!r)
        return done(std::move(r.error()));
      std::vector<mirrored<tensor>> out;
      for (auto& x : *r)
        out.emplace_back(std::move(x), n);
      done(std::move(out));
    },
    bytes);
}

} // namespace varsync
