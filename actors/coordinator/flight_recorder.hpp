#pragma once
// The flight recorder (M7): a ring of the last operations this process's
// coordinator dispatched, with where each came from, its phase and its
// timings, so that a hang or a failure can be read after the fact (which
// operation, issued by whom, waiting since when). The coordinator's
// dispatch records every operation; the answer's wrapper closes it.
// Shared with those wrappers, which may outlive the coordinator.

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <caf/error.hpp>

#include "varsync/strategy_description.hpp"

namespace varsync {

class flight_recorder {
public:
  using clock = std::chrono::steady_clock;
  static constexpr size_t capacity = 256;

  /// Where an operation came from: the issuing process and, in services
  /// mode, its number in the sequencer's order and the epoch it was
  /// ordered in (0 elsewhere).
  struct origin {
    int32_t process = 0;
    uint64_t sequence = 0;
    uint64_t epoch = 0;
  };

  flight_recorder();

  /// Records an operation as it is dispatched; returns its id.
  /// `variable`: its variable's id (0: none), `name`: a variable's name
  /// where the operation names one instead (lookup, wait_for).
  uint64_t begin(const char* kind, uint64_t variable, const std::string& name,
                 origin from, bool queued = false);
  /// A queued operation was admitted: it runs from now on.
  void admitted(uint64_t id);
  /// The operation went to the sequencer.
  void sequencing(uint64_t id);
  /// Its round across processes passed a stage: "agreed", "data" or
  /// "voted" (any thread).
  void reached(uint64_t id, const char* stage);
  /// Its answer: none or the error.
  void finish(uint64_t id, const caf::error& err);
  /// Called with the error of every operation that fails from now on
  /// (outside the lock; set before the recorder is shared).
  void on_failure(std::function<void(const caf::error&)> fn) {
    on_failure_ = std::move(fn);
  }

  /// The records held, oldest first; `name_of` names a variable id.
  std::vector<operation_record>
  records(const std::function<std::string(uint64_t)>& name_of) const;
  /// Operations recorded in all.
  uint64_t dispatched() const;

private:
  enum class phase : uint8_t {
    running,
    sequencing,
    done,
    failed,
    agreed,
    data,
    voted,
    queued
  };
  struct entry {
    uint64_t id = 0;
    const char* kind = "";
    uint64_t variable = 0;
    std::string name;
    origin from;
    phase now = phase::running;
    clock::time_point start;
    clock::time_point end;
    std::string error;
  };
  entry* find(uint64_t id);

  // Answers may come from another thread than the coordinator's (a call
  // dropped at shutdown): one lock, uncontended on the fast path.
  mutable std::mutex mtx_;
  std::vector<entry> ring_;
  uint64_t next_ = 1;
  std::function<void(const caf::error&)> on_failure_;
};

} // namespace varsync
