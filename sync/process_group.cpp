#include "sync/process_group.hpp"

#include <atomic>

#include "varsync/error.hpp"

namespace varsync {

namespace {

std::atomic<process_group_joiner> joiner{nullptr};

} // namespace

void register_process_group_joiner(process_group_joiner fn) {
  joiner.store(fn);
}

caf::expected<process_membership> join_process_group(const cluster_spec& spec,
                                                     int local_replicas,
                                                     bool one_gpu_per_replica) {
  if (auto err = validate(spec))
    return err;
  if (local_replicas < 1)
    return make_error(errc::invalid_argument,
                      "a process of a strategy needs at least one replica");
  auto fn = joiner.load();
  if (fn == nullptr)
    return make_error(errc::invalid_argument,
                      "a strategy over " + std::to_string(spec.world_size)
                        + " processes needs the cross-process transport: "
                          "link varsync::distributed (built when Gloo is "
                          "found)");
  return fn(spec, local_replicas, one_gpu_per_replica);
}

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

process_membership make_membership(std::shared_ptr<process_group> group,
                                   std::vector<int> replicas_per_rank) {
  process_membership m;
  for (int r = 0; r < static_cast<int>(replicas_per_rank.size()); ++r) {
    if (r < group->rank())
      m.first_replica += replicas_per_rank[static_cast<size_t>(r)];
    m.total_replicas += replicas_per_rank[static_cast<size_t>(r)];
  }
  m.group = std::move(group);
  m.replicas_per_rank = std::move(replicas_per_rank);
  return m;
}

} // namespace varsync
