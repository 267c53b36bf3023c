# The transports of the cross-process collective and their control plane
# (sync/gloo: the Gloo group and the rendezvous store client; sync/shm: the
# shared memory group for processes on one host; actors/cluster: the control
# plane, that is the store actor, the rendezvous gate and its handshake, the
# control connections, the sequencer, health, and the process group
# joiner), built as varsync::distributed (target
# varsync_gloo) when Debian's libgloo-dev is found. Linking it lets
# strategy_options::cluster span processes: it registers its joiner with
# libvarsync (sync/transport/process_group.hpp), so single-process programs never link
# Gloo. Installed as the `distributed` component of varsync's CMake package,
# with the varsync-run launcher.
if(PROJECT_IS_TOP_LEVEL)
  set(VARSYNC_GLOO_DEFAULT AUTO)
else()
  set(VARSYNC_GLOO_DEFAULT OFF)
endif()
set(VARSYNC_GLOO "${VARSYNC_GLOO_DEFAULT}" CACHE STRING
    "Gloo transport varsync_gloo: AUTO (when Gloo is found), ON, OFF")
set_property(CACHE VARSYNC_GLOO PROPERTY STRINGS AUTO ON OFF)

set(VARSYNC_HAVE_GLOO OFF)
if(NOT VARSYNC_GLOO STREQUAL "OFF")
  find_package(Gloo CONFIG QUIET)
  if(TARGET gloo)
    set(VARSYNC_HAVE_GLOO ON)
  elseif(VARSYNC_GLOO STREQUAL "ON")
    message(FATAL_ERROR "VARSYNC_GLOO=ON but Gloo was not found "
                        "(apt-get install libgloo-dev)")
  endif()
endif()

if(VARSYNC_HAVE_GLOO)
  # Three units (cmake/VarsyncLayerTable.cmake), each compiled against the
  # include root of what it may use: shm (sync/shm: up to the sync layer, no
  # Gloo), gloo_sync (sync/gloo: up to the sync layer and Gloo), cluster
  # (actors/cluster: up to the actors layer, both of them, Gloo and caf::io).
  varsync_add_backend_unit(shm PIC)
  varsync_add_backend_unit(gloo_sync PIC LINK gloo)
  varsync_add_backend_unit(cluster PIC LINK gloo CAF::io)
  varsync_precompile(varsync_gloo_sync)
  varsync_precompile(varsync_cluster)
  add_library(varsync_gloo STATIC $<TARGET_OBJECTS:varsync_shm>
              $<TARGET_OBJECTS:varsync_gloo_sync> $<TARGET_OBJECTS:varsync_cluster>)
  add_library(varsync::distributed ALIAS varsync_gloo)
  # The implementation's headers stay private (as for varsync::cuda): a
  # program that links varsync::distributed sees only include/varsync/.
  target_link_libraries(varsync_gloo PUBLIC varsync gloo CAF::io
                        PRIVATE spdlog::spdlog)
  set_target_properties(varsync_gloo PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    EXPORT_NAME distributed)
  # Keeps the joiner's registration in static links (see cuda_backend.cpp).
  target_link_options(varsync_gloo INTERFACE
    "LINKER:--undefined=varsync_gloo_transport_anchor")
  message(STATUS "varsync: Gloo transport varsync_gloo enabled")
else()
  message(STATUS "varsync: Gloo transport not built (VARSYNC_GLOO=${VARSYNC_GLOO})")
endif()

# varsync-run: starts the processes of one strategy on this host (it needs
# nothing of varsync; built with the transport that gives it a purpose).
if(VARSYNC_HAVE_GLOO)
  add_executable(varsync-run ${PROJECT_SOURCE_DIR}/scripts/launcher/varsync_run.cpp)
  target_compile_options(varsync-run PRIVATE -Wall -Wextra -Wpedantic)
  if(VARSYNC_BUILD_TESTS)
    # A failing process stops the others at once, with its status; the
    # environment names every rank.
    add_test(NAME launcher.failure_stops_the_others
             COMMAND ${CMAKE_COMMAND} -E env
                     bash -c "start=$(date +%s); $<TARGET_FILE:varsync-run> -np 3 sh -c 'if [ \$VARSYNC_RANK = 1 ]; then exit 3; fi; sleep 60'; rc=$?; [ $rc = 3 ] && [ $(( $(date +%s) - start )) -lt 30 ]")
    add_test(NAME launcher.environment
             COMMAND bash -c "$<TARGET_FILE:varsync-run> -np 2 sh -c 'test \$VARSYNC_WORLD_SIZE = 2 && test -n \$VARSYNC_RENDEZVOUS && test \$VARSYNC_RANK -lt 2'")
    # Every process of one run gets the same cluster token: a fresh one
    # (64 hex digits), or the one varsync-run was given.
    add_test(NAME launcher.cluster_token
             COMMAND bash -c "out=$(mktemp -d) && $<TARGET_FILE:varsync-run> -np 3 sh -c 'printf %s \"\$VARSYNC_CLUSTER_TOKEN\" > '$out'/\$VARSYNC_RANK' && t=$(cat $out/0) && echo $t | grep -Eq '^[0-9a-f]{64}$' && [ \"$(cat $out/1)\" = $t ] && [ \"$(cat $out/2)\" = $t ] && t2=$($<TARGET_FILE:varsync-run> -np 1 sh -c 'printf %s \"\$VARSYNC_CLUSTER_TOKEN\"') && [ $t2 != $t ] && [ \"$(VARSYNC_CLUSTER_TOKEN=given-token-0123456789 $<TARGET_FILE:varsync-run> -np 1 sh -c 'printf %s \"\$VARSYNC_CLUSTER_TOKEN\"')\" = given-token-0123456789 ]; rc=$?; rm -rf $out; exit $rc")
    set_tests_properties(launcher.failure_stops_the_others launcher.environment
                         launcher.cluster_token
                         PROPERTIES TIMEOUT 60 LABELS multiprocess)
  endif()
endif()
