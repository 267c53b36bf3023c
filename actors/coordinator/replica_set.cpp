#include "actors/coordinator/replica_set.hpp"

#include <string>

#include <caf/actor_system.hpp>
#include <caf/sec.hpp>
#include <caf/system_messages.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "core/logging.hpp"
#include "varsync/error.hpp"

namespace varsync {

replica_set::replica_set(self_pointer self, std::vector<device_id> devices,
                         std::vector<replica_actor> replicas, link& owner,
                         operation_deadlines& deadlines)
  : self_(self),
    devices_(std::move(devices)),
    replicas_(std::move(replicas)),
    failures_(replicas_.size()),
    owner_(owner),
    deadlines_(deadlines) {
}

void replica_set::bind() {
  for (auto& replica : replicas_) {
    self_->monitor(replica);
    // First message to each replica: from now on it takes component, step
    // and collective messages from this coordinator only.
    self_->send(replica, bind_atom::value);
  }
  self_->set_down_handler([this](caf::down_msg& msg) {
    for (size_t i = 0; i < replicas_.size(); ++i) {
      if (replicas_[i].address() != msg.source)
        continue;
      failures_[i] = msg.reason ? msg.reason
                                : make_error(errc::replica_failed,
                                             "the replica exited");
      log()->error("replica {} ({}) is down: {}", i, to_string(devices_[i]),
                   self_->system().render(failures_[i]));
    }
  });
}

caf::error replica_set::check(size_t first) const {
  for (size_t i = 0; i < failures_.size(); ++i)
    if (failures_[i])
      return make_error(errc::replica_failed,
                        "replica " + std::to_string(first + i) + " ("
                          + to_string(devices_[i])
                          + ") has failed: " + varsync::describe(failures_[i]));
  return {};
}

std::vector<std::string> replica_set::describe_failures() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < failures_.size(); ++i)
    if (failures_[i])
      out.push_back("replica " + std::to_string(i) + " ("
                    + to_string(devices_[i])
                    + "): " + varsync::describe(failures_[i]));
  return out;
}

bool replica_set::gone(const caf::error& err) {
  if (err.category() == error_category)
    return err.code() == static_cast<uint8_t>(errc::replica_failed);
  return err.category() == caf::atom("system")
         && err.code() == static_cast<uint8_t>(caf::sec::request_receiver_down);
}

caf::error replica_set::translate(const caf::error& err,
                                  size_t replica) const {
  if (err.category() == error_category)
    return err;
  auto who = "replica " + std::to_string(replica) + " ("
             + to_string(devices_[replica]) + ")";
  if (err.category() == caf::atom("system")
      && err.code() == static_cast<uint8_t>(caf::sec::request_timeout))
    return make_error(errc::timeout,
                      who + " did not answer within the call's deadline");
  return make_error(errc::replica_failed,
                    who + " failed: " + self_->system().render(err));
}

} // namespace varsync
