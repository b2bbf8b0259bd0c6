#!/usr/bin/env bash
# Device run 17: compute-sanitizer (memcheck, racecheck) on the Hopper forward's persistent and dynamic
# schedules ([sanitize] cases, incl. several tiles per CTA), then every [fwd] GPU test (validates bf51786).
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
B=.dist/bin; O=$OUT/r17; mkdir -p $O
export FLASHJIT_CACHE_DIR=/tmp/fjc17
CS=/usr/local/cuda/bin/compute-sanitizer; command -v compute-sanitizer >/dev/null && CS=compute-sanitizer
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
$CS --version | tail -1
# warm the cache outside the sanitizer
$B/flashjit_gpu_tests "[sanitize]" -r compact > $O/plain.txt 2>&1; echo "plain [sanitize] exit $? (t=$(el))"; tail -1 $O/plain.txt
for sched in auto dynamic persistent; do
  for tool in racecheck memcheck; do
    [ $tool = memcheck ] && [ $sched = persistent ] && continue
    f=$O/${tool}_${sched}.txt
    FLASHJIT_FWD_SCHEDULE=$sched timeout 200 $CS --tool $tool --error-exitcode 99 $B/flashjit_gpu_tests "[sanitize]" -r compact > $f 2>&1
    echo "$tool $sched exit $? (t=$(el))"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|HAZARD|Invalid" $f | sort | uniq -c | head -5; tail -1 $f
  done
done
timeout 170 $B/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; grep -E "FAILED|failed" -A6 $O/fwd.txt | head -20; tail -2 $O/fwd.txt
tar czf $OUT/r17.tgz -C $OUT r17 && rm -rf $O && echo packed
