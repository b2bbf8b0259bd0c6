#!/usr/bin/env bash
# Device run 7: re-validate the refactor (23967f0) on the Hopper path, the TMA fallback test, [bwd].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
B=.dist/bin; O=$OUT/r7; mkdir -p $O
export FLASHJIT_CACHE_DIR=/tmp/fjc7
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
timeout 60 $B/flashjit_gpu_tests "forward: a layout the TMA*" -r compact > $O/fallback.txt 2>&1; echo "fallback exit $? (t=$(el))"; tail -3 $O/fallback.txt
timeout 200 $B/flashjit_gpu_tests "[fwd]" -r compact --durations yes > $O/fwd.txt 2>&1; echo "fwd exit $? (t=$(el))"
grep -E "FAILED|failed|with messages" $O/fwd.txt | head -20; tail -2 $O/fwd.txt
timeout 200 $B/flashjit_gpu_tests "[bwd]" -r compact --durations yes > $O/bwd.txt 2>&1; echo "bwd exit $? (t=$(el))"
grep -E "FAILED|failed|with messages" $O/bwd.txt | head -20; tail -2 $O/bwd.txt
$B/flashjit-bench --dtypes bfloat16 --head-dims 64,128 --seqs 8192,600,640 --causal 0 --modes fwd --target-ms 20 --reps 5 --no-check --out $O/bench.json > $O/bench.txt 2>&1; echo "bench exit $? (t=$(el))"; tail -8 $O/bench.txt
tar czf $OUT/r7.tgz -C $OUT r7 && echo packed
