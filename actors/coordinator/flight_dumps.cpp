// M8: the flight recorder's dumps (actors/coordinator/flight_dumps.hpp).

#include "actors/coordinator/flight_dumps.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

#include "core/flight_dump_format.hpp"
#include "core/logging.hpp"
#include "messages/coordinator_interface.hpp"
#include "varsync/error.hpp"

namespace varsync {

flight_dumps::flight_dumps(std::string dir, int rank)
  : dir_(std::move(dir)), rank_(rank) {
  // nop
}

std::optional<flight_dumps::reason>
flight_dumps::alarm_of(const caf::error& err) {
  if (has_code(err, errc::timeout) || has_code(err, errc::committed_late))
    return reason::timeout;
  if (has_code(err, errc::replica_failed))
    return reason::failure;
  if (has_code(err, errc::mismatched_replica_updates))
    return reason::desync;
  return std::nullopt;
}

std::string flight_dumps::path_of(reason why) const {
  return dir_ + "/flight." + std::to_string(rank_) + "."
         + reason_names[static_cast<size_t>(why)] + ".json";
}

void flight_dumps::write(reason why, const std::string& detail,
                         const strategy_description& d) {
  if (!enabled())
    return;
  const auto now = std::chrono::steady_clock::now();
  auto& last = last_[static_cast<size_t>(why)];
  if (why != reason::signal && last && now - *last < std::chrono::seconds(1))
    return;
  last = now;
  const auto unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  const auto text = flight_dump_json(d, reason_names[static_cast<size_t>(why)],
                                     detail, ::getpid(), unix_ms);
  // Written beside, then renamed over the last one.
  const auto path = path_of(why);
  const auto part = path + ".part";
  bool ok = false;
  if (FILE* f = std::fopen(part.c_str(), "w")) {
    ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    ok = std::fclose(f) == 0 && ok;
    ok = ok && std::rename(part.c_str(), path.c_str()) == 0;
    if (!ok)
      std::remove(part.c_str());
  }
  if (!ok && !warned_) {
    warned_ = true;
    log()->warn("the flight recorder could not be written to {} (errno {})",
                path, errno);
  } else if (ok) {
    log()->info("flight recorder written to {}", path);
  }
}

// -- SIGUSR1 ------------------------------------------------------------------

namespace {

struct signal_watch {
  std::mutex mtx;
  std::vector<caf::weak_actor_ptr> coordinators;
  bool installed = false;
};

// The handler's end of the pipe: a lock-free atomic, safe in a handler.
std::atomic<int> signal_pipe{-1};

signal_watch& watch() {
  static auto* w = new signal_watch; // never destroyed: the thread uses it
  return *w;
}

extern "C" void on_dump_signal(int) {
  const int saved = errno;
  char c = 1;
  // Async-signal-safe; a full pipe means a dump is pending anyway.
  [[maybe_unused]] auto n = ::write(signal_pipe.load(), &c, 1);
  errno = saved;
}

void ask_for_dumps() {
  std::vector<caf::strong_actor_ptr> live;
  {
    auto& w = watch();
    std::lock_guard<std::mutex> guard{w.mtx};
    std::vector<caf::weak_actor_ptr> kept;
    for (auto& weak : w.coordinators)
      if (auto strong = weak.lock()) {
        live.push_back(std::move(strong));
        kept.push_back(std::move(weak));
      }
    w.coordinators = std::move(kept);
  }
  for (auto& c : live)
    caf::anon_send(caf::actor_cast<coordinator_internal_actor>(c),
                   flight_dump_atom::value,
                   static_cast<uint8_t>(flight_dumps::reason::signal),
                   std::string{"SIGUSR1"});
}

// Called with the watch's lock held.
bool install() {
  struct sigaction old {};
  if (::sigaction(SIGUSR1, nullptr, &old) != 0)
    return false;
  if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) {
    log()->warn("SIGUSR1 has a handler already: the flight recorder is not "
                "written on SIGUSR1 (M8)");
    return false;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return false;
  ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
  signal_pipe.store(fds[1]);
  std::thread{[fd = fds[0]] {
    char buf[64];
    for (;;) {
      auto n = ::read(fd, buf, sizeof(buf));
      if (n > 0)
        ask_for_dumps();
      else if (n < 0 && errno != EINTR)
        return;
    }
  }}.detach();
  struct sigaction sa {};
  sa.sa_handler = on_dump_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  return ::sigaction(SIGUSR1, &sa, nullptr) == 0;
}

} // namespace

void dump_on_signal(const caf::strong_actor_ptr& coordinator) {
  auto& w = watch();
  std::lock_guard<std::mutex> guard{w.mtx};
  if (!w.installed) { // tried once, whatever the outcome
    w.installed = true;
    install();
  }
  w.coordinators.emplace_back(coordinator.get());
}

} // namespace varsync
