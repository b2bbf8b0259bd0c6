#!/usr/bin/env bash
# Device run 22: bf16 forward B4 H8 at sustained clocks (--sustain-ms 200 before each cell's timed reps, default
# 50 ms x 7 reps): flashjit (main) and torch SDPA (cuDNN, flash) alternating twice, JAX (cuDNN) once.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
B=.dist/bin; O=$OUT/r22; mkdir -p $O
export FLASHJIT_CACHE_DIR=/tmp/fjc22
F=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader >/dev/null 2>&1 || F=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader -lms 100 > $O/smi.csv 2>&1 &
SMI=$!
G="--dtypes bfloat16 --head-dims 64,128 --seqs 600,1500,3000,4096,8192 --causal 0,1 --modes fwd"
for pass in 1 2; do
  timeout 120 $B/flashjit-bench $G --out $O/flashjit$pass.json > $O/flashjit$pass.txt 2>&1; echo "flashjit$pass exit $? (t=$(el))"
  timeout 150 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash $G --out $O/torch$pass.json > $O/torch$pass.txt 2>&1; echo "torch$pass exit $? (t=$(el))"
done
timeout 180 python3 bench/peers.py --framework jax --impls jax_cudnn $G --out $O/jax.json > $O/jax.txt 2>&1; echo "jax exit $? (t=$(el))"
kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/r22'
t={}
for f in sorted(glob.glob(f'{O}/*.json')):
    try: rows=json.load(open(f))['results']
    except Exception as e: print(f, e); continue
    for r in rows:
        if not r.get('tflops'): continue
        t.setdefault((r['head_dim'],r['causal'],r['seq']),{}).setdefault(r['impl'],[]).append(round(r['tflops']))
for k in sorted(t):
    v=t[k]; med={i:statistics.median(x) for i,x in v.items()}
    best=max(x for i,x in med.items() if not i.startswith('flashjit'))
    print(k, v, 'ratio', round(med.get('flashjit',0)/best,3))
PY
echo "clock states:"; cut -d, -f2,5 $O/smi.csv | sort | uniq -c | sort -rn | head -6
tar czf $OUT/r22.tgz -C $OUT r22 && rm -rf $O && echo packed
