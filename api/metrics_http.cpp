#include "api/metrics_http.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>

#include "core/logging.hpp"
#include "varsync/error.hpp"

namespace varsync::detail {

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

} // namespace

caf::expected<std::unique_ptr<metrics_server>>
metrics_server::open(uint16_t port) {
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
                        + "; the strategy was not created");
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return std::unique_ptr<metrics_server>{
    new metrics_server(fd, ntohs(addr.sin_port))};
}

metrics_server::metrics_server(int fd, uint16_t port) : fd_(fd), port_(port) {
  if (::pipe2(wake_, O_CLOEXEC) != 0)
    wake_[0] = wake_[1] = -1;
}

void metrics_server::serve(handler h) {
  if (thread_.joinable() || stopping_.load())
    return;
  handler_ = std::move(h);
  thread_ = std::thread{[this] { loop(); }};
}

metrics_server::~metrics_server() {
  stop();
  if (wake_[0] >= 0) {
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
}

void metrics_server::stop() {
  if (stopping_.exchange(true))
    return;
  if (wake_[1] >= 0) {
    char c = 1;
    [[maybe_unused]] auto n = ::write(wake_[1], &c, 1);
  }
  if (thread_.joinable())
    thread_.join();
  // The port is free once the strategy has shut down.
  ::close(fd_);
}

void metrics_server::loop() {
  while (!stopping_.load()) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    // Without a wake-up pipe, poll in steps so that stop() is seen.
    auto n = ::poll(fds, wake_[0] >= 0 ? 2 : 1, wake_[0] >= 0 ? -1 : 200);
    if (n <= 0 || stopping_.load())
      continue;
    if ((fds[0].revents & POLLIN) == 0)
      continue;
    int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0)
      continue;
    answer(client);
    ::close(client);
  }
}

void metrics_server::answer(int client) {
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
    r = handler_(path);
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
                                 "/advice)\n")
                     : reply(503, "Service Unavailable", "text/plain",
                             message_of(r.error()) + "\n"));
    return;
  }
  send_all(client, reply(200, "OK", r->content_type, r->body));
}

} // namespace varsync::detail
