#include "varsync/device_id.hpp"

#include <charconv>

#include "varsync/error.hpp"

namespace varsync {

std::string to_string(const device_id& id) {
  return (id.kind == device_kind::host ? "cpu:" : "cuda:")
         + std::to_string(id.index);
}

caf::expected<device_id> parse_device(std::string_view text) {
  auto fail = [&] {
    return make_error(errc::invalid_argument,
                      "device '" + std::string{text}
                        + "' is not of the form cpu:K or cuda:K");
  };
  auto colon = text.find(':');
  if (colon == std::string_view::npos)
    return fail();
  auto kind_text = text.substr(0, colon);
  auto index_text = text.substr(colon + 1);
  device_id id;
  if (kind_text == "cpu")
    id.kind = device_kind::host;
  else if (kind_text == "cuda")
    id.kind = device_kind::cuda;
  else
    return fail();
  if (index_text.empty() || index_text.size() > 4)
    return fail();
  auto [end, ec] = std::from_chars(index_text.data(),
                                   index_text.data() + index_text.size(),
                                   id.index);
  if (ec != std::errc{} || end != index_text.data() + index_text.size()
      || id.index < 0)
    return fail();
  return id;
}

} // namespace varsync
