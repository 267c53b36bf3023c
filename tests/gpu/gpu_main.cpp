// main() of gpu_tests: runs the Catch2 session when a CUDA GPU is present and
// exits with 77 (CTest's SKIP_RETURN_CODE for these tests) when there is none.
// Listing the tests (catch_discover_tests runs --list-test-names-only at build
// time) never touches CUDA, so the tests can be discovered on machines
// without a GPU or a driver.

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <iostream>

#include "devices/cuda/cuda_device.hpp"
#include "varsync/error.hpp"

int main(int argc, char** argv) {
  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv); rc != 0)
    return rc;
  const auto& cfg = session.configData();
  const bool listing = cfg.listTests || cfg.listTestNamesOnly || cfg.listTags
                       || cfg.listReporters || cfg.showHelp;
  if (!listing) {
    // Only a machine without a GPU skips; a broken GPU machine fails.
    auto gpus = varsync::cuda_gpu_count();
    if (!gpus) {
      std::cerr << (argc > 0 ? argv[0] : "gpu_tests") << ": "
                << varsync::describe(gpus.error()) << "\n";
      return 1;
    }
    if (*gpus == 0) {
      std::cout << (argc > 0 ? argv[0] : "gpu_tests")
                << ": SKIPPED: no CUDA GPU on this machine; exiting with 77\n";
      return 77;
    }
  }
  return session.run();
}
