// main() of etcd_tests: runs the Catch2 session where etcd-server is
// installed and exits with 77 (CTest's SKIP_RETURN_CODE for these tests)
// where it is not. Listing the tests needs no etcd.

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <iostream>

#include "etcd_server.hpp"

int main(int argc, char** argv) {
  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv); rc != 0)
    return rc;
  const auto& cfg = session.configData();
  const bool listing = cfg.listTests || cfg.listTestNamesOnly || cfg.listTags
                       || cfg.listReporters || cfg.showHelp;
  if (!listing && varsync::testing::etcd_binary().empty()) {
    std::cout << (argc > 0 ? argv[0] : "etcd_tests")
              << ": SKIPPED: etcd is not installed (Debian's etcd-server); "
                 "exiting with 77\n";
    return 77;
  }
  return session.run();
}
