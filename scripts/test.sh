#!/usr/bin/env bash
#===- scripts/test.sh - Run every msac test -------------------------------===#
#
# Runs scripts/setup.sh (so it works on a fresh machine), then the lit suite
# (FileCheck regression tests under test/ and the GoogleTest unit tests under
# unittests/, run as one lit suite) and prints a closing summary line
# `msac: N passed, N failed`. Exits non-zero when any test fails.
#
#===----------------------------------------------------------------------===#

set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${MSAC_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"

results="$build_dir/test/lit-results.json"
status=0
/usr/lib/llvm-22/bin/lit -sv "$build_dir/test" -o "$results" || status=$?

python3 - "$results" <<'PY'
import collections, json, sys
with open(sys.argv[1]) as f:
    tests = json.load(f)["tests"]
codes = collections.Counter(t["code"] for t in tests)
passed = codes["PASS"] + codes["XFAIL"]
failed = sum(n for c, n in codes.items() if c not in ("PASS", "XFAIL", "UNSUPPORTED"))
skipped = codes["UNSUPPORTED"]
line = f"msac: {passed} passed, {failed} failed"
if skipped:
    line += f", {skipped} skipped"
print(line)
PY
exit "$status"
