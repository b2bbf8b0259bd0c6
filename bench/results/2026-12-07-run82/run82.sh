#!/usr/bin/env bash
# Run 82 (2026-12-07): N, the narrow last K/V step (kNarrowLast: the 16-bit non-causal padded kernels with 128-key
# tiles and two consumers run a tile's last step 64 or 96 keys wide when it holds that few keys), before it lands:
# the [fwd] GPU tests on it (the new narrow-step test first), then three rounds of d128 nc 600/1500/3000 (padded)
# and 4096 (even: the same kernel as before, a control) and d64 nc 1500/3000: new (.dist) and main (.dist-old),
# main first in round 2, torch (cuDNN, flash) at d128 in the same rounds.
# carry [".dist", ".dist-old"]; ~440 s; every stage packs its own tarball.
set -uo pipefail
source bench/device_prelude.sh run82
gpu_line
warm_fwd
FLASHJIT_CACHE_DIR=/tmp/fjt timeout 60 .dist/bin/flashjit_gpu_tests "forward: the last K/V step at each width the padded Hopper kernels run it" --durations yes > $O/narrow-test.txt 2>&1
echo "narrow test exit $? (t=$(el))"; tail -3 $O/narrow-test.txt
FLASHJIT_CACHE_DIR=/tmp/fjt timeout 230 .dist/bin/flashjit_gpu_tests "[fwd]" --durations yes > $O/fwd-tests-new.txt 2>&1
echo "[fwd] on new exit $? (t=$(el))"; tail -2 $O/fwd-tests-new.txt
pack tests
D="--dtypes bfloat16 --head-dims 128 --seqs 600,1500,3000,4096 --causal 0 --modes fwd"
S="--dtypes bfloat16 --head-dims 64 --seqs 1500,3000 --causal 0 --modes fwd"
for p in 1 2 3; do
  before 330 || break
  cs="new old"; [ $p = 2 ] && cs="old new"
  for g in D S; do
    for c in $cs; do
      d=.dist; [ $c = old ] && d=.dist-old
      timeout 60 $d/bin/flashjit-bench ${!g} --tag $c --out $O/$c-$g-p$p.json > $O/$c-$g-p$p.out 2>&1 \
        || echo "$c $g pass $p failed $?"
    done
  done
  echo "flashjit pass $p (t=$(el))"; grep -h "TFLOP/s (" $O/*-p$p.out | awk '{print $2, $4, $5, $6, $(NF-3)}'
  timeout 80 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash $D \
    --out $O/torch-D-p$p.json > $O/torch-D-p$p.out 2>&1 || echo "torch D pass $p exit $?"
  echo "torch pass $p (t=$(el))"; grep -h "TFLOP/s (" $O/torch-*-p$p.out | awk '{print $2, $4, $5, $6, $(NF-3)}'
  pack p$p
done
gpu_line
pack end
