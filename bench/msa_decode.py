#!/usr/bin/env python3
"""MSA decode attention on one GPU: msac's generated kernels against PyTorch.

For each (batch, context) point, in one process on one GPU:
  * copy bandwidth (the floor's denominator), measured here;
  * msac: `msac-run bench-decode --json` on a real-shape M3 artifact (one dense
    and one MSA layer; hidden 6144, 64/4/128 heads, index dim 128, 128-token
    blocks, top-16), per-launch medians of CUDA-event timings over synthetic
    cache contents; MSA attention = index_score + block_topk +
    sparse_attention launches of the MSA layer;
  * PyTorch peers of the same computation written from the spec
    (msa-m3-spec.md §2): dense GQA decode through SDPA, MSA decode in eager
    mode and through torch.compile;
  * floors: bytes read once / copy bandwidth.
With --check, one extra msac step per point dumps the attention launches'
inputs and outputs (`--dump`) and PyTorch recomputes them from those inputs:
block scores, the top-k selection (sets compared where the 16th/17th
margin is clear), the sparse attention output over msac's selection, and
the dense layer's attention output.

Usage (on the GPU machine):
  python3 bench/msa_decode.py --msac-run ./msac-run --artifact m3.msa \
      --points 1x8192,8x131072 [--check] [--compile-mode default] --out results.json
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

HQ, HKV, D, DI, BLK, TOPK = 64, 4, 128, 128, 128, 16
G = HQ // HKV


def bench(fn, reps=30, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def copy_bandwidth():
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    t = bench(lambda: b.copy_(a), reps=10)
    del a, b
    return 2 * n / (t * 1e-6)  # bytes/s


def msa_decode(q, iq, ik, K, V):
    """q [B,HQ,D]; iq [B,HKV,DI]; ik [B,N,DI]; K,V [B,N,HKV,D] (bf16)."""
    B, N = ik.shape[0], ik.shape[1]
    nb = N // BLK
    s = torch.einsum("bgd,bnd->bgn", iq.float(), ik.float())
    bs = s.view(B, HKV, nb, BLK).amax(-1)
    bs[:, :, nb - 1] = float("inf")  # the query's own block
    idx = bs.topk(TOPK, dim=-1).indices
    Kb = K.view(B, nb, BLK, HKV, D).permute(0, 3, 1, 2, 4)
    Vb = V.view(B, nb, BLK, HKV, D).permute(0, 3, 1, 2, 4)
    gi = idx[..., None, None].expand(B, HKV, TOPK, BLK, D)
    Ks = torch.gather(Kb, 2, gi).reshape(B, HKV, TOPK * BLK, D)
    Vs = torch.gather(Vb, 2, gi).reshape(B, HKV, TOPK * BLK, D)
    z = torch.einsum("bhgd,bhkd->bhgk", q.view(B, HKV, G, D).float(), Ks.float())
    p = torch.softmax(z / math.sqrt(D), dim=-1)
    o = torch.einsum("bhgk,bhkd->bhgd", p, Vs.float())
    return o.reshape(B, HQ, D).to(q.dtype)


def dense_decode(q, K, V):
    B = K.shape[0]
    return F.scaled_dot_product_attention(
        q.view(B, HQ, 1, D), K.permute(0, 2, 1, 3), V.permute(0, 2, 1, 3),
        enable_gqa=True)


def torch_peers(B, N, compile_mode):
    torch.manual_seed(0)
    dev, bf = "cuda", torch.bfloat16
    q = torch.randn(B, HQ, D, device=dev, dtype=bf)
    iq = torch.randn(B, HKV, DI, device=dev, dtype=bf)
    ik = torch.randn(B, N, DI, device=dev, dtype=bf)
    K = torch.randn(B, N, HKV, D, device=dev, dtype=bf)
    V = torch.randn(B, N, HKV, D, device=dev, dtype=bf)
    r = {}
    r["dense_sdpa_us"] = bench(lambda: dense_decode(q, K, V))
    r["msa_eager_us"] = bench(lambda: msa_decode(q, iq, ik, K, V))
    compiled = torch.compile(msa_decode, mode=compile_mode, dynamic=False)
    t0 = time.time()
    compiled(q, iq, ik, K, V)
    torch.cuda.synchronize()
    r["compile_s"] = time.time() - t0
    r["msa_compile_us"] = bench(lambda: compiled(q, iq, ik, K, V))
    del q, iq, ik, K, V
    torch.cuda.empty_cache()
    return r


def load_dump(folder):
    meta = json.load(open(os.path.join(folder, "dump.json")))
    dt = {"bf16": torch.bfloat16, "f32": torch.float32, "i32": torch.int32}
    raw = {"bf16": np.uint16, "f32": np.float32, "i32": np.int32}
    needed = {str(x) for l in meta["launches"]
              if l["op"] in ("msa.index_score", "msa.block_topk",
                             "msa.sparse_attention", "msa.dense_attention")
              for x in l["buffers"]}
    bufs = {}
    for key, b in meta["buffers"].items():
        if key not in needed:
            continue
        a = np.fromfile(os.path.join(folder, b["file"]), dtype=raw[b["dtype"]])
        t = torch.from_numpy(a.astype(np.int32) if b["dtype"] == "bf16" else a)
        if b["dtype"] == "bf16":  # bf16 bits -> values
            t = (t.to(torch.int32) << 16).view(torch.float32).to(torch.bfloat16)
        bufs[int(key)] = t.reshape(b["shape"]).cuda()
    launches = {}
    for l in meta["launches"]:  # the first launch of each op
        launches.setdefault(l["op"], l["buffers"])
    return meta, bufs, launches


def gather_seq(cache, table, seq, n):
    """[n, heads, dim] rows 0..n-1 of sequence `seq` of a paged cache
    [pages, heads, page, dim]."""
    page = cache.shape[2]
    pos = torch.arange(n, device=cache.device)
    phys = table[seq, pos // page].long()
    return cache[phys, :, pos % page, :]


def check(folder):
    """Recomputes msac's attention launches from their dumped inputs."""
    meta, bufs, launches = load_dump(folder)
    out = {}
    B = meta["batch"]
    # Index scores: [G, T, MB], scale 1 (msa-m3-spec.md §2.2).
    iq_id, icache_id, table_id, seq_id, pos_id, scores_id = launches["msa.index_score"]
    iq, icache, table = bufs[iq_id].float(), bufs[icache_id].float(), bufs[table_id]
    seqs, pos, got = bufs[seq_id], bufs[pos_id], bufs[scores_id]
    worst = 0.0
    ref_blocks = []
    for t in range(B):
        n = int(pos[t]) + 1
        keys = gather_seq(icache, table, int(seqs[t]), n)[:, 0, :]     # [n, DI]
        s = iq[t] @ keys.T                                            # [G, n]
        nb = (n + BLK - 1) // BLK
        pad = torch.full((s.shape[0], nb * BLK), float("-inf"), device="cuda")
        pad[:, :n] = s
        bs = pad.view(s.shape[0], nb, BLK).amax(-1)                   # [G, nb]
        ref_blocks.append(bs)
        mine = got[:, t, :nb]
        worst = max(worst, ((mine - bs).abs().max() / bs.abs().max()).item())
    out["index_score_max_rel_err"] = worst
    # Top-k: the query's own block, then the best 15 others.
    _, pos2, ids_id = launches["msa.block_topk"]
    ids = bufs[ids_id]                                                 # [G, T, K]
    differ, clear = 0, 0
    for t in range(B):
        bs = ref_blocks[t].clone()
        nb = bs.shape[1]
        for g in range(bs.shape[0]):
            mine = set(int(x) for x in ids[g, t].tolist() if x >= 0)
            if nb <= TOPK:
                ref = set(range(nb))
                margin = float("inf")
            else:
                row = bs[g].clone()
                row[nb - 1] = float("inf")
                top = row.topk(TOPK + 1)
                ref = set(top.indices[:TOPK].tolist())
                margin = (top.values[TOPK - 1] - top.values[TOPK]).item()
            if margin > 1e-3 * max(1.0, abs(top.values[TOPK - 1].item()) if nb > TOPK else 1.0):
                clear += 1
                differ += mine != ref
    out["topk_rows_clear_margin"] = clear
    out["topk_rows_differing"] = differ
    # Sparse attention over msac's own selection.
    q_id, kc_id, vc_id, table_id, seq_id, pos_id, ids_id, o_id = launches["msa.sparse_attention"][:8]
    q, kc, vc, o = bufs[q_id].float(), bufs[kc_id].float(), bufs[vc_id].float(), bufs[o_id].float()
    ids = bufs[ids_id]
    worst, rms = 0.0, 0.0
    for t in range(B):
        n = int(pos[t]) + 1
        Kt = gather_seq(kc, table, int(seqs[t]), n)                   # [n, HKV, D]
        Vt = gather_seq(vc, table, int(seqs[t]), n)
        for g in range(HKV):
            sel = torch.cat([torch.arange(b * BLK, min((b + 1) * BLK, n), device="cuda")
                             for b in ids[g, t].tolist() if b >= 0])
            z = q[t, g * G:(g + 1) * G] @ Kt[sel, g].T / math.sqrt(D)
            ref = torch.softmax(z, -1) @ Vt[sel, g]
            worst = max(worst, (o[t, g * G:(g + 1) * G] - ref).abs().max().item())
            rms = max(rms, ref.pow(2).mean().sqrt().item())
    out["sparse_attention_max_abs_err"] = worst
    out["sparse_attention_ref_rms"] = rms
    # Dense attention (the dense layer).
    q_id, kc_id, vc_id, table_id, seq_id, pos_id, o_id = launches["msa.dense_attention"][:7]
    q, kc, vc, o = bufs[q_id].float(), bufs[kc_id].float(), bufs[vc_id].float(), bufs[o_id].float()
    worst, rms = 0.0, 0.0
    for t in range(B):
        n = int(pos[t]) + 1
        Kt = gather_seq(kc, table, int(seqs[t]), n)
        Vt = gather_seq(vc, table, int(seqs[t]), n)
        for g in range(HKV):
            z = q[t, g * G:(g + 1) * G] @ Kt[:, g].T / math.sqrt(D)
            ref = torch.softmax(z, -1) @ Vt[:, g]
            worst = max(worst, (o[t, g * G:(g + 1) * G] - ref).abs().max().item())
            rms = max(rms, ref.pow(2).mean().sqrt().item())
    out["dense_attention_max_abs_err"] = worst
    out["dense_attention_ref_rms"] = rms
    return out


def msac_point(args, B, N, dump=None):
    cmd = [args.msac_run, "bench-decode", args.artifact, "--device", "cuda",
           "--batch", str(B), "--context", str(N), "--dummy-weights", "--json",
           "--steps", str(args.steps), "--warmup", "2"]
    if dump:
        cmd += ["--dump", dump]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(" ".join(cmd) + " failed:\n" + res.stderr)
    j = json.loads(res.stdout)
    # The first run of consecutive launches of each attention op (an op may
    # take several launches, e.g. split-KV attention and its combine).
    attn, prev = {}, None
    for l in j["launches"]:
        op = l["op"]
        key = op.split(".")[1] + "_us"
        if op in ("msa.index_score", "msa.block_topk", "msa.sparse_attention",
                  "msa.dense_attention"):
            if key not in attn:
                attn[key] = l["median_us"]
            elif prev == op and not attn.get(key + "_done"):
                attn[key] += l["median_us"]
        if prev in ("msa.index_score", "msa.block_topk", "msa.sparse_attention",
                    "msa.dense_attention") and op != prev:
            attn[prev.split(".")[1] + "_us_done"] = True
        prev = op
    attn = {k: v for k, v in attn.items() if not k.endswith("_done")}
    j["attention"] = attn
    return j


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--msac-run", required=True)
    ap.add_argument("--artifact", required=True)
    ap.add_argument("--points", default="1x8192,8x8192,64x8192,1x32768,8x32768,"
                    "64x32768,1x131072,8x131072,64x131072")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--compile-mode", default="max-autotune-no-cudagraphs")
    ap.add_argument("--autotune-points", default="",
                    help="points (e.g. 8x131072) compiled with --compile-mode; "
                         "the others with torch.compile's default mode")
    ap.add_argument("--check", default="", help="points to check, e.g. 8x8192")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "msa_decode.json"))
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    bw = copy_bandwidth()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    rows = []
    for point in args.points.split(","):
        B, N = (int(x) for x in point.split("x"))
        r = {"batch": B, "context": N}
        m = msac_point(args, B, N)
        r["msac"] = m["attention"]
        r["msac"]["msa_us"] = sum(m["attention"].get(k, 0) for k in ("index_score_us", "block_topk_us", "sparse_attention_us"))
        r["msac"]["step_us"] = m["step_median_us"]
        r["msac"]["ops"] = m["ops"]
        idx_bytes = B * N * DI * 2
        sel_bytes = B * HKV * TOPK * BLK * D * 2 * 2
        dense_bytes = B * N * HKV * D * 2 * 2
        r["floor_us"] = {"msa": (idx_bytes + sel_bytes) / bw * 1e6,
                         "index_score": idx_bytes / bw * 1e6,
                         "sparse_attention": sel_bytes / bw * 1e6,
                         "dense_attention": dense_bytes / bw * 1e6}
        if not args.no_torch:
            try:
                mode = (args.compile_mode if not args.autotune_points
                        or point in args.autotune_points.split(",") else "default")
                r["torch"] = torch_peers(B, N, mode)
                r["torch"]["compile_mode"] = mode
            except torch.OutOfMemoryError as e:
                r["torch"] = {"error": "out of memory"}
                torch.cuda.empty_cache()
        if point in args.check.split(","):
            with tempfile.TemporaryDirectory() as d:
                msac_point(args, B, N, dump=d)
                r["check"] = check(d)
        rows.append(r)
        print(json.dumps(r), flush=True)
        with open(args.out, "w") as f:  # after every point
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "copy_bandwidth_TBps": bw / 1e12, "rows": rows}, f, indent=1)
    print("\n| batch | context | msac MSA us (index / top-k / attention) | floor us | msac/floor "
          "| torch eager | torch.compile | SDPA dense | msac dense attn | dense floor |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        m, f, t = r["msac"], r["floor_us"], r.get("torch", {})
        print(f"| {r['batch']} | {r['context']} | {m['msa_us']:.1f} ({m.get('index_score_us', 0):.1f} / "
              f"{m.get('block_topk_us', 0):.1f} / {m.get('sparse_attention_us', 0):.1f}) | {f['msa']:.1f} | "
              f"{m['msa_us'] / f['msa']:.2f} | {t.get('msa_eager_us', float('nan')):.1f} | "
              f"{t.get('msa_compile_us', float('nan')):.1f} | {t.get('dense_sdpa_us', float('nan')):.1f} | "
              f"{m.get('dense_attention_us', 0):.1f} | {f['dense_attention']:.1f} |")


if __name__ == "__main__":
    main()
