#pragma once
// A sparse update (scatter_*) of one component, moving only the rows it
// touches. Host memory is updated in place by the host kernels. Device
// memory has its rows read into host memory (device::read_rows), checked and
// computed there by the same host kernels, and written back: the results are
// the host's bit for bit, and a 1% update of a table moves 1% of it each way.

#include <cstdint>
#include <span>

#include <caf/expected.hpp>

#include "devices/device.hpp"
#include "varsync/dtype.hpp"
#include "varsync/variable.hpp"

namespace varsync {

/// One component of `type`, rows of `row_elems` elements, at `data` on
/// `dev`, and the update: rows[j] (in range; distinct, or for scatter_mul
/// and scatter_div repeated next to each other, S5) gets row j of `y`, in
/// order.
struct row_update {
  scatter_op op = scatter_op::update;
  dtype type = dtype::float32;
  void* data = nullptr;
  int64_t row_elems = 0;
  std::span<const int64_t> rows;
  const void* y = nullptr;
  /// False where V4 was checked already (at a collective's enter, or for
  /// every update of a step before any is written): apply_row_update then
  /// applies without checking again.
  bool check_overflow = true;
};

// `dev`: the device that owns the memory; null for host memory.

/// V4 first (unless u.check_overflow is false): the packed element
/// (j * row_elems + k) of the first integer result that does not fit, with
/// nothing changed; else applies the update and returns -1. Errors: the device's (reading or writing the rows).
caf::expected<int64_t> apply_row_update(device* dev, const row_update& u);

/// The V4 check alone (read-only): the first overflowing packed element, or
/// -1.
caf::expected<int64_t> row_update_overflow(device* dev, const row_update& u);

} // namespace varsync
