#!/usr/bin/env bash
# Device run 15: run 14 again after the fix (the dynamic schedule's scratch no longer posed as V^T for 16-bit inputs):
# tests (static + dynamic, [fwd] on the dynamic schedule), A/B of the three schedules in one binary.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
B=.dist/bin; O=$OUT/r15; mkdir -p $O
export FLASHJIT_CACHE_DIR=/tmp/fjc15
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader | tee $O/gpu.txt
timeout 60 $B/flashjit_gpu_tests "forward: the persistent Hopper schedules*" -r compact > $O/persist_test.txt 2>&1; echo "persist test exit $? (t=$(el))"; grep -E "FAILED|failed" -A6 $O/persist_test.txt | head -20; tail -2 $O/persist_test.txt
FLASHJIT_FWD_SCHEDULE=dynamic timeout 150 $B/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd_dynamic.txt 2>&1; echo "[fwd] dynamic exit $? (t=$(el))"; grep -E "FAILED|failed" -A6 $O/fwd_dynamic.txt | head -20; tail -2 $O/fwd_dynamic.txt
R="--target-ms 15 --reps 5 --no-check"
G="--dtypes bfloat16 --head-dims 64,128 --seqs 600,1500,3000,4096,8192 --causal 0,1 --modes fwd $R"
for S in dynamic tiles persistent; do
  FLASHJIT_FWD_SCHEDULE=$S timeout 60 $B/flashjit-bench $G --tag schedule=$S --out $O/bf16_$S.json > $O/bf16_$S.txt 2>&1; echo "bf16 $S exit $? (t=$(el))"
done
G2="--dtypes bfloat16 --head-dims 256 --seqs 1500,4096,8192 --causal 0,1 --modes fwd $R"
G3="--dtypes float32 --head-dims 64,128 --seqs 1500,8192 --causal 0,1 --modes fwd $R"
for S in dynamic tiles persistent; do
  FLASHJIT_FWD_SCHEDULE=$S timeout 40 $B/flashjit-bench $G2 --tag schedule=$S --out $O/d256_$S.json > $O/d256_$S.txt 2>&1; echo "d256 $S exit $? (t=$(el))"
  FLASHJIT_FWD_SCHEDULE=$S timeout 40 $B/flashjit-bench $G3 --tag schedule=$S --out $O/f32_$S.json > $O/f32_$S.txt 2>&1; echo "f32 $S exit $? (t=$(el))"
done
python3 - <<'PY'
import json,glob,os
O=os.environ['OUT']+'/r15'
t={}
for f in sorted(glob.glob(O+'/*.json')):
    k=os.path.basename(f)[:-5].split('_',1)[1]
    try: rows=json.load(open(f))['results']
    except Exception: continue
    for r in rows: t.setdefault((r['dtype'][:4],r['head_dim'],r['causal'],r['seq']),{})[k]=r.get('tflops')
for key in sorted(t): print(key, {k:(round(v) if v else v) for k,v in t[key].items()})
PY
tar czf $OUT/r15.tgz -C $OUT r15 && rm -rf $O && echo packed
