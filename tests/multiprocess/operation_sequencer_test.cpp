// Services mode's sequencer and links
// (actors/cluster/operation_sequencer_actor),
// in one process: every link receives the operations in one order, stamped
// with the rank that submitted them; joins and messages that do not belong
// are refused or dropped; under an arbiter, every operation carries the
// lead's epoch, a sequencer that lost its lead stops with `fenced`, and a
// link refuses an epoch older than one it saw (P16).

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "actors/cluster/host_arbiter.hpp"
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

  caf::error wait_for_failure() {
    std::unique_lock<std::mutex> lock{mtx};
    cv.wait_for(lock, 5s, [&] { return bool{failure}; });
    return failure;
  }

  /// What the endpoint's on_lost said (the process's group health).
  caf::error lost;
  std::function<void(caf::error, bool)> on_lost() {
    return [this](caf::error err, bool) {
      std::lock_guard<std::mutex> lock{mtx};
      lost = std::move(err);
      cv.notify_all();
    };
  }
  caf::error wait_for_lost() {
    std::unique_lock<std::mutex> lock{mtx};
    cv.wait_for(lock, 5s, [&] { return bool{lost}; });
    return lost;
  }
};

// An arbiter file of this test's own, removed however the test ends.
struct arbiter_file {
  std::string path;
  explicit arbiter_file(const std::string& what)
    : path("/dev/shm/varsync-sequencer-test-" + std::to_string(getpid())
           + "-" + what) {
    std::filesystem::remove(path);
  }
  ~arbiter_file() { std::filesystem::remove(path); }
  std::shared_ptr<host_arbiter> open(int rank,
                                     std::chrono::milliseconds lease) {
    auto a = host_arbiter::open({path, rank, lease});
    REQUIRE(a);
    return std::shared_ptr<host_arbiter>{std::move(*a)};
  }
};

// Stands in for a sequencer: orders each submission back to the link that
// sent it, under the epoch the submission's ticket names. It keeps no
// handle of the link (one kept would keep the link, and its endpoint,
// alive past the test). The unused argument: CAF 0.17 spawns a function
// actor without arguments through a null pointer (UBSan reports it).
operation_sequencer_actor::behavior_type
echo_sequencer(operation_sequencer_actor::pointer self, int) {
  return {
    [](sequence_join_atom, int32_t, sequence_link_actor&) {
      return ok_atom::value;
    },
    [=](sequence_submit_atom, sequenced_operation& op) {
      op.epoch = op.ticket;
      op.sequence = op.ticket;
      auto link = caf::actor_cast<sequence_link_actor>(self->current_sender());
      self->send(link, sequence_deliver_atom::value, std::move(op));
    },
    [](sequence_leave_atom) { return ok_atom::value; },
    [](sequence_close_atom) { return ok_atom::value; },
    [](sequence_renew_atom) {},
  };
}

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
      // Their endpoints answer the recorders as they exit.
      self->wait_for(sequencer, links[0], links[1], links[2]);
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

TEST_CASE("operation sequencer under an arbiter: every operation carries "
          "the lead's epoch, and one that lost its lead while it could not "
          "renew orders nothing and every link fails with fenced") {
  config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  arbiter_file file{"lead"};

  // A sequencer that keeps its lead: its operations carry epoch 1, also
  // well past its lease (the timer renews it).
  {
    auto a = file.open(0, 300ms);
    auto epoch = a->try_acquire();
    REQUIRE(epoch);
    CHECK(*epoch == 1);
    auto sequencer = spawn_operation_sequencer(
      sys, 1, std::make_shared<departures>(0), sequencer_lead{a, *epoch});
    recorder rec;
    auto end = std::make_shared<sequence_endpoint>(true);
    end->attach(rec.receiver());
    auto link = spawn_sequence_link(sys, sequencer, end);
    self->request(sequencer, 5s, sequence_join_atom::value, int32_t{0}, link)
      .receive([](ok_atom) {}, [](caf::error& e) { FAIL(to_string(e)); });
    caf::anon_send(link, sequence_submit_atom::value, read_of(1, 1));
    std::this_thread::sleep_for(700ms); // two leases
    caf::anon_send(link, sequence_submit_atom::value, read_of(2, 2));
    REQUIRE(rec.wait_for(2));
    {
      std::lock_guard<std::mutex> lock{rec.mtx};
      CHECK(rec.ops[0].epoch == 1);
      CHECK(rec.ops[1].epoch == 1);
      CHECK(!rec.failure);
    }
    // Another candidate is refused meanwhile: the lead is alive and leased.
    auto b = file.open(1, 300ms);
    CHECK(!b->try_acquire());
    // An orderly end gives the lead up: the candidate takes it at once;
    // with no other process left, the file goes.
    // The link's endpoint answers the recorder as it exits: wait for it.
    self->send_exit(link, caf::exit_reason::user_shutdown);
    self->send_exit(sequencer, caf::exit_reason::user_shutdown);
    self->wait_for(link, sequencer);
    CHECK(!std::filesystem::exists(file.path));
    auto next = b->try_acquire();
    REQUIRE(next);
    CHECK(*next == 2);
    b->release(*next);
  }

  // A sequencer whose lease ran out while it did not renew (a stopped
  // process), and whose lead another process took meanwhile.
  auto a = file.open(0, 200ms);
  auto epoch = a->try_acquire();
  REQUIRE(epoch);
  sequencer_lead lead{a, *epoch};
  std::this_thread::sleep_for(300ms);
  auto b = file.open(1, 5s);
  auto taken = b->try_acquire();
  REQUIRE(taken);
  CHECK(*taken == *epoch + 1);
  auto sequencer = spawn_operation_sequencer(
    sys, 2, std::make_shared<departures>(1), std::move(lead));
  // Link 0 is the sequencer's own process's, link 1 another's.
  recorder rec[2];
  sequence_link_actor link[2];
  for (int r = 0; r < 2; ++r) {
    auto end = std::make_shared<sequence_endpoint>(r == 0);
    end->attach(rec[r].receiver());
    end->on_lost(rec[r].on_lost());
    link[r] = spawn_sequence_link(sys, sequencer, end);
    self->request(sequencer, 5s, sequence_join_atom::value, int32_t{r},
                  link[r]);
  }
  caf::anon_send(link[1], sequence_submit_atom::value, read_of(1, 1));
  const auto lead_words = "the lead is in epoch " + std::to_string(*taken)
                          + ", process 1";
  auto failure = rec[0].wait_for_failure();
  INFO(to_string(failure));
  CHECK(has_code(failure, errc::fenced));
  CHECK(message_of(failure).find("lost the lead") != std::string::npos);
  CHECK(message_of(failure).find(lead_words) != std::string::npos);
  // The process learns it in the same words (group health).
  CHECK(has_code(rec[0].wait_for_lost(), errc::fenced));
  // Another process: its sequencer is lost, in the same words.
  auto other = rec[1].wait_for_failure();
  INFO(to_string(other));
  CHECK(has_code(other, errc::replica_failed));
  CHECK(message_of(other).find(lead_words) != std::string::npos);
  CHECK(has_code(rec[1].wait_for_lost(), errc::replica_failed));
  std::this_thread::sleep_for(50ms);
  for (auto& r : rec) {
    std::lock_guard<std::mutex> lock{r.mtx};
    CHECK(r.ops.empty()); // nothing was ordered
  }
  // The new holder's lead is untouched; the file is left to it.
  auto now = b->current();
  REQUIRE(now);
  CHECK(now->epoch == *taken);
  CHECK(now->rank == 1);
  CHECK(std::filesystem::exists(file.path));
  // The links' endpoints answer the recorders as they exit: wait for them.
  for (auto& l : link)
    self->send_exit(l, caf::exit_reason::user_shutdown);
  self->wait_for(link[0], link[1]);
}

TEST_CASE("sequence link: an operation of an epoch older than one it "
          "delivered is refused, never applied (P16)") {
  config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto sequencer = sys.spawn(echo_sequencer, 0);
  recorder rec;
  auto end = std::make_shared<sequence_endpoint>();
  end->attach(rec.receiver());
  auto link = spawn_sequence_link(sys, sequencer, end);
  self->request(sequencer, 5s, sequence_join_atom::value, int32_t{0}, link)
    .receive([](ok_atom) {}, [](caf::error& e) { FAIL(to_string(e)); });
  // The ticket is the epoch the stand-in orders it under.
  for (uint64_t epoch : {1, 2, 1, 2, 3, 2})
    caf::anon_send(link, sequence_submit_atom::value, read_of(epoch, epoch));
  REQUIRE(rec.wait_for(4));
  std::this_thread::sleep_for(100ms); // nothing else arrives
  {
    std::lock_guard<std::mutex> lock{rec.mtx};
    std::vector<uint64_t> epochs;
    for (auto& op : rec.ops)
      epochs.push_back(op.epoch);
    CHECK(epochs == std::vector<uint64_t>{1, 2, 2, 3});
  }
  // The link's endpoint answers the recorder as it exits: wait for it.
  self->send_exit(link, caf::exit_reason::user_shutdown);
  self->send_exit(sequencer, caf::exit_reason::user_shutdown);
  self->wait_for(link, sequencer);
}
