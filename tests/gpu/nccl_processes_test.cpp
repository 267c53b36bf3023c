// NCCL across two processes on one machine, one GPU enough: each process
// gets its own NCCL_HOSTID, so NCCL treats them as two hosts (two ranks on
// one GPU in one communicator are refused since NCCL 2.5). The processes are
// tests/gpu/ranks/nccl_rank.cpp; what each mode checks is written there.
// Needs a GPU.

#include "gpu_test_util.hpp"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "../multiprocess/spawn_processes.hpp"

using namespace std::chrono_literals;

namespace {

/// nccl_rank beside this test binary (the build tree and a bundle made by
/// scripts/gpu-bundle.sh keep them together), else where it was built.
std::string rank_exe() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto beside = self.parent_path() / "nccl_rank";
    if (std::filesystem::exists(beside, ec))
      return beside.string();
  }
  return NCCL_RANK_EXE;
}

/// Runs both ranks of `mode`; true if both exited 0 (a rank 1 that stopped
/// itself is killed once rank 0 is done).
void run_pair(const std::string& mode) {
  char tmpl[] = "/tmp/varsync-nccl-XXXXXX";
  const char* made = mkdtemp(tmpl);
  REQUIRE(made != nullptr);
  const std::string dir = made;
  const std::string tag = std::to_string(getpid());
  std::vector<varsync::testing::child_spec> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ranks[r].argv = {rank_exe(), mode, std::to_string(r), dir};
    ranks[r].env = {"NCCL_HOSTID=varsync-test-" + tag + "-" + std::to_string(r)};
    if (std::getenv("NCCL_SOCKET_IFNAME") == nullptr)
      ranks[r].env.emplace_back("NCCL_SOCKET_IFNAME=lo");
  }
  auto out = varsync::testing::run_children(ranks, 90s);
  std::filesystem::remove_all(dir);
  INFO("mode " << mode << ": exit codes " << out.exit_codes[0] << " and "
               << out.exit_codes[1] << " after " << out.took.count() << " ms");
  CHECK(out.spawned);
  CHECK(out.exit_codes[0] == 0);
  // The peer: 0, or killed by the harness while it stopped itself.
  CHECK((out.exit_codes[1] == 0 || mode != "values"));
}

} // namespace

TEST_CASE("nccl across processes: two processes on one GPU reduce 16-bit "
          "values in float32, keep NaN in max, and sum staged buffers",
          "[gpu][nccl][processes]") {
  run_pair("values");
}

TEST_CASE("nccl across processes: a peer that died after joining fails the "
          "first collective within its deadline, nothing applied, teardown "
          "at once",
          "[gpu][nccl][processes][deadline]") {
  run_pair("dead");
}

TEST_CASE("nccl across processes: a stopped peer, before the first "
          "collective connected: the run fails within its deadline, nothing "
          "applied, teardown at once",
          "[gpu][nccl][processes][deadline]") {
  run_pair("stopped");
}

TEST_CASE("nccl across processes: a peer that stops after a collective "
          "succeeded: the next run fails within its deadline, nothing "
          "applied, teardown at once",
          "[gpu][nccl][processes][deadline]") {
  run_pair("stopped-warm");
}

TEST_CASE("nccl across processes: joining fails at its deadline when the "
          "peer never comes",
          "[gpu][nccl][processes][deadline]") {
  run_pair("join-absent");
}
