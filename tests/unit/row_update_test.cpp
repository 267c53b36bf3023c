// Sparse updates of one component moving only the touched rows
// (devices/row_update.hpp): on memory the host cannot touch (a device whose
// rows only read_rows / write_rows reach, standing for a GPU), the result is
// the host kernels' bit for bit, only the touched rows move, and an integer
// overflow changes nothing.

#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "devices/device.hpp"
#include "devices/host_kernels.hpp"
#include "devices/row_update.hpp"
#include "varsync/error.hpp"
#include "varsync/variable.hpp"

using namespace varsync;

namespace {

// Its memory is host memory, but nothing in varsync may touch it directly:
// only read_rows / write_rows, which count the bytes they move.
struct rows_only_device : device {
  size_t bytes_read = 0;
  size_t bytes_written = 0;

  device_id id() const override { return {device_kind::cuda, 0}; }
  bool host_accessible() const override { return false; }
  caf::expected<void*> allocate(size_t) override {
    return make_error(errc::device_error, "unused");
  }
  void release(void*) override {}
  caf::error upload(void*, const tensor&) override { return unused(); }
  caf::expected<tensor> download(const void*, dtype,
                                 const tensor_shape&) override {
    return unused();
  }
  caf::error apply(void*, update_op, const tensor&) override {
    return unused();
  }
  caf::error split_assign(void*, const tensor&, int, int) override {
    return unused();
  }
  caf::error apply_local(void*, update_op, dtype, const void*,
                         int64_t) override {
    return unused();
  }
  caf::error copy_local(void*, const void*, size_t) override {
    return unused();
  }
  caf::error read_rows(const void* src, size_t row_bytes,
                       std::span<const int64_t> rows, void* out) override {
    for (size_t j = 0; j < rows.size(); ++j)
      std::memcpy(static_cast<std::byte*>(out) + j * row_bytes,
                  static_cast<const std::byte*>(src) + rows[j] * row_bytes,
                  row_bytes);
    bytes_read += rows.size() * row_bytes;
    return {};
  }
  caf::error write_rows(void* dst, size_t row_bytes,
                        std::span<const int64_t> rows,
                        const void* in) override {
    for (size_t j = 0; j < rows.size(); ++j)
      std::memcpy(static_cast<std::byte*>(dst) + rows[j] * row_bytes,
                  static_cast<const std::byte*>(in) + j * row_bytes,
                  row_bytes);
    bytes_written += rows.size() * row_bytes;
    return {};
  }

  static caf::error unused() {
    return make_error(errc::device_error,
                      "rows_only_device: only rows move here");
  }
};

row_update make_update(scatter_op op, dtype t, void* data, int64_t row_elems,
                       const std::vector<int64_t>& rows, const void* y) {
  row_update u;
  u.op = op;
  u.type = t;
  u.data = data;
  u.row_elems = row_elems;
  u.rows = rows;
  u.y = y;
  return u;
}

} // namespace

TEST_CASE("row update: on far memory every scatter op gives the host's "
          "result and moves only the touched rows",
          "[unit][row_update]") {
  constexpr int64_t num_rows = 1000;
  constexpr int64_t width = 8;
  std::mt19937 rng{5};
  std::uniform_real_distribution<float> dist(-50, 50);
  std::vector<float> table(num_rows * width);
  for (auto& x : table)
    x = dist(rng);
  std::vector<int64_t> rows{3, 17, 500, 999};
  std::vector<float> y(rows.size() * width);
  for (auto& x : y)
    x = dist(rng);
  for (auto op : {scatter_op::update, scatter_op::add, scatter_op::sub,
                  scatter_op::mul, scatter_op::div, scatter_op::min,
                  scatter_op::max}) {
    INFO(to_string(op));
    auto host = table;
    auto far = table;
    REQUIRE(*apply_row_update(nullptr, make_update(op, dtype::float32,
                                                   host.data(), width, rows,
                                                   y.data()))
            == -1);
    rows_only_device dev;
    auto at = apply_row_update(&dev, make_update(op, dtype::float32,
                                                 far.data(), width, rows,
                                                 y.data()));
    REQUIRE(at);
    CHECK(*at == -1);
    CHECK(std::memcmp(host.data(), far.data(), host.size() * sizeof(float))
          == 0);
    CHECK(host != table);
    const auto touched = rows.size() * width * sizeof(float);
    CHECK(dev.bytes_read == touched);
    CHECK(dev.bytes_written == touched);
  }
}

TEST_CASE("row update: an integer overflow on far memory changes nothing and "
          "names the packed element",
          "[unit][row_update]") {
  std::vector<int32_t> table{1, 2, 3, 4, 5, 6}; // 3 rows of 2
  const auto before = table;
  std::vector<int64_t> rows{0, 2};
  std::vector<int32_t> y{1, 1, 1, INT32_MAX}; // row 2, element 1 overflows
  rows_only_device dev;
  auto u = make_update(scatter_op::add, dtype::int32, table.data(), 2, rows,
                       y.data());
  auto check = row_update_overflow(&dev, u);
  REQUIRE(check);
  CHECK(*check == 3);
  auto at = apply_row_update(&dev, u);
  REQUIRE(at);
  CHECK(*at == 3);
  CHECK(table == before);
  CHECK(dev.bytes_written == 0);
  SECTION("the same update in range applies") {
    y[3] = 10;
    REQUIRE(*apply_row_update(&dev, u) == -1);
    CHECK(table == std::vector<int32_t>{2, 3, 3, 4, 6, 16});
  }
}

TEST_CASE("row update: floating data is never checked, no rows move nothing",
          "[unit][row_update]") {
  rows_only_device dev;
  std::vector<float> table{1, 2};
  std::vector<int64_t> none;
  auto u = make_update(scatter_op::add, dtype::float32, table.data(), 1, none,
                       nullptr);
  CHECK(*apply_row_update(&dev, u) == -1);
  CHECK(*row_update_overflow(&dev, u) == -1);
  CHECK(dev.bytes_read == 0);
  CHECK(dev.bytes_written == 0);
}

TEST_CASE("row update: a repeated row (scatter_mul / scatter_div, S5) moves "
          "once and its factors apply in order, on far memory as on the host",
          "[unit][row_update][issue34]") {
  std::vector<int64_t> rows{1, 4, 4};
  std::vector<float> y{2, 1e25f, 1e25f};
  std::vector<float> host(6, 1e30f);
  auto far = host;
  REQUIRE(*apply_row_update(nullptr, make_update(scatter_op::div,
                                                 dtype::float32, host.data(),
                                                 1, rows, y.data()))
          == -1);
  rows_only_device dev;
  REQUIRE(*apply_row_update(&dev, make_update(scatter_op::div, dtype::float32,
                                              far.data(), 1, rows, y.data()))
          == -1);
  CHECK(far == host);
  CHECK(host[1] == 5e29f);
  CHECK(host[4] == Approx(1e-20f).epsilon(1e-6));
  CHECK(dev.bytes_read == 2 * sizeof(float));
  CHECK(dev.bytes_written == 2 * sizeof(float));
  SECTION("int32: the overflow check follows the occurrences too") {
    std::vector<int32_t> ints{0, 1};
    std::vector<int64_t> twice{0, 0};
    std::vector<int32_t> f{65536, 65536};
    auto zero = ints;
    rows_only_device idev;
    CHECK(*row_update_overflow(&idev, make_update(scatter_op::mul,
                                                  dtype::int32, zero.data(),
                                                  1, twice, f.data()))
          == -1);
    std::vector<int64_t> one_twice{1, 1};
    CHECK(*apply_row_update(&idev, make_update(scatter_op::mul, dtype::int32,
                                               ints.data(), 1, one_twice,
                                               f.data()))
          == 1);
    CHECK(ints == std::vector<int32_t>{0, 1}); // nothing changed
  }
}
