#!/usr/bin/env bash
#===- scripts/main.sh - Set up, then run msac's main job ------------------===#
#
# Runs scripts/setup.sh, then the main job. Until the end-to-end compiler
# lands (checkpoint -> artifact -> msac-run), the main job shows the
# compiler that exists: it runs the msa/bsq reference pipeline on a
# MiniMax-M3 MSA layer and lists the msac passes and pipelines.
#
#===----------------------------------------------------------------------===#

set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${MSAC_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"

opt="$build_dir/bin/msac-opt"
echo
"$opt" --version | sed -n '/msac/p'
echo
echo "== msac-opt: msac passes and pipelines =="
"$opt" --help | grep -E -- '--(msa|bsq|msac)-' | sed 's/^ *//'
echo
echo "== An MSA decoder layer with NVFP4 experts, through -msac-reference-pipeline =="
"$opt" "$root/models/examples/m3-msa-layer.mlir" -msac-reference-pipeline
