#!/usr/bin/env bash
# Run 72 (2026-12-05): P's row sums on the tensor cores (R: P x a ones tile, an m64n8k16 wgmma beside each
# P V k step, instead of 64 FADDs per K/V step and thread), against main in the same call, then run 71's trace,
# then every [fwd] GPU test on the winner (R if it is faster at d128 4096 and 8192 in both passes, else main).
# carry [".dist", ".dist-R", ".dist-T"]; ~480 s. Files packed per stage (the device returns at most 8).
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run72; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
pack() { tar czf $OUT/run72-$1.tgz -C $O . && rm -f $O/*; }
D="--dtypes bfloat16 --head-dims 128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
S="--dtypes bfloat16 --head-dims 64 --seqs 1500,4096,8192 --causal 0 --modes fwd"
K="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 1 --modes fwd"
X="--dtypes bfloat16 --head-dims 256 --seqs 4096 --causal 0,1 --modes fwd"
for p in 1 2; do
  for g in D S K X; do
    for c in R main; do
      dist=.dist; [ $c = R ] && dist=.dist-R
      FLASHJIT_CACHE_DIR=/tmp/fjc-$c timeout 60 $dist/bin/flashjit-bench ${!g} --tag $c --out $O/$c-$g-p$p.json \
        > $O/$c-$g-p$p.out 2>&1 || echo "$c $g pass $p failed $?"
    done
  done
  echo "pass $p (t=$(el))"
done
python3 - $O <<'PY' > $O/verdict.txt
import json, sys, glob, os
t = {}
for f in glob.glob(sys.argv[1] + "/*-D-p*.json"):
    c, _, p = os.path.basename(f)[:-5].split("-")
    for r in json.load(open(f))["results"]:
        if r.get("tflops"): t[(c, p, r["seq"])] = r["tflops"]
for k in sorted(t): print(*k, f"{t[k]:.1f}")
wins = all(t.get(("R", p, s), 0) > t.get(("main", p, s), 1e9) for p in ("p1", "p2") for s in (4096, 8192))
print("winner", "R" if wins else "main")
PY
tail -1 $O/verdict.txt
pack ab
W=$(tar xzf $OUT/run72-ab.tgz -O ./verdict.txt | tail -1 | awk '{print $2}')
BUDGET_S=130 bash bench/results/2026-12-05-h200-run71/run71.sh; echo "trace (t=$(el))"
wd=.dist; [ "$W" = R ] && wd=.dist-R
left=$(( 575 - $(el) ))
FLASHJIT_CACHE_DIR=/tmp/fjc-tests timeout $left $wd/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd-tests-$W.txt 2>&1
echo "[fwd] on $W exit $? (t=$(el))"; tail -3 $O/fwd-tests-$W.txt
pack tests
