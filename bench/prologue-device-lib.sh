# shellcheck shell=bash
# Shared steps of the fused prologue's device scripts
# (bench/h200-prologue-passes.sh, bench/h200-weight-order.sh,
# bench/h200-packed-lead.sh); sourced by
# them, in inputs mode from bench/ and in run mode from the inputs folder,
# which holds a copy. Not a script of its own.
#
# inputs mode (this machine):
#   prologue_inputs_begin DIR BUILD PROBE...
#     copies msac-run, msac-host-check, msac-synth, the calling script,
#     this file and graph_ranges_summary.py into DIR; builds each
#     bench/PROBE.cu into DIR/mb/PROBE (sm_90a); writes M3's two layers
#     with zero weights (m3/) and the 2,048-channel model (h2048/, seed
#     3, real weights for the checks) and enters DIR. Sets BIN and C
#     (msac compile's target flags: sm_90a, FP8 per-tensor weights).
#   prologue_compile NAME CHECKED FLAGS...
#     NAME.msa from m3 with --strip-weights; with CHECKED=1 also
#     h2048-NAME.msa (its weights.bin gzipped) for the checks.
#   prologue_inputs_end
#     records h2048's checksum (the run mode writes it again) and removes
#     both checkpoints.
# run mode (the GPU machine, from DIR):
#   prologue_run_begin OUT       sets OUT (absolute) and status=0.
#   prologue_checks NAME...      msac-host-check --quick --device cuda of
#                                h2048-NAME.msa; status=1 on a failure.
#   prologue_time REPS TOKENS VARIANTS
#     the CUDA-graph ranges of each NAME.msa's two prologues (dense, MSA,
#     then each with the RMSNorm before it; found in its manifest's
#     decode schedule, as the prologue has several launches) at each token
#     count, interleaved, REPS times, into OUT/prologue.log, and their
#     medians (graph_ranges_summary.py).

prologue_inputs_begin() {
  local dir=$1 build=$2 probe
  shift 2
  local root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  BIN=$(cd "$build" && pwd)/bin
  local cuda=${CUDA_HOME:-/usr/local/cuda}
  mkdir -p "$dir/mb"
  cp "$BIN/msac-run" "$BIN/msac-host-check" "$BIN/msac-synth" "$0" \
    "${BASH_SOURCE[0]}" "$root/bench/graph_ranges_summary.py" "$dir/"
  for probe in "$@"; do
    "$cuda/bin/nvcc" -O3 -arch=sm_90a -o "$dir/mb/$probe" \
      "$root/bench/$probe.cu"
  done
  cd "$dir" || return 1
  rm -rf m3 h2048 ./*.msa
  sed -e 's/"hidden_size": 256/"hidden_size": 2048/' \
    "$root/test/Codegen/Inputs/head128-config.json" > h2048-config.json
  "$BIN/msac-synth" m3 --config "$root/models/minimax-m3/config.json" \
    --layers 2 --weights zero > /dev/null
  "$BIN/msac-synth" h2048 --config h2048-config.json --layers 2 --seed 3 \
    > /dev/null
  C="--target sm_90a --cuda-toolkit $cuda --quantize-weights fp8-tensor"
}

prologue_compile() {
  local name=$1 checked=$2
  shift 2
  # shellcheck disable=SC2086
  "$BIN/msac" compile m3 $C --strip-weights "$@" -o "$name.msa" > /dev/null
  [ "$checked" = 1 ] || return 0
  # shellcheck disable=SC2086
  "$BIN/msac" compile h2048 $C "$@" -o "h2048-$name.msa" > /dev/null
  gzip -1 "h2048-$name.msa/weights.bin"
}

prologue_inputs_end() {
  sha256sum h2048/model.safetensors > sums.txt
  rm -rf m3 h2048
  du -sh .
}

# status: the caller's exit status.
# shellcheck disable=SC2034
prologue_run_begin() {
  OUT=$(mkdir -p "$1" && cd "$1" && pwd)
  chmod +x msac-run msac-host-check msac-synth
  # The probes (none for some scripts).
  [ -z "$(ls mb 2> /dev/null)" ] || chmod +x mb/*
  export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
  status=0
}

prologue_checks() {
  local name
  [ $# -gt 0 ] || return 0
  ./msac-synth h2048 --config h2048-config.json --layers 2 --seed 3 --force \
    > /dev/null
  sha256sum -c --quiet sums.txt || { echo "checks: checkpoint differs"; status=1; }
  for name in "$@"; do
    [ ! -f "h2048-$name.msa/weights.bin.gz" ] ||
      gunzip "h2048-$name.msa/weights.bin.gz"
    timeout 300 ./msac-host-check "h2048-$name.msa" h2048 --quick \
      --device cuda --quantize-weights fp8-tensor \
      > "$OUT/check-$name.txt" 2>&1 || status=1
    echo "check $name: $(tail -1 "$OUT/check-$name.txt")"
    grep -E '17-128|FAIL' "$OUT/check-$name.txt" || true
  done
}

# shellcheck disable=SC2034
prologue_time() {
  local reps=$1 tokens=$2 variants=$3 rep T V ranges
  for rep in $(seq 1 "$reps"); do
    for T in $tokens; do
      for V in $variants; do
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
        timeout 60 ./msac-run bench-decode "$V.msa" --device cuda \
          --dummy-weights --batch "$T" --steps 30 --warmup 3 $ranges 2>&1 |
          grep "CUDA graph" || status=1
      done
    done
  done > "$OUT/prologue.log"
  [ ! -s "$OUT/prologue.log" ] || python3 graph_ranges_summary.py "$OUT/prologue.log"
}
