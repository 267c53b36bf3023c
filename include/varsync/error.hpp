#pragma once
// varsync's error codes and their CAF error category. Errors are values:
// every failing call yields a caf::error whose category is `varsync` and whose
// context message names the variable and what was expected.

#include <cstdint>
#include <string>
#include <string_view>

#include <caf/atom.hpp>
#include <caf/error.hpp>

namespace varsync {

enum class errc : uint8_t {
  none = 0,
  invalid_synchronization = 1,
  invalid_aggregation,
  invalid_argument,
  already_exists,
  unknown_variable,
  dtype_mismatch,
  shape_mismatch,
  aggregation_required,
  no_cross_replica_value,
  mismatched_replica_updates,
  replica_failed,
  timeout,
  device_error,
  out_of_memory,
  checkpoint_mismatch,
  checkpoint_corrupt,
  shut_down,
  /// The operation passed its commit point and is applied to every live
  /// component, but its confirmation missed the deadline (never `timeout`,
  /// which means nothing changed).
  committed_late,
  /// An integer result does not fit its dtype (nothing was changed).
  overflow,
  /// A blocking call from a thread that runs the strategy's actors (an async
  /// callback, a replica step, an actor): it would wait for itself.
  would_block,
  /// Refused at once because the queue it would wait in is full (V3):
  /// nothing was changed, nothing was sent; retry later or slow down.
  overloaded,
  /// Services mode with an arbiter: this process ordered operations, and
  /// its lead passed to another epoch (it stopped for longer than its
  /// lease). It may order nothing more; the operation was not ordered.
  fenced,
};

/// The atom naming varsync's error category ("varsync").
constexpr caf::atom_value error_category = caf::atom("varsync");

std::string_view to_string(errc code);

/// Builds an error in varsync's category with a human-readable context.
caf::error make_error(errc code, std::string message);

/// True if `err` belongs to varsync's category and carries `code`.
bool has_code(const caf::error& err, errc code);

/// The varsync code of `err`, or errc::none if it is not a varsync error.
errc code_of(const caf::error& err);

/// The context text that varsync attached to `err` (empty for other errors).
std::string message_of(const caf::error& err);

/// "code: message" for varsync errors, CAF's rendering otherwise.
std::string describe(const caf::error& err);

} // namespace varsync
