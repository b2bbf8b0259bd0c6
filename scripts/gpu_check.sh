#!/usr/bin/env bash
# On a GPU machine, from installed binaries (cmake --install build --prefix .dist):
# warms the kernel cache in parallel, then runs the GPU tests one tag at a time.
# Usage: scripts/gpu_check.sh BIN_DIR OUT_DIR [TAG...]   (default tags: [readme] [fwd] [bwd])
# SANITIZE=1 also runs compute-sanitizer (memcheck, racecheck) on the [sanitize] cases.
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
if [ "${SANITIZE:-0}" = 1 ]; then
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool [sanitize]" | tee -a "$out/sanitize.txt"
    timeout "${GPU_TEST_TIMEOUT:-240}" compute-sanitizer --tool "$tool" --error-exitcode 99 \
      "$bin/flashjit_gpu_tests" "[sanitize]" -r compact >> "$out/sanitize.txt" 2>&1
    echo "exit $?" | tee -a "$out/sanitize.txt"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race" "$out/sanitize.txt" | tail -3
  done
fi
