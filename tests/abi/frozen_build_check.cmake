# frozen_build_check.cmake - a frozen provider (frozen10.so, frozen11.so)
# was built from its frozen header and nothing else of the project.
#
# Run with cmake -P and:
#   COMPILE_COMMANDS  the build's compile_commands.json
#   SOURCE            absolute path of frozen10.c (every frozen provider's source)
#   TARGET            the CMake target that built MODULE (sbx_frozen10, ...):
#                     SOURCE is compiled once per target, and the entry of
#                     this one is the one whose object lies in its
#                     CMakeFiles/<TARGET>.dir/
#   EXPECT_INCLUDE    the only include directory it may be compiled with
#   MODULE            the built module
#   READELF           readelf, to list the libraries the module needs
#
# The compile command must name exactly one include directory (-I,
# -isystem, -iquote, -idirafter) and force-include nothing; the module may
# need only the C runtime (and the sanitizer runtimes of a sanitizer build).

# Quoted strings in if() are strings, not variable names (CMP0054): a -P
# script starts with every policy unset.
cmake_policy(SET CMP0054 NEW)

file(READ "${COMPILE_COMMANDS}" json)
string(JSON count LENGTH "${json}")
math(EXPR last "${count} - 1")
set(seen 0)
foreach(i RANGE ${last})
  string(JSON file GET "${json}" ${i} file)
  if(NOT file STREQUAL SOURCE)
    continue()
  endif()
  string(JSON cmd GET "${json}" ${i} command)
  separate_arguments(args UNIX_COMMAND "${cmd}")
  set(includes "")
  set(object "")
  set(take_next "")
  foreach(arg IN LISTS args)
    if(take_next STREQUAL "next-is-include")
      list(APPEND includes "${arg}")
      set(take_next "")
    elseif(take_next STREQUAL "next-is-object")
      set(object "${arg}")
      set(take_next "")
    elseif(arg STREQUAL "-o")
      set(take_next "next-is-object")
    elseif(arg MATCHES "^-(I|isystem|iquote|idirafter)$")
      set(take_next "next-is-include")
    elseif(arg MATCHES "^-(I|isystem|iquote|idirafter)(.+)$")
      list(APPEND includes "${CMAKE_MATCH_2}")
    elseif(arg MATCHES "^-(include|imacros)")
      message(FATAL_ERROR "${TARGET}: frozen10.c is compiled with ${arg}: ${cmd}")
    endif()
  endforeach()
  if(NOT object MATCHES "(^|/)CMakeFiles/${TARGET}\\.dir/")
    continue()
  endif()
  math(EXPR seen "${seen} + 1")
  if(NOT includes STREQUAL EXPECT_INCLUDE)
    message(FATAL_ERROR "${TARGET}: frozen10.c must be compiled with the include "
                        "directory ${EXPECT_INCLUDE} alone, got [${includes}]: ${cmd}")
  endif()
  set(found_includes "${includes}")
endforeach()
if(NOT seen EQUAL 1)
  message(FATAL_ERROR "${SOURCE} appears ${seen} times for target ${TARGET} in "
                      "${COMPILE_COMMANDS}")
endif()

execute_process(COMMAND "${READELF}" -d "${MODULE}" OUTPUT_VARIABLE dyn
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -d ${MODULE} failed")
endif()
string(REGEX MATCHALL "Shared library: \\[[^]]*\\]" needed "${dyn}")
foreach(entry IN LISTS needed)
  string(REGEX REPLACE "Shared library: \\[(.*)\\]" "\\1" lib "${entry}")
  if(NOT lib MATCHES "^lib(c|pthread|asan|ubsan|gcc_s|m)\\.so")
    message(FATAL_ERROR "${MODULE} needs ${lib}: a provider built from the "
                        "frozen header links nothing of the project")
  endif()
endforeach()
message(STATUS "${TARGET}: frozen10.c with include path [${found_includes}], "
               "needs [${needed}]")
