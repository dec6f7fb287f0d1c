#!/usr/bin/env python3
"""Fused against unfused attention prologue on one GPU (issue 6's benchmark).

For each token count, `msac-run bench-decode --json` runs two real-shape M3
artifacts compiled from the same checkpoint, one with the fused prologue
(msac compile's default) and one with `--fuse-attention-prologue=false`
(bench/h200-inputs.sh: m3f.msa, m3.msa), and this script sums the
per-launch medians (CUDA events, synthetic weights and caches) of each
layer's attention prologue: the launches between the layer's input RMSNorm
and its first attention-family launch (index_score, dense_attention or
sparse_attention).
Unfused that is 5 (dense: 3) linears, 4 (2) per-head norms, 4 (2) RoPEs and
3 (2) cache inserts; fused, msa.attention_prologue's launches. Token counts
up to 64 run as decode steps (batch = tokens), larger ones as one prefill
chunk of one sequence. The same launches are also timed as one range
captured in a CUDA graph (`bench-decode --graph-range`), as steps run in
msac-run, without the CPU cost of launching kernels one by one that the
per-launch medians of short kernels include. The floor is the layer's
projection weights read
once (--weight-bytes per weight: 2 for bf16, 1 for FP8) / copy bandwidth
measured here, or the projection's FLOPs / the bf16 matmul rate measured
here, whichever is larger.

Usage: prologue_bench.py --msac-run BIN --unfused A --fused B --config CFG
       [--tokens 1,8,64,512,2048,4096] [--context 8192] [--weight-bytes 2]
       [--out JSON]
"""
import argparse
import json
import subprocess
import sys

import torch

from msa_decode import bench as timed, copy_bandwidth

PROLOGUE_OPS = {"msa.linear", "msa.rms_norm", "msa.rope", "msa.kv_cache_insert",
                "msa.attention_prologue"}
ATTENTION_OPS = {"msa.index_score", "msa.dense_attention", "msa.sparse_attention"}


def matmul_rate():
    n = 8192
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    t = timed(lambda: a @ b, reps=10)
    return 2 * n ** 3 / (t * 1e-6)


def bench_decode(args, artifact, tokens, ranges=()):
    cmd = [args.msac_run, "bench-decode", artifact, "--device", "cuda", "--dummy-weights",
           "--json", "--context", str(args.context), "--steps", str(args.steps),
           "--warmup", "2"]
    cmd += ["--batch", str(tokens)] if tokens <= 64 else ["--prefill-chunk", str(tokens)]
    for first, last in ranges:
        cmd += ["--graph-range", f"{first}:{last}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{artifact}: {r.stderr.strip()[-400:]}")
    return json.loads(r.stdout)


def prologues(args, artifact, tokens):
    """Per-layer prologue time (us), in schedule order: (sum of the per-launch
    medians, the same launches timed as one range inside a CUDA graph)."""
    launches = bench_decode(args, artifact, tokens)["launches"]
    sums, ranges = [], []
    for i, l in enumerate(launches):
        if l["op"] not in ATTENTION_OPS or launches[i - 1]["op"] not in PROLOGUE_OPS:
            continue
        # Walk back over the prologue to the layer's input norm.
        j = i - 1
        while j > 0 and launches[j - 1]["op"] in PROLOGUE_OPS:
            j -= 1
        sums.append(sum(x["median_us"] for x in launches[j + 1:i]))
        ranges.append((j + 1, i))
    graph = bench_decode(args, artifact, tokens, ranges)["graph_ranges"]
    return list(zip(sums, [g["median_us"] for g in graph]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--msac-run", required=True)
    ap.add_argument("--unfused", required=True)
    ap.add_argument("--fused", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--tokens", default="1,8,64,512,2048,4096")
    ap.add_argument("--context", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--weight-bytes", type=float, default=2,
                    help="bytes per projection weight for the floor: 2 for bf16 "
                         "(default), 1 for FP8 (per-tensor or block scales aside)")
    ap.add_argument("--out")
    args = ap.parse_args()
    cfg = json.load(open(args.config))
    c = cfg.get("text_config", cfg)
    H, D = c["hidden_size"], c["head_dim"]
    hq, hkv = c["num_attention_heads"], c["num_key_value_heads"]
    sa = c["sparse_attention_config"]
    di, hi = sa["sparse_index_dim"], sa["sparse_num_index_heads"]
    channels = {"dense": (hq + 2 * hkv) * D, "msa": (hq + 2 * hkv) * D + (hi + 1) * di}
    bw, rate = copy_bandwidth(), matmul_rate()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, copy bandwidth "
          f"{bw / 1e12:.2f} TB/s, bf16 matmul {rate / 1e12:.0f} TFLOP/s, context {args.context}")
    print("| tokens | layer | unfused us | fused us | unfused/fused | unfused graph us | "
          "fused graph us | unfused/fused (graph) | floor us | fused/floor | "
          "fused graph/floor |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for n in (int(x) for x in args.tokens.split(",")):
        u, f = prologues(args, args.unfused, n), prologues(args, args.fused, n)
        kinds = ["dense", "msa"][:len(u)]
        for kind, (tu, gu), (tf, gf) in zip(kinds, u, f):
            ch = channels[kind]
            floor = max(ch * H * args.weight_bytes / bw, 2 * n * ch * H / rate) * 1e6
            rows.append({"tokens": n, "layer": kind, "unfused_us": tu, "fused_us": tf,
                         "unfused_graph_us": gu, "fused_graph_us": gf, "floor_us": floor})
            print(f"| {n} | {kind} | {tu:.1f} | {tf:.1f} | {tu / tf:.2f} | {gu:.1f} | "
                  f"{gf:.1f} | {gu / gf:.2f} | {floor:.1f} | {tf / floor:.2f} | "
                  f"{gf / floor:.2f} |")
    if args.out:
        json.dump({"gpu": torch.cuda.get_device_name(), "copy_bandwidth_TBps": bw / 1e12,
                   "bf16_matmul_TFLOPs": rate / 1e12, "rows": rows}, open(args.out, "w"),
                  indent=1)


if __name__ == "__main__":
    main()
