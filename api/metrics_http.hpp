#pragma once
// The optional metrics endpoint (M6): a minimal HTTP/1.0 server on
// 127.0.0.1, one thread, one request per connection, GET only. Off unless
// strategy_options::metrics_port is set. Loopback only: metrics name
// variables, and nothing here authenticates a caller.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <caf/expected.hpp>

namespace varsync::detail {

class metrics_server {
public:
  /// The body for a path, and its content type; an error becomes 404
  /// (unknown_variable: an unknown path) or 503 (anything else).
  struct response {
    std::string content_type;
    std::string body;
  };
  using handler = std::function<caf::expected<response>(const std::string&)>;

  /// Listens on 127.0.0.1:`port` (0: a free port the system picks);
  /// requests wait until serve().
  static caf::expected<std::unique_ptr<metrics_server>> open(uint16_t port);
  /// Starts answering with `h` (once).
  void serve(handler h);
  ~metrics_server();

  uint16_t port() const { return port_; }
  /// Stops serving (a request being answered finishes first); idempotent.
  void stop();

private:
  metrics_server(int fd, uint16_t port);
  void loop();
  void answer(int client);

  int fd_;
  int wake_[2] = {-1, -1};
  uint16_t port_;
  handler handler_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

} // namespace varsync::detail
