#pragma once
// One HTTP/1.1 POST of a JSON body to a server on the network (etcd's JSON
// gateway, etcd_arbiter.hpp): its own connection, bounded by a deadline,
// no TLS. A streaming answer (chunked, as etcd's lease keep-alive gives)
// is read up to its first complete JSON value.

#include <chrono>
#include <cstdint>
#include <string>

#include <caf/expected.hpp>

namespace varsync {

/// The body of the answer to POST `path` with `json` at host:port, when
/// its status is 200. invalid_argument for a host that does not resolve;
/// replica_failed naming the server when it cannot be reached, answers
/// another status (its body quoted, cut at 200 bytes) or nothing complete
/// within `timeout`.
caf::expected<std::string> http_post_json(const std::string& host,
                                          uint16_t port,
                                          const std::string& path,
                                          const std::string& json,
                                          std::chrono::milliseconds timeout);

} // namespace varsync
