#include "actors/coordinator/flight_recorder.hpp"

#include <string_view>

#include "varsync/error.hpp"

namespace varsync {

flight_recorder::flight_recorder() : ring_(capacity) {
  // nop
}

uint64_t flight_recorder::begin(const char* kind, uint64_t variable,
                                const std::string& name, origin from,
                                bool queued) {
  std::lock_guard<std::mutex> guard{mtx_};
  const auto id = next_++;
  auto& e = ring_[id % capacity];
  e.id = id;
  e.kind = kind;
  e.variable = variable;
  e.name = name;
  e.from = from;
  e.now = queued ? phase::queued : phase::running;
  e.start = clock::now();
  e.error.clear();
  return id;
}

flight_recorder::entry* flight_recorder::find(uint64_t id) {
  if (id == 0)
    return nullptr; // not recorded
  auto& e = ring_[id % capacity];
  return e.id == id ? &e : nullptr; // else overwritten since
}

void flight_recorder::admitted(uint64_t id) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (auto* e = find(id); e != nullptr && e->now == phase::queued)
    e->now = phase::running;
}

void flight_recorder::sequencing(uint64_t id) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (auto* e = find(id); e != nullptr && e->now == phase::running)
    e->now = phase::sequencing;
}

void flight_recorder::reached(uint64_t id, const char* stage) {
  const std::string_view s{stage};
  const auto next = s == "agreed" ? phase::agreed
                    : s == "data" ? phase::data
                                  : phase::voted;
  std::lock_guard<std::mutex> guard{mtx_};
  // Never back from an answer (a step's rounds may outlive a failure).
  if (auto* e = find(id);
      e != nullptr && e->now != phase::done && e->now != phase::failed)
    e->now = next;
}

void flight_recorder::finish(uint64_t id, const caf::error& err) {
  auto end = clock::now();
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto* e = find(id);
    if (e == nullptr)
      return;
    e->end = end;
    e->now = err ? phase::failed : phase::done;
    if (err)
      e->error = describe(err);
  }
  if (err && on_failure_)
    on_failure_(err);
}

std::vector<operation_record> flight_recorder::records(
  const std::function<std::string(uint64_t)>& name_of) const {
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  static constexpr const char* phases[]
    = {"running", "sequencing", "done", "failed",
       "agreed",  "data",       "voted", "queued"};
  std::vector<entry> held;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    const auto first = next_ > capacity ? next_ - capacity : 1;
    for (auto id = first; id < next_; ++id)
      held.push_back(ring_[id % capacity]);
  }
  const auto now = clock::now();
  std::vector<operation_record> out;
  out.reserve(held.size());
  for (auto& e : held) {
    operation_record r;
    r.id = e.id;
    r.kind = e.kind;
    r.variable = e.variable != 0 ? name_of(e.variable) : e.name;
    r.origin = e.from.process;
    r.sequence = e.from.sequence;
    r.epoch = e.from.epoch;
    r.phase = phases[static_cast<size_t>(e.now)];
    r.age_us = duration_cast<microseconds>(now - e.start).count();
    if (e.now == phase::done || e.now == phase::failed)
      r.duration_us = duration_cast<microseconds>(e.end - e.start).count();
    r.error = e.error;
    out.push_back(std::move(r));
  }
  return out;
}

uint64_t flight_recorder::dispatched() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return next_ - 1;
}

} // namespace varsync
