# Negative test of the layer check: copies the product (its folders and
# include/) to WORK_DIR, checks that the copy passes, adds one line to one
# file of the copy (or creates a file, when FILE does not exist yet), and
# expects cmake/check_layers.cmake to refuse it with a violation that names
# that file (or the text EXPECT, when given).
#
#   cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch> -DFILE=sync/gloo/gloo_group.cpp
#         "-DLINE=#include \"varsync/strategy.hpp\"" -P tests/layering/inject.cmake
#
# Fails if the check misses the line (e.g. when it skips the file's folder).

cmake_minimum_required(VERSION 3.22)
include("${SOURCE_DIR}/cmake/VarsyncLayerTable.cmake")

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
foreach(dir ${VARSYNC_PRODUCT_ROOTS} include)
  file(COPY "${SOURCE_DIR}/${dir}" DESTINATION "${WORK_DIR}")
endforeach()

function(run_check out_rc out_text)
  execute_process(COMMAND "${CMAKE_COMMAND}" -DSOURCE_DIR=${WORK_DIR}
                          -P "${SOURCE_DIR}/cmake/check_layers.cmake"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE text)
  set(${out_rc} "${rc}" PARENT_SCOPE)
  set(${out_text} "${text}" PARENT_SCOPE)
endfunction()

run_check(rc text)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the copy fails the check before the injection:\n${text}")
endif()

if(NOT EXISTS "${SOURCE_DIR}/${FILE}")
  get_filename_component(dir "${WORK_DIR}/${FILE}" DIRECTORY)
  file(MAKE_DIRECTORY "${dir}")
endif()
file(APPEND "${WORK_DIR}/${FILE}" "\n${LINE}\n")

run_check(rc text)
string(REPLACE "\n" "\n  " shown "${text}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the check accepted ${FILE} with `${LINE}`:\n  ${shown}")
endif()
if(NOT EXPECT)
  set(EXPECT "layering violation: ${FILE}")
endif()
string(FIND "${text}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the check failed, but without `${EXPECT}`:\n  ${shown}")
endif()
message(STATUS "refused as expected: ${FILE} with `${LINE}`:\n  ${shown}")
file(REMOVE_RECURSE "${WORK_DIR}")
