// Replica steps working where the components live (docs/cuda.md): device
// pointers, the replica's stream, updates from device memory. The same
// tests run on host replicas (semantics_tests) and on GPUs (the gpu-labelled
// build of these sources), so they use no CUDA code: device memory is only
// passed back to varsync, never dereferenced here.

#include "fixture.hpp"

using namespace vs_test;

namespace {

std::vector<double> values_of(const tensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.size(); ++i)
    out.push_back(t.as_double(i));
  return out;
}

} // namespace

TEST_CASE("steps get device views of their components and the replica's "
          "stream") {
  auto s = make_strategy(2);
  auto local = make_var(s, "local", tensor::from_list<float>({1, 2, 3}),
                        synchronization::on_read, aggregation::sum);
  auto w = make_var(s, "w", tensor::zeros(dtype::float32, {3}),
                    synchronization::on_write, aggregation::sum);
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    auto dv = VS_VALUE_IN_STEP(ctx.device_pointer(local));
    if (dv.type != dtype::float32 || dv.size != 3 || dv.shape == nullptr
        || *dv.shape != tensor_shape{3} || dv.data == nullptr)
      throw std::runtime_error("device_pointer: wrong view");
    if (dv.device != ctx.device())
      throw std::runtime_error("device_pointer: wrong device");
    if (dv.as<float>() == nullptr || dv.as<double>() != nullptr)
      throw std::runtime_error("device_view::as: width not checked");
    const bool host = ctx.device().kind == device_kind::host;
    if (dv.host_accessible() != host)
      throw std::runtime_error("device_view::host_accessible");
    // Host replicas: no stream, and the view is the component itself.
    if (host && (ctx.stream() || dv.data != VS_VALUE_IN_STEP(ctx.read(local)).data))
      throw std::runtime_error("host replica: stream or view mismatch");
    if (!host && !ctx.stream())
      throw std::runtime_error("device replica without a stream");
    // ON_WRITE: the contribution is taken when the call is made.
    VS_STEP_OK(ctx.update_from_device(w, update_op::assign_add, dv.data));
    // ON_READ: applied at once, in place (y aliases the component).
    VS_STEP_OK(ctx.update_from_device(local, update_op::assign_add, dv.data));
  }));
  CHECK(values_of(VS_VALUE(s.read(w))) == std::vector<double>{2, 4, 6});
  CHECK(all_components_equal(s, w));
  for (auto& c : VS_VALUE(s.local_values(local)))
    CHECK(values_of(c) == std::vector<double>{2, 4, 6});
  CHECK(values_of(VS_VALUE(s.read(local))) == std::vector<double>{4, 8, 12});
}

TEST_CASE("update_from_device and device_pointer validate their "
          "arguments before anything changes") {
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::scalar<int64_t>(5),
                    synchronization::on_write, aggregation::sum);
  auto before = take_snapshot(s);
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    auto e1 = ctx.update_from_device(w, update_op::assign, nullptr);
    auto e2 = ctx.update_from_device(variable{}, update_op::assign, nullptr);
    auto e3 = ctx.device_pointer(variable{});
    if (!has_code(e1, errc::invalid_argument)
        || !has_code(e2, errc::invalid_argument) || e3
        || !has_code(e3.error(), errc::invalid_argument))
      throw std::runtime_error("expected invalid_argument three times");
  }));
  CHECK(same(before, take_snapshot(s)));
}

TEST_CASE("the strategy names its collective") {
  auto s = make_strategy(2);
  auto stats = VS_VALUE(s.stats());
  CHECK_FALSE(stats.collective.empty());
  CHECK(s.description().find(stats.collective) != std::string::npos);
  bool any_gpu = false;
  for (auto& d : s.devices())
    any_gpu = any_gpu || d.rfind("cuda:", 0) == 0;
  if (!any_gpu)
    CHECK(stats.collective.find("host one-pass") != std::string::npos);
  else
    CHECK(stats.collective.find("host one-pass") == std::string::npos);
}
