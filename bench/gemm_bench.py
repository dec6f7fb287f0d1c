#!/usr/bin/env python3
"""Tile GEMM micro-benchmark: one-warpgroup against two-warpgroup (wide) tiles.

For each token count T, `msac-run bench-decode --json` runs pairs of
real-shape M3 artifacts compiled from the same weight-stripped checkpoint,
without and with `msac compile --wgmma-wide-tiles`, as one prefill chunk of
one sequence (T <= 64: a decode step of T sequences), and this script
reports per projection weight shape (N x K, bf16) the sum of the per-launch
medians (CUDA events, synthetic weights) of its msa.linear launches and the
rate 2 T N K / time in TFLOP/s; with fused-prologue artifacts also the sum
of the msa.attention_prologue launches (both parts). Stdout stays a short
table; --out gets every number as JSON.

Usage: gemm_bench.py --msac-run BIN --base A --wide B [--base-fused AF
       --wide-fused BF] [--tokens 64,128,512,2048,4096] [--context 8192]
       [--steps 5] [--out JSON]
"""
import argparse
import json
import subprocess
import sys
from collections import defaultdict


def run(args, artifact, tokens):
    """bench-decode's JSON for `tokens` tokens."""
    cmd = [args.msac_run, "bench-decode", artifact, "--device", "cuda", "--dummy-weights",
           "--json", "--context", str(max(args.context, tokens)), "--steps",
           str(args.steps), "--warmup", "2"]
    cmd += ["--batch", str(tokens)] if tokens <= 64 else ["--prefill-chunk", str(tokens)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{artifact}: {r.stderr.strip()[-400:]}")
    return json.loads(r.stdout)


def weight_shapes(artifact):
    """Per schedule entry: (N, K) of a msa.linear's weight, else None."""
    with open(f"{artifact}/manifest.json") as f:
        m = json.load(f)
    buffers = m["buffers"]
    out = []
    for launch in m["schedules"]["decode"]:
        if launch["op"] != "msa.linear":
            out.append(None)
            continue
        shape = buffers[launch["buffers"][1]]["shape"]
        out.append(tuple(shape) if all(isinstance(e, int) for e in shape) else None)
    return out


def linears(result, shapes):
    """{(N, K): (launches, total median us)} of the msa.linear launches."""
    acc = defaultdict(lambda: [0, 0.0])
    for launch, shape in zip(result["launches"], shapes):
        if shape is not None:
            acc[shape][0] += 1
            acc[shape][1] += launch["median_us"]
    return dict(acc)


def op_total(result, op):
    return result["ops"].get(op, {}).get("median_us_total", 0.0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--msac-run", required=True)
    p.add_argument("--base", required=True)
    p.add_argument("--wide", required=True)
    p.add_argument("--base-fused")
    p.add_argument("--wide-fused")
    p.add_argument("--tokens", default="64,128,512,2048,4096")
    p.add_argument("--context", type=int, default=8192)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--out")
    args = p.parse_args()
    shapes = weight_shapes(args.base)
    if shapes != weight_shapes(args.wide):
        sys.exit("the two artifacts have different schedules")
    report = []
    print("| T | N x K | launches | base us | wide us | base TFLOP/s | wide TFLOP/s | speedup |")
    print("|---|---|---|---|---|---|---|---|")
    for t in [int(x) for x in args.tokens.split(",")]:
        base, wide = run(args, args.base, t), run(args, args.wide, t)
        lb, lw = linears(base, shapes), linears(wide, shapes)
        point = {"tokens": t, "linears": [], "step_us": [base["step_median_us"],
                                                         wide["step_median_us"]]}
        for (n, k), (count, us) in sorted(lb.items(), key=lambda x: -x[0][0] * x[0][1]):
            wus = lw[(n, k)][1]
            flops = 2.0 * t * n * k * count
            rb, rw = flops / us / 1e6, flops / wus / 1e6
            point["linears"].append({"n": n, "k": k, "launches": count, "base_us": us,
                                     "wide_us": wus, "base_tflops": rb, "wide_tflops": rw})
            print(f"| {t} | {n} x {k} | {count} | {us:.1f} | {wus:.1f} | {rb:.1f} | "
                  f"{rw:.1f} | {us / wus:.2f} |")
        sb = sum(x["base_us"] for x in point["linears"])
        sw = sum(x["wide_us"] for x in point["linears"])
        print(f"| {t} | all linears | | {sb:.1f} | {sw:.1f} | | | {sb / sw:.2f} |")
        if args.base_fused and args.wide_fused:
            fb = op_total(run(args, args.base_fused, t), "msa.attention_prologue")
            fw = op_total(run(args, args.wide_fused, t), "msa.attention_prologue")
            point["prologue_us"] = [fb, fw]
            print(f"| {t} | fused prologues | | {fb:.1f} | {fw:.1f} | | | {fb / fw:.2f} |")
        report.append(point)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
