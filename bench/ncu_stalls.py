#!/usr/bin/env python3
"""Where a kernel's warps wait, per SASS instruction, from Nsight Compute's
source page: which instructions the warp-state sampler found stalled most
often, why, and the totals per opcode and per address range (e.g. a
loop's body).

Input: the CSV of one profiled kernel's source page, made on the GPU
machine (ncu has its own disassembler; this machine has none):

  ncu --section SourceCounters --section WarpStateStats -k regex:KERNEL \
      --launch-skip N --launch-count 1 -o REPORT  msac-run bench-decode ...
  ncu --import REPORT.ncu-rep --page source --print-source sass --csv > S.csv

Columns are found by name, so that the script follows the installed ncu
rather than a table written here: the SASS text ("Source"), the address
("Address", "# Address"), the samples ("Warp Stall Sampling (All
Samples)"; "Not-issued Samples" when present), and every other numeric
column (per-reason stall samples where ncu exports them, "Instructions
Executed", ...), which are summed per opcode and per range. Run it with
--columns first to see what the CSV holds.

Usage: bench/ncu_stalls.py S.csv [--top N] [--range LO:HI ...] [--columns]
  LO and HI are addresses as the CSV prints them (hex), HI inclusive.
"""
import argparse
import collections
import csv
import re
import sys


def number(cell):
    """The cell as a float, or None (thousands separators allowed)."""
    s = cell.strip().replace(",", "")
    if not s:
        return None
    try:
        return float(s)
    except ValueError:
        return None


def address(cell):
    try:
        return int(cell.strip(), 16)
    except ValueError:
        return None


def opcode(sass):
    """The base opcode of a SASS line ("@!P0 HMMA.16816.F32 R4, ..." ->
    "HMMA")."""
    tokens = [t for t in sass.split() if not t.startswith("@")]
    return tokens[0].split(".")[0] if tokens else "?"


def read(path):
    rows = list(csv.reader(open(path, newline="")))
    for i, row in enumerate(rows):
        names = [c.strip() for c in row]
        if "Source" in names and any("Address" in c for c in names):
            return names, rows[i + 1:]
    raise SystemExit(f"{path}: no header row with 'Source' and 'Address' "
                     "(is this `ncu --page source --print-source sass --csv`?)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--range", action="append", default=[],
                    help="LO:HI address range (hex), HI inclusive")
    ap.add_argument("--columns", action="store_true",
                    help="list the CSV's columns and exit")
    args = ap.parse_args()
    names, rows = read(args.csv)
    if args.columns:
        for n in names:
            print(n)
        return
    src = names.index("Source")
    addr = next(i for i, n in enumerate(names) if "Address" in n)
    samples = next((i for i, n in enumerate(names)
                    if "Sampling" in n and "All" in n), None)
    if samples is None:
        samples = next((i for i, n in enumerate(names) if "Sampling" in n),
                       None)
    if samples is None:
        raise SystemExit("no warp stall sampling column; collect with "
                         "--section SourceCounters")
    numeric = [i for i in range(len(names))
               if i not in (src, addr) and
               any(number(r[i]) is not None for r in rows if len(r) > i)]
    reasons = [i for i in numeric if i != samples and
               ("stall" in names[i].lower() or names[i].startswith("smsp__"))
               and "Sampling" not in names[i]]
    ins = []
    for r in rows:
        if len(r) <= max(src, addr, samples):
            continue
        a = address(r[addr])
        if a is None:
            continue
        vals = {i: (number(r[i]) or 0.0) for i in numeric if i < len(r)}
        ins.append((a, r[src].strip(), vals))
    total = sum(v.get(samples, 0) for _, _, v in ins)
    print(f"{len(ins)} instructions, {total:.0f} samples "
          f"({names[samples]})")
    if not total:
        return

    def reasons_of(vals, k=3):
        top = sorted(((vals.get(i, 0), names[i]) for i in reasons),
                     reverse=True)[:k]
        return ", ".join(f"{n} {v:.0f}" for v, n in top if v > 0)

    print(f"\nTop {args.top} instructions by samples:")
    for a, s, v in sorted(ins, key=lambda x: -x[2].get(samples, 0))[:args.top]:
        n = v.get(samples, 0)
        print(f"  {a:#07x} {n:8.0f} {100 * n / total:5.1f}%  {s[:60]:60s} "
              f"{reasons_of(v)}")

    def summary(title, subset):
        by_op = collections.defaultdict(lambda: collections.Counter())
        for _, s, v in subset:
            c = by_op[opcode(s)]
            c["count"] += 1
            for i, x in v.items():
                c[i] += x
        sub = sum(c[samples] for c in by_op.values())
        print(f"\n{title}: {len(subset)} instructions, {sub:.0f} samples "
              f"({100 * sub / total:.1f}% of the kernel's)")
        for i in reasons:
            r = sum(c[i] for c in by_op.values())
            if r:
                print(f"  {names[i]:50s} {r:10.0f} {100 * r / max(sub, 1):5.1f}%")
        print("  per opcode (instructions, samples, share):")
        for op, c in sorted(by_op.items(), key=lambda x: -x[1][samples])[:20]:
            print(f"    {op:10s} {c['count']:6d} {c[samples]:10.0f} "
                  f"{100 * c[samples] / max(sub, 1):5.1f}%")

    summary("Whole kernel", ins)
    for spec in args.range:
        m = re.fullmatch(r"(0x)?([0-9a-fA-F]+):(0x)?([0-9a-fA-F]+)", spec)
        if not m:
            raise SystemExit(f"--range {spec}: expected LO:HI in hex")
        lo, hi = int(m.group(2), 16), int(m.group(4), 16)
        summary(f"Range {lo:#x}-{hi:#x}",
                [x for x in ins if lo <= x[0] <= hi])
    # Backward branches (loops) as ncu prints their targets, for --range.
    loops = []
    for a, s, _ in ins:
        m = re.search(r"\bBRA\b.*?(0x[0-9a-fA-F]+)", s)
        if m and int(m.group(1), 16) < a:
            loops.append((int(m.group(1), 16), a))
    if loops:
        print("\nBackward branches (candidate --range LO:HI):")
        for lo, hi in sorted(loops, key=lambda x: x[0] - x[1])[:8]:
            n = sum(v.get(samples, 0) for a, _, v in ins if lo <= a <= hi)
            print(f"  {lo:#x}:{hi:#x}  {(hi - lo) // 16 + 1} instructions, "
                  f"{100 * n / total:.1f}% of the samples")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        sys.exit(0)
