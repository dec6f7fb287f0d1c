#!/usr/bin/env bash
#===- scripts/test.sh - Run every msac test -------------------------------===#
#
# Runs scripts/setup.sh (so it works on a fresh machine), then the lit suite
# (FileCheck regression tests under test/ and the GoogleTest unit tests under
# unittests/, run as one lit suite) and prints a closing summary line
# `msac: N passed, N failed[, N skipped]` after naming each skipped test and
# why (scripts/lit-summary.py). Exits non-zero when any test fails.
#
#===----------------------------------------------------------------------===#

set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${MSAC_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"

results="$build_dir/test/lit-results.json"
status=0
/usr/lib/llvm-22/bin/lit -sv "$build_dir/test" -o "$results" || status=$?

python3 "$root/scripts/lit-summary.py" "$results"
exit "$status"
