# CAF's actor headers (and Catch2's, in the tests) dominate the compile
# time of most units: with a precompiled header each target parses them once
# instead of once per unit (about half the CPU time of a build on 2 cores).
# VARSYNC_PRECOMPILED_HEADERS=OFF builds without (to check that every file
# includes what it uses).
option(VARSYNC_PRECOMPILED_HEADERS
       "Precompile CAF's (and the tests' Catch2) common headers per target" ON)

set(VARSYNC_PCH_HEADERS
  <caf/actor_system.hpp> <caf/actor_system_config.hpp>
  <caf/typed_event_based_actor.hpp> <caf/scoped_actor.hpp> <caf/send.hpp>
  <caf/error.hpp> <caf/expected.hpp>
  <string> <vector> <memory> <functional> <map> <unordered_map>)

# varsync_precompile(target [header...]): the common headers, and more.
function(varsync_precompile target)
  if(VARSYNC_PRECOMPILED_HEADERS)
    target_precompile_headers(${target} PRIVATE ${VARSYNC_PCH_HEADERS} ${ARGN})
  endif()
endfunction()

# varsync_precompile_reuse(target from): the precompiled header of `from`
# (a target compiled with the same flags), not one of its own.
function(varsync_precompile_reuse target from)
  if(VARSYNC_PRECOMPILED_HEADERS)
    set_target_properties(${target} PROPERTIES PRECOMPILE_HEADERS_REUSE_FROM ${from})
  endif()
endfunction()
