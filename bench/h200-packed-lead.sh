#!/bin/bash
# Issue 6's large-token points (bench/prologue_bench.py at 2,048 and 4,096
# tokens by default) with variants of the packed tile GEMM's weight
# decode: docs/perf.md, fifty-fifth session, found the FP8 fused prologue
# only 1.22-1.26x faster than unfused at 4,096 tokens on an H100 (target
# 1.3x), its tile GEMM at 308 TFLOP/s.
# Pairs (unfused, fused) of M3's two layers, weights stripped, each pair
# compiled with the same flags:
#   U   NEW   main's defaults, FP8 per-tensor weights;
#   UL2 FL2   --gpu-packed-tile-lead=2 (weight loads 2 chunk steps ahead);
#   UL3 FL3   --gpu-packed-tile-lead=3;
#   UB  FB    bf16 weights (no --quantize-weights: no decode at all);
#   UI  FI    --gpu-e4m3-integer-decode (E4M3 to bf16 by integer
#             operations and one bf16 multiply, fifty-sixth session);
#   US  FS    --gpu-f16-rows-shared-kb=192: the launch the packed tile
#             shares with rowsDot's f16 rows gets 192 KiB instead of 96,
#             so each of its two 256-thread groups rings 6 stages of
#             32 channels (wgmma kept in flight across chunks) instead of
#             3 (each chunk waited for).
#   UO  FO    --gpu-packed-tile-own-launch: the tile GEMM of per-tensor
#             FP8 weights on the wide tile's launch (two 256-thread CTAs
#             per SM, 6-stage pipelined rings), a kernel part of its own
#             from the tile thresholds (fifty-seventh session).
# PAIRS (default "NEW FI FS FB FL2", by the fused name) picks the pairs, in
# both modes; TOKENS (default 2048,4096) the token counts. CHECKS (default
# "FI") names fused variants (FP8 ones) whose flags are also compiled for
# the 2,048-channel test model and checked on the GPU
# (msac-host-check --quick, bench/prologue-device-lib.sh); the run mode
# also runs msac-gpu-conformance's bundle (every E4M3 byte through the
# integer decode, bit for bit) with bench/gpu_conformance.py.
#
#   bench/h200-packed-lead.sh inputs DIR [BUILD]  (here: about 3 min per artifact)
#   bash DIR/h200-packed-lead.sh run DIR OUT      (on the GPU machine, from
#                                                  the repository root)
set -eu -o pipefail
mode=${1:-}
DIR=${2:?usage: $0 inputs DIR [BUILD] | run DIR OUT}
PAIRS=${PAIRS:-NEW FI FS FB FL2}
CHECKS=${CHECKS:-FI}
# fused:unfused:flags, in the order they run
LIST="NEW:U: FI:UI:--gpu-e4m3-integer-decode FS:US:--gpu-f16-rows-shared-kb=192 FB:UB:bf16 FL2:UL2:--gpu-packed-tile-lead=2 FL3:UL3:--gpu-packed-tile-lead=3 FO:UO:--gpu-packed-tile-own-launch"
selected() { case " $PAIRS " in *" $1 "*) return 0 ;; esac; return 1; }
checked() { case " $CHECKS " in *" $1 "*) echo 1 ;; *) echo 0 ;; esac; }
if [ "$mode" = inputs ]; then
  ROOT=$(cd "$(dirname "$0")/.." && pwd)
  BUILD=$(cd "${3:-$ROOT/build}" && pwd)
  # shellcheck source=bench/prologue-device-lib.sh
  . "$ROOT/bench/prologue-device-lib.sh"
  prologue_inputs_begin "$DIR" "$BUILD"
  "$BIN/msac-gpu-conformance" --target sm_90a \
    --cuda-toolkit "${CUDA_HOME:-/usr/local/cuda}" -o conformance > /dev/null
  FP8=$C
  for e in $LIST; do
    fused=${e%%:*} rest=${e#*:}
    unfused=${rest%%:*} flags=${rest#*:}
    selected "$fused" || continue
    C=$FP8
    if [ "$flags" = bf16 ]; then
      # bf16 weights: the target flags without --quantize-weights.
      C=${FP8%% --quantize-weights*}
      flags=
    fi
    # shellcheck disable=SC2086
    prologue_compile "$unfused" 0 --fuse-attention-prologue=false $flags
    # shellcheck disable=SC2086
    prologue_compile "$fused" "$(checked "$fused")" $flags
  done
  prologue_inputs_end
  exit 0
fi
[ "$mode" = run ] || { echo "usage: $0 inputs DIR [BUILD] | run DIR OUT" >&2; exit 2; }
ROOT=$(pwd)
D=$(cd "$DIR" && pwd)
OUTDIR=$(mkdir -p "$3" && cd "$3" && pwd)
cd "$D"
# shellcheck source=bench/prologue-device-lib.sh
. ./prologue-device-lib.sh
prologue_run_begin "$OUTDIR"
python3 "$ROOT/bench/gpu_conformance.py" conformance > "$OUT/conformance.txt" 2>&1 ||
  status=1
echo "conformance: $(tail -1 "$OUT/conformance.txt")"
todo=
for name in $CHECKS; do
  if selected "$name"; then todo="$todo $name"; fi
done
# shellcheck disable=SC2086
prologue_checks $todo
cd "$ROOT"
for e in $LIST; do
  fused=${e%%:*} rest=${e#*:}
  unfused=${rest%%:*} flags=${rest#*:}
  selected "$fused" || continue
  [ -d "$D/$fused.msa" ] || { echo "$fused.msa: not built"; status=1; continue; }
  bytes=1
  [ "$flags" != bf16 ] || bytes=2
  echo "== $unfused / $fused"
  timeout 300 python3 bench/prologue_bench.py --msac-run "$D/msac-run" \
    --unfused "$D/$unfused.msa" --fused "$D/$fused.msa" \
    --config models/minimax-m3/config.json --tokens "${TOKENS:-2048,4096}" \
    --weight-bytes $bytes --out "$OUT/$fused.json" 2>&1 | tail -6 || status=1
done
exit "$status"
