#pragma once
// The parent side of the benchmarks that run across processes: starts N
// copies of this program with their own arguments and waits for them all.

#include <csignal>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace bench {

/// A TCP port on loopback that was free a moment ago (0 if none).
inline int free_loopback_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0
      && getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

/// Runs `processes` copies of this program, rank r with `args_of(r)`
/// (without argv[0]); 0 if all of them exited 0, else 1.
inline int run_ranks(int processes, const char* name,
                     const std::function<std::vector<std::string>(int)>& args_of) {
  std::vector<pid_t> pids;
  for (int r = 0; r < processes; ++r) {
    std::vector<std::string> args{name};
    for (auto& a : args_of(r))
      args.push_back(a);
    std::vector<char*> cargs;
    for (auto& a : args)
      cargs.push_back(a.data());
    cargs.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, cargs.data(),
                    environ)
        != 0) {
      std::fprintf(stderr, "%s: cannot start rank %d\n", name, r);
      for (auto p : pids)
        kill(p, SIGKILL);
      break;
    }
    pids.push_back(pid);
  }
  int rc = static_cast<int>(pids.size()) == processes ? 0 : 1;
  for (auto pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      rc = 1;
  }
  return rc;
}

} // namespace bench
