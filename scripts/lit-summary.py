#!/usr/bin/env python3
# ===- scripts/lit-summary.py - Summarize a lit JSON report ---------------===#
#
# Reads the JSON report of `lit -o FILE` and prints one line per skipped
# (UNSUPPORTED) test, naming it with lit's reason (for example the missing
# feature: `Test requires the following unavailable features: cuobjdump`),
# then the summary line `msac: N passed, N failed[, N skipped]`, always last
# (CI greps it).
#
# ===----------------------------------------------------------------------===#

import collections
import json
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: lit-summary.py LIT_RESULTS_JSON")
    with open(sys.argv[1]) as f:
        tests = json.load(f)["tests"]
    codes = collections.Counter(t["code"] for t in tests)
    passed = codes["PASS"] + codes["XFAIL"]
    failed = sum(
        n for c, n in codes.items() if c not in ("PASS", "XFAIL", "UNSUPPORTED")
    )
    skipped = codes["UNSUPPORTED"]
    for t in sorted(tests, key=lambda t: t["name"]):
        if t["code"] != "UNSUPPORTED":
            continue
        reason = (t.get("output") or "").strip().splitlines()
        print(f"msac: skipped {t['name']}" + (f" ({reason[0]})" if reason else ""))
    line = f"msac: {passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)


if __name__ == "__main__":
    main()
