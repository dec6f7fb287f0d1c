#!/bin/bash
# The fused prologue's tensor-core cluster kernel in passes of 16 tokens
# at 17-64 tokens (part 4; docs/perf.md, fifty-second session), prepared
# for one device call: checks and times, on M3's two layers with
# per-tensor FP8 weights,
#   NEW    main's defaults (part 3 at 1-16 tokens, part 4 at 17-64, the
#          tile GEMM from 65; head-major weights since the fifty-third
#          session, whose call 1 built NEW before that: row-major);
#   OLD16  --gpu-prologue-cluster-max-tokens=16 (no part 4: rowsDot's
#          mma.sync tiles at 17-63 and the tile GEMM from 64, as before);
#   HM64   --gpu-prologue-weight-order=head-major (part 3 at 1-16 tokens,
#          part 4 at 17-64 in that order);
#   RM64   --gpu-prologue-weight-order=row-major (part 2 at one token,
#          part 3 at 2-16, part 4 at 17-64);
#   WNL    --gpu-prologue-cluster-mma-weights-no-l1 (part 3's weights by
#          ld.global.nc.L1::no_allocate, as part 4's by default);
#   - msac-host-check --quick --device cuda of the 2,048-channel FP8 model
#     with NEW and WNL (H2048 lists those built; prefill 300, chunked
#     prefill of 500, of 1-16 and of 17-128, decode, a batch of 3 then a
#     3-token decode);
#   - read_floor (the stream of the dense / MSA layer's weight bytes);
#   - the CUDA-graph ranges of each artifact's prologues (dense, MSA, and
#     each with the RMSNorm before it; found in its manifest, as the
#     prologue has 4 or 5 launches) at TOKENS (default 1 8 16 17 24 32 48
#     63 64 96 128), interleaved, medians of REPS runs (default 1);
#     VARIANTS (names of DIR's NAME.msa artifacts) and CHECKS override the
#     lists (empty: none).
# The session's first call (an H100) timed P64 / P128 / HP128
# (--gpu-prologue-cluster-max-tokens=64 / 128, the latter head-major too)
# with the passes in part 3 itself (bench/results/2026-12-07-s52-prologue-passes.txt).
#
#   bench/h200-prologue-passes.sh inputs DIR [BUILD]   (here: builds DIR)
#   bash DIR/h200-prologue-passes.sh run DIR OUT       (on the GPU machine)
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
  "$CUDA/bin/nvcc" -O3 -arch=sm_90a -o "$DIR/mb/read_floor" \
    "$ROOT/bench/read_floor.cu"
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
  M=--gpu-prologue-cluster-max-tokens
  W=--gpu-prologue-cluster-mma-weights-no-l1
  for v in NEW: OLD16:$M=16 HM64:$O=head-major RM64:$O=row-major WNL:$W; do
    name=${v%%:*} flags=${v#*:}
    # shellcheck disable=SC2086
    "$BIN/msac" compile m3 $C --strip-weights $flags -o $name.msa > /dev/null
    case " ${H2048:-NEW WNL} " in *" $name "*) ;; *) continue ;; esac
    # shellcheck disable=SC2086
    "$BIN/msac" compile h2048 $C $flags -o h2048-$name.msa > /dev/null
    gzip -1 h2048-$name.msa/weights.bin
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
if [ -n "${CHECKS-NEW WNL}" ]; then
  ./msac-synth h2048 --config h2048-config.json --layers 2 --seed 3 --force \
    > /dev/null
  sha256sum -c --quiet sums.txt || { echo "checks: checkpoint differs"; status=1; }
fi
for name in ${CHECKS-NEW WNL}; do
  [ ! -f h2048-$name.msa/weights.bin.gz ] || gunzip h2048-$name.msa/weights.bin.gz
  timeout 300 ./msac-host-check h2048-$name.msa h2048 --quick --device cuda \
    --quantize-weights fp8-tensor > "$OUT/check-$name.txt" 2>&1 || status=1
  echo "check $name: $(tail -1 "$OUT/check-$name.txt")"
  grep -E '17-128|FAIL' "$OUT/check-$name.txt" || true
done
echo "== read_floor"; ./mb/read_floor 2>&1 | tail -3
for rep in $(seq 1 "${REPS:-1}"); do
  for T in ${TOKENS-1 8 16 17 24 32 48 63 64 96 128}; do
    # shellcheck disable=SC2086
    for V in ${VARIANTS:-NEW OLD16 HM64 RM64 WNL}; do
      [ -d "$V.msa" ] || continue
      echo "== $V T=$T rep=$rep"
      # The decode schedule's launches of the two prologues: dense, MSA,
      # RMSNorm + dense, RMSNorm + MSA.
      ranges=$(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["schedules"]["decode"]
at = [i for i, l in enumerate(s) if "_attention_prologue" in l["kernel"]]
runs = [[at[0]]]
for i in at[1:]:
    (runs[-1].append(i) if i == runs[-1][-1] + 1 else runs.append([i]))
r = runs[:2]
print(" ".join("--graph-range %d:%d" % (a[0] - n, a[-1] + 1)
               for n in (0, 1) for a in r))' "$V.msa/manifest.json")
      # shellcheck disable=SC2086
      timeout 60 ./msac-run bench-decode $V.msa --device cuda --dummy-weights \
        --batch $T --steps 30 --warmup 3 $ranges 2>&1 | grep "CUDA graph" || status=1
    done
  done
done > "$OUT/prologue.log"
[ ! -s "$OUT/prologue.log" ] || python3 graph_ranges_summary.py "$OUT/prologue.log"
exit $status
