#!/bin/bash
# Trials prepared while no H200 was lent (docs/perf.md, thirty-first and
# thirty-second sessions), to check and time in few device calls:
#   - the fused prologue's cluster kernels prefetching their weight rows
#     into L2 one or two loop steps ahead (--gpu-prologue-cluster-ahead=N,
#     artifacts A0 / A1 / A2; issue 6's steps of 1-16 tokens);
#   - the decode attention and the indexer with fewer instructions per
#     16-key group ("lean": --gpu-attention-exp2 --gpu-attention-p-terms=1
#     --gpu-attention-ring-unroll --gpu-attention-v-prmt
#     --gpu-attention-nvfp4-e4m3 --gpu-index-f16-mma; "lean2": the same
#     with P in two f16 terms) and
#     with 2 score mma chains (--gpu-attention-score-chains=2), FP8 and
#     NVFP4 caches at 128K (issue 7).
#
#   bench/h200-latency-trials.sh inputs DIR [BUILD]   (here: builds DIR)
#   bash DIR/h200-latency-trials.sh run DIR OUT [PARTS] (on the H200)
#
# PARTS (comma-separated, default checks,attention,prologue):
#   checks     the lean artifacts against the references on the GPU: the
#              tiny model (msac-host-check --quick, FP8 and NVFP4 caches)
#              and every launch of M3's real-shape decode (batch 8, 8K
#              context) and prefill chunk (2 x 256) against PyTorch
#              (bench/m3_ops_check.py), each format
#   attention  per-launch medians of dense / sparse attention and
#              index_score at 128K, batch 8 and 1, every variant, 2 runs
#   prologue   the CUDA-graph ranges of the prologue (dense 2:6, MSA
#              17:21, RMSNorm + dense 1:6) at 1, 2, 8 and 16 tokens for
#              A0 / A1 / A2, medians of 3 runs
set -eu
mode=$1
DIR=$2
LEAN="--gpu-attention-exp2 --gpu-attention-p-terms=1 --gpu-attention-ring-unroll --gpu-attention-v-prmt --gpu-attention-nvfp4-e4m3 --gpu-index-f16-mma"
LEAN2="--gpu-attention-exp2 --gpu-attention-ring-unroll --gpu-attention-v-prmt --gpu-attention-nvfp4-e4m3 --gpu-index-f16-mma"
if [ "$mode" = inputs ]; then
  ROOT=$(cd "$(dirname "$0")/.." && pwd)
  BIN=$(cd "${3:-$ROOT/build}" && pwd)/bin
  CUDA=${CUDA_HOME:-/usr/local/cuda}
  mkdir -p "$DIR"
  cp "$BIN/msac-run" "$BIN/msac-host-check" "$0" "$ROOT/bench/m3_ops_check.py" \
    "$ROOT/bench/graph_ranges_summary.py" \
    "$ROOT/models/minimax-m3/config.json" "$DIR/"
  cd "$DIR"
  rm -rf m3 tiny ./*.msa
  "$BIN/msac-synth" m3 --config "$ROOT/models/minimax-m3/config.json" \
    --layers 2 --weights zero > /dev/null
  "$BIN/msac-synth" tiny > /dev/null
  C="--target sm_90a --cuda-toolkit $CUDA"
  for c in fp8 nvfp4; do
    "$BIN/msac" compile tiny $C --kv-cache-dtype $c --index-cache-dtype $c \
      $LEAN -o tiny-$c-lean.msa > /dev/null
  done
  C="$C --strip-weights"
  for a in 0 1 2; do
    "$BIN/msac" compile m3 $C --quantize-weights fp8-tensor \
      --gpu-prologue-cluster-ahead=$a -o A$a.msa > /dev/null &
    [ $a = 1 ] && wait
  done
  wait
  for c in fp8 nvfp4; do
    K="--kv-cache-dtype $c --index-cache-dtype $c"
    "$BIN/msac" compile m3 $C $K -o $c-base.msa > /dev/null &
    "$BIN/msac" compile m3 $C $K $LEAN -o $c-lean.msa > /dev/null
    wait
    "$BIN/msac" compile m3 $C $K $LEAN2 -o $c-lean2.msa > /dev/null &
    "$BIN/msac" compile m3 $C $K $LEAN --gpu-attention-score-chains=2 \
      -o $c-lean-c2.msa > /dev/null
    wait
  done
  rm -rf m3
  exit 0
fi
OUT=$(mkdir -p "$3" && cd "$3" && pwd)
PARTS=,${4:-checks,attention,prologue},
cd "$DIR"
chmod +x msac-run msac-host-check
export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
status=0
if [[ $PARTS == *,checks,* ]]; then
  for c in fp8 nvfp4; do
    timeout 200 ./msac-host-check tiny-$c-lean.msa tiny --quick --device cuda \
      > "$OUT/check-tiny-$c-lean.txt" 2>&1 || status=1
    echo "tiny-$c-lean: $(grep -E "FAIL|passed" "$OUT/check-tiny-$c-lean.txt" | tail -3)"
    for point in "decode-8x8192:8 8192 0" "prefill-2x256-8192:2 8192 256"; do
      read -r B ctx chunk <<< "${point#*:}"
      extra=""
      [ "$chunk" -gt 0 ] && extra="--prefill-chunk $chunk"
      d=$(mktemp -d)
      timeout 120 ./msac-run bench-decode $c-lean.msa --device cuda --dummy-weights \
        --batch $B --context $ctx $extra --steps 1 --warmup 1 --dump "$d" > /dev/null
      timeout 200 python3 m3_ops_check.py "$d" --config config.json \
        > "$OUT/ops-$c-lean-${point%%:*}.txt" 2>&1 || status=1
      echo "$c-lean ${point%%:*}: $(grep -c '| PASS' "$OUT/ops-$c-lean-${point%%:*}.txt") PASS," \
        "$(grep -c '| FAIL' "$OUT/ops-$c-lean-${point%%:*}.txt") FAIL"
      grep -E '\| FAIL|attention|index_score' "$OUT/ops-$c-lean-${point%%:*}.txt" || true
      rm -rf "$d"
    done
  done
fi
if [[ $PARTS == *,attention,* ]]; then
  for rep in 1 2; do for B in 8 1; do for c in fp8 nvfp4; do
    for v in base lean lean2 lean-c2; do
      echo "== $c-$v B=$B rep=$rep"
      timeout 60 ./msac-run bench-decode $c-$v.msa --device cuda --dummy-weights \
        --batch $B --context 131072 --steps 20 --warmup 3 |
        grep -E "dense_attention|sparse_attention|index_score"
    done
  done; done; done | tee "$OUT/attention-times.txt"
fi
if [[ $PARTS == *,prologue,* ]]; then
  R="--graph-range 2:6 --graph-range 17:21 --graph-range 1:6"
  for rep in 1 2 3; do for T in 1 2 8 16; do for a in A0 A1 A2; do
    echo "== $a T=$T rep=$rep"
    timeout 30 ./msac-run bench-decode $a.msa --device cuda --dummy-weights \
      --batch $T --steps 30 --warmup 3 $R | grep -E "CUDA graph"
  done; done; done > "$OUT/prologue-times.txt" 2>&1
  python3 graph_ranges_summary.py "$OUT/prologue-times.txt" \
    --title "us: dense prologue / MSA prologue / norm + dense prologue, median of 3 runs (min-max)"
fi
exit $status
