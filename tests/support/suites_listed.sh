#!/bin/sh
# suites_listed.sh BINARY SUITE... - fail when the criterion binary has a
# suite that its CMakeLists.txt does not register as a ctest of its own
# (sbx_add_suite_tests), which would leave that suite's tests unrun.
set -eu
bin=$1
shift
listed=" $* "
suites=$("$bin" --list 2>&1 | sed -n 's/^\([A-Za-z0-9_]*\): [0-9]* tests\{0,1\}$/\1/p')
[ -n "$suites" ] || { echo "FAIL: $bin --list shows no suite" >&2; exit 1; }
status=0
for s in $suites; do
    case $listed in
    *" $s "*) ;;
    *) echo "FAIL: suite $s of $bin is not registered in sbx_add_suite_tests" >&2; status=1 ;;
    esac
done
[ $status = 0 ] && echo "every suite of $(basename "$bin") is registered: $(echo $suites)"
exit $status
