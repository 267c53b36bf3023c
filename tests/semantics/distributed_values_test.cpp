#include "fixture.hpp"

using namespace vs_test;

namespace {

per_replica<tensor> floats(std::vector<std::vector<float>> rows) {
  std::vector<tensor> values;
  for (auto& row : rows)
    values.push_back(tensor::from_vector<float>(
      {static_cast<int64_t>(row.size())}, row));
  return per_replica<tensor>{std::move(values)};
}

} // namespace

TEST_CASE("D1: per_replica holds one value per replica in replica order") {
  auto s = make_strategy(4);
  auto built = per_replica<int>::from_function(4, [](int r) { return r * r; });
  CHECK(built.values() == std::vector<int>{0, 1, 4, 9});
  auto returned = VS_VALUE(
    s.run([](replica_context& ctx) { return ctx.replica_id() * 10; }));
  CHECK(returned.values() == mine(s, std::vector<int>{0, 10, 20, 30}));
}

TEST_CASE("D2: mirrored holds one value equal on every replica") {
  auto s = make_strategy(3);
  // Across processes each passes its own replicas' values (row P7).
  auto m = VS_VALUE(s.all_reduce(
    reduce_op::sum, floats(mine(s, std::vector<std::vector<float>>{
                                     {1}, {2}, {3}}))));
  const auto n = static_cast<size_t>(s.num_replicas());
  CHECK(m.num_replicas() == n);
  for (size_t r = 0; r < n; ++r)
    CHECK(m[r].bitwise_equal(m.value()));
  CHECK(m.value().to_vector<float>() == std::vector<float>{6});
  CHECK_THROWS(m[n]);
}

TEST_CASE("D3: reduce works elementwise across replicas and checks shapes and "
          "dtypes") {
  auto s = make_strategy(3);
  auto values = floats({{1, -5}, {2, 7}, {6, 1}});
  if (s.num_processes() > 1) {
    // P7: the values hold this process's replicas only.
    VS_CHECK_CODE(error_of(s.reduce(reduce_op::sum, values)),
                  invalid_argument);
    return;
  }
  CHECK(VS_VALUE(s.reduce(reduce_op::sum, values)).to_vector<float>()
        == std::vector<float>{9, 3});
  CHECK(VS_VALUE(s.reduce(reduce_op::mean, values)).to_vector<float>()
        == std::vector<float>{3, 1});
  CHECK(VS_VALUE(s.reduce(reduce_op::min, values)).to_vector<float>()
        == std::vector<float>{1, -5});
  CHECK(VS_VALUE(s.reduce(reduce_op::max, values)).to_vector<float>()
        == std::vector<float>{6, 7});
  CHECK(VS_VALUE(s.reduce(reduce_op::prod, values)).to_vector<float>()
        == std::vector<float>{12, -35});
  VS_CHECK_CODE(error_of(s.reduce(reduce_op::sum, floats({{1, 2}, {3}, {4}}))),
                shape_mismatch);
  per_replica<tensor> mixed{{tensor::scalar<float>(1), tensor::scalar<double>(1),
                             tensor::scalar<float>(1)}};
  VS_CHECK_CODE(error_of(s.reduce(reduce_op::sum, mixed)), dtype_mismatch);
  VS_CHECK_CODE(error_of(s.reduce(reduce_op::sum, floats({{1}, {2}}))),
                invalid_argument); // wrong replica count
}

TEST_CASE("D4: reduce along an axis gives the exact global mean for uneven "
          "batches", "[one-process]") {
  auto s = make_strategy(2);
  // Replica 0 saw 3 examples, replica 1 saw 1: the mean is over all 4.
  auto batches = floats({{1, 2, 3}, {10}});
  CHECK(VS_VALUE(s.reduce(reduce_op::mean, batches, 0)).as_double(0) == 4.0);
  CHECK(VS_VALUE(s.reduce(reduce_op::sum, batches, 0)).as_double(0) == 16.0);
  CHECK(VS_VALUE(s.reduce(reduce_op::max, batches, -1)).as_double(0) == 10.0);
  // Rank 2: [batch, 2] per replica, reduced over the batch axis.
  per_replica<tensor> rows{
    {tensor::from_vector<double>({2, 2}, {1, 2, 3, 4}),
     tensor::from_vector<double>({1, 2}, {5, 6})}};
  CHECK(VS_VALUE(s.reduce(reduce_op::mean, rows, 0)).to_vector<double>()
        == std::vector<double>{3, 4});
  VS_CHECK_CODE(error_of(s.reduce(reduce_op::sum, batches, 1)),
                invalid_argument);
  VS_CHECK_CODE(error_of(s.reduce(reduce_op::sum, batches, -2)),
                invalid_argument);
}

TEST_CASE("D5: reduce of a mirrored value: sum is N·x, mean is x (TF "
          "differs)") {
  auto s = make_strategy(4);
  mirrored<tensor> m{tensor::from_vector<float>({2}, {1.5f, -2}), 4};
  CHECK(VS_VALUE(s.reduce(reduce_op::sum, m)).to_vector<float>()
        == std::vector<float>{6, -8});
  CHECK(VS_VALUE(s.reduce(reduce_op::mean, m)).bitwise_equal(m.value()));
  mirrored<tensor> wrong{tensor::scalar<float>(1), 3};
  VS_CHECK_CODE(error_of(s.reduce(reduce_op::sum, wrong)), invalid_argument);
}

TEST_CASE("D6: the mean of integer values is float64", "[one-process]") {
  auto s = make_strategy(2);
  per_replica<tensor> ints{{tensor::scalar<int32_t>(1),
                            tensor::scalar<int32_t>(2)}};
  auto mean = VS_VALUE(s.reduce(reduce_op::mean, ints));
  CHECK(mean.type() == dtype::float64);
  CHECK(mean.as_double(0) == 1.5);
  auto sum = VS_VALUE(s.reduce(reduce_op::sum, ints));
  CHECK(sum.type() == dtype::int32);
  auto all = VS_VALUE(s.all_reduce(reduce_op::mean, ints));
  CHECK(all.value().type() == dtype::float64);
  CHECK(all.value().as_double(0) == 1.5);
  mirrored<tensor> m{tensor::scalar<int64_t>(3), 2};
  auto mm = VS_VALUE(s.reduce(reduce_op::mean, m));
  CHECK(mm.type() == dtype::float64);
  CHECK(mm.as_double(0) == 3.0);
}

TEST_CASE("D7: gather concatenates along an axis") {
  auto s = make_strategy(3);
  if (s.num_processes() > 1) {
    // P7: the values hold this process's replicas only.
    VS_CHECK_CODE(error_of(s.gather(floats({{1, 2}, {3}, {4, 5, 6}}), 0)),
                  invalid_argument);
    return;
  }
  auto g = VS_VALUE(s.gather(floats({{1, 2}, {3}, {4, 5, 6}}), 0));
  CHECK(g.shape() == tensor_shape{6});
  CHECK(g.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  per_replica<tensor> rows{{tensor::from_vector<int32_t>({2, 1}, {1, 2}),
                            tensor::from_vector<int32_t>({2, 2}, {3, 4, 5, 6}),
                            tensor::from_vector<int32_t>({2, 1}, {7, 8})}};
  auto h = VS_VALUE(s.gather(rows, 1));
  CHECK(h.shape() == tensor_shape{2, 4});
  CHECK(h.to_vector<int32_t>()
        == std::vector<int32_t>{1, 3, 4, 7, 2, 5, 6, 8});
  VS_CHECK_CODE(error_of(s.gather(rows, 0)), shape_mismatch);
  per_replica<tensor> scalars{{tensor::scalar<float>(1),
                               tensor::scalar<float>(2),
                               tensor::scalar<float>(3)}};
  VS_CHECK_CODE(error_of(s.gather(scalars, 0)), invalid_argument);
  VS_CHECK_CODE(error_of(s.gather(rows, 2)), invalid_argument);
}

TEST_CASE("D8: all_reduce yields a mirrored value, batch_all_reduce fuses "
          "many tensors into one collective", "[one-process]") {
  auto s = make_strategy(4);
  auto grads = VS_VALUE(s.run([](replica_context& ctx) {
    return tensor::from_vector<float>({2}, {1.0f * ctx.replica_id(), 1});
  }));
  auto m = VS_VALUE(s.all_reduce(reduce_op::mean, grads));
  CHECK(m.value().to_vector<float>() == std::vector<float>{1.5f, 1});
  std::vector<per_replica<tensor>> batch;
  for (int k = 0; k < 50; ++k)
    batch.push_back(per_replica<tensor>::from_function(4, [k](int r) {
      return tensor::from_vector<double>({3}, {1.0 * r, 1.0 * k, 1});
    }));
  auto before = VS_VALUE(s.stats()).collectives_run;
  auto out = VS_VALUE(s.batch_all_reduce(reduce_op::sum, batch));
  CHECK(VS_VALUE(s.stats()).collectives_run == before + 1);
  REQUIRE(out.size() == 50);
  for (int k = 0; k < 50; ++k)
    CHECK(out[static_cast<size_t>(k)].value().to_vector<double>()
          == std::vector<double>{6, 4.0 * k, 4});
  auto bad = batch;
  bad[7] = per_replica<tensor>{{tensor::scalar<float>(1),
                                tensor::scalar<float>(1),
                                tensor::scalar<double>(1),
                                tensor::scalar<float>(1)}};
  VS_CHECK_CODE(error_of(s.batch_all_reduce(reduce_op::sum, bad)),
                dtype_mismatch);
}

TEST_CASE("W4: the on_write updates of one step cost one fused collective") {
  auto s = make_strategy(4);
  std::vector<variable> vars;
  for (int k = 0; k < 20; ++k)
    vars.push_back(make_var(s, "v" + std::to_string(k),
                            tensor::zeros(dtype::float32, {16}),
                            synchronization::on_write, aggregation::sum));
  auto before = VS_VALUE(s.stats()).collectives_run;
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    for (auto& v : vars)
      VS_STEP_OK(ctx.assign_add(v, tensor::filled(dtype::float32, {16}, 1)));
  }));
  CHECK(VS_VALUE(s.stats()).collectives_run == before + 1);
  for (auto& v : vars)
    CHECK(VS_VALUE(s.read(v)).to_vector<float>() == std::vector<float>(16, 4));
}
