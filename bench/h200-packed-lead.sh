#!/bin/bash
# Issue 6's large-token points (bench/prologue_bench.py at 2,048 and 4,096
# tokens by default) with the packed tile GEMM's weight loads 1 (main's
# default), 2 or 3 chunk steps ahead of their decode
# (--gpu-packed-tile-lead), and with bf16 weights, whose tile copies the
# weights by cp.async with no decode: docs/perf.md, fifty-fifth session,
# found the FP8 fused prologue only 1.22-1.26x faster than unfused at
# 4,096 tokens on an H100 (target 1.3x), its tile GEMM at 308 TFLOP/s.
# Pairs (unfused, fused) of M3's two layers, weights stripped, each pair
# compiled with the same flags:
#   U   NEW   main's defaults, FP8 per-tensor weights;
#   UL2 FL2   --gpu-packed-tile-lead=2;
#   UL3 FL3   --gpu-packed-tile-lead=3;
#   UB  FB    bf16 weights (no --quantize-weights);
#   UI  FI    --gpu-e4m3-integer-decode (E4M3 to bf16 by integer operations).
# PAIRS (default "NEW FL2 FB FL3", by the fused name) picks the pairs, in
# both modes; TOKENS (default 2048,4096) the token counts.
#
#   bench/h200-packed-lead.sh inputs DIR [BUILD]  (here: about 3 min per artifact)
#   bash DIR/h200-packed-lead.sh run DIR OUT      (on the GPU machine, from
#                                                  the repository root)
set -eu -o pipefail
mode=${1:-}
DIR=${2:?usage: $0 inputs DIR [BUILD] | run DIR OUT}
PAIRS=${PAIRS:-NEW FL2 FB FL3}
# fused:unfused:flags
LIST="NEW:U: FL2:UL2:--gpu-packed-tile-lead=2 FL3:UL3:--gpu-packed-tile-lead=3 FB:UB:bf16 FI:UI:--gpu-e4m3-integer-decode"
if [ "$mode" = inputs ]; then
  ROOT=$(cd "$(dirname "$0")/.." && pwd)
  BIN=$(cd "${3:-$ROOT/build}" && pwd)/bin
  CUDA=${CUDA_HOME:-/usr/local/cuda}
  mkdir -p "$DIR"
  cp "$BIN/msac-run" "$0" "$DIR/"
  cd "$DIR"
  rm -rf m3
  "$BIN/msac-synth" m3 --config "$ROOT/models/minimax-m3/config.json" \
    --layers 2 --weights zero > /dev/null
  for e in $LIST; do
    fused=${e%%:*} rest=${e#*:}
    unfused=${rest%%:*} flags=${rest#*:}
    case " $PAIRS " in *" $fused "*) ;; *) continue ;; esac
    if [ "$flags" = bf16 ]; then
      flags=
    else
      flags="--quantize-weights fp8-tensor $flags"
    fi
    for v in "$unfused:--fuse-attention-prologue=false" "$fused:"; do
      # shellcheck disable=SC2086
      "$BIN/msac" compile m3 --target sm_90a --cuda-toolkit "$CUDA" \
        --strip-weights $flags ${v#*:} -o "${v%%:*}.msa" > /dev/null
    done
  done
  rm -rf m3
  du -sh .
  exit 0
fi
[ "$mode" = run ] || { echo "usage: $0 inputs DIR [BUILD] | run DIR OUT" >&2; exit 2; }
D=$(cd "$DIR" && pwd)
OUT=$(mkdir -p "$3" && cd "$3" && pwd)
chmod +x "$D/msac-run"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader || true
status=0
for e in $LIST; do
  fused=${e%%:*} rest=${e#*:}
  unfused=${rest%%:*} flags=${rest#*:}
  case " $PAIRS " in *" $fused "*) ;; *) continue ;; esac
  [ -d "$D/$fused.msa" ] || { echo "$fused.msa: not built"; status=1; continue; }
  bytes=1
  [ "$flags" != bf16 ] || bytes=2
  echo "== $unfused / $fused"
  timeout 300 python3 bench/prologue_bench.py --msac-run "$D/msac-run" \
    --unfused "$D/$unfused.msa" --fused "$D/$fused.msa" \
    --config models/minimax-m3/config.json --tokens "${TOKENS:-2048,4096}" \
    --weight-bytes $bytes --out "$OUT/$fused.json" 2>&1 | tail -6 || status=1
done
exit $status
