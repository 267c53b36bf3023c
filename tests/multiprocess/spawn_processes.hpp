#pragma once
// Starts child processes, waits for them within a deadline and kills and
// reaps whatever is left, whatever happens: the multi-process tests never
// leave a process behind.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace varsync::testing {

struct child_spec {
  std::vector<std::string> argv;
  /// NAME=VALUE entries added to this process's environment.
  std::vector<std::string> env;
  /// Send SIGSTOP this long after the start (0: never).
  std::chrono::milliseconds stop_after{0};
  /// A file that takes the child's stdout and stderr (empty: inherited).
  std::string output;
};

/// The text of a file (a child's output), empty if it cannot be read.
inline std::string read_text(const std::string& path) {
  std::string out;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
      out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

struct children_result {
  std::vector<int> exit_codes; // -1: killed at the deadline, -2: a signal
  std::chrono::milliseconds took{0};
  bool spawned = true;
};

/// A TCP port on loopback that was free a moment ago.
inline int free_loopback_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0
      && getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

inline children_result run_children(const std::vector<child_spec>& children,
                                    std::chrono::milliseconds deadline) {
  using namespace std::chrono_literals;
  children_result out;
  out.exit_codes.assign(children.size(), -1);
  std::vector<pid_t> pids(children.size(), 0);
  std::vector<bool> stopped(children.size(), false);
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < children.size(); ++i) {
    std::vector<std::string> args = children[i].argv;
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e)
      env_strings.emplace_back(*e);
    for (auto& e : children[i].env)
      env_strings.push_back(e);
    std::vector<char*> envp;
    for (auto& e : env_strings)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (!children[i].output.empty()) {
      posix_spawn_file_actions_addopen(&actions, 1, children[i].output.c_str(),
                                       O_WRONLY | O_CREAT | O_TRUNC, 0644);
      posix_spawn_file_actions_adddup2(&actions, 1, 2);
    }
    if (posix_spawn(&pids[i], argv[0], &actions, nullptr, argv.data(),
                    envp.data())
        != 0) {
      pids[i] = 0;
      out.spawned = false;
    }
    posix_spawn_file_actions_destroy(&actions);
  }
  size_t left = 0;
  for (auto pid : pids)
    left += pid != 0 ? 1 : 0;
  while (left > 0 && std::chrono::steady_clock::now() - start < deadline) {
    auto now = std::chrono::steady_clock::now();
    for (size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] == 0)
        continue;
      if (children[i].stop_after.count() > 0 && !stopped[i]
          && now - start >= children[i].stop_after) {
        kill(pids[i], SIGSTOP);
        stopped[i] = true;
      }
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG | WUNTRACED | WCONTINUED)
          == pids[i]) {
        if (WIFSTOPPED(status)) { // stopped itself (or by us)
          stopped[i] = true;
          continue;
        }
        if (WIFCONTINUED(status)) { // woken by another child
          stopped[i] = false;
          continue;
        }
        out.exit_codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : -2;
        pids[i] = 0;
        --left;
      }
    }
    // A stopped child never exits: the others decide when the test is over.
    bool only_stopped = left > 0;
    for (size_t i = 0; i < pids.size(); ++i)
      if (pids[i] != 0 && !stopped[i])
        only_stopped = false;
    if (only_stopped)
      break;
    std::this_thread::sleep_for(10ms);
  }
  for (size_t i = 0; i < pids.size(); ++i)
    if (pids[i] != 0) {
      kill(pids[i], SIGKILL);
      waitpid(pids[i], nullptr, 0);
    }
  out.took = std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::steady_clock::now() - start);
  return out;
}

} // namespace varsync::testing
