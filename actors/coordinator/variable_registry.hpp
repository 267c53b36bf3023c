#pragma once
// The coordinator's registry of variables: one entry per variable of the
// strategy, found by id and by name. Thousands of variables are common:
// what an entry holds only while it is used lives behind pointers (issue
// 15's per-variable bound), and the nodes come from a pool that lives as
// long as the variables (core/small_object_pool.hpp).

#include <cstdint>
#include <functional>
#include <memory>
#include <memory_resource>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <caf/timespan.hpp>

#include "actors/coordinator/coordinator_metrics.hpp"
#include "actors/coordinator/operation_deadlines.hpp"
#include "core/small_object_pool.hpp"
#include "messages/shared_variable_info.hpp"
#include "sync/policy/sync_policy.hpp"

namespace varsync {

/// A read waiting for writes of its variable (actors/coordinator/read_barrier.hpp).
struct pending_read;

struct variable_entry {
  using waiting = std::vector<std::shared_ptr<pending_read>>;
  /// Shared with this process's replicas (one copy per variable).
  shared_variable_info info;
  /// Cross-replica writes dispatched and not yet confirmed by every
  /// replica; reads wait for them (W8).
  uint32_t writes_in_flight = 0;
  /// Its creation completed on every replica.
  bool ready = false;
  /// Reads waiting for those writes (the read barrier's); allocated while
  /// some wait.
  std::unique_ptr<waiting> waiting_reads;
  /// Metrics (M1-M2); allocated at the first count.
  std::unique_ptr<variable_usage> usage;

  explicit variable_entry(shared_variable_info i) : info(std::move(i)) {}
  /// Derived, not stored.
  const sync_policy* policy() const { return &policy_for(info->sync); }
  variable_usage& counts() {
    if (!usage)
      usage = std::make_unique<variable_usage>();
    return *usage;
  }
};

class variable_registry {
public:
  using map = std::pmr::unordered_map<uint64_t, variable_entry>;

  /// The variable `id` once its creation completed, or unknown_variable.
  caf::expected<variable_entry*> find(uint64_t id);
  /// The entry of `id`, ready or not; null if there is none.
  variable_entry* any(uint64_t id);
  /// 'name' of variable `id` for error messages, or #id if it is unknown.
  std::string quoted_name_of(uint64_t id) const;
  /// The description of `id` (ready or not), or null.
  shared_variable_info shared_info(uint64_t id) const;
  /// The description of the ready variable named `name`, or null.
  shared_variable_info existing(const std::string& name) const;
  /// Whether the name is taken (from the moment a creation is admitted).
  bool taken(const std::string& name) const { return names_.count(name) > 0; }
  /// Every ready variable, sorted by name.
  std::vector<variable_info> list() const;

  /// A new entry for `info` (not ready until its creation completes).
  variable_entry& add(shared_variable_info info);
  /// Removes `id` and frees its name.
  void erase(uint64_t id);

  map& entries() { return entries_; }
  const map& entries() const { return entries_; }

private:
  small_object_pool nodes_;
  map entries_{&nodes_};
  /// Keys view the names in the entries' descriptions (erased first).
  std::pmr::unordered_map<std::string_view, uint64_t> names_{&nodes_};
};

} // namespace varsync
