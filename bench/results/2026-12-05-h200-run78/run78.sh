#!/usr/bin/env bash
# Run 78 (prepared 2026-12-05, not yet run): two variants of main (84ea3fc+), against main in the same call:
#  S (sk-ahead.patch): the split (_sk) d128 tile with K a step ahead of V and the next piece's Q in a second
#    buffer: does stream-K pay at s4096 once a piece's first Q and K are no longer cold?
#  L (lse-after-o.patch): every Hopper forward writes the lse after O's TMA store, so the fence before that
#    store (MEMBAR.ALL.CTA) no longer waits for the lse's global stores (a shorter epilogue at every tile).
# Then the [fwd] GPU tests on S and on L, and racecheck on S's [sanitize] cases while time is left.
# carry [".dist-KQ", ".dist-S", ".dist-L"] (.dist-KQ = main, the others main + one patch each); ~560 s.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
before() { [ "$(el)" -lt "$1" ]; }
O=$OUT/run78; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
.dist-S/bin/flashjit-warmup --grid all --arch sm90 --list 2>/dev/null | grep '^fwd' > $O/fwd-specs.txt
for c in S L; do
  FLASHJIT_CACHE_DIR=/tmp/fjc-$c .dist-$c/bin/flashjit-warmup -j16 $(cat $O/fwd-specs.txt) > $O/warmup-$c.txt 2>&1
done
echo "warm-up (t=$(el))"
A="--dtypes bfloat16 --head-dims 128 --seqs 3000,4096,8192 --causal 0 --modes fwd"   # auto: plain to 4096, _sk at 8192
T="--dtypes bfloat16 --head-dims 128 --seqs 3000,4096 --causal 0 --modes fwd"        # _sk forced
C="--dtypes bfloat16 --head-dims 64 --seqs 1500,4096 --causal 0 --modes fwd"         # three consumers (4096: _sk)
K="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 1 --modes fwd"
fj() {  # pass, group, configs...
  local p=$1 g=$2; shift 2
  for c in "$@"; do
    before ${DEADLINE:-290} || return
    local tile=""; [ $g = T ] && tile=bm128_bn128_w12_s2_wg_sk
    FLASHJIT_FWD_TILE=$tile timeout 60 .dist-$c/bin/flashjit-bench ${!g} --no-graph --tag $c \
      --out $O/$c-$g-p$p.json > $O/$c-$g-p$p.out 2>&1 || echo "$c $g pass $p failed $?"
  done
}
fj 1 A KQ S L; fj 1 T S KQ; fj 1 C L KQ; fj 1 K KQ L
fj 2 A L S KQ; fj 2 T KQ S; fj 2 C KQ L; fj 2 K L KQ
echo "passes (t=$(el))"
python3 bench/results/2026-12-05-h200-run70/summarize.py $O > $O/summary.txt 2>&1; cat $O/summary.txt
for cd in S:410 L:520; do  # config:deadline
  c=${cd%:*}; deadline=${cd#*:}
  before $(( deadline - 60 )) || continue
  FLASHJIT_CACHE_DIR=/tmp/fjc-$c timeout $(( deadline - $(el) )) .dist-$c/bin/flashjit_gpu_tests "[fwd]" \
    --durations yes > $O/fwd-tests-$c.txt 2>&1
  echo "[fwd] on $c exit $? (t=$(el))"; tail -2 $O/fwd-tests-$c.txt
done
left=$(( 575 - $(el) ))
[ $left -gt 30 ] && { FLASHJIT_CACHE_DIR=/tmp/fjc-S timeout $left compute-sanitizer --tool racecheck \
  --error-exitcode 99 .dist-S/bin/flashjit_gpu_tests "[sanitize]" -r compact > $O/sanitize-racecheck-S.txt 2>&1
  echo "racecheck S exit $? (t=$(el))"; grep -E "RACECHECK SUMMARY|passed|failed" $O/sanitize-racecheck-S.txt | tail -2; }
tar czf $OUT/run78.tgz -C $O .
