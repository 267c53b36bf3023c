#include "sync/gloo/control_store.hpp"

#include <caf/scoped_actor.hpp>
#include <gloo/common/error.h>

namespace varsync {

control_store::control_store(caf::actor_system& sys,
                             rendezvous_store_actor store, std::string prefix,
                             std::chrono::milliseconds timeout)
  : sys_(sys),
    store_(std::move(store)),
    prefix_(std::move(prefix)),
    timeout_(timeout) {
}

// Gloo expects its stores to throw IoException on failure: the group turns
// it into an error value naming what was missing.
void control_store::set(const std::string& key,
                        const std::vector<char>& data) {
  caf::scoped_actor self{sys_};
  bool ok = false;
  std::string why;
  self->request(store_, timeout_, store_set_atom::value, prefix_ + key, data)
    .receive([&](ok_atom) { ok = true; },
             [&](const caf::error& err) { why = sys_.render(err); });
  if (!ok)
    GLOO_THROW_IO_EXCEPTION("rendezvous store: set of '", prefix_ + key,
                            "' failed: ", why);
}

std::vector<char> control_store::get_within(const std::string& key,
                                            std::chrono::milliseconds timeout) {
  caf::scoped_actor self{sys_};
  std::vector<char> out;
  bool ok = false;
  std::string why;
  self->request(store_, timeout, store_get_atom::value, prefix_ + key)
    .receive(
      [&](std::vector<char>& bytes) {
        out = std::move(bytes);
        ok = true;
      },
      [&](const caf::error& err) { why = sys_.render(err); });
  if (!ok)
    GLOO_THROW_IO_EXCEPTION("rendezvous store: '", prefix_ + key,
                            "' was not set within ", timeout.count(),
                            " ms (", why, ")");
  return out;
}

std::vector<char> control_store::get(const std::string& key) {
  return get_within(key, timeout_);
}

void control_store::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void control_store::wait(const std::vector<std::string>& keys,
                         const std::chrono::milliseconds& timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto& key : keys) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    get_within(key, std::max(left, std::chrono::milliseconds{1}));
  }
}

} // namespace varsync
