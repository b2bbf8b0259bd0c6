#!/usr/bin/env bash
# Device run 9: full seed grid, flashjit then torch (same machine as run 10's JAX), then memcheck on [sanitize].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=bench/results/2026-12-03-h200-fullgrid; mkdir -p $O $OUT/r9
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
G="--target-ms 15 --reps 5"
bash bench/run_all.sh --only flashjit --name grid --out-dir $O --max-seconds 215 -- $G > $OUT/r9/flashjit.log 2>&1; echo "flashjit exit $? (t=$(el))"; tail -3 $OUT/r9/flashjit.log
bash bench/run_all.sh --only torch --name grid --out-dir $O --max-seconds 160 -- $G > $OUT/r9/torch.log 2>&1; echo "torch exit $? (t=$(el))"; tail -3 $OUT/r9/torch.log
left=$(( 545 - $(el) ))
if [ $left -gt 30 ]; then
  FLASHJIT_CACHE_DIR=/tmp/fjc9 timeout $left compute-sanitizer --tool memcheck --error-exitcode 99 .dist/bin/flashjit_gpu_tests "[sanitize]" -r compact > $OUT/r9/memcheck.txt 2>&1
  echo "memcheck exit $? (t=$(el))"; grep -E "ERROR SUMMARY|passed|failed" $OUT/r9/memcheck.txt | tail -3
fi
tar czf $OUT/r9/results.tgz $O && echo packed
