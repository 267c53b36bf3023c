#include "messages/client_call.hpp"

#include "varsync/error.hpp"

namespace varsync {

client_call::~client_call() {
  counted.give_back(); // before the caller hears of it
  fail(done, make_error(errc::shut_down, "the strategy has shut down"));
}

} // namespace varsync
