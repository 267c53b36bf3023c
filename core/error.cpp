#include "varsync/error.hpp"

#include <caf/make_message.hpp>
#include <caf/message.hpp>

namespace varsync {

std::string_view to_string(errc code) {
  switch (code) {
    case errc::none: return "none";
    case errc::invalid_synchronization: return "invalid_synchronization";
    case errc::invalid_aggregation: return "invalid_aggregation";
    case errc::invalid_argument: return "invalid_argument";
    case errc::already_exists: return "already_exists";
    case errc::unknown_variable: return "unknown_variable";
    case errc::dtype_mismatch: return "dtype_mismatch";
    case errc::shape_mismatch: return "shape_mismatch";
    case errc::aggregation_required: return "aggregation_required";
    case errc::no_cross_replica_value: return "no_cross_replica_value";
    case errc::mismatched_replica_updates: return "mismatched_replica_updates";
    case errc::replica_failed: return "replica_failed";
    case errc::timeout: return "timeout";
    case errc::device_error: return "device_error";
    case errc::out_of_memory: return "out_of_memory";
    case errc::checkpoint_mismatch: return "checkpoint_mismatch";
    case errc::checkpoint_corrupt: return "checkpoint_corrupt";
    case errc::shut_down: return "shut_down";
    case errc::committed_late: return "committed_late";
    case errc::overflow: return "overflow";
    case errc::would_block: return "would_block";
    case errc::overloaded: return "overloaded";
    case errc::fenced: return "fenced";
  }
  return "unknown_error_code";
}

caf::error make_error(errc code, std::string message) {
  return caf::error{static_cast<uint8_t>(code), error_category,
                    caf::make_message(std::move(message))};
}

bool has_code(const caf::error& err, errc code) {
  return err && err.category() == error_category
         && err.code() == static_cast<uint8_t>(code);
}

errc code_of(const caf::error& err) {
  if (!err || err.category() != error_category)
    return errc::none;
  return static_cast<errc>(err.code());
}

std::string message_of(const caf::error& err) {
  if (!err || err.category() != error_category)
    return {};
  const auto& ctx = err.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0))
    return ctx.get_as<std::string>(0);
  return {};
}

std::string describe(const caf::error& err) {
  if (!err)
    return "no error";
  if (err.category() == error_category) {
    std::string out{to_string(code_of(err))};
    auto msg = message_of(err);
    if (!msg.empty()) {
      out += ": ";
      out += msg;
    }
    return out;
  }
  return caf::to_string(err);
}

} // namespace varsync
