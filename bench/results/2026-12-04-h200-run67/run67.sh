#!/usr/bin/env bash
# Run 67 (planned; no device was lent in the sessions of 2026-12-04 after run 66). Two device calls:
#   bash bench/results/2026-12-04-h200-run67/run67.sh 1    then    ... run67.sh 2
# with carry [".dist", ".dist-0", ".dist-L", ".dist-M", ".dist-N", ".dist-W"], built on the CPU machine by
# build.sh in this folder. What it measures (README.md says why):
#  A. The P V wait placed after the softmax (ptxas had hoisted it above the whole softmax in every Hopper
#     kernel) with lazy O rescaling: .dist-L (l-lazy-rescale.patch; not in the 16-bit _sk kernels), .dist-M
#     (m-lazy-rescale-every-kernel.patch: every kernel, each role taking the shared storage's address after
#     setmaxnreg), .dist-N (n-lazy-rescale-uniform-q.patch: M plus Q's address through a shuffle in
#     two-consumer kernels), .dist-W (w-wait-after-softmax.patch: the wait's placement alone, O rescaled every
#     step). Every [fwd] GPU test on N (call 1, before any timing) and on M (call 2); on L or W only if one
#     of them is to land (run 66's [fwd] took ~100 s).
#  B. The committed build (.dist): the stream-K GPU tests and the new growing-score test; TF32 s600 against
#     main (.dist-0 = 6ae3d42), whose share formula it restores.
# Each call packs $OUT/run67-<call>.tgz; extract both into this folder.
# `run67.sh solo` (carry .dist and .dist-N only) is the one-call form where the device budget is short: N's
# tests, HEAD and N over two alternating passes, torch cuDNN; it packs $OUT/run67-solo.tgz.
set -uo pipefail
call=${1:?call 1, 2 or solo}
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run67-$call; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
H="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
K="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 1 --modes fwd"
F="--dtypes float32 --head-dims 128 --seqs 600,1500,8192 --causal 0 --modes fwd"
bench() {  # variant dist group pass
  FLASHJIT_CACHE_DIR=/tmp/fjc-$1 timeout 90 $2/bin/flashjit-bench ${!3} --tag $1 --out $O/$1-$3-p$4.json \
    > $O/$1-$3-p$4.out 2>&1 || echo "$1 $3 pass $4 failed $?"
}
# A stage starts only before this many seconds of the call have gone: the device cuts a call at 600 s, and the
# packing at the end must still run (a variant's pass takes ~55 s; one bench is cut at 90 s).
before() { [ "$(el)" -lt "$1" ]; }
timing_pass() {  # pass variant...: groups H, K and F of each variant ("new" is .dist), while time is left
  local pass=$1 v D; shift
  for v in "$@"; do
    before 460 || { echo "skipped $v pass $pass"; continue; }
    D=.dist; [ $v != new ] && D=.dist-$v
    for g in H K F; do bench $v $D $g $pass; done
    echo "$v pass $pass (t=$(el))"
  done
}
fwd_tests() {  # variant: every [fwd] GPU test on its build
  FLASHJIT_CACHE_DIR=/tmp/fjc-$1 timeout 200 .dist-$1/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/$1-fwd-tests.txt 2>&1
  echo "$1 [fwd] exit $? (t=$(el))"; tail -2 $O/$1-fwd-tests.txt
}
if [ "$call" = solo ]; then
  # One call instead of two, where the device budget left no room for both: N's [fwd] tests, then HEAD and N
  # alternating over two passes, torch cuDNN on the same cells; L, M and W are left for a later call.
  fwd_tests N
  FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 60 .dist/bin/flashjit_gpu_tests "forward: scores that grow*" -r compact > $O/new-tests.txt 2>&1
  echo "new: growing-score test exit $? (t=$(el))"; tail -2 $O/new-tests.txt
  timing_pass 1 new N
  timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn $H --out $O/torch-H.json > $O/torch-H.out 2>&1; echo "torch H exit $? (t=$(el))"
  timing_pass 2 N new
  before 540 && { timeout 40 python3 bench/peers.py --framework torch --impls torch_cudnn $K --out $O/torch-K.json > $O/torch-K.out 2>&1; echo "torch K exit $? (t=$(el))"; }
elif [ "$call" = 1 ]; then
  fwd_tests N
  FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 100 .dist/bin/flashjit_gpu_tests "forward: stream-K*","forward: the 16-bit head_dim 64 kernel*","forward: scores that grow*" -r compact > $O/new-tests.txt 2>&1
  echo "new: stream-K and growing-score tests exit $? (t=$(el))"; tail -2 $O/new-tests.txt
  timing_pass 1 new N M L W
  before 520 && bench main .dist-0 F 1
else
  fwd_tests M
  timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn $H --out $O/torch-H.json > $O/torch-H.out 2>&1; echo "torch H exit $? (t=$(el))"
  timing_pass 2 W L M N new
  before 530 && { timeout 40 python3 bench/peers.py --framework torch --impls torch_cudnn $K --out $O/torch-K.json > $O/torch-K.out 2>&1; echo "torch K exit $? (t=$(el))"; }
  before 500 && { timeout 70 python3 bench/peers.py --framework jax --impls jax_xla $F --out $O/jax-F.json > $O/jax-F.out 2>&1; echo "jax F exit $? (t=$(el))"; }
  before 530 && bench main .dist-0 F 2
  echo "optional stages done (t=$(el))"
fi
grep "TFLOP/s (" $O/*.out | sed "s|$O/||" | sort > $O/summary.txt; wc -l < $O/summary.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >> $O/gpu.txt 2>&1
tar czf $OUT/run67-$call.tgz -C $OUT run67-$call && rm -rf $O && echo packed
