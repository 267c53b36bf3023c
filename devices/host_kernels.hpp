#pragma once
// Elementwise CPU kernels on raw host buffers, for every dtype. float16 and
// bfloat16 are computed in float32 and rounded back (core/half.hpp); integer
// arithmetic wraps like unsigned arithmetic (never undefined behavior);
// callers that must not wrap check first_overflow() before writing.
//
// Every kernel works on the element range [begin, end), so that several
// workers can each process a slice of one buffer. The dtype is dispatched once
// per call; the inner loops are plain loops over contiguous elements that the
// compiler can vectorize.
//
// Floating min/max propagate NaN (like numpy's minimum/maximum). Kernels throw
// std::invalid_argument for requests callers are expected to reject first
// (integer mean, no inputs, bad replica count).

#include <cstddef>
#include <cstdint>
#include <span>

#include "varsync/dtype.hpp"
#include "varsync/variable.hpp"
#include "varsync/synchronization.hpp"

namespace varsync::host {

/// dst[i] = y[i] (assign) | dst[i] + y[i] (assign_add) | dst[i] - y[i]
/// (assign_sub) for i in [begin, end). `dst` may equal `y`.
void apply_update(update_op op, dtype t, void* dst, const void* y,
                  int64_t begin, int64_t end);

/// out[i] = op(inputs[0][i], ..., inputs[n-1][i]) for i in [begin, end), with
/// the inputs combined in order. `mean` is sum / inputs.size() and is only
/// valid for floating dtypes. `out` may be one of the inputs. Throws
/// std::invalid_argument for an empty `inputs` or an integer mean.
void reduce(reduce_op op, dtype t, void* out,
            std::span<const void* const> inputs, int64_t begin, int64_t end);

/// The one-pass kernel of the host all-reduce: for each i in [begin, end),
/// y = reduce(rop, contributions[*][i]) (y = contributions[0][i] for a single
/// contribution), rounded to `t`, then c[i] = uop(c[i], y) for every
/// component c. Reads each contribution and component element once and writes
/// each component element once. Components must not alias contributions or
/// each other. Same result, bit for bit, as reduce() into a temporary followed
/// by apply_update() on every component.
void reduce_and_apply(reduce_op rop, update_op uop, dtype t,
                      std::span<const void* const> contributions,
                      std::span<void* const> components, int64_t begin,
                      int64_t end);

/// reduce_and_apply for components that hold equal values (the mirrors of an
/// ON_WRITE variable): the new value is computed once per element from
/// component 0 and stored to every component, in one pass. Bit for bit the
/// result of reduce_and_apply when the components are equal.
void reduce_and_apply_mirrored(reduce_op rop, update_op uop, dtype t,
                               std::span<const void* const> contributions,
                               std::span<void* const> components,
                               int64_t begin, int64_t end);

/// Sets the component of replica `rank` (of `num_replicas`) so that the
/// components of all replicas add up to x (rule R4), for i in [begin, end):
/// floating dtypes get x / N (divided in the dtype's arithmetic, float for the
/// 16-bit types); integer dtypes are split exactly: with floor division
/// x = q * N + r, 0 <= r < N, replica k gets q + (k < r ? 1 : 0). `dst` may
/// equal `x`. Throws std::invalid_argument unless 0 <= rank < num_replicas.
void split_assign(dtype t, void* dst, const void* x, int64_t begin,
                  int64_t end, int rank, int num_replicas);

/// Integer overflow check, read-only (floating dtypes: always -1). For each
/// i in [begin, end): y = reduce(rop, inputs[*][i]) in the dtype (y =
/// inputs[0][i] for a single input), then, if `component` is not null,
/// uop(component[i], y). Returns the first i at which a sum, product,
/// assign_add or assign_sub does not fit the dtype, or -1.
int64_t first_overflow(reduce_op rop, update_op uop, dtype t,
                       std::span<const void* const> inputs,
                       const void* component, int64_t begin, int64_t end);

/// int32 reductions across processes keep their partial results in int64,
/// so that a sum may pass through values outside int32 on the way, as it
/// may in one process (V4). out[i] = reduce(rop, inputs[*][i]) in int64
/// (inputs are int32; rop is sum, prod, min or max) for i in [begin, end).
/// Returns the first i at which an int64 intermediate does not fit, or -1.
int64_t reduce_int32_widened(reduce_op rop, int64_t* out,
                             std::span<const int32_t* const> inputs,
                             int64_t begin, int64_t end);

/// out[i] = x[i] for i in [begin, end) when every x[i] fits int32; returns
/// the first i that does not fit (and writes nothing), or -1.
int64_t narrow_to_int32(int32_t* out, const int64_t* x, int64_t begin,
                        int64_t end);

/// Row scatter (S1-S5): `y` packs rows.size() rows of `row_elems` elements;
/// for each packed element e in [begin, end), in order, with j = e /
/// row_elems, dst[rows[j] * row_elems + e % row_elems] = op(that element,
/// y[e]). A row may repeat only next to itself (scatter_mul / scatter_div
/// keep their repeated rows, S5): its occurrences then apply one after
/// another, so workers may split [0, rows.size() * row_elems) only where
/// the rows are distinct (rows_repeat). Integer div truncates; callers
/// refuse zero divisors (first_zero) and overflow (scatter_first_overflow)
/// first. Floating min/max propagate NaN.
void scatter_apply(scatter_op op, dtype t, void* dst, int64_t row_elems,
                   std::span<const int64_t> rows, const void* y, int64_t begin,
                   int64_t end);

/// scatter_apply's integer check, read-only (floating dtypes: -1): a
/// packed element e in [begin, end) whose result does not fit the dtype
/// (add, sub, mul; div of the minimum by -1), or -1. A repeated row is
/// checked as scatter_apply applies it: each occurrence meets the value the
/// one before it left.
int64_t scatter_first_overflow(scatter_op op, dtype t, const void* dst,
                               int64_t row_elems,
                               std::span<const int64_t> rows, const void* y,
                               int64_t begin, int64_t end);

/// True if some row appears twice in a row (`rows` as scatter_apply takes
/// them): such rows must be applied by one worker, in order.
bool rows_repeat(std::span<const int64_t> rows);

/// The first i in [begin, end) with x[i] == 0 for integer dtypes (a divisor
/// that is refused), or -1; floating dtypes divide by zero as IEEE does: -1.
int64_t first_zero(dtype t, const void* x, int64_t begin, int64_t end);

/// True if the first `nbytes` bytes of `a` and `b` are equal.
bool bitwise_equal(const void* a, const void* b, size_t nbytes);

} // namespace varsync::host
