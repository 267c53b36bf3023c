#include "messages/client_call.hpp"

#include "varsync/error.hpp"

namespace varsync {

client_call::~client_call() {
  counted.give_back(); // before the caller hears of it
  // Most calls started (their completion taken): no error to build.
  if (pending(done))
    fail(done, make_error(errc::shut_down, "the strategy has shut down"));
}

} // namespace varsync
