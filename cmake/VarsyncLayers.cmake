# One target per unit of cmake/VarsyncLayerTable.cmake, so that the compiler,
# not the README, enforces the direction of the dependencies:
#
#   core <- devices, messages <- sync/policy, sync, sync/transport
#   <- sync/collectives <- actors <- actors/replica <- actors/coordinator
#   <- api <- input (varsync::varsync)
#   and the backends beside their layers: devices/cuda, sync/nccl, actors/cuda
#   (varsync::cuda); sync/shm, sync/gloo, actors/cluster (varsync::distributed)
#
# Each unit compiles against a private include root (build/layers/<unit>/)
# made of real folders holding links to the files of its own folders and of
# the folders of the units it uses, and nothing else: a source in
# sync/gloo/ that includes "actors/..." or "sync/shm/...", or one in sync/
# that includes "sync/gloo/...", does not compile. Public headers
# (include/varsync/) are visible to every unit; cmake/check_layers.cmake
# (CTest: layering) checks which unit each of them belongs to, and the rest
# of the table, over every folder.
#
# The units are OBJECT libraries; varsync::varsync is one library (shared or
# static, BUILD_SHARED_LIBS) made of the host layers' objects, varsync::cuda
# and varsync::distributed of their backend units' objects.

include(GNUInstallDirs)

include("${CMAKE_CURRENT_LIST_DIR}/VarsyncLayerTable.cmake")
# The host library's units, in the order of the table.
set(VARSYNC_LAYERS core devices messages advisor ${VARSYNC_SYNC_UNITS} actors
    actors_replica actors_coordinator api input addons)

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

# varsync_unit_include_root(name out unit...): the include root
# build/layers/<name>/ of a target that may use the given units: real
# folders with one link per file of each unit's folders. Rebuilt at every
# configure (file(REMOVE_RECURSE) removes links, it does not follow them);
# adding or removing a file of a folder re-runs the configure
# (CONFIGURE_DEPENDS), adding a folder takes a line in the table.
function(varsync_unit_include_root name out)
  set(root "${PROJECT_BINARY_DIR}/layers/${name}")
  file(REMOVE_RECURSE "${root}")
  foreach(unit ${ARGN})
    if(NOT DEFINED VARSYNC_UNIT_FOLDERS_${unit})
      message(FATAL_ERROR "varsync: no unit ${unit} in cmake/VarsyncLayerTable.cmake")
    endif()
    foreach(folder ${VARSYNC_UNIT_FOLDERS_${unit}})
      file(MAKE_DIRECTORY "${root}/${folder}")
      file(GLOB entries CONFIGURE_DEPENDS LIST_DIRECTORIES false
           "${PROJECT_SOURCE_DIR}/${folder}/*")
      foreach(entry ${entries})
        get_filename_component(entry_name "${entry}" NAME)
        file(CREATE_LINK "${entry}" "${root}/${folder}/${entry_name}" SYMBOLIC)
      endforeach()
    endforeach()
  endforeach()
  set(${out} "${root}" PARENT_SCOPE)
endfunction()

# The sources of a unit: the .cpp (and .cu) files of its folders.
function(varsync_unit_sources unit out)
  set(sources "")
  foreach(folder ${VARSYNC_UNIT_FOLDERS_${unit}})
    file(GLOB found CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/${folder}/*.cpp"
         "${PROJECT_SOURCE_DIR}/${folder}/*.cu")
    list(APPEND sources ${found})
  endforeach()
  set(${out} ${sources} PARENT_SCOPE)
endfunction()

# varsync_add_backend_unit(unit [PIC] [LINK lib...]): the OBJECT library
# varsync_<unit> of a backend unit, which sees the public headers, its own
# folders and those of the units it uses (nothing else of the tree), and
# only the libraries named here.
function(varsync_add_backend_unit unit)
  cmake_parse_arguments(arg "PIC" "" "LINK" ${ARGN})
  varsync_unit_sources(${unit} sources)
  set(target varsync_${unit})
  add_library(${target} OBJECT ${sources})
  varsync_unit_include_root(${unit} root ${VARSYNC_UNIT_USES_${unit}} ${unit})
  target_include_directories(${target} PRIVATE "${root}")
  target_link_libraries(${target} PRIVATE varsync_public_headers spdlog::spdlog
                        Threads::Threads ${arg_LINK})
  if(arg_PIC)
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  else()
    set_target_properties(${target} PROPERTIES
      POSITION_INDEPENDENT_CODE "${BUILD_SHARED_LIBS}")
  endif()
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic>)
endfunction()

include(VarsyncPrecompiledHeaders)

set(VARSYNC_LAYER_OBJECTS "")
foreach(layer ${VARSYNC_LAYERS})
  varsync_unit_sources(${layer} sources)
  set(target varsync_${layer})
  add_library(${target} OBJECT ${sources})
  if(layer IN_LIST VARSYNC_PUBLIC_ONLY_UNITS)
    # An add-on sees the public headers and its own folder, nothing else.
    varsync_unit_include_root(${layer} root ${layer})
  else()
    varsync_unit_include_root(${layer} root ${VARSYNC_UNIT_USES_${layer}} ${layer})
  endif()
  target_include_directories(${target} PRIVATE "${root}")
  target_link_libraries(${target} PUBLIC varsync_public_headers
                        PRIVATE spdlog::spdlog Threads::Threads)
  set_target_properties(${target} PROPERTIES
    POSITION_INDEPENDENT_CODE "${BUILD_SHARED_LIBS}")
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic>)
  # One precompiled header for all the host units (same flags): the first
  # builds it, the others reuse it.
  if(VARSYNC_LAYER_OBJECTS)
    varsync_precompile_reuse(${target} varsync_core)
  else()
    varsync_precompile(${target})
  endif()
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
varsync_unit_include_root(internal all_layers ${VARSYNC_UNITS})
target_include_directories(varsync_internal INTERFACE "${all_layers}")
target_link_libraries(varsync_internal INTERFACE varsync spdlog::spdlog)
