# Negative test of the compiler's fence: compiles a file of a unit with the
# exact command the build uses for it (compile_commands.json), with one
# forbidden include in front, and expects the compiler to refuse that include
# as not found. One run per header of FORBIDDEN (separated by commas); each header must
# exist in the source tree, so that only the unit's include root hides it.
#
#   cmake -DBUILD_DIR=<build> -DSOURCE_DIR=<repo> -DFILE=sync/gloo/gloo_group.cpp
#         -DFORBIDDEN=actors/cluster/rendezvous_gate.hpp,sync/shm/shared_memory_group.hpp
#         -P tests/layering/compile_fence.cmake
#
# Fails if any of them is reachable (e.g. when the unit's include root holds
# the repository, or every layer).

cmake_minimum_required(VERSION 3.22)

set(db "${BUILD_DIR}/compile_commands.json")
if(NOT EXISTS "${db}")
  message(FATAL_ERROR "no ${db} (configure with CMAKE_EXPORT_COMPILE_COMMANDS=ON)")
endif()
file(READ "${db}" json)
set(source "${SOURCE_DIR}/${FILE}")
string(JSON n LENGTH "${json}")
math(EXPR last "${n} - 1")
set(command "")
foreach(i RANGE ${last})
  string(JSON file GET "${json}" ${i} file)
  if(file STREQUAL source)
    string(JSON command GET "${json}" ${i} command)
    string(JSON directory GET "${json}" ${i} directory)
    break()
  endif()
endforeach()
if(command STREQUAL "")
  message(FATAL_ERROR "${FILE} is compiled by no command of ${db}")
endif()

get_filename_component(ext "${FILE}" LAST_EXT)
string(MAKE_C_IDENTIFIER "${FILE}" stem)
set(work "${BUILD_DIR}/fence_probes")
file(MAKE_DIRECTORY "${work}")
set(failures "")
string(REPLACE "," ";" FORBIDDEN "${FORBIDDEN}")
foreach(header IN LISTS FORBIDDEN)
  if(NOT EXISTS "${SOURCE_DIR}/${header}")
    message(FATAL_ERROR "${header} is not in the source tree: the probe would prove nothing")
  endif()
  string(MAKE_C_IDENTIFIER "${header}" hstem)
  set(probe "${work}/${stem}__${hstem}${ext}")
  # The unit's own file, with the forbidden include in front.
  file(WRITE "${probe}" "#include \"${header}\"\n#include \"${source}\"\n")
  string(REPLACE " ${source}" " ${probe}" probe_command "${command}")
  string(REGEX REPLACE " -o [^ ]+" " -o ${probe}.o" probe_command "${probe_command}")
  execute_process(COMMAND sh -c "${probe_command}" WORKING_DIRECTORY "${directory}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(REGEX REPLACE "([][+.*()^$?|\\\\])" "\\\\\\1" header_re "${header}")
  string(REPLACE ";" "," out "${out}")
  if(rc EQUAL 0)
    list(APPEND failures "${FILE} compiled with #include \"${header}\"")
  # GCC: "<header>: No such file or directory"; Clang (the sanitizer
  # builds): "'<header>' file not found".
  elseif(NOT out MATCHES "${header_re}: No such file or directory"
         AND NOT out MATCHES "'${header_re}' file not found")
    list(APPEND failures "${FILE} with #include \"${header}\" failed, but not for want of the header:\n${out}")
  else()
    message(STATUS "refused as expected: ${FILE} with #include \"${header}\"")
  endif()
  file(REMOVE "${probe}" "${probe}.o")
endforeach()
if(failures)
  foreach(f IN LISTS failures)
    message(STATUS "fence hole: ${f}")
  endforeach()
  message(FATAL_ERROR "the include root of ${FILE}'s unit reaches a forbidden header")
endif()
