#pragma once
// The host memory budget. Under Linux's default overcommit an allocation
// larger than the memory left succeeds, and the process is killed when its
// pages are touched; so every request whose size comes from the user (a
// variable's components, a restore's buffers, the outputs of reductions and
// gathers) is checked here first and fails with out_of_memory, nothing
// allocated, when it does not fit.
//
// The budget bounds the host memory the library holds in this process: live
// host components, creations in progress and the buffers the tensor pool
// keeps for reuse. It is either explicit (strategy_options or
// "varsync.memory-budget-mb") or automatic: what the library held when the
// machine was last asked plus what was available then, the smaller of
// /proc/meminfo's MemAvailable and the headroom of the process's cgroup.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <caf/error.hpp>

namespace varsync {

// -- the figures, parsed from file texts so that tests need no real files ----

/// MemAvailable of a /proc/meminfo text, in bytes; nullopt when absent.
std::optional<uint64_t> parse_mem_available(std::string_view meminfo);

/// Where the process's memory cgroup is, from a /proc/self/cgroup text: the
/// unified hierarchy's "0::/path" line (v2) or the v1 line whose controllers
/// include "memory" (v1 wins when both are present: it is the one limiting).
struct cgroup_location {
  bool v2 = true;
  std::string path;
};
std::optional<cgroup_location> parse_proc_cgroup(std::string_view text);

/// limit - usage (0 when usage exceeds the limit) from the texts of
/// memory.max / memory.current (v2) or memory.limit_in_bytes /
/// memory.usage_in_bytes (v1); nullopt for "max", an empty or unparsable
/// text, or a v1 "no limit" (a value near 2^63).
std::optional<uint64_t> parse_cgroup_headroom(std::string_view limit,
                                              std::string_view usage);

/// The texts the automatic budget is computed from (empty: not available).
struct memory_files {
  std::string meminfo;
  std::string cgroup_limit;
  std::string cgroup_usage;
};

/// The smaller of MemAvailable and the cgroup headroom; nullopt when
/// neither is known (then nothing is refused).
std::optional<uint64_t> available_memory(const memory_files& files);

/// Reads /proc/meminfo, /proc/self/cgroup and the cgroup's files below
/// `root` ("" for the real ones; tests pass a made-up tree).
memory_files read_memory_files(const std::string& root = "");

// -- what the library holds ----------------------------------------------------

/// Live host components of this process (the host device counts them).
void add_host_component_bytes(uint64_t bytes);
void remove_host_component_bytes(uint64_t bytes);
uint64_t host_component_bytes();

/// Host components up to this size are small: 16-byte aligned behind a
/// 16-byte header (a scalar costs 32 bytes, not 128: thousands of scalar
/// variables are common). Larger ones are 64-byte aligned behind a 64-byte
/// header (devices/host_device.cpp).
constexpr uint64_t small_host_component = 64;

/// The bytes a host component of `nbytes` takes, header included.
constexpr uint64_t host_component_footprint(uint64_t nbytes) {
  if (nbytes <= small_host_component)
    return (nbytes + 15) / 16 * 16 + 16;
  constexpr uint64_t unit = 64;
  if (nbytes > UINT64_MAX - 2 * unit)
    return UINT64_MAX;
  return (nbytes + unit - 1) / unit * unit + unit;
}

/// a * b, UINT64_MAX when it does not fit (sizes come from the user).
constexpr uint64_t saturating_mul(uint64_t a, uint64_t b) {
  return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/// a + b, UINT64_MAX when it does not fit.
constexpr uint64_t saturating_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/// Host bytes the library holds now: components, creations in progress and
/// the tensor pool's cached buffers.
uint64_t library_host_bytes();

// -- the budget ---------------------------------------------------------------

class memory_budget {
public:
  /// What the machine has available now (nullopt: unknown).
  using probe = std::function<std::optional<uint64_t>()>;

  /// `explicit_bytes` 0: automatic, from `source` (default: the real files,
  /// read at most every `refresh`).
  explicit memory_budget(uint64_t explicit_bytes = 0, probe source = {});

  uint64_t explicit_bytes() const { return explicit_bytes_; }

  /// out_of_memory unless `bytes` more fit: the message names `what`, the
  /// bytes requested and the budget. Cached pool buffers are handed back to
  /// the system before a request is refused.
  caf::error check(uint64_t bytes, const std::string& what) const;

  /// check(), then holds `bytes` as in use until release_reserved(): for
  /// creations, whose memory is allocated later by the replicas.
  caf::error reserve(uint64_t bytes, const std::string& what) const;
  static void release_reserved(uint64_t bytes);

  /// The most bytes the library may hold now; nullopt: no limit known.
  std::optional<uint64_t> limit() const;

  /// How long a reading of the real files is reused.
  static constexpr std::chrono::milliseconds refresh{100};

private:
  caf::error admit(uint64_t bytes, const std::string& what,
                   bool reserve) const;

  uint64_t explicit_bytes_;
  probe source_;
};

/// "64 MiB (67108864 bytes)".
std::string describe_bytes(uint64_t bytes);

} // namespace varsync
