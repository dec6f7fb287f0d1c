#!/usr/bin/env python3
"""Every launch of an msac decode step at real M3 shapes against PyTorch.

`msac-run bench-decode ... --dummy-weights --dump DIR` leaves, after its last
step, every non-weight buffer of the step in DIR plus dump.json (the step's
launches in order with their buffer ids, the buffers' shapes and dtypes, the
weights' shapes and how the synthetic weights were made). This script
regenerates the weights bit for bit, then recomputes each launch from the
inputs msac used, written from the spec (msa-m3-spec.md §2-§3) and the op
definitions: PyTorch on the GPU, FP32 math, rounded to the output's dtype.
It prints, per op, the worst error relative to the largest expected value,
and exits 1 when an op exceeds its bound.

A prefill chunk (`--prefill-chunk N`) is checked the same way.

An artifact compiled with `--attention-precision q8` (its dump.json says
so; `--attention-precision` overrides) is checked against MSA's FP8
decode contract then (spec 3.2): E4M3 queries, E4M3(448 P) in P V and P
unrounded in the denominator, P taken against the row's final maximum
(msac's kernels use the running maximum of their 16-key groups, which
rounds P at other points: within the bound).

Usage (on the GPU machine):
  ./msac-run bench-decode m3.msa --device cuda --dummy-weights \
      --batch 8 --context 8192 --steps 1 --warmup 0 --dump DIR [--prefill-chunk 256]
  python3 bench/m3_ops_check.py DIR --config models/minimax-m3/config.json
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

DEV = "cuda"


def pool(dtype, meta):
    """The synthetic-weight pool of Executor::fillUniform (SplitMix64)."""
    n = meta["pool_bytes"] // (2 if dtype == "bf16" else 4)
    with np.errstate(over="ignore"):
        state = np.uint64(meta["seed"]) + np.uint64(0x9E3779B97F4A7C15) * np.arange(
            1, n + 1, dtype=np.uint64)
        z = state
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    lo, hi = np.float32(meta["low"]), np.float32(meta["high"])
    v = lo + (hi - lo) * u
    if dtype == "f32":
        return torch.from_numpy(v.view(np.uint8).copy()).to(DEV)
    bits = v.view(np.uint32)
    h = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
         >> np.uint32(16)).astype(np.uint16)
    return torch.from_numpy(h.view(np.uint8).copy()).to(DEV)


class Step:
    def __init__(self, folder):
        self.dir = folder
        self.meta = json.load(open(os.path.join(folder, "dump.json")))
        if "dummy_weights" not in self.meta:
            sys.exit(f"{folder}/dump.json: the step ran with the artifact's own weights, "
                     "which the dump does not hold; dump with `msac-run bench-decode "
                     "--dummy-weights` so that the weights can be regenerated")
        self.cache = {}
        self.pools = {}

    def get(self, bid):
        bid = int(bid)
        if bid in self.cache:
            return self.cache[bid]
        key = str(bid)
        if key in self.meta["buffers"]:
            b = self.meta["buffers"][key]
            raw = np.fromfile(os.path.join(self.dir, b["file"]), dtype=np.uint8)
            t = torch.from_numpy(raw).to(DEV)
        else:
            b = self.meta["weights"][key]
            dw = self.meta["dummy_weights"]
            p = self.pools.setdefault(b["dtype"], pool(b["dtype"], dw))
            size = p.numel()
            at = (bid * dw["start_per_buffer"] % size) & ~255
            parts, done = [], 0
            while done < b["bytes"]:
                n = min(b["bytes"] - done, size - at)
                parts.append(p[at:at + n])
                done += n
                at = ((at + n + 4096) % size) & ~255
            t = torch.cat(parts)
        if b["dtype"] in ("f8E4M3FN", "nvfp4"):
            # An FP8 / NVFP4 cache, decoded to the bf16 values its readers
            # use (exact: E4M3 values are bf16 values).
            t = decode_cache(t, b["dtype"], b["shape"])
        else:
            dt = {"bf16": torch.bfloat16, "f32": torch.float32, "i32": torch.int32}[b["dtype"]]
            t = t.view(dt).reshape(b["shape"])
        self.cache[bid] = t
        return t


E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def to_e4m3(x):
    """FP32 -> the FP32 value of E4M3 (round to nearest even, saturating at
    +-448, as msac's encodeE4M3)."""
    return x.float().clamp(-448.0, 448.0).to(torch.float8_e4m3fn).float()


def decode_cache(raw, dtype, shape):
    """A dumped paged cache [pages, H, page, D] as bf16 values: FP8 E4M3
    bytes, or NVFP4 pages (codes [H, page, D / 2], low nibble first, then
    E4M3 scales [H, page, D / 16]) dequantized to FP8 as the attention and
    indexer read them (code x scale in FP32, rounded to E4M3; spec 4.2)."""
    pages, H, page, D = shape
    if dtype == "f8E4M3FN":
        return raw.view(torch.float8_e4m3fn).float().reshape(shape).to(torch.bfloat16)
    ncode = H * page * D // 2
    raw = raw[:pages * (ncode + H * page * D // 16)].view(pages, -1)
    codes = raw[:, :ncode].reshape(pages, H, page, D // 2)
    scales = raw[:, ncode:].reshape(pages, H, page, D // 16)
    c = torch.stack([codes & 15, codes >> 4], -1).reshape(pages, H, page, D).long()
    mag = torch.tensor(E2M1, device=raw.device)[c & 7]
    val = torch.where((c & 8) != 0, -mag, mag)
    scale = scales.view(torch.float8_e4m3fn).float().repeat_interleave(16, -1)
    return to_e4m3(val * scale).to(torch.bfloat16)


def quantize_like_cache(x, dtype):
    """The values msa.kv_cache_insert stores for x (last dim = head_dim),
    as the cache's readers see them (bf16): FP8 E4M3 (saturating, nearest
    even), or NVFP4 per 16 values (scale = E4M3(amax / 6), code =
    E2M1(x / scale) nearest even, 0 when the scale is 0), dequantized to
    FP8 like decode_cache."""
    if dtype == "bf16":
        return x
    if dtype == "f8E4M3FN":
        return to_e4m3(x).to(torch.bfloat16)
    b = x.float().unflatten(-1, (-1, 16))
    scale = to_e4m3(b.abs().amax(-1, keepdim=True) / 6.0)
    q = b / torch.where(scale == 0, torch.ones_like(scale), scale)
    a = q.abs()
    code = ((a > 0.25).long() + (a >= 0.75).long() + (a > 1.25).long() + (a >= 1.75).long()
            + (a > 2.5).long() + (a >= 3.5).long() + (a > 5.0).long())
    mag = torch.tensor(E2M1, device=x.device)[code]
    val = torch.where(q < 0, -mag, mag)
    val = torch.where((scale == 0) | torch.isnan(q), torch.zeros_like(val), val)
    return to_e4m3(val * scale).flatten(-2).to(torch.bfloat16)


def gather_seq(cache, table, seq, n):
    page = cache.shape[2]
    pos = torch.arange(n, device=DEV)
    phys = table[seq, pos // page].long()
    return cache[phys, :, pos % page, :]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--config", required=True)
    ap.add_argument("--attention-precision", choices=("exact", "q8"),
                    default=None,
                    help="the attention ops' contract (msac compile's flag; "
                    "default: the dump's attention_precision, else exact)")
    args = ap.parse_args()
    cfg = json.load(open(args.config))
    cfg = cfg.get("text_config", cfg)
    sa = cfg["sparse_attention_config"]
    eps = cfg["rms_norm_eps"]
    theta, rot = cfg["rope_theta"], cfg["rotary_dim"]
    alpha, limit = cfg["swiglu_alpha"], cfg["swiglu_limit"]
    topk_e, rsf = cfg["num_experts_per_tok"], cfg["routed_scaling_factor"]
    blk, topk_b = sa["sparse_block_size"], sa["sparse_topk_blocks"]
    local, init = sa["sparse_local_block"], sa["sparse_init_block"]
    D = cfg["head_dim"]

    s = Step(args.dump)
    T = s.meta["tokens"]
    recorded = set(s.meta.get("attention_precision", ["exact"]))
    precision = args.attention_precision or (
        "q8" if recorded == {"q8"} else "exact")
    if args.attention_precision and recorded != {args.attention_precision}:
        print(f"warning: the dump's layers are {sorted(recorded)}, checked as "
              f"--attention-precision {args.attention_precision}",
              file=sys.stderr)
    q8 = precision == "q8"
    worst = {}
    notes = {}

    def record(op, got, want):
        got, want = got.float(), want.float()
        scale = want.abs().max().item() or 1.0
        err = (got - want).abs().max().item() / scale
        worst[op] = max(worst.get(op, 0.0), err)

    def bf(x):
        return x.to(torch.bfloat16)

    seen = set()
    launches = s.meta["launches"]
    for i, l in enumerate(launches):
        op, b = l["op"], l["buffers"]
        if l["kernel"].endswith(tuple(f"_part{k}" for k in range(1, 4))):
            continue  # later parts of the same op: its output is checked once
        g = s.get
        if op == "msa.embedding":
            record(op, g(b[2])[:T], g(b[1])[g(b[0])[:T].long()])
        elif op == "msa.rms_norm":
            x = g(b[0])[:T].float()
            w = g(b[1]).float()
            n = w.numel()  # per-head norms: [T, heads * n] -> [T, heads, n]
            x2 = x.reshape(-1, n)
            want = x2 * torch.rsqrt(x2.pow(2).mean(-1, keepdim=True) + eps) * (w + 1)
            record(op, g(b[2])[:T].reshape(-1, n), bf(want))
        elif op == "msa.linear":
            x = g(b[0])[:T].float().reshape(T, -1)
            record(op, g(b[2])[:T], bf(x @ g(b[1]).float().T))
        elif op == "msa.rope":
            x = g(b[0])[:T].float()
            pos = g(b[1])[:T].double()
            half = rot // 2
            inv = torch.tensor([theta ** (-2.0 * i / rot) for i in range(half)],
                               dtype=torch.float64, device=DEV).float()
            ang = pos.float()[:, None] * inv[None]
            c, sn = ang.cos()[:, None, :], ang.sin()[:, None, :]
            x1, x2 = x[..., :half], x[..., half:rot]
            want = torch.cat([x1 * c - x2 * sn, x2 * c + x1 * sn, x[..., rot:]], -1)
            record(op, g(b[2])[:T], bf(want))
        elif op == "msa.kv_cache_insert":
            cache, table, seqs, pos, vals = g(b[0]), g(b[1]), g(b[2]), g(b[3]), g(b[4])
            # An FP8 / NVFP4 cache holds the quantized values (decoded by
            # Step.get), to compare with the same quantization of the
            # inserted rows: exact, so any flipped step exceeds the bound.
            dtype = s.meta["buffers"].get(str(int(b[0])), {}).get("dtype", "bf16")
            page = cache.shape[2]
            for t in range(T):
                p = int(pos[t])
                phys = int(table[int(seqs[t]), p // page])
                record(op, cache[phys, :, p % page, :],
                       quantize_like_cache(vals[t].reshape(cache.shape[1], -1), dtype))
        elif op == "msa.index_score":
            q, cache, table, seqs, pos, out = (g(x) for x in b[:6])
            if s.meta["buffers"][str(b[1])]["dtype"] in ("f8E4M3FN", "nvfp4"):
                # FP8 / NVFP4 index keys score against E4M3 queries (the
                # Q8KV8 / Q8KV4 indexers, spec 3.2, 5.4).
                q = to_e4m3(q)
            for t in range(T):
                n = int(pos[t]) + 1
                keys = gather_seq(cache.float(), table, int(seqs[t]), n)[:, 0, :]
                sc = q[t].float() @ keys.T
                nb = (n + blk - 1) // blk
                pad = torch.full((sc.shape[0], nb * blk), float("-inf"), device=DEV)
                pad[:, :n] = sc
                record(op, out[:, t, :nb], pad.view(sc.shape[0], nb, blk).amax(-1))
        elif op == "msa.block_topk":
            scores, pos, ids = g(b[0]), g(b[1]), g(b[2])
            differ = clear = 0
            for t in range(T):
                L = int(pos[t]) // blk
                for gg in range(scores.shape[0]):
                    mine = set(int(x) for x in ids[gg, t].tolist() if x >= 0)
                    if L + 1 <= topk_b:
                        ref, margin = set(range(L + 1)), 1.0
                    else:
                        row = scores[gg, t, :L + 1].clone().float()
                        row = torch.nan_to_num(row, nan=float("-inf"))
                        forced = set(range(init)) | set(range(L - local + 1, L + 1))
                        for f in forced:
                            row[f] = float("-inf")
                        top = row.topk(topk_b - len(forced) + 1)
                        ref = set(top.indices[:-1].tolist()) | forced
                        margin = (top.values[-2] - top.values[-1]).item()
                    if margin > 1e-3:
                        clear += 1
                        differ += mine != ref
            notes[op] = f"{differ} of {clear} rows with a clear margin differ"
            worst[op] = max(worst.get(op, 0.0), float(differ))
        elif op in ("msa.sparse_attention", "msa.dense_attention"):
            sparse = op == "msa.sparse_attention"
            q, kc, vc, table, seqs, pos = (g(x) for x in b[:6])
            ids = g(b[6]) if sparse else None
            out = g(b[7] if sparse else b[6])
            hkv = kc.shape[1]
            grp = q.shape[1] // hkv
            for t in range(T):
                n = int(pos[t]) + 1
                Kt = gather_seq(kc.float(), table, int(seqs[t]), n)
                Vt = gather_seq(vc.float(), table, int(seqs[t]), n)
                for h in range(hkv):
                    if sparse:
                        sel = torch.cat([torch.arange(x * blk, min((x + 1) * blk, n), device=DEV)
                                         for x in ids[h, t].tolist() if x >= 0])
                    else:
                        sel = torch.arange(n, device=DEV)
                    qt = q[t, h * grp:(h + 1) * grp].float()
                    if q8:
                        z = to_e4m3(qt) @ Kt[sel, h].T / math.sqrt(D)
                        p = 448.0 * torch.exp(z - z.max(-1, keepdim=True).values)
                        want = (to_e4m3(p) @ Vt[sel, h]) / p.sum(-1, keepdim=True)
                    else:
                        z = qt @ Kt[sel, h].T / math.sqrt(D)
                        want = torch.softmax(z, -1) @ Vt[sel, h]
                    record(op, out[t, h * grp:(h + 1) * grp], bf(want))
        elif op == "arith.addf":
            record(op, g(b[2])[:T], bf(g(b[0])[:T].float() + g(b[1])[:T].float()))
        elif op == "msa.swiglu":
            gt, up = g(b[0])[:T].float(), g(b[1])[:T].float()
            gc = gt.clamp(max=limit)
            uc = up.clamp(-limit, limit)
            record(op, g(b[2])[:T], bf((uc + 1) * gc * torch.sigmoid(alpha * gc)))
        elif op == "msa.moe_router":
            # input, gate, [bias], weights, ids, [GPU workspace]
            has_bias = str(b[2]) in s.meta["weights"]
            x, gate = g(b[0])[:T].float(), g(b[1]).float()
            bias = g(b[2]).float() if has_bias else 0
            o = 3 if has_bias else 2
            w_out, id_out = g(b[o])[:T], g(b[o + 1])[:T]
            score = torch.sigmoid(x @ gate.T)
            biased = score + bias
            top = biased.topk(topk_e + 1, -1)
            differ = 0
            for t in range(T):
                if (top.values[t, topk_e - 1] - top.values[t, topk_e]).item() > 1e-3:
                    differ += set(id_out[t].tolist()) != set(top.indices[t, :topk_e].tolist())
            sel = id_out.long()
            w = score.gather(1, sel)
            w = w / w.sum(-1, keepdim=True) * rsf
            record(op, w_out, w)
            notes[op] = f"{differ} of {T} tokens route to other experts"
            worst[op + " ids"] = float(differ)
        elif op == "msa.moe_experts":
            x, rw, ri = g(b[0])[:T].float(), g(b[1])[:T].float(), g(b[2])[:T].long()
            w1, w3, w2, out = g(b[3]), g(b[4]), g(b[5]), g(b[6])[:T]
            want = torch.zeros_like(x)
            for t in range(T):
                for k in range(ri.shape[1]):
                    e = int(ri[t, k])
                    gv = bf(x[t] @ w1[e].float().T).float()
                    uv = bf(x[t] @ w3[e].float().T).float()
                    gc, uc = gv.clamp(max=limit), uv.clamp(-limit, limit)
                    a = bf((uc + 1) * gc * torch.sigmoid(alpha * gc)).float()
                    want[t] += rw[t, k] * (a @ w2[e].float().T)
            record(op, out, bf(want))
        elif op == "msa.logits":
            hid, idx, head, out = g(b[0]), g(b[1]), g(b[2]), g(b[3])
            n = s.meta.get("logits_rows", T)
            rows = hid[idx[:n].long()].float()
            record(op, out[:n], rows @ head.float().T)
        else:
            notes[op] = "not checked"
        seen.add(op)

    # Bounds: bf16 outputs may differ by an ulp of the largest value (the
    # FP32 sums run in another order); FP32 outputs by 1e-3 of it; ids
    # (block sets, expert sets) must agree where the choice is clear.
    bounds = {"msa.index_score": 1e-3, "msa.logits": 1e-3, "msa.moe_router": 1e-3,
              "msa.block_topk": 0, "msa.moe_router ids": 0}
    ok = True
    print(f"| op | worst error (÷ largest expected value) | bound | |")
    print("|---|---|---|---|")
    for op in sorted(worst):
        bound = bounds.get(op, 1.6e-2)
        passed = worst[op] <= bound
        ok &= passed
        print(f"| {op} | {worst[op]:.3g} | {bound:g} | {'PASS' if passed else 'FAIL'} {notes.get(op, '')} |")
    for op, n in notes.items():
        if op not in worst:
            print(f"| {op} | - | - | {n} |")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
