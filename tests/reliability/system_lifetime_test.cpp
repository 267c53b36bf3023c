// A strategy's actors are stopped and awaited when its actor system is
// destroyed: a handle that outlives the system gets an error in the log and
// a bounded exit instead of a destructor that waits forever
// (tests/support/outliving_handle.cpp runs in a process of its own).

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include <unistd.h>

#include "multiprocess/spawn_processes.hpp"

namespace {

struct run_result {
  int exit_code = -1;
  std::chrono::milliseconds took{0};
  std::string output;
};

run_result run_helper(const std::string& mode) {
  varsync::testing::child_spec child;
  child.argv = {OUTLIVING_HANDLE_EXE, mode};
  child.output = "outliving_handle." + mode + "."
                 + std::to_string(::getpid()) + ".log";
  // Generous: the program itself takes well under a second.
  auto r = varsync::testing::run_children({child}, std::chrono::seconds(60));
  run_result out;
  out.exit_code = r.exit_codes.at(0);
  out.took = r.took;
  out.output = varsync::testing::read_text(child.output);
  std::remove(child.output.c_str());
  return out;
}

const char* const held_error
  = "is still held while its actor system is being destroyed";

} // namespace

TEST_CASE("V6: a strategy handle that outlives its actor system "
          "is named in the log and the system's destruction ends") {
  auto r = run_helper("held");
  INFO(r.output);
  CHECK(r.exit_code == 0); // -1: killed at the deadline, the old hang
  CHECK(r.output.find(held_error) != std::string::npos);
  CHECK(r.output.find("outliving_handle held: ok") != std::string::npos);
}

TEST_CASE("V6: the actor system's destruction waits for the "
          "actors of a strategy whose handles are gone") {
  auto r = run_helper("dropped");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.output.find(held_error) == std::string::npos);
  CHECK(r.output.find("outliving_handle dropped: ok") != std::string::npos);
}
