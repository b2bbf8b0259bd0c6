#!/usr/bin/env bash
# Run 70 (2026-12-05; call 1 ran, README.md has its numbers): stream-K's split tiles at head_dim 128 and the 32-bit ring
# addresses in every kernel (variant A), beside main and torch cuDNN in the same call. README.md says why.
# Binaries: bash bench/results/2026-12-05-h200-run70/build.sh (.dist = HEAD, .dist-A = HEAD + the patch).
#   call 1: bash bench/results/2026-12-05-h200-run70/run70.sh bench   carry [".dist", ".dist-A"]   ~430 s
#   call 2: bash bench/results/2026-12-05-h200-run70/run70.sh tests   carry [".dist", ".dist-A"]   ~300 s
#   after a landing: run70.sh confirm, carry [".dist"] (~450 s): every [fwd] GPU test, one pass, torch cuDNN
#   the landing against the main it replaces: run70.sh land, carry [".dist", ".dist-0"] (~400 s)
# bench: two alternating passes, bf16 B4 H8 forward, flashjit-bench's float64 check on (rel_err per row: the
# forced tiles are not the policy's), one JSON per (config, group, pass); torch cuDNN on the same cells between
# the passes. Configs: main = .dist, its policy; A = .dist-A, its policy; sk = .dist with the split tile forced
# (FLASHJIT_FWD_TILE) under the stream-K schedule (FLASHJIT_FWD_SCHEDULE=streamk: split wherever the tiles leave
# a partial round, not only where the policy's 10% rule says so).
# tests: the new _sk GPU test on .dist (head_dim 128's split tile), then every [fwd] GPU test on .dist-A.
# Each stage's files are packed as they finish (the device returns at most 8 files); a cut call keeps them.
set -uo pipefail
mode=${1:-bench}
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
before() { [ "$(el)" -lt "$1" ]; }
O=$OUT/run70; mkdir -p $O
D="--dtypes bfloat16 --head-dims 128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
S="--dtypes bfloat16 --head-dims 64 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
K="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 1 --modes fwd"
dists=".dist .dist-A"; [ "$mode" = confirm ] && dists=.dist; [ "$mode" = land ] && dists=".dist .dist-0"
for d in $dists; do [ -x $d/bin/flashjit-bench ] || { echo "run70: no $d/bin/flashjit-bench" >&2; exit 1; }; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu-$mode.txt 2>&1
pack() { tar czf $OUT/run70-$1.tgz -C $O . && rm -f $O/*; }

if [ "$mode" = land ]; then  # the landing (.dist) against the main it replaces (.dist-0), carry [".dist", ".dist-0"]
  FLASHJIT_CACHE_DIR=/tmp/fjc-land timeout 240 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/land-fwd-tests.txt 2>&1
  echo "[fwd] exit $? (t=$(el))"; tail -2 $O/land-fwd-tests.txt
  pack land-tests
  Q="--dtypes bfloat16 --head-dims 128 --seqs 600 --seq-k 1500,3000 --causal 0 --modes fwd"
  X1="--dtypes bfloat16 --head-dims 64 --seqs 1500,4096 --causal 1 --modes fwd"
  X2="--dtypes bfloat16 --head-dims 256 --seqs 4096 --causal 0,1 --modes fwd"
  X3="--dtypes float32 --head-dims 128 --seqs 1500,8192 --causal 0 --modes fwd"
  lpass() {
    for g in D Q X1 X2 X3 S K; do
      for c in new old; do
        [ $c = old ] && { [ $g = S ] || [ $g = K ]; } && continue  # both measured against it in call 1
        before 545 || { echo "skipped $c $g pass $1"; continue; }
        dist=.dist; [ $c = old ] && dist=.dist-0
        FLASHJIT_CACHE_DIR=/tmp/fjc-$c timeout 80 $dist/bin/flashjit-bench ${!g} --tag $c --out $O/$c-$g-p$1.json \
          > $O/$c-$g-p$1.out 2>&1 || echo "$c $g pass $1 failed $?"
      done
    done
    echo "pass $1 (t=$(el))"
    pack lp$1
  }
  lpass 1
  for g in D Q S K; do
    before 500 && { timeout 60 python3 bench/peers.py --framework torch --impls torch_cudnn ${!g} --out $O/torch-$g-land.json \
      > $O/torch-$g-land.out 2>&1; echo "torch $g exit $? (t=$(el))"; }
  done
  pack land-torch
  lpass 2
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >> $O/gpu-$mode.txt 2>&1
  pack land-end
  exit 0
fi
if [ "$mode" = confirm ]; then  # after a landing: every [fwd] GPU test on .dist, one pass of its policy, torch cuDNN
  FLASHJIT_CACHE_DIR=/tmp/fjc-confirm timeout 260 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/confirm-fwd-tests.txt 2>&1
  echo "[fwd] exit $? (t=$(el))"; tail -2 $O/confirm-fwd-tests.txt
  pack confirm-tests
  for g in D S K; do
    FLASHJIT_CACHE_DIR=/tmp/fjc-confirm timeout 80 .dist/bin/flashjit-bench ${!g} --tag landed --out $O/landed-$g-p3.json \
      > $O/landed-$g-p3.out 2>&1 || echo "landed $g failed $?"
  done
  echo "landed (t=$(el))"; grep -h "TFLOP/s (" $O/landed-*.out | awk '{print $3, $4, $5, $6, $(NF-2)}'
  for g in D S K; do
    before 560 && { timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn ${!g} --out $O/torch-$g-p3.json \
      > $O/torch-$g-p3.out 2>&1; echo "torch $g exit $? (t=$(el))"; }
  done
  grep -h "TFLOP" $O/torch-*.out | tail -9
  pack confirm
  exit 0
fi
if [ "$mode" = tests ]; then
  FLASHJIT_CACHE_DIR=/tmp/fjc-main timeout 200 .dist/bin/flashjit_gpu_tests "forward: the 16-bit kernels with split tiles*" \
    -r compact > $O/main-sk-test.txt 2>&1
  echo "main _sk test exit $? (t=$(el))"; tail -2 $O/main-sk-test.txt
  FLASHJIT_CACHE_DIR=/tmp/fjc-A timeout 320 .dist-A/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/A-fwd-tests.txt 2>&1
  echo "A [fwd] exit $? (t=$(el))"; tail -2 $O/A-fwd-tests.txt
  pack tests
  exit 0
fi

D_SK=bm128_bn128_w12_s2_wg_sk
S_SK=bm192_bn128_w16_s4_wg_sk
# config group pass: one flashjit-bench process
bench() {
  local dist=.dist tile= sched=
  case $1 in
    A) dist=.dist-A ;;
    sk) sk=${2}_SK; tile=${!sk}; sched=streamk ;;
  esac
  FLASHJIT_FWD_TILE=$tile FLASHJIT_FWD_SCHEDULE=$sched FLASHJIT_CACHE_DIR=/tmp/fjc-${dist#.} timeout 90 \
    $dist/bin/flashjit-bench ${!2} --tag $1 --out $O/$1-$2-p$3.json > $O/$1-$2-p$3.out 2>&1 || echo "$1 $2 pass $3 failed $?"
}
pass() {
  for g in D S K; do
    for c in main A sk; do
      [ $g = K ] && [ $c = sk ] && continue  # causal kernels cannot split
      before 560 || { echo "skipped $c $g pass $1"; continue; }
      bench $c $g $1
    done
  done
  echo "pass $1 (t=$(el))"; grep -h "TFLOP/s (" $O/*-p$1.out | awk '{print $3, $4, $5, $6, $(NF-2)}'
  pack p$1
}
pass 1
for g in D S K; do
  before 470 && { timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn ${!g} --out $O/torch-$g.json \
    > $O/torch-$g.out 2>&1; echo "torch $g exit $? (t=$(el))"; }
done
grep -h "TFLOP" $O/torch-*.out | tail -9
pack torch
pass 2
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >> $O/gpu-$mode.txt 2>&1
pack end
