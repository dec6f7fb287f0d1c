#!/usr/bin/env bash
#===- scripts/main.sh - Set up, then run msac's main job ------------------===#
#
# Runs scripts/setup.sh, then the main job: write a tiny synthetic
# MiniMax-M3-architecture checkpoint (1 dense + 2 MSA/MoE layers, 128-token
# blocks, top-16, 8 experts + shared expert, byte-level BPE tokenizer),
# compile it for the host with `msac compile`, and generate text from it
# with `msac-run` (the weights are random, so the text is noise; the path
# from prompt to tokens is the real one), printing tokens/s.
#===----------------------------------------------------------------------===#

set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${MSAC_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"

bin="$build_dir/bin"
work="$build_dir/main-job"
rm -rf "$work" && mkdir -p "$work"
echo
"$bin/msac" --version | sed -n '/msac/p'
echo
echo "== msac-synth: a tiny MiniMax-M3-architecture checkpoint =="
"$bin/msac-synth" "$work/tiny"
echo
echo "== msac compile: checkpoint -> host artifact =="
"$bin/msac" compile "$work/tiny" --target host -o "$work/tiny.msa"
echo
echo "== msac-run inspect =="
"$bin/msac-run" inspect "$work/tiny.msa"
echo
echo "== msac-run generate (greedy, 48 tokens) =="
"$bin/msac-run" generate "$work/tiny.msa" \
  --prompt "The index branch scores every earlier block" \
  --max-tokens 48 --ignore-eos
echo
echo "== msac-run bench (batch 4, 512 prompt tokens, 32 generated) =="
"$bin/msac-run" bench "$work/tiny.msa" --batch 4 --input-len 512 --output-len 32
