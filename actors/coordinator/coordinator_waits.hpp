#pragma once
// Callers of the coordinator that wait for something other operations bring
// about: a variable of a name to exist (C10), every process to reach a
// barrier (P14). The coordinator tells this part what happened; the part
// answers its waiters, or fails them at their deadlines.

#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/error.hpp>
#include <caf/timespan.hpp>

#include "actors/coordinator/operation_deadlines.hpp"
#include "messages/completion.hpp"
#include "messages/shared_variable_info.hpp"

namespace varsync {

class coordinator_waits {
public:
  explicit coordinator_waits(operation_deadlines& deadlines);
  ~coordinator_waits();

  coordinator_waits(const coordinator_waits&) = delete;
  coordinator_waits& operator=(const coordinator_waits&) = delete;

  /// `done` gets the variable named `name` when it appears here, or
  /// `timeout` once `timeout` passed (max: no deadline).
  void wait_for(std::string name, caf::timespan timeout,
                reply_fn<shared_variable_info> done);
  size_t names_waiting() const { return names_.size(); }
  /// The variable `info` was created here.
  void appeared(const shared_variable_info& info);

  /// Barriers count the processes of the strategy (the first call sets
  /// it).
  void set_processes(int processes) {
    if (arrivals_.empty())
      arrivals_.assign(static_cast<size_t>(processes), 0);
  }
  /// Process `origin` reached its next barrier (every process sees the
  /// arrivals in one order). `done`: this process's caller of that
  /// barrier, if it waits here; it is answered when every process reached
  /// a barrier of the same number, or fails after `left`.
  void arrived(int origin, reply_fn<ok_atom> done, caf::timespan left);
  /// Every barrier waiting here fails with `reason`.
  void fail_barriers(const caf::error& reason);

private:
  struct waiter : expirable {
    coordinator_waits* owner = nullptr;
    operation_deadlines::handle deadline;
    bool watched = false;
    caf::timespan timeout{};
  };
  struct name_waiter : waiter {
    std::string name;
    reply_fn<shared_variable_info> done;
    std::list<name_waiter>::iterator self;
    void expire() override;
  };
  struct barrier_waiter : waiter {
    uint64_t number = 0;
    reply_fn<ok_atom> done;
    std::list<barrier_waiter>::iterator self;
    void expire() override;
  };

  template <class W>
  void watch(W& w, caf::timespan timeout);
  /// The processes that have not reached barrier `number`, in words.
  std::string missing_from(uint64_t number) const;

  operation_deadlines& deadlines_;
  std::list<name_waiter> names_;
  std::unordered_map<std::string, std::vector<name_waiter*>> by_name_;
  std::list<barrier_waiter> barriers_;
  /// Barriers each process reached.
  std::vector<uint64_t> arrivals_;
};

} // namespace varsync
