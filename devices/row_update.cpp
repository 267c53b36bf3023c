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

/// The touched rows in host memory, and for each of u.rows its row there.
/// A repeated row (S5: adjacent in u.rows) is read and written once, and
/// its occurrences apply to that one copy in order.
struct host_rows {
  std::vector<std::byte> data;
  std::vector<int64_t> local;
  std::vector<int64_t> distinct; // empty: u.rows are distinct

  std::span<const int64_t> moved(const row_update& u) const {
    return distinct.empty() ? u.rows : std::span<const int64_t>{distinct};
  }
};

caf::expected<host_rows> read(device& dev, const row_update& u) {
  host_rows out;
  const auto row_bytes = static_cast<size_t>(u.row_elems) * size_of(u.type);
  out.local.resize(u.rows.size());
  if (host::rows_repeat(u.rows)) {
    for (size_t j = 0; j < u.rows.size(); ++j) {
      if (j == 0 || u.rows[j] != u.rows[j - 1])
        out.distinct.push_back(u.rows[j]);
      out.local[j] = static_cast<int64_t>(out.distinct.size()) - 1;
    }
  } else {
    std::iota(out.local.begin(), out.local.end(), int64_t{0});
  }
  auto rows = out.moved(u);
  out.data.resize(rows.size() * row_bytes);
  if (auto err = dev.read_rows(u.data, row_bytes, rows, out.data.data()))
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
  if (auto err = dev->write_rows(u.data, row_bytes, rows->moved(u),
                                 rows->data.data()))
    return err;
  return int64_t{-1};
}

} // namespace varsync
