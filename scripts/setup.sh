#!/usr/bin/env bash
#===- scripts/setup.sh - Install dependencies, configure and build --------===#
#
# Installs the Debian 12 packages msac needs (skipped when they are all
# present), configures a Release build in build/ with Ninja and clang-22,
# and builds every tool, library and test binary. Safe to run repeatedly:
# later runs only rebuild what changed.
#
# Environment: MSAC_BUILD_DIR (default: build), MSAC_JOBS (default: ninja's).
#
#===----------------------------------------------------------------------===#

set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${MSAC_BUILD_DIR:-$root/build}"

packages=(
  cmake ninja-build python3
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  clang-22 lld-22
  nlohmann-json3-dev googletest libgtest-dev libcli11-dev libclang-rt-22-dev
  libpcre2-dev libutf8proc-dev
)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]})); then
  echo "msac setup: installing ${missing[*]}"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || {
      echo "msac setup: error: need root or sudo to install: ${missing[*]}" >&2
      exit 1
    }
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [[ ! -f "$build_dir/build.ninja" ]]; then
  cmake -G Ninja -S "$root" -B "$build_dir" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 \
    -DCMAKE_CXX_COMPILER=clang++-22 \
    -DLLVM_USE_LINKER=lld \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi

jobs=()
[[ -n "${MSAC_JOBS:-}" ]] && jobs=(-j "$MSAC_JOBS")
ninja -C "$build_dir" "${jobs[@]}"
echo "msac setup: build ready in $build_dir"
