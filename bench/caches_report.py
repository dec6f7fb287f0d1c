#!/usr/bin/env python3
"""Summarizes the `caches` part of bench/h200-checks.sh.

Reads DIR/caches-{bf16,fp8,nvfp4}-b{B}.json (`msac-run bench-decode --json`
of the weight-stripped real-shape M3 artifacts compiled with bf16, FP8 and
NVFP4 KV and index caches) and prints, per batch and per op
(msa.sparse_attention, msa.dense_attention, msa.index_score), the sum of the
op's per-launch medians in microseconds (the attention's two launches: the
split-KV part and the chunk combine), its ratio to bf16 and the ratio of the
cache bytes the op reads per token (docs/architecture.md "KV and index
caches": bf16 2 bytes per value, FP8 1, NVFP4 0.5 + 1/16 for the codes and
one E4M3 scale per 16 values). Writes the table as JSON to --out.
"""
import argparse
import json
import os
import sys

OPS = ["msa.sparse_attention", "msa.dense_attention", "msa.index_score"]
BYTES_PER_VALUE = {"bf16": 2.0, "fp8": 1.0, "nvfp4": 0.5 + 1.0 / 16}


def op_launches(run, op):
    """The per-launch medians (us) of `op` in one bench-decode JSON."""
    return [l["median_us"] for l in run["launches"] if l["op"] == op]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rows, ok = [], True
    for b in args.batches.split(","):
        runs = {}
        for c in BYTES_PER_VALUE:
            path = os.path.join(args.dir, "caches-%s-b%s.json" % (c, b))
            try:
                with open(path) as f:
                    runs[c] = json.load(f)
            except (OSError, ValueError) as e:
                print("missing or bad %s: %s" % (path, e))
                ok = False
        if "bf16" not in runs:
            continue
        print("batch %s, context %s: step %s" % (
            b, runs["bf16"]["context"], ", ".join(
                "%s %.1f us" % (c, r["step_median_us"])
                for c, r in runs.items())))
        print("| op | cache | launches | us | time / bf16 | bytes / bf16 |")
        print("|---|---|---|---|---|---|")
        for op in OPS:
            base = sum(op_launches(runs["bf16"], op))
            for c, r in runs.items():
                us = op_launches(r, op)
                t = sum(us)
                row = {"batch": int(b), "op": op, "cache": c,
                       "launch_median_us": us, "us": t,
                       "time_ratio": t / base if base else None,
                       "byte_ratio": BYTES_PER_VALUE[c] / BYTES_PER_VALUE["bf16"]}
                rows.append(row)
                print("| %s | %s | %d | %.1f | %s | %.3f |" % (
                    op, c, len(us), t,
                    "%.3f" % row["time_ratio"] if base else "-",
                    row["byte_ratio"]))
        print()
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
