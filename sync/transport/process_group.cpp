#include "sync/transport/process_group.hpp"

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

process_group::process_group(std::shared_ptr<data_transport> transport,
                             std::shared_ptr<control_plane> control)
  : control_(control ? std::move(control)
                     : std::make_shared<control_plane>()),
    transport_(std::move(transport)) {
}

process_group::~process_group() {
  transport_.reset();
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
