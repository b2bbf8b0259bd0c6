#!/usr/bin/env bash
# Run 81 (2026-12-07): run 78's L (the lse written after O's TMA store) plus programmatic dependent launch (P:
# griddepcontrol in the Hopper forward, cuLaunchKernelEx with programmatic stream serialization where the call queues
# nothing before the kernel), before they land: the [fwd] GPU tests on it (warm cache, P on), then two rounds of
# issue 6's cells: new (.dist, P on), new with FLASHJIT_PDL=0 (L alone, at D), main before both (.dist-old), torch
# (cuDNN, flash) in the same rounds; then compute-sanitizer racecheck on the [sanitize] cases while time is left.
# carry [".dist", ".dist-old"]; ~300-400 s; every stage packs its own tarball.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
before() { [ "$(el)" -lt "$1" ]; }
O=$OUT/run81; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
pack() { tar czf $OUT/run81-$1.tgz -C $O . && rm -f $O/*; }
.dist/bin/flashjit-warmup --grid all --arch sm90 --list 2>/dev/null | grep '^fwd' > $O/fwd-specs.txt
FLASHJIT_CACHE_DIR=/tmp/fjt .dist/bin/flashjit-warmup -j16 $(cat $O/fwd-specs.txt) > $O/warmup-new.txt 2>&1
echo "warm-up exit $? (t=$(el))"; tail -2 $O/warmup-new.txt
FLASHJIT_CACHE_DIR=/tmp/fjt timeout 200 .dist/bin/flashjit_gpu_tests "[fwd]" --durations yes > $O/fwd-tests-new.txt 2>&1
echo "[fwd] on new exit $? (t=$(el))"; tail -2 $O/fwd-tests-new.txt
pack tests
D="--dtypes bfloat16 --head-dims 128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
S="--dtypes bfloat16 --head-dims 64 --seqs 4096 --causal 0 --modes fwd"
K="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 1 --modes fwd"
T="--dtypes float32 --head-dims 128 --seqs 8192 --causal 0 --modes fwd"
for p in 1 2; do
  before 300 || break
  for g in D S K T; do
    cs="new nopdl old"; [ $p = 2 ] && cs="old nopdl new"  # alternate which goes first
    for c in $cs; do
      [ $c = nopdl ] && [ $g != D ] && continue
      d=.dist; [ $c = old ] && d=.dist-old; pdl=1; [ $c = nopdl ] && pdl=0
      FLASHJIT_PDL=$pdl timeout 60 $d/bin/flashjit-bench ${!g} --tag $c --out $O/$c-$g-p$p.json \
        > $O/$c-$g-p$p.out 2>&1 || echo "$c $g pass $p failed $?"
    done
  done
  echo "flashjit pass $p (t=$(el))"; grep -h "TFLOP/s (" $O/*-p$p.out | awk '{print $2, $4, $5, $6, $(NF-3)}'
  timeout 80 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash $D \
    --out $O/torch-D-p$p.json > $O/torch-D-p$p.out 2>&1 || echo "torch D pass $p exit $?"
  echo "torch pass $p (t=$(el))"; grep -h "TFLOP/s (" $O/torch-*-p$p.out | awk '{print $2, $4, $5, $6, $(NF-3)}'
  pack p$p
done
left=$(( 380 - $(el) ))
if [ $left -gt 40 ]; then
  FLASHJIT_CACHE_DIR=/tmp/fjt timeout $left compute-sanitizer --tool racecheck --error-exitcode 99 \
    .dist/bin/flashjit_gpu_tests "[sanitize]" -r compact > $O/sanitize-racecheck.txt 2>&1
  echo "racecheck exit $? (t=$(el))"; grep -E "RACECHECK SUMMARY|passed|failed" $O/sanitize-racecheck.txt | tail -2
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >> $O/gpu.txt 2>&1
pack end
