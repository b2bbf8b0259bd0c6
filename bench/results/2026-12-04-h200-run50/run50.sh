#!/usr/bin/env bash
# Run 50: issue 6's grid on main (beb8d9d: three consumers rescale O under S): bf16 B4 H8 forward, d64 and
# d128, causal and not, s600-16384: flashjit two passes, torch cuDNN and flash, JAX cuDNN; float32 d128 s8192
# (TF32) beside JAX XLA; report.py. Carry [".dist"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run50; mkdir -p $O
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
G="--dtypes bfloat16 --head-dims 64,128 --seqs 600,1500,3000,4096,8192,16384 --causal 0,1 --modes fwd"
F="--dtypes float32 --head-dims 128 --seqs 8192 --causal 0 --modes fwd"
for pass in 1 2; do
  FLASHJIT_CACHE_DIR=/tmp/fjc timeout 120 .dist/bin/flashjit-bench $G --tag main --out $O/flashjit-$pass.json > $O/flashjit-$pass.out 2>&1; echo "flashjit $pass exit $? (t=$(el))"
done
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 60 .dist/bin/flashjit-bench $F --tag main --out $O/flashjit-f32.json > $O/flashjit-f32.out 2>&1; echo "flashjit f32 exit $? (t=$(el))"
timeout 150 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash $G --out $O/torch.json > $O/torch.out 2>&1; echo "torch exit $? (t=$(el))"
timeout 120 python3 bench/peers.py --framework jax --impls jax_cudnn $G --out $O/jax.json > $O/jax.out 2>&1; echo "jax exit $? (t=$(el))"
timeout 60 python3 bench/peers.py --framework jax --impls jax_xla $F --out $O/jax-f32.json > $O/jax-f32.out 2>&1; echo "jax f32 exit $? (t=$(el))"
kill $SMI
python3 bench/report.py $O/flashjit-1.json $O/flashjit-f32.json $O/torch.json $O/jax.json $O/jax-f32.json --out-dir $O > $O/report.out 2>&1; echo "report exit $? (t=$(el))"
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/run50'
t={}; spec={}; err={}
for f in sorted(glob.glob(f'{O}/*.json')):
    for r in json.load(open(f))['results']:
        if not r.get('tflops'): continue
        k=(r['dtype'],r['head_dim'],r['causal'],r['seq'])
        t.setdefault(k,{}).setdefault(r['impl'],[]).append(round(r['tflops']))
        if r['impl']=='flashjit': spec[k]=r.get('spec','')[-22:]; err[k]=(r.get('rel_err'), r.get('compile_s'))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    peers={n:v for n,v in med.items() if not n.startswith('flashjit')}
    best=max(peers.items(), key=lambda x:x[1]) if peers else None
    fj=med.get('flashjit')
    print(k, t[k], ('flashjit/%s %.3f' % (best[0], fj/best[1])) if best and fj else '', spec.get(k,''), err.get(k))
PY
tar czf $OUT/run50.tgz -C $OUT run50 && rm -rf $O && echo packed
