#include "varsync/cluster_spec.hpp"

#include <cstdlib>
#include <limits>
#include <string>

#include "varsync/error.hpp"

namespace varsync {

namespace {

// The variables one launcher sets.
struct launcher_vars {
  const char* launcher;
  const char* rank;
  const char* world_size;
  const char* local_rank;
};

constexpr launcher_vars launchers[] = {
  {"varsync-run", "VARSYNC_RANK", "VARSYNC_WORLD_SIZE", "VARSYNC_LOCAL_RANK"},
  {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
  {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
   "OMPI_COMM_WORLD_LOCAL_RANK"},
  {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

caf::expected<long long> parse_integer(const std::string& name,
                                       const std::string& text, long long lo,
                                       long long hi) {
  auto bad = [&] {
    return make_error(errc::invalid_argument,
                      "environment variable " + name + "='" + text
                        + "': expected an integer in [" + std::to_string(lo)
                        + ", " + std::to_string(hi) + "]");
  };
  if (text.empty() || text.size() > 18)
    return bad();
  long long v = 0;
  size_t i = 0;
  for (; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9')
      return bad();
    v = v * 10 + (text[i] - '0');
  }
  if (v < lo || v > hi)
    return bad();
  return v;
}

// "host:port" (the host may be a bracketed IPv6 address).
caf::error parse_address(const std::string& name, const std::string& text,
                         cluster_spec& out) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return make_error(errc::invalid_argument,
                      "environment variable " + name + "='" + text
                        + "': expected host:port");
  auto host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  auto port = parse_integer(name + " (port)", text.substr(colon + 1), 1, 65535);
  if (!port)
    return std::move(port.error());
  out.rendezvous_host = host;
  out.rendezvous_port = static_cast<uint16_t>(*port);
  return {};
}

// Why a token of `size` bytes is refused; empty when it is not. The
// token's bytes are never quoted.
std::string token_problem(size_t size) {
  if (size >= cluster_token_limits::min_bytes
      && size <= cluster_token_limits::max_bytes)
    return {};
  return "has " + std::to_string(size) + " bytes: expected "
         + std::to_string(cluster_token_limits::min_bytes) + " to "
         + std::to_string(cluster_token_limits::max_bytes)
         + (size < cluster_token_limits::min_bytes
              ? " (a short token can be guessed from one recorded handshake)"
              : "");
}

// An etcd address: "etcd:http://<host>:<port>" and an optional "/<key>".
std::string etcd_problem(const std::string& arbiter) {
  const std::string scheme = "etcd:http://";
  if (arbiter.rfind(scheme, 0) != 0)
    return "names no http:// address after 'etcd:' (TLS is not supported)";
  const auto rest = arbiter.substr(scheme.size());
  const auto hostport = rest.substr(0, rest.find('/'));
  const auto colon = hostport.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return "names no <host>:<port> after 'etcd:http://'";
  const auto port = hostport.substr(colon + 1);
  if (port.empty() || port.size() > 5
      || port.find_first_not_of("0123456789") != std::string::npos
      || std::stol(port) < 1 || std::stol(port) > 65535)
    return "names no port from 1 to 65535";
  if (arbiter.size() > 4096 || arbiter.find('\0') != std::string::npos)
    return "is longer than 4096 bytes or holds a NUL byte";
  return {};
}

std::string arbiter_problem(const std::string& arbiter) {
  if (arbiter == "host")
    return {};
  if (arbiter.rfind("etcd:", 0) == 0)
    return etcd_problem(arbiter);
  if (arbiter.rfind("host:", 0) != 0)
    return "is not one of 'host', 'host:<absolute path>', "
           "'etcd:http://<host>:<port>[/<key>]'";
  const auto path = arbiter.substr(5);
  if (path.empty() || path.front() != '/')
    return "names no absolute path after 'host:'";
  if (path.size() > 4096 || path.find('\0') != std::string::npos)
    return "names a path longer than 4096 bytes or with a NUL byte";
  return {};
}

} // namespace

caf::error validate(const cluster_spec& spec) {
  auto bad = [](std::string what) {
    return make_error(errc::invalid_argument, "cluster_spec: " + what);
  };
  if (spec.world_size < 1)
    return bad("world_size " + std::to_string(spec.world_size)
               + " is not positive");
  if (spec.rank < 0 || spec.rank >= spec.world_size)
    return bad("rank " + std::to_string(spec.rank) + " is not in [0, "
               + std::to_string(spec.world_size) + ")");
  if (spec.local_rank < 0)
    return bad("local_rank " + std::to_string(spec.local_rank)
               + " is negative");
  if (spec.world_size > 1 && spec.rendezvous_port == 0)
    return bad("a cluster of " + std::to_string(spec.world_size)
               + " processes needs a rendezvous port");
  if (spec.rendezvous_host.empty() || spec.bind_host.empty())
    return bad("the rendezvous and bind hosts must not be empty");
  if (spec.join_timeout.count() <= 0 || spec.operation_timeout.count() <= 0)
    return bad("the join and operation timeouts must be positive");
  if (spec.peer_timeout.count() != 0 && spec.peer_timeout.count() < 100)
    return bad("peer_timeout " + std::to_string(spec.peer_timeout.count())
               + " ms: expected 0 (no heartbeats) or at least 100 ms");
  if (spec.group_name.empty() || spec.group_name.size() > 128)
    return bad("the group name must have 1 to 128 bytes, not "
               + std::to_string(spec.group_name.size())
               + " (it prefixes the rendezvous store's keys)");
  if (spec.mode != cluster_mode::training && spec.mode != cluster_mode::services)
    return bad("mode " + std::to_string(static_cast<int>(spec.mode))
               + " is not one of 0 (training), 1 (services)");
  if (!spec.cluster_token.empty())
    if (auto why = token_problem(spec.cluster_token.size()); !why.empty())
      return bad("cluster_token " + why);
  if (spec.transport != host_transport::automatic
      && spec.transport != host_transport::gloo
      && spec.transport != host_transport::shared_memory)
    return bad("transport " + std::to_string(static_cast<int>(spec.transport))
               + " is not one of 0 (automatic), 1 (gloo), 2 (shared_memory)");
  if (!spec.arbiter.empty()) {
    if (auto why = arbiter_problem(spec.arbiter); !why.empty())
      return bad("arbiter '" + spec.arbiter + "' " + why);
    if (spec.mode != cluster_mode::services)
      return bad("arbiter '" + spec.arbiter
                 + "': an arbiter decides who orders services mode's "
                   "operations; training mode has none to order");
    if (spec.peer_timeout.count() == 0)
      return bad("arbiter '" + spec.arbiter
                 + "' needs a peer timeout: it is the lead's lease");
  }
  return {};
}

const char* to_string(cluster_mode mode) {
  return mode == cluster_mode::services ? "services" : "training";
}

const char* to_string(host_transport transport) {
  switch (transport) {
    case host_transport::gloo: return "gloo";
    case host_transport::shared_memory: return "shared_memory";
    default: return "automatic";
  }
}

namespace {

// Get: std::optional<std::string>(const std::string&), the environment.

// World size, rank and local rank from the launcher's variables.
template <class Get>
caf::error read_ranks(const launcher_vars& found, Get& get,
                      cluster_spec& spec) {
  constexpr long long max_int = std::numeric_limits<int>::max();
  auto size_text = get(found.world_size);
  if (!size_text)
    return make_error(errc::invalid_argument,
                      std::string{found.launcher} + ": " + found.rank
                        + " is set but " + found.world_size + " is not");
  auto size = parse_integer(found.world_size, *size_text, 1, max_int);
  if (!size)
    return std::move(size.error());
  auto rank = parse_integer(found.rank, *get(found.rank), 0, *size - 1);
  if (!rank)
    return std::move(rank.error());
  spec.world_size = static_cast<int>(*size);
  spec.rank = static_cast<int>(*rank);
  if (auto text = get(found.local_rank)) {
    auto local = parse_integer(found.local_rank, *text, 0, max_int);
    if (!local)
      return std::move(local.error());
    spec.local_rank = static_cast<int>(*local);
  }
  return caf::none;
}

// The rendezvous: varsync's own variable first, then torchrun's pair.
template <class Get>
caf::error read_rendezvous(const launcher_vars& found, Get& get,
                           cluster_spec& spec) {
  if (auto addr = get("VARSYNC_RENDEZVOUS")) {
    if (auto err = parse_address("VARSYNC_RENDEZVOUS", *addr, spec))
      return err;
  } else if (auto port = get("MASTER_PORT")) {
    auto p = parse_integer("MASTER_PORT", *port, 1, 65535);
    if (!p)
      return std::move(p.error());
    spec.rendezvous_port = static_cast<uint16_t>(*p);
    if (auto host = get("MASTER_ADDR"); host && !host->empty())
      spec.rendezvous_host = *host;
  } else if (spec.world_size > 1) {
    return make_error(errc::invalid_argument,
                      std::string{found.launcher} + " gives rank "
                        + std::to_string(spec.rank) + " of "
                        + std::to_string(spec.world_size)
                        + " but no rendezvous address: set "
                          "VARSYNC_RENDEZVOUS=host:port (or MASTER_ADDR and "
                          "MASTER_PORT)");
  }
  return caf::none;
}

// The bind host and the timeouts.
template <class Get>
caf::error read_bind_and_timeouts(Get& get, cluster_spec& spec) {
  if (auto bind = get("VARSYNC_BIND"); bind && !bind->empty())
    spec.bind_host = *bind;
  if (auto t = get("VARSYNC_TIMEOUT_MS")) {
    auto ms = parse_integer("VARSYNC_TIMEOUT_MS", *t, 1, 86'400'000);
    if (!ms)
      return std::move(ms.error());
    spec.join_timeout = spec.operation_timeout = std::chrono::milliseconds{*ms};
  }
  if (auto t = get("VARSYNC_PEER_TIMEOUT_MS")) {
    auto ms = parse_integer("VARSYNC_PEER_TIMEOUT_MS", *t, 0, 86'400'000);
    if (!ms)
      return std::move(ms.error());
    if (*ms != 0 && *ms < 100)
      return make_error(errc::invalid_argument,
                        "environment variable VARSYNC_PEER_TIMEOUT_MS='" + *t
                          + "': expected 0 (no heartbeats) or at least 100 "
                            "ms");
    spec.peer_timeout = std::chrono::milliseconds{*ms};
  }
  return caf::none;
}

// The mode, the host transport and the cluster token.
template <class Get>
caf::error read_mode_transport_token(Get& get, cluster_spec& spec) {
  if (auto mode = get("VARSYNC_MODE")) {
    if (*mode == "training")
      spec.mode = cluster_mode::training;
    else if (*mode == "services")
      spec.mode = cluster_mode::services;
    else
      return make_error(errc::invalid_argument,
                        "VARSYNC_MODE is '" + *mode
                          + "': expected 'training' or 'services'");
  }
  if (auto transport = get("VARSYNC_HOST_TRANSPORT")) {
    if (*transport == "automatic")
      spec.transport = host_transport::automatic;
    else if (*transport == "gloo")
      spec.transport = host_transport::gloo;
    else if (*transport == "shared_memory")
      spec.transport = host_transport::shared_memory;
    else
      return make_error(errc::invalid_argument,
                        "VARSYNC_HOST_TRANSPORT is '" + *transport
                          + "': expected 'automatic', 'gloo' or "
                            "'shared_memory'");
  }
  if (auto token = get("VARSYNC_CLUSTER_TOKEN")) {
    // Set but empty is a mistake (an unset shell variable), never "no
    // token": that would open the port.
    auto why = token->empty() ? std::string{"is set but empty"}
                              : token_problem(token->size());
    if (!why.empty())
      return make_error(errc::invalid_argument,
                        "environment variable VARSYNC_CLUSTER_TOKEN " + why);
    spec.cluster_token = *token;
  }
  if (auto arbiter = get("VARSYNC_ARBITER")) {
    if (auto why = arbiter_problem(*arbiter); !why.empty())
      return make_error(errc::invalid_argument,
                        "VARSYNC_ARBITER is '" + *arbiter + "': it " + why);
    spec.arbiter = *arbiter;
  }
  return caf::none;
}

} // namespace

caf::expected<std::optional<cluster_spec>>
cluster_from_environment(const environment_reader& reader) {
  auto get = [&](const std::string& name) -> std::optional<std::string> {
    if (reader)
      return reader(name);
    if (auto* v = std::getenv(name.c_str()))
      return std::string{v};
    return std::nullopt;
  };
  const launcher_vars* found = nullptr;
  for (auto& l : launchers)
    if (get(l.rank)) {
      found = &l;
      break;
    }
  if (!found)
    return std::optional<cluster_spec>{};
  cluster_spec spec;
  if (auto err = read_ranks(*found, get, spec))
    return err;
  if (auto err = read_rendezvous(*found, get, spec))
    return err;
  if (auto err = read_bind_and_timeouts(get, spec))
    return err;
  if (auto err = read_mode_transport_token(get, spec))
    return err;
  // Every variable is checked where it is read; what validate() still
  // finds comes from their combination, so say where the values came from.
  if (auto err = validate(spec))
    return make_error(errc::invalid_argument,
                      std::string{"the cluster given by the environment ("}
                        + found->launcher + "'s " + found->rank + ", "
                        + found->world_size + " and the VARSYNC_ variables) "
                          "is invalid: "
                        + message_of(err));
  return std::optional<cluster_spec>{std::move(spec)};
}

} // namespace varsync
