#include "devices/row_update.hpp"

#include <numeric>
#include <vector>

#include "devices/host_kernels.hpp"
#include "varsync/tensor.hpp"

namespace varsync {

namespace {

int64_t packed_count(const row_update& u) {
  return static_cast<int64_t>(u.rows.size()) * u.row_elems;
}

/// The touched rows in host memory, and rows 0..k-1 to address them there.
struct host_rows {
  std::vector<std::byte> data;
  std::vector<int64_t> local;
};

caf::expected<host_rows> read(device& dev, const row_update& u) {
  host_rows out;
  const auto row_bytes = static_cast<size_t>(u.row_elems) * size_of(u.type);
  out.data.resize(u.rows.size() * row_bytes);
  out.local.resize(u.rows.size());
  std::iota(out.local.begin(), out.local.end(), int64_t{0});
  if (auto err = dev.read_rows(u.data, row_bytes, u.rows, out.data.data()))
    return err;
  return out;
}

} // namespace

caf::expected<int64_t> row_update_overflow(device* dev, const row_update& u) {
  if (is_floating(u.type) || u.rows.empty())
    return int64_t{-1};
  if (dev == nullptr || dev->host_accessible())
    return host::scatter_first_overflow(u.op, u.type, u.data, u.row_elems,
                                        u.rows, u.y, 0, packed_count(u));
  auto rows = read(*dev, u);
  if (!rows)
    return std::move(rows.error());
  return host::scatter_first_overflow(u.op, u.type, rows->data.data(),
                                      u.row_elems, rows->local, u.y, 0,
                                      packed_count(u));
}

caf::expected<int64_t> apply_row_update(device* dev, const row_update& u) {
  if (u.rows.empty())
    return int64_t{-1};
  const int64_t n = packed_count(u);
  const bool check = u.check_overflow && !is_floating(u.type);
  if (dev == nullptr || dev->host_accessible()) {
    if (check)
      if (auto at = host::scatter_first_overflow(u.op, u.type, u.data,
                                                 u.row_elems, u.rows, u.y, 0,
                                                 n);
          at >= 0)
        return at;
    host::scatter_apply(u.op, u.type, u.data, u.row_elems, u.rows, u.y, 0, n);
    return int64_t{-1};
  }
  auto rows = read(*dev, u);
  if (!rows)
    return std::move(rows.error());
  if (check)
    if (auto at = host::scatter_first_overflow(u.op, u.type, rows->data.data(),
                                               u.row_elems, rows->local, u.y,
                                               0, n);
        at >= 0)
      return at;
  host::scatter_apply(u.op, u.type, rows->data.data(), u.row_elems,
                      rows->local, u.y, 0, n);
  const auto row_bytes = static_cast<size_t>(u.row_elems) * size_of(u.type);
  if (auto err = dev->write_rows(u.data, row_bytes, u.rows, rows->data.data()))
    return err;
  return int64_t{-1};
}

} // namespace varsync
