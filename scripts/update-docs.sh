#!/usr/bin/env bash
#===- scripts/update-docs.sh - Refresh docs/generated ---------------------===#
#
# Regenerates the dialect and pass reference from TableGen (target msac-doc)
# and copies it to docs/generated/, which test/Docs/generated-docs.test keeps
# in sync with the .td files.
#
#===----------------------------------------------------------------------===#

set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${MSAC_BUILD_DIR:-$root/build}"
ninja -C "$build_dir" msac-doc
rm -rf "$root/docs/generated"
mkdir -p "$root/docs/generated"
cp -r "$build_dir/docs/Dialects" "$build_dir/docs/Passes" "$root/docs/generated/"
echo "updated docs/generated from $build_dir/docs"
