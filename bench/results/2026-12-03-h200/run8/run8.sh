#!/usr/bin/env bash
# Device run 8: TF32 Hopper forward (wgmma tf32, V^T scratch): correctness, then timings vs mma.sync.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
B=.dist/bin; O=$OUT/r8; mkdir -p $O
export FLASHJIT_CACHE_DIR=/tmp/fjc8
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
timeout 90 $B/flashjit_gpu_tests "forward: sm_90 runs*" -r compact > $O/smoke.txt 2>&1; rc=$?; echo "smoke exit $rc (t=$(el))"; grep -E "FAILED|failed|with expansion" -A3 $O/smoke.txt | head -30; tail -2 $O/smoke.txt
if [ $rc -ne 0 ]; then tar czf $OUT/r8.tgz -C $OUT r8; exit 0; fi
G="--dtypes float32 --head-dims 128,64 --seqs 8192,4096,3000,1500,600 --causal 0,1 --modes fwd --target-ms 20 --reps 5"
timeout 150 $B/flashjit-bench $G --out $O/bench_hopper.json > $O/bench_hopper.txt 2>&1; echo "bench exit $? (t=$(el))"; tail -22 $O/bench_hopper.txt
FLASHJIT_FORCE_MMA=1 timeout 100 $B/flashjit-bench --dtypes float32 --head-dims 128,64 --seqs 8192,1500 --causal 0,1 --modes fwd --target-ms 20 --reps 5 --no-check --no-graph --out $O/bench_mma.json > $O/bench_mma.txt 2>&1; echo "mma exit $? (t=$(el))"; tail -9 $O/bench_mma.txt
timeout 200 $B/flashjit_gpu_tests "[fwd]" -r compact --durations yes > $O/fwd.txt 2>&1; echo "fwd exit $? (t=$(el))"
grep -E "FAILED|failed|with messages" $O/fwd.txt | head -20; tail -2 $O/fwd.txt
tar czf $OUT/r8.tgz -C $OUT r8 && echo packed
