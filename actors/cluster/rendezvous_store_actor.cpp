#include "actors/cluster/rendezvous_store_actor.hpp"

#include <map>
#include <string>
#include <vector>

#include <caf/typed_event_based_actor.hpp>

#include "varsync/error.hpp"

namespace varsync {

namespace {

using limits = rendezvous_store_limits;

// Values by key, each set once; a get of a key not set yet answers when it
// is set (the requester's timeout bounds its wait).
template <class T>
class keyed_table {
public:
  caf::result<ok_atom> set(const std::string& key, T value, size_t bytes) {
    if (auto i = values_.find(key); i != values_.end()) {
      if (i->second == value)
        return ok_atom::value;
      return refuse(errc::invalid_argument,
                    "key '" + key + "' is set already, with other contents");
    }
    if (values_.size() >= limits::keys
        || bytes > limits::total_bytes - stored_)
      return refuse(errc::overloaded, "the store is full");
    stored_ += bytes;
    auto range = waiting_.equal_range(key);
    for (auto i = range.first; i != range.second; ++i)
      i->second.deliver(value);
    waiting_.erase(range.first, range.second);
    values_.emplace(key, std::move(value));
    return ok_atom::value;
  }

  caf::result<T> get(caf::local_actor* self, const std::string& key) {
    auto i = values_.find(key);
    if (i != values_.end())
      return i->second;
    if (waiting_.size() >= limits::waiting_gets)
      return refuse(errc::overloaded, "too many gets wait for keys");
    auto promise = self->make_response_promise<T>();
    waiting_.emplace(key, promise);
    return promise;
  }

  void clear() {
    waiting_.clear();
    values_.clear();
    stored_ = 0;
  }

  static caf::error refuse(errc code, const std::string& why) {
    return make_error(code, "rendezvous store: " + why + "; nothing changed");
  }

private:
  std::map<std::string, T> values_;
  std::multimap<std::string, caf::typed_response_promise<T>> waiting_;
  size_t stored_ = 0;
};

template <class T>
caf::error check_key(const std::string& key) {
  if (key.empty() || key.size() > limits::key_bytes)
    return keyed_table<T>::refuse(
      errc::invalid_argument,
      "a key must have 1 to " + std::to_string(limits::key_bytes)
        + " bytes, not " + std::to_string(key.size()));
  return {};
}

// Class-based: CAF 0.17 binds a null reference when spawning a function-based
// actor without arguments (UBSan reports it).
class store_impl final : public rendezvous_store_actor::base {
public:
  explicit store_impl(caf::actor_config& cfg)
    : rendezvous_store_actor::base(cfg) {
  }

  behavior_type make_behavior() override {
    using bytes_table = keyed_table<std::vector<char>>;
    using actor_table = keyed_table<caf::strong_actor_ptr>;
    return {
      [this](store_set_atom, const std::string& key,
             std::vector<char>& bytes) -> caf::result<ok_atom> {
        if (auto err = check_key<std::vector<char>>(key))
          return err;
        if (bytes.size() > limits::value_bytes)
          return bytes_table::refuse(
            errc::invalid_argument,
            "a value may have " + std::to_string(limits::value_bytes)
              + " bytes at most, not " + std::to_string(bytes.size()));
        const auto size = key.size() + bytes.size();
        return bytes_.set(key, std::move(bytes), size);
      },
      [this](store_get_atom,
             const std::string& key) -> caf::result<std::vector<char>> {
        if (auto err = check_key<std::vector<char>>(key))
          return err;
        return bytes_.get(this, key);
      },
      [this](store_set_actor_atom, const std::string& name,
             caf::strong_actor_ptr& handle) -> caf::result<ok_atom> {
        if (auto err = check_key<caf::strong_actor_ptr>(name))
          return err;
        // Only this process keeps actors here: a peer could otherwise
        // hand the others an actor of its own choosing.
        auto sender = current_sender();
        if (!sender || sender->node() != system().node() || !handle
            || handle->node() != system().node())
          return actor_table::refuse(errc::invalid_argument,
                                     "only the process that hosts the store "
                                     "may keep an actor of its own in it");
        return actors_.set(name, std::move(handle), name.size());
      },
      [this](store_get_actor_atom,
             const std::string& name) -> caf::result<caf::strong_actor_ptr> {
        if (auto err = check_key<caf::strong_actor_ptr>(name))
          return err;
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
