#!/usr/bin/env bash
# Run 52: 80 keys per tile at 16-bit head_dim 256 (m64n80 S product, O staged in Q's rows, two stages, 231424
# bytes), forced with FLASHJIT_FWD_TILE, against the policy's 64 keys: bf16 B4 H8, causal and not,
# s1500-8192, two alternating passes, torch cuDNN in the same call; then every [fwd] GPU test (the forced-tile
# case now runs the 80-key tile at every schedule and length, bf16 and f16). Carry [".dist"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run52; mkdir -p $O
G="--dtypes bfloat16 --head-dims 256 --seqs 1500,3000,4096,8192 --causal 0,1 --modes fwd"
for pass in 1 2; do
  for v in bn64 bn80; do
    E=""; [ $v = bn80 ] && E="FLASHJIT_FWD_TILE=bm128_bn80_w12_s2_wg"
    env $E FLASHJIT_CACHE_DIR=/tmp/fjc timeout 60 .dist/bin/flashjit-bench $G --tag $v --out $O/$v-p$pass.json > $O/$v-p$pass.out 2>&1; echo "$v $pass exit $? (t=$(el))"
  done
done
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch.json > $O/torch.out 2>&1; echo "torch exit $? (t=$(el))"
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/run52'
t={}; spec={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n=os.path.basename(f)[:-5].split('-p')[0]
    for r in json.load(open(f))['results']:
        if not r.get('tflops'): continue
        k=(r['head_dim'],r['causal'],r['seq'])
        t.setdefault(k,{}).setdefault(n,[]).append(round(r['tflops']))
        if n=='bn80': spec[k]=(r.get('spec','')[-22:], r.get('rel_err'), r.get('compile_s'))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    c=med.get('torch',1)
    print(k, t[k], 'bn80/bn64 %.3f bn80/torch %.3f bn64/torch %.3f' % (med['bn80']/med['bn64'], med['bn80']/c, med['bn64']/c), spec.get(k))
PY
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 260 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd-tests.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd-tests.txt
tar czf $OUT/run52.tgz -C $OUT run52 && rm -rf $O && echo packed
