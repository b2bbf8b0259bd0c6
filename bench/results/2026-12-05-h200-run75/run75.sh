#!/usr/bin/env bash
# Run 75 (2026-12-05): the Hopper forward's producer issuing K a step ahead of V (K-ahead: each K as soon as its
# slot frees, the next tile's first K before this tile's last V), against main in the same call: the forward
# kernels warmed into a cache, every [fwd] GPU test on K-ahead, two passes of A/B timings over the Hopper
# forward's kernels, then compute-sanitizer racecheck on the [sanitize] cases while time is left.
# carry [".dist", ".dist-K"]; ~480 s. .dist = main (48ce6d2 kernels), .dist-K = main + the producer change.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run75; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
.dist-K/bin/flashjit-warmup --grid all --arch sm90 --list 2>/dev/null | grep '^fwd' > $O/fwd-specs.txt
FLASHJIT_CACHE_DIR=/tmp/fjc-tests .dist-K/bin/flashjit-warmup -j16 $(cat $O/fwd-specs.txt) > $O/warmup.txt 2>&1
echo "warm-up exit $? (t=$(el))"; tail -2 $O/warmup.txt
FLASHJIT_CACHE_DIR=/tmp/fjc-tests timeout 270 .dist-K/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd-tests-K.txt 2>&1
echo "[fwd] on K exit $? (t=$(el))"; tail -2 $O/fwd-tests-K.txt
D="--dtypes bfloat16 --head-dims 128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
C="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 1 --modes fwd"
S="--dtypes bfloat16 --head-dims 64 --seqs 1500,4096 --causal 0 --modes fwd"
X="--dtypes bfloat16 --head-dims 256 --seqs 4096 --causal 0 --modes fwd"
F="--dtypes float32 --head-dims 128 --seqs 8192 --causal 0 --modes fwd"
T="--dtypes bfloat16 --head-dims 128 --seqs 4096 --causal 0 --modes fwd"   # the split tile forced
for p in 1 2; do
  for g in D T C S X F; do
    for c in K main; do
      [ $(el) -gt 520 ] && break 3
      dist=.dist; [ $c = K ] && dist=.dist-K
      tile=""; [ $g = T ] && tile=bm128_bn128_w12_s2_wg_sk
      FLASHJIT_FWD_TILE=$tile FLASHJIT_CACHE_DIR=/tmp/fjc-$c timeout 60 $dist/bin/flashjit-bench ${!g} --tag $c --out $O/$c-$g-p$p.json \
        > $O/$c-$g-p$p.out 2>&1 || echo "$c $g pass $p failed $?"
    done
  done
  echo "pass $p (t=$(el))"
done
python3 bench/results/2026-12-05-h200-run70/summarize.py $O | tee $O/summary.txt
left=$(( 565 - $(el) ))
if [ $left -gt 40 ]; then
  FLASHJIT_CACHE_DIR=/tmp/fjc-tests timeout $left compute-sanitizer --tool racecheck --error-exitcode 99 \
    .dist-K/bin/flashjit_gpu_tests "[sanitize]" -r compact > $O/sanitize-racecheck.txt 2>&1
  echo "racecheck exit $? (t=$(el))"; grep -E "RACECHECK SUMMARY|passed|failed" $O/sanitize-racecheck.txt | tail -2
fi
tar czf $OUT/run75.tgz -C $O . && echo "packed (t=$(el))"
