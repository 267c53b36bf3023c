// Sparse updates of a component on a GPU moving only the touched rows:
// cuda_device::read_rows / write_rows (a gather and a scatter kernel, whole
// words where the row size allows) and devices/row_update on top of them,
// against the host kernels on a host copy. Needs a GPU.

#include "gpu_test_util.hpp"

#include <cstring>
#include <random>
#include <vector>

#include "devices/host_kernels.hpp"
#include "devices/row_update.hpp"
#include "varsync/variable.hpp"

using namespace varsync;
using namespace gpu_test;

TEST_CASE("cuda_device: read_rows and write_rows move exactly the named "
          "rows, for every row width",
          "[gpu][cuda_device][rows]") {
  auto dev = open_gpu(0);
  std::mt19937_64 rng{3};
  // Row sizes of 2, 6, 12 and 16 bytes: 16-, 16-, 32- and 64-bit words.
  for (auto [t, width] : {std::pair{dtype::float16, int64_t{1}},
                          std::pair{dtype::float16, int64_t{3}},
                          std::pair{dtype::float32, int64_t{3}},
                          std::pair{dtype::float64, int64_t{2}}}) {
    INFO(to_string(t) << " x " << width);
    const int64_t num_rows = 777;
    auto table = random_tensor(t, {num_rows, width}, rng);
    auto data = dev->allocate(table.nbytes());
    REQUIRE(data);
    REQUIRE(!dev->upload(*data, table));
    std::vector<int64_t> rows{0, 5, 6, 400, 776};
    const size_t row_bytes = static_cast<size_t>(width) * size_of(t);
    std::vector<std::byte> got(rows.size() * row_bytes);
    REQUIRE(!dev->read_rows(*data, row_bytes, rows, got.data()));
    for (size_t j = 0; j < rows.size(); ++j)
      CHECK(std::memcmp(got.data() + j * row_bytes,
                        static_cast<const std::byte*>(table.raw())
                          + rows[j] * row_bytes,
                        row_bytes)
            == 0);
    auto fresh = random_tensor(t, {static_cast<int64_t>(rows.size()), width},
                               rng);
    REQUIRE(!dev->write_rows(*data, row_bytes, rows, fresh.raw()));
    auto after = dev->download(*data, t, table.shape());
    REQUIRE(after);
    auto want = table;
    auto* w = static_cast<std::byte*>(want.mutable_raw());
    for (size_t j = 0; j < rows.size(); ++j)
      std::memcpy(w + rows[j] * row_bytes,
                  static_cast<const std::byte*>(fresh.raw()) + j * row_bytes,
                  row_bytes);
    std::string why;
    CHECK(same_values(*after, want, &why));
    dev->release(*data);
  }
}

TEST_CASE("row update on a GPU component equals the host kernels for every "
          "scatter op and dtype",
          "[gpu][rows]") {
  auto dev = open_gpu(0);
  std::mt19937_64 rng{9};
  const int64_t num_rows = 300;
  const int64_t width = 5;
  std::vector<int64_t> rows{1, 2, 150, 299};
  for (auto t : all_dtypes()) {
    for (auto op : {scatter_op::update, scatter_op::add, scatter_op::sub,
                    scatter_op::mul, scatter_op::min, scatter_op::max}) {
      INFO(to_string(t) << " " << to_string(op));
      auto table = random_small_ints(t, num_rows * width, rng, 20);
      auto y = random_small_ints(t, static_cast<int64_t>(rows.size()) * width,
                                 rng, 20);
      auto data = dev->allocate(table.nbytes());
      REQUIRE(data);
      REQUIRE(!dev->upload(*data, table));
      row_update u;
      u.op = op;
      u.type = t;
      u.data = *data;
      u.row_elems = width;
      u.rows = rows;
      u.y = y.raw();
      auto at = apply_row_update(dev.get(), u);
      REQUIRE(at);
      CHECK(*at == -1);
      auto want = table;
      host::scatter_apply(op, t, want.mutable_raw(), width, rows, y.raw(), 0,
                          y.size());
      auto got = dev->download(*data, t, table.shape());
      REQUIRE(got);
      std::string why;
      CHECK(same_values(*got, want, &why));
      dev->release(*data);
    }
  }
}
