#!/usr/bin/env bash
# Run 33: the Hopper forward's tile sizes re-measured on the current kernel (the policy's were chosen in run 2,
# before the persistent schedule and the ping-pong). One binary (main, .dist), FLASHJIT_FWD_TILE per invocation,
# two interleaved passes, torch cuDNN in the same run. Carry [".dist"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/sweep; mkdir -p $O
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 200 > $O/smi.csv 2>&1 &
SMI=$!
S="--dtypes bfloat16 --seqs 1500,3000,8192 --causal 0,1 --modes fwd"
for pass in 1 2; do
  for t in bn192_w12_s3 bn192_w12_s2 bn192_w12_s4 bn128_w12_s2 bn128_w12_s4 bn64_w12_s4; do
    FLASHJIT_FWD_TILE=bm128_${t}_wg FLASHJIT_CACHE_DIR=/tmp/fjc timeout 60 .dist/bin/flashjit-bench $S --head-dims 64 --tag d64_$t --out $O/d64_${t}_$pass.json > $O/d64_${t}_$pass.txt 2>&1; echo "d64 $t $pass exit $? (t=$(el))"
  done
  for t in bn128_w12_s2 bn128_w12_s3 bn64_w12_s4; do
    FLASHJIT_FWD_TILE=bm128_${t}_wg FLASHJIT_CACHE_DIR=/tmp/fjc timeout 60 .dist/bin/flashjit-bench $S --head-dims 128 --tag d128_$t --out $O/d128_${t}_$pass.json > $O/d128_${t}_$pass.txt 2>&1; echo "d128 $t $pass exit $? (t=$(el))"
  done
done
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn $S --head-dims 64,128 --out $O/torch.json > $O/torch.txt 2>&1; echo "torch exit $? (t=$(el))"
kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/sweep'
t={}
for f in sorted(glob.glob(f'{O}/*.json')):
    for r in json.load(open(f))['results']:
        if not r.get('tflops'): continue
        n = r.get('tag') or r.get('impl')
        if 'torch' in os.path.basename(f): n='torch'
        else: n='_'.join(os.path.basename(f).split('_')[1:4])
        t.setdefault((r['head_dim'],r['causal'],r['seq']),{}).setdefault(n,[]).append((round(r['tflops']), '%.1e' % r.get('rel_err',0)))
for k in sorted(t):
    print(k)
    for n,v in t[k].items(): print('   ', n, v)
PY
grep -il "error\|fail" $O/*.txt | head
tar czf $OUT/sweep.tgz -C $OUT sweep && rm -rf $O && echo packed
