#include "sync/collectives/step_collectives.hpp"

#include <span>

#include "varsync/error.hpp"
#include "sync/distributed_reduce.hpp"

namespace varsync {

namespace {

std::string shape_text(const tensor& t) {
  return std::string{to_string(t.type())} + " " + to_string(t.shape());
}

std::string values_text(const std::vector<tensor>& values) {
  if (values.size() == 1)
    return shape_text(values[0]);
  std::string out = std::to_string(values.size()) + " values (";
  for (size_t k = 0; k < values.size(); ++k)
    out += (k == 0 ? "" : ", ") + shape_text(values[k]);
  return out + ")";
}

const char* const abandoned
  = "; the step was abandoned on every replica, none of its on_write "
    "updates was applied";

std::string replica_name(size_t r, int first) {
  return "replica " + std::to_string(static_cast<int>(r) + first);
}

// The same collective, values aside.
bool same_request(const step_collective& a, const step_collective& b) {
  if (a.kind != b.kind || a.values.size() != b.values.size())
    return false;
  switch (a.kind) {
    case step_collective_kind::all_reduce: return a.op == b.op;
    case step_collective_kind::all_gather: return a.axis == b.axis;
    case step_collective_kind::broadcast: return a.root == b.root;
  }
  return false;
}

// all_gather: the shapes agree except along the (normalized) axis.
bool gather_compatible(const tensor& a, const tensor& b, int64_t axis) {
  if (a.rank() != b.rank())
    return false;
  const auto ax = axis < 0 ? axis + a.rank() : axis;
  for (int64_t d = 0; d < a.rank(); ++d)
    if (d != ax
        && a.shape()[static_cast<size_t>(d)] != b.shape()[static_cast<size_t>(d)])
      return false;
  return true;
}

} // namespace

std::string describe(const step_collective& c) {
  std::string out{to_string(c.kind)};
  switch (c.kind) {
    case step_collective_kind::all_reduce:
      out += " " + std::string{to_string(c.op)};
      break;
    case step_collective_kind::all_gather:
      out += " along axis " + std::to_string(c.axis);
      break;
    case step_collective_kind::broadcast:
      out += " from replica " + std::to_string(c.root);
      break;
  }
  if (c.values.empty())
    return out + " of no values";
  return out + " of " + values_text(c.values);
}

caf::error check_step_request(const step_collective& c, int num_replicas) {
  if (!is_valid(c.kind) || !is_valid(c.op))
    return make_error(errc::invalid_argument,
                      "a collective inside the step has an invalid kind or "
                      "reduction");
  if (c.kind == step_collective_kind::broadcast
      && (c.root < 0 || c.root >= num_replicas))
    return make_error(errc::invalid_argument,
                      "broadcast from replica " + std::to_string(c.root)
                        + " inside the step: the root must be in [0, "
                        + std::to_string(num_replicas) + ")");
  if (c.kind == step_collective_kind::all_gather)
    for (size_t k = 0; k < c.values.size(); ++k) {
      const auto rank = c.values[k].rank();
      if (rank == 0 || c.axis < -rank || c.axis >= rank)
        return make_error(errc::invalid_argument,
                          "all_gather along axis " + std::to_string(c.axis)
                            + " inside the step: value " + std::to_string(k)
                            + " has shape " + to_string(c.values[k].shape())
                            + "; the axis must be in [-rank, rank) of a "
                              "value of rank >= 1");
    }
  return {};
}

caf::error check_step_collectives(const std::vector<step_report>& reports,
                                  int first_replica) {
  size_t waiting = reports.size();
  for (size_t r = 0; r < reports.size(); ++r)
    if (reports[r].suspended) {
      waiting = r;
      break;
    }
  if (waiting == reports.size())
    return {};
  auto& c0 = reports[waiting].collective;
  for (size_t r = 0; r < reports.size(); ++r) {
    if (!reports[r].suspended)
      return make_error(errc::mismatched_replica_updates,
                        replica_name(r, first_replica)
                          + " ended its step while "
                          + replica_name(waiting, first_replica)
                          + " waits at " + describe(c0) + abandoned);
    auto& c = reports[r].collective;
    if (!same_request(c, c0))
      return make_error(errc::mismatched_replica_updates,
                        replica_name(r, first_replica) + " reached "
                          + describe(c) + " while "
                          + replica_name(waiting, first_replica)
                          + " reached " + describe(c0) + abandoned);
    for (size_t k = 0; k < c.values.size(); ++k) {
      auto& x = c.values[k];
      auto& x0 = c0.values[k];
      if (x.type() != x0.type())
        return make_error(errc::dtype_mismatch,
                          std::string{to_string(c.kind)} + " inside the step: "
                            + replica_name(r, first_replica) + "'s value "
                            + std::to_string(k) + " is "
                            + std::string{to_string(x.type())} + " but "
                            + replica_name(waiting, first_replica) + "'s is "
                            + std::string{to_string(x0.type())} + abandoned);
      const bool fits = c.kind == step_collective_kind::all_gather
                          ? gather_compatible(x, x0, c0.axis)
                          : x.shape() == x0.shape();
      if (!fits)
        return make_error(errc::shape_mismatch,
                          std::string{to_string(c.kind)} + " inside the step: "
                            + replica_name(r, first_replica) + "'s value "
                            + std::to_string(k) + " has shape "
                            + to_string(x.shape()) + " but "
                            + replica_name(waiting, first_replica) + "'s has "
                            + to_string(x0.shape())
                            + (c.kind == step_collective_kind::all_gather
                                 ? " (only the gather axis may differ)"
                                 : "")
                            + abandoned);
    }
  }
  return {};
}

caf::expected<std::vector<tensor>>
combine_step_values(const step_collective& request,
                    const std::vector<std::vector<tensor>>& parts) {
  std::vector<tensor> out;
  if (request.kind == step_collective_kind::broadcast) {
    const auto root = static_cast<size_t>(request.root);
    if (root >= parts.size())
      return make_error(errc::invalid_argument,
                        "broadcast from replica " + std::to_string(root)
                          + " inside the step: only "
                          + std::to_string(parts.size()) + " replicas");
    return parts[root];
  }
  if (request.kind != step_collective_kind::all_gather)
    return make_error(errc::invalid_argument,
                      describe(request) + ": not combined by value");
  for (size_t k = 0; k < request.values.size(); ++k) {
    std::vector<tensor> column;
    column.reserve(parts.size());
    for (auto& p : parts)
      column.push_back(p.at(k));
    auto joined = gather_values(std::span<const tensor>{column}, request.axis);
    if (!joined)
      return std::move(joined.error());
    out.push_back(std::move(*joined));
  }
  return out;
}

} // namespace varsync
