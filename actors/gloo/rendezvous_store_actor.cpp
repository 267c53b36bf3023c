#include "actors/gloo/rendezvous_store_actor.hpp"

#include <map>
#include <string>
#include <vector>

#include <caf/typed_event_based_actor.hpp>

namespace varsync {

namespace {

// Values by key; a get of a key not set yet answers when it is set (the
// requester's timeout bounds its wait).
template <class T>
class keyed_table {
public:
  void set(const std::string& key, T value) {
    auto range = waiting_.equal_range(key);
    for (auto i = range.first; i != range.second; ++i)
      i->second.deliver(value);
    waiting_.erase(range.first, range.second);
    values_[key] = std::move(value);
  }

  caf::result<T> get(caf::local_actor* self, const std::string& key) {
    auto i = values_.find(key);
    if (i != values_.end())
      return i->second;
    auto promise = self->make_response_promise<T>();
    waiting_.emplace(key, promise);
    return promise;
  }

  void clear() {
    waiting_.clear();
    values_.clear();
  }

private:
  std::map<std::string, T> values_;
  std::multimap<std::string, caf::typed_response_promise<T>> waiting_;
};

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
        bytes_.set(key, std::move(bytes));
        return ok_atom::value;
      },
      [this](store_get_atom,
             const std::string& key) -> caf::result<std::vector<char>> {
        return bytes_.get(this, key);
      },
      [this](store_set_actor_atom, const std::string& name,
             caf::strong_actor_ptr& handle) -> ok_atom {
        actors_.set(name, std::move(handle));
        return ok_atom::value;
      },
      [this](store_get_actor_atom,
             const std::string& name) -> caf::result<caf::strong_actor_ptr> {
        return actors_.get(this, name);
      },
    };
  }

  // Pending promises hold the requesters (remote proxies among them), and
  // the actors kept here can lead back to this actor: release them when it
  // stops.
  void on_exit() override {
    bytes_.clear();
    actors_.clear();
  }

private:
  keyed_table<std::vector<char>> bytes_;
  keyed_table<caf::strong_actor_ptr> actors_;
};

} // namespace

rendezvous_store_actor spawn_rendezvous_store(caf::actor_system& sys) {
  return sys.spawn<store_impl>();
}

} // namespace varsync
