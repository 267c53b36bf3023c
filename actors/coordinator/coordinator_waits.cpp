#include "actors/coordinator/coordinator_waits.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "varsync/error.hpp"

namespace varsync {

namespace {

std::string in_ms(caf::timespan t) {
  return std::to_string(
           std::chrono::duration_cast<std::chrono::milliseconds>(t).count())
         + " ms";
}

} // namespace

coordinator_waits::coordinator_waits(operation_deadlines& deadlines)
  : deadlines_(deadlines) {
}

coordinator_waits::~coordinator_waits() {
  // The deadlines die with the coordinator; the callbacks, dropped
  // unanswered, tell their callers that it shut down.
}

template <class W>
void coordinator_waits::watch(W& w, caf::timespan timeout) {
  w.owner = this;
  w.timeout = timeout;
  if (timeout != caf::timespan::max()) {
    w.deadline = deadlines_.watch(timeout, &w);
    w.watched = true;
  }
}

void coordinator_waits::wait_for(std::string name, caf::timespan timeout,
                                 reply_fn<shared_variable_info> done) {
  auto& w = names_.emplace_back();
  w.self = std::prev(names_.end());
  w.name = std::move(name);
  w.done = std::move(done);
  by_name_[w.name].push_back(&w);
  watch(w, timeout);
}

void coordinator_waits::appeared(const shared_variable_info& info) {
  auto i = by_name_.find(info->name);
  if (i == by_name_.end())
    return;
  auto waiting = std::move(i->second);
  by_name_.erase(i);
  for (auto* w : waiting) {
    if (w->watched)
      deadlines_.unwatch(w->deadline);
    auto done = std::move(w->done);
    names_.erase(w->self);
    done(info);
  }
}

void coordinator_waits::name_waiter::expire() {
  auto* parent = owner;
  auto& list = parent->by_name_[name];
  list.erase(std::remove(list.begin(), list.end(), this), list.end());
  if (list.empty())
    parent->by_name_.erase(name);
  auto fn = std::move(done);
  auto err = make_error(errc::timeout,
                        "no variable named '" + name + "'"
                          + " was created within " + in_ms(timeout)
                          + "; nothing was changed");
  parent->names_.erase(self); // `this` is gone from here on
  fn(std::move(err));
}

void coordinator_waits::arrived(int origin, reply_fn<ok_atom> done,
                                caf::timespan left) {
  if (origin < 0 || static_cast<size_t>(origin) >= arrivals_.size())
    return; // V4: the sequencer sets origins; never a barrier of no process
  const auto number = ++arrivals_[static_cast<size_t>(origin)];
  if (done) {
    auto& w = barriers_.emplace_back();
    w.self = std::prev(barriers_.end());
    w.number = number;
    w.done = std::move(done);
    watch(w, left);
  }
  const auto reached
    = *std::min_element(arrivals_.begin(), arrivals_.end());
  for (auto i = barriers_.begin(); i != barriers_.end();) {
    auto next = std::next(i);
    if (i->number <= reached) {
      if (i->watched)
        deadlines_.unwatch(i->deadline);
      auto fn = std::move(i->done);
      barriers_.erase(i);
      fn(ok_atom::value);
    }
    i = next;
  }
}

std::string coordinator_waits::missing_from(uint64_t number) const {
  std::string out;
  for (size_t p = 0; p < arrivals_.size(); ++p)
    if (arrivals_[p] < number)
      out += (out.empty() ? "" : ", ") + std::to_string(p);
  return out;
}

void coordinator_waits::barrier_waiter::expire() {
  auto* parent = owner;
  auto fn = std::move(done);
  auto err = make_error(
    errc::timeout, "barrier " + std::to_string(number) + ": process(es) "
                     + parent->missing_from(number)
                     + " did not reach it within " + in_ms(timeout)
                     + "; this process's barrier still counts as reached "
                       "for the others");
  parent->barriers_.erase(self);
  fn(std::move(err));
}

void coordinator_waits::fail_barriers(const caf::error& reason) {
  auto waiting = std::move(barriers_);
  barriers_.clear();
  for (auto& w : waiting) {
    if (w.watched)
      deadlines_.unwatch(w.deadline);
    w.done(reason);
  }
}

} // namespace varsync
