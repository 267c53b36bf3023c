// Started by varsync-run -np 2: one strategy over two processes of one host
// replica each; exits 0 only if the step's MEAN and the ON_READ SUM cover
// both processes.
#include <cstdio>

#include <varsync/varsync.hpp>

int main() {
  auto cluster = varsync::cluster_from_environment();
  if (!cluster || !*cluster) {
    std::fprintf(stderr, "no cluster in the environment\n");
    return 1;
  }
  varsync::strategy_options options;
  options.devices = {"cpu:0"};
  options.cluster = **cluster;
  auto s = varsync::strategy::create(options);
  if (!s) {
    std::fprintf(stderr, "create: %s\n", varsync::describe(s.error()).c_str());
    return 1;
  }
  auto w = s->create_variable("w", varsync::tensor::scalar<float>(1.0f),
                              varsync::synchronization::on_write,
                              varsync::aggregation::mean);
  auto hits = s->create_variable("hits", varsync::tensor::scalar<int64_t>(0),
                                 varsync::synchronization::on_read,
                                 varsync::aggregation::sum);
  if (!w || !hits)
    return 1;
  // Replicas 0 and 1 contribute 1 and 3: their mean, 2, is added to 1.
  auto err = s->run([&](varsync::replica_context& ctx) {
    (void) ctx.assign_add(*w, 1.0 + 2.0 * ctx.replica_id());
    (void) ctx.assign_add(*hits, 5.0);
  });
  auto value = s->read(*w);
  auto total = s->read(*hits);
  bool ok = !err && value && total && s->num_replicas() == 2
            && value->to_vector<float>()[0] == 3.0f
            && total->to_vector<int64_t>()[0] == 10;
  std::printf("process %d: w %g, hits %lld: %s\n", s->process_rank(),
              value ? double(value->to_vector<float>()[0]) : -1.0,
              total ? (long long) total->to_vector<int64_t>()[0] : -1LL,
              ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
