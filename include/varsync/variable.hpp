#pragma once
// A handle to a variable of a strategy: cheap to copy, immutable. Operations
// on it go through the strategy (cross-replica) or a replica_context.

#include <memory>
#include <string>

#include "varsync/variable_info.hpp"

namespace varsync {

class variable {
public:
  variable() = default;
  explicit variable(variable_info info)
    : info_(std::make_shared<const variable_info>(std::move(info))) {}
  /// Shares `info` (the library hands out the description its coordinator
  /// keeps: one copy per variable). Null: an invalid handle.
  explicit variable(std::shared_ptr<const variable_info> info)
    : info_(std::move(info)) {}

  bool valid() const { return info_ != nullptr; }
  const variable_info& info() const { return *info_; }

  uint64_t id() const { return info_->id; }
  const std::string& name() const { return info_->name; }
  dtype type() const { return info_->type; }
  const tensor_shape& shape() const { return info_->shape; }
  /// The resolved synchronization (never auto, C1).
  varsync::synchronization synchronization() const { return info_->sync; }
  varsync::aggregation aggregation() const { return info_->agg; }
  bool trainable() const { return info_->trainable; }

private:
  std::shared_ptr<const variable_info> info_;
};

} // namespace varsync
