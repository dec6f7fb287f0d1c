#!/bin/bash
# The fused prologue's tensor-core cluster kernel in passes of 16 tokens
# above 16 tokens (part 4; docs/perf.md, fifty-second session), prepared
# for one device call: checks and times, on M3's two layers with
# per-tensor FP8 weights,
#   NEW    main's defaults (part 3 at 1-16 tokens, part 4 at 17-96, the
#          tile GEMM from 97; head-major weights since the fifty-third
#          session, whose call 1 built NEW before that: row-major; part 4
#          up to 64 tokens before the fifty-fourth; part 3's no-L1
#          loads from 4 tokens, LH4, since the fifty-fifth);
#   OLD16  --gpu-prologue-cluster-max-tokens=16 (no part 4: rowsDot's
#          mma.sync tiles at 17-63 and the tile GEMM from 64, as before);
#   P64    --gpu-prologue-cluster-max-tokens=64 (the tile GEMM from 65,
#          the default before the fifty-fourth session);
#   HM64   P64 with --gpu-prologue-weight-order=head-major (part 3 at 1-16
#          tokens, part 4 at 17-64 in that order);
#   RM64   P64 with --gpu-prologue-weight-order=row-major (part 2 at one
#          token, part 3 at 2-16, part 4 at 17-64);
#   WNL    --gpu-prologue-cluster-mma-weights-no-l1 (part 3's weights by
#          ld.global.nc.L1::no_allocate, as part 4's by default);
#   P128   --gpu-prologue-cluster-max-tokens=128 (part 4's passes up to
#          128 tokens instead of the tile GEMM);
#   LH4    --gpu-prologue-cluster-mma-weights-no-l1-min-tokens=4 (part
#          3's weights as WNL's from 4 tokens, generic loads below;
#          main's default since the fifty-fifth session);
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
#     lists (empty: none); in inputs mode VARIANTS picks the artifacts
#     built (default all but P64, P128 and LH4).
# The session's first call (an H100) timed P64 / P128 / HP128
# (--gpu-prologue-cluster-max-tokens=64 / 128, the latter head-major too)
# with the passes in part 3 itself (bench/results/2026-12-07-s52-prologue-passes.txt).
#
#   bench/h200-prologue-passes.sh inputs DIR [BUILD]   (here: builds DIR)
#   bash DIR/h200-prologue-passes.sh run DIR OUT       (on the GPU machine)
set -eu
mode=${1:-}
DIR=${2:?usage: $0 inputs DIR [BUILD] | run DIR OUT}
# shellcheck source=bench/prologue-device-lib.sh
. "$(dirname "$0")/prologue-device-lib.sh"
if [ "$mode" = inputs ]; then
  prologue_inputs_begin "$DIR" "${3:-$(dirname "$0")/../build}" read_floor
  O=--gpu-prologue-weight-order
  M=--gpu-prologue-cluster-max-tokens
  W=--gpu-prologue-cluster-mma-weights-no-l1
  for v in NEW: OLD16:$M=16 P64:$M=64 HM64:"$O=head-major $M=64" \
      RM64:"$O=row-major $M=64" WNL:$W P128:$M=128 LH4:$W-min-tokens=4; do
    name=${v%%:*} flags=${v#*:}
    case " ${VARIANTS:-NEW OLD16 HM64 RM64 WNL} " in *" $name "*) ;; *) continue ;; esac
    checked=0
    case " ${H2048:-NEW WNL} " in *" $name "*) checked=1 ;; esac
    # shellcheck disable=SC2086
    prologue_compile "$name" $checked $flags
  done
  prologue_inputs_end
  exit 0
fi
[ "$mode" = run ] || { echo "usage: $0 inputs DIR [BUILD] | run DIR OUT" >&2; exit 2; }
cd "$DIR"
prologue_run_begin "$3"
# shellcheck disable=SC2086
prologue_checks ${CHECKS-NEW WNL}
echo "== read_floor"; ./mb/read_floor 2>&1 | tail -3
prologue_time "${REPS:-1}" "${TOKENS-1 8 16 17 24 32 48 63 64 96 128}" \
  "${VARIANTS:-NEW OLD16 HM64 RM64 WNL}"
exit $status
