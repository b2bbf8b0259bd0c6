#!/usr/bin/env bash
# Run 57: the seed user's workload on main (d3c5188), non-causal B4 H8 at the ragged lengths: bf16 and
# float32 (TF32), d64 and d128, fwd and fwd_bwd, beside torch cuDNN (bf16) and JAX XLA (float32, TF32) in the
# same call; run 34's table predates the three-consumer d64 forward and the TF32 changes. Carry [".dist"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run57; mkdir -p $O
B="--dtypes bfloat16 --head-dims 64,128 --seqs 600,1500,3000 --causal 0 --modes fwd,fwd_bwd"
F="--dtypes float32 --head-dims 64,128 --seqs 600,1500,3000 --causal 0 --modes fwd,fwd_bwd"
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 150 .dist/bin/flashjit-bench $B --tag main --out $O/flashjit-bf16.json > $O/flashjit-bf16.out 2>&1; echo "flashjit bf16 exit $? (t=$(el))"
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 150 .dist/bin/flashjit-bench $F --tag main --out $O/flashjit-f32.json > $O/flashjit-f32.out 2>&1; echo "flashjit f32 exit $? (t=$(el))"
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn $B --out $O/torch.json > $O/torch.out 2>&1; echo "torch exit $? (t=$(el))"
timeout 100 python3 bench/peers.py --framework jax --impls jax_xla $F --out $O/jax.json > $O/jax.out 2>&1; echo "jax exit $? (t=$(el))"
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/run57'
t={}; err={}
for f in sorted(glob.glob(f'{O}/*.json')):
    for r in json.load(open(f))['results']:
        if not r.get('tflops') or r['impl']=='flashjit_ieee': continue
        k=(r['dtype'],r['head_dim'],r['mode'],r['seq'])
        t.setdefault(k,{})[r['impl']]=round(r['tflops'])
        if r['impl']=='flashjit': err[k]=(r.get('rel_err'), r.get('compile_s'))
for k in sorted(t):
    peers={n:v for n,v in t[k].items() if not n.startswith('flashjit')}
    best=max(peers.items(), key=lambda x:x[1]) if peers else None
    fj=t[k].get('flashjit')
    print(k, t[k], ('flashjit/%s %.2f' % (best[0], fj/best[1])) if best and fj else '', err.get(k))
PY
tar czf $OUT/run57.tgz -C $OUT run57 && rm -rf $O && echo packed
