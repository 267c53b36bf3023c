#pragma once
// A replica's collective phases: enter (quiesce, publish its components'
// and staging buffers' pointers, W4 and V4 checks), work on its slices
// (host collectives), leave. It owns the staging buffers that steps fill
// and collectives read.

#include <cstdint>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "actors/replica/replica_components.hpp"
#include "actors/replica/replica_staging.hpp"
#include "sync/collectives/collective_algorithm.hpp"

namespace varsync::replica_internal {

class collective_phases {
public:
  /// What the phases need of the replica's configuration.
  struct settings {
    int rank = 0;
    /// The replica's slot in collective plans (its index in this process).
    int slot = 0;
    device_id device;
    /// replica_config::collective_checks_device.
    bool collective_checks_device = false;
  };

  collective_phases(settings cfg, component_store& store)
    : cfg_(cfg), store_(store),
      staged_(store.device(), store.host_memory()) {
  }

  /// Enter: stop serving other requests and publish this replica's
  /// pointers. The index of the first item whose values differ (W4), or -1.
  caf::expected<int64_t> enter(collective_run& run);

  /// This replica's slices of a host collective.
  caf::expected<ok_atom> work(collective_run& run);

  void leave() { quiesced_ = false; }

  /// Between enter and leave: other operations wait.
  bool quiesced() const { return quiesced_; }

  staging_buffers& staged() { return staged_; }

private:
  /// Publishes each item's pointers for this replica: the index of the
  /// first item whose host values differ (W4), or -1.
  caf::expected<int64_t> publish(collective_run& run);

  /// V4: the first integer overflow any item would cause in this replica's
  /// components, as an error (nothing is changed yet).
  caf::error check_overflow(collective_run& run);

  /// A scatter item's rows fit this replica's component (ascending, in
  /// the kernels' form, in range; host memory).
  caf::error check_plan_rows(const component& comp,
                             const collective_item& item) const;

  /// inputs[rank] = this replica's staging buffer for `item`: one it
  /// recorded, of the item's size, for an item that needs no host check.
  caf::error publish_staged(const collective_item& item, item_buffers& b,
                            size_t rank);

  settings cfg_;
  component_store& store_;
  staging_buffers staged_;
  bool quiesced_ = false;
};

} // namespace varsync::replica_internal
