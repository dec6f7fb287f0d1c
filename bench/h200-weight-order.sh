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
#   - the CUDA-graph ranges of the prologue (dense, MSA, RMSNorm + dense,
#     RMSNorm + MSA; from each manifest since the fifty-fourth session,
#     2:6, 17:21, 1:6, 16:21 before) at 1, 2, 4, 8, 16, 32 and 128
#     tokens, interleaved, medians of REPS runs (default 2); TOKENS and
#     VARIANTS (names of DIR's NAME.msa artifacts) override the lists,
#     CHECKS the checked orders (empty: none). Every artifact has main's
#     other defaults, so since the fifty-fourth session part 4 takes
#     17-96 tokens (17-64 in the fifty-first session's call).
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
# shellcheck source=bench/prologue-device-lib.sh
. "$(dirname "$0")/prologue-device-lib.sh"
if [ "$mode" = inputs ]; then
  prologue_inputs_begin "$DIR" "${3:-$(dirname "$0")/../build}" \
    read_floor weight_layout
  O=--gpu-prologue-weight-order
  # (The chunk-major order passed the GPU check in the forty-eighth
  # session; only the head-major artifacts are checked.)
  prologue_compile ET2 0 $O=row-major
  prologue_compile CM 0 $O=chunk-major
  prologue_compile HM 1 $O=head-major --gpu-prologue-cluster-mma-min-tokens=2
  prologue_compile HM1 1 $O=head-major
  # TUNING=1: part 3's tuning variants of the forty-ninth session's call
  # (early tiles 1, interleaved slices with early tiles 1, 6 CTAs per SM).
  E=--gpu-prologue-cluster-mma-early-tiles=1
  if [ -n "${TUNING:-}" ]; then
    prologue_compile ET1 0 $E
    prologue_compile IL1 0 $E --gpu-prologue-cluster-mma-interleave
    prologue_compile C6 0 --gpu-prologue-cluster-mma-ctas=6
  fi
  prologue_inputs_end
  exit 0
fi
[ "$mode" = run ] || { echo "usage: $0 inputs DIR [BUILD] | run DIR OUT" >&2; exit 2; }
cd "$DIR"
prologue_run_begin "$3"
# shellcheck disable=SC2086
prologue_checks ${CHECKS-HM HM1}
echo "== read_floor"; ./mb/read_floor 2>&1 | tail -3
echo "== weight_layout"; timeout 120 ./mb/weight_layout 2>&1 || status=1
prologue_time "${REPS:-2}" "${TOKENS:-1 2 4 8 16 32 128}" \
  "${VARIANTS:-ET2 CM HM HM1}"
exit $status
