# Install rules: the library, the public headers (include/varsync/ with its
# ext/ and internal/ folders; ext/cuda_stream.hpp with varsync::cuda only), the
# CMake package (varsyncConfig.cmake with the cuda and distributed
# components, the varsync-run launcher, the version
# file, FindCAF.cmake for CAF 0.17, which ships no CMake config) and a
# pkg-config file.
include(CMakePackageConfigHelpers)

set(VARSYNC_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/varsync")

install(TARGETS varsync EXPORT varsyncTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/varsync DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp" PATTERN "cuda_stream.hpp" EXCLUDE)
install(FILES "${VARSYNC_GENERATED_INCLUDE}/varsync/version.hpp"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/varsync)
install(EXPORT varsyncTargets NAMESPACE varsync::
        DESTINATION ${VARSYNC_CMAKE_DIR})

if(TARGET varsync_cuda)
  install(TARGETS varsync_cuda EXPORT varsyncCudaTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES include/varsync/ext/cuda_stream.hpp
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/varsync/ext)
  install(EXPORT varsyncCudaTargets NAMESPACE varsync::
          DESTINATION ${VARSYNC_CMAKE_DIR})
endif()

if(TARGET varsync_gloo)
  install(TARGETS varsync_gloo EXPORT varsyncDistributedTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT varsyncDistributedTargets NAMESPACE varsync::
          DESTINATION ${VARSYNC_CMAKE_DIR})
  install(TARGETS varsync-run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

install(TARGETS varsync-trace RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

configure_package_config_file(cmake/varsyncConfig.cmake.in
  "${PROJECT_BINARY_DIR}/varsyncConfig.cmake"
  INSTALL_DESTINATION ${VARSYNC_CMAKE_DIR})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/varsyncConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/varsyncConfig.cmake"
              "${PROJECT_BINARY_DIR}/varsyncConfigVersion.cmake"
              cmake/FindCAF.cmake
              cmake/FindNCCL.cmake
        DESTINATION ${VARSYNC_CMAKE_DIR})

# pkg-config: the libraries a program that uses the public headers links.
# A static varsync also needs its private dependencies.
if(BUILD_SHARED_LIBS)
  set(VARSYNC_PC_LIBS_PRIVATE "-lspdlog -lfmt")
  set(VARSYNC_PC_LIBS_STATIC "")
else()
  set(VARSYNC_PC_LIBS_PRIVATE "")
  set(VARSYNC_PC_LIBS_STATIC "-lspdlog -lfmt")
endif()
file(RELATIVE_PATH VARSYNC_PC_PREFIX_FROM_PCDIR
     "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
configure_file(cmake/varsync.pc.in "${PROJECT_BINARY_DIR}/varsync.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/varsync.pc"
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
