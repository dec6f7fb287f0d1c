#!/usr/bin/env python3
"""Checks the weights an artifact stores in another order (manifest
`buffers[i].order`) against the same weights of an artifact that stores
them as the checkpoint holds them (row-major).

Usage: check-weight-order.py ARTIFACT ROW_MAJOR_ARTIFACT

For every weight buffer of ARTIFACT with `"order": {"name": "chunk-major",
"tile": [128, 128], "ranks": N}` it takes the bytes of the weight of the
same name in ROW_MAJOR_ARTIFACT (which must have no order) and rebuilds
the chunk-major order from its definition (docs/architecture.md, "Weight
orders"): the [rows, cols] byte matrix cut into 128 x 128-byte tiles, each
row-major, tile (h, j) at index (j mod C) * H * N + h * N + j // C with
C = cols / (128 N), H = rows / 128; its head-major variant ("head-major")
at h * C * N + (j mod C) * N + j // C. Prints one line per ordered weight
and the count; exits 1 on any difference.
"""
import json
import sys


def buffers(artifact):
    """name -> (manifest entry, weights.bin bytes) of the weight buffers."""
    manifest = json.load(open(artifact + "/manifest.json"))
    weights = open(artifact + "/weights.bin", "rb").read()
    return {b["name"]: (b, weights[b["offset"]:b["offset"] + b["bytes"]])
            for b in manifest["buffers"] if b["kind"] == "weight"}


def chunk_major(data, rows, cols, ranks, head_major=False, tile=128):
    heads, chunks = rows // tile, cols // tile // ranks
    out = bytearray(len(data))
    for h in range(heads):
        for j in range(cols // tile):
            if head_major:
                index = h * chunks * ranks + (j % chunks) * ranks + j // chunks
            else:
                index = (j % chunks) * heads * ranks + h * ranks + j // chunks
            base = index * tile * tile
            for r in range(tile):
                src = (h * tile + r) * cols + j * tile
                out[base + r * tile:base + (r + 1) * tile] = data[src:src + tile]
    return bytes(out)


def main():
    ordered, plain = buffers(sys.argv[1]), buffers(sys.argv[2])
    status, count = 0, 0
    for name, (b, stored) in ordered.items():
        order = b.get("order")
        if order is None:
            continue
        count += 1
        ref, data = plain[name]
        if ("order" in ref or
                order.get("name") not in ("chunk-major", "head-major") or
                order.get("tile") != [128, 128] or len(b["shape"]) != 2):
            print("%s: cannot check order %s" % (name, order))
            status = 1
            continue
        rows, cols = b["shape"]
        same = stored == chunk_major(data, rows, cols, order["ranks"],
                                     order["name"] == "head-major")
        print("%s [%d, %d] ranks %d: %s" % (name, rows, cols, order["ranks"],
                                            order["name"] if same else "DIFFERS"))
        status |= 0 if same else 1
    print("%d weights in another order" % count)
    return status


if __name__ == "__main__":
    sys.exit(main())
