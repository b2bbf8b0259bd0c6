#!/usr/bin/env bash
# Installs what flashjit needs to build (Debian/Ubuntu packages) and builds it
# into build/. Idempotent: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(cmake g++ make libfmt-dev nlohmann-json3-dev catch2 libxxhash-dev libcli11-dev llvm-14-tools)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# NVRTC is loaded at run time (never linked); the build itself needs no CUDA.
if [ ! -e "${CUDA_HOME:-/usr/local/cuda}/lib64/libnvrtc.so" ] && ! ldconfig -p | grep -q libnvrtc; then
  echo "setup: note: no NVRTC found (CUDA toolkit at ${CUDA_HOME:-/usr/local/cuda}); kernels can then only come from a warm cache"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
