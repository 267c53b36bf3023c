// The metrics endpoint (M6), over the public API: a listening socket, a
// thread that answers one request per connection, and the strategy whose
// snapshots it serves.

#include "varsync/ext/metrics_endpoint.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <thread>

#include "varsync/error.hpp"
#include "varsync/ext/metrics.hpp"
#include "varsync/ext/sync_advice.hpp"

namespace varsync {

namespace {

void send_all(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    auto n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && errno == EINTR)
        continue;
      return;
    }
    sent += static_cast<size_t>(n);
  }
}

std::string reply(int code, const char* status, const std::string& type,
                  const std::string& body) {
  return "HTTP/1.0 " + std::to_string(code) + " " + status
         + "\r\nContent-Type: " + type
         + "\r\nContent-Length: " + std::to_string(body.size())
         + "\r\nConnection: close\r\n\r\n" + body;
}

// A snapshot waits at most this long: a scraper retries, a wedged
// strategy must not hold the endpoint's thread.
constexpr auto snapshot_timeout = std::chrono::seconds(5);

struct response {
  std::string content_type;
  std::string body;
};

/// The body for `path`; an error becomes 404 (unknown_variable: an unknown
/// path) or 503 (anything else).
caf::expected<response> respond(const weak_strategy& weak,
                                const std::string& path) {
  if (path != "/metrics" && path != "/metrics.json" && path != "/advice"
      && path != "/flight")
    return make_error(errc::unknown_variable, "no such path");
  auto s = weak.lock();
  if (!s)
    return make_error(errc::shut_down, "the strategy has shut down");
  if (path == "/flight") { // the coordinator alone answers: works in a hang
    auto d = s->with_timeout(snapshot_timeout).stats();
    if (!d)
      return std::move(d.error());
    return response{"application/json", to_json(*d)};
  }
  auto m = s->with_timeout(snapshot_timeout).metrics();
  if (!m)
    return std::move(m.error());
  if (path == "/metrics")
    return response{"text/plain; version=0.0.4; charset=utf-8",
                    to_prometheus(*m)};
  if (path == "/metrics.json")
    return response{"application/json", to_json(*m)};
  return response{"application/json", to_json(advise(*m))};
}

} // namespace

struct metrics_endpoint::server {
  server(const strategy& s, int fd, uint16_t port)
    : served(s), fd(fd), port(port) {
    if (::pipe2(wake, O_CLOEXEC) != 0)
      wake[0] = wake[1] = -1;
    thread = std::thread{[this] { loop(); }};
  }
  ~server() {
    stop();
    if (wake[0] >= 0) {
      ::close(wake[0]);
      ::close(wake[1]);
    }
  }
  void stop();
  void loop();
  void answer(int client);

  // Weak (V9): a server must not keep the strategy alive.
  weak_strategy served;
  int fd;
  uint16_t port;
  int wake[2] = {-1, -1};
  std::atomic<bool> stopping{false};
  std::thread thread;
};

caf::expected<metrics_endpoint> metrics_endpoint::serve(const strategy& s,
                                                        uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return make_error(errc::invalid_argument,
                      std::string{"metrics endpoint: socket: "}
                        + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0
      || ::listen(fd, 16) != 0) {
    auto err = std::string{std::strerror(errno)};
    ::close(fd);
    return make_error(errc::invalid_argument,
                      "metrics endpoint: cannot listen on 127.0.0.1:"
                        + std::to_string(port) + ": " + err
                        + "; nothing is served");
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return metrics_endpoint{
    std::make_unique<server>(s, fd, ntohs(addr.sin_port))};
}

metrics_endpoint::metrics_endpoint(std::unique_ptr<server> s)
  : server_(std::move(s)) {
  // nop
}

metrics_endpoint::metrics_endpoint(metrics_endpoint&&) noexcept = default;
metrics_endpoint&
metrics_endpoint::operator=(metrics_endpoint&&) noexcept = default;
metrics_endpoint::~metrics_endpoint() = default;

uint16_t metrics_endpoint::port() const {
  return server_ ? server_->port : 0;
}

std::string metrics_endpoint::url() const {
  return "http://127.0.0.1:" + std::to_string(port());
}

void metrics_endpoint::stop() {
  if (server_)
    server_->stop();
}

void metrics_endpoint::server::stop() {
  if (stopping.exchange(true))
    return;
  if (wake[1] >= 0) {
    char c = 1;
    [[maybe_unused]] auto n = ::write(wake[1], &c, 1);
  }
  if (thread.joinable())
    thread.join();
  ::close(fd);
}

void metrics_endpoint::server::loop() {
  while (!stopping.load()) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {wake[0], POLLIN, 0}};
    // Without a wake-up pipe, poll in steps so that stop() is seen.
    auto n = ::poll(fds, wake[0] >= 0 ? 2 : 1, wake[0] >= 0 ? -1 : 200);
    if (n <= 0 || stopping.load())
      continue;
    if ((fds[0].revents & POLLIN) == 0)
      continue;
    int client = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0)
      continue;
    answer(client);
    ::close(client);
  }
}

void metrics_endpoint::server::answer(int client) {
  // The request line is all that matters; read until the header ends (or
  // 8 KiB, or 2 s without data).
  std::string request;
  char buf[1024];
  while (request.size() < 8192
         && request.find("\r\n\r\n") == std::string::npos
         && request.find("\n\n") == std::string::npos) {
    pollfd p{client, POLLIN, 0};
    if (::poll(&p, 1, 2000) <= 0)
      break;
    auto n = ::recv(client, buf, sizeof(buf), 0);
    if (n <= 0)
      break;
    request.append(buf, static_cast<size_t>(n));
  }
  auto line_end = request.find_first_of("\r\n");
  auto line = request.substr(0, line_end);
  auto sp1 = line.find(' ');
  auto sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || line.substr(0, sp1) != "GET") {
    send_all(client, reply(405, "Method Not Allowed", "text/plain",
                           "only GET is served\n"));
    return;
  }
  auto path = line.substr(sp1 + 1, sp2 == std::string::npos
                                     ? std::string::npos
                                     : sp2 - sp1 - 1);
  if (auto q = path.find('?'); q != std::string::npos)
    path.resize(q);
  caf::expected<response> r = caf::error{};
  try {
    r = respond(served, path);
  } catch (const std::exception& e) { // never out of the server's thread
    send_all(client, reply(500, "Internal Server Error", "text/plain",
                           std::string{e.what()} + "\n"));
    return;
  }
  if (!r) {
    const bool unknown = r.error().category() == error_category
                         && r.error().code()
                              == static_cast<uint8_t>(errc::unknown_variable);
    send_all(client,
             unknown ? reply(404, "Not Found", "text/plain",
                             "not found: " + path
                               + " (served: /metrics, /metrics.json, "
                                 "/advice, /flight)\n")
                     : reply(503, "Service Unavailable", "text/plain",
                             message_of(r.error()) + "\n"));
    return;
  }
  send_all(client, reply(200, "OK", r->content_type, r->body));
}

} // namespace varsync
