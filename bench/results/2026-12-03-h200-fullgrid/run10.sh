#!/usr/bin/env bash
# Device run 10 (same machine as run 9): the 18 flashjit rows run 9 had no time for, then JAX on the full grid.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=bench/results/2026-12-03-h200-fullgrid; mkdir -p $O $OUT/r10
G="--target-ms 15 --reps 5"
bash bench/run_all.sh --only flashjit --name rest --out-dir $O -- --dtypes float32 --head-dims 128 --causal 1 --seqs 4096,8192,600,1500,3000 --modes fwd,fwd_bwd $G > $OUT/r10/flashjit.log 2>&1; echo "flashjit exit $? (t=$(el))"; tail -2 $OUT/r10/flashjit.log
bash bench/run_all.sh --only jax --name grid --out-dir $O --max-seconds $(( 500 - $(el) )) -- $G > $OUT/r10/jax.log 2>&1; echo "jax exit $? (t=$(el))"; tail -3 $OUT/r10/jax.log
tar czf $OUT/r10/results.tgz $O && echo packed
