// The error codes of varsync/error.hpp: names and category.

#include <catch2/catch.hpp>

#include "varsync/error.hpp"

using namespace varsync;

TEST_CASE("errc: would_block has a name and round-trips through caf::error") {
  CHECK(to_string(errc::would_block) == "would_block");
  auto err = make_error(errc::would_block, "use s.async()");
  CHECK(has_code(err, errc::would_block));
  CHECK(code_of(err) == errc::would_block);
  CHECK(message_of(err) == "use s.async()");
  CHECK(describe(err).find("would_block") != std::string::npos);
}

TEST_CASE("errc: fenced has a name of its own") {
  CHECK(to_string(errc::fenced) == "fenced");
  auto err = make_error(errc::fenced, "process 1 leads in epoch 2");
  CHECK(has_code(err, errc::fenced));
  CHECK(!has_code(err, errc::replica_failed));
  CHECK(describe(err).find("fenced") != std::string::npos);
}
