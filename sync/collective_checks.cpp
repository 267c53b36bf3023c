#include "sync/collective_checks.hpp"

#include <string>

#include "varsync/error.hpp"

namespace varsync {

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
