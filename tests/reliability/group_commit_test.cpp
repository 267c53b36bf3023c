// W8 / V2 with group commit: cross-replica writes that queue behind a slow
// write leave together, one message per replica, and keep their order, their
// own outcomes and their own deadlines. Replica 1 answers late so that the
// writes queue (fault injection, deterministic).

#include "../semantics/fixture.hpp"

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <utility>

#include "varsync/ext/testing.hpp"

using namespace vs_test;

namespace {

strategy make_delayed(int replicas, std::vector<replica_fault> faults) {
  return make_strategy_with(replicas, {}, std::move(faults));
}

// Async outcomes, in the order the calls were made.
struct outcomes {
  std::mutex mx;
  std::vector<caf::error> errors;
  std::vector<std::promise<void>> done;
  std::atomic<int> answered{0};
  explicit outcomes(size_t n) : errors(n), done(n) {}
  done_callback at(size_t k) {
    return [this, k](caf::error err) {
      {
        std::lock_guard<std::mutex> guard{mx};
        errors[k] = std::move(err);
      }
      ++answered;
      done[k].set_value();
    };
  }
  void wait() {
    for (auto& p : done)
      p.get_future().wait();
  }
};

// {writes sent, groups sent} (group commit's metrics).
std::pair<uint64_t, uint64_t> write_counts(const strategy& s) {
  auto m = s.metrics();
  REQUIRE(m);
  return {m->writes_sent, m->write_groups};
}

} // namespace

TEST_CASE("W8: writes queued behind a slow write leave as one group, in "
          "order, each with its own outcome", "[one-process]") {
  // Replica 1 answers late from its 4th operation on (1-3: the creations).
  auto s = make_delayed(2, {delay_replica(1, 200ms, 4)});
  auto w = make_var(s, "w", tensor::scalar<float>(0),
                    synchronization::on_write, aggregation::sum);
  auto r = make_var(s, "r", tensor::scalar<float>(0),
                    synchronization::on_read, aggregation::sum);
  auto c = make_var(s, "c", tensor::scalar<int32_t>(1000),
                    synchronization::on_read, aggregation::sum);
  auto c_before = components(s, c);
  REQUIRE(c_before[0] > 0);
  auto [writes, groups] = write_counts(s);
  auto as = s.async();
  outcomes out{6};
  as.assign(w, 1.0, out.at(0)); // leaves alone, confirmed 200 ms later
  std::this_thread::sleep_for(20ms); // (calls that arrive together leave
                                     // together)
  as.assign(w, 2.0, out.at(1)); // the rest queue behind it
  // ON_READ(SUM) assign_add goes to component 0 alone, where it overflows.
  as.assign_add(c, tensor::scalar<int32_t>(2147483647), out.at(2));
  as.assign(r, 10.0, out.at(3)); // split over the components (R4)
  as.assign(w, 3.0, out.at(4));
  as.assign_add(w, 4.0, out.at(5));
  out.wait();
  for (size_t k : {0, 1, 3, 4, 5}) {
    INFO("write " << k << ": " << describe(out.errors[k]));
    CHECK(!out.errors[k]);
  }
  VS_CHECK_CODE(out.errors[2], overflow);
  CHECK(message_of(out.errors[2]).find("'c'") != std::string::npos);
  // One order on every replica: 1, 2, 3, then + 4.
  CHECK(components(s, w) == std::vector<double>{7, 7});
  auto rc = components(s, r);
  CHECK(rc[0] + rc[1] == 10);
  CHECK(components(s, c) == c_before); // the failed write changed nothing
  auto [writes_after, groups_after] = write_counts(s);
  CHECK(writes_after - writes == 6);
  CHECK(groups_after - groups == 2);
}

TEST_CASE("V2: a queued write whose deadline passes is committed_late at "
          "its deadline and still applied once, in its place",
          "[one-process]") {
  auto s = make_delayed(2, {delay_replica(1, 400ms, 2)});
  auto w = make_var(s, "w", tensor::scalar<float>(0),
                    synchronization::on_write, aggregation::sum);
  outcomes out{2};
  s.async().assign(w, 1.0, out.at(0));
  std::this_thread::sleep_for(20ms); // in flight: the next one queues
  auto err = s.with_timeout(100ms).assign(w, 5.0);
  // Answered at its deadline, not at the replica's pace: the slow write it
  // queued behind is not confirmed yet.
  CHECK(out.answered.load() == 0);
  INFO(describe(err));
  VS_CHECK_CODE(err, committed_late);
  CHECK(message_of(err).find("queued behind") != std::string::npos);
  s.async().assign_add(w, 1.0, out.at(1));
  out.wait();
  CHECK(!out.errors[0]);
  CHECK(!out.errors[1]);
  CHECK(components(s, w) == std::vector<double>{6, 6});
}

TEST_CASE("W8: a read or a destroy issued behind queued writes sees every "
          "one of them", "[one-process]") {
  auto s = make_delayed(2, {delay_replica(1, 150ms, 3)});
  auto w = make_var(s, "w", tensor::scalar<float>(0),
                    synchronization::on_write, aggregation::sum);
  auto v = make_var(s, "v", tensor::scalar<float>(0),
                    synchronization::on_write, aggregation::sum);
  auto as = s.async();
  outcomes out{4};
  as.assign(w, 1.0, out.at(0));
  as.assign(w, 2.0, out.at(1));
  as.assign(v, 3.0, out.at(2));
  std::promise<caf::expected<tensor>> read;
  as.read(w, [&](caf::expected<tensor> x) { read.set_value(std::move(x)); });
  as.destroy(v, out.at(3));
  out.wait();
  for (auto& e : out.errors)
    CHECK(!e);
  auto x = read.get_future().get();
  REQUIRE(x);
  CHECK(x->item<float>() == 2.0f);
  CHECK(components(s, w) == std::vector<double>{2, 2});
  CHECK(!s.lookup("v"));
}

TEST_CASE("V2: a replica that fails while a group is in flight fails each "
          "write of the group with replica_failed, the others applied them",
          "[one-process]") {
  // Replica 1 is slow from its 2nd operation; replica 2 fails at its 4th:
  // the first write is its 2nd, the group of three brings it to 5.
  auto s = make_delayed(3, {delay_replica(1, 150ms, 2),
                            fail_replica_at(2, 4, "injected in a group")});
  auto w = make_var(s, "w", tensor::scalar<float>(0),
                    synchronization::on_write, aggregation::sum);
  auto as = s.async();
  outcomes out{4};
  as.assign(w, 1.0, out.at(0));
  std::this_thread::sleep_for(20ms); // in flight: the next ones queue
  as.assign(w, 2.0, out.at(1));
  as.assign_add(w, 3.0, out.at(2));
  as.assign_add(w, 4.0, out.at(3));
  out.wait();
  CHECK(!out.errors[0]);
  for (size_t k = 1; k < 4; ++k) {
    INFO(describe(out.errors[k]));
    VS_CHECK_CODE(out.errors[k], replica_failed);
  }
  auto survivors = s.survivor_values(w);
  REQUIRE(survivors);
  REQUIRE(survivors->size() == 3);
  CHECK(!(*survivors)[2]);
  CHECK((*survivors)[0]->item<float>() == 9.0f);
  CHECK((*survivors)[1]->item<float>() == 9.0f);
}
