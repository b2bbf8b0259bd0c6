#!/usr/bin/env bash
# Device run 16: the policy's schedules (auto): every [fwd] GPU test; bf16 forward beside torch SDPA (cuDNN, flash)
# in the same run at the seed's ragged lengths.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
B=.dist/bin; O=$OUT/r16; mkdir -p $O
export FLASHJIT_CACHE_DIR=/tmp/fjc16
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader | tee $O/gpu.txt
timeout 150 $B/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; grep -E "FAILED|failed" -A6 $O/fwd.txt | head -20; tail -2 $O/fwd.txt
G="--dtypes bfloat16 --head-dims 64,128 --seqs 600,640,1500,1536,3000,3072,8192 --causal 0,1 --modes fwd --target-ms 15 --reps 5"
timeout 90 $B/flashjit-bench $G --out $O/flashjit.json > $O/flashjit.txt 2>&1; echo "flashjit exit $? (t=$(el))"
timeout 120 python3 bench/peers.py --framework torch --impls torch_flash,torch_cudnn $G --out $O/torch.json > $O/torch.txt 2>&1; echo "torch exit $? (t=$(el))"
python3 - <<'PY'
import json,os
O=os.environ['OUT']+'/r16'
t={}
for f in ['flashjit','torch']:
    try: rows=json.load(open(f'{O}/{f}.json'))['results']
    except Exception: continue
    for r in rows: t.setdefault((r['head_dim'],r['causal'],r['seq']),{})[r['impl']]=round(r['tflops']) if r.get('tflops') else None
for k in sorted(t):
    v=t[k]; best=max((x for i,x in v.items() if i!='flashjit' and x), default=None)
    print(k, v, 'ratio', round(v.get('flashjit',0)/best,3) if best else '')
PY
tar czf $OUT/r16.tgz -C $OUT r16 && rm -rf $O && echo packed
