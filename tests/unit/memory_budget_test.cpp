// The memory budget (devices/memory_budget.hpp): the parsers get made-up
// /proc and cgroup texts, the budget a made-up "available" figure, so that
// no test needs a real cgroup or a machine short of memory.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <optional>

#include <unistd.h>

#include "varsync/error.hpp"
#include "devices/device.hpp"
#include "devices/memory_budget.hpp"
#include "varsync/tensor.hpp"

using namespace varsync;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t MiB = uint64_t{1} << 20;

const char* meminfo_text = "MemTotal:       24379556 kB\n"
                           "MemFree:        16938292 kB\n"
                           "MemAvailable:   19940988 kB\n"
                           "Buffers:          312108 kB\n"
                           "SwapTotal:             0 kB\n";

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream{p} << text;
}

} // namespace

TEST_CASE("memory budget: MemAvailable from /proc/meminfo") {
  CHECK(parse_mem_available(meminfo_text) == uint64_t{19940988} * 1024);
  CHECK(parse_mem_available("MemAvailable: 7 kB") == 7 * 1024);
  CHECK_FALSE(parse_mem_available("MemTotal: 100 kB\nMemFree: 50 kB\n"));
  CHECK_FALSE(parse_mem_available(""));
  CHECK_FALSE(parse_mem_available("MemAvailable: lots kB\n"));
  // kB values that would overflow in bytes are not made up into a figure.
  CHECK_FALSE(parse_mem_available("MemAvailable: 18446744073709551615 kB\n"));
}

TEST_CASE("memory budget: the memory cgroup from /proc/self/cgroup") {
  SECTION("v2: the unified line") {
    auto where = parse_proc_cgroup("0::/user.slice/app.scope\n");
    REQUIRE(where);
    CHECK(where->v2);
    CHECK(where->path == "/user.slice/app.scope");
  }
  SECTION("v1: the line whose controllers include memory") {
    auto where = parse_proc_cgroup("9:name=systemd:/\n"
                                   "5:cpu,memory:/jobs/42\n"
                                   "1:cpuset:/\n"
                                   "0::/\n");
    REQUIRE(where);
    CHECK_FALSE(where->v2);
    CHECK(where->path == "/jobs/42");
  }
  SECTION("a path with ':' in it") {
    auto where = parse_proc_cgroup("4:memory:/a:b\n");
    REQUIRE(where);
    CHECK(where->path == "/a:b");
  }
  SECTION("nothing usable") {
    CHECK_FALSE(parse_proc_cgroup(""));
    CHECK_FALSE(parse_proc_cgroup("garbage\n3:cpu:/x\n"));
  }
}

TEST_CASE("memory budget: cgroup headroom is limit minus usage") {
  CHECK(parse_cgroup_headroom("1073741824\n", "268435456\n")
        == uint64_t{805306368});
  CHECK(parse_cgroup_headroom("100", "150") == 0); // over the limit
  CHECK_FALSE(parse_cgroup_headroom("max\n", "12345\n"));
  // cgroup v1 without a limit.
  CHECK_FALSE(parse_cgroup_headroom("9223372036854771712\n", "7003291648\n"));
  CHECK_FALSE(parse_cgroup_headroom("", ""));
  CHECK(parse_cgroup_headroom("4096", "") == 4096); // usage unknown
}

TEST_CASE("memory budget: available is the smaller of MemAvailable and the "
          "cgroup") {
  memory_files f;
  f.meminfo = "MemAvailable: 1000 kB\n";
  CHECK(available_memory(f) == 1000 * 1024);
  f.cgroup_limit = "512000";
  f.cgroup_usage = "12000";
  CHECK(available_memory(f) == 500000);
  f.cgroup_limit = "max";
  CHECK(available_memory(f) == 1000 * 1024);
  f.meminfo.clear();
  CHECK_FALSE(available_memory(f));
  f.cgroup_limit = "2048";
  f.cgroup_usage = "48";
  CHECK(available_memory(f) == 2000);
}

TEST_CASE("memory budget: the files of a made-up v2 and v1 tree") {
  auto root = fs::temp_directory_path()
              / ("varsync_budget_" + std::to_string(::getpid()));
  fs::remove_all(root);
  SECTION("v2: the tightest of the cgroup and its ancestors") {
    write(root / "proc/meminfo", "MemAvailable: 4194304 kB\n"); // 4 GiB
    write(root / "proc/self/cgroup", "0::/jobs/one\n");
    write(root / "sys/fs/cgroup/memory.max", "max\n");
    write(root / "sys/fs/cgroup/jobs/memory.max", "2147483648\n");
    write(root / "sys/fs/cgroup/jobs/memory.current", "1073741824\n");
    write(root / "sys/fs/cgroup/jobs/one/memory.max", "max\n");
    write(root / "sys/fs/cgroup/jobs/one/memory.current", "5\n");
    auto f = read_memory_files(root.string());
    CHECK(available_memory(f) == uint64_t{1} << 30);
  }
  SECTION("v1: limit_in_bytes and usage_in_bytes") {
    write(root / "proc/meminfo", "MemAvailable: 4194304 kB\n");
    write(root / "proc/self/cgroup", "4:memory:/batch\n0::/\n");
    write(root / "sys/fs/cgroup/memory/memory.limit_in_bytes",
          "9223372036854771712\n");
    write(root / "sys/fs/cgroup/memory/batch/memory.limit_in_bytes",
          "104857600\n");
    write(root / "sys/fs/cgroup/memory/batch/memory.usage_in_bytes",
          "4857600\n");
    auto f = read_memory_files(root.string());
    CHECK(available_memory(f) == 100000000);
  }
  SECTION("a cgroup namespace: only the mount's root exists") {
    write(root / "proc/meminfo", "MemAvailable: 4194304 kB\n");
    write(root / "proc/self/cgroup", "0::/outside/the/namespace\n");
    write(root / "sys/fs/cgroup/memory.max", "67108864\n");
    write(root / "sys/fs/cgroup/memory.current", "0\n");
    auto f = read_memory_files(root.string());
    CHECK(available_memory(f) == 64 * MiB);
  }
  SECTION("no cgroup files: MemAvailable alone") {
    write(root / "proc/meminfo", "MemAvailable: 1024 kB\n");
    auto f = read_memory_files(root.string());
    CHECK(available_memory(f) == MiB);
  }
  fs::remove_all(root);
}

TEST_CASE("memory budget: an explicit budget counts the library's components") {
  auto dev = make_device({device_kind::host, 0});
  REQUIRE(dev);
  // What other tests of this process left behind counts too.
  auto base = library_host_bytes();
  memory_budget budget{base + 10 * MiB};
  CHECK_FALSE(budget.check(10 * MiB, "ten"));
  auto err = budget.check(10 * MiB + 1, "variable 'big'");
  REQUIRE(has_code(err, errc::out_of_memory));
  CHECK(message_of(err).find("variable 'big'") != std::string::npos);
  CHECK(message_of(err).find("10485761") != std::string::npos); // requested
  CHECK(message_of(err).find("memory budget") != std::string::npos);

  // A live host component takes its size (and a header) off the budget...
  auto p = (*dev)->allocate(6 * MiB);
  REQUIRE(p);
  CHECK(host_component_bytes() >= host_component_footprint(6 * MiB));
  CHECK(has_code(budget.check(6 * MiB, "six"), errc::out_of_memory));
  CHECK_FALSE(budget.check(4 * MiB - 64, "four"));
  // ...and gives it back when released.
  (*dev)->release(*p);
  CHECK_FALSE(budget.check(6 * MiB, "six"));
}

TEST_CASE("memory budget: reservations hold bytes until released") {
  auto base = library_host_bytes();
  memory_budget budget{base + 8 * MiB};
  REQUIRE_FALSE(budget.reserve(5 * MiB, "first"));
  CHECK(library_host_bytes() == base + 5 * MiB);
  CHECK(has_code(budget.reserve(5 * MiB, "second"), errc::out_of_memory));
  CHECK(library_host_bytes() == base + 5 * MiB); // the refusal took nothing
  memory_budget::release_reserved(5 * MiB);
  CHECK_FALSE(budget.reserve(5 * MiB, "second"));
  memory_budget::release_reserved(5 * MiB);
  CHECK(library_host_bytes() == base);
}

TEST_CASE("memory budget: automatic from what the machine has available") {
  std::optional<uint64_t> available = 100 * MiB;
  memory_budget budget{0, [&] { return available; }};
  CHECK(budget.explicit_bytes() == 0);
  CHECK_FALSE(budget.check(100 * MiB, "all of it"));
  auto err = budget.check(100 * MiB + 1, "variable 'w'");
  REQUIRE(has_code(err, errc::out_of_memory));
  CHECK(message_of(err).find("variable 'w'") != std::string::npos);
  CHECK(message_of(err).find("memory available") != std::string::npos);
  // Unknown: nothing to check against, nothing refused.
  available.reset();
  CHECK_FALSE(budget.check(uint64_t{1} << 60, "anything"));
}

TEST_CASE("memory budget: cached pool buffers are given back before a refusal") {
  // A freed large tensor stays in the pool for reuse (core/tensor.cpp) and
  // counts as held; a request that fits only without it trims the pool.
  {
    auto t = tensor::zeros(dtype::float32, {int64_t{4} << 20}); // 16 MiB
  }
  auto held = library_host_bytes();
  REQUIRE(held >= 16 * MiB);
  memory_budget budget{held};
  CHECK_FALSE(budget.check(16 * MiB, "after the pool's buffers"));
  CHECK(library_host_bytes() <= held - 16 * MiB);
}

TEST_CASE("memory budget: sizes saturate instead of wrapping") {
  CHECK(saturating_mul(uint64_t{1} << 40, uint64_t{1} << 30) == UINT64_MAX);
  CHECK(saturating_add(UINT64_MAX - 1, 5) == UINT64_MAX);
  // Small components: 16-byte aligned behind a 16-byte header.
  CHECK(host_component_footprint(1) == 32);
  CHECK(host_component_footprint(4) == 32);
  CHECK(host_component_footprint(17) == 48);
  CHECK(host_component_footprint(64) == 80);
  // Larger ones: 64-byte aligned behind a 64-byte header.
  CHECK(host_component_footprint(65) == 192);
  CHECK(host_component_footprint(1024) == 1088);
  CHECK(host_component_footprint(UINT64_MAX - 3) == UINT64_MAX);
  memory_budget budget{MiB};
  CHECK(has_code(budget.check(UINT64_MAX, "huge"), errc::out_of_memory));
}
