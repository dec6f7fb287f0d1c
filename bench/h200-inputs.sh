#!/bin/bash
# Builds what bench/h200-checks.sh needs into DIR (a folder git ignores, e.g.
# .devrun; pass it in the device run's carry list): the runtime binaries,
# the tiny bf16 and NVFP4/MXFP8 checkpoints with their host+sm_90a artifacts,
# a small model with heads of 128 channels (test/Codegen/Inputs/head128-config.json),
# and the weight-stripped real-shape M3 artifact (1 dense + 1 MSA/MoE layer),
# unfused (m3.msa) and with the fused attention prologue (m3f.msa); for the
# `caches` part, the tiny and head-128 models with FP8 and NVFP4 KV and
# index caches (tiny-fp8.msa, tiny-nvfp4.msa, h128-fp8.msa, h128-nvfp4.msa)
# and m3.msa's twins with such caches (m3-fp8.msa, m3-nvfp4.msa); for the
# `prologue-caches` part, the same with the fused prologue
# (tinyf-fp8.msa, tinyf-nvfp4.msa, h128f-fp8.msa, h128f-nvfp4.msa,
# m3f-fp8.msa, m3f-nvfp4.msa).
# conformance/: msac-gpu-conformance's bundle (FP8 / NVFP4 conversions).
# m3.msa and m3f.msa with --wgmma-wide-tiles=false (m3n.msa, m3fn.msa:
# one-warpgroup tile GEMMs, the baseline of h200-checks.sh part gemm).
# msac compile fuses the attention prologue by default: the unfused
# artifacts (every name without an `f`) pass --fuse-attention-prologue=false
# ($UNFUSED), the fused ones (tinyf-*, h128f*, m3f*) --fuse-attention-prologue
# ($FUSED, the default, spelled out so that each pair's meaning shows here).
# The small models' artifacts share their checkpoint's weights.bin (see
# the end).
# Usage: bench/h200-inputs.sh DIR [BUILD]   (BUILD defaults to build/)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=$1
BIN=$(cd "${2:-$ROOT/build}" && pwd)/bin
CUDA=${CUDA_HOME:-/usr/local/cuda}
UNFUSED=--fuse-attention-prologue=false
FUSED=--fuse-attention-prologue
mkdir -p "$DIR"
cd "$DIR"
rm -rf tiny nv m3 h128 tiny.msa nv.msa m3.msa m3f.msa h128.msa h128f.msa h128s.msa \
  tiny-fp8.msa tiny-nvfp4.msa h128-fp8.msa h128-nvfp4.msa m3-fp8.msa m3-nvfp4.msa m3n.msa m3fn.msa \
  tinyf-fp8.msa tinyf-nvfp4.msa h128f-fp8.msa h128f-nvfp4.msa m3f-fp8.msa m3f-nvfp4.msa
cp "$BIN/msac-run" "$BIN/msac-host-check" .
"$BIN/msac-synth" tiny
"$BIN/msac-synth" nv --format nvfp4
"$BIN/msac-synth" --config "$ROOT/models/minimax-m3/config.json" \
  --layers 2 --weights zero m3
"$BIN/msac-synth" h128 --config "$ROOT/test/Codegen/Inputs/head128-config.json" --seed 5
for m in tiny nv h128; do
  "$BIN/msac" compile "$m" -o "$m.msa" --target host,sm_90a --cuda-toolkit "$CUDA" \
    $UNFUSED
done
# The small head-128 model: fused, and weight-stripped for m3_ops_check.
"$BIN/msac" compile h128 -o h128f.msa --target host,sm_90a --cuda-toolkit "$CUDA" \
  $FUSED
"$BIN/msac" compile h128 -o h128s.msa --target sm_90a --strip-weights --cuda-toolkit "$CUDA" \
  $UNFUSED
"$BIN/msac" compile m3 -o m3.msa --target sm_90a --strip-weights --cuda-toolkit "$CUDA" \
  $UNFUSED
"$BIN/msac" compile m3 -o m3f.msa --target sm_90a --strip-weights --cuda-toolkit "$CUDA" \
  $FUSED
# FP8 and NVFP4 caches (KV and index alike).
for c in fp8 nvfp4; do
  for m in tiny h128; do
    "$BIN/msac" compile $m -o $m-$c.msa --target host,sm_90a --cuda-toolkit "$CUDA" \
      --kv-cache-dtype $c --index-cache-dtype $c $UNFUSED
  done
  "$BIN/msac" compile m3 -o m3-$c.msa --target sm_90a --strip-weights --cuda-toolkit "$CUDA" \
    --kv-cache-dtype $c --index-cache-dtype $c $UNFUSED
  # The fused prologue writing these caches.
  for m in tiny h128; do
    "$BIN/msac" compile $m -o ${m}f-$c.msa --target host,sm_90a --cuda-toolkit "$CUDA" \
      --kv-cache-dtype $c --index-cache-dtype $c $FUSED
  done
  "$BIN/msac" compile m3 -o m3f-$c.msa --target sm_90a --strip-weights --cuda-toolkit "$CUDA" \
    --kv-cache-dtype $c --index-cache-dtype $c $FUSED
done
"$BIN/msac" compile m3 -o m3n.msa --target sm_90a --strip-weights --cuda-toolkit "$CUDA" \
  $UNFUSED --wgmma-wide-tiles=false
"$BIN/msac" compile m3 -o m3fn.msa --target sm_90a --strip-weights --cuda-toolkit "$CUDA" \
  $FUSED --wgmma-wide-tiles=false
# The FP8 / NVFP4 conversion kernels of the unit tests for the GPU
# (h200-checks.sh part conformance).
rm -rf conformance
"$BIN/msac-gpu-conformance" -o conformance --cuda-toolkit "$CUDA"
# Every artifact of one small checkpoint has the same weights.bin (h128:
# 5.3 MiB): keep tiny.msa's and h128.msa's and point the twins' manifests
# at them (the runtime opens ARTIFACT/<weights.file>), which keeps the
# folder under the 64 MiB carry limit. Only byte-identical files are shared.
share_weights() {
  local owner=$1 a
  shift
  for a in "$@"; do
    cmp -s "$owner/weights.bin" "$a/weights.bin" || continue
    python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
m["weights"]["file"] = sys.argv[2]
json.dump(m, open(sys.argv[1], "w"), indent=1)' "$a/manifest.json" "../$owner/weights.bin"
    rm "$a/weights.bin"
  done
}
share_weights tiny.msa tiny-fp8.msa tiny-nvfp4.msa tinyf-fp8.msa tinyf-nvfp4.msa
share_weights h128.msa h128f.msa h128-fp8.msa h128-nvfp4.msa h128f-fp8.msa h128f-nvfp4.msa
rm -rf m3
du -sh .
