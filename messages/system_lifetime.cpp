#include "messages/system_lifetime.hpp"

#include <caf/abstract_actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/group_module.hpp>
#include <caf/sec.hpp>
#include <caf/thread_hook.hpp>

#include "core/logging.hpp"

namespace varsync::detail {

namespace {

// The watch of every live system whose config went through register_types.
// Never destroyed: system threads may outlive static destruction.
struct watches {
  std::mutex mtx;
  std::map<const caf::actor_system*, std::shared_ptr<system_lifetime>> of;

  static watches& get() {
    static auto* instance = new watches;
    return *instance;
  }
};

// The watch of the system this thread is constructing: the thread hook sets
// it, the group module factory (called later in the same constructor) takes
// it. register_types twice on one config makes one watch.
thread_local caf::actor_system* constructing = nullptr;
thread_local std::shared_ptr<system_lifetime> constructing_watch;

struct lifetime_hook final : caf::thread_hook {
  void init(caf::actor_system& sys) override {
    if (constructing == &sys && constructing_watch)
      return;
    constructing = &sys;
    constructing_watch = std::make_shared<system_lifetime>();
    auto& w = watches::get();
    std::lock_guard<std::mutex> lock{w.mtx};
    w.of[&sys] = constructing_watch;
  }
  void thread_started() override {
  }
  void thread_terminates() override {
  }
};

// Group modules are stopped by the actor system's destructor after it has
// waited for the actors that are not hidden, before the scheduler stops.
class lifetime_module final : public caf::group_module {
public:
  lifetime_module(caf::actor_system& sys, std::shared_ptr<system_lifetime> w)
    : caf::group_module(sys, "varsync"), watch_(std::move(w)) {
  }

  void stop() override {
    if (!watch_)
      return;
    watch_->system_stopping();
    auto& w = watches::get();
    std::lock_guard<std::mutex> lock{w.mtx};
    auto i = w.of.find(&system());
    if (i != w.of.end() && i->second == watch_)
      w.of.erase(i);
    watch_ = nullptr;
  }

  caf::expected<caf::group> get(const std::string&) override {
    return caf::sec::no_such_group_module;
  }

  caf::error load(caf::deserializer&, caf::group&) override {
    return caf::sec::no_such_group_module;
  }

private:
  std::shared_ptr<system_lifetime> watch_;
};

} // namespace

std::shared_ptr<system_lifetime> system_lifetime::of(caf::actor_system& sys) {
  auto& w = watches::get();
  std::lock_guard<std::mutex> lock{w.mtx};
  auto i = w.of.find(&sys);
  return i != w.of.end() ? i->second : nullptr;
}

void system_lifetime::watch(std::vector<caf::strong_actor_ptr> actors,
                            std::string what, std::function<void()> on_stop,
                            std::chrono::milliseconds limit) {
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock{mtx_};
    id = next_id_++;
    auto& e = entries_[id];
    e.what = std::move(what);
    e.on_stop = std::move(on_stop);
    e.limit = limit;
    e.alive = actors.size() + 1; // released below, once all are attached
  }
  // A functor attached to an actor that is already gone runs at once. Weak:
  // an actor the system stopped without waiting for may end after the watch.
  std::weak_ptr<system_lifetime> weak = shared_from_this();
  auto done = [weak, id] {
    if (auto self = weak.lock())
      self->terminated(id);
  };
  for (auto& a : actors)
    if (a)
      a->get()->attach_functor(done);
    else
      done();
  terminated(id);
}

void system_lifetime::terminated(uint64_t id) {
  std::lock_guard<std::mutex> lock{mtx_};
  auto i = entries_.find(id);
  if (i == entries_.end() || --i->second.alive > 0)
    return;
  entries_.erase(i);
  cv_.notify_all();
}

void system_lifetime::system_stopping() {
  std::vector<std::function<void()>> stops;
  {
    std::lock_guard<std::mutex> lock{mtx_};
    stopping_ = true;
    for (auto& [id, e] : entries_)
      if (e.on_stop)
        stops.push_back(std::move(e.on_stop));
  }
  for (auto& f : stops)
    f();
  std::unique_lock<std::mutex> lock{mtx_};
  while (!entries_.empty()) {
    auto& [id, e] = *entries_.begin();
    auto key = id;
    if (!cv_.wait_for(lock, e.limit,
                      [&] { return entries_.count(key) == 0; })) {
      log()->error("{}: still running {} ms after its actor system began "
                   "shutting down; the system stops without waiting for it",
                   e.what, e.limit.count());
      entries_.erase(key);
    }
  }
}

bool system_lifetime::stopping() const {
  std::lock_guard<std::mutex> lock{mtx_};
  return stopping_;
}

void watch_system_lifetime(caf::actor_system_config& cfg) {
  cfg.add_thread_hook<lifetime_hook>();
  cfg.group_module_factories.emplace_back([]() -> caf::group_module* {
    // A second factory of one config gets no watch; CAF keeps the first
    // module of a name and drops the second.
    return new lifetime_module(*constructing, std::move(constructing_watch));
  });
}

} // namespace varsync::detail
