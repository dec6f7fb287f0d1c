#!/usr/bin/env python3
"""MiniMax-M3 decoder layers in PyTorch, against msac's generated kernels.

The layers are written from the spec (msa-m3-spec.md §1.4 layer, §2 index
branch, §3 sparse attention; GemmaRMSNorm, partial NeoX RoPE, SwiGLU-OAI,
sigmoid router with correction bias, 4 of 128 experts + one shared expert):
a dense layer (full causal GQA attention, dense MLP; M3 layers 0-2) and an
MSA layer (indexer -> max-pool to 128-token blocks -> top-16 with the own
block forced -> attention over the selected keys; MoE; layers 3-59).

  check DUMP   `msac-run bench-decode ... --dummy-weights --dump DUMP` (a
               decode step or a prefill chunk) -> every layer's output
               recomputed in PyTorch from the layer's input (the weights are
               regenerated bit for bit, caches hold msac's synthetic history,
               the new keys are PyTorch's own), compared with msac's layer
               output and with the keys msac inserted. Exits 1 on failure.
  bench        decode steps and prefill chunks of the two real-shape layers:
               msac (per-launch CUDA-event medians of the layers' launches,
               from `msac-run bench-decode --json`), PyTorch eager and
               torch.compile of the same layers over the same shapes, and
               the floor max(bytes read once / copy bandwidth, FLOPs /
               bf16 matmul rate), both measured in the same run.

Usage (GPU machine):
  python3 bench/m3_layer.py check DUMP --config models/minimax-m3/config.json
  python3 bench/m3_layer.py bench --msac-run ./msac-run --artifact m3.msa \
      --config models/minimax-m3/config.json --decode 8x131072 --prefill 1x8192
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

DEV = "cuda"
BF = torch.bfloat16


class Cfg:
    def __init__(self, path):
        c = json.load(open(path))
        c = c.get("text_config", c)
        sa = c["sparse_attention_config"]
        self.hidden = c["hidden_size"]
        self.hq, self.hkv, self.d = (c["num_attention_heads"], c["num_key_value_heads"],
                                     c["head_dim"])
        self.eps, self.theta, self.rot = c["rms_norm_eps"], c["rope_theta"], c["rotary_dim"]
        self.alpha, self.limit = c["swiglu_alpha"], c["swiglu_limit"]
        self.experts, self.topk_e = c["num_local_experts"], c["num_experts_per_tok"]
        self.rsf = c["routed_scaling_factor"]
        self.inter, self.shared_inter = c["intermediate_size"], c["shared_intermediate_size"]
        self.dense_inter = c["dense_intermediate_size"]
        self.blk, self.topk_b = sa["sparse_block_size"], sa["sparse_topk_blocks"]
        self.di, self.hi = sa["sparse_index_dim"], sa["sparse_num_index_heads"]
        self.init_blocks, self.local_blocks = sa["sparse_init_block"], sa["sparse_local_block"]


# ---------------------------------------------------------------------------
# The layers. x: [B, P, hidden] bf16, the P new tokens of each of B sequences
# at positions c0 .. c0 + P - 1. K, V: [B, C, Hkv, D]; IK: [B, C, dI] (bf16
# caches, C >= c0 + P; the new keys are written into them). Every op rounds
# its output to bf16 as the checkpoint's activation dtype, math in FP32.
# ---------------------------------------------------------------------------

def gemma_norm(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + w.float())).to(BF)


def rope(x, pos, cfg):
    """Partial NeoX RoPE on the first `rot` channels; x [B, P, H, D], pos [P]."""
    half = cfg.rot // 2
    inv = (cfg.theta ** (-2.0 * torch.arange(half, device=x.device, dtype=torch.float64)
                         / cfg.rot)).float()
    ang = pos.float()[:, None] * inv[None]  # FP32 angles, as the op defines them
    c, s = ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]
    xf = x.float()
    x1, x2 = xf[..., :half], xf[..., half:cfg.rot]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, xf[..., cfg.rot:]], -1).to(BF)


def swiglu(g, u, cfg):
    gc = g.float().clamp(max=cfg.limit)
    uc = u.float().clamp(-cfg.limit, cfg.limit)
    return ((uc + 1) * gc * torch.sigmoid(cfg.alpha * gc)).to(BF)


def dense_attention(q, K, V, c0, cfg, exact):
    """Causal GQA over all keys j <= position; q [B, P, Hq, D]."""
    B, P = q.shape[:2]
    C = c0 + P
    pos = c0 + torch.arange(P, device=q.device)
    if not exact:
        mask = None if P == 1 else (torch.arange(C, device=q.device)[None, :] <= pos[:, None])
        o = F.scaled_dot_product_attention(
            q.transpose(1, 2), K[:, :C].transpose(1, 2), V[:, :C].transpose(1, 2),
            attn_mask=mask, enable_gqa=True)
        return o.transpose(1, 2)
    g = cfg.hq // cfg.hkv
    qf = q.float().view(B, P, cfg.hkv, g, cfg.d)
    z = torch.einsum("bphgd,bchd->bphgc", qf, K[:, :C].float()) / math.sqrt(cfg.d)
    z.masked_fill_((torch.arange(C, device=q.device)[None, :] > pos[:, None])[None, :, None, None, :],
                   float("-inf"))
    o = torch.einsum("bphgc,bchd->bphgd", torch.softmax(z, -1), V[:, :C].float())
    return o.reshape(B, P, cfg.hq, cfg.d).to(BF)


def msa_select(iq, IK, c0, cfg):
    """Block ids [B, P, Hi, k] (k = min(top-k, blocks)): per query and index
    head, max-pooled block scores over keys j <= position, the own block
    forced (spec §2.3-§2.5; sparse_init_block = 0, one local block)."""
    B, P = iq.shape[:2]
    C = c0 + P
    nb = (C + cfg.blk - 1) // cfg.blk
    pos = c0 + torch.arange(P, device=iq.device)
    s = torch.einsum("bphd,bcd->bphc", iq.float(), IK[:, :C].float())
    s.masked_fill_((torch.arange(C, device=iq.device)[None, :] > pos[:, None])[None, :, None, :],
                   float("-inf"))
    if nb * cfg.blk != C:
        s = F.pad(s, (0, nb * cfg.blk - C), value=float("-inf"))
    bs = s.reshape(B, P, s.shape[2], nb, cfg.blk).amax(-1)
    own = (pos // cfg.blk)[None, :, None, None].expand(B, P, bs.shape[2], 1).contiguous()
    bs.scatter_(-1, own, float("inf"))
    return bs.topk(min(cfg.topk_b, nb), dim=-1), bs


def adopt(tie, mine, theirs, fix, key):
    """Rows whose choice is a near tie take msac's choice `mine` (counted in
    fix["stats"][key]: [near ties, inadmissible choices])."""
    st = fix.setdefault("stats", {}).setdefault(key, [0, 0])
    st[0] += int(tie.sum())
    return torch.where(tie[..., None], mine, theirs)


def adopt_blocks(sel, bs, fix):
    """Near ties between the 15th and 16th history block (relative margin
    <= 1e-3): msac's block set is used when every one of its blocks scores
    within that margin of the 15th best."""
    k, nb = sel.shape[-1], bs.shape[-1]
    if nb <= k:
        return sel
    nxt = bs.topk(k + 1, dim=-1).values
    kth = nxt[..., k - 1]
    tol = 1e-3 * kth.abs().clamp(min=1.0)
    tie = (kth - nxt[..., k]) <= tol               # NaN (both -inf): no tie
    mine = fix["blocks"].long()
    ok = (bs.gather(-1, mine.clamp(min=0)) >= (kth - tol)[..., None]).all(-1) & (mine >= 0).all(-1)
    fix.setdefault("stats", {}).setdefault("blocks", [0, 0])[1] += int((tie & ~ok).sum())
    return adopt(tie, mine, sel, fix, "blocks")


def sparse_attention(q, K, V, sel, c0, cfg, exact):
    """Attention of each group's 16 query heads over its selected blocks'
    keys j <= position (spec §3.1); sel [B, P, Hkv, k]."""
    B, P = q.shape[:2]
    C = K.shape[1]
    nb = (C + cfg.blk - 1) // cfg.blk
    k = sel.shape[-1]
    g = cfg.hq // cfg.hkv
    pos = c0 + torch.arange(P, device=q.device)
    if nb * cfg.blk != C:
        K = F.pad(K, (0, 0, 0, 0, 0, nb * cfg.blk - C))
        V = F.pad(V, (0, 0, 0, 0, 0, nb * cfg.blk - C))
    Kb = K.view(B, nb, cfg.blk, cfg.hkv, cfg.d).permute(0, 3, 1, 2, 4)
    Vb = V.view(B, nb, cfg.blk, cfg.hkv, cfg.d).permute(0, 3, 1, 2, 4)
    bi = torch.arange(B, device=q.device)[:, None, None, None]
    hi = torch.arange(cfg.hkv, device=q.device)[None, None, :, None]
    Ks = Kb[bi, hi, sel].reshape(B, P, cfg.hkv, k * cfg.blk, cfg.d)
    Vs = Vb[bi, hi, sel].reshape(B, P, cfg.hkv, k * cfg.blk, cfg.d)
    keypos = (sel[..., None] * cfg.blk + torch.arange(cfg.blk, device=q.device)).reshape(
        B, P, cfg.hkv, k * cfg.blk)
    masked = keypos > pos[None, :, None, None]
    qg = q.view(B, P, cfg.hkv, g, cfg.d)
    if exact:
        z = torch.einsum("bphgd,bphkd->bphgk", qg.float(), Ks.float())
    else:
        z = torch.einsum("bphgd,bphkd->bphgk", qg, Ks).float()
    z = z / math.sqrt(cfg.d)
    z.masked_fill_(masked[:, :, :, None, :], float("-inf"))
    p = torch.softmax(z, -1)
    if exact:
        o = torch.einsum("bphgk,bphkd->bphgd", p, Vs.float())
    else:
        o = torch.einsum("bphgk,bphkd->bphgd", p.to(BF), Vs)
    return o.reshape(B, P, cfg.hq, cfg.d).to(BF)


def attention_block(x, W, K, V, IK, c0, cfg, exact=False, fix=None, stored=None):
    """x + o_proj(attention(input_layernorm(x))); writes the new keys.
    `fix` (check mode): msac's block choices for near-tie rows. `stored`
    (check mode): stored(cache, rows), the values cache "K", "V" or "IK"
    keeps of new rows (FP8 / NVFP4 caches: their quantization), and of
    "IQ" the index queries as the indexer multiplies them (rounded to E4M3
    with an FP8 or NVFP4 index-key cache: the Q8KV8 / Q8KV4 contract)."""
    keep = stored or (lambda name, rows: rows)
    B, P, H = x.shape
    pos = c0 + torch.arange(P, device=x.device)
    h = gemma_norm(x, W["input_layernorm"], cfg.eps)
    q = F.linear(h, W["q_proj"]).view(B, P, cfg.hq, cfg.d)
    k = F.linear(h, W["k_proj"]).view(B, P, cfg.hkv, cfg.d)
    v = F.linear(h, W["v_proj"]).view(B, P, cfg.hkv, cfg.d)
    q = rope(gemma_norm(q, W["q_norm"], cfg.eps), pos, cfg)
    k = rope(gemma_norm(k, W["k_norm"], cfg.eps), pos, cfg)
    K[:, c0:c0 + P] = keep("K", k)
    V[:, c0:c0 + P] = keep("V", v)
    extra = {}
    if IK is not None:
        iq = F.linear(h, W["index_q_proj"]).view(B, P, cfg.hi, cfg.di)
        ik = F.linear(h, W["index_k_proj"]).view(B, P, 1, cfg.di)
        iq = rope(gemma_norm(iq, W["index_q_norm"], cfg.eps), pos, cfg)
        ik = rope(gemma_norm(ik, W["index_k_norm"], cfg.eps), pos, cfg)
        IK[:, c0:c0 + P] = keep("IK", ik)[:, :, 0]
        (vals, sel), bs = msa_select(keep("IQ", iq), IK, c0, cfg)
        if fix is not None:
            sel = adopt_blocks(sel, bs, fix)
        o = sparse_attention(q, K[:, :c0 + P], V[:, :c0 + P], sel, c0, cfg, exact)
        extra["select"] = (vals, sel, bs)
    else:
        o = dense_attention(q, K, V, c0, cfg, exact)
    return x + F.linear(o.reshape(B, P, cfg.hq * cfg.d), W["o_proj"]), extra


def routed_experts(h, ids, w, W, cfg):
    """sum_k w[t, k] * expert_{ids[t, k]}(h[t]) in FP32; the dispatch sorts
    the (token, slot) pairs by expert (data-dependent: runs eagerly)."""
    T = h.shape[0]
    flat = ids.reshape(-1)
    order = torch.argsort(flat)
    counts = torch.bincount(flat, minlength=cfg.experts).tolist()
    tok = order // ids.shape[1]
    wt = w.reshape(-1)[order].float()
    xs = h[tok]
    out = torch.zeros(T, h.shape[1], device=h.device, dtype=torch.float32)
    start = 0
    for e, c in enumerate(counts):
        if c == 0:
            continue
        seg = slice(start, start + c)
        a = swiglu(F.linear(xs[seg], W["w1"][e]), F.linear(xs[seg], W["w3"][e]), cfg)
        y = F.linear(a, W["w2"][e]) if not W.get("exact") else (a.float() @ W["w2"][e].float().T)
        out.index_add_(0, tok[seg], y.float() * wt[seg, None])
        start += c
    return out.to(BF)


def router(h, W, cfg, fix=None):
    score = torch.sigmoid(h.float() @ W["gate"].float().T)
    biased = score + W["e_score_correction_bias"].float()
    top = biased.topk(cfg.topk_e + 1, -1)
    ids = top.indices[:, :cfg.topk_e]
    if fix is not None:  # near ties between the 4th and 5th expert: msac's
        kth = top.values[:, cfg.topk_e - 1]
        tie = (kth - top.values[:, cfg.topk_e]) <= 1e-3
        mine = fix["experts"].long()
        ok = (biased.gather(1, mine) >= (kth - 1e-3)[:, None]).all(-1)
        fix.setdefault("stats", {}).setdefault("experts", [0, 0])[1] += int((tie & ~ok).sum())
        ids = adopt(tie, mine, ids, fix, "experts")
    w = score.gather(1, ids)
    return ids, w / w.sum(-1, keepdim=True) * cfg.rsf, top.values


def ffn_dense(x, W, cfg):
    h = gemma_norm(x, W["post_attention_layernorm"], cfg.eps)
    a = swiglu(F.linear(h, W["gate_proj"]), F.linear(h, W["up_proj"]), cfg)
    return x + F.linear(a, W["down_proj"])


def ffn_moe_parts(x, W, cfg, fix=None):
    """The compilable parts of the MoE block: norm, router, shared expert."""
    h = gemma_norm(x, W["post_attention_layernorm"], cfg.eps)
    ids, w, vals = router(h.reshape(-1, h.shape[-1]), W, cfg, fix)
    sh = F.linear(swiglu(F.linear(h, W["shared_gate_proj"]), F.linear(h, W["shared_up_proj"]), cfg),
                  W["shared_down_proj"])
    return h, ids, w, sh, vals


def ffn_moe(x, W, cfg, parts=ffn_moe_parts, fix=None):
    h, ids, w, sh, vals = parts(x, W, cfg) if fix is None else parts(x, W, cfg, fix)
    routed = routed_experts(h.reshape(-1, h.shape[-1]), ids, w, W, cfg).view_as(x)
    return x + (routed + sh), (ids, vals)


# ---------------------------------------------------------------------------
# check: msac's layer outputs against these layers
# ---------------------------------------------------------------------------

SUFFIX = {  # weight name suffix -> key in W
    "input_layernorm.weight": "input_layernorm",
    "post_attention_layernorm.weight": "post_attention_layernorm",
    "self_attn.q_proj.weight": "q_proj", "self_attn.k_proj.weight": "k_proj",
    "self_attn.v_proj.weight": "v_proj", "self_attn.o_proj.weight": "o_proj",
    "self_attn.q_norm.weight": "q_norm", "self_attn.k_norm.weight": "k_norm",
    "self_attn.index_q_proj.weight": "index_q_proj",
    "self_attn.index_k_proj.weight": "index_k_proj",
    "self_attn.index_q_norm.weight": "index_q_norm",
    "self_attn.index_k_norm.weight": "index_k_norm",
    "mlp.gate_proj.weight": "gate_proj", "mlp.up_proj.weight": "up_proj",
    "mlp.down_proj.weight": "down_proj",
    "block_sparse_moe.gate.weight": "gate",
    "block_sparse_moe.e_score_correction_bias": "e_score_correction_bias",
    "block_sparse_moe.experts.{}.w1.weight": "w1",
    "block_sparse_moe.experts.{}.w3.weight": "w3",
    "block_sparse_moe.experts.{}.w2.weight": "w2",
    "block_sparse_moe.shared_experts.gate_proj.weight": "shared_gate_proj",
    "block_sparse_moe.shared_experts.up_proj.weight": "shared_up_proj",
    "block_sparse_moe.shared_experts.down_proj.weight": "shared_down_proj",
}


def layer_of(name):
    parts = name.split(".")
    if "layers" in parts:
        i = parts.index("layers")
        return int(parts[i + 1]), ".".join(parts[i + 2:])
    return None, name


def paged_to_contiguous(cache, table, B, C):
    """[pages, H, page, D] paged cache -> [B, C, H, D] (sequence s = row s of
    the block table)."""
    page = cache.shape[2]
    pos = torch.arange(C, device=DEV)
    phys = table[:B, pos // page].long()                    # [B, C]
    return cache[phys, :, pos % page, :]                     # [B, C, H, D]


# The largest error of a new cache row relative to the largest value, and
# (FP8 / NVFP4) the share of new values that may differ from PyTorch's
# quantization of its own keys: a bf16 ulp (1.6e-2); one E4M3 step at the
# top binade (1/8); one E2M1 step (2 x scale, scale ~ amax / 6) with the
# scale's rounding (3/8). Values differ only where PyTorch's and msac's
# bf16 keys straddle a rounding boundary.
KEY_BOUND = {"bf16": 1.6e-2, "f8E4M3FN": 0.125, "nvfp4": 0.375}
KEY_DIFFER = 1e-2


def stored_like(name, rows, dt):
    """attention_block's `stored` in check mode: new cache rows as the
    cache `name` keeps them (dt: cache name -> dtype of the dump), and the
    index queries ("IQ") rounded to E4M3 when the index-key cache is FP8
    or NVFP4, as msa.index_score multiplies them."""
    from m3_ops_check import quantize_like_cache, to_e4m3
    if name == "IQ":
        return rows if dt.get("IK", "bf16") == "bf16" else to_e4m3(rows)
    return quantize_like_cache(rows, dt[name])


def check(args):
    from m3_ops_check import Step
    cfg = Cfg(args.config)
    s = Step(args.dump)
    meta = s.meta
    T, B = meta["tokens"], meta["batch"]
    launches = meta["launches"]
    layers = {}
    final_in = None
    for l in launches:
        names = [meta["weights"][str(b)]["name"] for b in l["buffers"] if str(b) in meta["weights"]]
        for n in names:
            L, suf = layer_of(n)
            if L is None:
                if suf.endswith("model.norm.weight"):
                    final_in = l["buffers"][0]
                continue
            d = layers.setdefault(L, {"W": {}})
            key = SUFFIX.get(suf)
            if key:
                d["W"][key] = [b for b in l["buffers"] if str(b) in meta["weights"] and
                               meta["weights"][str(b)]["name"] == n][0]
            if key == "input_layernorm":
                d["input"] = l["buffers"][0]
        cur = max(layers) if layers else None
        if cur is None:
            continue
        d = layers[cur]
        if l["op"] in ("msa.dense_attention", "msa.sparse_attention") and "K" not in d:
            d["K"], d["V"], d["table"], d["seqs"], d["pos"] = l["buffers"][1:6]
            d["sparse"] = l["op"] == "msa.sparse_attention"
        if l["op"] == "msa.index_score":
            d["IK"] = l["buffers"][1]
        if l["op"] == "msa.block_topk":
            d["blocks"] = l["buffers"][2]
        if l["op"] == "msa.moe_router" and "experts" not in d:
            # input, gate, [bias], weights, ids, [GPU workspace]
            o = 3 if str(l["buffers"][2]) in meta["weights"] else 2
            d["experts"] = l["buffers"][o + 1]
    order = sorted(layers)
    for i, L in enumerate(order):
        layers[L]["output"] = layers[order[i + 1]]["input"] if i + 1 < len(order) else final_in
    seqs = s.get(layers[order[0]]["seqs"])[:T].long()
    pos = s.get(layers[order[0]]["pos"])[:T].long()
    P = T // B
    C = int(pos.max()) + 1
    c0 = C - P
    want_seq = torch.arange(T, device=DEV) // P
    want_pos = c0 + torch.arange(T, device=DEV) % P
    if not (torch.equal(seqs, want_seq) and torch.equal(pos, want_pos)):
        sys.exit("check: the dump's tokens are not B sequences of P tokens ending at one context")
    ok = True
    print(f"# {B} sequences x {P} new tokens at positions {c0}..{C - 1}")
    print("| layer | kind | output max err / max | output rms err / rms | new keys max err / max "
          "| near-tie rows (msac's choice used) | |")
    print("|---|---|---|---|---|---|---|")
    for L in order:
        d = layers[L]
        W = {k: s.get(v) for k, v in d["W"].items()}
        W["exact"] = True
        table = s.get(d["table"])
        dt = {n: meta["buffers"][str(d[n])]["dtype"] for n in ("K", "V", "IK") if n in d}
        Kd = paged_to_contiguous(s.get(d["K"]), table, B, C)
        Vd = paged_to_contiguous(s.get(d["V"]), table, B, C)
        K, V = Kd.clone(), Vd.clone()
        IKd = paged_to_contiguous(s.get(d["IK"]), table, B, C)[:, :, 0] if d.get("sparse") else None
        IK = IKd.clone() if IKd is not None else None
        x = s.get(d["input"])[:T].view(B, P, -1)
        # Where PyTorch's block or expert choice is a near tie (FP32 sums in
        # another order may flip it), msac's own choice is used if it is
        # admissible (within the margin); inadmissible choices fail.
        fix = {}
        if "blocks" in d:
            fix["blocks"] = s.get(d["blocks"])[:, :T].permute(1, 0, 2).reshape(B, P, cfg.hkv, -1)
        if "experts" in d:
            fix["experts"] = s.get(d["experts"])[:T]
        with torch.no_grad():
            h, extra = attention_block(x, W, K, V, IK, c0, cfg, exact=True, fix=fix,
                                       stored=lambda n, r: stored_like(n, r, dt))
            if "w1" in W:
                out, _ = ffn_moe(h, W, cfg, fix=fix)
            else:
                out = ffn_dense(h, W, cfg)
        got = s.get(d["output"])[:T].view(B, P, -1).float()
        want = out.float()
        err = (got - want).abs()
        max_rel = (err.max() / want.abs().max()).item()
        rms_rel = (err.pow(2).mean().sqrt() / want.pow(2).mean().sqrt()).item()
        kerr, kdiff, kok = 0.0, 0.0, True
        for n, mine, theirs in (("K", K, Kd), ("V", V, Vd)) + (
                (("IK", IK, IKd),) if IK is not None else ()):
            a, b = mine[:, c0:C].float(), theirs[:, c0:C].float()
            e = ((a - b).abs().max() / b.abs().max()).item()
            kerr = max(kerr, e)
            kok &= e <= KEY_BOUND[dt[n]]
            if dt[n] != "bf16":
                kdiff = max(kdiff, (a != b).float().mean().item())
        st = fix.get("stats", {})
        bad = sum(v[1] for v in st.values())
        ties = ", ".join(f"{k} {v[0]} ({v[1]} inadmissible)" for k, v in st.items()) or "-"
        passed = (max_rel <= args.max_bound and rms_rel <= args.rms_bound and kok
                  and kdiff <= KEY_DIFFER and bad == 0)
        ok &= passed
        kind = ("MSA" if d.get("sparse") else "dense") + (" + MoE" if "w1" in W else " + MLP")
        knote = f" ({kdiff:.2%} differ)" if set(dt.values()) != {"bf16"} else ""
        print(f"| {L} | {kind} | {max_rel:.3g} | {rms_rel:.3g} | {kerr:.3g}{knote} | {ties} | "
              f"{'PASS' if passed else 'FAIL'} |")
    print(f"bounds: max {args.max_bound:g}, rms {args.rms_bound:g}, new keys 1.6e-2 "
          "(an ulp of bf16 relative to the largest; FP8 caches 0.125, NVFP4 0.375, one "
          f"step of the format, and at most {KEY_DIFFER:.0%} of the new values differing "
          "from PyTorch's quantization of its keys); near-tie rows take msac's choice "
          "when it is within the margin (1e-3), else FAIL")
    sys.exit(0 if ok else 1)


# ---------------------------------------------------------------------------
# bench
# ---------------------------------------------------------------------------

def timed(fn, reps, warm=2):
    """Median µs of `reps` CUDA-event timings after `warm` untimed calls."""
    from msa_decode import bench as median_us
    return median_us(fn, reps=reps, warm=warm)


def rand(*shape, dtype=BF):
    return torch.empty(*shape, device=DEV, dtype=dtype).uniform_(-1 / 64, 1 / 64)


def make_weights(cfg):
    H, hq, hkv, d = cfg.hidden, cfg.hq, cfg.hkv, cfg.d
    common = lambda: {"input_layernorm": rand(H), "post_attention_layernorm": rand(H),
                      "q_proj": rand(hq * d, H), "k_proj": rand(hkv * d, H),
                      "v_proj": rand(hkv * d, H), "o_proj": rand(H, hq * d),
                      "q_norm": rand(d), "k_norm": rand(d)}
    dense = common()
    dense.update(gate_proj=rand(cfg.dense_inter, H), up_proj=rand(cfg.dense_inter, H),
                 down_proj=rand(H, cfg.dense_inter))
    msa = common()
    msa.update(index_q_proj=rand(cfg.hi * cfg.di, H), index_k_proj=rand(cfg.di, H),
               index_q_norm=rand(cfg.di), index_k_norm=rand(cfg.di),
               gate=rand(cfg.experts, H, dtype=torch.float32),
               e_score_correction_bias=rand(cfg.experts, dtype=torch.float32),
               w1=rand(cfg.experts, cfg.inter, H), w3=rand(cfg.experts, cfg.inter, H),
               w2=rand(cfg.experts, H, cfg.inter),
               shared_gate_proj=rand(cfg.shared_inter, H), shared_up_proj=rand(cfg.shared_inter, H),
               shared_down_proj=rand(H, cfg.shared_inter))
    return dense, msa


def floors(cfg, B, P, C, bw, flops_rate):
    """(bytes, flops) read/done once by each layer: weights touched, caches
    read and written; matmul and attention FLOPs."""
    H, d, hq, hkv = cfg.hidden, cfg.d, cfg.hq, cfg.hkv
    T = B * P
    attn_w = (2 * hq * d * H + 2 * hkv * d * H) * 2
    kv_tok = hkv * d * 2 * 2
    res = {}
    # Dense layer.
    dense_w = attn_w + 3 * cfg.dense_inter * H * 2
    dense_bytes = dense_w + B * C * kv_tok + T * kv_tok
    ctx = B * sum(c0 + i + 1 for c0 in [C - P] for i in range(P)) if P <= 4096 else B * P * C
    dense_flops = 2 * T * dense_w / 2 + 4 * hq * d * ctx
    res["dense"] = (dense_bytes, dense_flops)
    # MSA layer: experts touched by T tokens routed uniformly at random.
    touched = cfg.experts * (1 - (1 - cfg.topk_e / cfg.experts) ** T)
    expert_w = 3 * cfg.inter * H * 2
    msa_w = (attn_w + (cfg.hi + 1) * cfg.di * H * 2 + cfg.experts * H * 4 +
             3 * cfg.shared_inter * H * 2)
    keys = min(cfg.topk_b * cfg.blk, C)
    # Selected keys and values, each block at least once: at most the whole
    # cache, at most every query's own selection.
    kv_read = min(B * C * kv_tok, T * hkv * keys * d * 2 * 2)
    msa_bytes = (msa_w + touched * expert_w + B * C * cfg.di * 2 + kv_read +
                 T * (kv_tok + cfg.di * 2))
    msa_flops = (2 * T * (msa_w / 2 + cfg.topk_e * expert_w / 2) + 2 * T * C * cfg.hi * cfg.di +
                 4 * T * hq * d * keys)
    res["msa"] = (msa_bytes, msa_flops)
    return {k: {"bytes": b, "flops": f, "floor_us": max(b / bw, f / flops_rate) * 1e6,
                "bound": "memory" if b / bw >= f / flops_rate else "compute"}
            for k, (b, f) in res.items()}


def msac_point(args, manifest, B, P, C):
    cmd = [args.msac_run, "bench-decode", args.artifact, "--device", "cuda", "--batch", str(B),
           "--context", str(C), "--dummy-weights", "--json",
           "--steps", str(args.steps if P == 1 else args.prefill_steps), "--warmup", "1"]
    if P > 1:
        cmd += ["--prefill-chunk", str(P)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-400:]}
    j = json.loads(r.stdout)
    bufs = manifest["buffers"]
    per_layer, ops, cur = {}, {}, None
    for step, l in zip(manifest["schedules"]["decode"], j["launches"]):
        assert step["kernel"] == l["kernel"]
        ws = [bufs[i]["name"] for i in step["buffers"] if bufs[i]["kind"] == "weight"]
        if ws:
            cur = layer_of(ws[0])[0]
        key = "head" if cur is None else cur
        per_layer[key] = per_layer.get(key, 0.0) + l["median_us"]
        if cur is not None:
            ops.setdefault(key, {}).setdefault(l["op"], 0.0)
            ops[key][l["op"]] += l["median_us"]
    return {"step_us": j["step_median_us"], "layers_us": per_layer, "ops": ops}


def torch_point(args, cfg, Wd, Wm, B, P, C, compiled):
    """Eager and compiled layer times over fresh caches [B, C, ...]."""
    c0 = C - P
    K = [rand(B, C, cfg.hkv, cfg.d) for _ in range(4)]
    IK = rand(B, C, cfg.di)
    x = rand(B, P, cfg.hidden) * 64
    reps = args.reps if P == 1 else args.prefill_reps
    r = {}

    def dense(attn, ffn):
        return lambda: ffn(attn(x, Wd, K[0], K[1], None, c0, cfg)[0], Wd, cfg)

    def msa(attn, parts):
        return lambda: ffn_moe(attn(x, Wm, K[2], K[3], IK, c0, cfg)[0], Wm, cfg, parts)[0]

    with torch.no_grad():
        r["dense_eager_us"] = timed(dense(attention_block, ffn_dense), reps)
        r["msa_eager_us"] = timed(msa(attention_block, ffn_moe_parts), reps)
        if compiled and compiled["spent_s"] < args.compile_budget_s:
            for kind, fn in (("dense", dense(compiled["attn"], compiled["dense"])),
                             ("msa", msa(compiled["attn"], compiled["moe_parts"]))):
                t0 = time.time()
                fn()  # compiles for this shape
                torch.cuda.synchronize()
                r[f"{kind}_compile_s"] = time.time() - t0
                compiled["spent_s"] += r[f"{kind}_compile_s"]
                r[f"{kind}_compile_us"] = timed(fn, reps)
    del K, IK, x
    torch.cuda.empty_cache()
    return r


def bench(args):
    cfg = Cfg(args.config)
    torch.backends.cuda.matmul.allow_tf32 = False
    manifest = json.load(open(os.path.join(args.artifact, "manifest.json")))
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device=DEV)
    b = torch.empty_like(a)
    bw = 2 * n / (timed(lambda: b.copy_(a), 10) * 1e-6)
    del a, b
    m = torch.empty(8192, 8192, device=DEV, dtype=BF).normal_()
    rate = 2 * 8192 ** 3 / (timed(lambda: m @ m, 10) * 1e-6)
    del m
    torch.cuda.empty_cache()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: copy {bw / 1e12:.2f} TB/s, "
          f"bf16 matmul {rate / 1e12:.0f} TFLOP/s", flush=True)
    Wd, Wm = make_weights(cfg)
    compiled = None
    if args.compile:
        # Static shapes (one compilation per point; dynamic=True hit an
        # inductor error on these functions with torch 2.x on 2026-11-29).
        torch._dynamo.config.cache_size_limit = 64
        compiled = {"attn": torch.compile(attention_block, dynamic=False),
                    "dense": torch.compile(ffn_dense, dynamic=False),
                    "moe_parts": torch.compile(ffn_moe_parts, dynamic=False), "spent_s": 0.0}
    points = [("decode", p) for p in args.decode.split(",") if p] + \
             [("prefill", p) for p in args.prefill.split(",") if p]
    rows = []
    for mode, p in points:
        B, C = (int(v) for v in p.split("x"))
        P = 1 if mode == "decode" else max(1, args.prefill_tokens // B)
        row = {"mode": mode, "batch": B, "context": C, "tokens_per_sequence": P}
        row["msac"] = msac_point(args, manifest, B, P, C)
        row["floor"] = floors(cfg, B, P, C, bw, rate)
        try:
            row["torch"] = torch_point(args, cfg, Wd, Wm, B, P, C, compiled)
        except torch.OutOfMemoryError:
            row["torch"] = {"error": "out of memory"}
            torch.cuda.empty_cache()
        rows.append(row)
        print(json.dumps(row), flush=True)
        with open(args.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "copy_bandwidth_TBps": bw / 1e12, "bf16_matmul_TFLOPs": rate / 1e12,
                       "rows": rows}, f, indent=1)
    print("\n| mode | batch | context | tokens/seq | layer | msac us | floor us | msac/floor "
          "| torch eager us | torch.compile us | eager/msac | compile/msac |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ms, t = r["msac"], r["torch"]
        for L, kind in ((0, "dense"), (1, "msa")):
            us = ms.get("layers_us", {}).get(str(L), ms.get("layers_us", {}).get(L, float("nan")))
            fl = r["floor"][kind]["floor_us"]
            e, c = t.get(f"{kind}_eager_us", float("nan")), t.get(f"{kind}_compile_us", float("nan"))
            print(f"| {r['mode']} | {r['batch']} | {r['context']} | {r['tokens_per_sequence']} | "
                  f"{'dense + MLP' if kind == 'dense' else 'MSA + MoE'} | {us:.1f} | {fl:.1f} | "
                  f"{us / fl:.2f} | {e:.1f} | {c:.1f} | {e / us:.2f} | {c / us:.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("dump")
    c.add_argument("--config", required=True)
    c.add_argument("--max-bound", type=float, default=2e-2,
                   help="worst |msac - torch| / max |torch| over kept tokens")
    c.add_argument("--rms-bound", type=float, default=1e-2)
    b = sub.add_parser("bench")
    b.add_argument("--msac-run", required=True)
    b.add_argument("--artifact", required=True)
    b.add_argument("--config", required=True)
    b.add_argument("--decode", default="1x8192,8x8192,64x8192,1x32768,8x32768,64x32768,"
                   "1x131072,8x131072,64x131072")
    b.add_argument("--prefill", default="1x8192,8x8192,64x8192,1x32768,8x32768,64x32768,"
                   "1x131072,8x131072,64x131072")
    b.add_argument("--prefill-tokens", type=int, default=4096,
                   help="new tokens per prefill step, split over the batch")
    b.add_argument("--steps", type=int, default=10)
    b.add_argument("--prefill-steps", type=int, default=3)
    b.add_argument("--reps", type=int, default=20)
    b.add_argument("--prefill-reps", type=int, default=5)
    b.add_argument("--no-compile", dest="compile", action="store_false")
    b.add_argument("--compile-budget-s", type=float, default=600,
                   help="stop compiling new points once compilation took this long")
    b.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "m3_layer.json"))
    args = ap.parse_args()
    check(args) if args.cmd == "check" else bench(args)


if __name__ == "__main__":
    main()
