#!/usr/bin/env bash
# Device run 20: the ragged-length bar of issue 6, measured with alternation: bf16 non-causal B4 H8 forward at
# d64/d128, s1500/3000, flashjit (main) and torch SDPA (cuDNN, flash) four times each, interleaved, 9 reps per
# cell; JAX (cuDNN, XLA) once. Pooled medians of all reps per impl.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
B=.dist/bin; O=$OUT/r20; mkdir -p $O
export FLASHJIT_CACHE_DIR=/tmp/fjc20
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.limit --format=csv,noheader | tee $O/gpu.txt
G="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000 --causal 0 --modes fwd --target-ms 15 --reps 9"
for pass in 1 2 3 4; do
  timeout 60 $B/flashjit-bench $G --out $O/flashjit$pass.json > $O/flashjit$pass.txt 2>&1; echo "flashjit$pass exit $? (t=$(el))"
  timeout 90 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash $G --out $O/torch$pass.json > $O/torch$pass.txt 2>&1; echo "torch$pass exit $? (t=$(el))"
  nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader >> $O/clocks.txt
done
timeout 150 python3 bench/peers.py --framework jax --impls jax_cudnn,jax_xla $G --out $O/jax.json > $O/jax.txt 2>&1; echo "jax exit $? (t=$(el))"
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/r20'
t={}
for f in sorted(glob.glob(f'{O}/*.json')):
    try: rows=json.load(open(f))['results']
    except Exception as e: print(f, e); continue
    for r in rows:
        if not r.get('median_ms'): continue
        t.setdefault((r['head_dim'],r['seq']),{}).setdefault(r['impl'],[]).append(r['median_ms'])
for k in sorted(t):
    d,s=k; fl=4*4*8*s*s*d
    line={i:(round(fl/statistics.median(v)/1e9), [round(fl/x/1e9) for x in v]) for i,v in t[k].items()}
    best=max(x[0] for i,x in line.items() if not i.startswith('flashjit'))
    print(k, line, 'ratio', round(line['flashjit'][0]/best,3))
PY
tar czf $OUT/r20.tgz -C $OUT r20 && rm -rf $O && echo packed
