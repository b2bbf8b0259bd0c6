#!/usr/bin/env bash
# Run 77 call A (2026-12-05; an H100 while no H200 was lent): KQ against main in the same call where KQ changes a
# kernel: d128 non-causal 1500-4096, d64 / d128 at 1024 and 2048 (two-consumer tiles, Q ahead), TF32 d128 8192,
# then d128 4096 twice more each. carry [".dist", ".dist-KQ"]; ~250 s.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
before() { [ "$(el)" -lt "$1" ]; }
O=$OUT/run77a; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
D="--dtypes bfloat16 --head-dims 128 --seqs 1500,3000,4096 --causal 0 --modes fwd"
E="--dtypes bfloat16 --head-dims 64,128 --seqs 1024,2048 --causal 0 --modes fwd"
T="--dtypes float32 --head-dims 128 --seqs 8192 --causal 0 --modes fwd"
F="--dtypes bfloat16 --head-dims 128 --seqs 4096 --causal 0 --modes fwd"
fj() {  # pass, group, configs...
  local p=$1 g=$2; shift 2
  for c in "$@"; do
    before ${DEADLINE:-330} || return
    local dist=.dist; [ $c != main ] && dist=.dist-$c
    timeout 60 $dist/bin/flashjit-bench ${!g} --no-graph --tag $c --out $O/$c-$g-p$p.json > $O/$c-$g-p$p.out 2>&1 \
      || echo "$c $g pass $p failed $?"
  done
}
fj 1 D KQ main; fj 1 E main KQ; fj 1 T KQ main
echo "pass 1 (t=$(el))"
fj 2 D main KQ; fj 2 E KQ main; fj 2 T main KQ
echo "pass 2 (t=$(el))"
fj 3 F KQ main; fj 4 F main KQ
echo "passes 3-4 (t=$(el))"
python3 bench/results/2026-12-05-h200-run70/summarize.py $O | tee $O/summary.txt
tar czf $OUT/run77a.tgz -C $O .
