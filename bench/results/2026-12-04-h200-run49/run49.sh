#!/usr/bin/env bash
# Run 49: O's rescale under S for three consumers only (kRescaleUnderS; two-consumer kernels as on main)
# against main (ece0b6a, .dist-old): bf16 B4 H8 d64 forward, causal and not, s1500-16384 (the policy's tiles:
# three consumers everywhere but non-causal 4096 and causal 4096), then the three-consumer tile forced at 4096
# (FLASHJIT_FWD_TILE), three alternating passes, torch cuDNN in the same call; then every [fwd] GPU test on
# the new build. Carry [".dist", ".dist-old"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run49; mkdir -p $O
G="--dtypes bfloat16 --head-dims 64 --seqs 1500,3000,4096,8192,16384 --causal 0,1 --modes fwd"
F="--dtypes bfloat16 --head-dims 64 --seqs 4096 --causal 0,1 --modes fwd"
for pass in 1 2 3; do
  for v in new old; do
    D=.dist; [ $v = old ] && D=.dist-old
    FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 90 $D/bin/flashjit-bench $G --tag $v --out $O/$v-p$pass.json > $O/$v-p$pass.out 2>&1; echo "$v $pass exit $? (t=$(el))"
    FLASHJIT_FWD_TILE=bm192_bn128_w16_s4_wg FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 60 $D/bin/flashjit-bench $F --tag ${v}192 --out $O/${v}192-p$pass.json > $O/${v}192-p$pass.out 2>&1; echo "${v}192 $pass exit $? (t=$(el))"
  done
done
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch.json > $O/torch.out 2>&1; echo "torch exit $? (t=$(el))"
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/run49'
t={}; err={}; spec={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n=os.path.basename(f)[:-5].split('-p')[0]
    for r in json.load(open(f))['results']:
        if not r.get('tflops'): continue
        k=(r['head_dim'],r['causal'],r['seq'])
        t.setdefault(k,{}).setdefault(n,[]).append(round(r['tflops']))
        if n=='new': err[k]=r.get('rel_err'); spec[k]=r.get('spec','')[-22:]
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    tor=med.get('torch',1)
    print(k, t[k], ' '.join('%s/torch %.3f' % (n, m/tor) for n,m in med.items() if n!='torch'), 'new/old %.3f' % (med['new']/med['old']), spec.get(k), err.get(k))
PY
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 200 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd-tests.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd-tests.txt
tar czf $OUT/run49.tgz -C $OUT run49 && rm -rf $O && echo packed
