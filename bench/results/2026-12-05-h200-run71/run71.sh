#!/usr/bin/env bash
# Run 71: where a split tile's time goes. .dist-T = main + trace.patch (flashjit-bench only): consumer 0's thread
# 0 of every CTA of the 41st launch writes clock64 at each piece's take, main-loop end and epilogue end, and
# %globaltimer at the CTA's start and end; FLASHJIT_TRACE=1 prints it after the 60th launch (trace71.py reads it).
# bf16 B4 H8 d128 non-causal forward, plain tile (bm128_bn128_w12_s2_wg, persistent) and split tile (_sk under
# FLASHJIT_FWD_SCHEDULE=streamk) at 1500 / 3000 / 4096 / 8192; the untraced .dist beside at 4096.
# carry [".dist", ".dist-T"]; ~120 s.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run71; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
PLAIN=bm128_bn128_w12_s2_wg; SK=bm128_bn128_w12_s2_wg_sk
one() {  # dist tag seq tile schedule
  local dist=$1 tag=$2 seq=$3 tile=$4 sched=$5 tr=; [ $dist = .dist-T ] && tr=1
  FLASHJIT_TRACE=$tr FLASHJIT_FWD_TILE=$tile FLASHJIT_FWD_SCHEDULE=$sched FLASHJIT_CACHE_DIR=/tmp/fjc${dist#.} timeout 60 \
    $dist/bin/flashjit-bench --dtypes bfloat16 --head-dims 128 --seqs $seq --causal 0 --modes fwd --reps 5 --target-ms 25 \
    --tag $tag --out $O/$tag-$seq.json > $O/$tag-$seq.out 2>&1 || echo "$tag $seq failed $?"
  echo "$tag $seq (t=$(el)): $(grep -h 'TFLOP/s (' $O/$tag-$seq.out | awk "{print \$(NF-3)}")"
}
for s in 4096 8192 1500 3000; do
  for v in "tplain $PLAIN persistent" "tsk $SK streamk"; do
    set -- $v; [ "$(el)" -lt "${BUDGET_S:-200}" ] && one .dist-T $1 $s $2 $3
  done
done
[ "$(el)" -lt "${BUDGET_S:-200}" ] && one .dist plain 4096 $PLAIN persistent
[ "$(el)" -lt "${BUDGET_S:-200}" ] && one .dist sk 4096 $SK streamk
tar czf $OUT/run71.tgz -C $O .
