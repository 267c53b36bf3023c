// A consumer of an installed (or add_subdirectory'd) varsync: two host
// replicas, an ON_READ + SUM counter and an ON_WRITE value; exits 0 only if
// every value is what the rule table says.
#include <cstdio>

#include <varsync/varsync.hpp>
#include <varsync/version.hpp>

int main() {
  varsync::strategy_options options;
  options.devices = {"cpu:0", "cpu:1"};
  auto s = varsync::strategy::create(options);
  if (!s) {
    std::fprintf(stderr, "create: %s\n", varsync::describe(s.error()).c_str());
    return 1;
  }
  auto hits = s->create_variable("hits", varsync::tensor::scalar<int64_t>(0),
                                 varsync::synchronization::on_read,
                                 varsync::aggregation::sum);
  auto w = s->create_variable("w", varsync::tensor::scalar<float>(1.0f),
                              varsync::synchronization::on_write,
                              varsync::aggregation::mean);
  if (!hits || !w)
    return 1;
  // R4: 7 split over 2 replicas as 4 + 3; the sum reads back 7.
  if (auto err = s->assign(*hits, 7.0))
    return 1;
  auto parts = s->local_values(*hits);
  auto total = s->read(*hits);
  // W4 (MEAN): contributions 1 and 3 add their mean, 2, to 1.
  auto step = s->run([&](varsync::replica_context& ctx) {
    (void) ctx.assign_add(*w, 1.0 + 2.0 * ctx.replica_id());
  });
  auto value = s->read(*w);
  if (!parts || !total || step || !value)
    return 1;
  auto a = (*parts)[0].as_double(), b = (*parts)[1].as_double();
  std::printf("varsync %s: hits %g + %g = %g, w = %g\n", VARSYNC_VERSION_STRING,
              a, b, total->as_double(), value->as_double());
  return (a == 4 && b == 3 && total->as_double() == 7 && value->as_double() == 3
          && VARSYNC_VERSION >= 100)
           ? 0
           : 1;
}
