#!/usr/bin/env bash
# Run 41: the next tile's Q and first K/V prefetched into L2 a tile ahead (static persistent schedule, non-causal
# 16-bit; cp.async.bulk.prefetch.tensor.L2) against main. Build here: .dist-old from main (a74e97e),
# .dist with templates/fwd_wgmma.cuh + hopper_ptx.cuh changed; carry [".dist", ".dist-old"]. bf16 non-causal
# d64/d128 s1500-8192, two alternating passes, torch cuDNN, then every [fwd] GPU test on the new build.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/l2pf; mkdir -p $O
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
G="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
for pass in 1 2; do
  for v in old new; do
    B=.dist; [ $v = old ] && B=.dist-old
    FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 60 $B/bin/flashjit-bench $G --tag $v --out $O/$v$pass.json > $O/$v$pass.txt 2>&1; echo "$v$pass exit $? (t=$(el))"
  done
done
timeout 60 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch.json > $O/torch.txt 2>&1; echo "torch exit $? (t=$(el))"
kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/l2pf'
t={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n=os.path.basename(f)[:-5].rstrip('12')
    for r in json.load(open(f))['results']:
        if r.get('tflops'): t.setdefault((r['head_dim'],r['seq']),{}).setdefault(n,[]).append(round(r['tflops']))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    print(k, t[k], 'new/old %.3f' % (med['new']/med['old']), 'new/torch %.3f old/torch %.3f' % (med['new']/med['torch'], med['old']/med['torch']))
PY
FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 150 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd.txt
tar czf $OUT/l2pf.tgz -C $OUT l2pf && rm -rf $O && echo packed
