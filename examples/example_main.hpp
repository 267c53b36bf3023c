#pragma once
// What the examples share around CAF's main: options are declared on the
// actor_system_config (so --long-help lists them and caf-application.ini can
// set them), parsed with one adaptation of CAF 0.17: it parses long options
// only as --name=value; the examples have always accepted --name value too,
// so the config joins those first. Each example ends with VARSYNC_MAIN()
// (<varsync/ext/service_main.hpp>), so what its caf_main returns is its exit
// status.

#include <cstring>
#include <string>
#include <vector>

#include <caf/actor_system_config.hpp>
#include <caf/config_option_set.hpp>
#include <caf/string_view.hpp>

#include <varsync/ext/service_main.hpp>

namespace examples {

/// argv without the program name, with "--name value" joined into
/// "--name=value" for every option of `opts` that takes a value.
inline std::vector<std::string>
join_long_values(const caf::config_option_set& opts, int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() > 2 && arg.compare(0, 2, "--") == 0
        && arg.find('=') == std::string::npos && i + 1 < argc) {
      auto name = arg.substr(2);
      auto opt = opts.cli_long_name_lookup(caf::string_view{name});
      if (opt != nullptr && !opt->is_flag()) {
        out.push_back(arg + "=" + argv[++i]);
        continue;
      }
    }
    out.push_back(std::move(arg));
  }
  return out;
}

/// A bool flag of an example: declared unbound (`.add<bool>(name, ...)`)
/// and read into its member after parsing. CAF 0.17's option bound to a
/// bool member calls a null function while parsing "--flag" in clang-built
/// programs that also declare varsync's options (seen under ASan); unbound
/// options do not.
struct flag {
  bool* value;
  const char* name;
};

/// An example's config: Base declares the options in its constructor and
/// lists its bool flags in `flags`.
template <class Base>
struct config : Base {
  /// Hides actor_system_config::parse, which exec_main calls on the
  /// caf_main's config type.
  caf::error parse(int argc, char** argv, const char* ini_file) {
    auto err = caf::actor_system_config::parse(
      join_long_values(this->custom_options_, argc, argv), ini_file);
    if (!err)
      for (auto& f : this->flags)
        *f.value = caf::get_or<bool>(
          static_cast<const caf::actor_system_config&>(*this),
          caf::string_view{f.name, std::strlen(f.name)}, false);
    return err;
  }
};

} // namespace examples
