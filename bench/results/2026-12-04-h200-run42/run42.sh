#!/usr/bin/env bash
# Run 42: two-CTA clusters sharing K and V by TMA multicast (each CTA loads half the keys of every K/V tile into
# both), non-causal 16-bit persistent kernel, against main's kernel in the same binary (FLASHJIT_FWD_CLUSTER=2
# selects the prototype). Grid: 132 CTAs (66 clusters) and 128 (64 clusters, in case the GPCs cannot hold 66).
# bf16 d64/d128 s1500-8192, two alternating passes, torch cuDNN, then every [fwd] GPU test with the cluster on.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/cluster; mkdir -p $O
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
G="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
for pass in 1 2; do
  for v in base c2 c2m128; do
    case $v in
      base) E="";;
      c2) E="FLASHJIT_FWD_CLUSTER=2";;
      c2m128) E="FLASHJIT_FWD_CLUSTER=2 FLASHJIT_FWD_MAX_CTAS=128";;
    esac
    env $E FLASHJIT_CACHE_DIR=/tmp/fjc-${v%m128} timeout 90 .dist/bin/flashjit-bench $G --tag $v --out $O/$v$pass.json > $O/$v$pass.txt 2>&1; echo "$v$pass exit $? (t=$(el))"
  done
done
timeout 60 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch.json > $O/torch.txt 2>&1; echo "torch exit $? (t=$(el))"
kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/cluster'
t={}; err={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n=os.path.basename(f)[:-5].rstrip('12')
    for r in json.load(open(f))['results']:
        if r.get('tflops'):
            t.setdefault((r['head_dim'],r['seq']),{}).setdefault(n,[]).append(round(r['tflops']))
            err.setdefault(n,[]).append(r.get('rel_err'))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    print(k, t[k], ' '.join('%s/base %.3f' % (n, med[n]/med['base']) for n in med if n!='base'), 'base/torch %.3f' % (med['base']/med.get('torch',1)))
print({n:(min(v),max(v)) for n,v in err.items() if None not in v})
PY
FLASHJIT_FWD_CLUSTER=2 FLASHJIT_CACHE_DIR=/tmp/fjc-c2 timeout 200 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -3 $O/fwd.txt
tar czf $OUT/cluster.tgz -C $OUT cluster && rm -rf $O && echo packed
