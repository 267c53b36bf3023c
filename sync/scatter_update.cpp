#include "sync/scatter_update.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <span>

#include "core/op_checks.hpp"
#include "devices/host_kernels.hpp"
#include "sync/policy/step_rules.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace {

std::string quoted(const variable_info& info) {
  return "'" + info.name + "'";
}

/// The reduction that folds duplicate rows of one contribution (S5).
reduce_op duplicate_fold(scatter_op op) {
  switch (op) {
    case scatter_op::mul:
    case scatter_op::div: return reduce_op::prod;
    case scatter_op::min: return reduce_op::min;
    case scatter_op::max: return reduce_op::max;
    default: return reduce_op::sum;
  }
}

tensor_shape rows_shape(const variable_info& info, int64_t k) {
  tensor_shape shape = info.shape;
  shape[0] = k;
  return shape;
}

const char* row_at(const tensor& t, int64_t row, int64_t row_bytes) {
  return static_cast<const char*>(t.raw()) + row * row_bytes;
}

caf::error overflow_error(const variable_info& info, scatter_op op,
                          const char* where, int64_t row) {
  return make_error(errc::overflow,
                    "variable " + quoted(info) + ": " + std::string{to_string(op)}
                      + ": " + where + " of row " + std::to_string(row)
                      + " overflows " + std::string{to_string(info.type)}
                      + "; nothing was changed");
}

} // namespace

int64_t row_elements(const variable_info& info) {
  int64_t n = 1;
  for (size_t i = 1; i < info.shape.size(); ++i)
    n *= info.shape[i];
  return n;
}

bool distinct_ascending(std::span<const int64_t> rows) {
  return std::adjacent_find(rows.begin(), rows.end(),
                            [](int64_t a, int64_t b) { return a >= b; })
         == rows.end();
}

caf::error validate_scatter(const variable_info& info, scatter_op op,
                            const std::vector<int64_t>& indices,
                            const tensor& values, std::string_view what) {
  if (auto err = check_scatter_op(op, info.name))
    return err;
  const std::string call = std::string{what} + " of " + quoted(info);
  if (info.shape.empty())
    return make_error(errc::invalid_argument,
                      call + ": the variable is a scalar; a scatter names rows "
                             "along the first axis and needs rank >= 1");
  if (values.type() != info.type)
    return make_error(errc::dtype_mismatch,
                      call + " expects values of dtype "
                        + std::string{to_string(info.type)} + " but got "
                        + std::string{to_string(values.type())});
  auto expected = rows_shape(info, static_cast<int64_t>(indices.size()));
  if (values.shape() != expected)
    return make_error(errc::shape_mismatch,
                      call + " with " + std::to_string(indices.size())
                        + " indices expects values of shape "
                        + to_string(expected) + " but got "
                        + to_string(values.shape()));
  const int64_t rows = info.shape[0];
  for (size_t j = 0; j < indices.size(); ++j)
    if (indices[j] < 0 || indices[j] >= rows)
      return make_error(errc::invalid_argument,
                        call + ": index " + std::to_string(indices[j])
                          + " at position " + std::to_string(j)
                          + " is outside [0, " + std::to_string(rows)
                          + "); nothing was changed");
  if (op == scatter_op::div) {
    auto at = host::first_zero(info.type, values.raw(), 0, values.size());
    if (at >= 0)
      return make_error(errc::invalid_argument,
                        call + ": integer division by zero (value element "
                          + std::to_string(at) + "); nothing was changed");
  }
  return {};
}

bool keeps_repeated_rows(scatter_op op) {
  return op == scatter_op::mul || op == scatter_op::div;
}

bool rows_in_kernel_form(scatter_op op, std::span<const int64_t> rows) {
  if (!keeps_repeated_rows(op))
    return distinct_ascending(rows);
  return std::is_sorted(rows.begin(), rows.end());
}

namespace {

/// The rows of one contribution in ascending order, a row's values in the
/// order given; `fold`: each row's values combined into one by the op.
caf::expected<scatter_rows>
sort_rows(const variable_info& info, scatter_op op,
          std::span<const int64_t> indices, const tensor& values, bool fold) {
  const auto k = static_cast<int64_t>(indices.size());
  std::vector<int64_t> order(indices.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return indices[a] < indices[b];
  });
  const int64_t re = row_elements(info);
  const auto row_bytes = static_cast<size_t>(re) * size_of(info.type);
  scatter_rows out;
  for (int64_t i = 0; i < k; ++i)
    if (!fold || i == 0 || indices[order[i]] != indices[order[i - 1]])
      out.rows.push_back(indices[order[i]]);
  // Written in place: one allocation, no copy of the packed rows.
  out.values = tensor::empty(
    info.type, rows_shape(info, static_cast<int64_t>(out.rows.size())));
  auto* packed = static_cast<char*>(out.values.mutable_raw());
  if (!fold) {
    for (int64_t i = 0; i < k; ++i)
      std::memcpy(packed + i * row_bytes, row_at(values, order[i], row_bytes),
                  row_bytes);
    return out;
  }
  std::vector<const void*> group;
  size_t j = 0;
  for (int64_t g = 0; g < k; ++j) {
    int64_t end = g;
    while (end < k && indices[order[end]] == indices[order[g]])
      ++end;
    const int64_t row = indices[order[g]];
    auto* dst = packed + j * row_bytes;
    if (op == scatter_op::update || end - g == 1) {
      // update: the last of the row's values (stable order), as applying
      // them one after the other would leave.
      std::memcpy(dst, row_at(values, order[end - 1], row_bytes), row_bytes);
    } else {
      group.clear();
      for (int64_t i = g; i < end; ++i)
        group.push_back(row_at(values, order[i], row_bytes));
      auto rop = duplicate_fold(op);
      if (host::first_overflow(rop, update_op::assign, info.type, group,
                               nullptr, 0, re)
          >= 0)
        return overflow_error(info, op, "combining the duplicate indices",
                              row);
      host::reduce(rop, info.type, dst, group, 0, re);
    }
    g = end;
  }
  return out;
}

} // namespace

caf::expected<scatter_rows>
combine_duplicate_rows(const variable_info& info, scatter_op op,
                       const std::vector<int64_t>& indices,
                       const tensor& values) {
  if (rows_in_kernel_form(op, indices))
    return scatter_rows{indices, values}; // the kernels' form already
  return sort_rows(info, op, indices, values, !keeps_repeated_rows(op));
}

namespace {

// Summed, a contribution is one value per row: a scatter_mul /
// scatter_div's repeated rows combine into their product first (S5).
caf::expected<std::vector<scatter_rows>>
fold_repeated_rows(const variable_info& info, scatter_op op,
                   const std::vector<scatter_rows>& parts) {
  std::vector<scatter_rows> folded;
  folded.reserve(parts.size());
  for (auto& p : parts) {
    if (!host::rows_repeat(p.rows)) {
      folded.push_back(p);
      continue;
    }
    auto f = sort_rows(info, op, p.rows, p.values, true);
    if (!f)
      return std::move(f.error());
    folded.push_back(std::move(*f));
  }
  return folded;
}

// The union of the parts' rows (each ascending), ascending; computed first
// so that the values are written in place.
std::vector<int64_t> union_of_rows(const std::vector<scatter_rows>& parts) {
  const size_t n = parts.size();
  std::vector<int64_t> rows;
  std::vector<size_t> next(n, 0);
  for (;;) {
    int64_t row = -1;
    for (size_t r = 0; r < n; ++r)
      if (next[r] < parts[r].rows.size()
          && (row < 0 || parts[r].rows[next[r]] < row))
        row = parts[r].rows[next[r]];
    if (row < 0)
      break;
    rows.push_back(row);
    for (size_t r = 0; r < n; ++r)
      if (next[r] < parts[r].rows.size() && parts[r].rows[next[r]] == row)
        ++next[r];
  }
  return rows;
}

// Each of out's rows reduces the contributions that name it (mean: every
// replica, the others as zeros, so that the division is by N as in W4).
caf::error reduce_union_rows(const variable_info& info, scatter_op op,
                             const contribution_rule& rule,
                             const std::vector<scatter_rows>& parts,
                             const std::string& name, scatter_rows& out) {
  const size_t n = parts.size();
  const int64_t re = row_elements(info);
  const auto row_bytes = static_cast<size_t>(re) * size_of(info.type);
  const bool mean = rule.op == reduce_op::mean;
  auto zeros = tensor::zeros(info.type, {re});
  out.values = tensor::empty(
    info.type, rows_shape(info, static_cast<int64_t>(out.rows.size())));
  auto* packed = static_cast<char*>(out.values.mutable_raw());
  std::vector<size_t> next(n, 0);
  std::vector<const void*> inputs;
  for (size_t j = 0; j < out.rows.size(); ++j) {
    const int64_t row = out.rows[j];
    inputs.clear();
    for (size_t r = 0; r < n; ++r) {
      if (next[r] < parts[r].rows.size() && parts[r].rows[next[r]] == row) {
        inputs.push_back(row_at(parts[r].values,
                                static_cast<int64_t>(next[r]), row_bytes));
        ++next[r];
      } else if (mean) {
        inputs.push_back(zeros.raw());
      }
    }
    if (host::first_overflow(rule.op, update_op::assign, info.type, inputs,
                             nullptr, 0, re)
        >= 0)
      return overflow_error(info, op,
                            "the sum of the replicas' contributions", row);
    auto* dst = packed + j * row_bytes;
    host::reduce(rule.op, info.type, dst, inputs, 0, re);
    if (op == scatter_op::div && host::first_zero(info.type, dst, 0, re) >= 0)
      return make_error(errc::invalid_argument,
                        "variable " + name + ": " + std::string{to_string(op)}
                          + ": the replicas' divisors for row "
                          + std::to_string(row)
                          + " sum to zero; nothing was changed");
  }
  return caf::none;
}

} // namespace

caf::expected<scatter_rows>
combine_scatter_contributions(const variable_info& info, scatter_op op,
                              const contribution_rule& rule,
                              const std::vector<scatter_rows>& parts,
                              const std::string& name) {
  const size_t n = parts.size();
  if (n == 0)
    return make_error(errc::invalid_argument,
                      "variable " + name + ": a scatter without contributions");
  if (rule.require_equal)
    for (size_t r = 1; r < n; ++r)
      if (parts[r].rows != parts[0].rows
          || !host::bitwise_equal(parts[r].values.raw(),
                                  parts[0].values.raw(),
                                  parts[0].values.nbytes()))
        return unequal_contributions_error(name, static_cast<int>(r));
  if (rule.first_only || rule.require_equal || n == 1)
    return parts[0];
  if (keeps_repeated_rows(op)
      && std::any_of(parts.begin(), parts.end(), [](const scatter_rows& p) {
           return host::rows_repeat(p.rows);
         })) {
    auto folded = fold_repeated_rows(info, op, parts);
    if (!folded)
      return std::move(folded.error());
    return combine_scatter_contributions(info, op, rule, *folded, name);
  }
  scatter_rows out;
  out.rows = union_of_rows(parts);
  if (auto err = reduce_union_rows(info, op, rule, parts, name, out))
    return err;
  return out;
}

} // namespace varsync
