// The engine behind the façade: the actor system host, calls into the
// coordinator, blocking waits and shutdown.

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

namespace detail {

using api_helpers::to_timespan;

thread_local std::shared_ptr<std::atomic<int>>* starting_call = nullptr;


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

void discard_system_host(system_host& host) {
  host.release({});
  host.await_destroyed();
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
  // Services mode: process 0 orders every operation, the others' last ones
  // included, so it leaves last. Every process then says it leaves before
  // its connections close (never waiting on an actor's thread: the
  // group's teardown says it then).
  if (place.group && !check_may_block()) {
    if (place.waits_for_others
        && !place.group->control().await_others_left(place.leave_timeout))
      log()->warn("services mode: process 0 shuts down while other processes "
                  "are still in the strategy (waited {} ms); their later "
                  "cross-replica operations fail",
                  place.leave_timeout.count());
    place.group->control().leave();
  }
  caf::anon_send(coordinator_, shutdown_atom::value);
}

void strategy_core::system_gone() {
  system_gone_ = true;
  shutdown();
}

caf::error strategy_core::shut_down_error() const {
  if (system_gone_.load())
    return make_error(errc::shut_down,
                      "the strategy's actor system was destroyed while this "
                      "handle was held");
  return make_error(errc::shut_down, "the strategy has shut down");
}

void strategy_core::metrics(reply_fn<strategy_metrics> done) {
  auto counts = outstanding_;
  submit_now(
    ops::metrics{}, caf::timespan::max(),
    [counts, done = std::move(done)](caf::expected<strategy_metrics> r) {
      if (r) {
        r->outstanding_calls = counts->operations.load();
        r->refusals += counts->refused.load();
      }
      done(std::move(r));
    });
}

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

} // namespace detail

bool await_strategy_shutdowns(std::chrono::milliseconds limit) {
  return detail::pending_shutdowns::get().wait(limit);
}


} // namespace varsync
