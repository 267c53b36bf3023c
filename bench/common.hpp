#pragma once
// Shared helpers of the benchmark programs: command line (--quick, --json),
// order statistics, wall-clock timing and the JSON-lines records that
// bench/report.py turns into the suite's table. No CAF headers here.
//
// Every program prints readable lines on stdout and appends one JSON object
// per measurement to the file given with --json:
//   {"key": "bulk.r2.s67108864", "value": 0.0123, "unit": "s", ...}
// Comparisons (ratios, targets) are made by bench/report.py from these keys,
// so that figures of different programs (and of the MPI and TensorFlow peers)
// can be compared in one table.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <optional>
#include <vector>

#include <time.h>
#include <unistd.h>

namespace bench {

using clock_type = std::chrono::steady_clock;

inline double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

inline double micros_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::micro>(clock_type::now() - t0)
    .count();
}

struct options {
  bool quick = false;
  std::string json; // where records go (appended); empty: nowhere
  std::vector<std::string> rest;
};

inline options parse_options(int argc, char** argv) {
  options out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick")
      out.quick = true;
    else if (a == "--json" && i + 1 < argc)
      out.json = argv[++i];
    else if (a.rfind("--json=", 0) == 0)
      out.json = a.substr(7);
    else
      out.rest.push_back(a);
  }
  return out;
}

/// CPU time of the whole process (all threads), in seconds.
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// Order statistics of a sample (nearest-rank percentiles).
struct stats {
  double median = 0;
  double p99 = 0;
  double min = 0;
  double max = 0;
  double mean = 0;
  size_t n = 0;
};

inline stats summarize(std::vector<double> xs) {
  stats s;
  if (xs.empty())
    return s;
  std::sort(xs.begin(), xs.end());
  s.n = xs.size();
  s.median = xs.size() % 2 == 1
               ? xs[xs.size() / 2]
               : 0.5 * (xs[xs.size() / 2 - 1] + xs[xs.size() / 2]);
  auto rank = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(xs.size())));
  s.p99 = xs[std::min(xs.size() - 1, rank == 0 ? 0 : rank - 1)];
  s.min = xs.front();
  s.max = xs.back();
  double sum = 0;
  for (auto x : xs)
    sum += x;
  s.mean = sum / static_cast<double>(xs.size());
  return s;
}

/// Calls `call` `warmup` times untimed, then `n` times timed (microseconds).
inline stats time_calls_us(int n, int warmup, const std::function<void()>& call) {
  for (int i = 0; i < warmup; ++i)
    call();
  std::vector<double> us;
  us.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    auto t0 = clock_type::now();
    call();
    us.push_back(micros_since(t0));
  }
  return summarize(std::move(us));
}

/// Calls `op` `warmup` times untimed, then `n` times timed (seconds). `op`
/// returns an error-like value (true: failed): the first failure is printed
/// with `what` and nothing is returned.
template <class Op>
std::optional<stats> time_ok_seconds(int n, int warmup, Op op,
                                     const char* what) {
  std::vector<double> secs;
  for (int i = 0; i < warmup + n; ++i) {
    auto t0 = clock_type::now();
    auto err = op();
    const double t = seconds_since(t0);
    if (err) {
      std::fprintf(stderr, "%s failed\n", what);
      return std::nullopt;
    }
    if (i >= warmup)
      secs.push_back(t);
  }
  return summarize(std::move(secs));
}

/// One JSON-lines record writer (appends; one object per line).
class recorder {
public:
  explicit recorder(const std::string& path) {
    if (!path.empty()) {
      out_.open(path, std::ios::app);
      if (!out_)
        std::fprintf(stderr, "cannot open %s for appending\n", path.c_str());
    }
  }

  using numbers = std::vector<std::pair<std::string, double>>;
  using strings = std::vector<std::pair<std::string, std::string>>;

  /// {"key": key, "value": value, "unit": unit, <numbers>, <strings>}
  void record(const std::string& key, double value, const std::string& unit,
              const numbers& extra = {}, const strings& text = {}) {
    if (!out_.is_open())
      return;
    std::string line = "{\"key\": " + quote(key) + ", \"value\": "
                       + number(value) + ", \"unit\": " + quote(unit);
    for (auto& [k, v] : extra)
      line += ", " + quote(k) + ": " + number(v);
    for (auto& [k, v] : text)
      line += ", " + quote(k) + ": " + quote(v);
    line += "}\n";
    out_ << line;
    out_.flush();
  }

  /// A wall time in seconds: value = median, plus min/n.
  void seconds(const std::string& key, const stats& s) {
    record(key, s.median, "s",
           {{"min", s.min}, {"n", static_cast<double>(s.n)}});
  }

  /// A latency sample in microseconds: value = median, plus p99/min/n.
  void latency(const std::string& key, const stats& s,
               const strings& text = {}) {
    record(key, s.median, "us",
           {{"p99", s.p99}, {"min", s.min}, {"n", static_cast<double>(s.n)}},
           text);
  }

private:
  static std::string number(double v) {
    if (!std::isfinite(v))
      return "null";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
  }

  static std::string quote(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += c;
      }
    }
    return out + "\"";
  }

  std::ofstream out_;
};

/// "4 KiB", "64 MiB".
inline std::string size_name(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g %s", v, units[u]);
  return buf;
}

/// Resident set size of this process in bytes (/proc/self/statm).
inline size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr)
    return 0;
  unsigned long pages_total = 0;
  unsigned long pages_resident = 0;
  if (std::fscanf(f, "%lu %lu", &pages_total, &pages_resident) != 2)
    pages_resident = 0;
  std::fclose(f);
  return static_cast<size_t>(pages_resident)
         * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

} // namespace bench
