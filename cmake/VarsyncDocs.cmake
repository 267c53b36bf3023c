# The API reference: `cmake --build build --target varsync_docs` runs Doxygen
# over the public headers (include/varsync/) into build/docs/api/html.
# Warnings fail the target.
find_package(Doxygen QUIET)
if(DOXYGEN_FOUND AND EXISTS "${PROJECT_SOURCE_DIR}/docs/Doxyfile.in")
  set(DOXYGEN_OUTPUT_DIR "${PROJECT_BINARY_DIR}/docs/api")
  configure_file("${PROJECT_SOURCE_DIR}/docs/Doxyfile.in"
                 "${PROJECT_BINARY_DIR}/docs/Doxyfile" @ONLY)
  add_custom_target(varsync_docs
    COMMAND ${CMAKE_COMMAND} -E make_directory "${DOXYGEN_OUTPUT_DIR}"
    COMMAND Doxygen::doxygen "${PROJECT_BINARY_DIR}/docs/Doxyfile"
    WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
    COMMENT "Doxygen: API reference of include/varsync/ in ${DOXYGEN_OUTPUT_DIR}/html"
    VERBATIM)
endif()
