#pragma once
// A replica's component store: each variable's component in this device's
// memory, and the reads, writes and scatter applies on it. It owns the
// components (their memory goes back to the device with the store); the
// device itself belongs to the replica actor and outlives the store.

#include <cstdint>
#include <memory_resource>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "core/small_object_pool.hpp"
#include "devices/device.hpp"
#include "messages/replica_interface.hpp"
#include "sync/policy/sync_policy.hpp"

namespace varsync::replica_internal {

inline size_t nbytes_of(const variable_info& info) {
  return static_cast<size_t>(element_count(info.shape)) * size_of(info.type);
}

struct component {
  /// Shared with the coordinator and the other replicas of the process.
  shared_variable_info info;
  void* data = nullptr;
  /// Replica-context reads and updates that found this component (M1).
  uint64_t reads = 0;
  uint64_t updates = 0;
  /// Derived, not stored: thousands of components per replica are common.
  const sync_policy& policy() const { return policy_for(info->sync); }
};

class component_store {
public:
  /// `rank` and `num_replicas`: the replica's, for R4 shares and messages.
  component_store(varsync::device& dev, int rank, int num_replicas)
    : device_(dev), host_memory_(dev.host_accessible()), rank_(rank),
      num_replicas_(num_replicas) {
  }

  component_store(const component_store&) = delete;
  component_store& operator=(const component_store&) = delete;

  ~component_store() {
    for (auto& [id, c] : components_)
      device_.release(c.data);
  }

  /// The device's memory is host memory (device.host_accessible(), asked
  /// once).
  bool host_memory() const { return host_memory_; }

  varsync::device& device() const { return device_; }

  caf::expected<component*> find(uint64_t id, const std::string& name = {});

  // -- the coordinator's operations ------------------------------------------

  caf::expected<ok_atom> create(const shared_variable_info& info,
                                const tensor& initial);

  caf::expected<ok_atom> destroy(uint64_t id);

  caf::expected<tensor> download(uint64_t id);

  caf::expected<ok_atom> apply(uint64_t id, update_op op, const tensor& x);

  // A small step's combined updates: every check before any change, so that
  // all apply or none (the components are mirrors: every replica decides
  // alike).
  caf::expected<ok_atom> apply_step(const std::vector<recorded_update>& ys);

  caf::expected<ok_atom> split(uint64_t id, const tensor& x);

  /// Cross-replica writes in their order (group commit); each one that
  /// fails changes nothing and leaves the others to apply. `first`: this
  /// replica is its process's first (it applies the first_only writes).
  write_outcomes apply_writes(const component_writes& batch, bool first);

  /// A cross-replica scatter's rows (u.indices in the kernels' form), to
  /// this component: as they are, or (split) this replica's R4 share of
  /// each.
  caf::expected<ok_atom> apply_scatter(const recorded_update& u, bool split);

  // value + the component, in its dtype. Integers: an add whose result the
  // dtype cannot hold is skipped (an error, never wrapped or saturated).
  caf::error local_add(uint64_t id, double value);

  /// Each component's read and update counts (M1).
  void count_usage(replica_usage& out) const;

  // -- checks and writes that steps and collectives share --------------------

  // V4: an integer update that does not fit the dtype changes nothing.
  // `y` is host memory unless `y_on_device`; device components (and device
  // values) are copied to the host for the check: integer variables only.
  caf::error check_overflow(const component& comp, update_op op, const void* y,
                            bool y_on_device = false) const;

  /// `data` readable by host code: itself, or a host copy of device memory
  /// (the tensor keeps the copy alive).
  caf::expected<std::pair<tensor, const void*>>
  host_copy(const void* data, dtype type, int64_t n, bool on_device) const;

  // -- sparse updates (replica_scatter.cpp) -----------------------------------

  /// Every check of applying scatter rows `u` to `comp`, read-only: rows
  /// in range and in the kernels' form, values shaped for them, no integer
  /// overflow or zero divisor (a device component's touched rows are read
  /// for it).
  caf::error check_scatter_rows(const component& comp,
                                const recorded_update& u) const;
  /// check_scatter_rows without the overflow check.
  caf::error check_scatter_shape(const component& comp,
                                 const recorded_update& u) const;
  /// The integer overflow check alone, for rows this replica combined.
  caf::error check_scatter_overflow(const component& comp,
                                    const recorded_update& u) const;
  /// Applies rows, checking V4 on the rows it reads unless `checked`:
  /// host memory in place, device memory through its touched rows only.
  caf::error write_scatter_rows(component& comp, const recorded_update& u,
                                bool checked = false);

private:
  /// The device for row updates: null where its memory is host memory.
  varsync::device* row_device() const {
    return host_memory_ ? nullptr : &device_;
  }

  caf::error check_step_update(const component& comp,
                               const recorded_update& y) const;

  varsync::device& device_;
  bool host_memory_;
  int rank_;
  int num_replicas_;
  /// The nodes of components_ (core/small_object_pool.hpp).
  small_object_pool component_nodes_;
  std::pmr::unordered_map<uint64_t, component> components_{&component_nodes_};
};

} // namespace varsync::replica_internal
