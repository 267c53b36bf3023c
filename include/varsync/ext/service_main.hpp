#pragma once
// The exit status of a CAF 0.17 service. CAF's exec_main (and so CAF_MAIN)
// discards what caf_main returns and exits 0 unless the command line was
// wrong, so a service that failed looks like one that succeeded to its
// launcher (varsync-run, a shell, a supervisor). End the program with
// VARSYNC_MAIN() instead of CAF_MAIN(): caf_main may then return an int, and
// code that finds a failure elsewhere (an actor, a callback, while the actor
// system shuts down) reports it with set_exit_status (docs/service-guide.md).

#include <type_traits>

#include <caf/actor_system.hpp>
#include <caf/exec_main.hpp>

namespace varsync {

/// Records `status` as the process's exit status if it is the first non-zero
/// one (later ones are ignored, so the first failure is what a launcher
/// reports). Thread-safe; 0 changes nothing.
void set_exit_status(int status) noexcept;

/// The first non-zero status recorded by set_exit_status, else 0.
int exit_status() noexcept;

/// caf::exec_main<Modules...>(caf_main, argc, argv) that returns a status:
/// CAF's own failure (a bad command line or config file) if there was one,
/// else caf_main's return value if it returns a non-zero int, else
/// exit_status() once the actor system is gone. caf_main returns void or int
/// and takes the same arguments as with CAF_MAIN.
template <class... Modules, class R, class... Args>
int exec_main(R (*caf_main)(caf::actor_system&, Args...), int argc,
              char** argv) {
  static_assert(std::is_void_v<R> || std::is_same_v<R, int>,
                "caf_main returns void or int");
  auto run = [caf_main](caf::actor_system& sys, Args... args) {
    if constexpr (std::is_void_v<R>)
      caf_main(sys, args...);
    else
      set_exit_status(caf_main(sys, args...));
  };
  int rc = caf::exec_main<Modules...>(run, argc, argv);
  return rc != 0 ? rc : exit_status();
}

} // namespace varsync

/// CAF_MAIN(...) whose process exits with varsync::exec_main's status.
#define VARSYNC_MAIN(...)                                                      \
  int main(int argc, char** argv) {                                            \
    return ::varsync::exec_main<__VA_ARGS__>(caf_main, argc, argv);            \
  }
