// cluster_from_environment: the variables of varsync-run, torchrun, Open MPI
// and Slurm, and the errors for what does not describe a cluster.

#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "sync/transport/process_group.hpp"
#include "varsync/cluster_spec.hpp"
#include "varsync/error.hpp"

using namespace varsync;

namespace {

environment_reader env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto i = vars.find(name);
    if (i == vars.end())
      return std::nullopt;
    return i->second;
  };
}

} // namespace

TEST_CASE("cluster_spec: no launcher variable means no cluster") {
  auto c = cluster_from_environment(env({{"PATH", "/bin"}}));
  REQUIRE(c);
  CHECK(!c->has_value());
}

TEST_CASE("cluster_spec: varsync-run's variables") {
  auto c = cluster_from_environment(env({{"VARSYNC_RANK", "2"},
                                         {"VARSYNC_WORLD_SIZE", "4"},
                                         {"VARSYNC_LOCAL_RANK", "1"},
                                         {"VARSYNC_RENDEZVOUS", "10.0.0.7:29500"},
                                         {"VARSYNC_BIND", "10.0.0.9"},
                                         {"VARSYNC_TIMEOUT_MS", "1500"}}));
  REQUIRE(c);
  REQUIRE(c->has_value());
  auto& s = **c;
  CHECK(s.rank == 2);
  CHECK(s.world_size == 4);
  CHECK(s.local_rank == 1);
  CHECK(s.rendezvous_host == "10.0.0.7");
  CHECK(s.rendezvous_port == 29500);
  CHECK(s.bind_host == "10.0.0.9");
  CHECK(s.join_timeout.count() == 1500);
  CHECK(s.operation_timeout.count() == 1500);
  CHECK(s.mode == cluster_mode::training);
}

TEST_CASE("cluster_spec: VARSYNC_MODE picks training or services") {
  auto with_mode = [](const char* mode) {
    return cluster_from_environment(env({{"VARSYNC_RANK", "0"},
                                         {"VARSYNC_WORLD_SIZE", "2"},
                                         {"VARSYNC_RENDEZVOUS", "h:1"},
                                         {"VARSYNC_MODE", mode}}));
  };
  auto services = with_mode("services");
  REQUIRE(services);
  CHECK((*services)->mode == cluster_mode::services);
  auto training = with_mode("training");
  REQUIRE(training);
  CHECK((*training)->mode == cluster_mode::training);
  auto bad = with_mode("Services");
  REQUIRE(!bad);
  CHECK(has_code(bad.error(), errc::invalid_argument));
  CHECK(message_of(bad.error()).find("VARSYNC_MODE") != std::string::npos);
  CHECK(std::string{to_string(cluster_mode::services)} == "services");
}

TEST_CASE("cluster_spec: VARSYNC_HOST_TRANSPORT picks the transport") {
  auto with = [](const char* transport) {
    return cluster_from_environment(env({{"VARSYNC_RANK", "0"},
                                         {"VARSYNC_WORLD_SIZE", "2"},
                                         {"VARSYNC_RENDEZVOUS", "h:1"},
                                         {"VARSYNC_HOST_TRANSPORT",
                                          transport}}));
  };
  auto none = cluster_from_environment(env({{"VARSYNC_RANK", "0"},
                                            {"VARSYNC_WORLD_SIZE", "2"},
                                            {"VARSYNC_RENDEZVOUS", "h:1"}}));
  REQUIRE(none);
  CHECK((*none)->transport == host_transport::automatic);
  for (auto t : {host_transport::automatic, host_transport::gloo,
                 host_transport::shared_memory}) {
    auto c = with(to_string(t));
    REQUIRE(c);
    CHECK((*c)->transport == t);
  }
  auto bad = with("tcp");
  REQUIRE(!bad);
  CHECK(has_code(bad.error(), errc::invalid_argument));
  CHECK(message_of(bad.error()).find("VARSYNC_HOST_TRANSPORT")
        != std::string::npos);
  cluster_spec spec;
  spec.transport = static_cast<host_transport>(7);
  auto err = validate(spec);
  CHECK(has_code(err, errc::invalid_argument));
  CHECK(message_of(err).find("transport 7") != std::string::npos);
}

TEST_CASE("cluster_spec: VARSYNC_PEER_TIMEOUT_MS sets the peer timeout, 0 "
          "turns heartbeats off, under 100 ms is refused") {
  auto with = [](const char* ms) {
    return cluster_from_environment(env({{"VARSYNC_RANK", "0"},
                                         {"VARSYNC_WORLD_SIZE", "2"},
                                         {"VARSYNC_RENDEZVOUS", "h:1"},
                                         {"VARSYNC_PEER_TIMEOUT_MS", ms}}));
  };
  auto two = with("2000");
  REQUIRE(two);
  CHECK((*two)->peer_timeout == std::chrono::milliseconds{2000});
  auto off = with("0");
  REQUIRE(off);
  CHECK((*off)->peer_timeout.count() == 0);
  for (const char* bad : {"50", "-1", "soon"}) {
    auto refused = with(bad);
    REQUIRE(!refused);
    CHECK(has_code(refused.error(), errc::invalid_argument));
    // The error names the variable, like every other bad value.
    CHECK(message_of(refused.error()).find("VARSYNC_PEER_TIMEOUT_MS='"
                                           + std::string{bad} + "'")
          != std::string::npos);
  }
  cluster_spec spec;
  CHECK(spec.peer_timeout == std::chrono::milliseconds{5000});
  spec.world_size = 2;
  spec.rendezvous_port = 1;
  spec.peer_timeout = std::chrono::milliseconds{99};
  auto err = validate(spec);
  CHECK(has_code(err, errc::invalid_argument));
  CHECK(message_of(err).find("peer_timeout") != std::string::npos);
}

TEST_CASE("cluster_spec: a group name must have 1 to 128 bytes") {
  cluster_spec spec;
  spec.world_size = 2;
  spec.rendezvous_port = 1;
  CHECK_FALSE(validate(spec));
  spec.group_name = std::string(128, 'g');
  CHECK_FALSE(validate(spec));
  for (auto bad : {std::string{}, std::string(129, 'g')}) {
    spec.group_name = bad;
    auto err = validate(spec);
    CHECK(has_code(err, errc::invalid_argument));
    CHECK(message_of(err).find("group name") != std::string::npos);
  }
}

TEST_CASE("cluster_spec: VARSYNC_CLUSTER_TOKEN sets the cluster token, and an "
          "empty, short or long one is refused without being quoted") {
  auto with = [](std::optional<std::string> token) {
    std::map<std::string, std::string> vars{{"VARSYNC_RANK", "1"},
                                            {"VARSYNC_WORLD_SIZE", "2"},
                                            {"VARSYNC_RENDEZVOUS", "h:1"}};
    if (token)
      vars["VARSYNC_CLUSTER_TOKEN"] = *token;
    return cluster_from_environment(env(vars));
  };
  auto none = with(std::nullopt);
  REQUIRE(none);
  CHECK((*none)->cluster_token.empty());
  const std::string good = "a-token-of-21-bytes!!";
  auto set = with(good);
  REQUIRE(set);
  CHECK((*set)->cluster_token == good);
  for (auto bad : {std::string{}, std::string{"short-secret"},
                   std::string(1025, 'x')}) {
    auto refused = with(bad);
    REQUIRE(!refused);
    CHECK(has_code(refused.error(), errc::invalid_argument));
    auto text = message_of(refused.error());
    CHECK(text.find("VARSYNC_CLUSTER_TOKEN") != std::string::npos);
    if (!bad.empty())
      CHECK(text.find(bad) == std::string::npos);
  }
  cluster_spec spec;
  spec.world_size = 2;
  spec.rendezvous_port = 1;
  spec.cluster_token = std::string(16, 't');
  CHECK_FALSE(validate(spec));
  spec.cluster_token = std::string(15, 't');
  auto err = validate(spec);
  CHECK(has_code(err, errc::invalid_argument));
  CHECK(message_of(err).find("cluster_token has 15 bytes")
        != std::string::npos);
}

TEST_CASE("cluster_spec: torchrun's variables, and IPv6 in brackets") {
  auto c = cluster_from_environment(env({{"RANK", "1"},
                                         {"WORLD_SIZE", "2"},
                                         {"LOCAL_RANK", "1"},
                                         {"MASTER_ADDR", "node0"},
                                         {"MASTER_PORT", "29400"}}));
  REQUIRE(c);
  REQUIRE(c->has_value());
  CHECK((*c)->rank == 1);
  CHECK((*c)->rendezvous_host == "node0");
  CHECK((*c)->rendezvous_port == 29400);
  auto v6 = cluster_from_environment(env({{"VARSYNC_RANK", "0"},
                                          {"VARSYNC_WORLD_SIZE", "2"},
                                          {"VARSYNC_RENDEZVOUS", "[::1]:7000"}}));
  REQUIRE(v6);
  CHECK((*v6)->rendezvous_host == "::1");
  CHECK((*v6)->rendezvous_port == 7000);
}

TEST_CASE("cluster_spec: Open MPI and Slurm need a rendezvous address") {
  auto mpi = cluster_from_environment(
    env({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
         {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}}));
  REQUIRE(!mpi);
  CHECK(has_code(mpi.error(), errc::invalid_argument));
  CHECK(message_of(mpi.error()).find("Open MPI") != std::string::npos);
  CHECK(message_of(mpi.error()).find("VARSYNC_RENDEZVOUS")
        != std::string::npos);
  auto slurm = cluster_from_environment(
    env({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"},
         {"VARSYNC_RENDEZVOUS", "head:6000"}}));
  REQUIRE(slurm);
  CHECK((*slurm)->rank == 1);
  CHECK((*slurm)->world_size == 2);
  CHECK((*slurm)->rendezvous_host == "head");
  // One process needs no address.
  auto single = cluster_from_environment(
    env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}));
  REQUIRE(single);
  CHECK((*single)->world_size == 1);
}

TEST_CASE("cluster_spec: varsync-run's variables win over the others") {
  auto c = cluster_from_environment(
    env({{"VARSYNC_RANK", "0"}, {"VARSYNC_WORLD_SIZE", "2"},
         {"VARSYNC_RENDEZVOUS", "127.0.0.1:5000"}, {"RANK", "1"},
         {"WORLD_SIZE", "3"}, {"OMPI_COMM_WORLD_RANK", "2"}}));
  REQUIRE(c);
  CHECK((*c)->rank == 0);
  CHECK((*c)->world_size == 2);
}

TEST_CASE("cluster_spec: bad values name the variable") {
  auto bad = [](std::map<std::string, std::string> vars, const char* name) {
    auto c = cluster_from_environment(env(std::move(vars)));
    REQUIRE(!c);
    CHECK(has_code(c.error(), errc::invalid_argument));
    CHECK(message_of(c.error()).find(name) != std::string::npos);
  };
  bad({{"RANK", "x"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}, "RANK");
  bad({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}, "RANK");
  bad({{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE");
  bad({{"RANK", "0"}}, "WORLD_SIZE");
  bad({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}},
      "MASTER_PORT");
  bad({{"VARSYNC_RANK", "0"}, {"VARSYNC_WORLD_SIZE", "2"},
       {"VARSYNC_RENDEZVOUS", "nohost"}},
      "VARSYNC_RENDEZVOUS");
  bad({{"VARSYNC_RANK", "0"}, {"VARSYNC_WORLD_SIZE", "2"},
       {"VARSYNC_RENDEZVOUS", "h:1"}, {"VARSYNC_TIMEOUT_MS", "-5"}},
      "VARSYNC_TIMEOUT_MS");
  bad({{"VARSYNC_RANK", "-1"}, {"VARSYNC_WORLD_SIZE", "2"}}, "VARSYNC_RANK");
}

TEST_CASE("cluster_spec: validate names the field") {
  cluster_spec s;
  s.world_size = 2;
  CHECK(message_of(validate(s)).find("rendezvous port") != std::string::npos);
  s.rendezvous_port = 5000;
  CHECK(!validate(s));
  s.rank = 2;
  CHECK(message_of(validate(s)).find("rank 2") != std::string::npos);
  s.rank = 0;
  s.operation_timeout = std::chrono::milliseconds{0};
  CHECK(has_code(validate(s), errc::invalid_argument));
  s.operation_timeout = std::chrono::milliseconds{10};
  s.mode = static_cast<cluster_mode>(7);
  CHECK(message_of(validate(s)).find("mode 7") != std::string::npos);
}

TEST_CASE("cluster_spec: VARSYNC_ARBITER names the arbiter, and validate "
          "checks its form, its mode and the peer timeout it leases by") {
  auto with = [](const char* arbiter) {
    return cluster_from_environment(env({{"VARSYNC_RANK", "0"},
                                         {"VARSYNC_WORLD_SIZE", "2"},
                                         {"VARSYNC_RENDEZVOUS", "h:1"},
                                         {"VARSYNC_MODE", "services"},
                                         {"VARSYNC_ARBITER", arbiter}}));
  };
  auto host = with("host");
  REQUIRE(host);
  CHECK((*host)->arbiter == "host");
  CHECK(!validate(**host));
  auto file = with("host:/dev/shm/x");
  REQUIRE(file);
  CHECK((*file)->arbiter == "host:/dev/shm/x");
  for (const char* good : {"etcd:http://127.0.0.1:2379",
                           "etcd:http://etcd.local:2379/my/lead"}) {
    INFO(good);
    auto c = with(good);
    REQUIRE(c);
    CHECK((*c)->arbiter == good);
    CHECK(!validate(**c));
  }
  for (const char* bad :
       {"", "etcd", "host:", "host:relative", "Host", "etcd:https://h:2379",
        "etcd:http://h", "etcd:http://h:0", "etcd:http://:2379",
        "etcd:http://h:65536", "etcd:http://h:23x9"}) {
    INFO(bad);
    auto c = with(bad);
    REQUIRE(!c);
    CHECK(has_code(c.error(), errc::invalid_argument));
    CHECK(message_of(c.error()).find("VARSYNC_ARBITER") != std::string::npos);
  }
  cluster_spec s;
  s.world_size = 2;
  s.rendezvous_port = 5000;
  s.mode = cluster_mode::services;
  s.arbiter = "host";
  CHECK(!validate(s));
  s.arbiter = "host:tmp/x";
  CHECK(message_of(validate(s)).find("absolute path") != std::string::npos);
  s.arbiter = "host";
  s.peer_timeout = std::chrono::milliseconds{0};
  CHECK(message_of(validate(s)).find("peer timeout") != std::string::npos);
  s.peer_timeout = std::chrono::milliseconds{1000};
  s.mode = cluster_mode::training;
  CHECK(message_of(validate(s)).find("training mode") != std::string::npos);
}

TEST_CASE("process_group: global replica ids run over the ranks in order") {
  struct fake : data_transport {
    int rank() const override { return 1; }
    int size() const override { return 3; }
    std::string describe() const override { return "fake"; }
    caf::error all_reduce(reduce_op, dtype, void*, int64_t) override {
      return {};
    }
    caf::error broadcast(void*, size_t, int) override { return {}; }
    caf::error all_gather(const void*, void*, size_t) override { return {}; }
  };
  auto m = make_membership(
    std::make_shared<process_group>(std::make_shared<fake>()), {2, 3, 1});
  CHECK(m.first_replica == 2);
  CHECK(m.total_replicas == 6);
}

TEST_CASE("process_group: without the transport linked, joining says what to "
          "link") {
  cluster_spec s;
  s.world_size = 2;
  s.rendezvous_port = 5000;
  auto m = join_process_group(s, 1);
  REQUIRE(!m);
  CHECK(has_code(m.error(), errc::invalid_argument));
  CHECK(message_of(m.error()).find("varsync::distributed")
        != std::string::npos);
}
