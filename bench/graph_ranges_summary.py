#!/usr/bin/env python3
"""Medians of `msac-run bench-decode --graph-range` timings per variant and
token count, from a log of runs each headed by a line
`== VARIANT T=TOKENS rep=R` and followed by msac-run's lines
`launches A:B in a CUDA graph: X us` (one per --graph-range, in order).

Usage: bench/graph_ranges_summary.py LOG [--title TEXT]
Prints, per token count and variant (in the order first seen), each
range's median over the runs with its minimum and maximum.
"""
import argparse
import re
import statistics


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("--title", default="us per graph range, median of the "
                    "runs (min-max)")
    args = ap.parse_args()
    times = {}  # (variant, tokens, range index) -> [us]
    variants, tokens, ranges = [], [], 0
    cur = None
    for line in open(args.log):
        m = re.match(r"== (\S+) T=(\d+) rep=\d+", line)
        if m:
            cur = (m.group(1), int(m.group(2)))
            if cur[0] not in variants:
                variants.append(cur[0])
            if cur[1] not in tokens:
                tokens.append(cur[1])
            i = 0
            continue
        m = re.search(r"in a CUDA graph: ([\d.]+) us", line)
        if m and cur:
            times.setdefault(cur + (i,), []).append(float(m.group(1)))
            i += 1
            ranges = max(ranges, i)
    print(args.title)
    for t in sorted(tokens):
        for v in variants:
            cells = []
            for i in range(ranges):
                x = times.get((v, t, i))
                cells.append(f"{statistics.median(x):.2f} ({min(x):.2f}-"
                             f"{max(x):.2f})" if x else "-")
            print(f"T={t} {v}: " + "  ".join(cells))


if __name__ == "__main__":
    main()
