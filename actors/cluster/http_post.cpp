#include "actors/cluster/http_post.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "varsync/error.hpp"

namespace varsync {

namespace {

using clock = std::chrono::steady_clock;

int millis_left(clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - clock::now())
                .count();
  return left > 0 ? static_cast<int>(left) : 0;
}

struct socket_fd {
  int fd = -1;
  ~socket_fd() {
    if (fd >= 0)
      ::close(fd);
  }
};

// Connects within the deadline (non-blocking connect, then poll).
caf::error connect_to(socket_fd& s, const std::string& host, uint16_t port,
                      clock::time_point deadline, const std::string& who) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found)
        != 0
      || found == nullptr)
    return make_error(errc::invalid_argument,
                      who + ": the host '" + host + "' does not resolve");
  caf::error err;
  for (auto* a = found; a != nullptr; a = a->ai_next) {
    s.fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    a->ai_protocol);
    if (s.fd < 0)
      continue;
    if (::connect(s.fd, a->ai_addr, a->ai_addrlen) == 0)
      break;
    if (errno == EINPROGRESS) {
      pollfd p{s.fd, POLLOUT, 0};
      int soerr = 0;
      socklen_t len = sizeof(soerr);
      if (::poll(&p, 1, millis_left(deadline)) == 1
          && getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0
          && soerr == 0)
        break;
      errno = soerr != 0 ? soerr : ETIMEDOUT;
    }
    err = make_error(errc::replica_failed,
                     who + ": cannot connect: " + std::strerror(errno));
    ::close(s.fd);
    s.fd = -1;
  }
  freeaddrinfo(found);
  if (s.fd < 0)
    return err ? err
               : make_error(errc::replica_failed, who + ": cannot connect");
  return {};
}

// The body so far, decoded from chunks: complete once it holds a JSON
// value (a stream's first message) or the last chunk came.
bool dechunk(const std::string& raw, std::string& body) {
  body.clear();
  size_t at = 0;
  while (true) {
    auto eol = raw.find("\r\n", at);
    if (eol == std::string::npos)
      return false;
    size_t size = 0;
    try {
      size = std::stoul(raw.substr(at, eol - at), nullptr, 16);
    } catch (...) {
      return true; // malformed: the parser says so
    }
    if (size == 0)
      return true;
    if (raw.size() < eol + 2 + size)
      return false;
    body.append(raw, eol + 2, size);
    if (nlohmann::json::accept(body))
      return true;
    at = eol + 2 + size + 2;
  }
}

} // namespace

caf::expected<std::string> http_post_json(const std::string& host,
                                          uint16_t port,
                                          const std::string& path,
                                          const std::string& json,
                                          std::chrono::milliseconds timeout) {
  const auto deadline = clock::now() + timeout;
  const auto who = "http://" + host + ":" + std::to_string(port) + path;
  socket_fd s;
  if (auto err = connect_to(s, host, port, deadline, who))
    return err;
  const std::string request = "POST " + path + " HTTP/1.1\r\nHost: " + host
                              + "\r\nContent-Type: application/json\r\n"
                                "Content-Length: "
                              + std::to_string(json.size())
                              + "\r\nConnection: close\r\n\r\n" + json;
  size_t sent = 0;
  while (sent < request.size()) {
    pollfd p{s.fd, POLLOUT, 0};
    if (::poll(&p, 1, millis_left(deadline)) != 1)
      return make_error(errc::replica_failed, who + ": no answer within "
                                                + std::to_string(timeout.count())
                                                + " ms");
    auto n = ::send(s.fd, request.data() + sent, request.size() - sent,
                    MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return make_error(errc::replica_failed,
                        who + ": cannot send: " + std::strerror(errno));
    sent += n > 0 ? static_cast<size_t>(n) : 0;
  }
  std::string raw;
  std::string body;
  char buf[4096];
  bool closed = false;
  while (true) {
    auto head_end = raw.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      const auto head = raw.substr(0, head_end);
      const auto rest = raw.substr(head_end + 4);
      std::string lower = head;
      for (auto& ch : lower)
        ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      bool complete = false;
      if (lower.find("transfer-encoding: chunked") != std::string::npos) {
        complete = dechunk(rest, body);
      } else if (auto cl = lower.find("content-length:");
                 cl != std::string::npos) {
        const auto length = std::strtoul(lower.c_str() + cl + 15, nullptr, 10);
        complete = rest.size() >= length;
        body = rest.substr(0, length);
      } else {
        complete = closed;
        body = rest;
      }
      if (complete || closed) {
        if (head.rfind("HTTP/1.1 200", 0) != 0
            && head.rfind("HTTP/1.0 200", 0) != 0)
          return make_error(errc::replica_failed,
                            who + ": answered '"
                              + head.substr(0, head.find("\r\n")) + "': "
                              + body.substr(0, 200));
        return body;
      }
    } else if (closed) {
      return make_error(errc::replica_failed,
                        who + ": closed the connection without an answer");
    }
    pollfd p{s.fd, POLLIN, 0};
    if (::poll(&p, 1, millis_left(deadline)) != 1)
      return make_error(errc::replica_failed,
                        who + ": no complete answer within "
                          + std::to_string(timeout.count()) + " ms");
    auto n = ::recv(s.fd, buf, sizeof(buf), 0);
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return make_error(errc::replica_failed,
                        who + ": cannot receive: " + std::strerror(errno));
    if (n == 0)
      closed = true;
    else if (n > 0)
      raw.append(buf, static_cast<size_t>(n));
    if (raw.size() > (size_t{1} << 20))
      return make_error(errc::replica_failed,
                        who + ": an answer of more than 1 MiB");
  }
}

} // namespace varsync
