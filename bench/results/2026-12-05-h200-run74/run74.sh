#!/usr/bin/env bash
# Run 74 (2026-12-05): the cross-tile pipeline (kQBuffers 2: a tile's last P V issued with the next tile's first
# S, whose Q the producer loads a tile ahead) against main in the same call: first every [fwd] GPU test on it,
# then two passes of A/B timings, then compute-sanitizer on the [sanitize] cases while time is left.
# carry [".dist", ".dist-X"]; ~450 s. .dist = main (48ce6d2 kernels), .dist-X = main + kQBuffers.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run74; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
FLASHJIT_CACHE_DIR=/tmp/fjc-tests timeout 240 .dist-X/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd-tests-X.txt 2>&1
echo "[fwd] on X exit $? (t=$(el))"; tail -2 $O/fwd-tests-X.txt
D="--dtypes bfloat16 --head-dims 128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
P="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 0 --modes fwd"   # the plain tile forced
Q="--dtypes bfloat16 --head-dims 128 --seqs 600 --seq-k 1500,3000 --causal 0 --modes fwd"
S="--dtypes bfloat16 --head-dims 64 --seqs 3000 --seq-k 600 --causal 0 --modes fwd"
for p in 1 2; do
  for g in D P Q S; do
    for c in X main; do
      dist=.dist; [ $c = X ] && dist=.dist-X
      tile=""; [ $g = P ] && tile=bm128_bn128_w12_s2_wg
      FLASHJIT_FWD_TILE=$tile FLASHJIT_CACHE_DIR=/tmp/fjc-$c timeout 60 $dist/bin/flashjit-bench ${!g} --tag $c \
        --out $O/$c-$g-p$p.json > $O/$c-$g-p$p.out 2>&1 || echo "$c $g pass $p failed $?"
    done
  done
  echo "pass $p (t=$(el))"
done
python3 bench/results/2026-12-05-h200-run70/summarize.py $O | tee $O/summary.txt
left=$(( 560 - $(el) ))
if [ $left -gt 60 ]; then
  for tool in racecheck memcheck; do
    left=$(( 560 - $(el) )); [ $left -lt 30 ] && break
    FLASHJIT_CACHE_DIR=/tmp/fjc-tests timeout $left compute-sanitizer --tool $tool --error-exitcode 99 \
      .dist-X/bin/flashjit_gpu_tests "[sanitize]" -r compact > $O/sanitize-$tool.txt 2>&1
    echo "$tool exit $? (t=$(el))"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" $O/sanitize-$tool.txt | tail -3
  done
fi
tar czf $OUT/run74.tgz -C $O . && echo "packed (t=$(el))"
