# frozen_build_check.cmake - frozen10.so was built from the frozen 1.0
# header and nothing else of the project.
#
# Run with cmake -P and:
#   COMPILE_COMMANDS  the build's compile_commands.json
#   SOURCE            absolute path of frozen10.c
#   EXPECT_INCLUDE    the only include directory it may be compiled with
#   MODULE            the built frozen10.so
#   READELF           readelf, to list the libraries the module needs
#
# The compile command must name exactly one include directory (-I,
# -isystem, -iquote, -idirafter) and force-include nothing; the module may
# need only the C runtime (and the sanitizer runtimes of a sanitizer build).

file(READ "${COMPILE_COMMANDS}" json)
string(JSON count LENGTH "${json}")
math(EXPR last "${count} - 1")
set(seen 0)
foreach(i RANGE ${last})
  string(JSON file GET "${json}" ${i} file)
  if(NOT file STREQUAL SOURCE)
    continue()
  endif()
  math(EXPR seen "${seen} + 1")
  string(JSON cmd GET "${json}" ${i} command)
  separate_arguments(args UNIX_COMMAND "${cmd}")
  set(includes "")
  set(take_next FALSE)
  foreach(arg IN LISTS args)
    if(take_next)
      list(APPEND includes "${arg}")
      set(take_next FALSE)
    elseif(arg MATCHES "^-(I|isystem|iquote|idirafter)$")
      set(take_next TRUE)
    elseif(arg MATCHES "^-(I|isystem|iquote|idirafter)(.+)$")
      list(APPEND includes "${CMAKE_MATCH_2}")
    elseif(arg MATCHES "^-(include|imacros)")
      message(FATAL_ERROR "frozen10.c is compiled with ${arg}: ${cmd}")
    endif()
  endforeach()
  if(NOT includes STREQUAL EXPECT_INCLUDE)
    message(FATAL_ERROR "frozen10.c must be compiled with the include directory "
                        "${EXPECT_INCLUDE} alone, got [${includes}]: ${cmd}")
  endif()
endforeach()
if(NOT seen EQUAL 1)
  message(FATAL_ERROR "${SOURCE} appears ${seen} times in ${COMPILE_COMMANDS}")
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
    message(FATAL_ERROR "frozen10.so needs ${lib}: a provider built from the "
                        "frozen header links nothing of the project")
  endif()
endforeach()
message(STATUS "frozen10.c: include path [${includes}], needs [${needed}]")
