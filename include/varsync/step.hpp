#pragma once
// A replica step travels to every replica as a shared, type-erased function;
// each replica answers with the ON_WRITE updates it recorded, in issue order
// (varsync/internal/step_report.hpp).

#include <memory>

#include <caf/allowed_unsafe_message_type.hpp>

#include "varsync/internal/step_report.hpp"

namespace varsync {

class replica_context;

/// The user function of `run`, executed once on every replica. `run` is
/// called on replica r's actor with replica r's context.
class replica_step {
public:
  virtual ~replica_step() = default;
  virtual void run(replica_context& ctx) = 0;
};

using replica_step_ptr = std::shared_ptr<replica_step>;

} // namespace varsync

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(varsync::replica_step_ptr)
