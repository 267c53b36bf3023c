#pragma once
// The metrics endpoint (M6): a strategy's metrics over HTTP/1.0 on
// 127.0.0.1, one thread, one request per connection, GET only:
// /metrics (Prometheus text), /metrics.json, /advice (the synchronization
// advisor's suggestions), /flight (the flight recorder). Loopback only: metrics name variables, and nothing
// here authenticates a caller. An add-on over the public API:
//
//   auto endpoint = varsync::metrics_endpoint::serve(s, 9464);
//   if (!endpoint) ...;              // the port could not be bound
//   std::cout << endpoint->url();    // http://127.0.0.1:9464

#include <cstdint>
#include <memory>
#include <string>

#include <caf/expected.hpp>

#include "varsync/strategy.hpp"

namespace varsync {

class metrics_endpoint {
public:
  /// Serves `s`'s metrics on 127.0.0.1:`port` (0: a free port the system
  /// picks; port() says which) until stop() or destruction. A port that
  /// cannot be bound fails with invalid_argument naming it. The endpoint
  /// does not keep `s` alive (weak_strategy): once it has shut down, or its
  /// last handle went away, it answers 503.
  static caf::expected<metrics_endpoint> serve(const strategy& s,
                                               uint16_t port = 0);

  metrics_endpoint(metrics_endpoint&&) noexcept;
  metrics_endpoint& operator=(metrics_endpoint&&) noexcept;
  ~metrics_endpoint();

  uint16_t port() const;
  /// "http://127.0.0.1:PORT".
  std::string url() const;
  /// Stops serving (a request being answered finishes first) and frees the
  /// port; idempotent.
  void stop();

private:
  struct server;
  explicit metrics_endpoint(std::unique_ptr<server> s);
  std::unique_ptr<server> server_;
};

} // namespace varsync
