#pragma once
// M8: the flight recorder written to files when something goes wrong (an
// operation that missed its deadline, a failed replica or process,
// processes out of step) and on SIGUSR1, so that a hang or a crash can be
// read afterwards without asking the process: <dir>/flight.<rank>.<reason>
// .json, the latest dump of each reason (docs/metrics.md).

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <caf/error.hpp>
#include <caf/fwd.hpp>

#include "varsync/strategy_description.hpp"

namespace varsync {

class flight_dumps {
public:
  enum class reason : uint8_t { signal, timeout, failure, desync };
  static constexpr std::array<const char*, 4> reason_names
    = {"signal", "timeout", "failure", "desync"};

  /// Writes into `dir` (empty: never) for process `rank`.
  flight_dumps(std::string dir, int rank);

  bool enabled() const { return !dir_.empty(); }
  /// The reason an operation that failed with `err` gives for a dump.
  static std::optional<reason> alarm_of(const caf::error& err);
  /// Writes `d` for `why` (atomically: a reader never sees half a file);
  /// the automatic reasons at most once a second each, so that a burst of
  /// failures writes one file.
  void write(reason why, const std::string& detail,
             const strategy_description& d);
  /// The file a dump for `why` goes to.
  std::string path_of(reason why) const;

private:
  std::string dir_;
  int rank_;
  std::array<std::optional<std::chrono::steady_clock::time_point>, 4> last_;
  bool warned_ = false;
};

/// SIGUSR1 makes `coordinator` (a coordinator_internal_actor) dump its
/// recorder for as long as it lives. The process's handler is installed by
/// the first call, unless SIGUSR1 has a handler already (then nothing is
/// installed and a warning says so).
void dump_on_signal(const caf::strong_actor_ptr& coordinator);

} // namespace varsync
