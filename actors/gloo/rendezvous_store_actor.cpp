#include "actors/gloo/rendezvous_store_actor.hpp"

#include <map>
#include <string>
#include <vector>

#include <caf/typed_event_based_actor.hpp>

namespace varsync {

namespace {

// Class-based: CAF 0.17 binds a null reference when spawning a function-based
// actor without arguments (UBSan reports it).
class store_impl final : public rendezvous_store_actor::base {
public:
  explicit store_impl(caf::actor_config& cfg)
    : rendezvous_store_actor::base(cfg) {
  }

  behavior_type make_behavior() override {
    return {
      [this](store_set_atom, const std::string& key,
             std::vector<char>& bytes) -> ok_atom {
        auto range = waiting_.equal_range(key);
        for (auto i = range.first; i != range.second; ++i)
          i->second.deliver(bytes);
        waiting_.erase(range.first, range.second);
        values_[key] = std::move(bytes);
        return ok_atom::value;
      },
      [this](store_get_atom,
             const std::string& key) -> caf::result<std::vector<char>> {
        auto i = values_.find(key);
        if (i != values_.end())
          return i->second;
        auto promise = make_response_promise<std::vector<char>>();
        waiting_.emplace(key, promise);
        return promise;
      },
    };
  }

  // Pending promises hold the requesters (remote proxies among them), which
  // can lead back to this actor: release them when it stops.
  void on_exit() override {
    waiting_.clear();
    values_.clear();
  }

private:
  std::map<std::string, std::vector<char>> values_;
  // Gets of keys not set yet; the requester's timeout bounds its wait.
  std::multimap<std::string, caf::typed_response_promise<std::vector<char>>>
    waiting_;
};

} // namespace

rendezvous_store_actor spawn_rendezvous_store(caf::actor_system& sys) {
  return sys.spawn<store_impl>();
}

} // namespace varsync
