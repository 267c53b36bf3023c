#pragma once
// gloo::rendezvous::Store over varsync's control plane: every get/set is a
// request to the group's rendezvous_store_actor (messages/rendezvous_store.hpp),
// local or in another process. Blocking: call it only from a thread of its
// own (Gloo's calls), never from a CAF scheduler thread.

#include <chrono>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <gloo/rendezvous/store.h>

#include "messages/rendezvous_store.hpp"

namespace varsync {

class control_store final : public gloo::rendezvous::Store {
public:
  /// Keys are prefixed with `prefix` so that several groups share a store.
  control_store(caf::actor_system& sys, rendezvous_store_actor store,
                std::string prefix, std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

private:
  std::vector<char> get_within(const std::string& key,
                               std::chrono::milliseconds timeout);

  caf::actor_system& sys_;
  rendezvous_store_actor store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

} // namespace varsync
