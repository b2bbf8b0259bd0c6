#!/usr/bin/env bash
# Run 51: main (5fdce28) at bf16 head_dim 256 beside torch cuDNN, the policy's schedule against the other two
# (FLASHJIT_FWD_SCHEDULE persistent / dynamic / tiles), causal and not, s1500-8192; and bf16 head_dim 128
# non-causal at the ragged 1500 and 3000 under each schedule. Two alternating passes. Carry [".dist"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run51; mkdir -p $O
G="--dtypes bfloat16 --head-dims 256 --seqs 1500,3000,4096,8192 --causal 0,1 --modes fwd"
R="--dtypes bfloat16 --head-dims 128 --seqs 1500,3000 --causal 0 --modes fwd"
for pass in 1 2; do
  for v in auto persistent dynamic tiles; do
    FLASHJIT_FWD_SCHEDULE=$v FLASHJIT_CACHE_DIR=/tmp/fjc timeout 90 .dist/bin/flashjit-bench $G --tag $v --out $O/d256-$v-p$pass.json > $O/d256-$v-p$pass.out 2>&1; echo "d256 $v $pass exit $? (t=$(el))"
    FLASHJIT_FWD_SCHEDULE=$v FLASHJIT_CACHE_DIR=/tmp/fjc timeout 60 .dist/bin/flashjit-bench $R --tag $v --out $O/d128-$v-p$pass.json > $O/d128-$v-p$pass.out 2>&1; echo "d128 $v $pass exit $? (t=$(el))"
  done
done
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash $G --out $O/torch-d256.json > $O/torch-d256.out 2>&1; echo "torch exit $? (t=$(el))"
timeout 60 python3 bench/peers.py --framework torch --impls torch_cudnn $R --out $O/torch-d128.json > $O/torch-d128.out 2>&1; echo "torch exit $? (t=$(el))"
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/run51'
t={}; spec={}
for f in sorted(glob.glob(f'{O}/*.json')):
    b=os.path.basename(f)[:-5]
    for r in json.load(open(f))['results']:
        if not r.get('tflops'): continue
        n=r['impl'] if not r['impl'].startswith('flashjit') else b.split('-')[1]
        k=(r['head_dim'],r['causal'],r['seq'])
        t.setdefault(k,{}).setdefault(n,[]).append(round(r['tflops']))
        if n=='auto': spec[k]=(r.get('spec','')[-22:], r.get('rel_err'))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    c=med.get('torch_cudnn',1)
    print(k, t[k], ' '.join('%s %.3f' % (n, m/c) for n,m in med.items() if not n.startswith('torch')), spec.get(k))
PY
tar czf $OUT/run51.tgz -C $OUT run51 && rm -rf $O && echo packed
