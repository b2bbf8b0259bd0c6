#!/usr/bin/env bash
# On a GPU machine, from installed binaries (cmake --install build --prefix .dist):
# warms the kernel cache in parallel, then runs the GPU tests one tag at a time.
# Usage: scripts/gpu_check.sh BIN_DIR OUT_DIR [TAG...]   (default tags: [readme] [fwd] [bwd])
set -uo pipefail
bin="${1:?bin dir}"; out="${2:?out dir}"; shift 2
tags=("$@"); [ ${#tags[@]} -eq 0 ] && tags=("[readme]" "[fwd]" "[bwd]")
mkdir -p "$out"
export FLASHJIT_CACHE_DIR="${FLASHJIT_CACHE_DIR:-/tmp/flashjit-gpu-cache}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$out/gpu.txt"
echo "== warm-up: every supported spec for sm90, $(nproc) jobs"
"$bin/flashjit-warmup" --grid all --arch sm90 -j"$(nproc)" --json "$out/warmup_all.json" > "$out/warmup_all.txt" 2>&1
echo "warm-up exit $?"; tail -4 "$out/warmup_all.txt"
for tag in "${tags[@]}"; do
  log="$out/gpu_tests_$(echo "$tag" | tr -dc 'a-z').txt"
  echo "== GPU tests $tag"
  timeout "${GPU_TEST_TIMEOUT:-240}" "$bin/flashjit_gpu_tests" "$tag" -r compact --durations yes > "$log" 2>&1
  echo "exit $?"
  grep -E "FAILED|failed|with messages|rel_err|^[0-9.]+ s:" "$log" | head -40
  tail -2 "$log"
done
