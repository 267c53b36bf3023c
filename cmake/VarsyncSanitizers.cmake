# Sanitizer builds and libFuzzer instrumentation for every target.
#
#   VARSYNC_SANITIZE        ""                  (default) no sanitizer
#                           "address,undefined" ASan + UBSan; UBSan findings abort
#                                               (`null`: with UBSAN_OPTIONS=halt_on_error=1)
#                           "thread"            TSan
#   VARSYNC_BUILD_FUZZERS   OFF (default); ON builds fuzz/ (Clang only) and
#                           instruments every target for libFuzzer coverage
#
# Include this file before any target is created: the flags are added with
# add_compile_options / add_link_options and so reach every target of the
# directory and its subdirectories (library, tests, examples, benchmarks,
# fuzzers). Third-party libraries (CAF, spdlog, Catch2 from Debian) stay
# uninstrumented; see docs/sanitizers-and-fuzzing.md for what that means.

set(VARSYNC_SANITIZE "" CACHE STRING
    "Sanitizers for every target: empty (none), address,undefined, or thread")
set_property(CACHE VARSYNC_SANITIZE PROPERTY STRINGS "" "address,undefined"
                                                     "thread")
option(VARSYNC_BUILD_FUZZERS
       "Build the libFuzzer targets in fuzz/ (needs Clang; implies VARSYNC_SANITIZE=address,undefined unless set)"
       OFF)

if(VARSYNC_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR
      "VARSYNC_BUILD_FUZZERS=ON needs Clang (libFuzzer, -fsanitize=fuzzer); "
      "the C++ compiler is ${CMAKE_CXX_COMPILER_ID}. Configure with "
      "-DCMAKE_CXX_COMPILER=clang++ (Debian: apt-get install clang "
      "libclang-rt-14-dev), or use scripts/fuzz.sh.")
  endif()
  if(VARSYNC_SANITIZE STREQUAL "")
    message(STATUS "varsync: fuzzers need a sanitizer; using VARSYNC_SANITIZE=address,undefined")
    set(VARSYNC_SANITIZE "address,undefined" CACHE STRING
        "Sanitizers for every target: empty (none), address,undefined, or thread"
        FORCE)
  endif()
endif()

if(NOT VARSYNC_SANITIZE STREQUAL "")
  # Accept "address,undefined" in any order, "address", "undefined", "thread".
  string(REPLACE ";" "," _varsync_san "${VARSYNC_SANITIZE}")
  string(REPLACE " " "" _varsync_san "${_varsync_san}")
  string(REPLACE "," ";" _varsync_san_list "${_varsync_san}")
  foreach(_s IN LISTS _varsync_san_list)
    if(NOT _s MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR
        "VARSYNC_SANITIZE='${VARSYNC_SANITIZE}': unknown sanitizer '${_s}' "
        "(use \"\", \"address,undefined\" or \"thread\")")
    endif()
  endforeach()
  if("thread" IN_LIST _varsync_san_list AND NOT _varsync_san STREQUAL "thread")
    message(FATAL_ERROR
      "VARSYNC_SANITIZE='${VARSYNC_SANITIZE}': ThreadSanitizer cannot be "
      "combined with other sanitizers; use a separate build directory")
  endif()
  if(VARSYNC_BUILD_FUZZERS AND "thread" IN_LIST _varsync_san_list)
    message(FATAL_ERROR "VARSYNC_BUILD_FUZZERS=ON needs address,undefined, not thread")
  endif()

  # C++ only: the CUDA backend's .cu files (nvcc) are not instrumented.
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${_varsync_san};-fno-omit-frame-pointer>")
  add_link_options("$<$<LINK_LANGUAGE:CXX>:-fsanitize=${_varsync_san}>")
  if("undefined" IN_LIST _varsync_san_list)
    # Every UBSan finding aborts the process, so tests and fuzzers fail on it.
    # The `null` check stays recoverable so that a runtime suppression stays
    # possible for CAF 0.17's function actors spawned without arguments
    # (a reference bound through a null shared_ptr<tuple<>>, see
    # tests/sanitizers/ubsan.supp; none is needed today). With
    # UBSAN_OPTIONS=halt_on_error=1, as the scripts run, it aborts too.
    add_compile_options(
      "$<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=undefined;-fsanitize-recover=null>")
    add_link_options(
      "$<$<LINK_LANGUAGE:CXX>:-fno-sanitize-recover=undefined;-fsanitize-recover=null>")
  endif()
  message(STATUS "varsync: sanitizers enabled: -fsanitize=${_varsync_san}")
endif()

if(VARSYNC_BUILD_FUZZERS)
  # Coverage instrumentation for the library (the fuzz targets themselves link
  # with -fsanitize=fuzzer, which brings libFuzzer's main; see fuzz/).
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>")
  message(STATUS "varsync: libFuzzer instrumentation enabled (fuzz/)")
endif()
