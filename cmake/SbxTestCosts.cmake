# sbx_seed_test_costs(FILE): give ctest -j the measured seconds of the
# long tests (FILE: "NAME SECONDS" lines, # comments) before it has timed
# them itself, so that a fresh build directory starts the longest tests
# first rather than in registration order.
#
# ctest keeps its own timings in Testing/Temporary/CTestCostData.txt
# ("NAME RUNS SECONDS" lines, then "---" and the tests that failed last)
# and orders a parallel run by them, longest first (a failed test first of
# all). This adds every test of FILE that the data file lacks, as one run
# of that many seconds; timings ctest wrote are kept as they are. A test's
# COST property would override both, so tests leave COST unset.
function(sbx_seed_test_costs file)
  set(data ${CMAKE_BINARY_DIR}/Testing/Temporary/CTestCostData.txt)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${file})
  file(STRINGS ${file} wanted REGEX "^[^#]")
  set(have "")
  set(costs "")
  set(failed "")
  set(old "")
  if(EXISTS ${data})
    file(READ ${data} old)
    file(STRINGS ${data} lines)
    set(part costs)
    foreach(l IN LISTS lines)
      if(l STREQUAL "---")
        set(part failed)
      elseif(part STREQUAL "costs")
        string(REGEX MATCH "^[^ ]+" n "${l}")
        list(APPEND have "${n}")
        string(APPEND costs "${l}\n")
      else()
        string(APPEND failed "${l}\n")
      endif()
    endforeach()
  endif()
  foreach(l IN LISTS wanted)
    if(l MATCHES "^([^ ]+) +([0-9.]+)$" AND NOT CMAKE_MATCH_1 IN_LIST have)
      string(APPEND costs "${CMAKE_MATCH_1} 1 ${CMAKE_MATCH_2}\n")
    endif()
  endforeach()
  set(new "${costs}---\n${failed}")
  if(NOT new STREQUAL old)
    file(WRITE ${data} "${new}")
  endif()
endfunction()
