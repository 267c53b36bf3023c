#include "messages/client_call.hpp"

#include "varsync/error.hpp"

namespace varsync {

client_call::~client_call() {
  give_back();
  fail(done, make_error(errc::shut_down, "the strategy has shut down"));
}

} // namespace varsync
