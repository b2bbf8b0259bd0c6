#!/usr/bin/env bash
# Device run 14: dynamic persistent schedule (global tile counter) of the Hopper forward; tests (static + dynamic
# schedules, the whole [fwd] suite on the dynamic one); A/B of the schedules (one binary) and the previous commit.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
B=.dist/bin; O=$OUT/r14; mkdir -p $O
export FLASHJIT_CACHE_DIR=/tmp/fjc14
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader | tee $O/gpu.txt
timeout 120 $B/flashjit_gpu_tests "forward: the persistent Hopper schedules*" -r compact > $O/persist_test.txt 2>&1; echo "persist test exit $? (t=$(el))"; grep -E "FAILED|failed" -A6 $O/persist_test.txt | head -30; tail -2 $O/persist_test.txt
FLASHJIT_FWD_SCHEDULE=dynamic timeout 200 $B/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd_dynamic.txt 2>&1; echo "[fwd] dynamic exit $? (t=$(el))"; grep -E "FAILED|failed" -A6 $O/fwd_dynamic.txt | head -30; tail -2 $O/fwd_dynamic.txt
R="--target-ms 15 --reps 5 --no-check"
G="--dtypes bfloat16 --head-dims 64,128 --seqs 600,640,1500,3000,4096,8192 --causal 0,1 --modes fwd $R"
for pass in dynamic base persistent tiles dynamic2; do
  S=${pass%2}; BIN=$B; [ $pass = base ] && { BIN=.dist-base/bin; S=auto; }
  FLASHJIT_FWD_SCHEDULE=$S timeout 150 $BIN/flashjit-bench $G --tag schedule=$pass --out $O/bf16_$pass.json > $O/bf16_$pass.txt 2>&1; echo "bf16 $pass exit $? (t=$(el))"
done
G2="--dtypes bfloat16 --head-dims 256 --seqs 1500,3000,4096,8192 --causal 0,1 --modes fwd $R"
G3="--dtypes float32 --head-dims 64,128 --seqs 1500,3000,8192 --causal 0,1 --modes fwd $R"
for S in dynamic tiles persistent; do
  FLASHJIT_FWD_SCHEDULE=$S timeout 120 $B/flashjit-bench $G2 --tag schedule=$S --out $O/d256_$S.json > $O/d256_$S.txt 2>&1; echo "d256 $S exit $? (t=$(el))"
  FLASHJIT_FWD_SCHEDULE=$S timeout 120 $B/flashjit-bench $G3 --tag schedule=$S --out $O/f32_$S.json > $O/f32_$S.txt 2>&1; echo "f32 $S exit $? (t=$(el))"
done
python3 - <<'PY'
import json,glob,os
O=os.environ['OUT']+'/r14'
t={}
for f in sorted(glob.glob(O+'/*.json')):
    k=os.path.basename(f)[:-5].split('_',1)[1]
    try: rows=json.load(open(f))['results']
    except Exception: continue
    for r in rows: t.setdefault((r['dtype'][:4],r['head_dim'],r['causal'],r['seq']),{})[k]=r.get('tflops')
for key in sorted(t): print(key, {k:(round(v) if v else v) for k,v in t[key].items()})
PY
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
tar czf $OUT/r14.tgz -C $OUT r14 && rm -rf $O && echo packed
