#!/bin/bash
# Builds what bench/h200-checks.sh part `packed` needs into DIR (a folder
# git ignores, e.g. .devrun-packed; carry it in the device run; about
# 56 MiB): the runtime binaries; the head-128 model (test/Codegen/Inputs/
# head128-config.json) quantized with each --quantize-weights recipe, its
# block-scaled weights read in place (h128q-RECIPE-p.msa, the default
# --packed-weights) and dequantized to FP32 copies at load
# (h128q-RECIPE-d.msa, sharing the -p artifact's weights.bin); a wider
# head-128 model (32 query heads, dense MLP of 4,096: its q_proj and
# gate/up have the 4,096 features from which the linears take the tensor
# cores) with MXFP8 weights (h128w-mxfp8.msa, checkpoint h128w/); and the
# weight-stripped real-shape M3 layers (1 dense + 1 MSA/MoE layer) in bf16
# (m3.msa) and with NVFP4 routed experts / MXFP8 elsewhere, M3.1-Flash's
# layout, read in place and dequantized at load (m3q.msa, m3qd.msa), all
# unfused; and fused (the attention prologue reading the MXFP8 / FP8
# projections in place): bf16 (m3f.msa), M3.1-Flash's layout (m3qf.msa)
# and per-tensor FP8 projections (--quantize-weights fp8-tensor, m3tf.msa).
# The head-128 artifacts are fused (msac compile's default).
# Usage: bench/h200-packed-inputs.sh DIR [BUILD]   (BUILD defaults to build/)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=$1
BIN=$(cd "${2:-$ROOT/build}" && pwd)/bin
CUDA=${CUDA_HOME:-/usr/local/cuda}
UNFUSED=--fuse-attention-prologue=false
mkdir -p "$DIR"
cd "$DIR"
rm -rf h128 h128w m3 m3q h128q-*.msa h128w-*.msa m3.msa m3q.msa m3qd.msa m3f.msa m3qf.msa \
  m3tf.msa
cp "$BIN/msac-run" "$BIN/msac-host-check" .
"$BIN/msac-synth" h128 --config "$ROOT/test/Codegen/Inputs/head128-config.json" --seed 5
for r in nvfp4-experts mxfp8 fp8 fp8-tensor; do
  "$BIN/msac" compile h128 -o h128q-$r-p.msa --target host,sm_90a --cuda-toolkit "$CUDA" \
    --quantize-weights $r
  "$BIN/msac" compile h128 -o h128q-$r-d.msa --target host,sm_90a --cuda-toolkit "$CUDA" \
    --quantize-weights $r --packed-weights=false
  # The same packed bytes: point -d's manifest at -p's weights.bin.
  cmp -s h128q-$r-p.msa/weights.bin h128q-$r-d.msa/weights.bin
  python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
m["weights"]["file"] = sys.argv[2]
json.dump(m, open(sys.argv[1], "w"), indent=1)' h128q-$r-d.msa/manifest.json ../h128q-$r-p.msa/weights.bin
  rm h128q-$r-d.msa/weights.bin
done
python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))
c["text_config"].update(num_attention_heads=32, dense_intermediate_size=4096)
json.dump(c, open(sys.argv[2], "w"), indent=1)' "$ROOT/test/Codegen/Inputs/head128-config.json" h128w-config.json
"$BIN/msac-synth" h128w --config h128w-config.json --layers 2 --seed 7
rm h128w-config.json
"$BIN/msac" compile h128w -o h128w-mxfp8.msa --target sm_90a --cuda-toolkit "$CUDA" \
  --quantize-weights mxfp8
"$BIN/msac-synth" --config "$ROOT/models/minimax-m3/config.json" \
  --layers 2 --weights zero m3
"$BIN/msac-synth" --config "$ROOT/models/minimax-m3/config.json" \
  --layers 2 --weights zero --format nvfp4 m3q
"$BIN/msac" compile m3 -o m3.msa --target sm_90a --strip-weights --cuda-toolkit "$CUDA" \
  $UNFUSED
"$BIN/msac" compile m3q -o m3q.msa --target sm_90a --strip-weights --cuda-toolkit "$CUDA" \
  $UNFUSED
"$BIN/msac" compile m3q -o m3qd.msa --target sm_90a --strip-weights --cuda-toolkit "$CUDA" \
  $UNFUSED --packed-weights=false
"$BIN/msac" compile m3 -o m3f.msa --target sm_90a --strip-weights --cuda-toolkit "$CUDA"
"$BIN/msac" compile m3q -o m3qf.msa --target sm_90a --strip-weights --cuda-toolkit "$CUDA"
"$BIN/msac" compile m3 -o m3tf.msa --target sm_90a --strip-weights --cuda-toolkit "$CUDA" \
  --quantize-weights fp8-tensor
rm -rf m3 m3q
du -sh .
