#!/usr/bin/env bash
# Run 47: main with 176 keys (non-causal) / 160 keys (causal) at 16-bit head_dim 128 from 8192 keys. Every [fwd]
# GPU test (the forced length-picked tiles at every schedule and length), then bf16 B4 H8 d128 s8192 and 16384,
# causal and not: the policy against the 128-key tile (FLASHJIT_FWD_TILE), two alternating passes, torch cuDNN.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run47; mkdir -p $O
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 230 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd-tests.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd-tests.txt
G="--dtypes bfloat16 --head-dims 128 --seqs 8192,16384 --causal 0,1 --modes fwd"
for pass in 1 2; do
  for v in main bn128; do
    E=""; [ $v = bn128 ] && E="FLASHJIT_FWD_TILE=bm128_bn128_w12_s2_wg"
    env $E FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 60 .dist/bin/flashjit-bench $G --tag $v --out $O/$v-p$pass.json > $O/$v-p$pass.txt 2>&1; echo "$v$pass exit $? (t=$(el))"
  done
done
timeout 60 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch.json > $O/torch.out 2>&1; echo "torch exit $? (t=$(el))"
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/run47'
t={}; spec={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n=os.path.basename(f)[:-5].split('-p')[0]
    for r in json.load(open(f))['results']:
        if r.get('tflops'):
            k=(r['causal'],r['seq']); t.setdefault(k,{}).setdefault(n,[]).append(round(r['tflops']))
            if n=='main': spec[k]=r['spec'][-22:]
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    print(k, t[k], 'main/bn128 %.3f main/torch %.3f' % (med['main']/med['bn128'], med['main']/med['torch']), spec.get(k))
PY
tar czf $OUT/run47.tgz -C $OUT run47 && rm -rf $O && echo packed
