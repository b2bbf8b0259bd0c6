#!/usr/bin/env bash
# Run 38: causal head_dim 64 with 128 keys per tile (bn128_s4) against the policy's 192 (bn192_s3) over the key
# lengths, to decide whether the short-key tile (run 36, non-causal only) should also serve causal d64 (run 33:
# 128 keys +3% at s1500, +1% at s3000, -1.5% at s8192). One binary (main, .dist), FLASHJIT_FWD_TILE per
# invocation, three interleaved passes, torch cuDNN in the same run. Carry [".dist"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/causal64; mkdir -p $O
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
S="--dtypes bfloat16 --head-dims 64 --seqs 600,1000,1500,2048,3000,4096,8192 --causal 1 --modes fwd"
for pass in 1 2 3; do
  for t in bn192_w12_s3 bn128_w12_s4; do
    FLASHJIT_FWD_TILE=bm128_${t}_wg FLASHJIT_CACHE_DIR=/tmp/fjc timeout 60 .dist/bin/flashjit-bench $S --tag $t --out $O/${t}_$pass.json > $O/${t}_$pass.txt 2>&1; echo "$t $pass exit $? (t=$(el))"
  done
done
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn $S --out $O/torch.json > $O/torch.txt 2>&1; echo "torch exit $? (t=$(el))"
kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/causal64'
t={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n = 'torch' if 'torch' in os.path.basename(f) else os.path.basename(f)[:12]
    for r in json.load(open(f))['results']:
        if r.get('tflops'): t.setdefault(r['seq'],{}).setdefault(n,[]).append(round(r['tflops']))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    print(k, t[k], '128/192 %.3f' % (med['bn128_w12_s4']/med['bn192_w12_s3']), '128/torch %.3f 192/torch %.3f' % (med['bn128_w12_s4']/med['torch'], med['bn192_w12_s3']/med['torch']))
PY
grep -il "error\|fail" $O/*.txt | head
tar czf $OUT/causal64.tgz -C $OUT causal64 && rm -rf $O && echo packed
