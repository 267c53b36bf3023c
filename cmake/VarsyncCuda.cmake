# The CUDA backend switch. VARSYNC_CUDA=AUTO builds the backend when nvcc (and
# NCCL) are found, ON requires them, OFF never builds it. Without the backend
# the host-only library is built exactly as before.
#
# With the backend, the library varsync::cuda holds devices/cuda/*.cu,
# devices/cuda/*.cpp, sync/nccl/*.cpp and actors/cuda/*.cpp (three units of
# cmake/VarsyncLayerTable.cmake), links CUDA::cudart
# and NCCL::nccl and carries the compile definition VARSYNC_HAVE_CUDA=1
# (PUBLIC, so that tests and examples can test for it too). VARSYNC_HAVE_CUDA
# is also a CMake variable (ON/OFF) visible to the rest of the build.
include(CheckLanguage)

set(VARSYNC_HAVE_CUDA OFF)
if(NOT VARSYNC_CUDA STREQUAL "OFF")
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(VARSYNC_HAVE_CUDA ON)
  elseif(VARSYNC_CUDA STREQUAL "ON")
    message(FATAL_ERROR "VARSYNC_CUDA=ON but no CUDA compiler was found")
  endif()
endif()

if(VARSYNC_HAVE_CUDA)
  # H100 / H200: sm_90 machine code plus compute_90 PTX, so that newer GPUs can
  # JIT the kernels. Must be set before enable_language(CUDA). A user's
  # -DCMAKE_CUDA_ARCHITECTURES=... wins.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
    set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
  endif()
  # One CUDA runtime for the whole program: the shared libcudart that
  # CUDA::cudart names (the default, static cudart, would be a second copy).
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  enable_language(CUDA)
  # C++20 for the .cu files (CUDA sources otherwise inherit CXX_STANDARD 20).
  # CMake before 3.26 knows no CUDA20 dialect flag for nvcc; nvcc >= 12 takes
  # -std=c++20, so teach it.
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION
     OR CMAKE_CUDA20_STANDARD_COMPILE_OPTION STREQUAL "")
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  if(NOT DEFINED CMAKE_CUDA_STANDARD)
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  endif()
  find_package(CUDAToolkit REQUIRED)

  # NCCL ships no CMake config: cmake/FindNCCL.cmake (installed with the
  # package for consumers of varsync::cuda).
  find_package(NCCL QUIET)
  if(NOT NCCL_FOUND AND VARSYNC_CUDA STREQUAL "ON")
    message(FATAL_ERROR "VARSYNC_CUDA=ON but NCCL was not found (nccl.h: "
                        "${NCCL_INCLUDE_DIR}, libnccl: ${NCCL_LIBRARY}); "
                        "set NCCL_ROOT")
  elseif(NOT NCCL_FOUND)
    message(STATUS "varsync: nvcc found but NCCL not found; CUDA backend disabled")
    set(VARSYNC_HAVE_CUDA OFF)
  endif()
endif()

# varsync::cuda: the CUDA backend as its own library on top of varsync::varsync,
# so that host-only programs never link libcudart or libnccl. It registers
# itself with the host library when loaded (actors/cuda/cuda_backend.cpp); its
# link interface keeps that object from being dropped.
#
# Its three units (cmake/VarsyncLayerTable.cmake) compile apart, each against
# the include root of what it may use: cuda_devices (devices/cuda: the
# devices layer and the CUDA runtime), cuda_sync (sync/nccl: up to the sync
# layer, cuda_devices and NCCL), cuda_actors (actors/cuda: up to the actors
# layer and both).
varsync_unit_sources(cuda_devices VARSYNC_CUDA_SOURCES)
if(VARSYNC_HAVE_CUDA AND VARSYNC_CUDA_SOURCES)
  varsync_add_backend_unit(cuda_devices LINK CUDA::cudart)
  varsync_add_backend_unit(cuda_sync LINK CUDA::cudart NCCL::nccl)
  varsync_add_backend_unit(cuda_actors)
  foreach(unit cuda_devices cuda_sync cuda_actors)
    target_compile_definitions(varsync_${unit} PRIVATE VARSYNC_HAVE_CUDA=1)
    # Bit-exact agreement with the host kernels: no fused multiply-add, IEEE
    # division and square root, no flushing of subnormals (nvcc's defaults
    # except for contraction, which is turned off here).
    target_compile_options(varsync_${unit} PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:--fmad=false>)
  endforeach()
  add_library(varsync_cuda $<TARGET_OBJECTS:varsync_cuda_devices>
              $<TARGET_OBJECTS:varsync_cuda_sync> $<TARGET_OBJECTS:varsync_cuda_actors>)
  add_library(varsync::cuda ALIAS varsync_cuda)
  target_link_libraries(varsync_cuda PUBLIC varsync CUDA::cudart
                        PRIVATE NCCL::nccl spdlog::spdlog)
  target_compile_definitions(varsync_cuda PUBLIC VARSYNC_HAVE_CUDA=1)
  target_link_options(varsync_cuda INTERFACE
    "LINKER:--undefined=varsync_cuda_backend_anchor")
  set_target_properties(varsync_cuda PROPERTIES
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
    EXPORT_NAME cuda)
  message(STATUS "varsync: CUDA backend varsync::cuda enabled (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES}, NCCL ${NCCL_LIBRARY})")
elseif(VARSYNC_HAVE_CUDA)
  set(VARSYNC_HAVE_CUDA OFF)
  message(STATUS "varsync: nvcc found (${CMAKE_CUDA_COMPILER}); no CUDA backend sources, host backend only")
else()
  message(STATUS "varsync: CUDA backend disabled, host backend only")
endif()
