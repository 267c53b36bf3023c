#include "actors/cluster/arbiter.hpp"

#include <cstdio>
#include <cstdlib>

#include "actors/cluster/etcd_arbiter.hpp"
#include "actors/cluster/host_arbiter.hpp"
#include "varsync/error.hpp"

namespace varsync {

namespace {

std::string hashed(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325; // FNV-1a
  for (char ch : name) {
    h ^= static_cast<unsigned char>(ch);
    h *= 0x100000001b3;
  }
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx",
                static_cast<unsigned long long>(h));
  return out;
}

struct etcd_address {
  std::string host;
  uint16_t port = 0;
  std::string key; // empty: the default
};

// "etcd:http://host:port[/key]" (cluster_spec's validate checked the form).
caf::expected<etcd_address> parse_etcd(const std::string& spec) {
  const std::string scheme = "etcd:http://";
  etcd_address out;
  auto rest = spec.substr(scheme.size());
  auto slash = rest.find('/');
  auto hostport = rest.substr(0, slash);
  if (slash != std::string::npos)
    out.key = rest.substr(slash);
  auto colon = hostport.rfind(':');
  long port = colon == std::string::npos
                ? 0
                : std::strtol(hostport.c_str() + colon + 1, nullptr, 10);
  if (spec.rfind(scheme, 0) != 0 || colon == std::string::npos || colon == 0
      || port <= 0 || port > 65535)
    return make_error(errc::invalid_argument,
                      "arbiter '" + spec
                        + "': expected etcd:http://<host>:<port>[/<key>]");
  out.host = hostport.substr(0, colon);
  out.port = static_cast<uint16_t>(port);
  return out;
}

} // namespace

std::string arbiter_location(const std::string& spec,
                             const std::string& name) {
  if (spec.rfind("host:", 0) == 0)
    return spec.substr(5);
  if (spec.rfind("etcd:", 0) == 0) {
    auto address = parse_etcd(spec);
    if (address && !address->key.empty())
      return address->key;
    return "/varsync/lead/" + hashed(name);
  }
  return "/dev/shm/varsync-arbiter-" + hashed(name);
}

caf::expected<std::unique_ptr<arbiter>>
open_arbiter(const std::string& spec, const std::string& name, int rank,
             std::chrono::milliseconds lease) {
  arbiter_options lead{arbiter_location(spec, name), rank, lease};
  if (spec.rfind("etcd:", 0) == 0) {
    auto address = parse_etcd(spec);
    if (!address)
      return std::move(address.error());
    auto a = etcd_arbiter::open({address->host, address->port, lead});
    if (!a)
      return std::move(a.error());
    return std::unique_ptr<arbiter>{std::move(*a)};
  }
  if (spec != "host" && spec.rfind("host:", 0) != 0)
    return make_error(errc::invalid_argument,
                      "arbiter '" + spec + "': expected host, host:<path> or "
                                           "etcd:http://<host>:<port>[/<key>]");
  auto a = host_arbiter::open(lead);
  if (!a)
    return std::move(a.error());
  return std::unique_ptr<arbiter>{std::move(*a)};
}

} // namespace varsync
