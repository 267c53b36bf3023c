#include "sync/policy/sync_policy.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "varsync/error.hpp"
#include "sync/policy/none_policy.hpp"
#include "sync/policy/on_read_policy.hpp"
#include "sync/policy/on_write_policy.hpp"

namespace varsync {

namespace {

std::string quote_name(std::string_view s) {
  return "'" + std::string{s} + "'";
}

} // namespace

namespace {

// Length of the UTF-8 sequence at s[i], or 0 if it is not valid UTF-8
// (overlong forms, surrogates and code points above U+10FFFF included).
size_t utf8_length(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  auto cont = [&](size_t k) { return i + k < s.size() && (b(k) & 0xc0) == 0x80; };
  unsigned char c = b(0);
  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf)
    return cont(1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    if (!cont(1) || !cont(2))
      return 0;
    if ((c == 0xe0 && b(1) < 0xa0) || (c == 0xed && b(1) > 0x9f))
      return 0;
    return 3;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    if (!cont(1) || !cont(2) || !cont(3))
      return 0;
    if ((c == 0xf0 && b(1) < 0x90) || (c == 0xf4 && b(1) > 0x8f))
      return 0;
    return 4;
  }
  return 0;
}

std::string printable(std::string_view name) {
  // Error messages show at most 64 bytes, control characters escaped.
  std::string out;
  for (size_t i = 0; i < name.size() && i < 64; ++i) {
    auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (name.size() > 64)
    out += "...";
  return out;
}

} // namespace

caf::error check_variable_name(std::string_view name) {
  auto fail = [&](const std::string& rule) {
    std::string text = "variable name '";
    text += printable(name);
    text += "': ";
    text += rule;
    return make_error(errc::invalid_argument, std::move(text));
  };
  if (name.empty())
    return make_error(errc::invalid_argument,
                      "a variable needs a non-empty name");
  if (name.size() > max_variable_name_bytes)
    return fail("a name has at most "
                + std::to_string(max_variable_name_bytes) + " bytes, this one "
                + std::to_string(name.size()));
  for (size_t i = 0; i < name.size();) {
    auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f)
      return fail("control character at byte " + std::to_string(i)
                  + " (names are printable UTF-8)");
    auto n = utf8_length(name, i);
    if (n == 0)
      return fail("invalid UTF-8 at byte " + std::to_string(i));
    i += n;
  }
  if (name.substr(0, 2) == "__")
    return fail("names starting with \"__\" are reserved (checkpoint "
                "metadata)");
  if (name.find("/replica_") != std::string_view::npos)
    return fail("\"/replica_\" is reserved for the checkpoint entries of "
                "per-component variables");
  return {};
}

caf::error sync_policy::check_scatter(const variable_info&, scatter_op) const {
  return {};
}

caf::expected<update_target>
sync_policy::cross_replica_scatter(const variable_info&, scatter_op) const {
  return update_target::every_component; // W3, N2: x on every component
}

synchronization resolve_synchronization(synchronization requested) {
  return requested == synchronization::auto_ ? synchronization::on_write
                                             : requested;
}

const sync_policy& policy_for(synchronization resolved) {
  static const on_write_policy on_write;
  static const on_read_policy on_read;
  static const none_policy none;
  switch (resolved) {
    case synchronization::none: return none;
    case synchronization::on_read: return on_read;
    default: return on_write;
  }
}

caf::expected<variable_info> validate_variable_spec(const variable_spec& spec) {
  if (auto err = check_variable_name(spec.name))
    return err;
  auto sync_value = static_cast<int64_t>(spec.sync);
  auto sync = parse_synchronization(sync_value, spec.name);
  if (!sync)
    return std::move(sync.error());
  auto agg = parse_aggregation(static_cast<int64_t>(spec.agg), spec.name);
  if (!agg)
    return std::move(agg.error());
  auto type_value = static_cast<int>(spec.initial_value.type());
  if (type_value > static_cast<int>(dtype::int64))
    return make_error(errc::invalid_argument,
                      "variable " + quote_name(spec.name) + ": unknown dtype "
                        + std::to_string(type_value));
  variable_info info;
  info.name = spec.name;
  info.type = spec.initial_value.type();
  info.shape = spec.initial_value.shape();
  info.sync = resolve_synchronization(*sync);
  info.agg = *agg;
  if (info.agg == aggregation::mean && !is_floating(info.type))
    return make_error(errc::invalid_argument,
                      "variable " + quote_name(spec.name)
                        + ": mean aggregation needs a floating dtype but the "
                          "initial value is "
                        + std::string{to_string(info.type)}
                        + "; use sum or only_first_replica for integers");
  if (auto err = policy_for(info.sync).validate_creation(info, spec.trainable))
    return err;
  return info;
}

caf::error validate_value(const variable_info& info, const tensor& value,
                          std::string_view what) {
  if (value.type() != info.type)
    return make_error(errc::dtype_mismatch,
                      "variable " + quote_name(info.name) + ": " + std::string{what}
                        + " expects dtype " + std::string{to_string(info.type)}
                        + " but got " + std::string{to_string(value.type())});
  if (value.shape() != info.shape)
    return make_error(errc::shape_mismatch,
                      "variable " + quote_name(info.name) + ": " + std::string{what}
                        + " expects shape " + to_string(info.shape)
                        + " but got " + to_string(value.shape()));
  return {};
}

caf::error validate_scalar(const variable_info& info, double value) {
  if (!info.shape.empty())
    return make_error(errc::shape_mismatch,
                      "variable " + quote_name(info.name) + " has shape "
                        + to_string(info.shape)
                        + "; a scalar value needs shape []");
  if (!is_floating(info.type)) {
    double lo = info.type == dtype::int32
                  ? static_cast<double>(std::numeric_limits<int32_t>::min())
                  : static_cast<double>(std::numeric_limits<int64_t>::min());
    // Exclusive upper bounds: 2^31 and 2^63 are exactly representable.
    double hi = info.type == dtype::int32 ? 2147483648.0
                                          : 9223372036854775808.0;
    if (!std::isfinite(value) || value != std::trunc(value) || value < lo
        || value >= hi)
      return make_error(errc::invalid_argument,
                        "variable " + quote_name(info.name) + " has dtype "
                          + std::string{to_string(info.type)} + "; the value "
                          + std::to_string(value)
                          + " is not an integer it can hold");
  }
  return {};
}

caf::expected<tensor> scalar_for(const variable_info& info, double value) {
  if (auto err = validate_scalar(info, value))
    return err;
  return tensor::filled(info.type, {}, value);
}

} // namespace varsync
