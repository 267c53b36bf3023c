// One process of the multi-process strategy tests (strategy_test.cpp starts
// several with VARSYNC_RANK, VARSYNC_WORLD_SIZE and VARSYNC_RENDEZVOUS set):
// creates a strategy over LOCAL host replicas in this process and the
// others, runs SCENARIO and checks every outcome against the rule table.
//
//   strategy_rank SCENARIO LOCAL [PATH]
//
// SCENARIO: "rules" (the rows below, across processes), "desync" (the
// processes issue different steps), "die" (the last rank exits after
// joining), "stop" (the last rank stops itself after joining), "absent"
// (the harness never starts the last rank), "checkpoint" (save to PATH,
// restore, and restore into one process), "services" (VARSYNC_MODE=services:
// one-sided operations from every process in one order, P2),
// "services_lost" (process 0 exits; the others' operations fail), "mixed"
// (the harness gives the processes different modes), "mixed_transport"
// (process 0 asks for Gloo, the others for the automatic transport),
// "concurrent" (bursts
// of async operations in training mode), "services_stopped" (process 0
// stops itself; the others notice by the missing heartbeats),
// "training_stopped" (the last process stops itself while the others are
// idle; they learn it from process 0's control plane), "clean_exit" (a few
// operations, then every process leaves in order), "wrong_token" (the
// harness gives process 0 another cluster token than the others: they are
// refused, process 0 times out), "waits" (C10, P14 and P15, in the mode the
// harness gives). Exit: 0 as expected,
// 1 a wrong outcome, 2 bad usage.

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "varsync/actor_api.hpp"
#include "varsync/checkpoint.hpp"
#include "varsync/varsync.hpp"

using namespace varsync;
using namespace std::chrono_literals;

namespace {

int failures = 0;
int rank_ = -1;

void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "process %d FAILED: %s\n", rank_, what.c_str());
  }
}

template <class T>
T must(caf::expected<T> x, const char* what) {
  if (!x) {
    std::fprintf(stderr, "process %d FAILED: %s: %s\n", rank_, what,
                 describe(x.error()).c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }
  return std::move(*x);
}

void must(const caf::error& err, const char* what) {
  if (err) {
    std::fprintf(stderr, "process %d FAILED: %s: %s\n", rank_, what,
                 describe(err).c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }
}

std::vector<float> floats(const strategy& s, const variable& v) {
  return must(s.read(v), "read").to_vector<float>();
}

void expect_code(const caf::error& err, errc code, const std::string& what) {
  check(has_code(err, code), what + ": expected " + std::string{to_string(code)}
                               + ", got " + describe(err));
}

int rules(strategy& s) {
  const int n = s.num_replicas();
  const int rank = s.process_rank();
  // Creation: every replica starts from process 0's initial value.
  auto w = must(s.create_variable("w",
                                  tensor::from_list<float>(
                                    {float(rank) * 100, 1.5f, -2}),
                                  synchronization::on_write,
                                  aggregation::mean),
                "create w");
  check(floats(s, w) == std::vector<float>{0, 1.5f, -2},
        "C: w starts from process 0's value");
  auto total = must(s.create_variable("total", tensor::scalar<float>(0),
                                      synchronization::on_write,
                                      aggregation::sum),
                    "create total");
  auto first = must(s.create_variable("first", tensor::scalar<float>(0),
                                      synchronization::on_write,
                                      aggregation::only_first_replica),
                    "create first");
  auto same = must(s.create_variable("same", tensor::scalar<float>(0),
                                     synchronization::on_write,
                                     aggregation::none),
                   "create same");
  auto count = must(s.create_variable("count", tensor::scalar<int32_t>(0),
                                      synchronization::on_write,
                                      aggregation::sum),
                    "create count");
  auto seen = must(s.create_variable("seen", tensor::scalar<int64_t>(0),
                                     synchronization::on_read,
                                     aggregation::sum),
                   "create seen");
  // W1-W3 across processes: one fused step.
  auto ids = must(s.run([&](replica_context& ctx) {
                    const float r = float(ctx.replica_id());
                    must(ctx.assign_add(w, tensor::from_list<float>(
                                             {r + 1, 0, 0})),
                         "w");
                    must(ctx.assign_add(total, double(r)), "total");
                    must(ctx.assign(first, double(r * 10 + 5)), "first");
                    must(ctx.assign(same, 7.0), "same");
                    must(ctx.assign_add(count, 1.0), "count");
                    must(ctx.assign_add(seen, double(ctx.replica_id() + 1)),
                         "seen");
                    return ctx.replica_id();
                  }),
                  "step");
  for (int i = 0; i < s.num_local_replicas(); ++i)
    check(ids[static_cast<size_t>(i)] == s.first_local_replica() + i,
          "run returns this process's replicas' results");
  check(floats(s, w)[0] == float(n + 1) / 2, "W2 mean over every process");
  check(floats(s, total)[0] == float(n * (n - 1) / 2),
        "W2 sum over every process");
  check(floats(s, first)[0] == 5, "W3 only the first replica (process 0)");
  check(floats(s, same)[0] == 7, "W4 none with equal values");
  check(must(s.read(count), "read count").to_vector<int32_t>()[0] == n,
        "int32 sum");
  // R2: the ON_READ sum covers every process's replicas.
  check(must(s.read(seen), "read seen").to_vector<int64_t>()[0]
          == int64_t(n) * (n + 1) / 2,
        "R2 on_read sum over every process");
  // W4: aggregation none with values that differ between replicas (and so
  // between processes): refused everywhere, nothing applied.
  auto err = s.run([&](replica_context& ctx) {
    must(ctx.assign(same, double(ctx.replica_id())), "same");
    must(ctx.assign_add(total, 1.0), "total");
  });
  expect_code(err, errc::aggregation_required, "W4 unequal");
  check(floats(s, same)[0] == 7 && floats(s, total)[0] == float(n * (n - 1) / 2),
        "W4 unequal changed nothing");
  // V4: an int32 sum that does not fit once every process's share is in
  // (with two replicas, the apply to the component overflows).
  err = s.run([&](replica_context& ctx) {
    must(ctx.assign_add(count, double(std::numeric_limits<int32_t>::max() / 2)),
         "count");
  });
  expect_code(err, errc::overflow, "V4 overflow across processes");
  check(must(s.read(count), "read count").to_vector<int32_t>()[0] == n,
        "V4 overflow changed nothing");
  // R4: a cross-replica assign of an ON_READ sum is split over every replica.
  must(s.assign(seen, 10.0), "assign seen");
  check(must(s.read(seen), "read seen").to_vector<int64_t>()[0] == 10,
        "R4 split over every process");
  // R5: assign_add of an ON_READ sum goes to component 0 (process 0) only:
  // the sum moves by exactly x.
  must(s.assign_add(seen, 5.0), "assign_add seen");
  check(must(s.read(seen), "read seen").to_vector<int64_t>()[0] == 15,
        "R5 the sum over every process moved by x");
  // R3: only_first_replica reads replica 0 (in process 0), mean divides by
  // every replica.
  auto lead = must(s.create_variable("lead", tensor::scalar<float>(0),
                                     synchronization::on_read,
                                     aggregation::only_first_replica),
                   "create lead");
  auto avg = must(s.create_variable("avg", tensor::scalar<float>(0),
                                    synchronization::on_read,
                                    aggregation::mean),
                  "create avg");
  must(s.run([&](replica_context& ctx) {
         must(ctx.assign(lead, double(ctx.replica_id() * 10 + 1)), "lead");
         must(ctx.assign(avg, double(ctx.replica_id())), "avg");
       }),
       "on_read step");
  check(floats(s, lead)[0] == 1, "R3 only_first_replica is replica 0's");
  check(floats(s, avg)[0] == float(n - 1) / 2, "R3 mean over every process");
  // A cross-replica assign of an ON_WRITE variable reaches every process.
  must(s.assign(w, tensor::from_list<float>({4, 5, 6})), "assign w");
  check(floats(s, w) == std::vector<float>{4, 5, 6}, "cross-replica assign");
  // all_reduce of per-replica values over every process.
  std::vector<tensor> mine;
  for (int i = 0; i < s.num_local_replicas(); ++i)
    mine.push_back(tensor::scalar<float>(float(s.first_local_replica() + i)));
  auto sum = must(s.all_reduce(reduce_op::sum, per_replica<tensor>{mine}),
                  "all_reduce");
  check(sum.value().to_vector<float>()[0] == float(n * (n - 1) / 2),
        "all_reduce over every process");
  // reduce of local per-replica values would miss the other processes.
  expect_code(s.reduce(reduce_op::sum, per_replica<tensor>{mine}).error(),
              errc::invalid_argument, "reduce of local values refused");
  must(s.destroy(w), "destroy");
  // Still in step after all of that.
  must(s.run([&](replica_context& ctx) {
         must(ctx.assign_add(total, 1.0), "total");
       }),
       "last step");
  check(floats(s, total)[0] == float(n * (n - 1) / 2 + n), "last step");
  std::printf("process %d: rules done, %d replicas in all\n", rank, n);
  return failures == 0 ? 0 : 1;
}

int desync(strategy& s) {
  auto a = must(s.create_variable("a", tensor::scalar<float>(0),
                                  synchronization::on_write, aggregation::sum),
                "create a");
  auto b = must(s.create_variable("b", tensor::scalar<float>(0),
                                  synchronization::on_write, aggregation::sum),
                "create b");
  // Process 0 updates a, the others b: every process gets an error that
  // names a process and both operations, and nothing changes (the code
  // shows it came from the agreement, not from a timeout).
  auto err = s.run([&](replica_context& ctx) {
    must(ctx.assign_add(s.process_rank() == 0 ? a : b, 1.0), "update");
  });
  expect_code(err, errc::mismatched_replica_updates, "desync");
  auto text = message_of(err);
  check(text.find("process") != std::string::npos
          && text.find("'a'") != std::string::npos
          && text.find("'b'") != std::string::npos,
        "desync names the processes and operations: " + text);
  check(floats(s, a)[0] == 0 && floats(s, b)[0] == 0, "desync changed nothing");
  // P6: a cross-replica assign with another value in another process.
  err = s.assign(b, double(s.process_rank() + 7));
  expect_code(err, errc::mismatched_replica_updates, "P6 different values");
  check(floats(s, b)[0] == 0, "P6 changed nothing");
  // The group is still usable.
  must(s.run([&](replica_context& ctx) { must(ctx.assign_add(a, 1.0), "a"); }),
       "step after desync");
  check(floats(s, a)[0] == float(s.num_replicas()), "step after desync");
  // A step that throws in the last process only: every process fails it
  // with that process's error, and nothing is applied anywhere.
  const int last = s.num_processes() - 1;
  err = s.run([&](replica_context& ctx) {
    must(ctx.assign_add(a, 1.0), "a");
    if (s.process_rank() == last)
      throw std::runtime_error("no data for this batch");
  });
  check(bool(err), "a step that throws in one process fails everywhere");
  check(s.process_rank() == last
          || message_of(err).find("process " + std::to_string(last))
               != std::string::npos,
        "the error names the process: " + message_of(err));
  check(message_of(err).find("no data for this batch") != std::string::npos,
        "the error carries the process's reason: " + message_of(err));
  check(floats(s, a)[0] == float(s.num_replicas()),
        "a step that threw in one process changed nothing");
  // And the next step still works.
  must(s.run([&](replica_context& ctx) { must(ctx.assign_add(a, 1.0), "a"); }),
       "step after a failed step");
  check(floats(s, a)[0] == float(2 * s.num_replicas()),
        "step after a failed step");
  // A process that issues one operation more (a cross-replica update the
  // others skip): it meets the others' next operation, of another kind,
  // and every process fails it at once naming both; issuing alike again
  // realigns them.
  if (s.process_rank() == 0)
    err = s.assign_add(b, 1.0);
  else
    err = s.run([&](replica_context& ctx) {
      must(ctx.assign_add(a, 1.0), "a");
    });
  expect_code(err, errc::mismatched_replica_updates,
              "an operation only process 0 issued");
  check(message_of(err).find("'b'") != std::string::npos
          && message_of(err).find("step") != std::string::npos,
        "the error names both operations: " + message_of(err));
  check(floats(s, b)[0] == 0
          && floats(s, a)[0] == float(2 * s.num_replicas()),
        "an extra operation changed nothing");
  must(s.run([&](replica_context& ctx) { must(ctx.assign_add(a, 1.0), "a"); }),
       "step after an extra operation");
  check(floats(s, a)[0] == float(3 * s.num_replicas()),
        "issuing alike again realigns the processes");
  std::printf("process %d: %s\n", s.process_rank(), text.c_str());
  return failures == 0 ? 0 : 1;
}

// The last process dies (or stops) once everyone has joined; the others'
// next step fails within the operation deadline, and they can still read.
int lose_one(strategy& s, bool stop) {
  auto a = must(s.create_variable("a", tensor::scalar<float>(3),
                                  synchronization::on_write, aggregation::sum),
                "create a");
  if (s.process_rank() == s.num_processes() - 1) {
    if (stop)
      std::raise(SIGSTOP);
    std::_Exit(0);
  }
  auto t0 = std::chrono::steady_clock::now();
  auto err = s.run([&](replica_context& ctx) {
    must(ctx.assign_add(a, 1.0), "a");
  });
  auto took = std::chrono::steady_clock::now() - t0;
  check(has_code(err, errc::replica_failed) || has_code(err, errc::timeout),
        "a lost process fails the step: " + describe(err));
  check(took < 20s, "within the deadline");
  // A failed group stays failed, at once.
  err = s.run([&](replica_context& ctx) { must(ctx.assign_add(a, 1.0), "a"); });
  check(has_code(err, errc::replica_failed), "later steps fail too: "
                                               + describe(err));
  auto values = must(s.local_values(a), "survivors can be read");
  for (auto& v : values)
    check(v.to_vector<float>()[0] == 3, "nothing was applied");
  std::printf("process %d: %s\n", s.process_rank(), describe(err).c_str());
  return failures == 0 ? 0 : 1;
}

// K1-K4 across processes: every process saves (process 0 writes), changes
// the values, restores them; the file also restores into one process with
// the same number of replicas.
int checkpoint(strategy& s, const std::string& path) {
  const int n = s.num_replicas();
  auto w = must(s.create_variable("w", tensor::from_list<float>({1, 2, 3}),
                                  synchronization::on_write,
                                  aggregation::mean),
                "create w");
  auto c = must(s.create_variable("c", tensor::scalar<int64_t>(0),
                                  synchronization::on_read, aggregation::sum),
                "create c");
  auto p = must(s.create_variable("p", tensor::scalar<int64_t>(0),
                                  synchronization::none, aggregation::none),
                "create p");
  must(s.run([&](replica_context& ctx) {
         must(ctx.assign_add(w, tensor::from_list<float>({1, 1, 1})), "w");
         must(ctx.assign_add(c, double(ctx.replica_id() + 1)), "c");
         must(ctx.assign(p, double(ctx.replica_id() + 1)), "p");
       }),
       "step");
  auto per_replica_ok = [&](const std::vector<tensor>& values) {
    bool ok = static_cast<int>(values.size()) == n;
    for (int r = 0; ok && r < n; ++r)
      ok = values[static_cast<size_t>(r)].to_vector<int64_t>()[0] == r + 1;
    return ok;
  };
  auto sum = [&](const strategy& t, const variable& v) {
    return must(t.read(v), "read").to_vector<int64_t>()[0];
  };
  const int64_t total = int64_t(n) * (n + 1) / 2;
  check(per_replica_ok(must(s.all_values(p), "all_values")),
        "all_values: every replica, in id order");
  must(varsync::save(s, path), "save");
  // Change everything, then restore.
  must(s.assign(w, tensor::from_list<float>({9, 9, 9})), "assign w");
  must(s.assign(c, 100.0), "assign c");
  must(s.run([&](replica_context& ctx) { must(ctx.assign(p, 50.0), "p"); }),
       "step p");
  must(varsync::restore(s, path), "restore");
  check(floats(s, w) == std::vector<float>{2, 3, 4}, "K2 w restored");
  check(sum(s, c) == total, "K2 c restored (R4 split over every process)");
  check(per_replica_ok(must(s.all_values(p), "all_values after restore")),
        "K2 every component of p restored to its replica");
  // P9: save_survivors needs no other process: each one writes what it
  // holds to a file of its own, the other processes' replicas missing.
  const auto mine = process_file(path + ".survivors", s.process_rank());
  expect_code(varsync::save_survivors(s, path + ".survivors"),
              errc::replica_failed,
              "P9 save_survivors of an on_read sum without "
              "aggregate_survivors");
  check(::access(mine.c_str(), F_OK) != 0, "P9 a refused save writes nothing");
  int64_t here = 0; // c's components in this process, as saved
  for (auto& t : must(s.local_values(c), "local_values c"))
    here += t.to_vector<int64_t>()[0];
  survivor_options aggregated;
  aggregated.aggregate_survivors = true;
  must(varsync::save_survivors(s, path + ".survivors", {}, aggregated),
       "P9 save_survivors across processes");
  check(::access(mine.c_str(), F_OK) == 0,
        "P9 save_survivors wrote " + mine);
  // K3: a file that does not exist fails on every process, nothing changes.
  auto err = varsync::restore(s, path + ".missing");
  check(bool(err), "restore of a missing file fails");
  check(floats(s, w) == std::vector<float>{2, 3, 4}, "K3 nothing changed");
  // The scenario's variables, zero, in a strategy of n replicas in this
  // process (where files saved across processes restore).
  struct one_process {
    strategy t;
    variable w, c, p;
  };
  auto in_one_process = [n](const std::string& what) {
    strategy_options one;
    one.devices.clear();
    for (int i = 0; i < n; ++i)
      one.devices.push_back("cpu:" + std::to_string(i));
    one.scheduler_threads = 2;
    auto t = must(strategy::create(one), ("one-process strategy " + what).c_str());
    auto w1 = must(t.create_variable("w", tensor::zeros(dtype::float32, {3}),
                                     synchronization::on_write,
                                     aggregation::mean),
                   ("create w " + what).c_str());
    auto c1 = must(t.create_variable("c", tensor::scalar<int64_t>(0),
                                     synchronization::on_read,
                                     aggregation::sum),
                   ("create c " + what).c_str());
    auto p1 = must(t.create_variable("p", tensor::scalar<int64_t>(0),
                                     synchronization::none,
                                     aggregation::none),
                   ("create p " + what).c_str());
    return one_process{std::move(t), w1, c1, p1};
  };
  if (s.process_rank() == 0) {
    // The same file into one process with as many replicas.
    auto [t, w1, c1, p1] = in_one_process("here");
    must(varsync::restore(t, path), "restore in one process");
    check(floats(t, w1) == std::vector<float>{2, 3, 4},
          "one process reads w");
    check(sum(t, c1) == total, "one process reads c");
    check(per_replica_ok(must(t.local_values(p1), "local_values")),
          "one process reads every component of p");
  }
  {
    // This process's survivors file restores into a strategy here: w whole,
    // c as the sum of this process's components (R4 split), p refused
    // (the other processes' components are missing), nothing changed then.
    auto [t, w1, c1, p1] = in_one_process("(survivors)");
    expect_code(varsync::restore(t, mine), errc::checkpoint_mismatch,
                "P9 a survivors file with p's other components missing");
    check(floats(t, w1) == std::vector<float>{0, 0, 0},
          "a refused restore changes nothing");
    must(varsync::restore(t, mine, {"w", "c"}), "restore w and c (survivors)");
    check(floats(t, w1) == std::vector<float>{2, 3, 4},
          "P9 w from this process's survivors");
    check(sum(t, c1) == here,
          "P9 c is the sum of this process's components");
    ::unlink(mine.c_str());
  }
  std::printf("process %d: checkpoint done\n", s.process_rank());
  return failures == 0 ? 0 : 1;
}

// Waits until `name` exists (another process creates it).
variable await_variable(const strategy& s, const std::string& name) {
  return must(s.with_timeout(20s).wait_for_variable(name),
              ("wait for " + name).c_str());
}

// Services mode: every process creates `name` followed by its rank, then
// waits for the others' (each has reached this point).
void meet(strategy& s, const std::string& name) {
  must(s.create_variable(name + std::to_string(s.process_rank()),
                         tensor::scalar<int64_t>(0),
                         synchronization::on_write, aggregation::sum),
       ("create " + name).c_str());
  for (int r = 0; r < s.num_processes(); ++r)
    await_variable(s, name + std::to_string(r));
}

// Waits until the int64 ON_WRITE sum `v` reads `value`.
void await_value(const strategy& s, const variable& v, int64_t value,
                 const char* what) {
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (must(s.read(v), what).to_vector<int64_t>()[0] < value) {
    if (std::chrono::steady_clock::now() > deadline) {
      check(false, std::string{what} + ": never reached its value");
      return;
    }
    std::this_thread::sleep_for(2ms);
  }
}

// P2: every process issues cross-replica operations on its own, at the
// same time; process 0 orders them and every process applies them in that
// order.
int services(strategy& s, const std::string& path) {
  const int rank = s.process_rank();
  const int procs = s.num_processes();
  const int n = s.num_replicas();
  constexpr int rounds = 40;
  check(s.services_mode(), "services_mode()");
  // replica_of takes global ids: this process's replicas only.
  check(static_cast<bool>(replica_of(s, s.first_local_replica())),
        "replica_of(first local replica)");
  check(!replica_of(s, (s.first_local_replica() + s.num_local_replicas()) % n),
        "replica_of(another process's replica) is invalid");
  if (rank == 0) {
    // A control process publishes a configuration value...
    must(s.create_variable("config", tensor::from_list<float>({1, 2}),
                           synchronization::on_write, aggregation::mean),
         "create config");
    must(s.create_variable("total", tensor::scalar<int64_t>(0),
                           synchronization::on_write, aggregation::sum),
         "create total");
    must(s.create_variable("seen", tensor::scalar<int64_t>(0),
                           synchronization::on_read, aggregation::sum),
         "create seen");
    must(s.create_variable("own", tensor::scalar<int64_t>(0),
                           synchronization::none, aggregation::none),
         "create own");
    must(s.create_variable("emb", tensor::zeros(dtype::int64, {procs, 2}),
                           synchronization::on_write, aggregation::sum),
         "create emb");
    must(s.create_variable("burst", tensor::scalar<float>(0),
                           synchronization::on_write, aggregation::sum),
         "create burst");
    must(s.create_variable("done", tensor::scalar<int64_t>(0),
                           synchronization::on_write, aggregation::sum),
         "create done");
    must(s.assign(await_variable(s, "config"),
                  tensor::from_list<float>({5, 6})),
         "assign config");
  }
  // ... which every process sees once it sees what was created after it.
  auto done = await_variable(s, "done");
  auto config = await_variable(s, "config");
  auto total = await_variable(s, "total");
  auto seen = await_variable(s, "seen");
  auto own = await_variable(s, "own");
  auto emb = await_variable(s, "emb");
  auto burst = await_variable(s, "burst");
  if (rank == 0)
    must(s.create_variable("go", tensor::scalar<int64_t>(1),
                           synchronization::on_write, aggregation::sum),
         "create go");
  await_variable(s, "go");
  check(floats(s, config) == std::vector<float>{5, 6},
        "W8: the assign ordered before 'go' is seen everywhere");
  // Bulk data (above sequenced_inline_bytes) from the last process: the
  // operations cross CAF as descriptions, and the data reaches every
  // process through the data plane at the operation's turn.
  constexpr int64_t side = 128, table_rows = 2048, touched = 700;
  if (rank == procs - 1) {
    std::vector<float> initial(side * side);
    for (size_t i = 0; i < initial.size(); ++i)
      initial[i] = static_cast<float>(i);
    auto bulk = must(s.create_variable("bulk", tensor::from_vector<float>(
                                                 {side, side}, initial),
                                       synchronization::on_write,
                                       aggregation::sum),
                     "create bulk (64 KiB initial value)");
    must(s.assign_add(bulk, tensor::filled(dtype::float32, {side, side}, 1.0)),
         "assign_add bulk (64 KiB)");
    auto table = must(s.create_variable("table",
                                        tensor::zeros(dtype::float32,
                                                      {table_rows, 4}),
                                        synchronization::on_write,
                                        aggregation::sum),
                      "create table (32 KiB)");
    std::vector<int64_t> at;
    std::vector<float> rows;
    for (int64_t j = 0; j < touched; ++j) {
      at.push_back(2 * j);
      for (int c = 0; c < 4; ++c)
        rows.push_back(static_cast<float>(10 * j + c));
    }
    must(s.scatter_update(table, {at, tensor::from_vector<float>({touched, 4},
                                                                 rows)}),
         "scatter_update of 700 rows of table");
    must(s.create_variable("bulk_done", tensor::scalar<int64_t>(1),
                           synchronization::on_write, aggregation::sum),
         "create bulk_done");
    // What crossed CAF: the scalars and small vectors only; the 64 KiB
    // values, the 32 KiB table and the 700 rows went through the group.
    auto m = must(s.metrics(), "metrics");
    const uint64_t bulk_bytes = 2 * side * side * 4 + table_rows * 4 * 4
                                + touched * 4 * 4 + touched * 8;
    check(m.services_data_plane_bytes == bulk_bytes,
          "P2: the bulk data went through the process group ("
            + std::to_string(m.services_data_plane_bytes) + " bytes, "
            + std::to_string(bulk_bytes) + " expected)");
    check(m.services_inline_bytes < 4096,
          "P2: no bulk data crossed CAF ("
            + std::to_string(m.services_inline_bytes) + " bytes inline)");
  }
  await_variable(s, "bulk_done");
  {
    auto got = floats(s, await_variable(s, "bulk"));
    bool ok = static_cast<int64_t>(got.size()) == side * side;
    for (size_t i = 0; ok && i < got.size(); ++i)
      ok = got[i] == static_cast<float>(i) + 1;
    check(ok, "P2: bulk data from process " + std::to_string(procs - 1)
                + " (create, assign_add) reached this process whole");
    auto table = floats(s, await_variable(s, "table"));
    ok = static_cast<int64_t>(table.size()) == table_rows * 4;
    for (int64_t r = 0; ok && r < table_rows; ++r)
      for (int c = 0; ok && c < 4; ++c) {
        float want = r % 2 == 0 && r / 2 < touched
                       ? static_cast<float>(10 * (r / 2) + c)
                       : 0.0f;
        ok = table[static_cast<size_t>(r * 4 + c)] == want;
      }
    check(ok, "S4: a scatter of 700 rows sent as a description reached "
              "every row here");
  }
  // Local updates stay local: each replica counts in its own component.
  must(s.run([&](replica_context& ctx) {
         must(ctx.assign_add(seen, double(ctx.replica_id() + 1)), "seen");
       }),
       "local step");
  // Concurrent one-sided updates from every process, blocking and async
  // (many in flight: in training mode their order could differ between
  // processes; here process 0 gives the one order): none is lost.
  for (int i = 0; i < rounds; ++i)
    must(s.assign_add(total, double(rank + 1)), "assign_add total");
  {
    std::mutex mtx;
    std::condition_variable cv;
    int pending = rounds;
    caf::error first;
    for (int i = 0; i < rounds; ++i)
      s.async().assign_add(total, double(rank + 1), [&](caf::error err) {
        std::lock_guard<std::mutex> lock{mtx};
        if (err && !first)
          first = err;
        if (--pending == 0)
          cv.notify_all();
      });
    std::unique_lock<std::mutex> lock{mtx};
    cv.wait(lock, [&] { return pending == 0; });
    must(first, "async assign_add total");
  }
  // P17: a burst from every process at once, every eighth update with a
  // value of the wrong shape: the updates that wait together share an
  // agreement round, and each is applied or refused on its own.
  constexpr int burst_size = 64;
  {
    std::mutex mtx;
    std::condition_variable cv;
    int pending = burst_size, applied = 0, refused = 0;
    caf::error other;
    for (int i = 0; i < burst_size; ++i) {
      // Floating: an integer assign_add takes the overflow check's round.
      auto value = i % 8 == 7 ? tensor::from_list<float>({1, 1})
                              : tensor::scalar<float>(1);
      s.async().assign_add(burst, value, [&, i](caf::error err) {
        std::lock_guard<std::mutex> lock{mtx};
        if (!err && i % 8 != 7)
          ++applied;
        else if (has_code(err, errc::shape_mismatch) && i % 8 == 7)
          ++refused;
        else if (!other)
          other = err ? err : make_error(errc::invalid_argument,
                                         "a wrong shape was applied");
        if (--pending == 0)
          cv.notify_all();
      });
    }
    std::unique_lock<std::mutex> lock{mtx};
    cv.wait(lock, [&] { return pending == 0; });
    must(other, "P17: each update of the burst has its own outcome");
    check(applied == burst_size / 8 * 7 && refused == burst_size / 8,
          "P17: " + std::to_string(applied) + " applied, "
            + std::to_string(refused) + " refused");
    auto m = must(s.metrics(), "metrics");
    check(m.services_group_rounds > 0
            && m.services_grouped_updates > m.services_group_rounds,
          "P17: updates were decided together ("
            + std::to_string(m.services_grouped_updates) + " in "
            + std::to_string(m.services_group_rounds) + " rounds)");
  }
  // A step with an ON_WRITE update needs every process: refused.
  auto err = s.run([&](replica_context& ctx) {
    must(ctx.assign_add(total, 1.0), "total in a step");
  });
  expect_code(err, errc::invalid_argument, "an ON_WRITE step in services mode");
  std::vector<tensor> mine(static_cast<size_t>(s.num_local_replicas()),
                           tensor::scalar<float>(1));
  expect_code(s.all_reduce(reduce_op::sum, per_replica<tensor>{mine}).error(),
              errc::invalid_argument, "all_reduce in services mode");
  // X5: so does a collective inside a step (this process's replicas only).
  for (auto kind : {step_collective_kind::all_reduce,
                    step_collective_kind::all_gather,
                    step_collective_kind::broadcast}) {
    err = s.run([kind](replica_context& ctx) -> step_task<> {
      auto x = tensor::from_vector<float>({1}, {1});
      if (kind == step_collective_kind::all_reduce)
        co_await ctx.all_reduce(reduce_op::sum, x);
      else if (kind == step_collective_kind::all_gather)
        co_await ctx.all_gather(x);
      else
        co_await ctx.broadcast(x, 0);
    });
    expect_code(err, errc::invalid_argument,
                std::string{to_string(kind)} + " inside a step in services mode");
  }
  // S4 in services mode: each process scatters into its own row alone.
  must(s.scatter_add(emb, {{rank}, tensor::from_vector<int64_t>(
                                      {1, 2}, {rank + 1, 10 * (rank + 1)})}),
       "scatter_add emb");
  must(s.assign_add(done, 1.0), "assign_add done");
  {
    // M7: the flight recorder holds this update twice, as issued here
    // (sent to the sequencer) and as run here in its turn (numbered, with
    // this process as its origin); every numbered record follows the one
    // order.
    auto d = must(s.stats(), "stats");
    bool issued = false, ran = false, ordered = true, origins = true;
    uint64_t last = 0;
    for (auto& r : d.recent_operations) {
      if (r.kind == "update" && r.variable == "done" && r.origin == rank) {
        issued = issued || (r.sequence == 0 && r.phase == "done");
        ran = ran || (r.sequence > 0 && r.phase == "done");
      }
      origins = origins && r.origin >= 0 && r.origin < procs;
      if (r.sequence > 0) {
        ordered = ordered && r.sequence > last;
        last = r.sequence;
      }
    }
    check(d.process_rank == rank, "M7: the report names this process");
    check(issued && ran, "M7: the update of 'done' is recorded as issued "
                         "here and as run in its turn");
    check(ordered, "M7: numbered records follow the sequencer's order");
    check(origins, "M7: every record's origin is a process of the strategy");
  }
  await_value(s, done, procs, "done");
  check(must(s.read(burst), "read burst").to_vector<float>()[0]
          == static_cast<float>(procs * (burst_size / 8 * 7)),
        "P17: every applied update of every process's burst, once");
  {
    std::vector<int64_t> want;
    for (int r = 0; r < procs; ++r) {
      want.push_back(r + 1);
      want.push_back(10 * (r + 1));
    }
    check(must(s.read(emb), "read emb").to_vector<int64_t>() == want,
          "S4: every process's scatter reached every replica");
  }
  // Every process has finished its updates: all read the same totals.
  int64_t expected = 0;
  for (int r = 0; r < procs; ++r)
    expected += int64_t(2 * rounds) * (r + 1);
  check(must(s.read(total), "read total").to_vector<int64_t>()[0] == expected,
        "no update lost: " + std::to_string(expected));
  check(must(s.read(seen), "read seen").to_vector<int64_t>()[0]
          == int64_t(n) * (n + 1) / 2,
        "R2: the ON_READ sum covers every process's local updates");
  auto all = must(s.all_values(seen), "all_values");
  check(static_cast<int>(all.size()) == n, "all_values covers every replica");
  for (int i = 0; i < n && i < static_cast<int>(all.size()); ++i)
    check(all[static_cast<size_t>(i)].to_vector<int64_t>()[0] == i + 1,
          "all_values in replica order");
  // The last process saves alone; a mirrored-only file restores from there.
  if (rank == procs - 1) {
    must(varsync::save(s, path, {"config", "total"}), "save in services mode");
    must(s.assign(config, tensor::from_list<float>({0, 0})), "change config");
    must(varsync::restore(s, path, {"config"}), "restore config");
    check(floats(s, config) == std::vector<float>{5, 6}, "restored config");
    // K2: an ON_READ sum is stored as its sum and restored by R4's split.
    must(varsync::save(s, path + ".own", {"seen", "own"}), "save own");
    must(s.assign(seen, 5.0), "change seen");
    must(varsync::restore(s, path + ".own", {"seen"}), "restore seen");
    check(must(s.read(seen), "read seen").to_vector<int64_t>()[0]
            == int64_t(n) * (n + 1) / 2,
          "restored seen");
    // A NONE variable is stored per replica: refused, nothing changed
    // (neither the per-replica entry nor the sum restored beside it).
    must(s.assign(seen, 5.0), "change seen again");
    must(s.assign(own, 3.0), "change own");
    expect_code(varsync::restore(s, path + ".own", {"seen", "own"}),
                errc::invalid_argument,
                "restore of per-replica components in services mode");
    check(must(s.read(seen), "read seen").to_vector<int64_t>()[0] == 5,
          "a refused restore leaves seen as it was");
    for (auto& c : must(s.all_values(own), "all_values own"))
      check(c.to_vector<int64_t>()[0] == 3,
            "a refused restore leaves own as it was");
    ::unlink((path + ".own").c_str());
    auto scratch = must(s.create_variable("scratch", tensor::scalar<float>(0),
                                          synchronization::on_write,
                                          aggregation::sum),
                        "create scratch");
    must(s.destroy(scratch), "destroy scratch");
    check(has_code(s.read(scratch).error(), errc::unknown_variable),
          "destroyed, in order");
  }
  // Leaving: every process stays until all have made their last
  // collective operation (a process that leaves takes its replicas along);
  // process 0's shutdown then waits for the others to leave, since it
  // orders their last operations (these lookups).
  meet(s, "left");
  std::printf("process %d: services done\n", rank);
  return failures == 0 ? 0 : 1;
}

// After process 0 of services mode is lost (P3): what this process holds
// stays readable and savable; what needs the others fails.
void survivors_read_locally(strategy& s) {
  auto a = s.lookup("a");
  check(static_cast<bool>(a), "lookup after process 0 left: "
                                + (a ? std::string{} : describe(a.error())));
  if (!a)
    return;
  auto names = s.variables();
  check(names && std::any_of(names->begin(), names->end(),
                             [](auto& v) { return v.name() == "c"; }),
        "variables() after process 0 left");
  auto local = s.local_values(*a);
  check(local && local->size() == 1
          && local->front().to_vector<float>() == std::vector<float>{3},
        "local_values after process 0 left: "
          + (local ? std::string{} : describe(local.error())));
  auto value = s.read(*a);
  check(value && value->to_vector<float>() == std::vector<float>{3},
        "an ON_WRITE read after process 0 left: "
          + (value ? std::string{} : describe(value.error())));
  auto c = s.lookup("c");
  check(c && !s.read(*c) && has_code(s.read(*c).error(), errc::replica_failed),
        "an aggregated ON_READ read after process 0 left fails");
  const std::string path = "/tmp/varsync-survivors-"
                            + std::to_string(::getpid()) + ".safetensors";
  auto saved = varsync::save_survivors(s, path, {"a"});
  check(!saved, "save_survivors after process 0 left: " + describe(saved));
  const auto mine = process_file(path, s.process_rank());
  check(::access(mine.c_str(), F_OK) == 0, "save_survivors wrote " + mine);
  ::unlink(mine.c_str());
}

// Process 0 orders every operation: when it is gone, the others' operations
// fail with replica_failed within their deadline, and nothing hangs.
int services_lost(strategy& s) {
  if (s.process_rank() == 0) {
    must(s.create_variable("c", tensor::scalar<float>(1),
                           synchronization::on_read, aggregation::sum),
         "create c");
    must(s.create_variable("a", tensor::scalar<float>(3),
                           synchronization::on_write, aggregation::sum),
         "create a");
    std::this_thread::sleep_for(300ms);
    std::_Exit(0);
  }
  auto a = await_variable(s, "a");
  std::this_thread::sleep_for(1s); // process 0 is gone by now
  // The harness's deadline catches a hang; no timing is asserted here.
  auto err = s.assign_add(a, 1.0);
  check(has_code(err, errc::replica_failed) || has_code(err, errc::timeout),
        "an operation after process 0 left fails: " + describe(err));
  err = s.assign_add(a, 1.0);
  check(has_code(err, errc::replica_failed) || has_code(err, errc::timeout),
        "later operations fail too: " + describe(err));
  survivors_read_locally(s);
  std::printf("process %d: %s\n", s.process_rank(), describe(err).c_str());
  return failures == 0 ? 0 : 1;
}

// P15: agreeing on an outcome. Training mode: one round, every process
// returns its own error or the first other; services mode: its own, at once.
void agrees(strategy& s) {
  const int rank = s.process_rank();
  const int last = s.num_processes() - 1;
  must(s.agree({}, "a save"), "agree, all succeeded");
  auto mine = rank == last ? make_error(errc::out_of_memory, "no room here")
                           : caf::error{};
  auto got = s.agree(mine, "a save");
  if (rank == last || s.services_mode()) {
    check(got == mine, "agree returns this process's own outcome: "
                         + describe(got));
  } else {
    check(has_code(got, errc::out_of_memory)
            && message_of(got).find("process " + std::to_string(last)
                                    + " failed a save: no room here")
                 != std::string::npos,
          "agree returns the failing process's error: " + describe(got));
  }
  if (!s.services_mode()) {
    auto differ = s.agree({}, rank == 0 ? "a save" : "a restore");
    expect_code(differ, errc::mismatched_replica_updates,
                "agree with different operations");
  }
  // The group goes on.
  must(s.agree({}, "a save"), "agree after the failures");
}

// C10 and P14 in either mode: waiting for a variable another operation
// creates, the barrier's meeting point, and their failures.
int waits(strategy& s) {
  const int rank = s.process_rank();
  const int last = s.num_processes() - 1;
  using clock = std::chrono::steady_clock;
  expect_code(s.wait_for_variable("").error(), errc::invalid_argument,
              "waiting for the empty name");
  auto t0 = clock::now();
  auto never = s.with_timeout(300ms).wait_for_variable("never");
  check(!never && has_code(never.error(), errc::timeout)
          && message_of(never.error()).find("'never'") != std::string::npos,
        "a wait past its deadline times out naming the variable: "
          + (never ? std::string{"found"} : describe(never.error())));
  check(clock::now() - t0 < 5s, "the wait ends near its deadline");
  // P14: the last process arrives 500 ms late; nobody leaves before it.
  if (rank == last)
    std::this_thread::sleep_for(500ms);
  t0 = clock::now();
  must(s.barrier(), "barrier 1");
  if (rank != last)
    check(clock::now() - t0 >= 300ms,
          "barrier 1 returned before the last process reached it");
  agrees(s);
  if (!s.services_mode()) {
    // Training mode: every process creates; a wait issued before the
    // create (async: it holds no slot) ends with it.
    std::promise<caf::expected<variable>> waited;
    auto got = waited.get_future();
    s.async().wait_for_variable("late", [&](caf::expected<variable> v) {
      waited.set_value(std::move(v));
    });
    auto late = must(s.create_variable("late", tensor::scalar<float>(7),
                                       synchronization::on_write,
                                       aggregation::sum),
                     "create late");
    auto v = must(got.get(), "the wait for late");
    check(v.id() == late.id(), "the wait returns the variable created");
    must(s.barrier(), "barrier 2");
    std::printf("process %d: waits done\n", rank);
    return failures == 0 ? 0 : 1;
  }
  // Services mode: process 0 creates a variable the others wait for.
  if (rank == 0) {
    std::this_thread::sleep_for(300ms);
    must(s.create_variable("late", tensor::scalar<float>(7),
                           synchronization::on_write, aggregation::sum),
         "create late");
  } else {
    check(has_code(s.lookup("late").error(), errc::unknown_variable),
          "late does not exist before process 0 creates it");
    auto late = must(s.with_timeout(10s).wait_for_variable("late"),
                     "wait for late");
    auto seen = must(s.read(late), "read late").to_vector<float>();
    check(seen == std::vector<float>{7},
          "an operation after the wait sees the created variable: "
            + std::to_string(seen.at(0)));
  }
  must(s.barrier(), "barrier 2");
  // Every process adds 1, then meets the others: each add issued before a
  // barrier is applied here when that barrier returns.
  auto hits = await_variable(s, "late");
  must(s.assign_add(hits, 1.0), "add before barrier 3");
  must(s.barrier(), "barrier 3");
  auto total = must(s.read(hits), "read after barrier 3").to_vector<float>();
  check(total == std::vector<float>{7.0f + static_cast<float>(last + 1)},
        "every process's add is applied when barrier 3 returns: "
          + std::to_string(total.at(0)));
  // Process 0 misses barrier 4's deadline: the others time out, naming it;
  // its late barrier then meets theirs at once, and barrier 5 meets again.
  if (rank == 0) {
    std::this_thread::sleep_for(1s);
  } else {
    auto err = s.with_timeout(300ms).barrier();
    check(has_code(err, errc::timeout)
            && message_of(err).find("process(es) 0 ") != std::string::npos,
          "a barrier past its deadline names the missing process: "
            + describe(err));
  }
  must(rank == 0 ? s.barrier() : caf::error{}, "process 0's barrier 4");
  must(s.barrier(), "barrier 5");
  // M9: every process's snapshot, in rank order, in either mode.
  auto all = must(s.metrics_of_processes(), "metrics_of_processes");
  check(static_cast<int>(all.size()) == s.num_processes(),
        "one snapshot per process, got " + std::to_string(all.size()));
  for (size_t k = 0; k < all.size(); ++k)
    check(all[k].process_rank == static_cast<int>(k)
            && all[k].processes == s.num_processes()
            && static_cast<int>(all[k].replicas.size())
                 == s.num_local_replicas()
            && all[k].replicas.front().replica
                 == static_cast<int>(k) * s.num_local_replicas(),
          "snapshot " + std::to_string(k) + " is process "
            + std::to_string(all[k].process_rank) + "'s, of "
            + std::to_string(all[k].processes) + " processes and "
            + std::to_string(all[k].replicas.size()) + " replicas from "
            + (all[k].replicas.empty()
                 ? std::string{"none"}
                 : std::to_string(all[k].replicas.front().replica)));
  std::promise<caf::expected<std::vector<strategy_metrics>>> async_all;
  s.async().metrics_of_processes(
    [&](caf::expected<std::vector<strategy_metrics>> r) {
      async_all.set_value(std::move(r));
    });
  auto second = async_all.get_future().get();
  check(second && second->size() == all.size()
          && (*second)[rank].completed > all[rank].completed,
        "the async form, later: every process again, counts grown: "
          + (second ? std::to_string(second->size()) + " snapshots, "
                        + std::to_string(all[rank].completed) + " then "
                        + std::to_string((*second)[rank].completed)
                        + " completed"
                    : describe(second.error())));
  // Services mode: nobody leaves while another's call still needs it.
  must(s.barrier(), "barrier 6");
  std::printf("process %d: waits done\n", rank);
  return failures == 0 ? 0 : 1;
}

// Training mode with concurrent async calls (P4): every process issues the
// same burst of steps, updates and collective reads without waiting, and
// the steps take longer in one process than in the other, so that the
// operations finish in different orders. Every one must still succeed:
// each process starts them in the order they were issued.
int concurrent(strategy& s) {
  const int rank = s.process_rank();
  const int n = s.num_replicas();
  auto w = must(s.create_variable("cw", tensor::scalar<float>(0),
                                  synchronization::on_write,
                                  aggregation::sum),
                "create cw");
  auto count = must(s.create_variable("count", tensor::scalar<int32_t>(0),
                                      synchronization::on_write,
                                      aggregation::sum),
                    "create count");
  auto hits = must(s.create_variable("hits", tensor::scalar<int64_t>(0),
                                     synchronization::on_read,
                                     aggregation::sum),
                   "create hits");
  std::mutex m;
  std::condition_variable cv;
  int pending = 0;
  int errors = 0;
  std::string first_error;
  auto done = [&](caf::error err) {
    std::lock_guard<std::mutex> guard{m};
    if (err && errors++ == 0)
      first_error = describe(err);
    --pending;
    cv.notify_all();
  };
  constexpr int rounds = 30;
  {
    std::lock_guard<std::mutex> guard{m};
    pending = 4 * rounds;
  }
  auto async = s.async();
  for (int i = 0; i < rounds; ++i) {
    async.run(
      [=](replica_context& ctx) {
        if (rank == 1 && i % 3 == 0)
          std::this_thread::sleep_for(3ms);
        must(ctx.assign_add(w, 1.0), "step cw");
        must(ctx.assign_add(hits, tensor::scalar<int64_t>(1)), "step hits");
      },
      done_callback{done});
    // An integer update: an agreement and then an overflow-checked
    // collective, two rounds another operation could fall between.
    async.assign_add(count, tensor::scalar<int32_t>(1), done_callback{done});
    // A collective read that waits for the writes issued before it.
    async.read(hits, callback<tensor>{[done](caf::expected<tensor> t) {
                 done(t ? caf::error{} : t.error());
               }});
    async.assign_add(w, 0.5, done_callback{done});
  }
  {
    std::unique_lock<std::mutex> lock{m};
    cv.wait(lock, [&] { return pending == 0; });
  }
  check(errors == 0, std::to_string(errors)
                       + " concurrent operations failed, the first: "
                       + first_error);
  check(floats(s, w) == std::vector<float>{float(rounds) * (float(n) + 0.5f)},
        "cw holds every step's and every assign's contribution");
  check(must(s.read(count), "read count").as_double(0) == rounds,
        "count holds every assign_add");
  check(must(s.read(hits), "read hits").as_double(0) == rounds * n,
        "hits holds every step's local updates");
  std::printf("process %d: %d concurrent operations\n", rank, 4 * rounds);
  return failures == 0 ? 0 : 1;
}

// Process 0 stops (SIGSTOP) while the others are idle: the heartbeats stop,
// the others close their connections to it after the peer timeout, and
// their next operation fails with replica_failed, not with the timeout of
// an operation deadline (20 s here, the peer timeout 2 s).
int services_stopped(strategy& s) {
  if (s.process_rank() == 0) {
    must(s.create_variable("c", tensor::scalar<float>(1),
                           synchronization::on_read, aggregation::sum),
         "create c");
    must(s.create_variable("a", tensor::scalar<float>(3),
                           synchronization::on_write, aggregation::sum),
         "create a");
    for (int r = 1; r < s.num_processes(); ++r)
      await_variable(s, "seen" + std::to_string(r));
    std::raise(SIGSTOP);
    return 0; // never runs: the harness kills it
  }
  auto a = await_variable(s, "a");
  must(s.create_variable("seen" + std::to_string(s.process_rank()),
                         tensor::scalar<float>(0), synchronization::on_write,
                         aggregation::sum),
       "create seen");
  std::this_thread::sleep_for(3s); // idle past the peer timeout
  // replica_failed, not the timeout the 20 s deadline would give: the
  // heartbeats noticed it (no timing is asserted).
  auto err = s.assign_add(a, 1.0);
  check(has_code(err, errc::replica_failed),
        "an operation after process 0 stopped fails with replica_failed: "
          + describe(err));
  err = s.assign_add(a, 1.0);
  check(has_code(err, errc::replica_failed),
        "later operations fail too: " + describe(err));
  survivors_read_locally(s);
  std::printf("process %d: %s\n", s.process_rank(), describe(err).c_str());
  return failures == 0 ? 0 : 1;
}

// P16, services mode under an arbiter: process 0 orders in epoch 1; it
// stops itself (as a long pause would) once the others saw its variables.
// A successor (arbiter_successor, standing in for the take-over to come)
// takes the lead when process 0's lease runs out, and wakes it: process
// 0's next operations fail with fenced, nothing of them is applied, and
// its local values stay readable. The others fail with replica_failed.
int services_fenced(strategy& s) {
  if (s.process_rank() != 0)
    return services_stopped(s);
  must(s.create_variable("c", tensor::scalar<float>(1),
                         synchronization::on_read, aggregation::sum),
       "create c");
  auto a = must(s.create_variable("a", tensor::scalar<float>(3),
                                  synchronization::on_write, aggregation::sum),
                "create a");
  for (int r = 1; r < s.num_processes(); ++r)
    await_variable(s, "seen" + std::to_string(r));
  std::raise(SIGSTOP); // until the successor took the lead
  auto err = s.assign_add(a, 1.0);
  check(has_code(err, errc::fenced),
        "an operation of the woken sequencer fails with fenced: "
          + describe(err));
  // The successor is the arbiter's rank 3 (host: epoch 2; etcd: a revision).
  check(message_of(err).find("lost the lead") != std::string::npos
          && message_of(err).find(", process 3)") != std::string::npos,
        "it says it lost the lead, and to which epoch: " + describe(err));
  auto again = s.assign_add(a, 1.0);
  check(has_code(again, errc::fenced), "so does every later one: "
                                         + describe(again));
  auto local = s.local_values(a);
  check(local && local->front().to_vector<float>() == std::vector<float>{3},
        "nothing was applied, and local values stay readable");
  // The operations it ordered carry its epoch (M7).
  auto stats = must(s.stats(), "stats");
  bool stamped = false;
  for (auto& r : stats.recent_operations)
    stamped = stamped || (r.sequence > 0 && r.epoch > 0);
  check(stamped, "the flight recorder shows the epoch on ordered operations");
  std::printf("process 0: %s\n", describe(err).c_str());
  return failures == 0 ? 0 : 1;
}

// Training mode: the last process stops (SIGSTOP) while every process is
// idle. Process 0 closes its control connection after the peer timeout
// (2 s here) and tells the others; their next operation fails at once with
// replica_failed naming the process that left, where it would otherwise
// wait for Gloo's deadline (20 s here) and fail with Gloo's words. No
// timing is asserted: the message tells which way it failed.
int training_stopped(strategy& s) {
  auto a = must(s.create_variable("a", tensor::scalar<float>(3),
                                  synchronization::on_write, aggregation::sum),
                "create a");
  const int last = s.num_processes() - 1;
  if (s.process_rank() == last) {
    std::raise(SIGSTOP);
    return 0; // never runs: the harness kills it
  }
  std::this_thread::sleep_for(8s); // idle, well past the peer timeout
  auto err = s.run([&](replica_context& ctx) {
    must(ctx.assign_add(a, 1.0), "a");
  });
  check(has_code(err, errc::replica_failed),
        "a step after a process stopped fails with replica_failed: "
          + describe(err));
  check(message_of(err).find("process " + std::to_string(last)
                             + " left the strategy")
          != std::string::npos,
        "it names the process that left (not Gloo's deadline): "
          + describe(err));
  err = s.assign_add(a, 1.0);
  check(has_code(err, errc::replica_failed),
        "later operations fail too: " + describe(err));
  auto values = must(s.local_values(a), "survivors can be read");
  check(values[0].to_vector<float>()[0] == 3, "nothing was applied");
  std::printf("process %d: %s\n", s.process_rank(), describe(err).c_str());
  return failures == 0 ? 0 : 1;
}

// M7, a real hang: the last process stops itself after the creation; the
// others issue an assign, which waits for it. Half a second in, while it
// waits (the peer timeout is 2 s), each writes its flight recorder to
// "<path>.<rank>.json" for the harness's varsync-trace; the assign then
// fails once the stop is noticed.
// The hangs' start: every process creates `a`, then the last one stops
// itself (the harness kills it).
variable create_then_stop_last(strategy& s) {
  auto a = must(s.create_variable("a", tensor::scalar<float>(3),
                                  synchronization::on_write, aggregation::sum),
                "create a");
  if (s.process_rank() == s.num_processes() - 1)
    for (;;)
      std::raise(SIGSTOP);
  return a;
}

// Half a second from now, this process's report (stats) in `file`, while
// an operation waits.
std::future<void> report_later(strategy& s, std::string file) {
  return std::async(std::launch::async, [&s, file = std::move(file)] {
    std::this_thread::sleep_for(500ms);
    auto d = must(s.stats(), "stats while the operation waits");
    FILE* f = std::fopen(file.c_str(), "w");
    check(f != nullptr, "open " + file);
    if (f != nullptr) {
      auto text = to_json(d);
      std::fwrite(text.data(), 1, text.size(), f);
      std::fclose(f);
    }
  });
}

int hang_report(strategy& s, const std::string& path) {
  auto a = create_then_stop_last(s);
  const int rank = s.process_rank();
  auto dump = report_later(s, path + "." + std::to_string(rank) + ".json");
  auto err = s.assign_add(a, 1.0);
  check(static_cast<bool>(err), "the assign fails once the stop is noticed");
  dump.get();
  return failures == 0 ? 0 : 1;
}

// M7 in services mode: process 1 issues an update whose data travels in a
// round of its own after the sequencer numbered it (8 KiB, past the
// by-value size), and the last process stops. Process 0, which issued
// nothing, and process 1 record it as running from the start of that
// round, and report it half a second in; process 0 then waits until it
// failed there too.
int hang_report_services(strategy& s, const std::string& path) {
  const int rank = s.process_rank();
  if (rank == 0)
    must(s.create_variable("big", tensor::zeros(dtype::float32, {2048}),
                           synchronization::on_write, aggregation::sum),
         "create big");
  auto big = must(s.with_timeout(20s).wait_for_variable("big"), "big");
  must(s.barrier(), "barrier before the stop");
  if (rank == s.num_processes() - 1)
    for (;;)
      std::raise(SIGSTOP);
  auto report
    = report_later(s, path + "." + std::to_string(rank) + ".json");
  if (rank == 1) {
    auto err = s.assign_add(big, tensor::filled(dtype::float32, {2048}, 1));
    check(static_cast<bool>(err), "the update fails once the stop is noticed");
  }
  report.get();
  bool ended = rank == 1;
  for (int i = 0; i < 1000 && !ended; ++i) {
    for (auto& r : must(s.stats(), "stats").recent_operations)
      ended = ended || (r.variable == "big" && r.duration_us >= 0);
    if (!ended)
      std::this_thread::sleep_for(10ms);
  }
  check(ended, "the update ended on process 0 too");
  return failures == 0 ? 0 : 1;
}

// M8, the same hang with automatic dumps into `dir`: half a second in, the
// process signals itself (SIGUSR1) and writes flight.<rank>.signal.json;
// once the stop is noticed, the failed assign writes its failure (or, at
// Gloo's deadline, timeout) dump, which this process waits for.
int hang_dumps(strategy& s, const std::string& dir) {
  auto a = create_then_stop_last(s);
  const int rank = s.process_rank();
  auto signal = std::async(std::launch::async, [] {
    std::this_thread::sleep_for(500ms);
    std::raise(SIGUSR1);
  });
  auto err = s.assign_add(a, 1.0);
  check(static_cast<bool>(err), "the assign fails once the stop is noticed");
  signal.get();
  const auto base = dir + "/flight." + std::to_string(rank);
  bool written = false;
  for (int i = 0; i < 500 && !written; ++i) {
    written = std::filesystem::exists(base + ".failure.json")
              || std::filesystem::exists(base + ".timeout.json");
    if (!written)
      std::this_thread::sleep_for(10ms);
  }
  check(written, "the failed assign wrote a dump");
  check(std::filesystem::exists(base + ".signal.json"),
        "SIGUSR1 wrote a dump");
  return failures == 0 ? 0 : 1;
}

// SIGKILL in the middle of collectives: every process keeps `window` async
// updates of a 1 MiB variable in flight; the last one kills itself with
// SIGKILL once 20 have completed there, while its next ones are under way.
// On every survivor each pending operation and each later one fails with
// replica_failed (not timeout: the loss is noticed, not waited out), no
// callback is missing, and the survivors read their components and save
// them (save_survivors, P9).
int killed(strategy& s, const std::string& path) {
  constexpr int64_t elements = 1 << 18; // 1 MiB of float32
  constexpr int window = 8, victim_after = 20, most = 2000;
  const int rank = s.process_rank();
  const bool victim = rank == s.num_processes() - 1;
  auto big = must(s.create_variable("big", tensor::zeros(dtype::float32,
                                                         {elements}),
                                    synchronization::on_write,
                                    aggregation::sum),
                  "create big");
  auto ones = tensor::filled(dtype::float32, {elements}, 1.0);
  std::mutex m;
  std::condition_variable cv;
  int in_flight = 0, completed = 0, issued = 0;
  std::vector<caf::error> errors;
  for (; issued < most; ++issued) {
    std::unique_lock<std::mutex> lock{m};
    cv.wait(lock, [&] { return in_flight < window || !errors.empty(); });
    if (!errors.empty())
      break;
    ++in_flight;
    lock.unlock();
    s.async().assign_add(big, ones, [&](caf::error err) {
      std::lock_guard<std::mutex> guard{m};
      --in_flight;
      if (err)
        errors.push_back(std::move(err));
      else if (++completed == victim_after && victim)
        std::raise(SIGKILL);
      cv.notify_all();
    });
  }
  {
    // Every pending operation gets its answer (the harness's deadline
    // catches one that never does).
    std::unique_lock<std::mutex> lock{m};
    cv.wait(lock, [&] { return in_flight == 0; });
  }
  check(!errors.empty(), "the operations after the kill fail");
  check(completed >= victim_after, "the operations before it completed");
  for (auto& err : errors)
    check(has_code(err, errc::replica_failed),
          "each pending operation fails with replica_failed: "
            + describe(err));
  auto later = s.assign_add(big, ones);
  check(has_code(later, errc::replica_failed),
        "a later operation fails with replica_failed: " + describe(later));
  // The survivors still read and save what they hold.
  auto values = must(s.local_values(big), "survivors can be read");
  for (auto& v : values)
    check(v.bitwise_equal(values[0]), "the components stayed equal");
  must(varsync::save_survivors(s, path), "save_survivors after the kill");
  const auto mine = process_file(path, rank);
  check(::access(mine.c_str(), F_OK) == 0, "save_survivors wrote " + mine);
  ::unlink(mine.c_str());
  std::printf("process %d: %d completed, %zu failed: %s\n", rank, completed,
              errors.size(), describe(errors.front()).c_str());
  return failures == 0 ? 0 : 1;
}

// A short run that ends in order: a step and a cross-replica update, then
// the strategy goes (the test reads both processes' logs).
int clean_exit(strategy& s) {
  if (s.services_mode()) {
    // Each process issues its own operations, then waits until it has seen
    // the others' (a process that leaves ends the others' cross-process
    // operations, P3).
    const int me = s.process_rank();
    auto w = must(s.create_variable("w" + std::to_string(me),
                                    tensor::scalar<float>(0),
                                    synchronization::on_write,
                                    aggregation::sum),
                  "create");
    must(s.assign_add(w, 1.0), "assign_add");
    for (int p = 0; p < s.num_processes(); ++p) {
      const auto deadline = std::chrono::steady_clock::now() + 20s;
      for (;;) {
        auto other = s.lookup("w" + std::to_string(p));
        if (other && floats(s, *other) == std::vector<float>{1})
          break;
        if (std::chrono::steady_clock::now() > deadline) {
          check(false, "process " + std::to_string(p) + "'s update seen");
          break;
        }
        std::this_thread::sleep_for(10ms);
      }
    }
    return failures == 0 ? 0 : 1;
  }
  auto w = must(s.create_variable("w", tensor::scalar<float>(0),
                                  synchronization::on_write, aggregation::sum),
                "create");
  must(s.run([&](replica_context& ctx) { (void) ctx.assign_add(w, 1.0); }),
       "step");
  must(s.assign_add(w, 1.0), "assign_add");
  return failures == 0 ? 0 : 1;
}

// Variable ids are this process's own: a process whose other strategy
// created variables first numbers this strategy's differently. Every
// operation that names a variable still reaches the same variable in every
// process, in services mode and in training mode.
int services_ids(strategy& s) {
  const int rank = s.process_rank();
  if (rank == 0)
    for (const char* name : {"a", "b"})
      must(s.create_variable(name, tensor::scalar<float>(0),
                             synchronization::on_write, aggregation::sum),
           name);
  auto a = await_variable(s, "a");
  auto b = await_variable(s, "b");
  if (rank == 1) {
    must(s.assign(a, 5.0), "assign a");
    must(s.assign(b, 7.0), "assign b");
    auto c = must(s.create_variable("c", tensor::from_list<float>({1, 2}),
                                    synchronization::on_write,
                                    aggregation::sum),
                  "create c");
    must(s.assign_add(c, tensor::from_list<float>({1, 1})), "assign_add c");
    must(s.create_variable("go", tensor::scalar<float>(1),
                           synchronization::on_write, aggregation::sum),
         "create go");
  }
  await_variable(s, "go");
  auto c = await_variable(s, "c");
  check(floats(s, a) == std::vector<float>{5}, "a holds what process 1 "
                                               "assigned to it");
  check(floats(s, b) == std::vector<float>{7}, "b holds what process 1 "
                                               "assigned to it");
  check(floats(s, c) == std::vector<float>{2, 3}, "c, created by process 1");
  // Everyone has read; process 1 destroys a, by its own id.
  meet(s, "read");
  if (rank == 1) {
    must(s.destroy(a), "destroy a");
    must(s.create_variable("gone", tensor::scalar<float>(1),
                           synchronization::on_write, aggregation::sum),
         "create gone");
  }
  await_variable(s, "gone");
  check(has_code(s.lookup("a").error(), errc::unknown_variable),
        "a is destroyed here too");
  check(floats(s, b) == std::vector<float>{7}, "b is still there");
  meet(s, "left");
  std::printf("process %d: services ids done\n", rank);
  return failures == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4)
    return 2;
  std::string scenario = argv[1];
  int local = std::atoi(argv[2]);
  auto cluster = cluster_from_environment();
  if (!cluster || !*cluster) {
    std::fprintf(stderr, "no cluster in the environment\n");
    return 2;
  }
  rank_ = (*cluster)->rank;
  strategy_options opts;
  opts.devices.clear();
  for (int i = 0; i < local; ++i)
    opts.devices.push_back("cpu:" + std::to_string(i));
  opts.scheduler_threads = 2;
  opts.cluster = **cluster;
  if (scenario == "desync") // a step that throws fails the step only
    opts.step_exception = on_step_exception::fail_step;
  if (scenario == "hang_dumps") // M8: automatic dumps into the directory
    opts.flight_dump_dir = argv[3];
  // services_ids: process 1's other strategy numbers variables first.
  std::optional<strategy> other;
  if (scenario == "services_ids" && rank_ == 1) {
    strategy_options alone;
    alone.devices = {"cpu:0"};
    alone.scheduler_threads = 1;
    other.emplace(must(strategy::create(alone), "the other strategy"));
    for (const char* name : {"x", "y", "z"})
      must(other->create_variable(name, tensor::scalar<float>(0),
                                  synchronization::on_write,
                                  aggregation::sum),
           "the other strategy's variable");
  }
  auto s = strategy::create(opts);
  // Scenarios in which joining must fail with `code`, saying `words`.
  auto refused = [&](errc code, const char* words) {
    bool ok = !s && has_code(s.error(), code)
              && message_of(s.error()).find(words) != std::string::npos;
    std::printf("process %d: %s\n", rank_,
                s ? "joined" : describe(s.error()).c_str());
    return ok ? 0 : 1;
  };
  if (scenario == "mixed")
    return refused(errc::invalid_argument, "same mode");
  if (scenario == "mixed_transport")
    return refused(errc::invalid_argument, "same transport");
  if (scenario == "absent")
    return refused(errc::timeout, "never arrived");
  if (scenario == "arbiter_mismatch")
    return refused(errc::invalid_argument, "the same arbiter");
  // Process 0 and the others hold different cluster tokens.
  if (scenario == "wrong_token")
    return rank_ == 0 ? refused(errc::timeout, "never arrived")
                      : refused(errc::invalid_argument, "cluster token");
  if (!s) {
    std::fprintf(stderr, "process %d: create: %s\n", rank_,
                 describe(s.error()).c_str());
    return 1;
  }
  int rc = 2;
  if (scenario == "rules")
    rc = rules(*s);
  else if (scenario == "checkpoint" && argc == 4)
    rc = checkpoint(*s, argv[3]);
  else if (scenario == "desync")
    rc = desync(*s);
  else if (scenario == "concurrent")
    rc = concurrent(*s);
  else if (scenario == "services" && argc == 4)
    rc = services(*s, argv[3]);
  else if (scenario == "waits")
    rc = waits(*s);
  else if (scenario == "services_lost")
    rc = services_lost(*s);
  else if (scenario == "training_stopped")
    rc = training_stopped(*s);
  else if (scenario == "hang_report" && argc == 4)
    rc = hang_report(*s, argv[3]);
  else if (scenario == "hang_report_services" && argc == 4)
    rc = hang_report_services(*s, argv[3]);
  else if (scenario == "hang_dumps" && argc == 4)
    rc = hang_dumps(*s, argv[3]);
  else if (scenario == "services_stopped")
    rc = services_stopped(*s);
  else if (scenario == "services_ids")
    rc = services_ids(*s);
  else if (scenario == "services_fenced")
    rc = services_fenced(*s);
  else if (scenario == "killed" && argc == 4)
    rc = killed(*s, argv[3]);
  else if (scenario == "die" || scenario == "stop")
    rc = lose_one(*s, scenario == "stop");
  else if (scenario == "clean_exit")
    rc = clean_exit(*s);
  std::fflush(stdout);
  std::fflush(stderr);
  return rc; // the strategy shuts down (the harness's deadline bounds it)
}
