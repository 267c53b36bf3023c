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
  const char* transport = std::getenv("VARSYNC_TEST_TRANSPORT");
  if (s.num_processes() > 1 && transport && std::string{transport} == "gloo")
    CHECK(stats.collective.find("gloo over TCP") != std::string::npos);
  else if (s.num_processes() > 1) // every process on this host
    CHECK(stats.collective.find("shared memory (one host)")
          != std::string::npos);
  else if (!any_gpu)
    CHECK(stats.collective.find("host one-pass") != std::string::npos);
  else
    CHECK(stats.collective.find("host one-pass") == std::string::npos);
}

// -- ON_WRITE contributions from device memory (W4 with the data on the
//    replica's device: staging buffers on GPUs, host tensors on cpu:K) -------

namespace {

/// [r+1, 2(r+1), 3(r+1)] as float32: replica r's contribution.
tensor contribution_of(int r) {
  const float k = static_cast<float>(r + 1);
  return tensor::from_list<float>({k, 2 * k, 3 * k});
}

} // namespace

TEST_CASE("W4: contribution buffers carry ON_WRITE contributions into the "
          "step's collective, with every aggregation") {
  for (int n : {1, 2, 3}) {
    INFO("replicas: " << n);
    auto s = make_strategy(n);
    auto sum = make_var(s, "sum", tensor::zeros(dtype::float32, {3}),
                        synchronization::on_write, aggregation::sum);
    auto mean = make_var(s, "mean", tensor::zeros(dtype::float32, {3}),
                         synchronization::on_write, aggregation::mean);
    auto first = make_var(s, "first", tensor::zeros(dtype::float32, {3}),
                          synchronization::on_write,
                          aggregation::only_first_replica);
    auto dbl = make_var(s, "dbl", tensor::zeros(dtype::float64, {3}),
                        synchronization::on_write, aggregation::sum);
    // Several steps: buffers are released and reused between them.
    const int steps = 5;
    for (int step = 0; step < steps; ++step) {
      VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
        auto x = contribution_of(ctx.replica_id());
        for (auto* v : {&sum, &mean, &first}) {
          auto buf = VS_VALUE_IN_STEP(ctx.contribution_buffer(*v));
          if (buf.size != 3 || buf.type != dtype::float32
              || buf.device != ctx.device() || buf.data == nullptr)
            throw std::runtime_error("contribution_buffer: wrong view");
          write_buffer(ctx, buf, x);
          VS_STEP_OK(ctx.update_from_device(*v, update_op::assign_add,
                                            buf.data));
        }
        // A buffer of the step's own (an ON_READ component here) is copied.
        auto buf = VS_VALUE_IN_STEP(ctx.contribution_buffer(dbl));
        write_buffer(ctx, buf, tensor::from_list<double>({1, 2, 3}));
        VS_STEP_OK(ctx.update_from_device(dbl, update_op::assign_add,
                                          buf.data));
      }));
    }
    // sum: steps * sum_r (r+1) * [1,2,3]; mean: steps * mean; first: replica 0.
    const double total = n * (n + 1) / 2.0;
    std::vector<double> want_sum, want_mean, want_first, want_dbl;
    for (double e : {1.0, 2.0, 3.0}) {
      want_sum.push_back(steps * total * e);
      want_mean.push_back(steps * total / n * e);
      want_first.push_back(steps * e);
      want_dbl.push_back(steps * n * e);
    }
    CHECK(values_of(VS_VALUE(s.read(sum))) == want_sum);
    CHECK(values_of(VS_VALUE(s.read(mean))) == want_mean);
    CHECK(values_of(VS_VALUE(s.read(first))) == want_first);
    CHECK(values_of(VS_VALUE(s.read(dbl))) == want_dbl);
    for (auto* v : {&sum, &mean, &first, &dbl})
      CHECK(all_components_equal(s, *v));
  }
}

TEST_CASE("W4: update_from_device copies a step's own buffer, so the step may "
          "overwrite it at once") {
  auto s = make_strategy(2);
  auto scratch = make_var(s, "scratch", tensor::zeros(dtype::float32, {3}),
                          synchronization::on_read, aggregation::sum);
  auto w = make_var(s, "w", tensor::zeros(dtype::float32, {3}),
                    synchronization::on_write, aggregation::sum);
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    auto dv = VS_VALUE_IN_STEP(ctx.device_pointer(scratch));
    write_buffer(ctx, dv, contribution_of(ctx.replica_id()));
    VS_STEP_OK(ctx.update_from_device(w, update_op::assign_add, dv.data));
    // Overwritten after the call: the contribution was taken at the call.
    write_buffer(ctx, dv, tensor::from_list<float>({100, 100, 100}));
    VS_STEP_OK(ctx.update_from_device(w, update_op::assign_sub, dv.data));
  }));
  CHECK(values_of(VS_VALUE(s.read(w))) == std::vector<double>{-197, -194, -191});
  CHECK(all_components_equal(s, w));
}

TEST_CASE("V2: contribution buffers: wrong variables fail, unused buffers and "
          "failed steps change nothing, and the next step works") {
  auto s = make_strategy(2);
  auto w = make_var(s, "w", tensor::zeros(dtype::float32, {3}),
                    synchronization::on_write, aggregation::sum);
  auto local = make_var(s, "local", tensor::zeros(dtype::float32, {3}),
                        synchronization::on_read, aggregation::sum);
  auto before = take_snapshot(s);
  // Not ON_WRITE, or no variable: invalid_argument; an unused buffer is fine.
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    auto a = ctx.contribution_buffer(local);
    auto b = ctx.contribution_buffer(variable{});
    if (a || !has_code(a.error(), errc::invalid_argument) || b
        || !has_code(b.error(), errc::invalid_argument))
      throw std::runtime_error("expected invalid_argument twice");
    if (message_of(a.error()).find("'local'") == std::string::npos)
      throw std::runtime_error("the error does not name the variable");
    VS_VALUE_IN_STEP(ctx.contribution_buffer(w)); // never used
  }));
  CHECK(same(before, take_snapshot(s)));
  // A buffer handed out for one variable is refused for another (its size
  // is the first one's); the step fails, nothing changes.
  auto w3 = make_var(s, "w3", tensor::zeros(dtype::float32, {5}),
                     synchronization::on_write, aggregation::sum);
  before = take_snapshot(s);
  auto crossed = s.run([&](replica_context& ctx) {
    auto buf = VS_VALUE_IN_STEP(ctx.contribution_buffer(w));
    auto e = ctx.update_from_device(w3, update_op::assign_add, buf.data);
    if (!has_code(e, errc::invalid_argument)
        || message_of(e).find("'w3'") == std::string::npos)
      throw std::runtime_error("expected invalid_argument naming 'w3'");
  });
  CHECK(has_code(crossed, errc::invalid_argument));
  CHECK(same(before, take_snapshot(s)));
  CHECK(same(before, take_snapshot(s)));
  // W6: replica 1 contributes to nothing: no update applies.
  auto r = s.run([&](replica_context& ctx) {
    if (ctx.replica_id() == 1)
      return;
    auto buf = VS_VALUE_IN_STEP(ctx.contribution_buffer(w));
    write_buffer(ctx, buf, contribution_of(0));
    VS_STEP_OK(ctx.update_from_device(w, update_op::assign_add, buf.data));
  });
  CHECK(has_code(r, errc::mismatched_replica_updates));
  CHECK(same(before, take_snapshot(s)));
  // A step that throws after contributing: nothing applied either.
  auto s2 = make_strategy(2, 20s, on_step_exception::fail_step);
  auto w2 = make_var(s2, "w2", tensor::zeros(dtype::float32, {3}),
                     synchronization::on_write, aggregation::sum);
  auto before2 = take_snapshot(s2);
  auto thrown = s2.run([&](replica_context& ctx) {
    auto buf = VS_VALUE_IN_STEP(ctx.contribution_buffer(w2));
    write_buffer(ctx, buf, contribution_of(ctx.replica_id()));
    VS_STEP_OK(ctx.update_from_device(w2, update_op::assign_add, buf.data));
    if (ctx.replica_id() == 1)
      throw std::runtime_error("after contributing");
  });
  CHECK(thrown);
  CHECK(same(before2, take_snapshot(s2)));
  // Both strategies go on normally.
  for (auto* p : {&s, &s2}) {
    auto& st = *p;
    auto& v = p == &s ? w : w2;
    VS_REQUIRE_OK(st.run([&](replica_context& ctx) {
      auto buf = VS_VALUE_IN_STEP(ctx.contribution_buffer(v));
      write_buffer(ctx, buf, contribution_of(ctx.replica_id()));
      VS_STEP_OK(ctx.update_from_device(v, update_op::assign_add, buf.data));
    }));
    CHECK(values_of(VS_VALUE(st.read(v))) == std::vector<double>{3, 6, 9});
    CHECK(all_components_equal(st, v));
  }
}

TEST_CASE("V4/W4: device contributions of integer variables and of "
          "aggregation none are checked before anything changes") {
  // Host replicas check them at enter; a collective of CUDA replicas in one
  // process checks them on the GPU, where they stay.
  auto s = make_strategy(2);
  auto counter = make_var(s, "counter",
                          tensor::from_list<int32_t>({2147483646, 0}),
                          synchronization::on_write, aggregation::sum);
  auto agreed = make_var(s, "agreed", tensor::zeros(dtype::float32, {3}),
                         synchronization::on_write, aggregation::none);
  auto before = take_snapshot(s);
  // 2147483646 + 1 + 1 overflows int32: nothing changes.
  auto r = s.run([&](replica_context& ctx) {
    auto buf = VS_VALUE_IN_STEP(ctx.contribution_buffer(counter));
    write_buffer(ctx, buf, tensor::from_list<int32_t>({1, 1}));
    VS_STEP_OK(ctx.update_from_device(counter, update_op::assign_add,
                                      buf.data));
  });
  CHECK(has_code(r, errc::overflow));
  CHECK(message_of(r).find("'counter'") != std::string::npos);
  CHECK(message_of(r).find("int32 at element 0") != std::string::npos);
  CHECK(same(before, take_snapshot(s)));
  // Aggregation none: different contributions are refused, equal ones apply.
  r = s.run([&](replica_context& ctx) {
    auto buf = VS_VALUE_IN_STEP(ctx.contribution_buffer(agreed));
    write_buffer(ctx, buf, contribution_of(ctx.replica_id()));
    VS_STEP_OK(ctx.update_from_device(agreed, update_op::assign, buf.data));
  });
  CHECK(has_code(r, errc::aggregation_required));
  CHECK(message_of(r).find("'agreed'") != std::string::npos);
  // Replica 1 differs (across processes: the process that holds it).
  CHECK((message_of(r).find("replica 1 contributed") != std::string::npos
         || message_of(r).find("process 1's differ") != std::string::npos));
  CHECK(same(before, take_snapshot(s)));
  VS_REQUIRE_OK(s.run([&](replica_context& ctx) {
    auto buf = VS_VALUE_IN_STEP(ctx.contribution_buffer(agreed));
    write_buffer(ctx, buf, contribution_of(0));
    VS_STEP_OK(ctx.update_from_device(agreed, update_op::assign, buf.data));
    auto cbuf = VS_VALUE_IN_STEP(ctx.contribution_buffer(counter));
    write_buffer(ctx, cbuf, tensor::from_list<int32_t>({-1, 5}));
    VS_STEP_OK(ctx.update_from_device(counter, update_op::assign_add,
                                      cbuf.data));
  }));
  CHECK(values_of(VS_VALUE(s.read(agreed))) == std::vector<double>{1, 2, 3});
  CHECK(values_of(VS_VALUE(s.read(counter)))
        == std::vector<double>{2147483644, 10});
  CHECK(all_components_equal(s, agreed));
  CHECK(all_components_equal(s, counter));
}
