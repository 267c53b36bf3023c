# The Gloo transport of the cross-process collective (sync/gloo: the Gloo
# group and the rendezvous store client; actors/gloo: the store actor and
# the process group joiner), built as varsync::distributed (target
# varsync_gloo) when Debian's libgloo-dev is found. Linking it lets
# strategy_options::cluster span processes: it registers its joiner with
# libvarsync (sync/process_group.hpp), so single-process programs never link
# Gloo. Not installed yet (docs/multiprocess.md).
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
  add_library(varsync_gloo STATIC
    ${PROJECT_SOURCE_DIR}/actors/gloo/gloo_process_group.cpp
    ${PROJECT_SOURCE_DIR}/actors/gloo/rendezvous_store_actor.cpp
    ${PROJECT_SOURCE_DIR}/sync/gloo/control_store.cpp
    ${PROJECT_SOURCE_DIR}/sync/gloo/gloo_group.cpp)
  add_library(varsync::distributed ALIAS varsync_gloo)
  target_link_libraries(varsync_gloo PUBLIC varsync_internal gloo CAF::io)
  # Keeps the joiner's registration in static links (see cuda_backend.cpp).
  target_link_options(varsync_gloo INTERFACE
    "LINKER:--undefined=varsync_gloo_transport_anchor")
  message(STATUS "varsync: Gloo transport varsync_gloo enabled")
else()
  message(STATUS "varsync: Gloo transport not built (VARSYNC_GLOO=${VARSYNC_GLOO})")
endif()
