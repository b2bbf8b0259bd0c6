#!/usr/bin/env bash
# Run 76 (2026-12-05): the Hopper forward's producer with K a step ahead of V (run 75's, fixed for pieces without
# keys, only in non-causal two-consumer d128 kernels without split tiles and TF32: K2) and with that plus a second
# Q buffer, the next tile's Q loaded as a tile starts (KQ: 16-bit non-causal two-consumer kernels with O apart),
# against main in the same call; KQ's [fwd] GPU tests (warm cache) and racecheck on the [sanitize] cases.
# carry [".dist", ".dist-K2", ".dist-KQ"]; ~560 s.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run76; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
.dist-KQ/bin/flashjit-warmup --grid all --arch sm90 --list 2>/dev/null | grep '^fwd' > $O/fwd-specs.txt
FLASHJIT_CACHE_DIR=/tmp/fjc-tests .dist-KQ/bin/flashjit-warmup -j16 $(cat $O/fwd-specs.txt) > $O/warmup.txt 2>&1
echo "warm-up exit $? (t=$(el))"; tail -1 $O/warmup.txt
D="--dtypes bfloat16 --head-dims 128 --seqs 1500,3000,4096 --causal 0 --modes fwd"
F="--dtypes float32 --head-dims 128 --seqs 8192 --causal 0 --modes fwd"
G="--dtypes bfloat16 --head-dims 128 --seqs 600 --seq-k 1500,3000 --causal 0 --modes fwd"
T="--dtypes bfloat16 --head-dims 128 --seqs 4096 --causal 0 --modes fwd"
bench() {  # pass, group, configs...
  local p=$1 g=$2; shift 2
  for c in "$@"; do
    [ $(el) -gt ${DEADLINE:-540} ] && return
    dist=.dist; [ $c != main ] && dist=.dist-$c
    timeout 60 $dist/bin/flashjit-bench ${!g} --no-graph --tag $c --out $O/$c-$g-p$p.json > $O/$c-$g-p$p.out 2>&1 \
      || echo "$c $g pass $p failed $?"
  done
}
bench 1 D KQ K2 main; bench 1 F K2 main; bench 1 G KQ main
echo "pass 1 (t=$(el))"
FLASHJIT_CACHE_DIR=/tmp/fjc-tests timeout 170 .dist-KQ/bin/flashjit_gpu_tests "[fwd]" --durations yes > $O/fwd-tests-KQ.txt 2>&1
echo "[fwd] on KQ exit $? (t=$(el))"; tail -3 $O/fwd-tests-KQ.txt
bench 2 D main K2 KQ; bench 2 F main K2
echo "pass 2 (t=$(el))"
bench 3 T K2 KQ main; bench 4 T main KQ K2
echo "pass 3-4 (t=$(el))"
python3 bench/results/2026-12-05-h200-run70/summarize.py $O > $O/summary.txt 2>&1; cat $O/summary.txt
left=$(( 585 - $(el) ))
if [ $left -gt 30 ]; then
  FLASHJIT_CACHE_DIR=/tmp/fjc-tests timeout $left compute-sanitizer --tool racecheck --error-exitcode 99 \
    .dist-KQ/bin/flashjit_gpu_tests "[sanitize]" -r compact > $O/sanitize-racecheck.txt 2>&1
  echo "racecheck exit $? (t=$(el))"; grep -E "RACECHECK SUMMARY|passed|failed" $O/sanitize-racecheck.txt | tail -2
fi
