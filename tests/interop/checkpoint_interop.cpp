// K4 interop helper: `write PATH` saves a strategy with variables of several
// dtypes and synchronizations; `check PATH` restores a file written by
// Python's safetensors and checks the values. Exit 0 on success.

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "varsync/checkpoint.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "checkpoint_interop: %s\n", what.c_str());
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 3)
    return fail("usage: checkpoint_interop write|check PATH");
  std::string mode = argv[1];
  std::string path = argv[2];
  strategy_options options;
  options.devices = {"cpu:0", "cpu:1"};
  options.scheduler_threads = 2;
  auto s = strategy::create(options);
  if (!s)
    return fail(describe(s.error()));
  auto half = tensor::filled(dtype::float16, {2}, 0.5);
  store_double(dtype::float16, half.mutable_raw(), 1, -2.0);
  auto weights = s->create_variable(
    "weights", tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6}),
    synchronization::on_write, aggregation::mean);
  auto hits = s->create_variable("hits", tensor::scalar<int64_t>(0),
                                 synchronization::on_read, aggregation::sum);
  auto loss = s->create_variable("loss", tensor::scalar<double>(0),
                                 synchronization::on_read, aggregation::mean);
  auto scratch = s->create_variable("scratch", tensor::from_vector<int32_t>({1}, {0}),
                                    synchronization::none);
  auto h = s->create_variable("half", half, synchronization::on_write,
                              aggregation::mean);
  for (auto* v : {&weights, &hits, &loss, &scratch, &h})
    if (!*v)
      return fail(describe(v->error()));
  if (mode == "write") {
    std::vector<caf::error> errors(2);
    auto err = s->run([&](replica_context& ctx) {
      auto r = ctx.replica_id();
      auto& e = errors[static_cast<size_t>(r)];
      if (!e)
        e = ctx.assign(*hits, r == 0 ? 4.0 : 3.0);
      if (!e)
        e = ctx.assign(*loss, r == 0 ? 2.0 : 3.0);
      if (!e)
        e = ctx.assign(*scratch,
                       tensor::from_vector<int32_t>({1}, {r == 0 ? 10 : 20}));
    });
    if (err)
      return fail(describe(err));
    for (auto& e : errors)
      if (e)
        return fail(describe(e));
    if (auto e = save(*s, path))
      return fail(describe(e));
    return 0;
  }
  if (mode != "check")
    return fail("unknown mode " + mode);
  if (auto e = restore(*s, path))
    return fail(describe(e));
  auto expect = [&](const variable& v, std::vector<std::vector<double>> want) {
    auto values = s->local_values(v);
    if (!values)
      return fail(describe(values.error()));
    for (size_t r = 0; r < want.size(); ++r)
      if ((*values)[r].to_vector<double>() != want[r])
        return fail("variable '" + v.name() + "' component "
                    + std::to_string(r) + " is " + (*values)[r].debug_string());
    return 0;
  };
  int rc = 0;
  rc |= expect(*weights, {{6, 5, 4, 3, 2, 1}, {6, 5, 4, 3, 2, 1}});
  rc |= expect(*hits, {{5}, {4}}); // 9 split exactly (R4)
  rc |= expect(*loss, {{-1.25}, {-1.25}});
  rc |= expect(*scratch, {{11}, {21}});
  rc |= expect(*h, {{1.5, 4.0}, {1.5, 4.0}});
  if (rc == 0)
    std::printf("checkpoint_interop: check OK\n");
  return rc;
}
