#!/bin/bash
# The checks and benchmarks of docs/perf.md's H200 section, in one call on
# the GPU machine. DIR holds what was built and compiled on the development
# machine:
#   msac-run, msac-host-check          (build/bin)
#   tiny/, tiny.msa                    (msac-synth tiny; msac compile --target host,sm_90a)
#   nv/, nv.msa                        (msac-synth nv --format nvfp4; the same compile)
#   m3.msa                             (msac-synth m3 --config models/minimax-m3/config.json
#                                       --layers 2 --weights zero;
#                                       msac compile m3 --target sm_90a --strip-weights)
# Usage: bench/h200-checks.sh DIR [OUT]   (results under OUT, default $OUT or .)
# This is the script of the 2026-11-29 runs (then kept outside the tree),
# with bench/m3_ops_check.py added after them.
set -u
BENCH=$(cd "$(dirname "$0")" && pwd)
DIR=$(cd "$1" && pwd)
RESULTS=${2:-${OUT:-.}}
mkdir -p "$RESULTS"
cd "$DIR"
export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0  # msac-host-check has ASan
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
./msac-host-check tiny.msa tiny --quick --device cuda | tee "$RESULTS/tiny-check.txt" | tail -3
./msac-host-check nv.msa nv --quick --device cuda | tee "$RESULTS/nv-check.txt" | tail -3
./msac-run generate tiny.msa -p "The index branch" -n 24 --ignore-eos --device cuda | tail -2
for cfg in "1 128 64" "4 512 32"; do
  set -- $cfg
  ./msac-run bench tiny.msa --device cuda --batch $1 --input-len $2 --output-len $3 | tail -1
done
./msac-run bench-decode m3.msa --device cuda --batch 8 --context 32768 --dummy-weights --steps 10 | tee "$RESULTS/step-graph.txt" | tail -18
./msac-run bench-decode m3.msa --device cuda --batch 8 --context 32768 --dummy-weights --steps 10 --no-cuda-graphs | head -1
python3 "$BENCH/msa_decode.py" --msac-run ./msac-run --artifact m3.msa \
  --points 8x131072,1x8192,8x8192,64x8192,1x32768,8x32768,64x32768,1x131072,64x131072 \
  --check 8x8192,8x131072 --autotune-points 8x131072 --steps 10 \
  --out "$RESULTS/msa_decode.json" | grep -v '^{'
DUMP=$(mktemp -d)
./msac-run bench-decode m3.msa --device cuda --dummy-weights --batch 8 --context 8192 \
  --steps 1 --warmup 1 --dump "$DUMP" | head -1
python3 "$BENCH/m3_ops_check.py" "$DUMP" --config "$BENCH/../models/minimax-m3/config.json" \
  | tee "$RESULTS/ops-check.txt"
rm -rf "$DUMP"
