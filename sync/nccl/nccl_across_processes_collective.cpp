#include "sync/nccl/nccl_across_processes_collective.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include <cuda_runtime.h>
#include <unistd.h>

#include "core/logging.hpp"
#include "devices/cuda/cuda_device_internal.hpp"
#include "sync/collectives/across_processes.hpp"
#include "sync/nccl/device_collective.hpp"
#include "sync/nccl/nccl_clique.hpp"
#include "varsync/error.hpp"

namespace varsync {

bool nccl_takes(const collective_plan& plan) {
  if (plan.local_error || plan.items.empty())
    return false;
  return std::all_of(plan.items.begin(), plan.items.end(), [](auto& item) {
    return is_floating(item.type)
           && item.source == collective_source::contributions
           && item.target == collective_target::components
           && !item.require_equal && !item.gather && !item.scatter;
  });
}

namespace {

constexpr int max_local_gpus = 16;

// What each process tells the others before any NCCL call: whether it can
// join, and a key per local GPU (host name and PCI bus id).
struct gpu_record {
  int32_t ok = 0;
  int32_t count = 0;
  std::array<uint64_t, max_local_gpus> keys{};
};

struct id_record {
  int32_t ok = 0;
  std::array<std::byte, nccl::unique_id_bytes> id{};
};

class nccl_across_processes final : public collective_algorithm {
public:
  nccl_across_processes(process_membership m, cuda_collective_plan topo,
                        std::shared_ptr<collective_algorithm> staged)
    : m_(std::move(m)), topo_(std::move(topo)), staged_(std::move(staged)) {
    description_ = m_.group->describe() + ", "
                   + std::to_string(m_.total_replicas)
                   + " replicas in all: floating step updates over one NCCL "
                     "communicator across the processes (this process's "
                   + std::to_string(topo_.gpus.size())
                   + " GPU(s); joined at the first collective, else everything "
                     "staged, with a warning in the log), the rest staged "
                     "through host memory";
  }

  const std::string& description() const override { return description_; }

  collective_workers workers() const override {
    return collective_workers::driver;
  }

  bool uses_staging_buffers() const override { return true; }

  caf::error run(const collective_plan& plan, collective_buffers& buffers,
                 int worker, int num_workers) override {
    if (!tried_) { // every process's first collective: they join together
      tried_ = true;
      m_.group->transport().block_signals();
      join();
    }
    if (nccl_ && nccl_takes(plan)) {
      // Bounded by the cluster's operation timeout too: a process that died
      // inside NCCL is noticed by its deadline (the communicator is then
      // aborted and never used again). The agreement and the commit vote
      // run inside (the hooks set at join).
      buffers.deadline = std::min(buffers.deadline,
                                  deadline_after(m_.operation_timeout));
      current_ = &plan;
      auto err = nccl_->run(plan, buffers, 0, 1);
      current_ = nullptr;
      if (err)
        return lost_peer(std::move(err));
      return {};
    }
    return staged_->run(plan, buffers, worker, num_workers);
  }

private:
  /// Past its deadline or after an NCCL error, the communicator across the
  /// processes is aborted: a process is gone or stuck (replica_failed, as
  /// for host collectives across processes).
  caf::error lost_peer(caf::error err) {
    if (!has_code(err, errc::device_error) || !nccl_comm_failed())
      return err;
    return make_error(errc::replica_failed,
                      "NCCL across processes: " + describe(err)
                        + "; a process is gone or stuck, the communicator "
                          "was aborted and is not used again");
  }

  bool nccl_comm_failed() { return nccl_->failed(); }

  /// The rounds around the NCCL phase (collective_phase_hooks): every
  /// process stages its inputs first and takes part in the agreement with
  /// its error if staging failed, so no process waits in NCCL for one that
  /// will not come; after the NCCL work, every process votes, so that none
  /// applies a result another could not complete.
  collective_phase_hooks hooks() {
    collective_phase_hooks h;
    h.before_communication = [this](const caf::error& local) {
      return agree_across_processes(*current_, *m_.group, local);
    };
    h.before_apply = [this](const caf::error& local) {
      return vote_across_processes(local, *m_.group,
                                   current_->description + " over NCCL");
    };
    return h;
  }

  void fall_back(const std::string& why) {
    log()->warn("NCCL across processes not used ({}): every collective is "
                "staged through host memory",
                why);
  }

  /// What names this host for NCCL: NCCL_HOSTID where set (NCCL itself
  /// then treats processes with distinct ids as distinct hosts, so two
  /// processes may each have a rank on one GPU), else the host name.
  static std::string host_key() {
    if (const char* id = std::getenv("NCCL_HOSTID"); id != nullptr && *id)
      return std::string{"NCCL_HOSTID="} + id;
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    return host;
  }

  gpu_record local_gpus() const {
    gpu_record out;
    if (topo_.gpus.size() > static_cast<size_t>(max_local_gpus))
      return out;
    const std::string host = host_key();
    for (int gpu : topo_.gpus) {
      char bus[64] = {};
      if (cudaDeviceGetPCIBusId(bus, sizeof(bus), gpu) != cudaSuccess) {
        cudaGetLastError();
        return out;
      }
      const std::string key = host + "/" + bus;
      out.keys[static_cast<size_t>(out.count++)]
        = fingerprint_of_bytes(key.data(), key.size());
    }
    out.ok = 1;
    return out;
  }

  // Every step decided alike in every process (the records are shared).
  void join() {
    auto& group = m_.group->transport();
    const auto size = static_cast<size_t>(group.size());
    auto mine = local_gpus();
    std::vector<gpu_record> all(size);
    if (group.all_gather(&mine, all.data(), sizeof(mine)))
      return fall_back("the process group failed");
    std::set<uint64_t> seen;
    for (size_t p = 0; p < size; ++p) {
      if (all[p].ok == 0 || all[p].count < 0 || all[p].count > max_local_gpus)
        return fall_back("process " + std::to_string(p)
                         + " cannot name its GPUs");
      for (int32_t g = 0; g < all[p].count; ++g)
        if (!seen.insert(all[p].keys[static_cast<size_t>(g)]).second)
          return fall_back("a GPU is used by two replicas; NCCL refuses "
                           "two ranks on one GPU (processes that share a "
                           "GPU may each set a distinct NCCL_HOSTID)");
    }
    id_record id;
    if (group.rank() == 0) {
      if (auto made = nccl::new_unique_id(); made) {
        std::memcpy(id.id.data(), made->data(), id.id.size());
        id.ok = 1;
      }
    }
    if (group.broadcast(&id, sizeof(id), 0))
      return fall_back("the process group failed");
    if (id.ok == 0)
      return fall_back("process 0 could not make an NCCL unique id");
    auto joined = nccl::clique::join(topo_.gpus, m_.total_replicas,
                                     m_.first_replica, id.id,
                                     deadline_after(m_.operation_timeout));
    caf::error failed;
    std::shared_ptr<collective_algorithm> algorithm;
    if (!joined) {
      failed = std::move(joined.error());
    } else {
      auto made = make_nccl_clique_collective(topo_, std::move(*joined));
      if (made)
        algorithm = std::move(*made);
      else
        failed = std::move(made.error());
    }
    int32_t any_failed = failed ? 1 : 0;
    if (group.all_reduce(reduce_op::max, dtype::int32, &any_failed, 1))
      return fall_back("the process group failed");
    if (any_failed != 0)
      return fall_back(failed ? describe(failed)
                              : "another process could not join");
    nccl_ = std::static_pointer_cast<device_collective>(std::move(algorithm));
    nccl_->set_phase_hooks(hooks());
    log()->info("NCCL across processes: ranks {} to {} of {}",
                m_.first_replica,
                m_.first_replica + static_cast<int>(topo_.gpus.size()) - 1,
                m_.total_replicas);
  }

  process_membership m_;
  cuda_collective_plan topo_;
  std::shared_ptr<collective_algorithm> staged_;
  /// The NCCL clique algorithm (make_nccl_clique_collective), once joined.
  std::shared_ptr<device_collective> nccl_;
  std::string description_;
  bool tried_ = false;
  /// The plan of the run in progress (the hooks' subject).
  const collective_plan* current_ = nullptr;
};

} // namespace

std::shared_ptr<collective_algorithm>
make_nccl_across_processes(process_membership membership,
                           cuda_collective_plan topo,
                           std::shared_ptr<collective_algorithm> staged) {
  return std::make_shared<nccl_across_processes>(
    std::move(membership), std::move(topo), std::move(staged));
}

} // namespace varsync
