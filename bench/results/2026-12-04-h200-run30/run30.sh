#!/usr/bin/env bash
# Device run 30: main as committed (2d0b0ea's kernels; comments only since): every GPU test, then the [sanitize]
# cases under racecheck.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/r30; mkdir -p $O
export FLASHJIT_CACHE_DIR=/tmp/fjc30
timeout 230 .dist/bin/flashjit_gpu_tests -r compact > $O/gpu_tests.txt 2>&1; echo "gpu tests exit $? (t=$(el))"; grep -E "FAILED|failed" -A6 $O/gpu_tests.txt | head -20; tail -2 $O/gpu_tests.txt
timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool racecheck .dist/bin/flashjit_gpu_tests "[sanitize]" > $O/racecheck.txt 2>&1; echo "racecheck exit $? (t=$(el))"; tail -3 $O/racecheck.txt
tar czf $OUT/r30.tgz -C $OUT r30 && rm -rf $O && echo packed
