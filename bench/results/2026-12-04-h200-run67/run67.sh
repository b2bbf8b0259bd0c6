#!/usr/bin/env bash
# Run 67: run 66's build with stream-K's shares computed as floor(total * cta / grid) again (in 32-bit
# arithmetic): run 66's "first total % grid CTAs take one step more" moved the TF32 s600 splits and
# measured 2% slower there. The stream-K GPU tests, then TF32 d128 (s600 splits) and bf16 d64 s4096 (_sk),
# new (.dist) against main (.dist-0, 6ae3d42), two passes. Carry [".dist", ".dist-0"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run67; mkdir -p $O
FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 200 .dist/bin/flashjit_gpu_tests "forward: stream-K*","forward: the 16-bit head_dim 64 kernel*" -r compact > $O/sk-tests.txt 2>&1; echo "tests exit $? (t=$(el))"; tail -2 $O/sk-tests.txt
F="--dtypes float32 --head-dims 128 --seqs 600,1500 --causal 0 --modes fwd"
B="--dtypes bfloat16 --head-dims 64 --seqs 4096 --causal 0 --modes fwd"
for pass in 1 2; do
  for v in new main; do
    D=.dist; [ $v = main ] && D=.dist-0
    for g in F B; do
      FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 60 $D/bin/flashjit-bench ${!g} --tag $v --out $O/$v-$g-p$pass.json > $O/$v-$g-p$pass.out 2>&1 || echo "$v $g $pass failed $?"
    done
  done
  echo "pass $pass (t=$(el))"
done
grep "TFLOP/s (" $O/*.out | sed "s|$O/||" | sort | tee $O/summary.txt
tar czf $OUT/run67.tgz -C $OUT run67 && rm -rf $O && echo packed
