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
#include <optional>
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

// What the command line asked for; `program` indexes argv.
struct launch {
  long np = 0;
  long port = 0;
  long timeout_ms = 0;
  std::string host = "127.0.0.1";
  int program = 0;
};

// Parses the options before PROG; an exit status (usage printed) when
// they are wrong or ask for help.
std::optional<int> parse_options(int argc, char** argv, launch& out) {
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
      if (!parse_int(value("-np"), 1, 1024, out.np))
        return usage("-np needs an integer in [1, 1024]");
    } else if (a == "--port") {
      if (!parse_int(value("--port"), 1, 65535, out.port))
        return usage("--port needs an integer in [1, 65535]");
    } else if (a == "--host") {
      out.host = value("--host");
    } else if (a == "--timeout-ms") {
      if (!parse_int(value("--timeout-ms"), 1, 86'400'000, out.timeout_ms))
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
  if (out.np == 0)
    return usage("-np N is required");
  if (i >= argc)
    return usage("no program given");
  out.program = i;
  if (out.port == 0)
    out.port = free_port(out.host);
  if (out.port == 0)
    return usage("no free port found: give one with --port");
  return std::nullopt;
}

// varsync-run's environment without the variables it sets itself (its own
// replace inherited ones).
std::vector<std::string> inherited_environment() {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    if (entry.rfind("VARSYNC_RANK=", 0) == 0
        || entry.rfind("VARSYNC_LOCAL_RANK=", 0) == 0
        || entry.rfind("VARSYNC_WORLD_SIZE=", 0) == 0
        || entry.rfind("VARSYNC_RENDEZVOUS=", 0) == 0
        || entry.rfind("VARSYNC_CLUSTER_TOKEN=", 0) == 0)
      continue;
    out.push_back(std::move(entry));
  }
  return out;
}

// Rank `r`'s environment.
std::vector<std::string> rank_environment(const launch& l,
                                          std::vector<std::string> env,
                                          long r, const std::string& token) {
  env.push_back("VARSYNC_RANK=" + std::to_string(r));
  env.push_back("VARSYNC_LOCAL_RANK=" + std::to_string(r));
  env.push_back("VARSYNC_WORLD_SIZE=" + std::to_string(l.np));
  env.push_back("VARSYNC_RENDEZVOUS=" + l.host + ":" + std::to_string(l.port));
  env.push_back("VARSYNC_CLUSTER_TOKEN=" + token);
  if (l.timeout_ms > 0)
    env.push_back("VARSYNC_TIMEOUT_MS=" + std::to_string(l.timeout_ms));
  return env;
}

// The ranks' pids, each leading a process group of its own (stopping it
// stops whatever it started too); 0 where a rank has ended.
class ranks {
public:
  void signal(int sig) const {
    for (auto pid : pids_)
      if (pid != 0)
        kill(-pid, sig);
  }

  // Starts every rank; on a failure, stops those started and returns 127.
  std::optional<int> spawn(const launch& l, char** argv,
                           const std::string& token) {
    auto base = inherited_environment();
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    std::optional<int> failed;
    for (long r = 0; r < l.np && !failed; ++r) {
      auto env = rank_environment(l, base, r, token);
      std::vector<char*> envp;
      for (auto& e : env)
        envp.push_back(e.data());
      envp.push_back(nullptr);
      pid_t pid = 0;
      const char* prog = argv[l.program];
      int rc = posix_spawnp(&pid, prog, nullptr, &attr, argv + l.program,
                            envp.data());
      if (rc == 0) {
        pids_.push_back(pid);
        continue;
      }
      std::fprintf(stderr, "varsync-run: cannot start %s: %s\n", prog,
                   std::strerror(rc));
      signal(SIGKILL);
      for (auto p : pids_)
        waitpid(p, nullptr, 0);
      failed = 127;
    }
    posix_spawnattr_destroy(&attr);
    return failed;
  }

  // Waits for every rank (P11): the first that fails stops the others
  // (SIGTERM, SIGKILL 5 s later), a forwarded signal likewise; returns
  // varsync-run's exit status.
  int supervise() {
    size_t left = pids_.size();
    while (left > 0) {
      if (forwarded_signal != 0 && !stopping_) {
        std::fprintf(stderr, "varsync-run: got signal %d; passing it on to "
                             "the ranks\n", static_cast<int>(forwarded_signal));
        stop(forwarded_signal, 128 + forwarded_signal);
      }
      if (stopping_ && std::chrono::steady_clock::now() >= stop_deadline_) {
        signal(SIGKILL);
        stop_deadline_ = std::chrono::steady_clock::time_point::max();
      }
      int status = 0;
      pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      for (size_t k = 0; k < pids_.size(); ++k)
        if (pids_[k] == pid) {
          --left;
          ended(k, status, left);
        }
    }
    return result_;
  }

private:
  void stop(int sig, int result) {
    result_ = result;
    stopping_ = true;
    signal(sig);
    stop_deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  }

  // Rank `k` ended with wait status `status`; `left` ranks still run.
  void ended(size_t k, int status, size_t left) {
    pid_t pid = pids_[k];
    kill(-pid, SIGKILL); // whatever the child left behind
    pids_[k] = 0;
    int code = status_code(status);
    if (code == 0)
      return;
    std::fprintf(stderr, "varsync-run: rank %zu (pid %d) %s%s\n", k,
                 static_cast<int>(pid), how_it_ended(status).c_str(),
                 stopping_ ? " after varsync-run told the ranks to stop"
                 : left > 0 ? "; stopping the other ranks"
                            : "");
    if (!stopping_)
      stop(SIGTERM, code);
  }

  std::vector<pid_t> pids_;
  int result_ = 0;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point stop_deadline_
    = std::chrono::steady_clock::time_point::max();
};

} // namespace

int main(int argc, char** argv) {
  launch l;
  if (auto status = parse_options(argc, argv, l))
    return *status;
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
  ranks children;
  if (auto status = children.spawn(l, argv, token))
    return *status;
  return children.supervise();
}
