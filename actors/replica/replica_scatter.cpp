// Sparse updates on a replica: recorded in a step (ON_WRITE), applied to the
// local component at once (ON_READ, NONE), and the rows that cross-replica
// scatters and steps send.

#include "actors/replica/replica_components.hpp"
#include "actors/replica/replica_steps.hpp"

#include "devices/host_kernels.hpp"
#include "varsync/error.hpp"

#include "devices/row_update.hpp"
#include "sync/scatter_update.hpp"

namespace varsync::replica_internal {

namespace {

row_update as_row_update(const component& comp, const recorded_update& u) {
  row_update out;
  out.op = u.sop;
  out.type = comp.info->type;
  out.data = comp.data;
  out.row_elems = row_elements(*comp.info);
  out.rows = u.indices;
  out.y = u.value.raw();
  return out;
}

} // namespace

caf::error step_runner::scatter(const variable_info& v, scatter_op op,
                                const std::vector<int64_t>& indices,
                                const tensor& values) {
  auto c = store_.find(v.id, v.name);
  if (!c)
    return record_failure(std::move(c.error()));
  auto& comp = **c;
  ++comp.updates;
  auto& info = *comp.info;
  if (auto err = validate_scatter(info, op, indices, values, to_string(op)))
    return record_failure(std::move(err));
  if (auto err = comp.policy().check_scatter(info, op))
    return record_failure(std::move(err));
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
  // S3 (R1, N1): the local component, at once (validated above; the
  // overflow check comes with the write).
  if (auto err = store_.write_scatter_rows(comp, u))
    return record_failure(std::move(err));
  return {};
}

caf::error component_store::check_scatter_rows(const component& comp,
                                               const recorded_update& u) const {
  if (auto err = check_scatter_shape(comp, u))
    return err;
  return check_scatter_overflow(comp, u);
}

caf::error component_store::check_scatter_shape(const component& comp,
                                                const recorded_update& u) const {
  auto& info = *comp.info;
  if (auto err = validate_scatter(info, u.sop, u.indices, u.value,
                                  to_string(u.sop)))
    return err;
  if (!rows_in_kernel_form(u.sop, u.indices))
    return make_error(errc::invalid_argument,
                      "replica " + std::to_string(rank_) + ": the rows of "
                        + std::string{to_string(u.sop)} + " of '" + info.name
                        + "' are not ascending (and distinct but for "
                          "scatter_mul / scatter_div)");
  return {};
}

namespace {

caf::error scatter_overflow_error(const component& comp,
                                  const recorded_update& u, int64_t at,
                                  int rank) {
  auto& info = *comp.info;
  return make_error(errc::overflow,
                    "variable '" + info.name + "': "
                      + std::string{to_string(u.sop)} + " overflows "
                      + std::string{to_string(info.type)} + " in row "
                      + std::to_string(u.indices[static_cast<size_t>(
                        at / row_elements(info))])
                      + " on replica " + std::to_string(rank)
                      + "; nothing was changed");
}

} // namespace

caf::error
component_store::check_scatter_overflow(const component& comp,
                                      const recorded_update& u) const {
  // Device memory: only the touched rows are read (devices/row_update).
  auto at = row_update_overflow(row_device(),
                                as_row_update(comp, u));
  if (!at)
    return std::move(at.error());
  if (*at < 0)
    return {};
  return scatter_overflow_error(comp, u, *at, rank_);
}

caf::error component_store::write_scatter_rows(component& comp,
                                               const recorded_update& u,
                                               bool checked) {
  auto ru = as_row_update(comp, u);
  ru.check_overflow = !checked;
  auto at = apply_row_update(row_device(), ru);
  if (!at)
    return std::move(at.error());
  if (*at >= 0)
    return scatter_overflow_error(comp, u, *at, rank_);
  return {};
}

caf::expected<ok_atom> component_store::apply_scatter(const recorded_update& u,
                                                      bool split) {
  auto c = find(u.variable_id);
  if (!c)
    return std::move(c.error());
  auto& comp = **c;
  if (!u.scatter)
    return make_error(errc::invalid_argument,
                      "replica " + std::to_string(rank_)
                        + ": a component scatter without rows");
  if (!split) { // V4 with the write: the rows are read once
    if (auto err = check_scatter_shape(comp, u))
      return err;
    if (auto err = write_scatter_rows(comp, u))
      return err;
    return ok_atom::value;
  }
  // S4 (R4 row by row): this replica's share of each row, so that the
  // components' rows add up to the values.
  if (u.sop != scatter_op::update)
    return make_error(errc::invalid_argument,
                      "replica " + std::to_string(rank_)
                        + ": a split scatter that is not an update");
  if (auto err = check_scatter_rows(comp, u))
    return err;
  recorded_update share = u;
  share.value = tensor::empty(u.value.type(), u.value.shape());
  host::split_assign(u.value.type(), share.value.mutable_raw(), u.value.raw(),
                     0, u.value.size(), rank_, num_replicas_);
  if (auto err = write_scatter_rows(comp, share, true))
    return err;
  return ok_atom::value;
}

} // namespace varsync::replica_internal
