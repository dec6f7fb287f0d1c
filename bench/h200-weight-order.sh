#!/bin/bash
# The fused prologue's weight orders (docs/perf.md, forty-eighth session),
# prepared for one device call: checks and times row-major (main's
# default until the fifty-third session, ET2:
# --gpu-prologue-weight-order=row-major), chunk-major (CM:
# =chunk-major) and its head-major variant (HM: =head-major with
# --gpu-prologue-cluster-mma-min-tokens=2; HM1: =head-major, whose default
# gives part 3 the one-token steps) on M3's two layers with per-tensor FP8
# weights.
#   - msac-host-check --quick --device cuda of the 2,048-channel FP8 model
#     with HM and HM1 (row-major is checked
#     in every session; prefill 300, chunked prefill of 500 and of 1-16,
#     decode, a batch: parts 0-3 of the prologue, the cluster kernels and
#     the tile GEMM included);
#   - read_floor (the stream of the dense / MSA layer's weight bytes);
#   - bench/weight_layout.cu (the orders streamed by the kernels' own load
#     patterns, head-major included);
#   - the CUDA-graph ranges of the prologue (dense 2:6, MSA 17:21, RMSNorm
#     + dense 1:6, RMSNorm + MSA 16:21) at 1, 2, 4, 8, 16, 32 and 128
#     tokens, interleaved, medians of REPS runs (default 2); TOKENS and
#     VARIANTS (names of DIR's NAME.msa artifacts) override the lists,
#     CHECKS the checked orders (empty: none).
#
#   bench/h200-weight-order.sh inputs DIR [BUILD]   (here: builds DIR,
#                                                   about 45 MB, ~10 min;
#                                                   TUNING=1: + 5 MB, 5 min)
#   bash DIR/h200-weight-order.sh run DIR OUT       (on the GPU machine)
# The fifty-first session's call (bench/results/2026-12-07-h200-s51-head-major.txt):
#   CHECKS=HM1 VARIANTS="ET2 HM1" TOKENS="1 2 16" run DIR OUT/orders
#   CHECKS= REPS=1 VARIANTS="ET2 HM1" TOKENS="17 32 63" run DIR OUT/rows
#   CHECKS= REPS=1 VARIANTS="ET2 HM HM1" TOKENS="4 8 128" run DIR OUT/more
set -eu
mode=${1:-}
DIR=${2:?usage: $0 inputs DIR [BUILD] | run DIR OUT}
if [ "$mode" = inputs ]; then
  ROOT=$(cd "$(dirname "$0")/.." && pwd)
  BIN=$(cd "${3:-$ROOT/build}" && pwd)/bin
  CUDA=${CUDA_HOME:-/usr/local/cuda}
  mkdir -p "$DIR/mb"
  cp "$BIN/msac-run" "$BIN/msac-host-check" "$BIN/msac-synth" "$0" \
    "$ROOT/bench/graph_ranges_summary.py" "$DIR/"
  for p in read_floor weight_layout; do
    "$CUDA/bin/nvcc" -O3 -arch=sm_90a -o "$DIR/mb/$p" "$ROOT/bench/$p.cu"
  done
  cd "$DIR"
  rm -rf m3 h2048 ./*.msa
  sed -e 's/"hidden_size": 256/"hidden_size": 2048/' \
    "$ROOT/test/Codegen/Inputs/head128-config.json" > h2048-config.json
  "$BIN/msac-synth" m3 --config "$ROOT/models/minimax-m3/config.json" \
    --layers 2 --weights zero > /dev/null
  "$BIN/msac-synth" h2048 --config h2048-config.json --layers 2 --seed 3 \
    > /dev/null
  C="--target sm_90a --cuda-toolkit $CUDA --quantize-weights fp8-tensor"
  O=--gpu-prologue-weight-order
  for v in ET2:$O=row-major CM:$O=chunk-major \
      HM:"$O=head-major --gpu-prologue-cluster-mma-min-tokens=2" \
      HM1:$O=head-major; do
    name=${v%%:*} flags=${v#*:}
    # shellcheck disable=SC2086
    "$BIN/msac" compile m3 $C --strip-weights $flags -o $name.msa > /dev/null
    # (The chunk-major order passed the GPU check in the forty-eighth
    # session; only the head-major artifacts are checked.)
    [ "$name" = ET2 ] || [ "$name" = CM ] && continue
    # shellcheck disable=SC2086
    "$BIN/msac" compile h2048 $C $flags -o h2048-$name.msa > /dev/null
    gzip -1 h2048-$name.msa/weights.bin
  done
  # TUNING=1: part 3's tuning variants of the forty-ninth session's call
  # (early tiles 1, interleaved slices with early tiles 1, 6 CTAs per SM).
  E=--gpu-prologue-cluster-mma-early-tiles=1
  for v in ${TUNING:+ET1:"$E" IL1:"$E --gpu-prologue-cluster-mma-interleave" \
      C6:--gpu-prologue-cluster-mma-ctas=6}; do
    # shellcheck disable=SC2086
    "$BIN/msac" compile m3 $C --strip-weights ${v#*:} -o ${v%%:*}.msa > /dev/null
  done
  sha256sum h2048/model.safetensors > sums.txt
  rm -rf m3 h2048
  du -sh .
  exit 0
fi
[ "$mode" = run ] || { echo "usage: $0 inputs DIR [BUILD] | run DIR OUT" >&2; exit 2; }
OUT=$(mkdir -p "$3" && cd "$3" && pwd)
cd "$DIR"
chmod +x msac-run msac-host-check msac-synth mb/*
export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
status=0
./msac-synth h2048 --config h2048-config.json --layers 2 --seed 3 --force > /dev/null
sha256sum -c --quiet sums.txt || { echo "checks: checkpoint differs"; status=1; }
for name in ${CHECKS-HM HM1}; do
  [ ! -f h2048-$name.msa/weights.bin.gz ] || gunzip h2048-$name.msa/weights.bin.gz
  timeout 300 ./msac-host-check h2048-$name.msa h2048 --quick --device cuda \
    --quantize-weights fp8-tensor > "$OUT/check-$name.txt" 2>&1 || status=1
  echo "check $name: $(tail -1 "$OUT/check-$name.txt")"
done
echo "== read_floor"; ./mb/read_floor 2>&1 | tail -3
echo "== weight_layout"; timeout 120 ./mb/weight_layout 2>&1 || status=1
for rep in $(seq 1 "${REPS:-2}"); do
  for T in ${TOKENS:-1 2 4 8 16 32 128}; do
    # shellcheck disable=SC2086
    for V in ${VARIANTS:-ET2 CM HM HM1}; do
      [ -d "$V.msa" ] || continue
      echo "== $V T=$T rep=$rep"
      timeout 60 ./msac-run bench-decode $V.msa --device cuda --dummy-weights \
        --batch $T --steps 30 --warmup 3 --graph-range 2:6 --graph-range 17:21 \
        --graph-range 1:6 --graph-range 16:21 2>&1 | grep "CUDA graph" || status=1
    done
  done
done > "$OUT/prologue.log"
python3 graph_ranges_summary.py "$OUT/prologue.log"
exit $status
