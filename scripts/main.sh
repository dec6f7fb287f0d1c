#!/usr/bin/env bash
#===- scripts/main.sh - Set up, then run msac's main job ------------------===#
#
# Runs scripts/setup.sh, then the main job. Until the end-to-end compiler
# lands (checkpoint -> artifact -> msac-run), the main job shows the
# compiler that exists: it writes a tiny synthetic checkpoint and imports
# it, plans memory for the real MiniMax-M3 config, and runs the msa/bsq
# reference pipeline on a real-shape MiniMax-M3 MSA layer.
#
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
echo "== msac import: checked, then imported to the msa dialect =="
"$bin/msac" import "$work/tiny" -o "$work/tiny.mlir"
echo "$work/tiny.mlir: $(grep -c 'msa\.' "$work/tiny.mlir") msa ops; first layer:"
sed -n '/layers.0.input_layernorm/,/layers.1.input_layernorm/p' "$work/tiny.mlir" | grep -E 'msa\.(rms_norm|linear|rope|kv_cache_insert|dense_attention|swiglu)' | head -8
echo
echo "== msac plan: the real MiniMax-M3 config, FP8 KV and index caches =="
"$bin/msac" plan "$root/models/minimax-m3" --kv-cache-dtype fp8 \
  --index-cache-dtype fp8 --max-seq-len 131072 --memory 80GiB
echo
echo "== msac-opt: an MSA layer at real shapes through -msac-reference-pipeline =="
"$bin/msac-opt" "$root/models/examples/m3-msa-layer.mlir" -msac-reference-pipeline | grep -E 'bsq\.|msa\.(index_score|block_topk|sparse_attention|moe)' 
