// The collective across processes against a scripted process group: what
// the other process "sends" is written by the test, so that disagreement,
// failures elsewhere and hostile records are checked without processes.
// This process is rank 0 of 2 with one replica; the other process's data
// contributions are zeros (its all-reduce share) unless scripted.

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "devices/device.hpp"
#include "sync/collectives/across_processes.hpp"
#include "sync/collectives/staged_across_processes.hpp"
#include "varsync/error.hpp"

using namespace varsync;
using namespace varsync::cross_process_wire;

namespace {

struct scripted_group : data_transport {
  // What rank 1 contributes to the next all_gathers, in order.
  std::deque<std::vector<std::byte>> peer;
  int gathers = 0;
  // The group over this transport (not owned by it), no control plane.
  process_group pg{std::shared_ptr<data_transport>{std::shared_ptr<void>{},
                                                   this}};

  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string describe() const override { return "scripted"; }
  caf::error all_reduce(reduce_op, dtype, void*, int64_t) override {
    return {}; // rank 1 adds zeros
  }
  caf::error broadcast(void*, size_t, int) override { return {}; }
  caf::error all_gather(const void* in, void* out, size_t bytes) override {
    ++gathers;
    std::memcpy(out, in, bytes);
    auto* second = static_cast<std::byte*>(out) + bytes;
    if (peer.empty()) { // rank 1 agrees: it sends what rank 0 sent
      std::memcpy(second, in, bytes);
      return {};
    }
    auto next = std::move(peer.front());
    peer.pop_front();
    REQUIRE(next.size() == bytes);
    std::memcpy(second, next.data(), bytes);
    return {};
  }
};

template <class T>
std::vector<std::byte> bytes_of(const T& x) {
  std::vector<std::byte> out(sizeof(T));
  std::memcpy(out.data(), &x, sizeof(T));
  return out;
}

// The agreement round carries a record and a payload area.
std::vector<std::byte> agreement_bytes(const agreement_record& r,
                                       const void* payload = nullptr,
                                       size_t bytes = 0) {
  auto m = std::make_unique<agreement_message>();
  m->record = r;
  if (payload != nullptr)
    std::memcpy(m->payload, payload, bytes);
  return bytes_of(*m);
}

// A step across processes that adds the sum of one item's contributions to
// the components of `local` replicas here, of `total` in all.
collective_item& assign_add_step(collective_plan& plan, int local, int total,
                                 const std::string& name, dtype type,
                                 int64_t count) {
  plan.num_replicas = local;
  plan.cross_process = true;
  plan.total_replicas = total;
  plan.description = "step: '" + name + "' assign_add";
  auto& item = plan.add_item();
  item.name = name;
  item.type = type;
  item.count = count;
  item.rop = reduce_op::sum;
  item.uop = update_op::assign_add;
  item.source = collective_source::contributions;
  item.target = collective_target::components;
  return item;
}

// A step plan: one float32 sum item adding to this process's component.
struct step_fixture {
  float contribution[3] = {1, 2, 3};
  float component[3] = {10, 10, 10};
  collective_plan plan;
  collective_buffers buffers;

  step_fixture() {
    assign_add_step(plan, 1, 2, "w", dtype::float32, 3);
    buffers = bind_plan_buffers(plan);
    buffers.items[0].inputs[0] = contribution;
    buffers.items[0].components[0] = component;
  }

  bool unchanged() const {
    return component[0] == 10 && component[1] == 10 && component[2] == 10;
  }
};

// An int32 step (integers take the vote round): 1 added to a component of 5.
struct int_step {
  int32_t contribution = 1;
  int32_t component = 5;
  collective_plan plan;
  collective_buffers buffers;

  int_step(const int_step&) = delete; // the buffers point into it
  int_step() {
    assign_add_step(plan, 1, 2, "n", dtype::int32, 1);
    buffers = bind_plan_buffers(plan);
    buffers.items[0].inputs[0] = &contribution;
    buffers.items[0].components[0] = &component;
  }
};

} // namespace

TEST_CASE("cross-process collective: a small floating step is agreed, "
          "reduced and applied in one round") {
  step_fixture f;
  scripted_group g;
  // Process 1 agrees and contributes 100, 200, 300.
  agreement_record same;
  same.fingerprint = fingerprint_of(f.plan);
  float theirs[3] = {100, 200, 300};
  g.peer.push_back(agreement_bytes(same, theirs, sizeof(theirs)));
  REQUIRE(!run_cross_process(f.plan, f.buffers, g.pg, {1, 1}));
  CHECK(f.component[0] == 111);
  CHECK(f.component[2] == 313);
  CHECK(g.gathers == 1);
}

TEST_CASE("cross-process collective: a small step of float32 and float64 "
          "items lays each out aligned for its dtype") {
  step_fixture f;
  double contribution64[2] = {0.5, 1.5};
  double component64[2] = {1, 1};
  auto& item = f.plan.add_item();
  item.name = "d";
  item.type = dtype::float64;
  item.count = 2;
  item.rop = reduce_op::sum;
  item.uop = update_op::assign_add;
  item.source = collective_source::contributions;
  item.target = collective_target::components;
  f.buffers.items.push_back({{contribution64}, {component64}, nullptr});
  scripted_group g; // process 1 sends what process 0 sent: it agrees
  REQUIRE(!run_cross_process(f.plan, f.buffers, g.pg, {1, 1}));
  CHECK(f.component[1] == 14);  // 10 + 2 + 2
  CHECK(component64[0] == 2);   // 1 + 0.5 + 0.5
  CHECK(component64[1] == 4);   // 1 + 1.5 + 1.5
  CHECK(g.gathers == 1);
  // The float64 item starts at byte 16 of the payload, not 12 (UBSan
  // reports a misaligned access otherwise).
  CHECK(offsetof(agreement_message, payload) % 8 == 0);
}

TEST_CASE("cross-process collective: aggregation none with another value in "
          "another process is aggregation_required, nothing applied") {
  step_fixture f;
  f.plan.items[0].require_equal = true;
  f.plan.items[0].uop = update_op::assign;
  scripted_group g;
  agreement_record same;
  same.fingerprint = fingerprint_of(f.plan);
  float theirs[3] = {1, 2, 4};
  g.peer.push_back(agreement_bytes(same, theirs, sizeof(theirs)));
  auto err = run_cross_process(f.plan, f.buffers, g.pg, {1, 1});
  CHECK(has_code(err, errc::aggregation_required));
  CHECK(message_of(err).find("process 1") != std::string::npos);
  CHECK(f.unchanged());
}

TEST_CASE("cross-process collective: another operation elsewhere is "
          "mismatched_replica_updates naming the process, nothing applied") {
  step_fixture f;
  scripted_group g;
  agreement_record other;
  other.fingerprint = fingerprint_of(f.plan) + 1;
  std::strcpy(other.text, "step: 'b' assign_add");
  g.peer.push_back(agreement_bytes(other));
  auto err = run_cross_process(f.plan, f.buffers, g.pg, {1, 1});
  CHECK(has_code(err, errc::mismatched_replica_updates));
  CHECK(message_of(err).find("process 1 issued step: 'b'")
        != std::string::npos);
  CHECK(f.unchanged());
}

TEST_CASE("cross-process collective: a failure elsewhere fails it here with "
          "that process's code and reason") {
  step_fixture f;
  scripted_group g;
  agreement_record other;
  other.fingerprint = fingerprint_of(f.plan);
  other.code = static_cast<uint32_t>(errc::timeout);
  std::strcpy(other.text, "the step took too long");
  g.peer.push_back(agreement_bytes(other));
  auto err = run_cross_process(f.plan, f.buffers, g.pg, {1, 1});
  CHECK(has_code(err, errc::timeout));
  CHECK(message_of(err).find("process 1") != std::string::npos);
  CHECK(message_of(err).find("the step took too long") != std::string::npos);
  CHECK(f.unchanged());
}

TEST_CASE("cross-process collective: hostile records fail cleanly") {
  SECTION("an unknown error code") {
    step_fixture f;
    scripted_group g;
    agreement_record other;
    other.code = 250;
    g.peer.push_back(agreement_bytes(other));
    auto err = run_cross_process(f.plan, f.buffers, g.pg, {1, 1});
    CHECK(has_code(err, errc::replica_failed));
    CHECK(message_of(err).find("unknown error code 250") != std::string::npos);
    CHECK(f.unchanged());
  }
  SECTION("text without a terminating NUL") {
    step_fixture f;
    scripted_group g;
    agreement_record other;
    other.fingerprint = fingerprint_of(f.plan) ^ 1;
    std::memset(other.text, 'x', sizeof(other.text));
    g.peer.push_back(agreement_bytes(other));
    auto err = run_cross_process(f.plan, f.buffers, g.pg, {1, 1});
    CHECK(has_code(err, errc::mismatched_replica_updates));
    CHECK(f.unchanged());
  }
  SECTION("an invalid vote") {
    // Integers take a vote round: rank 1 votes with an item out of range.
    int_step f;
    auto& plan = f.plan;
    auto& buffers = f.buffers;
    auto& component = f.component;
    scripted_group g;
    agreement_record same;
    same.fingerprint = fingerprint_of(plan);
    g.peer.push_back(agreement_bytes(same));
    vote_record bad;
    bad.kind = vote_unequal;
    bad.item = 7;
    g.peer.push_back(bytes_of(bad));
    auto err = run_cross_process(plan, buffers, g.pg, {1, 1});
    CHECK(has_code(err, errc::replica_failed));
    CHECK(message_of(err).find("invalid vote") != std::string::npos);
    CHECK(component == 5);
  }
}

TEST_CASE("cross-process collective: an overflow voted elsewhere stops every "
          "process before any component changes") {
  int_step f;
  auto& plan = f.plan;
  auto& buffers = f.buffers;
  auto& component = f.component;
  scripted_group g;
  agreement_record same;
  same.fingerprint = fingerprint_of(plan);
  g.peer.push_back(agreement_bytes(same));
  vote_record overflow;
  overflow.kind = vote_apply_overflow;
  overflow.item = 0;
  overflow.element = 0;
  g.peer.push_back(bytes_of(overflow));
  auto err = run_cross_process(plan, buffers, g.pg, {1, 1});
  CHECK(has_code(err, errc::overflow));
  CHECK(message_of(err).find("process 1") != std::string::npos);
  CHECK(component == 5);
}

TEST_CASE("cross-process collective: a local failure still takes part and "
          "returns its own error") {
  step_fixture f;
  f.plan.items.clear();
  f.buffers.items.clear();
  f.plan.local_error = make_error(errc::invalid_argument, "bad value here");
  scripted_group g;
  auto err = run_cross_process(f.plan, f.buffers, g.pg, {1, 1});
  CHECK(has_code(err, errc::invalid_argument));
  CHECK(g.gathers == 1);
}

TEST_CASE("cross-process collective: int32 sums travel in int64, so a partial "
          "sum may leave int32 as in one process (V4)") {
  // Rank 1's partial sum arrives through the all-reduce.
  struct adding_group : scripted_group {
    int64_t add = 0;
    dtype seen = dtype::float32;
    caf::error all_reduce(reduce_op, dtype t, void* data, int64_t n) override {
      seen = t;
      if (t == dtype::int64)
        for (int64_t i = 0; i < n; ++i)
          static_cast<int64_t*>(data)[i] += add;
      return {};
    }
  };
  constexpr int32_t max32 = std::numeric_limits<int32_t>::max();
  int32_t contributions[2] = {max32 - 1, max32 - 1}; // 2 max - 2 here
  int32_t components[2] = {0, 0};
  collective_plan plan;
  assign_add_step(plan, 2, 3, "n", dtype::int32, 1);
  auto buffers = bind_plan_buffers(plan);
  for (size_t r = 0; r < 2; ++r) {
    buffers.items[0].inputs[r] = &contributions[r];
    buffers.items[0].components[r] = &components[r];
  }
  adding_group g;
  SECTION("the total fits: exact") {
    g.add = -max32;
    REQUIRE_FALSE(run_cross_process(plan, buffers, g.pg, {2, 1}));
    CHECK(g.seen == dtype::int64);
    CHECK(components[0] == max32 - 2);
    CHECK(components[1] == max32 - 2);
  }
  SECTION("the total does not fit: overflow, named, nothing changed") {
    g.add = 3;
    auto err = run_cross_process(plan, buffers, g.pg, {2, 1});
    CHECK(has_code(err, errc::overflow));
    CHECK(message_of(err).find("'n'") != std::string::npos);
    CHECK(message_of(err).find("element 0") != std::string::npos);
    CHECK(components[0] == 0);
    CHECK(components[1] == 0);
  }
}

// -- device replicas: staged through host memory -----------------------------

namespace {

// A device whose memory host code must not touch: the algorithm may only
// reach it through download and upload (what a GPU's memory is to it).
struct far_device : device {
  std::vector<std::unique_ptr<std::byte[]>> blocks;
  int downloads = 0;
  int uploads = 0;
  std::vector<void*> waited;

  void* hold(const void* data, size_t nbytes) {
    blocks.push_back(std::make_unique<std::byte[]>(nbytes));
    std::memcpy(blocks.back().get(), data, nbytes);
    return blocks.back().get();
  }

  device_id id() const override { return {device_kind::cuda, 0}; }
  bool host_accessible() const override { return false; }
  caf::expected<void*> allocate(size_t) override {
    return make_error(errc::device_error, "far_device: no allocations");
  }
  void release(void*) override {}
  caf::error upload(void* dst, const tensor& src) override {
    ++uploads;
    std::memcpy(dst, src.raw(), src.nbytes());
    return {};
  }
  caf::expected<tensor> download(const void* src, dtype type,
                                 const tensor_shape& shape) override {
    ++downloads;
    auto t = tensor::empty(type, shape);
    std::memcpy(t.mutable_raw(), src, t.nbytes());
    return t;
  }
  caf::error apply(void*, update_op, const tensor&) override {
    return make_error(errc::device_error, "far_device: apply unused");
  }
  caf::error split_assign(void*, const tensor&, int, int) override {
    return make_error(errc::device_error, "far_device: split unused");
  }
  caf::error apply_local(void*, update_op, dtype, const void*,
                         int64_t) override {
    return make_error(errc::device_error, "far_device: apply_local unused");
  }
  caf::error copy_local(void*, const void*, size_t) override {
    return make_error(errc::device_error, "far_device: copy_local unused");
  }
  caf::error wait_for_event(void* event) override {
    waited.push_back(event);
    return {};
  }
};

// Replica 0 of this process in host memory, replica 1 on a far device;
// process 1 has one replica. One float32 assign_add item.
struct staged_step {
  float host_contribution[3] = {1, 2, 3};
  float host_component[3] = {0, 0, 0};
  far_device* dev = nullptr; // owned by the algorithm
  float* far_contribution = nullptr;
  float* far_component = nullptr;
  std::shared_ptr<scripted_group> group = std::make_shared<scripted_group>();
  std::shared_ptr<collective_algorithm> algorithm;
  collective_plan plan;
  collective_buffers buffers;
  int event = 0; // its address stands for replica 1's step-done event

  staged_step() {
    auto owned = std::make_unique<far_device>();
    dev = owned.get();
    const float contribution[3] = {10, 20, 30};
    const float zero[3] = {0, 0, 0};
    far_contribution = static_cast<float*>(dev->hold(contribution, 12));
    far_component = static_cast<float*>(dev->hold(zero, 12));
    std::vector<std::unique_ptr<device>> devices;
    devices.emplace_back(); // replica 0: host memory
    devices.push_back(std::move(owned));
    algorithm = make_staged_across_processes(
      make_membership(std::make_shared<process_group>(group), {2, 1}),
      std::move(devices));
    add_item();
  }

  void add_item() {
    auto& item = assign_add_step(plan, 2, 3, "w", dtype::float32, 3);
    item.staged = {0, 7}; // replica 1 kept its contribution on its device
    item.contributions = {tensor{}, tensor{}};
    buffers.items.push_back({{host_contribution, far_contribution},
                             {host_component, far_component},
                             nullptr});
    buffers.ready_events = {nullptr, &event};
  }

  std::vector<float> far() const {
    return {far_component[0], far_component[1], far_component[2]};
  }
  std::vector<float> host() const {
    return {host_component[0], host_component[1], host_component[2]};
  }
};

} // namespace

TEST_CASE("staged across processes: device replicas' data goes through host "
          "copies, and the result back to their memory") {
  staged_step f;
  CHECK(f.algorithm->workers() == collective_workers::driver);
  CHECK(f.algorithm->uses_staging_buffers());
  CHECK(f.algorithm->description().find("1 device replica(s) staged")
        != std::string::npos);
  agreement_record same;
  same.fingerprint = fingerprint_of(f.plan);
  float theirs[3] = {100, 200, 300};
  f.group->peer.push_back(agreement_bytes(same, theirs, sizeof(theirs)));
  REQUIRE_FALSE(f.algorithm->run(f.plan, f.buffers, 0, 1));
  const std::vector<float> want{111, 222, 333}; // 1 + 10 + 100, ...
  CHECK(f.host() == want);
  CHECK(f.far() == want);
  CHECK(f.dev->downloads == 2); // its contribution and its component
  CHECK(f.dev->uploads == 1);
  CHECK(f.dev->waited == std::vector<void*>{&f.event});
}

TEST_CASE("staged across processes: a step that fails anywhere leaves the "
          "device replicas' memory untouched") {
  staged_step f;
  agreement_record other;
  other.fingerprint = fingerprint_of(f.plan) + 1;
  std::strcpy(other.text, "step: 'b' assign_add");
  f.group->peer.push_back(agreement_bytes(other));
  auto err = f.algorithm->run(f.plan, f.buffers, 0, 1);
  CHECK(has_code(err, errc::mismatched_replica_updates));
  CHECK(f.far() == std::vector<float>{0, 0, 0});
  CHECK(f.host() == std::vector<float>{0, 0, 0});
  CHECK(f.dev->uploads == 0);
}

TEST_CASE("staged across processes: two updates of one variable in a step "
          "apply to one host copy, in order") {
  staged_step f;
  f.add_item(); // the same update once more
  f.plan.description = "step: 'w' assign_add, 'w' assign_add";
  // Process 1 agrees and contributes nothing: each update adds 11, 22, 33.
  agreement_record same;
  same.fingerprint = fingerprint_of(f.plan);
  float zeros[8] = {};
  f.group->peer.push_back(agreement_bytes(same, zeros, sizeof(zeros)));
  REQUIRE_FALSE(f.algorithm->run(f.plan, f.buffers, 0, 1));
  const std::vector<float> want{22, 44, 66};
  CHECK(f.host() == want);
  CHECK(f.far() == want);
  CHECK(f.dev->uploads == 1);
}

TEST_CASE("staged across processes: a step's scatter reaches a device "
          "replica's component copied whole, and only its rows change") {
  auto owned = std::make_unique<far_device>();
  auto* dev = owned.get();
  std::vector<std::unique_ptr<device>> devices;
  devices.emplace_back(); // replica 0: host memory
  devices.push_back(std::move(owned));
  auto group = std::make_shared<scripted_group>(); // rank 1 echoes rank 0
  auto algorithm = make_staged_across_processes(
    make_membership(std::make_shared<process_group>(group), {2, 1}),
    std::move(devices));
  // A table of 4 rows of 2; process 0's combined rows add to rows 1 and 3
  // (only_first_replica: process 0's rows are the step's).
  float host_table[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const float zeros[8] = {};
  auto* far_table = static_cast<float*>(dev->hold(zeros, sizeof(zeros)));
  collective_plan plan;
  plan.num_replicas = 2;
  plan.cross_process = true;
  plan.total_replicas = 3;
  plan.description = "step: 't' scatter_add";
  auto& item = plan.add_item();
  item.name = "t";
  item.type = dtype::float32;
  item.scatter = true;
  item.sop = scatter_op::add;
  item.row_elems = 2;
  item.rows = {1, 3};
  item.count = 4;
  item.rop = reduce_op::sum;
  item.first_only = true;
  item.mirrored = true;
  item.source = collective_source::contributions;
  item.target = collective_target::components;
  auto rows = tensor::from_vector<float>({2, 2}, {1, 2, 3, 4});
  item.contributions = {rows, rows};
  auto buffers = bind_plan_buffers(plan);
  buffers.items[0].components = {host_table, far_table};
  buffers.ready_events = {nullptr, nullptr};
  SECTION("with the components' sizes bound, every row lands") {
    buffers.items[0].component_elements = {8, 8};
    REQUIRE_FALSE(algorithm->run(plan, buffers, 0, 1));
    const std::vector<float> want{0, 0, 1, 2, 0, 0, 3, 4};
    CHECK(std::vector<float>(host_table, host_table + 8) == want);
    CHECK(std::vector<float>(far_table, far_table + 8) == want);
    CHECK(dev->downloads == 1); // the whole component, once
    CHECK(dev->uploads == 1);
  }
  SECTION("without them, nothing moves and the error says why") {
    auto err = algorithm->run(plan, buffers, 0, 1);
    CHECK(has_code(err, errc::invalid_argument));
    CHECK(message_of(err).find("no component size") != std::string::npos);
    CHECK(dev->downloads == 0);
    CHECK(std::vector<float>(far_table, far_table + 8)
          == std::vector<float>(8, 0.0f));
  }
}

namespace {

// Rank 0 of 2 whose broadcasts from rank 1 deliver bytes of 7, and which
// records every broadcast (bytes, root).
struct broadcasting_group : scripted_group {
  std::vector<std::pair<size_t, int>> broadcasts;
  caf::error broadcast(void* data, size_t bytes, int root) override {
    broadcasts.emplace_back(bytes, root);
    if (root == 1)
      std::memset(data, 7, bytes);
    return {};
  }
};

struct payload_plan {
  collective_plan plan;
  payload_plan(int from, tensor result, int64_t indices = 0) {
    plan.num_replicas = 1;
    plan.cross_process = true;
    plan.total_replicas = 2;
    plan.description = "the data of update from process "
                       + std::to_string(from);
    auto& item = plan.add_item();
    item.type = result.type();
    item.count = result.size();
    item.from_process = from;
    item.source = collective_source::contributions;
    item.target = collective_target::output;
    item.result = std::move(result);
    if (indices > 0) { // a scatter's indices, as a second item
      auto& rows = plan.add_item();
      rows.type = dtype::int64;
      rows.count = indices;
      rows.from_process = from;
      rows.target = collective_target::output;
      rows.result = tensor::zeros(dtype::int64, {indices});
    }
  }
};

bool all_sevens(const tensor& t) {
  auto* p = static_cast<const unsigned char*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i)
    if (p[i] != 7)
      return false;
  return true;
}

} // namespace

TEST_CASE("cross-process collective: an item from another process is one "
          "broadcast from it into the output, no reduction and no vote") {
  broadcasting_group group;
  payload_plan p{1, tensor::zeros(dtype::float64, {1024}), 100};
  auto buffers = bind_plan_buffers(p.plan);
  REQUIRE_FALSE(run_cross_process(p.plan, buffers, group.pg, {1, 1}));
  CHECK(all_sevens(p.plan.items[0].result));
  CHECK(all_sevens(p.plan.items[1].result));
  REQUIRE(group.broadcasts.size() == 2);
  CHECK(group.broadcasts[0] == std::make_pair(size_t{8192}, 1));
  CHECK(group.broadcasts[1] == std::make_pair(size_t{800}, 1));
  CHECK(group.gathers == 1); // the agreement; integer data takes no vote
}

TEST_CASE("cross-process collective: this process's own data stays in the "
          "output it broadcasts from") {
  broadcasting_group group;
  payload_plan p{0, tensor::filled(dtype::float64, {600}, 3.0)};
  auto buffers = bind_plan_buffers(p.plan);
  REQUIRE_FALSE(run_cross_process(p.plan, buffers, group.pg, {1, 1}));
  CHECK(p.plan.items[0].result.to_vector<double>()
        == std::vector<double>(600, 3.0));
  REQUIRE(group.broadcasts.size() == 1);
  CHECK(group.broadcasts[0].second == 0);
}

TEST_CASE("cross-process collective: data from a process the group does not "
          "have fails with replica_failed before any data moves") {
  broadcasting_group group;
  payload_plan p{5, tensor::zeros(dtype::float64, {16})};
  auto buffers = bind_plan_buffers(p.plan);
  auto err = run_cross_process(p.plan, buffers, group.pg, {1, 1});
  CHECK(has_code(err, errc::replica_failed));
  CHECK(message_of(err).find("process 5") != std::string::npos);
  CHECK(group.broadcasts.empty());
}

TEST_CASE("cross-process collective: M7: the plan is told the stages the "
          "processes passed: a small step its data with the agreement, an "
          "integer step agreed, data and voted, a failed round none") {
  auto watch = [](collective_plan& plan) {
    auto seen = std::make_shared<std::vector<std::string>>();
    plan.on_phase = [seen](const char* p) { seen->push_back(p); };
    return seen;
  };
  {
    step_fixture f;
    auto seen = watch(f.plan);
    scripted_group g;
    agreement_record same;
    same.fingerprint = fingerprint_of(f.plan);
    float theirs[3] = {100, 200, 300};
    g.peer.push_back(agreement_bytes(same, theirs, sizeof(theirs)));
    REQUIRE(!run_cross_process(f.plan, f.buffers, g.pg, {1, 1}));
    CHECK(*seen == std::vector<std::string>{"data"});
  }
  {
    int_step f;
    auto seen = watch(f.plan);
    scripted_group g;
    agreement_record same;
    same.fingerprint = fingerprint_of(f.plan);
    g.peer.push_back(agreement_bytes(same));
    g.peer.push_back(bytes_of(vote_record{}));
    auto err = run_cross_process(f.plan, f.buffers, g.pg, {1, 1});
    INFO(describe(err));
    CHECK(!err);
    CHECK(*seen == std::vector<std::string>{"agreed", "data", "voted"});
  }
  {
    step_fixture f;
    f.plan.items.clear();
    f.buffers.items.clear();
    auto seen = watch(f.plan);
    scripted_group g;
    agreement_record same;
    same.fingerprint = fingerprint_of(f.plan);
    g.peer.push_back(agreement_bytes(same));
    REQUIRE(!run_cross_process(f.plan, f.buffers, g.pg, {1, 1}));
    CHECK(*seen == std::vector<std::string>{"agreed"});
  }
  {
    step_fixture f;
    auto seen = watch(f.plan);
    scripted_group g;
    agreement_record other;
    other.fingerprint = fingerprint_of(f.plan);
    other.code = static_cast<uint32_t>(errc::timeout);
    g.peer.push_back(agreement_bytes(other));
    CHECK(run_cross_process(f.plan, f.buffers, g.pg, {1, 1}));
    CHECK(seen->empty());
  }
}
