// Services mode's sequencer and links
// (actors/cluster/operation_sequencer_actor),
// in one process: every link receives the operations in one order, stamped
// with the rank that submitted them; joins and messages that do not belong
// are refused or dropped.

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "actors/cluster/operation_sequencer_actor.hpp"
#include "varsync/config.hpp"
#include "varsync/error.hpp"

using namespace varsync;
using namespace std::chrono_literals;

namespace {

struct recorder {
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<sequenced_operation> ops;
  caf::error failure;

  sequence_receiver receiver() {
    sequence_receiver r;
    r.deliver = [this](sequenced_operation op) {
      std::lock_guard<std::mutex> lock{mtx};
      ops.push_back(std::move(op));
      cv.notify_all();
    };
    r.failed = [this](caf::error err) {
      std::lock_guard<std::mutex> lock{mtx};
      failure = std::move(err);
      cv.notify_all();
    };
    return r;
  }

  bool wait_for(size_t n) {
    std::unique_lock<std::mutex> lock{mtx};
    return cv.wait_for(lock, 5s, [&] { return ops.size() >= n; });
  }
};

struct config : caf::actor_system_config {
  config() { register_types(*this); }
};

sequenced_operation read_of(uint64_t variable, uint64_t ticket,
                            int32_t claimed_origin = -1) {
  auto op = make_sequenced(ops::read{variable});
  op.ticket = ticket;
  op.origin = claimed_origin;
  return op;
}

} // namespace

TEST_CASE("operation sequencer: one order for every link, origin from the "
          "sender, refused joins and foreign messages") {
  config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto gone = std::make_shared<departures>(1);
  auto sequencer = spawn_operation_sequencer(sys, 2, gone);
  recorder rec[3];
  std::shared_ptr<sequence_endpoint> ends[3];
  sequence_link_actor links[3]; // links[2] never joins
  for (int r = 0; r < 3; ++r) {
    ends[r] = std::make_shared<sequence_endpoint>();
    links[r] = spawn_sequence_link(sys, sequencer, ends[r]);
  }
  // Stops the actors however the test ends, so that the system can go.
  struct stop_all {
    caf::scoped_actor& self;
    operation_sequencer_actor& sequencer;
    sequence_link_actor (&links)[3];
    ~stop_all() {
      self->send_exit(sequencer, caf::exit_reason::kill);
      for (auto& l : links)
        self->send_exit(l, caf::exit_reason::user_shutdown);
    }
  } stop{self, sequencer, links};
  // Link 1 is attached late: what arrives before waits for it.
  ends[0]->attach(rec[0].receiver());
  auto join = [&](int32_t rank, sequence_link_actor link) {
    caf::error err;
    bool ok = false;
    self->request(sequencer, 5s, sequence_join_atom::value, rank, link)
      .receive([&](ok_atom) { ok = true; },
               [&](caf::error& e) { err = std::move(e); });
    return ok ? caf::error{} : err;
  };
  CHECK(join(5, links[0]));             // out of range
  // Joins answer once every rank has joined.
  auto pending = self->request(sequencer, 5s, sequence_join_atom::value,
                               int32_t{0}, links[0]);
  CHECK(!join(1, links[1]));
  pending.receive([](ok_atom) {}, [](caf::error& e) { FAIL(to_string(e)); });
  CHECK(join(1, links[1]));             // joined already
  CHECK(join(0, links[2]));             // rank 0 taken
  // An operation from a link that has not joined is dropped.
  caf::anon_send(links[2], sequence_submit_atom::value, read_of(9, 9));
  // Submissions from both links, interleaved; rank 1 claims to be rank 0.
  for (uint64_t i = 0; i < 20; ++i)
    caf::anon_send(links[i % 2], sequence_submit_atom::value,
                   read_of(i, 100 + i, 0));
  // Only the sequencer orders: a deliver from elsewhere is ignored.
  self->send(links[0], sequence_deliver_atom::value, read_of(77, 77));
  REQUIRE(rec[0].wait_for(20));
  ends[1]->attach(rec[1].receiver());
  REQUIRE(rec[1].wait_for(20));
  std::this_thread::sleep_for(50ms); // nothing else arrives
  for (int i = 0; i < 2; ++i) {
    auto& r = rec[i];
    std::lock_guard<std::mutex> lock{r.mtx};
    REQUIRE(r.ops.size() == 20);
    for (size_t k = 0; k < 20; ++k) {
      CHECK(r.ops[k].sequence == k + 1);
      CHECK(r.ops[k].ticket == rec[0].ops[k].ticket);
      // The origin is the rank the sender joined as.
      CHECK(r.ops[k].origin == static_cast<int32_t>(r.ops[k].ticket % 2));
    }
  }
  // Process 0's shutdown waits for the others' links to go.
  CHECK(!gone->await_all(10ms));
  self->send_exit(links[1], caf::exit_reason::user_shutdown);
  CHECK(gone->await_all(5s));
  // A lost sequencer fails every link's endpoint.
  self->send_exit(sequencer, caf::exit_reason::kill);
  for (int i = 0; i < 2; ++i) {
    auto& r = rec[i];
    std::unique_lock<std::mutex> lock{r.mtx};
    CHECK(r.cv.wait_for(lock, 5s, [&] { return bool{r.failure}; }));
  }
}
