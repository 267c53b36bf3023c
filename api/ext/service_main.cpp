// The exit status a service reports through VARSYNC_MAIN.

#include "varsync/ext/service_main.hpp"

#include <atomic>

namespace varsync {

namespace {

std::atomic<int> first_failure{0};

} // namespace

void set_exit_status(int status) noexcept {
  int none = 0;
  if (status != 0)
    first_failure.compare_exchange_strong(none, status);
}

int exit_status() noexcept {
  return first_failure.load();
}

} // namespace varsync
