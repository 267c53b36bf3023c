#pragma once
// Internal to the façade's sources (api/strategy*.cpp, api/async_strategy.cpp):
// small helpers shared by the blocking and the async entry points.

#include <chrono>
#include <string>

#include <caf/error.hpp>
#include <caf/timespan.hpp>

#include "api/strategy_core.hpp"
#include "varsync/error.hpp"
#include "varsync/tensor.hpp"
#include "varsync/variable.hpp"

namespace varsync::api_helpers {

// Timeouts of 100 years or more mean "no deadline": converted to nanoseconds
// and added to a clock reading they would overflow int64 (292 years).
inline constexpr std::chrono::milliseconds no_deadline_from{
  std::chrono::hours{24 * 365 * 100}};

inline caf::timespan to_timespan(std::chrono::milliseconds ms) {
  if (ms >= no_deadline_from)
    return caf::timespan::max(); // the coordinator's "no deadline"
  return std::chrono::duration_cast<caf::timespan>(ms);
}

inline caf::error to_error(caf::expected<ok_atom> r) {
  return r ? caf::error{} : std::move(r.error());
}

inline caf::error require_handle(const variable& v) {
  if (!v.valid())
    return make_error(errc::invalid_argument, "the variable handle is empty");
  return {};
}

inline tensor to_float64(const tensor& x) {
  auto out = tensor::empty(dtype::float64, x.shape());
  auto* dst = out.mutable_data<double>();
  for (int64_t i = 0; i < x.size(); ++i)
    dst[i] = x.as_double(i);
  return out;
}

inline caf::error check_running(const detail::strategy_core& core) {
  if (core.stopped())
    return core.shut_down_error();
  return {};
}

// reduce and gather of per-replica values work on this process's values
// only: across processes they would silently miss the others' replicas.
inline caf::error check_local(const char* what, int processes) {
  if (processes > 1)
    return make_error(errc::invalid_argument,
                      std::string{what}
                        + " of per-replica values: the strategy spans "
                        + std::to_string(processes)
                        + " processes and these values hold this process's "
                          "replicas only; use all_reduce, which reduces "
                          "over every process");
  return {};
}

inline caf::error check_count(const char* what, size_t count,
                              int num_replicas) {
  if (count != static_cast<size_t>(num_replicas))
    return make_error(errc::invalid_argument,
                      std::string{what} + ": expected "
                        + std::to_string(num_replicas)
                        + " per-replica values but got "
                        + std::to_string(count));
  return {};
}

// The bytes a reduction of `values` allocates: its output (float64 for the
// mean of integers) and, along an axis, the double accumulators.
inline uint64_t reduce_bytes(reduce_op op, const std::vector<tensor>& values,
                             bool along_axis) {
  if (values.empty())
    return 0;
  auto count = static_cast<uint64_t>(values[0].size());
  auto element = op == reduce_op::mean && !is_floating(values[0].type())
                   ? uint64_t{8}
                   : uint64_t{size_of(values[0].type())};
  return saturating_mul(count, along_axis ? element + 8 : element);
}

inline caf::error check_budget(const detail::strategy_core& core,
                               uint64_t bytes, const std::string& what) {
  return core.budget().check(bytes, what);
}


} // namespace varsync::api_helpers
