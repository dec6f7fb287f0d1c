#!/bin/bash
# Two latency trials prepared in the thirty-first session (docs/perf.md),
# whose device time ran out before they were timed:
#   - the fused prologue's cluster kernels prefetching their weight rows
#     into L2 one or two loop steps ahead (--gpu-prologue-cluster-ahead=N,
#     artifacts A0 / A1 / A2; issue 6's steps of 1-16 tokens);
#   - the decode attention's score tiles in 2 or 4 independent mma chains
#     (--gpu-attention-score-chains=N; FP8 and NVFP4 caches at 128K;
#     issue 7).
#
#   bench/h200-latency-trials.sh inputs DIR [BUILD]   (here: builds DIR, ~20 MiB)
#   bash DIR/h200-latency-trials.sh run DIR OUT        (on the H200)
#
# `inputs` writes M3's 2-layer checkpoint with zero weights
# (models/minimax-m3/config.json) and compiles the artifacts without
# weights (--dummy-weights when run); `run` prints, per artifact, the
# medians of 3 runs of each CUDA-graph range (dense prologue 2:6, MSA
# prologue 17:21, RMSNorm + dense prologue 1:6) at 1, 2, 8 and 16 tokens,
# then the decode attention launches at batch 8 and 1, 128K context.
set -eu
mode=$1
DIR=$2
if [ "$mode" = inputs ]; then
  ROOT=$(cd "$(dirname "$0")/.." && pwd)
  BIN=$(cd "${3:-$ROOT/build}" && pwd)/bin
  CUDA=${CUDA_HOME:-/usr/local/cuda}
  mkdir -p "$DIR"
  cp "$BIN/msac-run" "$0" "$DIR/"
  cd "$DIR"
  rm -rf m3 ./*.msa
  "$BIN/msac-synth" m3 --config "$ROOT/models/minimax-m3/config.json" \
    --layers 2 --weights zero > /dev/null
  C="--target sm_90a --cuda-toolkit $CUDA --strip-weights"
  for a in 0 1 2; do
    "$BIN/msac" compile m3 $C --quantize-weights fp8-tensor \
      --gpu-prologue-cluster-ahead=$a -o A$a.msa > /dev/null
  done
  for c in fp8 nvfp4; do
    for n in 1 2 4; do
      "$BIN/msac" compile m3 $C --kv-cache-dtype $c --index-cache-dtype $c \
        --gpu-attention-score-chains=$n -o $c-c$n.msa > /dev/null
    done
  done
  rm -rf m3
  exit 0
fi
OUT=$3
cd "$DIR"
chmod +x msac-run
export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
R="--graph-range 2:6 --graph-range 17:21 --graph-range 1:6"
for rep in 1 2 3; do for T in 1 2 8 16; do for a in A0 A1 A2; do
  echo "== $a T=$T rep=$rep"
  timeout 30 ./msac-run bench-decode $a.msa --device cuda --dummy-weights \
    --batch $T --steps 30 --warmup 3 $R | grep -E "CUDA graph"
done; done; done > "$OUT/prologue-times.txt" 2>&1
python3 - "$OUT/prologue-times.txt" <<'PY'
import re, statistics, sys
cur = None; d = {}
for line in open(sys.argv[1]):
    m = re.match(r"== (\w+) T=(\d+) rep=(\d)", line)
    if m:
        cur = (m.group(1), int(m.group(2))); i = 0; continue
    m = re.search(r"in a CUDA graph: ([\d.]+) us", line)
    if m and cur:
        d.setdefault(cur + (i,), []).append(float(m.group(1))); i += 1
print("us: dense prologue / MSA prologue / norm + dense prologue, "
      "median of 3 runs (min-max)")
for T in (1, 2, 8, 16):
    for a in ("A0", "A1", "A2"):
        print(f"T={T} {a}: " + "  ".join(
            f"{statistics.median(d.get((a, T, i), [0])):.2f} "
            f"({min(d.get((a, T, i), [0])):.2f}-{max(d.get((a, T, i), [0])):.2f})"
            for i in range(3)))
PY
for rep in 1 2; do for B in 8 1; do for c in fp8 nvfp4; do for n in 1 2 4; do
  echo "== $c-c$n B=$B rep=$rep"
  timeout 60 ./msac-run bench-decode $c-c$n.msa --device cuda --dummy-weights \
    --batch $B --context 131072 --steps 20 --warmup 3 |
    grep -E "dense_attention|sparse_attention"
done; done; done; done | tee "$OUT/attention-times.txt"
