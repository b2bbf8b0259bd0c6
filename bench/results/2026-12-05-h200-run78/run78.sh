#!/usr/bin/env bash
# Run 78 (prepared 2026-12-05, not yet run): the split (_sk) d128 tile with K a step ahead of V and the next
# piece's Q in a second buffer (sk-ahead.patch on 84ea3fc+), against main in the same call: does stream-K pay at
# s4096 once a piece's first Q and K are no longer cold? Then S's [fwd] tests and racecheck on [sanitize].
# carry [".dist-KQ", ".dist-S"] (.dist-KQ = main, .dist-S = main + the patch); ~450 s.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
before() { [ "$(el)" -lt "$1" ]; }
O=$OUT/run78; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
.dist-S/bin/flashjit-warmup --grid all --arch sm90 --list 2>/dev/null | grep '^fwd' > $O/fwd-specs.txt
FLASHJIT_CACHE_DIR=/tmp/fjc-tests .dist-S/bin/flashjit-warmup -j16 $(cat $O/fwd-specs.txt) > $O/warmup.txt 2>&1
A="--dtypes bfloat16 --head-dims 128 --seqs 3000,4096,8192 --causal 0 --modes fwd"   # auto: plain to 4096, _sk at 8192
T="--dtypes bfloat16 --head-dims 128 --seqs 3000,4096 --causal 0 --modes fwd"        # _sk forced
fj() {  # pass, group, configs...
  local p=$1 g=$2; shift 2
  for c in "$@"; do
    before ${DEADLINE:-300} || return
    local tile=""; [ $g = T ] && tile=bm128_bn128_w12_s2_wg_sk
    FLASHJIT_FWD_TILE=$tile timeout 60 .dist-$c/bin/flashjit-bench ${!g} --no-graph --tag $c \
      --out $O/$c-$g-p$p.json > $O/$c-$g-p$p.out 2>&1 || echo "$c $g pass $p failed $?"
  done
}
fj 1 A KQ S; fj 1 T S KQ; fj 2 A S KQ; fj 2 T KQ S; fj 3 T S KQ
echo "passes (t=$(el))"
python3 bench/results/2026-12-05-h200-run70/summarize.py $O > $O/summary.txt 2>&1; cat $O/summary.txt
FLASHJIT_CACHE_DIR=/tmp/fjc-tests timeout $(( 470 - $(el) )) .dist-S/bin/flashjit_gpu_tests "[fwd]" --durations yes \
  > $O/fwd-tests-S.txt 2>&1
echo "[fwd] on S exit $? (t=$(el))"; tail -2 $O/fwd-tests-S.txt
left=$(( 570 - $(el) ))
[ $left -gt 30 ] && { FLASHJIT_CACHE_DIR=/tmp/fjc-tests timeout $left compute-sanitizer --tool racecheck \
  --error-exitcode 99 .dist-S/bin/flashjit_gpu_tests "[sanitize]" -r compact > $O/sanitize-racecheck.txt 2>&1
  echo "racecheck exit $? (t=$(el))"; grep -E "RACECHECK SUMMARY|passed|failed" $O/sanitize-racecheck.txt | tail -2; }
tar czf $OUT/run78.tgz -C $O .
