// The joiner of process_group (sync/transport/process_group.hpp): rank 0 serves the
// rendezvous store over CAF's network layer, behind a gate that admits only
// processes that prove the cluster token, every rank joins a Gloo full mesh
// through it, and the ranks exchange their replica counts. The data plane
// is chosen once, here: a shared memory segment (sync/shm) when every rank
// runs on one host, which rank 0 creates and names over Gloo, else the Gloo
// mesh itself. The control plane (cluster_control_plane.hpp: the
// sequencer's links, departures, health) stays on CAF's network layer.
// Registered as the process group joiner when this library is linked.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/logger.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "actors/cluster/cluster_control_plane.hpp"
#include "actors/cluster/control_connections.hpp"
#include "actors/cluster/arbiter.hpp"
#include "actors/cluster/operation_sequencer_actor.hpp"
#include "actors/cluster/peer_handshake.hpp"
#include "actors/cluster/rendezvous_gate.hpp"
#include "actors/cluster/rendezvous_store_actor.hpp"
#include "core/logging.hpp"
#include "sync/gloo/gloo_group.hpp"
#include "sync/transport/process_group.hpp"
#include "sync/shm/shared_memory_group.hpp"
#include "varsync/config.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace {

using clock = std::chrono::steady_clock;

std::chrono::milliseconds left_until(clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
    deadline - clock::now());
  return std::max(left, std::chrono::milliseconds{1});
}

// The data plane chosen at the join: the shared memory segment or the Gloo
// mesh, behind the control plane's health (a process that left fails every
// later collective at once, not at the transport's deadline; one already
// waiting keeps waiting for it).
class joined_transport final : public data_transport {
public:
  /// `local`: the segment that carries the data, or null for the mesh.
  joined_transport(std::unique_ptr<gloo_group> mesh,
                   std::unique_ptr<shared_memory_group> local,
                   std::shared_ptr<group_health> health, std::string text)
    : health_(std::move(health)), text_(std::move(text)) {
    if (local) {
      mesh_ = std::move(mesh); // kept open, unused
      chosen_ = std::move(local);
    } else {
      chosen_ = std::move(mesh);
    }
  }

  int rank() const override { return chosen_->rank(); }
  int size() const override { return chosen_->size(); }
  std::string describe() const override { return text_; }

  // The process collective actor's thread blocks SIGPIPE, whichever
  // transport carries the data (the mesh's sockets stay open).
  void block_signals() override { gloo_group::block_sigpipe(); }

  caf::error all_reduce(reduce_op op, dtype type, void* data,
                        int64_t count) override {
    if (auto err = health_->failure())
      return err;
    return chosen_->all_reduce(op, type, data, count);
  }
  caf::error broadcast(void* data, size_t bytes, int root) override {
    if (auto err = health_->failure())
      return err;
    return chosen_->broadcast(data, bytes, root);
  }
  caf::error all_gather(const void* in, void* out, size_t bytes) override {
    if (auto err = health_->failure())
      return err;
    return chosen_->all_gather(in, out, bytes);
  }

private:
  // Destroyed in reverse: the segment before the mesh.
  std::unique_ptr<gloo_group> mesh_;
  std::unique_ptr<data_transport> chosen_;
  std::shared_ptr<group_health> health_;
  std::string text_;
};

// Rank 0 serves the store behind its rendezvous gate: CAF listens on no
// port of its own.
caf::expected<rendezvous_store_actor>
serve_store(control_system& control, const cluster_spec& spec,
            std::shared_ptr<control_connections> connections,
            std::chrono::milliseconds handshake_timeout) {
  auto& sys = control.sys();
  auto store = spawn_rendezvous_store(sys);
  control.on_destroy([store] {
    caf::anon_send_exit(store, caf::exit_reason::user_shutdown);
  });
  rendezvous_gate_options opts;
  opts.host = spec.rendezvous_host;
  opts.port = spec.rendezvous_port;
  opts.token = spec.cluster_token;
  opts.handshake_timeout = handshake_timeout;
  opts.max_connections = static_cast<size_t>(spec.world_size - 1)
                         + rendezvous_gate_limits::spare_connections;
  auto gate = rendezvous_gate::open(
    std::move(opts), std::move(connections),
    caf::actor_cast<caf::strong_actor_ptr>(store),
    sys.message_types<rendezvous_store_actor>());
  if (!gate)
    return make_error(errc::invalid_argument,
                      "rank 0 cannot serve the rendezvous: "
                        + message_of(gate.error()));
  if (!(*gate)->loopback() && spec.cluster_token.empty())
    log()->warn("the rendezvous at {}:{} is open to every process that "
                "reaches it: set a cluster token (VARSYNC_CLUSTER_TOKEN, "
                "cluster_spec::cluster_token)",
                spec.rendezvous_host, spec.rendezvous_port);
  std::shared_ptr<rendezvous_gate> held{std::move(*gate)};
  control.on_destroy([held] { held->stop(); });
  return store;
}

// The other ranks prove the cluster token to process 0's gate and hand the
// connection to CAF, retrying with backoff until the deadline itself (rank
// 0 may start later than they do, up to the last moment, or turn them away
// while it is full: the backoff is short and never sleeps past it).
caf::expected<rendezvous_store_actor>
join_store(control_system& control, const cluster_spec& spec,
           control_connections& connections, clock::time_point deadline) {
  auto& sys = control.sys();
  const auto where = spec.rendezvous_host + ":"
                     + std::to_string(spec.rendezvous_port);
  auto backoff = std::chrono::milliseconds{20};
  std::string last;
  bool stalled = false;
  for (;;) {
    auto attempt = prove_to_gate(spec.rendezvous_host, spec.rendezvous_port,
                                 spec.cluster_token, deadline);
    if (attempt.fd >= 0) {
      auto remote = connections.open(attempt.fd, spec.rendezvous_port,
                                     left_until(deadline));
      if (remote && remote->actor
          && sys.assignable<rendezvous_store_actor>(remote->interface))
        return caf::actor_cast<rendezvous_store_actor>(
          std::move(remote->actor));
      last = remote ? "process 0 serves no rendezvous store there"
                    : sys.render(remote.error());
      // Admitted, then silent in CAF's handshake until our deadline.
      stalled = !remote && remote.error() == caf::sec::request_timeout;
    } else {
      // A wrong token, or not varsync's protocol: trying again won't help.
      if (!attempt.retry && !attempt.stalled)
        return make_error(errc::invalid_argument,
                          "rank " + std::to_string(spec.rank)
                            + " cannot join the rendezvous at " + where
                            + ": " + message_of(attempt.error));
      last = message_of(attempt.error);
      stalled = attempt.stalled;
    }
    const auto now = clock::now();
    if (stalled || now >= deadline)
      break;
    std::this_thread::sleep_for(
      std::min<clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds{200});
  }
  return make_error(errc::timeout,
                    "rank " + std::to_string(spec.rank)
                      + " could not reach the rendezvous at " + where
                      + " within " + std::to_string(spec.join_timeout.count())
                      + (stalled ? " ms (a program there accepted the "
                                   "connection but never completed the "
                                   "handshake): "
                                 : " ms (rank 0 never served it): ")
                      + last);
}

caf::expected<rendezvous_store_actor>
reach_store(control_system& control, const cluster_spec& spec,
            clock::time_point deadline) {
  const auto handshake_timeout
    = std::min(spec.join_timeout, rendezvous_gate_limits::handshake_timeout);
  auto connections = std::make_shared<control_connections>(control.sys(),
                                                           handshake_timeout);
  // Registered first, run last: after the gate stopped, before the system
  // goes.
  control.on_destroy([connections] { connections->release(); });
  if (spec.rank == 0)
    return serve_store(control, spec, connections, handshake_timeout);
  return join_store(control, spec, *connections, deadline);
}

// Every rank announces itself; a rendezvous that times out names the ranks
// that never arrived.
caf::error await_ranks(caf::actor_system& sys, rendezvous_store_actor store,
                       const cluster_spec& spec, clock::time_point deadline) {
  const std::string prefix = spec.group_name + "/arrived/";
  caf::scoped_actor self{sys};
  caf::error failed;
  self->request(store, left_until(deadline), store_set_atom::value,
                prefix + std::to_string(spec.rank),
                std::vector<char>{'1'})
    .receive([](ok_atom) {},
             [&](caf::error& err) { failed = std::move(err); });
  if (failed)
    return make_error(errc::replica_failed,
                      "rank " + std::to_string(spec.rank)
                        + ": the rendezvous store failed: "
                        + sys.render(failed));
  std::vector<int> missing;
  for (int r = 0; r < spec.world_size; ++r) {
    bool arrived = false;
    self->request(store, left_until(deadline), store_get_atom::value,
                  prefix + std::to_string(r))
      .receive([&](std::vector<char>&) { arrived = true; },
               [](caf::error&) {});
    if (!arrived)
      missing.push_back(r);
  }
  if (missing.empty())
    return {};
  std::string names;
  for (auto r : missing)
    names += (names.empty() ? "" : ", ") + std::to_string(r);
  return make_error(errc::timeout,
                    "the rendezvous of " + std::to_string(spec.world_size)
                      + " processes at " + spec.rendezvous_host + ":"
                      + std::to_string(spec.rendezvous_port)
                      + " timed out after "
                      + std::to_string(spec.join_timeout.count())
                      + " ms: rank(s) " + names + " never arrived");
}

caf::error control_failure(const cluster_spec& spec, const std::string& what) {
  return make_error(errc::replica_failed,
                    "rank " + std::to_string(spec.rank) + ": control plane: "
                      + what);
}

// Rank 0 runs the sequencer and keeps its handle in the store; every other
// rank gets it over the connection it holds to the store (no connection of
// its own).
caf::expected<operation_sequencer_actor>
publish_or_fetch_sequencer(control_system& control,
                           rendezvous_store_actor store,
                           const cluster_spec& spec,
                           clock::time_point deadline,
                           cluster_control_plane& pg, sequencer_lead lead) {
  auto& sys = control.sys();
  const std::string key = spec.group_name + "/sequencer";
  caf::scoped_actor self{sys};
  caf::error failed;
  if (spec.rank == 0) {
    pg.gone = std::make_shared<departures>(spec.world_size - 1);
    auto sequencer = spawn_operation_sequencer(sys, spec.world_size, pg.gone,
                                               std::move(lead));
    control.on_destroy([sequencer] {
      caf::anon_send_exit(sequencer, caf::exit_reason::user_shutdown);
    });
    self->request(store, left_until(deadline), store_set_actor_atom::value,
                  key, caf::actor_cast<caf::strong_actor_ptr>(sequencer))
      .receive([](ok_atom) {},
               [&](caf::error& err) { failed = std::move(err); });
    if (failed)
      return control_failure(spec, "the rendezvous store failed: "
                                     + sys.render(failed));
    return sequencer;
  }
  caf::strong_actor_ptr handle;
  self->request(store, left_until(deadline), store_get_actor_atom::value, key)
    .receive([&](caf::strong_actor_ptr& h) { handle = std::move(h); },
             [&](caf::error& err) { failed = std::move(err); });
  if (failed)
    return control_failure(spec, "rank 0 kept no sequencer in the store: "
                                   + sys.render(failed));
  if (!handle)
    return control_failure(spec, "the rendezvous store holds no sequencer");
  return caf::actor_cast<operation_sequencer_actor>(std::move(handle));
}

// This process's link to the sequencer: its endpoint, the health it
// reports to, and the orderly leave said before any connection closes.
void link_to_sequencer(control_system& control,
                       operation_sequencer_actor sequencer,
                       const cluster_spec& spec, cluster_control_plane& pg) {
  auto& sys = control.sys();
  pg.endpoint = std::make_shared<sequence_endpoint>(spec.rank == 0);
  pg.endpoint->on_lost([health = pg.health](caf::error reason, bool orderly) {
    // A process that shut its strategy down is how every run ends: the
    // next cross-process call still fails with the reason.
    if (orderly)
      log()->info("{}", describe(reason));
    else
      log()->warn("{}", describe(reason));
    health->lose(std::move(reason));
  });
  auto link = spawn_sequence_link(sys, sequencer, pg.endpoint);
  // This process's own exit: its endpoint learns it before the sequencer
  // (process 0's) stops, and logs nothing.
  control.on_destroy([link, endpoint = pg.endpoint] {
    endpoint->fail(make_error(errc::shut_down, "this process left the "
                                               "strategy"));
    caf::anon_send_exit(link, caf::exit_reason::user_shutdown);
  });
  pg.link = link;
  // A connection that closes before the leave is said reads as a crash to
  // the others. The strategy's shutdown says it (process_group::leave);
  // the teardown, run first (registered last), says it if nothing did.
  auto said = std::make_shared<std::atomic<bool>>(false);
  std::optional<operation_sequencer_actor> own;
  if (spec.rank == 0)
    own = sequencer;
  pg.leave_in_order = [said, sysp = &sys, link, own] {
    if (said->exchange(true))
      return;
    {
      caf::scoped_actor self{*sysp};
      if (own) // process 0: every other process hears it shuts down
        self->request(*own, std::chrono::seconds{2},
                      sequence_close_atom::value)
          .receive([](ok_atom) {}, [](caf::error&) {});
      self->request(link, std::chrono::seconds{2}, sequence_leave_atom::value)
        .receive([](ok_atom) {}, [](caf::error&) {});
    }
    // A scoped actor ties the calling thread to the system's logger, which
    // would keep the system from being destroyed (CAF 0.17).
    if (caf::logger::current_logger() == &sysp->logger())
      caf::logger::set_current_actor_system(nullptr);
  };
  control.on_destroy(pg.leave_in_order);
}

// Joins the sequencer's order; on failure, names the ranks that never got
// as far as linking (marked in the store).
caf::error join_in_order(caf::actor_system& sys, rendezvous_store_actor store,
                         operation_sequencer_actor sequencer,
                         const cluster_spec& spec, clock::time_point deadline,
                         const sequence_link_actor& link) {
  const std::string linking = spec.group_name + "/linking/";
  caf::scoped_actor self{sys};
  self->request(store, left_until(deadline), store_set_atom::value,
                linking + std::to_string(spec.rank), std::vector<char>{'1'})
    .receive([](ok_atom) {}, [](caf::error&) {});
  caf::error failed;
  self->request(sequencer, left_until(deadline), sequence_join_atom::value,
                static_cast<int32_t>(spec.rank), link)
    .receive([](ok_atom) {},
             [&](caf::error& err) { failed = std::move(err); });
  if (!failed)
    return {};
  std::string missing;
  for (int r = 0; r < spec.world_size; ++r) {
    bool linked = false;
    self->request(store, std::chrono::milliseconds{200}, store_get_atom::value,
                  linking + std::to_string(r))
      .receive([&](std::vector<char>&) { linked = true; },
               [](caf::error&) {});
    if (!linked)
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  }
  return control_failure(
    spec, "joining the sequencer failed: " + sys.render(failed)
            + (missing.empty()
                 ? std::string{" (every rank got as far as linking)"}
                 : " (rank(s) " + missing + " never got as far as linking)"));
}

// Done once every rank has linked, so that no operation is ordered before
// a process can receive it. In training mode the sequencer orders nothing:
// it watches the links, and tells every process when another one left.
caf::error join_sequencer(control_system& control,
                          rendezvous_store_actor store,
                          const cluster_spec& spec, clock::time_point deadline,
                          cluster_control_plane& pg, sequencer_lead lead) {
  auto sequencer = publish_or_fetch_sequencer(control, store, spec, deadline,
                                              pg, std::move(lead));
  if (!sequencer)
    return std::move(sequencer.error());
  link_to_sequencer(control, *sequencer, spec, pg);
  return join_in_order(control.sys(), store, *sequencer, spec, deadline,
                       *pg.link);
}

// Moves the collectives to a shared memory segment when every rank can map
// rank 0's (they share a host), unless the spec asks for Gloo. Every rank
// takes the same decision: rank 0 names the segment over Gloo and the ranks
// agree on the outcome over Gloo. Runs on the joining thread, SIGPIPE
// blocked.
// The segment when every rank mapped it, else null (Gloo carries the data).
caf::expected<std::unique_ptr<shared_memory_group>>
attach_shared_memory(const cluster_spec& spec, gloo_group& mesh,
                     std::shared_ptr<group_health> health) {
  if (spec.transport == host_transport::gloo || spec.world_size < 2)
    return nullptr;
  shared_memory_group_options opts;
  opts.rank = spec.rank;
  opts.size = spec.world_size;
  opts.timeout = spec.operation_timeout;
  opts.abandon = [health] { return health->failure(); };
  caf::expected<std::unique_ptr<shared_memory_group>> local{nullptr};
  std::vector<char> name(256, '\0');
  if (spec.rank == 0) {
    local = shared_memory_group::create(opts);
    if (local)
      std::copy_n((*local)->name().begin(),
                  std::min((*local)->name().size(), name.size() - 1),
                  name.begin());
  }
  if (auto err = mesh.broadcast(name.data(), name.size(), 0))
    return err;
  if (spec.rank != 0) {
    if (name[0] != '\0')
      local = shared_memory_group::open(name.data(), opts);
    else
      local = make_error(errc::invalid_argument,
                         "rank 0 could not create a segment");
  }
  int32_t ok = local && *local ? 1 : 0;
  if (auto err = mesh.all_reduce(reduce_op::min, dtype::int32, &ok, 1))
    return err;
  if (ok == 1) {
    if (spec.rank == 0)
      (*local)->unlink(); // mapped everywhere: no name left behind
    return std::move(*local);
  }
  std::string why = local ? "another rank could not map rank 0's segment"
                          : describe(local.error());
  if (spec.transport == host_transport::shared_memory)
    return make_error(errc::invalid_argument,
                      "rank " + std::to_string(spec.rank)
                        + ": the shared_memory transport needs every process "
                          "on one host: "
                        + why);
  log()->info("rank {}: collectives over Gloo (no shared memory: {})",
              spec.rank, why);
  return nullptr;
}

// P16: with an arbiter, process 0 takes the lead of a new epoch and every
// other process finds that epoch, held by process 0, in the arbiter it
// names (so they name one arbiter, and a host arbiter's processes share a
// host); the ranks agree on the outcome over the mesh. Process 0's lead, or the arbiter kept for later.
caf::expected<sequencer_lead> take_the_lead(const cluster_spec& spec,
                                            gloo_group& mesh,
                                            cluster_control_plane& pg) {
  if (spec.arbiter.empty())
    return sequencer_lead{};
  const auto name = spec.group_name + "@" + spec.rendezvous_host + ":"
                    + std::to_string(spec.rendezvous_port);
  const auto path = arbiter_location(spec.arbiter, name);
  caf::error mine;
  uint64_t epoch = 0;
  auto opened = open_arbiter(spec.arbiter, name, spec.rank,
                             spec.peer_timeout);
  if (!opened)
    mine = std::move(opened.error());
  else
    pg.arbiter = std::move(*opened);
  if (spec.rank == 0 && !mine) {
    auto taken = pg.arbiter->try_acquire();
    if (taken)
      epoch = *taken;
    else
      mine = make_error(errc::invalid_argument,
                        "rank 0 cannot take the lead (does another strategy "
                        "use the same arbiter?): "
                          + message_of(taken.error()));
  }
  if (auto err = mesh.broadcast(&epoch, sizeof(epoch), 0))
    return err;
  if (spec.rank != 0 && !mine) {
    auto lead = pg.arbiter->current();
    if (!lead)
      mine = std::move(lead.error());
    else if (epoch == 0 || lead->epoch != epoch || lead->rank != 0
             || !lead->alive)
      mine = make_error(
        errc::invalid_argument,
        "it finds in " + path + " epoch " + std::to_string(lead->epoch)
          + " of process " + std::to_string(lead->rank) + ", not epoch "
          + std::to_string(epoch)
          + " of process 0: every process must name the same arbiter (and "
            "run on one host for a host arbiter)");
  }
  int32_t ok = mine ? 0 : 1;
  if (auto err = mesh.all_reduce(reduce_op::min, dtype::int32, &ok, 1))
    return err;
  if (mine)
    return make_error(code_of(mine) == errc::none ? errc::invalid_argument
                                                  : code_of(mine),
                      "rank " + std::to_string(spec.rank) + ": arbiter "
                        + spec.arbiter + ": "
                        + (message_of(mine).empty() ? describe(mine)
                                                    : message_of(mine)));
  if (ok != 1)
    return make_error(errc::invalid_argument,
                      "rank " + std::to_string(spec.rank) + ": arbiter "
                        + spec.arbiter
                        + ": another process could not use it (its error "
                          "says why): every process must name the same "
                          "arbiter (and run on one host for a host "
                          "arbiter)");
  if (spec.rank != 0)
    return sequencer_lead{};
  log()->info("services mode: process 0 orders in epoch {} of the arbiter {}",
              epoch, path);
  return sequencer_lead{pg.arbiter, epoch};
}

// CAF 0.17 keeps a reference to the logger of the last system a thread
// spawned into (a scoped_actor does), and that system's destructor waits
// for it: the joining thread lets go of the control system's when it is
// done with it, or destroying the group would wait for itself.
struct forget_logger_on_exit {
  caf::actor_system* sys = nullptr;
  ~forget_logger_on_exit() {
    if (sys != nullptr && caf::logger::current_logger() == &sys->logger())
      caf::logger::set_current_actor_system(nullptr);
  }
};

// What each rank joined with, gathered over the mesh: its replica count,
// mode, whether its replicas have a GPU each, its transport and whether it
// names an arbiter; every rank must have the same mode, transport and
// arbiter.
struct join_facts {
  std::vector<int> per_rank;
  bool every_gpu_own = true;
};

caf::expected<join_facts> exchange_join_facts(const cluster_spec& spec,
                                              gloo_group& mesh,
                                              int local_replicas,
                                              bool one_gpu_per_replica) {
  std::vector<int32_t> counts(5 * static_cast<size_t>(spec.world_size));
  int32_t mine[5] = {local_replicas, static_cast<int32_t>(spec.mode),
                     one_gpu_per_replica ? 1 : 0,
                     static_cast<int32_t>(spec.transport),
                     spec.arbiter.empty() ? 0 : 1};
  if (auto err = mesh.all_gather(mine, counts.data(), sizeof(mine)))
    return err;
  join_facts facts;
  for (int r = 0; r < spec.world_size; ++r) {
    const auto* theirs = counts.data() + 5 * static_cast<size_t>(r);
    facts.per_rank.push_back(theirs[0]);
    auto mode = theirs[1];
    facts.every_gpu_own = facts.every_gpu_own && theirs[2] == 1;
    auto transport = theirs[3];
    if (mode != mine[1])
      return make_error(
        errc::invalid_argument,
        "rank " + std::to_string(spec.rank) + " joined in "
          + to_string(spec.mode) + " mode but rank " + std::to_string(r)
          + " in "
          + (mode == static_cast<int32_t>(cluster_mode::training)
                 || mode == static_cast<int32_t>(cluster_mode::services)
               ? to_string(static_cast<cluster_mode>(mode))
               : "an unknown")
          + " mode: every process must use the same mode");
    if (transport != mine[3])
      return make_error(
        errc::invalid_argument,
        "rank " + std::to_string(spec.rank) + " joined with the "
          + to_string(spec.transport) + " transport but rank "
          + std::to_string(r) + " with "
          + (transport >= 0 && transport <= 2
               ? to_string(static_cast<host_transport>(transport))
               : "an unknown one")
          + ": every process must use the same transport");
    if (theirs[4] != mine[4])
      return make_error(
        errc::invalid_argument,
        "rank " + std::to_string(spec.rank)
          + (mine[4] ? " names the arbiter " + spec.arbiter
                     : std::string{" names no arbiter"})
          + " but rank " + std::to_string(r)
          + (theirs[4] ? " names one" : " none")
          + ": every process must name the same arbiter");
  }
  return facts;
}

caf::expected<std::unique_ptr<gloo_group>>
join_mesh(const cluster_spec& spec, cluster_control_plane& plane,
          rendezvous_store_actor store, clock::time_point deadline) {
  gloo_group_options opts;
  opts.rank = spec.rank;
  opts.size = spec.world_size;
  opts.bind_host = spec.bind_host;
  opts.timeout = spec.operation_timeout;
  opts.join_timeout = left_until(deadline);
  opts.name = spec.group_name;
  return gloo_group::join(plane.control->sys(), std::move(store), opts);
}

caf::expected<process_membership> join_gloo(const cluster_spec& spec,
                                            int local_replicas,
                                            bool one_gpu_per_replica) {
  const auto deadline = clock::now() + spec.join_timeout;
  // Destroyed in reverse on every way out: the segment, the mesh, then the
  // control plane whose store the mesh joined through.
  auto plane = std::make_shared<cluster_control_plane>();
  plane->control = std::make_unique<control_system>(spec.peer_timeout);
  if (auto err = plane->control->start())
    return err;
  forget_logger_on_exit forget{&plane->control->sys()};
  auto store = reach_store(*plane->control, spec, deadline);
  if (!store)
    return std::move(store.error());
  if (auto err = await_ranks(plane->control->sys(), *store, spec, deadline))
    return err;
  auto mesh = join_mesh(spec, *plane, *store, deadline);
  if (!mesh)
    return std::move(mesh.error());
  caf::expected<join_facts> facts{join_facts{}};
  caf::expected<std::unique_ptr<shared_memory_group>> local{nullptr};
  caf::expected<sequencer_lead> lead{sequencer_lead{}};
  {
    // The caller's thread runs Gloo calls here: SIGPIPE blocked meanwhile,
    // the caller's mask back on every way out.
    struct sigpipe_blocked {
      sigset_t old = gloo_group::block_sigpipe();
      ~sigpipe_blocked() { gloo_group::restore_signals(old); }
    } blocked;
    facts = exchange_join_facts(spec, **mesh, local_replicas,
                                one_gpu_per_replica);
    if (!facts)
      return std::move(facts.error());
    local = attach_shared_memory(spec, **mesh, plane->health);
    if (!local)
      return std::move(local.error());
    lead = take_the_lead(spec, **mesh, *plane);
    if (!lead)
      return std::move(lead.error());
  }
  if (auto err = join_sequencer(*plane->control, *store, spec, deadline,
                                *plane, std::move(*lead)))
    return err;
  auto text = std::string{*local ? "shared memory (one host)"
                                 : "gloo over TCP"}
              + ", rank " + std::to_string(spec.rank) + " of "
              + std::to_string(spec.world_size) + " (rendezvous "
              + spec.rendezvous_host + ":"
              + std::to_string(spec.rendezvous_port) + ")";
  log()->info("joined {}", text);
  auto transport = std::make_shared<joined_transport>(
    std::move(*mesh), std::move(*local), plane->health, std::move(text));
  auto group = std::make_shared<process_group>(std::move(transport),
                                               std::move(plane));
  auto m = make_membership(std::move(group), std::move(facts->per_rank));
  m.mode = spec.mode;
  m.one_gpu_per_replica = facts->every_gpu_own;
  m.operation_timeout = spec.operation_timeout;
  return m;
}

struct registrar {
  registrar() { register_process_group_joiner(&join_gloo); }
};

registrar registered;

} // namespace

} // namespace varsync

// Referenced by the link options of varsync::distributed so that the linker
// keeps this file (and its registration) in static builds.
extern "C" void varsync_gloo_transport_anchor() {}
