# One target per layer, so that the compiler, not the README, enforces the
# direction of the dependencies:
#
#   core <- devices, messages <- sync <- actors <- api <- input
#
# (input: distributed input, the samplers that share a dataset among the
# replicas and keep their position in a checkpoint.)
#
# Each layer compiles against a private include root that holds links to its
# own folder and the folders below it only (build/layers/<layer>/): a source
# in devices/ that includes "sync/..." does not compile. Public headers
# (include/varsync/) are visible to every layer; tests/check_layers.cmake
# checks which layer each of them belongs to.
#
# The layers are OBJECT libraries; varsync::varsync is one library (shared or
# static, BUILD_SHARED_LIBS) made of their objects.

include(GNUInstallDirs)

set(VARSYNC_LAYERS core devices messages sync actors api input)
set(VARSYNC_LAYER_DEPS_core "")
set(VARSYNC_LAYER_DEPS_devices core)
set(VARSYNC_LAYER_DEPS_messages core)
set(VARSYNC_LAYER_DEPS_sync core devices messages)
set(VARSYNC_LAYER_DEPS_actors core devices messages sync)
set(VARSYNC_LAYER_DEPS_api core devices messages sync actors)
set(VARSYNC_LAYER_DEPS_input core devices messages sync actors api)

set(VARSYNC_GENERATED_INCLUDE "${PROJECT_BINARY_DIR}/generated/include")
configure_file("${PROJECT_SOURCE_DIR}/cmake/version.hpp.in"
               "${VARSYNC_GENERATED_INCLUDE}/varsync/version.hpp" @ONLY)

# The public headers and what using them needs: C++20, CAF's headers.
add_library(varsync_public_headers INTERFACE)
target_include_directories(varsync_public_headers INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<BUILD_INTERFACE:${VARSYNC_GENERATED_INCLUDE}>)
target_compile_features(varsync_public_headers INTERFACE cxx_std_20)
target_link_libraries(varsync_public_headers INTERFACE CAF::core)

# Include root of a layer: links to its folder and the folders it may use.
function(varsync_layer_include_root layer out)
  set(root "${PROJECT_BINARY_DIR}/layers/${layer}")
  foreach(dir ${ARGN})
    if(NOT EXISTS "${root}/${dir}")
      file(MAKE_DIRECTORY "${root}")
      file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${dir}" "${root}/${dir}" SYMBOLIC)
    endif()
  endforeach()
  set(${out} "${root}" PARENT_SCOPE)
endfunction()

include(VarsyncPrecompiledHeaders)

set(VARSYNC_LAYER_OBJECTS "")
foreach(layer ${VARSYNC_LAYERS})
  # A layer's own files, and its collective algorithms (sync/collectives/).
  file(GLOB sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/${layer}/*.cpp"
       "${PROJECT_SOURCE_DIR}/${layer}/collectives/*.cpp")
  set(target varsync_${layer})
  add_library(${target} OBJECT ${sources})
  varsync_layer_include_root(${layer} root ${VARSYNC_LAYER_DEPS_${layer}} ${layer})
  target_include_directories(${target} PRIVATE "${root}")
  target_link_libraries(${target} PUBLIC varsync_public_headers
                        PRIVATE spdlog::spdlog Threads::Threads)
  set_target_properties(${target} PROPERTIES
    POSITION_INDEPENDENT_CODE "${BUILD_SHARED_LIBS}")
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic>)
  varsync_precompile(${target})
  list(APPEND VARSYNC_LAYER_OBJECTS $<TARGET_OBJECTS:${target}>)
endforeach()
# GCC's -O2 "very cheap" vectorizer cost model leaves the fused no-alias loops
# of the host all-reduce scalar; "cheap" vectorizes them (devices/host_kernels.cpp).
set_source_files_properties(devices/host_kernels.cpp PROPERTIES
  COMPILE_OPTIONS "$<$<CXX_COMPILER_ID:GNU>:-fvect-cost-model=cheap>")

add_library(varsync ${VARSYNC_LAYER_OBJECTS})
add_library(varsync::varsync ALIAS varsync)
target_include_directories(varsync PUBLIC
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<BUILD_INTERFACE:${VARSYNC_GENERATED_INCLUDE}>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(varsync PUBLIC cxx_std_20)
target_link_libraries(varsync PUBLIC CAF::core Threads::Threads
                      PRIVATE spdlog::spdlog)
set_target_properties(varsync PROPERTIES
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
  EXPORT_NAME varsync)

# Tests, benchmarks and fuzz targets of this project may reach the
# implementation's headers (actor-level tests speak the internal protocol);
# nothing installed does.
add_library(varsync_internal INTERFACE)
varsync_layer_include_root(internal all_layers ${VARSYNC_LAYERS})
target_include_directories(varsync_internal INTERFACE "${all_layers}")
target_link_libraries(varsync_internal INTERFACE varsync spdlog::spdlog)
