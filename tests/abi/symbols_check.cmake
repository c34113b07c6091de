# symbols_check.cmake - one symbol rule on one built target (cmake -P),
# registered by sbx_check_symbols in tests/abi/CMakeLists.txt.
#
#   -DMODE=prefixes -DOBJECTS=a.o,b.o -DPREFIXES=p_,q_ [-DNAMES=n,m]
#       every global symbol the objects define (nm -g --defined-only) starts
#       with one of PREFIXES or is one of NAMES;
#   -DMODE=exports -DFILE=lib.so -DNAMES=n,m
#       the shared object's dynamic symbol table defines exactly NAMES
#       (nm -D --defined-only).
#
# -DNM is the nm to run, -DLABEL names the target in messages. Lists are
# comma-separated (a ;-list does not survive add_test's command line).
# Finding no symbol at all fails too: a rule that looks at nothing proves
# nothing.
cmake_minimum_required(VERSION 3.25)

foreach(v NM MODE LABEL)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "symbols_check.cmake: -D${v}= is required")
  endif()
endforeach()
string(REPLACE "," ";" names "${NAMES}")
set(allowed "prefix ${PREFIXES}")
if(NAMES)
  set(allowed "${allowed} or named ${NAMES}")
endif()

# nm_defined(OUT ARGS...): "object<TAB>symbol" per defined symbol.
function(nm_defined out)
  execute_process(COMMAND ${NM} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE text
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${LABEL}: ${NM} ${ARGN} failed (${rc}): ${err}")
  endif()
  string(REPLACE "\n" ";" lines "${text}")
  list(GET ARGN -1 file) # nm names the file only when it is given several
  set(found "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^(.+):$")
      set(file "${CMAKE_MATCH_1}")
    elseif(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] (.+)$")
      list(APPEND found "${file}\t${CMAKE_MATCH_1}")
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "prefixes")
  string(REPLACE "," ";" objects "${OBJECTS}")
  string(REPLACE "," ";" prefixes "${PREFIXES}")
  if(NOT objects OR NOT prefixes)
    message(FATAL_ERROR "${LABEL}: no objects or no prefixes given")
  endif()
  nm_defined(symbols -g --defined-only ${objects})
  if(NOT symbols)
    message(FATAL_ERROR "${LABEL}: nm found no global symbol in ${OBJECTS}")
  endif()
  set(bad "")
  list(LENGTH symbols count)
  foreach(entry IN LISTS symbols)
    string(REGEX REPLACE "^.*\t" "" sym "${entry}")
    set(ok 0)
    if(sym IN_LIST names)
      set(ok 1)
    endif()
    foreach(p IN LISTS prefixes)
      string(LENGTH "${p}" n)
      string(SUBSTRING "${sym}" 0 ${n} head)
      if(head STREQUAL p)
        set(ok 1)
      endif()
    endforeach()
    if(NOT ok)
      string(REGEX REPLACE "\t.*$" "" obj "${entry}")
      get_filename_component(obj "${obj}" NAME)
      list(APPEND bad "  ${sym} (${obj})")
    endif()
  endforeach()
  if(bad)
    list(JOIN bad "\n" text)
    message(FATAL_ERROR "${LABEL}: global symbols that are not allowed (${allowed}):\n"
            "${text}\nGive them the prefix or make them static.")
  endif()
  message(STATUS "${LABEL}: ${count} global symbols, each with ${allowed}")
elseif(MODE STREQUAL "exports")
  if(NOT FILE OR NOT names)
    message(FATAL_ERROR "${LABEL}: exports needs -DFILE and -DNAMES")
  endif()
  nm_defined(symbols -D --defined-only ${FILE})
  set(seen "")
  set(bad "")
  foreach(entry IN LISTS symbols)
    string(REGEX REPLACE "^.*\t" "" sym "${entry}")
    # nm -D shows a versioned definition as NAME@@VERSION
    string(REGEX REPLACE "@.*$" "" sym "${sym}")
    if(sym IN_LIST names)
      list(APPEND seen "${sym}")
    else()
      list(APPEND bad "  ${sym}")
    endif()
  endforeach()
  foreach(n IN LISTS names)
    if(NOT n IN_LIST seen)
      list(APPEND bad "  (missing) ${n}")
    endif()
  endforeach()
  if(bad)
    list(JOIN bad "\n" text)
    message(FATAL_ERROR "${LABEL}: ${FILE} must export exactly ${NAMES}; differs by:\n${text}")
  endif()
  message(STATUS "${LABEL}: ${FILE} exports exactly ${NAMES}")
else()
  message(FATAL_ERROR "symbols_check.cmake: MODE must be prefixes or exports, not ${MODE}")
endif()
