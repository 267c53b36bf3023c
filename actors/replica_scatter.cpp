// Sparse updates on a replica: recorded in a step (ON_WRITE), applied to the
// local component at once (ON_READ, NONE), and the rows that cross-replica
// scatters and steps send.

#include "actors/replica_state.hpp"

#include "sync/scatter_update.hpp"

namespace varsync::replica_internal {

namespace {

caf::error host_only(const component& comp, const device_id& device) {
  return make_error(errc::invalid_argument,
                    "variable '" + comp.info->name + "' on " + to_string(device)
                      + ": scatter updates need host replicas for now "
                        "(docs/sparse-updates.md); nothing was changed");
}

} // namespace

caf::error replica_state::scatter(const variable_info& v, scatter_op op,
                                  const std::vector<int64_t>& indices,
                                  const tensor& values) {
  auto c = find(v.id, v.name);
  if (!c)
    return record_failure(std::move(c.error()));
  auto& comp = **c;
  ++comp.updates;
  auto& info = *comp.info;
  if (auto err = validate_scatter(info, op, indices, values, to_string(op)))
    return record_failure(std::move(err));
  if (auto err = comp.policy().check_scatter(info, op))
    return record_failure(std::move(err));
  if (!host_memory_)
    return record_failure(host_only(comp, cfg_.device));
  const bool collective = comp.policy().collective_replica_updates();
  if (collective && recording_ == nullptr)
    return make_error(errc::invalid_argument,
                      "variable '" + info.name
                        + "' is on_write: scatter into it in a replica step "
                          "or in cross-replica context");
  auto rows = combine_duplicate_rows(info, op, indices, values);
  if (!rows)
    return record_failure(std::move(rows.error()));
  recorded_update u;
  u.variable_id = info.id;
  u.scatter = true;
  u.sop = op;
  u.indices = std::move(rows->rows);
  u.value = std::move(rows->values);
  if (collective) { // S1: combined with the other replicas' rows
    recording_->updates.push_back(std::move(u));
    return {};
  }
  // S3 (R1, N1): the local component, at once (validated above).
  if (auto err = check_scatter_overflow(comp, u))
    return record_failure(std::move(err));
  write_scatter_rows(comp, u);
  return {};
}

caf::error replica_state::check_scatter_rows(const component& comp,
                                             const recorded_update& u) const {
  auto& info = *comp.info;
  if (!host_memory_)
    return host_only(comp, cfg_.device);
  if (auto err = validate_scatter(info, u.sop, u.indices, u.value,
                                  to_string(u.sop)))
    return err;
  if (!distinct_ascending(u.indices))
    return make_error(errc::invalid_argument,
                      "replica " + std::to_string(cfg_.rank) + ": the rows of "
                        + std::string{to_string(u.sop)} + " of '" + info.name
                        + "' are not distinct and ascending");
  return check_scatter_overflow(comp, u);
}

caf::error
replica_state::check_scatter_overflow(const component& comp,
                                      const recorded_update& u) const {
  auto& info = *comp.info;
  auto at = host::scatter_first_overflow(u.sop, info.type, comp.data,
                                         row_elements(info), u.indices,
                                         u.value.raw(), 0, u.value.size());
  if (at < 0)
    return {};
  return make_error(errc::overflow,
                    "variable '" + info.name + "': "
                      + std::string{to_string(u.sop)} + " overflows "
                      + std::string{to_string(info.type)} + " in row "
                      + std::to_string(u.indices[static_cast<size_t>(
                        at / row_elements(info))])
                      + " on replica " + std::to_string(cfg_.rank)
                      + "; nothing was changed");
}

void replica_state::write_scatter_rows(component& comp,
                                       const recorded_update& u) {
  host::scatter_apply(u.sop, comp.info->type, comp.data,
                      row_elements(*comp.info), u.indices, u.value.raw(), 0,
                      u.value.size());
}

caf::expected<ok_atom> replica_state::apply_scatter(const recorded_update& u,
                                                    bool split) {
  auto c = find(u.variable_id);
  if (!c)
    return std::move(c.error());
  auto& comp = **c;
  if (!u.scatter)
    return make_error(errc::invalid_argument,
                      "replica " + std::to_string(cfg_.rank)
                        + ": a component scatter without rows");
  if (!split) {
    if (auto err = check_scatter_rows(comp, u))
      return err;
    write_scatter_rows(comp, u);
    return ok_atom::value;
  }
  // S4 (R4 row by row): this replica's share of each row, so that the
  // components' rows add up to the values.
  if (u.sop != scatter_op::update)
    return make_error(errc::invalid_argument,
                      "replica " + std::to_string(cfg_.rank)
                        + ": a split scatter that is not an update");
  if (auto err = check_scatter_rows(comp, u))
    return err;
  recorded_update share = u;
  share.value = tensor::empty(u.value.type(), u.value.shape());
  host::split_assign(u.value.type(), share.value.mutable_raw(), u.value.raw(),
                     0, u.value.size(), cfg_.rank, cfg_.num_replicas);
  write_scatter_rows(comp, share);
  return ok_atom::value;
}

} // namespace varsync::replica_internal
