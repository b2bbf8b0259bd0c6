#!/usr/bin/env bash
# Run 67 (planned; the device was not lent again in session 2026-12-04 after run 66).
#  1. The committed build (.dist): stream-K's shares are main's floor(total * cta / grid) again, in 32-bit
#     arithmetic; run 66's formula moved the TF32 s600 split points and measured 2% slower there. The
#     stream-K GPU tests, then TF32 d128 s600/1500 and bf16 d64 s4096 against main (.dist-0 = 6ae3d42).
#  2. Two main-loop trims for the two-consumer kernels, aimed at the d128 ragged cells (issue 6 wants 1.1x
#     the best peer; run 66: s1500 1.104x, s3000 1.096x): .dist-Q = q-shuffled-q-address.patch (Q's
#     descriptors on the uniform datapath: d128 loop 647 -> 634 instructions), .dist-T = t-tree-row-max.patch
#     (the row max as a tree). Build each on the CPU machine: git apply PATCH; make -C build flashjit-bench;
#     strip -o .dist-X/bin/flashjit-bench build/flashjit-bench; git checkout templates.
# Carry [".dist", ".dist-0", ".dist-Q", ".dist-T"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run67; mkdir -p $O
FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 200 .dist/bin/flashjit_gpu_tests "forward: stream-K*","forward: the 16-bit head_dim 64 kernel*" -r compact > $O/sk-tests.txt 2>&1; echo "tests exit $? (t=$(el))"; tail -2 $O/sk-tests.txt
F="--dtypes float32 --head-dims 128 --seqs 600,1500 --causal 0 --modes fwd"
H="--dtypes bfloat16 --head-dims 128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
B="--dtypes bfloat16 --head-dims 64 --seqs 4096 --causal 0 --modes fwd"
for pass in 1 2; do
  for v in new main Q T; do
    D=.dist; [ $v = main ] && D=.dist-0; [ $v = Q ] && D=.dist-Q; [ $v = T ] && D=.dist-T
    [ -x $D/bin/flashjit-bench ] || continue
    for g in F H B; do
      FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 60 $D/bin/flashjit-bench ${!g} --tag $v --out $O/$v-$g-p$pass.json > $O/$v-$g-p$pass.out 2>&1 || echo "$v $g $pass failed $?"
    done
  done
  echo "pass $pass (t=$(el))"
done
timeout 60 python3 bench/peers.py --framework torch --impls torch_cudnn $H --out $O/torch-H.json > $O/torch-H.out 2>&1; echo "torch exit $? (t=$(el))"
grep "TFLOP/s (" $O/*.out | sed "s|$O/||" | sort | tee $O/summary.txt
tar czf $OUT/run67.tgz -C $OUT run67 && rm -rf $O && echo packed
