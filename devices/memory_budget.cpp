#include "devices/memory_budget.hpp"

#include <atomic>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>

#include "varsync/error.hpp"
#include "core/host_buffer_pool.hpp"

namespace varsync {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty()
         && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'
             || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::optional<uint64_t> parse_u64(std::string_view s) {
  s = trim(s);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || s.empty())
    return std::nullopt;
  return v;
}

// cgroup v1 reports "no limit" as PAGE_COUNTER_MAX pages (about 2^63).
constexpr uint64_t v1_unlimited_from = uint64_t{1} << 62;

} // namespace

std::optional<uint64_t> parse_mem_available(std::string_view meminfo) {
  constexpr std::string_view key = "MemAvailable:";
  size_t pos = 0;
  while (pos < meminfo.size()) {
    auto eol = meminfo.find('\n', pos);
    auto line = meminfo.substr(pos, eol == std::string_view::npos
                                      ? std::string_view::npos
                                      : eol - pos);
    pos = eol == std::string_view::npos ? meminfo.size() : eol + 1;
    if (line.substr(0, key.size()) != key)
      continue;
    auto rest = trim(line.substr(key.size()));
    uint64_t scale = 1;
    if (rest.size() >= 2 && rest.substr(rest.size() - 2) == "kB") {
      scale = 1024;
      rest = trim(rest.substr(0, rest.size() - 2));
    }
    auto v = parse_u64(rest);
    if (!v || *v > UINT64_MAX / scale)
      return std::nullopt;
    return *v * scale;
  }
  return std::nullopt;
}

std::optional<cgroup_location> parse_proc_cgroup(std::string_view text) {
  std::optional<cgroup_location> v2;
  size_t pos = 0;
  while (pos < text.size()) {
    auto eol = text.find('\n', pos);
    auto line = text.substr(pos, eol == std::string_view::npos
                                   ? std::string_view::npos
                                   : eol - pos);
    pos = eol == std::string_view::npos ? text.size() : eol + 1;
    // "hierarchy-id:controllers:path"; the path may itself hold ':'.
    auto c1 = line.find(':');
    if (c1 == std::string_view::npos)
      continue;
    auto c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos)
      continue;
    auto id = line.substr(0, c1);
    auto controllers = line.substr(c1 + 1, c2 - c1 - 1);
    auto path = std::string{trim(line.substr(c2 + 1))};
    if (path.empty() || path.front() != '/')
      continue;
    if (id == "0" && controllers.empty()) {
      v2 = cgroup_location{true, std::move(path)};
      continue;
    }
    size_t start = 0;
    while (start <= controllers.size()) {
      auto comma = controllers.find(',', start);
      auto name = controllers.substr(start, comma == std::string_view::npos
                                              ? std::string_view::npos
                                              : comma - start);
      if (name == "memory")
        return cgroup_location{false, std::move(path)};
      if (comma == std::string_view::npos)
        break;
      start = comma + 1;
    }
  }
  return v2;
}

std::optional<uint64_t> parse_cgroup_headroom(std::string_view limit,
                                              std::string_view usage) {
  auto l = parse_u64(limit); // "max" and "" fail to parse: no limit
  if (!l || *l >= v1_unlimited_from)
    return std::nullopt;
  auto u = parse_u64(usage).value_or(0);
  return u >= *l ? 0 : *l - u;
}

std::optional<uint64_t> available_memory(const memory_files& files) {
  auto mem = parse_mem_available(files.meminfo);
  auto cg = parse_cgroup_headroom(files.cgroup_limit, files.cgroup_usage);
  if (mem && cg)
    return std::min(*mem, *cg);
  return mem ? mem : cg;
}

namespace {

bool read_text(const std::string& path, std::string& out) {
  // stdio, not streams: this runs every `refresh` and /proc files are small.
  FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr)
    return false;
  out.clear();
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    out.append(buf, n);
  std::fclose(f);
  return true;
}

} // namespace

memory_files read_memory_files(const std::string& root) {
  memory_files out;
  read_text(root + "/proc/meminfo", out.meminfo);
  std::string self;
  if (!read_text(root + "/proc/self/cgroup", self))
    return out;
  auto where = parse_proc_cgroup(self);
  if (!where)
    return out;
  auto base = root + (where->v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory");
  auto limit_name = where->v2 ? "/memory.max" : "/memory.limit_in_bytes";
  auto usage_name = where->v2 ? "/memory.current" : "/memory.usage_in_bytes";
  // The tightest of the cgroup and its ancestors (a parent's limit binds its
  // children too); inside a cgroup namespace only the mount's root exists.
  std::optional<uint64_t> best;
  auto path = where->path;
  while (true) {
    auto dir = base + (path == "/" ? "" : path);
    std::string limit, usage;
    if (read_text(dir + limit_name, limit)) {
      read_text(dir + usage_name, usage);
      auto headroom = parse_cgroup_headroom(limit, usage);
      if (headroom && (!best || *headroom < *best)) {
        best = headroom;
        out.cgroup_limit = std::move(limit);
        out.cgroup_usage = std::move(usage);
      }
    }
    if (path == "/" || path.empty())
      break;
    auto slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  return out;
}

// -- what the library holds ----------------------------------------------------

namespace {

std::atomic<uint64_t> component_bytes{0};
std::atomic<uint64_t> reserved_bytes{0};
// Serializes reservations, so that two creations cannot both take the last
// of the budget.
std::mutex reserve_mtx;

uint64_t touched_bytes() {
  return component_bytes.load(std::memory_order_relaxed)
         + host_buffer_pool_cached_bytes();
}

// The automatic limit from the real files: what the library held at the
// last reading plus what was available then. Reused for `refresh` (a reading
// costs about 80 us, an all-reduce about 12), so that the library's own
// allocations since the reading still count against it.
constexpr uint64_t unknown_limit = UINT64_MAX;
std::atomic<int64_t> reading_expires_ns{INT64_MIN};
std::atomic<uint64_t> reading_limit{unknown_limit};

std::optional<uint64_t> automatic_limit() {
  auto now = std::chrono::steady_clock::now().time_since_epoch();
  auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now)
                  .count();
  if (now_ns >= reading_expires_ns.load(std::memory_order_acquire)) {
    static std::mutex mtx;
    std::lock_guard<std::mutex> guard{mtx};
    if (now_ns >= reading_expires_ns.load(std::memory_order_acquire)) {
      auto held = touched_bytes();
      auto available = available_memory(read_memory_files());
      reading_limit.store(available ? saturating_add(*available, held)
                                    : unknown_limit,
                          std::memory_order_relaxed);
      reading_expires_ns.store(
        now_ns
          + std::chrono::duration_cast<std::chrono::nanoseconds>(
              memory_budget::refresh)
              .count(),
        std::memory_order_release);
    }
  }
  auto limit = reading_limit.load(std::memory_order_relaxed);
  if (limit == unknown_limit)
    return std::nullopt;
  return limit;
}

} // namespace

void add_host_component_bytes(uint64_t bytes) {
  component_bytes.fetch_add(bytes, std::memory_order_relaxed);
}

void remove_host_component_bytes(uint64_t bytes) {
  component_bytes.fetch_sub(bytes, std::memory_order_relaxed);
}

uint64_t host_component_bytes() {
  return component_bytes.load(std::memory_order_relaxed);
}

uint64_t library_host_bytes() {
  return touched_bytes() + reserved_bytes.load(std::memory_order_relaxed);
}

// -- the budget ---------------------------------------------------------------

std::string describe_bytes(uint64_t bytes) {
  std::ostringstream os;
  constexpr uint64_t mib = uint64_t{1} << 20;
  if (bytes >= mib) {
    os.setf(std::ios::fixed);
    os.precision(bytes % mib == 0 ? 0 : 1);
    os << static_cast<double>(bytes) / static_cast<double>(mib) << " MiB ("
       << bytes << " bytes)";
  } else {
    os << bytes << " bytes";
  }
  return os.str();
}

memory_budget::memory_budget(uint64_t explicit_bytes, probe source)
  : explicit_bytes_(explicit_bytes), source_(std::move(source)) {
}

std::optional<uint64_t> memory_budget::limit() const {
  if (explicit_bytes_ > 0)
    return explicit_bytes_;
  if (!source_)
    return automatic_limit();
  auto available = source_();
  if (!available)
    return std::nullopt;
  return *available + touched_bytes();
}

caf::error memory_budget::check(uint64_t bytes, const std::string& what) const {
  return admit(bytes, what, false);
}

caf::error memory_budget::reserve(uint64_t bytes,
                                  const std::string& what) const {
  return admit(bytes, what, true);
}

void memory_budget::release_reserved(uint64_t bytes) {
  reserved_bytes.fetch_sub(bytes, std::memory_order_relaxed);
}

caf::error memory_budget::admit(uint64_t bytes, const std::string& what,
                                bool reserve) const {
  if (bytes == 0)
    return {};
  auto cap = limit();
  if (!cap)
    return {}; // nothing known to check against
  std::unique_lock<std::mutex> guard{reserve_mtx, std::defer_lock};
  if (reserve)
    guard.lock();
  auto fits = [&] {
    auto held = library_host_bytes();
    return held <= *cap && bytes <= *cap - held;
  };
  if (!fits())
    trim_host_buffer_pool(); // cached buffers are the cheapest bytes to give
  if (!fits()) {
    auto held = library_host_bytes();
    return make_error(
      errc::out_of_memory,
      what + " needs " + describe_bytes(bytes) + " of host memory but "
        + (explicit_bytes_ > 0 ? "the memory budget is "
                               : "the memory available is ")
        + describe_bytes(*cap) + " of which varsync holds "
        + describe_bytes(held)
        + (explicit_bytes_ > 0
             ? " (strategy_options::memory_budget_bytes or "
               "varsync.memory-budget-mb)"
             : " (MemAvailable or the cgroup's limit; set "
               "strategy_options::memory_budget_bytes to override)"));
  }
  if (reserve)
    reserved_bytes.fetch_add(bytes, std::memory_order_relaxed);
  return {};
}

} // namespace varsync
