#pragma once
// Cross-replica reductions and gathers on host tensors (SEMANTICS rows D3, D4,
// D6, D7). Pure functions: the values come in replica order and nothing is
// shared with the result.

#include <cstdint>
#include <span>

#include <caf/expected.hpp>

#include "varsync/tensor.hpp"
#include "varsync/synchronization.hpp"

namespace varsync {

/// D3: reduces elementwise across replicas. All values must have the dtype
/// (`dtype_mismatch`) and the shape (`shape_mismatch`) of replica 0; an empty
/// span fails with `invalid_argument`. The result has the input dtype, except
/// that `mean` of integer values yields float64 (D6, computed in double).
/// Integer sums and products that do not fit the dtype fail with
/// `overflow`; floating min/max propagate NaN.
caf::expected<tensor> reduce_values(reduce_op op,
                                    std::span<const tensor> values);

/// D4: reduces across replicas and along `axis` inside each replica; the
/// result has the input shape with `axis` removed. Shapes must agree on every
/// dimension except `axis`, so uneven batches are fine; `mean` is the exact
/// global mean (total sum / total count along the axis). A negative axis
/// counts from the end; an axis out of range (any axis for rank-0 values)
/// fails with `invalid_argument`. When the total count along the axis is 0,
/// `sum` gives zeros, `prod` ones, and `mean`, `min` and `max` fail with
/// `invalid_argument`. Floating values are accumulated in double and rounded
/// to the dtype once; integer `mean` yields float64 (D6).
caf::expected<tensor> reduce_values(reduce_op op,
                                    std::span<const tensor> values,
                                    int64_t axis);

/// D7: concatenates the values along `axis` in replica order. Dtypes must
/// agree (`dtype_mismatch`) and shapes must agree except on `axis`
/// (`shape_mismatch`); rank-0 values, an axis out of range and an empty span
/// fail with `invalid_argument`.
caf::expected<tensor> gather_values(std::span<const tensor> values,
                                    int64_t axis);

} // namespace varsync
