#pragma once
// The rule table of docs/semantics.md, one policy per synchronization mode
// (compare TensorFlow's OnWritePolicy / OnReadPolicy). Actors ask the policy of
// a variable what an operation means and execute the answer; they never switch
// on the synchronization themselves.

#include <optional>
#include <string_view>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "varsync/variable.hpp"
#include "varsync/tensor.hpp"
#include "varsync/variable.hpp"
#include "varsync/synchronization.hpp"

namespace varsync {

/// Where a cross-replica read gets its value.
enum class read_source : uint8_t {
  /// Component 0 (the primary).
  primary,
  /// All components reduced with `read_plan::op`.
  reduce_components,
  /// No cross-replica value exists: the read fails with `read_plan::error`.
  none,
};

struct read_plan {
  read_source source = read_source::primary;
  reduce_op op = reduce_op::sum;
  caf::error error;
};

/// Which components a cross-replica update changes, and with what.
enum class update_target : uint8_t {
  /// x applied to every component.
  every_component,
  /// x applied to component 0 only (R5: the sum changes by exactly x).
  first_component,
  /// Components set so that they add up to x (R4).
  split,
};

/// How the contributions of all replicas to one replica-context update of a
/// step combine into the applied value y (W4).
struct contribution_rule {
  reduce_op op = reduce_op::sum;
  /// y = x_0.
  bool first_only = false;
  /// Fails with aggregation_required unless all x_r are bitwise equal.
  bool require_equal = false;
};

/// How a checkpoint stores a variable (K1).
enum class checkpoint_entries : uint8_t {
  /// One tensor: the cross-replica value.
  one_value,
  /// One tensor per component ("<name>/replica_<r>"): there is no single
  /// cross-replica value to store.
  per_component,
};

/// What save_survivors stores for a one_value variable when components are
/// lost (K6).
struct survivor_rule {
  enum kind_t : uint8_t {
    /// Any live component: they all hold the value.
    any_component,
    /// Component 0, which must be live.
    component_0,
    /// The reduction `op` of the live components, only when the caller asks
    /// for it: the value the lost components would have given is unknown.
    aggregate,
  };
  kind_t kind = any_component;
  reduce_op op = reduce_op::sum;
};

class sync_policy {
public:
  virtual ~sync_policy() = default;

  virtual synchronization kind() const = 0;

  /// Creation rules of this mode (C2-C5). Sets `info.trainable` from
  /// `requested_trainable` or the mode's default.
  virtual caf::error validate_creation(variable_info& info,
                                       std::optional<bool> requested_trainable)
    const = 0;

  virtual read_plan cross_replica_read(const variable_info& info,
                                       int num_replicas) const = 0;

  virtual update_target cross_replica_update(const variable_info& info,
                                             update_op op) const = 0;

  /// True if replica-context updates are gathered from all replicas and
  /// applied collectively when the step completes; false if they change the
  /// local component immediately (R1, N1).
  virtual bool collective_replica_updates() const = 0;

  /// The combination of contributions (only for collective updates).
  virtual contribution_rule combine_contributions(const variable_info& info)
    const = 0;

  /// S2: whether `op` may update this variable at all, in either context
  /// (invalid_argument naming the variable and the rule otherwise).
  virtual caf::error check_scatter(const variable_info& info,
                                   scatter_op op) const;

  /// S4: which components a cross-replica scatter changes, and how (the
  /// rows of R4 / R5 for ON_READ sums); invalid_argument where the mode
  /// gives the op no meaning.
  virtual caf::expected<update_target>
  cross_replica_scatter(const variable_info& info, scatter_op op) const;

  /// True if every component holds the same value at all times (W7): a
  /// collective may compute a new value from one component and store it in
  /// all, and any live component stands for the variable.
  virtual bool mirrored() const = 0;

  /// How a checkpoint stores the variable (K1).
  virtual checkpoint_entries checkpoint_layout(const variable_info& info)
    const = 0;

  /// What save_survivors stores for it when components are lost (K6); only
  /// asked for one_value variables.
  virtual survivor_rule survivors(const variable_info& info) const = 0;
};

/// C1: `auto` resolves to `on_write` in a mirrored strategy.
synchronization resolve_synchronization(synchronization requested);

/// The policy of a resolved synchronization mode.
const sync_policy& policy_for(synchronization resolved);

/// Longest variable name, in bytes (C9).
constexpr size_t max_variable_name_bytes = 256;

/// C9: the names a variable may have, so that every accepted name can be
/// saved and restored: 1 to max_variable_name_bytes bytes of valid UTF-8
/// without control characters (NUL, U+0001-U+001F, DEL), not starting with
/// "__" (reserved: the safetensors "__metadata__" entry) and not containing
/// "/replica_" (the checkpoint entries of per-component variables are
/// "<name>/replica_<r>"). invalid_argument naming the rule otherwise. Used
/// by creation and by save.
caf::error check_variable_name(std::string_view name);

/// Validates a creation request and builds the registry entry (id left 0):
/// name, enum ranges, the mode's rules. Nothing is created on failure.
caf::expected<variable_info> validate_variable_spec(const variable_spec& spec);

/// C7: `value` must have the variable's dtype and shape. `what` names the
/// operation in the message ("assign", "initial value", ...).
caf::error validate_value(const variable_info& info, const tensor& value,
                          std::string_view what);

/// Scalar convenience overloads: `value` converted to the variable's dtype as
/// a rank-0 tensor. Fails for non-scalar variables (shape_mismatch) and for
/// values an integer dtype cannot hold exactly (invalid_argument).
caf::expected<tensor> scalar_for(const variable_info& info, double value);

/// The checks of scalar_for without building a tensor.
caf::error validate_scalar(const variable_info& info, double value);

} // namespace varsync
