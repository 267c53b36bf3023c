#include "sync/transport/data_transport.hpp"

#include "varsync/error.hpp"

namespace varsync {

caf::error check_all_reduce_input(const std::string& who, reduce_op op,
                                  dtype type, const void* data,
                                  int64_t count) {
  if (!is_valid(op) || !is_valid(type))
    return make_error(errc::invalid_argument,
                      who + ": all_reduce: invalid reduce_op or dtype");
  if (op == reduce_op::mean && !is_floating(type))
    return make_error(errc::invalid_argument,
                      who + ": all_reduce: the mean of "
                        + std::string{to_string(type)}
                        + " values needs conversion to float64 first");
  if (count < 0 || (count > 0 && data == nullptr))
    return make_error(errc::invalid_argument,
                      who + ": all_reduce: bad buffer");
  return {};
}

caf::error check_broadcast_input(const std::string& who, const void* data,
                                 size_t bytes, int root, int size) {
  if (root < 0 || root >= size || (bytes > 0 && data == nullptr))
    return make_error(errc::invalid_argument,
                      who + ": broadcast: bad root or buffer");
  return {};
}

caf::error check_all_gather_input(const std::string& who, const void* in,
                                  const void* out, size_t bytes) {
  if (bytes > 0 && (in == nullptr || out == nullptr))
    return make_error(errc::invalid_argument,
                      who + ": all_gather: bad buffer");
  return {};
}

caf::error all_reduce_overflow(const std::string& who, reduce_op op,
                               dtype type) {
  return make_error(errc::overflow,
                    who + ": the " + std::string{to_string(op)} + " of "
                      + std::string{to_string(type)}
                      + " values does not fit the dtype; the buffer holds "
                        "no meaningful value");
}

} // namespace varsync
