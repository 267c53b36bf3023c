// varsync-run and a service's exit status (label "multiprocess"): a CAF
// service that ends with VARSYNC_MAIN exits non-zero when it fails, and
// varsync-run stops the other ranks, exits with the first failure's status
// and names the rank and how it ended (tests/support/service_exit.cpp).

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <unistd.h>

#include "spawn_processes.hpp"

using namespace std::chrono_literals;

namespace {

struct launch {
  int exit_code = -1;
  std::chrono::milliseconds took{0};
  std::string output;
};

// varsync-run -np 2 service_exit ARGS..., its output captured.
launch run_service(const std::vector<std::string>& args) {
  varsync::testing::child_spec launcher;
  launcher.argv = {VARSYNC_RUN_EXE, "-np", "2", "--timeout-ms", "60000",
                   SERVICE_EXIT_EXE};
  launcher.argv.insert(launcher.argv.end(), args.begin(), args.end());
  launcher.output = "launcher_test." + std::to_string(::getpid()) + ".log";
  // varsync-run reaps its ranks whatever happens; the deadline is for it.
  auto r = varsync::testing::run_children({launcher}, 120s);
  launch out;
  out.exit_code = r.exit_codes.at(0);
  out.took = r.took;
  out.output = varsync::testing::read_text(launcher.output);
  std::remove(launcher.output.c_str());
  return out;
}

} // namespace

TEST_CASE("P11: varsync-run: a service that fails to restore a corrupt "
          "checkpoint exits 1, and varsync-run reports the rank and its "
          "status") {
  std::string path = "launcher_test_corrupt." + std::to_string(::getpid())
                     + ".safetensors";
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fputs("not a safetensors file at all", f);
    std::fclose(f);
  }
  auto r = run_service({"--scenario=corrupt-restore", "--path=" + path});
  std::remove(path.c_str());
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK(r.output.find("restore failed: checkpoint_corrupt")
        != std::string::npos);
  CHECK(r.output.find("exited with status 1") != std::string::npos);
  CHECK(r.output.find("varsync-run: rank ") != std::string::npos);
  // Well before the ranks' 60 s operation timeout: nobody waited for it.
  CHECK(r.took < 30s);
}

TEST_CASE("P11: varsync-run: a rank killed by a signal is named with the "
          "signal, the others are stopped and varsync-run exits 128 + "
          "signal") {
  auto r = run_service({"--scenario=killed"});
  INFO(r.output);
  CHECK(r.exit_code == 128 + 9);
  CHECK(r.output.find("varsync-run: rank 1 (pid ") != std::string::npos);
  CHECK(r.output.find("was killed by signal 9 (SIGKILL); stopping the other "
                      "ranks")
        != std::string::npos);
  // Rank 0 sleeps for 60 s unless it is stopped.
  CHECK(r.took < 30s);
}

TEST_CASE("P11: varsync-run: ranks that succeed give exit status 0") {
  auto r = run_service({"--scenario=ok"});
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find("varsync-run: rank") == std::string::npos);
}
