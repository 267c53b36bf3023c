#include "messages/client_call.hpp"

#include "varsync/error.hpp"

namespace varsync {

client_call::~client_call() {
  fail(done, make_error(errc::shut_down, "the strategy has shut down"));
}

} // namespace varsync
