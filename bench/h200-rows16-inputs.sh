#!/bin/bash
# Builds what bench/h200-checks.sh part `rows16` needs into DIR (a folder
# git ignores; carry it in the device run; about 60 MiB): the runtime
# binaries, msac-synth (the checkpoints are written again on the device
# from the same seeds, the reference needs them, and their checksums in
# sums.txt), and per-tensor FP8 artifacts (--quantize-weights fp8-tensor,
# the fused prologue reading its projection in place) whose GPU steps of
# 9-16 tokens take ringRowsF16's 16-row paths:
#   m6144.msa   the head-128 model (test/Codegen/Inputs/head128-config.json)
#               widened to M3's 6,144 channels (2 layers, 4 experts): 16
#               rows of x do not fit the 96 KB scratch, so two passes over
#               the channel halves, as in M3's prologue
#   m6144nh.msa the same with --gpu-f16-ring-halves=false (the bf16-decode
#               tiles at 9-16 tokens; shares m6144.msa's weights.bin)
#   h1024.msa   the head-128 model with 1,024 channels (3 layers): one pass
#               of 16 rows
# Weights travel gzipped (the part unpacks them).
# Usage: bench/h200-rows16-inputs.sh DIR [BUILD]   (BUILD defaults to build/)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=$1
BIN=$(cd "${2:-$ROOT/build}" && pwd)/bin
CUDA=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$DIR"
cd "$DIR"
rm -rf m6144 h1024 m6144.msa m6144nh.msa h1024.msa
cp "$BIN/msac-run" "$BIN/msac-host-check" "$BIN/msac-synth" .
python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))
c["text_config"]["hidden_size"] = 6144
c["text_config"]["num_local_experts"] = 4
json.dump(c, open("m6144-config.json", "w"), indent=1)
c["text_config"]["hidden_size"] = 1024
c["text_config"]["num_local_experts"] = 8
json.dump(c, open("h1024-config.json", "w"), indent=1)' "$ROOT/test/Codegen/Inputs/head128-config.json"
"$BIN/msac-synth" m6144 --config m6144-config.json --layers 2 --seed 3 > /dev/null
"$BIN/msac-synth" h1024 --config h1024-config.json --seed 3 > /dev/null
Q="--target sm_90a --cuda-toolkit $CUDA --quantize-weights fp8-tensor"
"$BIN/msac" compile m6144 -o m6144.msa $Q
"$BIN/msac" compile m6144 -o m6144nh.msa $Q --gpu-f16-ring-halves=false
"$BIN/msac" compile h1024 -o h1024.msa $Q
# The same weight bytes: point m6144nh's manifest at m6144's weights.bin.
cmp m6144.msa/weights.bin m6144nh.msa/weights.bin
python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
m["weights"]["file"] = "../m6144.msa/weights.bin"
json.dump(m, open(sys.argv[1], "w"), indent=1)' m6144nh.msa/manifest.json
rm m6144nh.msa/weights.bin
gzip -1 m6144.msa/weights.bin h1024.msa/weights.bin
sha256sum m6144/model.safetensors h1024/model.safetensors > sums.txt
rm -rf m6144 h1024
du -sh .
