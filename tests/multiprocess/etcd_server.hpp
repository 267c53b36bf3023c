#pragma once
// A real etcd server on loopback for the tests of the etcd arbiter (P16):
// Debian's etcd-server, its own data directory and free ports, short
// election timings so that a 1 s lease is honoured. Killed and removed
// however the test ends.

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actors/cluster/http_post.hpp"
#include "spawn_processes.hpp"

namespace varsync::testing {

/// The etcd binary, or empty where etcd-server is not installed.
inline std::string etcd_binary() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/usr/sbin"}) {
    auto p = std::string{dir} + "/etcd";
    if (::access(p.c_str(), X_OK) == 0)
      return p;
  }
  return {};
}

class etcd_server {
public:
  etcd_server() {
    using namespace std::chrono_literals;
    dir_ = (std::filesystem::temp_directory_path()
            / ("varsync-etcd-" + std::to_string(::getpid()) + "-"
               + std::to_string(++count())))
             .string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    port_ = static_cast<uint16_t>(free_loopback_port());
    const auto peer = free_loopback_port();
    const auto client = "http://127.0.0.1:" + std::to_string(port_);
    const auto peers = "http://127.0.0.1:" + std::to_string(peer);
    std::vector<std::string> args{etcd_binary(),
                                  "--data-dir", dir_ + "/data",
                                  "--listen-client-urls", client,
                                  "--advertise-client-urls", client,
                                  "--listen-peer-urls", peers,
                                  "--initial-advertise-peer-urls", peers,
                                  "--initial-cluster", "default=" + peers,
                                  "--election-timeout", "500",
                                  "--heartbeat-interval", "50"};
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const auto log = dir_ + "/etcd.log";
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ)
        != 0)
      pid_ = 0;
    posix_spawn_file_actions_destroy(&actions);
    // Ready once a read answers.
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (pid_ != 0 && std::chrono::steady_clock::now() < deadline) {
      if (http_post_json("127.0.0.1", port_, "/v3/kv/range",
                         "{\"key\":\"eA==\"}", 500ms)) {
        ready_ = true;
        return;
      }
      std::this_thread::sleep_for(50ms);
    }
  }
  ~etcd_server() {
    if (pid_ != 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }
  etcd_server(const etcd_server&) = delete;
  etcd_server& operator=(const etcd_server&) = delete;

  bool ready() const { return ready_; }
  uint16_t port() const { return port_; }
  /// cluster_spec::arbiter for this server, with `key`.
  std::string arbiter(const std::string& key) const {
    return "etcd:http://127.0.0.1:" + std::to_string(port_) + key;
  }
  /// etcd's own log, for a failure's message.
  std::string log() const { return read_text(dir_ + "/etcd.log"); }

private:
  static int& count() {
    static int n = 0;
    return n;
  }
  std::string dir_;
  uint16_t port_ = 0;
  pid_t pid_ = 0;
  bool ready_ = false;
};

} // namespace varsync::testing
