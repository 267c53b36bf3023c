# Checks the fence of cmake/VarsyncLayerTable.cmake over every file of the
# product (core/, devices/, messages/, sync/, actors/, api/ and all their
# subfolders, the CUDA and Gloo backends included, and include/varsync/):
#
# - every folder belongs to a unit of the table;
# - every #include "..." (or <...>) of an implementation header ("sync/...",
#   "actors/cluster/...") names a header of the file's own unit or of a unit it
#   uses; a path the fence cannot place ("../x.hpp", "x.hpp") is refused too,
#   since the compiler resolves it next to the file, around the include roots;
# - every public header (varsync/...) it includes belongs to its own unit or
#   to one it uses (the include roots cannot fence these: include/ is on
#   every unit's path);
# - a public header includes no implementation header, nor does a file of
#   an add-on unit (VARSYNC_PUBLIC_ONLY_UNITS) but its own folder's;
# - include/varsync/ has no folder but ext/ and internal/.
#
# The build fences the implementation headers as well (each unit's include
# root holds only the folders it may use); this check also covers public
# headers, relative paths and code not compiled in a given configuration.
#
# Run: cmake -DSOURCE_DIR=<repo> -P cmake/check_layers.cmake (CTest:
# layering). Exits non-zero with one line per violation.

cmake_minimum_required(VERSION 3.22)

include("${CMAKE_CURRENT_LIST_DIR}/VarsyncLayerTable.cmake")

# Explicit exceptions, "file -> include", each with the reason next to it.
# (None today.)
set(exceptions "")

if(NOT SOURCE_DIR)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<repo> -P check_layers.cmake")
endif()

set(violations "")
foreach(unit IN LISTS VARSYNC_UNITS)
  foreach(folder IN LISTS VARSYNC_UNIT_FOLDERS_${unit})
    if(DEFINED unit_of_${folder})
      list(APPEND violations "table: ${folder} is in two units (${unit_of_${folder}}, ${unit})")
    endif()
    set(unit_of_${folder} ${unit})
  endforeach()
endforeach()

function(public_owner header out)
  if(DEFINED VARSYNC_PUBLIC_OWNER_${header})
    set(${out} ${VARSYNC_PUBLIC_OWNER_${header}} PARENT_SCOPE)
  else()
    set(${out} core PARENT_SCOPE)
  endif()
endfunction()

# May a file of unit `from` include a header of unit `to`?
function(may_use from to out)
  if(from STREQUAL to OR to IN_LIST VARSYNC_UNIT_USES_${from})
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

# check_file(file unit public): `public` is TRUE for include/varsync/ headers.
function(check_file file unit public)
  file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
  file(RELATIVE_PATH rel "${SOURCE_DIR}" "${file}")
  foreach(line IN LISTS lines)
    string(REGEX MATCH "^[ \t]*#[ \t]*include[ \t]*([\"<])([^\">]+)[\">]" _ "${line}")
    set(quoted FALSE)
    if(CMAKE_MATCH_1 STREQUAL "\"")
      set(quoted TRUE)
    endif()
    set(inc "${CMAKE_MATCH_2}")
    string(REGEX MATCH "^[^/]*" first "${inc}")
    if("${rel} -> ${inc}" IN_LIST exceptions)
      continue()
    endif()
    # A header of the including unit's own folders (an add-on's own).
    get_filename_component(inc_folder "${inc}" DIRECTORY)
    set(own_folder FALSE)
    if(NOT inc MATCHES "(^|/)\\.\\.?/"
       AND inc_folder IN_LIST VARSYNC_UNIT_FOLDERS_${unit})
      set(own_folder TRUE)
    endif()
    if(inc MATCHES "^varsync/(.+)\\.hpp$")
      public_owner("${CMAKE_MATCH_1}" owner)
      may_use(${unit} ${owner} ok)
      if(NOT ok)
        list(APPEND violations
             "${rel}: includes ${inc} (unit ${owner}) from unit ${unit}")
      endif()
    elseif(public AND (quoted OR first IN_LIST VARSYNC_PRODUCT_ROOTS))
      list(APPEND violations "${rel}: public header includes non-public \"${inc}\"")
    elseif(unit IN_LIST VARSYNC_PUBLIC_ONLY_UNITS
           AND (quoted OR first IN_LIST VARSYNC_PRODUCT_ROOTS)
           AND NOT own_folder)
      list(APPEND violations
           "${rel}: includes \"${inc}\"; unit ${unit} is written over the public headers only")
    elseif(first IN_LIST VARSYNC_PRODUCT_ROOTS AND NOT inc MATCHES "(^|/)\\.\\.?/")
      get_filename_component(folder "${inc}" DIRECTORY)
      if(NOT DEFINED unit_of_${folder})
        list(APPEND violations
             "${rel}: includes ${inc}, whose folder ${folder} is in no unit")
      else()
        may_use(${unit} ${unit_of_${folder}} ok)
        if(NOT ok)
          list(APPEND violations
               "${rel}: includes ${inc} (unit ${unit_of_${folder}}) from unit ${unit}")
        endif()
      endif()
    elseif(quoted)
      list(APPEND violations "${rel}: includes \"${inc}\", a path the fence cannot place (write it from the layer root: \"sync/...\")")
    endif()
  endforeach()
  set(violations "${violations}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE public_headers "${SOURCE_DIR}/include/varsync/*")
file(GLOB public_entries LIST_DIRECTORIES true "${SOURCE_DIR}/include/varsync/*")
foreach(entry IN LISTS public_entries)
  get_filename_component(leaf "${entry}" NAME)
  if(IS_DIRECTORY "${entry}" AND NOT leaf MATCHES "^(ext|internal)$")
    list(APPEND violations "include/varsync/${leaf}/: public headers live in include/varsync/, ext/ or internal/")
  endif()
endforeach()
foreach(file IN LISTS public_headers)
  file(RELATIVE_PATH name "${SOURCE_DIR}/include/varsync" "${file}")
  string(REGEX REPLACE "\\.hpp$" "" name "${name}")
  public_owner("${name}" unit)
  check_file("${file}" ${unit} TRUE)
endforeach()

set(nfiles 0)
set(nfolders 0)
foreach(root IN LISTS VARSYNC_PRODUCT_ROOTS)
  if(NOT IS_DIRECTORY "${SOURCE_DIR}/${root}")
    continue()
  endif()
  file(GLOB_RECURSE entries LIST_DIRECTORIES true "${SOURCE_DIR}/${root}/*")
  list(PREPEND entries "${SOURCE_DIR}/${root}")
  foreach(entry IN LISTS entries)
    file(RELATIVE_PATH rel "${SOURCE_DIR}" "${entry}")
    if(IS_DIRECTORY "${entry}")
      math(EXPR nfolders "${nfolders} + 1")
      if(NOT DEFINED unit_of_${rel})
        list(APPEND violations "${rel}/: a folder in no unit of cmake/VarsyncLayerTable.cmake")
      endif()
      continue()
    endif()
    get_filename_component(folder "${rel}" DIRECTORY)
    if(DEFINED unit_of_${folder})
      math(EXPR nfiles "${nfiles} + 1")
      check_file("${entry}" ${unit_of_${folder}} FALSE)
    endif()
  endforeach()
endforeach()

if(violations)
  foreach(v IN LISTS violations)
    message(STATUS "layering violation: ${v}")
  endforeach()
  list(LENGTH violations n)
  message(FATAL_ERROR "${n} layering violation(s)")
endif()
list(LENGTH public_headers n)
list(LENGTH VARSYNC_UNITS nunits)
message(STATUS "layering: ${n} public headers and ${nfiles} files in ${nfolders} "
               "folders of ${nunits} units checked, no violation")
