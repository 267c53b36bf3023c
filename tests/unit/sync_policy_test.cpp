// The per-mode rules that live in the policies (sync/*_policy.hpp) and the
// step rule of sync/policy/step_rules.hpp, checked directly; the strategy-level
// tests (K1, K6, W6, W7) check their effect.
#include <catch2/catch.hpp>

#include <string>

#include "sync/policy/step_rules.hpp"
#include "sync/policy/sync_policy.hpp"
#include "varsync/error.hpp"

using namespace varsync;

namespace {

variable_info info_of(synchronization sync, aggregation agg) {
  variable_info info;
  info.name = "v";
  info.sync = sync;
  info.agg = agg;
  return info;
}

} // namespace

TEST_CASE("policies: mirrored, checkpoint layout and survivor rule per mode") {
  const aggregation aggs[] = {aggregation::none, aggregation::sum,
                              aggregation::mean,
                              aggregation::only_first_replica};
  for (auto agg : aggs) {
    INFO("aggregation " << to_string(agg));
    auto w = info_of(synchronization::on_write, agg);
    auto& on_write = policy_for(synchronization::on_write);
    CHECK(on_write.mirrored());
    CHECK(on_write.checkpoint_layout(w) == checkpoint_entries::one_value);
    CHECK(on_write.survivors(w).kind == survivor_rule::any_component);

    auto n = info_of(synchronization::none, agg);
    auto& none = policy_for(synchronization::none);
    CHECK_FALSE(none.mirrored());
    CHECK(none.checkpoint_layout(n) == checkpoint_entries::per_component);

    auto r = info_of(synchronization::on_read, agg);
    auto& on_read = policy_for(synchronization::on_read);
    CHECK_FALSE(on_read.mirrored());
    CHECK(on_read.checkpoint_layout(r)
          == (agg == aggregation::none ? checkpoint_entries::per_component
                                       : checkpoint_entries::one_value));
  }
  auto& on_read = policy_for(synchronization::on_read);
  CHECK(on_read.survivors(info_of(synchronization::on_read,
                                  aggregation::only_first_replica))
          .kind
        == survivor_rule::component_0);
  auto sum = on_read.survivors(info_of(synchronization::on_read,
                                       aggregation::sum));
  CHECK(sum.kind == survivor_rule::aggregate);
  CHECK(sum.op == reduce_op::sum);
  auto mean = on_read.survivors(info_of(synchronization::on_read,
                                        aggregation::mean));
  CHECK(mean.kind == survivor_rule::aggregate);
  CHECK(mean.op == reduce_op::mean);
}

TEST_CASE("W6: check_same_updates names the first difference between replicas") {
  auto name_of = [](uint64_t id) { return "'v" + std::to_string(id) + "'"; };
  auto report = [](std::vector<std::pair<uint64_t, update_op>> ups) {
    step_report r;
    for (auto& [id, op] : ups)
      r.updates.push_back({id, op, tensor{}});
    return r;
  };
  using u = update_op;
  CHECK_FALSE(check_same_updates({}, name_of));
  CHECK_FALSE(check_same_updates(
    {report({{1, u::assign_add}, {2, u::assign}}),
     report({{1, u::assign_add}, {2, u::assign}})},
    name_of));
  auto op_differs = check_same_updates(
    {report({{1, u::assign_add}}), report({{1, u::assign_sub}})}, name_of);
  CHECK(has_code(op_differs, errc::mismatched_replica_updates));
  CHECK(message_of(op_differs).find("replica 1 issued assign_sub on 'v1'")
        != std::string::npos);
  auto variable_differs = check_same_updates(
    {report({{1, u::assign}}), report({{1, u::assign}}),
     report({{3, u::assign}})},
    name_of);
  CHECK(message_of(variable_differs).find("replica 2 issued assign on 'v3'")
        != std::string::npos);
  auto count_differs = check_same_updates(
    {report({{1, u::assign}}), report({{1, u::assign}, {1, u::assign}})},
    name_of);
  CHECK(has_code(count_differs, errc::mismatched_replica_updates));
  CHECK(message_of(count_differs).find("replica 1 issued 2")
        != std::string::npos);
}
