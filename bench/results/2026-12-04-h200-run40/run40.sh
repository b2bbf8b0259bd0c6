#!/usr/bin/env bash
# Run 40: issue 6's acceptance grid on main (b3c5b93: the short-key tiles of runs 36 and 39), bf16 B4 H8 forward,
# d64/d128, causal and not, s1500-8192, plus f32 (TF32) d128 s8192: flashjit (two passes), torch cuDNN and flash,
# JAX cuDNN (and XLA for f32) in the same call, then report.py. First, the causal d64 schedule at s1500/s3000
# (the tile policy's dynamic counter against one CTA per tile and the static persistent deal). Carry [".dist"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run40; mkdir -p $O
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
S="--dtypes bfloat16 --head-dims 64 --seqs 1500,3000 --causal 1 --modes fwd"
for pass in 1 2; do
  for s in auto tiles persistent; do
    FLASHJIT_FWD_SCHEDULE=$s FLASHJIT_CACHE_DIR=/tmp/fjc timeout 60 .dist/bin/flashjit-bench $S --tag sched_$s --out $O/sched_${s}_$pass.json > $O/sched_${s}_$pass.txt 2>&1; echo "sched $s $pass exit $? (t=$(el))"
  done
done
G="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,4096,8192 --causal 0,1 --modes fwd"
F="--dtypes float32 --head-dims 128 --seqs 8192 --causal 0 --modes fwd"
for pass in 1 2; do
  FLASHJIT_CACHE_DIR=/tmp/fjc timeout 90 .dist/bin/flashjit-bench $G --tag main --out $O/flashjit-$pass.json > $O/flashjit-$pass.out 2>&1; echo "flashjit $pass exit $? (t=$(el))"
done
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 60 .dist/bin/flashjit-bench $F --tag main --out $O/flashjit-f32.json > $O/flashjit-f32.out 2>&1; echo "flashjit f32 exit $? (t=$(el))"
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash $G --out $O/torch.json > $O/torch.out 2>&1; echo "torch exit $? (t=$(el))"
timeout 100 python3 bench/peers.py --framework jax --impls jax_cudnn $G --out $O/jax.json > $O/jax.out 2>&1; echo "jax exit $? (t=$(el))"
timeout 60 python3 bench/peers.py --framework jax --impls jax_xla $F --out $O/jax-f32.json > $O/jax-f32.out 2>&1; echo "jax f32 exit $? (t=$(el))"
kill $SMI
python3 bench/report.py $O/flashjit-1.json $O/flashjit-f32.json $O/torch.json $O/jax.json $O/jax-f32.json --out-dir $O > $O/report.out 2>&1; echo "report exit $? (t=$(el))"
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/run40'
t={}
for f in sorted(glob.glob(f'{O}/*.json')):
    b=os.path.basename(f)
    for r in json.load(open(f))['results']:
        if not r.get('tflops'): continue
        n = b.split('_')[0]+'_'+b.split('_')[1] if b.startswith('sched') else r['impl']
        t.setdefault((r['dtype'],r['head_dim'],r['causal'],r['seq']),{}).setdefault(n,[]).append(round(r['tflops']))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    peers={n:v for n,v in med.items() if not n.startswith('flashjit') and not n.startswith('sched')}
    best=max(peers.items(), key=lambda x:x[1]) if peers else None
    fj=med.get('flashjit') or med.get('flashjit_ieee')
    print(k, t[k], ('flashjit/%s %.3f' % (best[0], fj/best[1])) if best and fj else '')
PY
tar czf $OUT/run40.tgz -C $OUT run40 && rm -rf $O && echo packed
