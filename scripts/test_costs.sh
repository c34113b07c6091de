#!/usr/bin/env bash
# test_costs.sh LOG - print tests/costs.txt anew from the log of a
# scripts/test.sh run (its ctest lines): each test taking 4 s or more, with
# the longer of its gcc and ASan times, sorted by name.
#   scripts/test_costs.sh ci.log > tests/costs.txt
set -euo pipefail
log=$1
sed -n '1,/^abi_\|^[a-z]/{/^#/p}' "$(dirname "$0")/../tests/costs.txt"
sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.*[^0-9]*([0-9.]+) sec$/\1 \2/p' "$log" |
  awk '{ if ($2 > m[$1]) m[$1] = $2 } END { for (k in m) if (m[k] >= 4) printf "%s %d\n", k, m[k] + 0.5 }' |
  LC_ALL=C sort
