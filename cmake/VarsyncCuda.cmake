# The CUDA backend switch. VARSYNC_CUDA=AUTO builds the backend when nvcc is
# found, ON requires it, OFF never builds it. The backend's sources arrive
# with the CUDA issue; until then the switch only reports what it found.
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

file(GLOB VARSYNC_CUDA_SOURCES CONFIGURE_DEPENDS
  "${CMAKE_CURRENT_SOURCE_DIR}/devices/cuda/*.cu"
  "${CMAKE_CURRENT_SOURCE_DIR}/devices/cuda/*.cpp"
  "${CMAKE_CURRENT_SOURCE_DIR}/sync/nccl/*.cpp")

function(varsync_add_cuda_backend target)
  if(VARSYNC_HAVE_CUDA AND VARSYNC_CUDA_SOURCES)
    message(STATUS "varsync: CUDA backend enabled (${CMAKE_CUDA_COMPILER})")
  elseif(VARSYNC_HAVE_CUDA)
    message(STATUS "varsync: nvcc found (${CMAKE_CUDA_COMPILER}); no CUDA backend sources yet, host backend only")
  else()
    message(STATUS "varsync: CUDA backend disabled, host backend only")
  endif()
endfunction()
