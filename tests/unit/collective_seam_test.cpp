// The collective seam without actors: plans are values that name their data
// (they serialize, and refuse bytes they cannot mean), buffers bind what a
// plan holds, and the one-pass algorithm runs a plan slice by slice.

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "sync/collectives/collective_plan.hpp"
#include "sync/collectives/one_pass_shared_memory.hpp"
#include "varsync/error.hpp"

using namespace varsync;

namespace {

collective_plan sample_plan() {
  collective_plan plan;
  plan.num_replicas = 2;
  plan.cross_process = true;
  plan.total_replicas = 3;
  plan.description = "step: 'w' assign_add";
  plan.local_error = make_error(errc::timeout, "late here");
  auto& a = plan.add_item();
  a.variable_id = 7;
  a.name = "w";
  a.type = dtype::float64;
  a.count = 2;
  a.rop = reduce_op::mean;
  a.uop = update_op::assign_add;
  a.mirrored = true;
  a.source = collective_source::contributions;
  a.target = collective_target::components;
  a.contributions = {tensor::from_list<double>({1, 2}),
                     tensor::from_list<double>({3, 4})};
  a.staged = {0, 42};
  auto& b = plan.add_item();
  b.variable_id = 9;
  b.type = dtype::int32;
  b.count = 3;
  b.gather = true;
  b.first_only = true;
  b.require_equal = true;
  b.source = collective_source::components;
  b.target = collective_target::output;
  b.result = tensor::from_list<int32_t>({5, 6, 7});
  return plan;
}

struct serialization {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};

  std::vector<char> save(collective_plan plan) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    REQUIRE_FALSE(sink(plan));
    return buf;
  }

  caf::error load(const std::vector<char>& buf, collective_plan& out) {
    caf::binary_deserializer source{sys, buf.data(), buf.size()};
    return source(out);
  }
};

} // namespace

TEST_CASE("collective seam: a plan is a value that round-trips through "
          "serialization, every field intact") {
  serialization s;
  auto buf = s.save(sample_plan());
  collective_plan back;
  REQUIRE_FALSE(s.load(buf, back));
  auto want = sample_plan();
  CHECK(back.num_replicas == 2);
  CHECK(back.cross_process);
  CHECK(back.total_replicas == 3);
  CHECK(back.description == want.description);
  CHECK(has_code(back.local_error, errc::timeout));
  REQUIRE(back.items.size() == 2);
  auto& a = back.items[0];
  CHECK(a.variable_id == 7);
  CHECK(a.name == "w");
  CHECK(a.type == dtype::float64);
  CHECK(a.count == 2);
  CHECK(a.rop == reduce_op::mean);
  CHECK(a.uop == update_op::assign_add);
  CHECK(a.mirrored);
  CHECK(a.staged == std::vector<uint64_t>{0, 42});
  REQUIRE(a.contributions.size() == 2);
  CHECK(a.contributions[1].bitwise_equal(want.items[0].contributions[1]));
  auto& b = back.items[1];
  CHECK(b.gather);
  CHECK(b.first_only);
  CHECK(b.require_equal);
  CHECK(b.source == collective_source::components);
  CHECK(b.target == collective_target::output);
  CHECK(b.result.bitwise_equal(want.items[1].result));
}

TEST_CASE("collective seam: plan bytes that name an unknown operation or "
          "slots that do not match the replicas are refused") {
  serialization s;
  SECTION("an out-of-range target") {
    auto plan = sample_plan();
    plan.items[1].target = static_cast<collective_target>(9);
    auto buf = s.save(plan);
    collective_plan back;
    CHECK(s.load(buf, back));
  }
  SECTION("a staged list for another replica count") {
    auto plan = sample_plan();
    plan.items[0].staged.push_back(0);
    auto buf = s.save(plan);
    collective_plan back;
    CHECK(s.load(buf, back));
  }
  SECTION("a negative count") {
    auto plan = sample_plan();
    plan.items[0].count = -1;
    auto buf = s.save(plan);
    collective_plan back;
    CHECK(s.load(buf, back));
  }
}

TEST_CASE("collective seam: bind_plan_buffers binds the data the plan holds "
          "and leaves the replicas' memory to the replicas") {
  auto plan = sample_plan();
  auto b = bind_plan_buffers(plan);
  REQUIRE(b.items.size() == 2);
  auto& first = b.items[0];
  REQUIRE(first.inputs.size() == 2);
  CHECK(first.inputs[0] == plan.items[0].contributions[0].raw());
  CHECK(first.inputs[1] == nullptr); // staged: its replica binds it
  CHECK(first.components == std::vector<void*>{nullptr, nullptr});
  CHECK(first.output == nullptr);
  CHECK(b.items[1].output == plan.items[1].result.raw());
  CHECK(b.items[1].inputs == std::vector<const void*>{nullptr, nullptr});
  CHECK(b.ready_events.empty());
}

TEST_CASE("collective seam: the one-pass algorithm is run by the replicas, "
          "slice by slice, and gives the whole reduction") {
  auto one_pass = make_one_pass_shared_memory(3);
  CHECK(one_pass->workers() == collective_workers::replicas);
  CHECK_FALSE(one_pass->uses_staging_buffers());
  CHECK(one_pass->description().find("3 in-process replicas")
        != std::string::npos);
  constexpr int64_t n = 1000; // not a multiple of the slice granule
  std::vector<std::vector<float>> components(3, std::vector<float>(n, 1.f));
  collective_plan plan;
  plan.num_replicas = 3;
  auto& item = plan.add_item();
  item.type = dtype::float32;
  item.count = n;
  item.rop = reduce_op::sum;
  item.uop = update_op::assign_add;
  item.source = collective_source::contributions;
  item.target = collective_target::components;
  for (int r = 0; r < 3; ++r)
    item.contributions.push_back(tensor::from_vector<float>(
      {n}, std::vector<float>(n, static_cast<float>(r + 1))));
  auto b = bind_plan_buffers(plan);
  for (size_t r = 0; r < 3; ++r)
    b.items[0].components[r] = components[r].data();
  for (int w = 0; w < 3; ++w)
    REQUIRE_FALSE(one_pass->run(plan, b, w, 3));
  for (auto& c : components)
    CHECK(c == std::vector<float>(n, 7.f)); // 1 + (1 + 2 + 3)
}

TEST_CASE("collective seam: the one-pass algorithm fails an output whose "
          "integer sum does not fit (V4)") {
  auto one_pass = make_one_pass_shared_memory(2);
  constexpr int32_t max32 = std::numeric_limits<int32_t>::max();
  collective_plan plan;
  plan.num_replicas = 2;
  auto& item = plan.add_item();
  item.type = dtype::int32;
  item.count = 1;
  item.rop = reduce_op::sum;
  item.source = collective_source::contributions;
  item.target = collective_target::output;
  item.contributions = {tensor::from_list<int32_t>({max32}),
                        tensor::from_list<int32_t>({1})};
  item.result = tensor::empty(dtype::int32, {1});
  auto b = bind_plan_buffers(plan);
  auto err = one_pass->run(plan, b, 0, 1);
  CHECK(has_code(err, errc::overflow));
  CHECK(message_of(err).find("int32") != std::string::npos);
}
