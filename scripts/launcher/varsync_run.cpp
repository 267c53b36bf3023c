// varsync-run: starts the processes of one varsync strategy on this host.
//
//   varsync-run -np N [--port P] [--host ADDR] [--timeout-ms T] PROG [ARGS...]
//
// Starts N copies of PROG with VARSYNC_RANK (0..N-1), VARSYNC_LOCAL_RANK,
// VARSYNC_WORLD_SIZE, VARSYNC_RENDEZVOUS (ADDR:P; a free loopback port
// unless given) and VARSYNC_CLUSTER_TOKEN (the one in varsync-run's own
// environment, else 32 random bytes in hex, new for each run: only the
// processes it started can join) in their environment, which
// cluster_from_environment() reads. Output is the children's own. The first
// child that fails (non-zero exit or a signal) stops the others (SIGTERM,
// SIGKILL 5 s later) and its status is varsync-run's (128 + signal for a
// signal); every child that did not exit 0 is named on stderr with its rank
// and how it ended ("rank 1 (pid 4242) exited with status 3", "... was
// killed by signal 11 (SIGSEGV)"). SIGINT and SIGTERM are passed on to the
// children. Each child runs in a process group of its own, which goes with
// it: nothing is left running when it returns.

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <spawn.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace {

volatile std::sig_atomic_t forwarded_signal = 0;

void on_signal(int sig) { forwarded_signal = sig; }

int usage(const char* msg) {
  std::fprintf(stderr,
               "varsync-run: %s\n"
               "usage: varsync-run -np N [--port P] [--host ADDR] "
               "[--timeout-ms T] PROG [ARGS...]\n",
               msg);
  return 2;
}

bool parse_int(const char* s, long lo, long hi, long& out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
    return false;
  out = v;
  return true;
}

int free_port(const std::string& host) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = host == "127.0.0.1" ? htonl(INADDR_LOOPBACK)
                                             : htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0
      && getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

// 32 bytes from the kernel's random source, in hex; empty if it fails.
std::string random_token() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    auto n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return {};
    got += static_cast<size_t>(n);
  }
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (auto b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

int status_code(int status) {
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return 1;
}

// How a child ended, in words: "exited with status 3", "was killed by
// signal 11 (SIGSEGV, core dumped)".
std::string how_it_ended(int status) {
  if (WIFEXITED(status))
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (!WIFSIGNALED(status))
    return "ended with wait status " + std::to_string(status);
  int sig = WTERMSIG(status);
  std::string out = "was killed by signal " + std::to_string(sig);
  const char* abbrev = sigabbrev_np(sig);
  std::string detail = abbrev != nullptr ? std::string{"SIG"} + abbrev : "";
  if (WCOREDUMP(status))
    detail += detail.empty() ? "core dumped" : ", core dumped";
  if (!detail.empty())
    out += " (" + detail + ")";
  return out;
}

} // namespace

int main(int argc, char** argv) {
  long np = 0;
  long port = 0;
  long timeout_ms = 0;
  std::string host = "127.0.0.1";
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        usage((std::string{what} + " needs a value").c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-np" || a == "-n" || a == "--np") {
      if (!parse_int(value("-np"), 1, 1024, np))
        return usage("-np needs an integer in [1, 1024]");
    } else if (a == "--port") {
      if (!parse_int(value("--port"), 1, 65535, port))
        return usage("--port needs an integer in [1, 65535]");
    } else if (a == "--host") {
      host = value("--host");
    } else if (a == "--timeout-ms") {
      if (!parse_int(value("--timeout-ms"), 1, 86'400'000, timeout_ms))
        return usage("--timeout-ms needs a positive integer");
    } else if (a == "-h" || a == "--help") {
      usage("starts the processes of one strategy");
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      return usage(("unknown option " + a).c_str());
    } else {
      break;
    }
  }
  if (np == 0)
    return usage("-np N is required");
  if (i >= argc)
    return usage("no program given");
  if (port == 0)
    port = free_port(host);
  if (port == 0)
    return usage("no free port found: give one with --port");
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  // A token given to varsync-run is the cluster's (processes started
  // elsewhere may share it); otherwise one for this run.
  const char* given = std::getenv("VARSYNC_CLUSTER_TOKEN");
  std::string token = given != nullptr && *given != '\0' ? given
                                                          : random_token();
  if (token.empty()) {
    std::fprintf(stderr, "varsync-run: cannot make a cluster token: %s\n",
                 std::strerror(errno));
    return 1;
  }
  std::vector<std::string> base_env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    // The launcher's own variables replace inherited ones.
    if (entry.rfind("VARSYNC_RANK=", 0) == 0
        || entry.rfind("VARSYNC_LOCAL_RANK=", 0) == 0
        || entry.rfind("VARSYNC_WORLD_SIZE=", 0) == 0
        || entry.rfind("VARSYNC_RENDEZVOUS=", 0) == 0
        || entry.rfind("VARSYNC_CLUSTER_TOKEN=", 0) == 0)
      continue;
    base_env.push_back(std::move(entry));
  }
  std::vector<pid_t> pids;
  // Each child leads a process group of its own, so that stopping it stops
  // whatever it started too.
  auto stop_all = [&pids](int sig) {
    for (auto pid : pids)
      if (pid != 0)
        kill(-pid, sig);
  };
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  for (long r = 0; r < np; ++r) {
    auto env = base_env;
    env.push_back("VARSYNC_RANK=" + std::to_string(r));
    env.push_back("VARSYNC_LOCAL_RANK=" + std::to_string(r));
    env.push_back("VARSYNC_WORLD_SIZE=" + std::to_string(np));
    env.push_back("VARSYNC_RENDEZVOUS=" + host + ":" + std::to_string(port));
    env.push_back("VARSYNC_CLUSTER_TOKEN=" + token);
    if (timeout_ms > 0)
      env.push_back("VARSYNC_TIMEOUT_MS=" + std::to_string(timeout_ms));
    std::vector<char*> envp;
    for (auto& e : env)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid = 0;
    int rc = posix_spawnp(&pid, argv[i], nullptr, &attr, argv + i,
                          envp.data());
    if (rc != 0) {
      std::fprintf(stderr, "varsync-run: cannot start %s: %s\n", argv[i],
                   std::strerror(rc));
      stop_all(SIGKILL);
      for (auto p : pids)
        waitpid(p, nullptr, 0);
      return 127;
    }
    pids.push_back(pid);
  }
  posix_spawnattr_destroy(&attr);
  int result = 0;
  size_t left = pids.size();
  bool stopping = false;
  auto stop_deadline = std::chrono::steady_clock::time_point::max();
  while (left > 0) {
    if (forwarded_signal != 0 && !stopping) {
      std::fprintf(stderr, "varsync-run: got signal %d; passing it on to the "
                           "ranks\n", static_cast<int>(forwarded_signal));
      stop_all(forwarded_signal);
      result = 128 + forwarded_signal;
      stopping = true;
      stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    }
    if (stopping && std::chrono::steady_clock::now() >= stop_deadline) {
      stop_all(SIGKILL);
      stop_deadline = std::chrono::steady_clock::time_point::max();
    }
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    for (size_t k = 0; k < pids.size(); ++k) {
      if (pids[k] != pid)
        continue;
      kill(-pid, SIGKILL); // whatever the child left behind
      pids[k] = 0;
      --left;
      int code = status_code(status);
      if (code == 0)
        continue;
      std::fprintf(stderr, "varsync-run: rank %zu (pid %d) %s%s\n", k,
                   static_cast<int>(pid), how_it_ended(status).c_str(),
                   stopping ? " after varsync-run told the ranks to stop"
                   : left > 0 ? "; stopping the other ranks"
                              : "");
      if (!stopping) {
        result = code;
        stopping = true;
        stop_all(SIGTERM);
        stop_deadline
          = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      }
    }
  }
  return result;
}
