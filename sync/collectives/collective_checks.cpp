#include "sync/collectives/collective_checks.hpp"

#include <algorithm>
#include <string>

#include "varsync/error.hpp"

namespace varsync {

bool staged_on_device(const collective_item& item) {
  return std::any_of(item.staged.begin(), item.staged.end(),
                     [](uint64_t id) { return id != 0; });
}

caf::error update_overflow_error(const std::string& name, std::string_view op,
                                 dtype type, int64_t at, int replica) {
  return make_error(errc::overflow,
                    "variable '" + name + "': " + std::string{op}
                      + " overflows " + std::string{to_string(type)}
                      + " at element " + std::to_string(at) + " on replica "
                      + std::to_string(replica) + "; nothing was applied");
}

bool inputs_equal(const collective_item& item, int replica) {
  if (replica == 0)
    return true;
  auto& mine = item.contributions[static_cast<size_t>(replica)];
  auto& first = item.contributions[0];
  return host::bitwise_equal(mine.raw(), first.raw(), mine.nbytes());
}

caf::error output_overflow_error(const collective_plan& plan, int64_t k) {
  auto& item = plan.items[static_cast<size_t>(k)];
  return make_error(errc::overflow,
                    "the " + std::string{to_string(item.rop)} + " of "
                      + std::string{to_string(item.type)} + " values (item "
                      + std::to_string(k) + ") overflows the dtype");
}

} // namespace varsync
