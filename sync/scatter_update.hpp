#pragma once
// The rules of sparse updates (docs/semantics.md, S1-S5): what a scatter
// may name, how the duplicate rows of one contribution combine, and how the
// contributions of a step's replicas combine into the rows every component
// gets (W4 row by row). Every function here checks before anything changes;
// the actors apply the result.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "devices/row_update.hpp"
#include "sync/policy/sync_policy.hpp"
#include "varsync/tensor.hpp"
#include "varsync/variable.hpp"

namespace varsync {

/// Rows in ascending order and one row of values each ([rows.size(), d1,
/// ...]): a scatter in the form the kernels apply. The rows are distinct,
/// except that scatter_mul and scatter_div keep a repeated row's values in
/// the order given (S5: applied one after another).
struct scatter_rows {
  std::vector<int64_t> rows;
  tensor values;
};

/// Elements per row of `info` (the product of its shape after the first
/// axis).
int64_t row_elements(const variable_info& info);

/// True if `rows` are distinct and ascending (the form the kernels apply and
/// the workers split).
bool distinct_ascending(std::span<const int64_t> rows);

/// S5: scatter_mul and scatter_div keep their repeated rows (the factors
/// apply one after another: their product may leave the dtype where the
/// result does not); the other ops combine them.
bool keeps_repeated_rows(scatter_op op);

/// True if `rows` are in the form the kernels apply for `op`: distinct and
/// ascending, or for keeps_repeated_rows(op) ascending.
bool rows_in_kernel_form(scatter_op op, std::span<const int64_t> rows);

/// S1/S3: `op` on `info` with these indices and values: a valid op, a
/// variable of rank >= 1, values of the variable's dtype and shape [k, d1,
/// ...] with k = indices.size(), every index in [0, d0), and for integer
/// div no zero divisor. invalid_argument (dtype_mismatch, shape_mismatch)
/// naming the variable, `what` and the offending position otherwise.
caf::error validate_scatter(const variable_info& info, scatter_op op,
                            const std::vector<int64_t>& indices,
                            const tensor& values, std::string_view what);

/// S5: the rows of one contribution in ascending order, duplicates
/// combined: add and sub sum their rows, min and max keep the smallest /
/// largest, update keeps the last; mul and div keep every row, in the order
/// given. Integer results that do not fit fail with overflow. Expects
/// validated input.
caf::expected<scatter_rows>
combine_duplicate_rows(const variable_info& info, scatter_op op,
                       const std::vector<int64_t>& indices,
                       const tensor& values);

/// S1 (W4 row by row): the rows every component of an ON_WRITE variable
/// gets from a step whose N replicas contributed `parts` (each combined by
/// combine_duplicate_rows). The rows are the union of the contributions'
/// rows; a row's value is, by `rule`: sum -> the sum of the contributions
/// that name it; mean -> that sum / N; only_first_replica -> replica 0's
/// rows alone; none -> replica 0's, when every replica contributed the same
/// rows and values (aggregation_required otherwise). Summed, a part's
/// repeated mul / div rows first combine into their product. Integer sums
/// and products that do not fit fail with overflow; an integer div whose combined divisor is 0
/// with invalid_argument. `name` is the quoted variable name.
caf::expected<scatter_rows>
combine_scatter_contributions(const variable_info& info, scatter_op op,
                              const contribution_rule& rule,
                              const std::vector<scatter_rows>& parts,
                              const std::string& name);

} // namespace varsync
