#!/usr/bin/env bash
# Run 39: main with the causal head_dim 64 short-key rule (128 keys per tile up to 4096 keys, run 38) against the
# policy's tile forced (FLASHJIT_FWD_TILE=bm128_bn192_w12_s3_wg), causal d64 bf16 forward at Sq = Sk and Sq != Sk,
# two passes, torch cuDNN; then fwd_bwd rows whose gradient check must find a reduced size with the same tile
# (s8192: above 4096 keys), and every [fwd] GPU test. Carry [".dist"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run39; mkdir -p $O
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
S="--dtypes bfloat16 --head-dims 64 --seqs 600,1500,3000,4096,8192 --causal 1 --modes fwd"
X="--dtypes bfloat16 --head-dims 64 --seqs 1500,3000 --seq-k 600,3000,6000 --causal 1 --modes fwd"
for pass in 1 2; do
  FLASHJIT_CACHE_DIR=/tmp/fjc timeout 60 .dist/bin/flashjit-bench $S --tag main --out $O/main_$pass.json > $O/main_$pass.txt 2>&1; echo "main $pass exit $? (t=$(el))"
  FLASHJIT_FWD_TILE=bm128_bn192_w12_s3_wg FLASHJIT_CACHE_DIR=/tmp/fjc timeout 60 .dist/bin/flashjit-bench $S --tag bn192 --out $O/bn192_$pass.json > $O/bn192_$pass.txt 2>&1; echo "bn192 $pass exit $? (t=$(el))"
  FLASHJIT_CACHE_DIR=/tmp/fjc timeout 60 .dist/bin/flashjit-bench $X --tag main --out $O/xmain_$pass.json > $O/xmain_$pass.txt 2>&1; echo "xmain $pass exit $? (t=$(el))"
  FLASHJIT_FWD_TILE=bm128_bn192_w12_s3_wg FLASHJIT_CACHE_DIR=/tmp/fjc timeout 60 .dist/bin/flashjit-bench $X --tag bn192 --out $O/xbn192_$pass.json > $O/xbn192_$pass.txt 2>&1; echo "xbn192 $pass exit $? (t=$(el))"
done
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn $S --out $O/torch.json > $O/torch.txt 2>&1; echo "torch exit $? (t=$(el))"
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn $X --out $O/xtorch.json > $O/xtorch.txt 2>&1; echo "xtorch exit $? (t=$(el))"
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 120 .dist/bin/flashjit-bench --dtypes bfloat16 --head-dims 64 --seqs 3000,8192 --causal 1 --modes fwd_bwd --tag main --out $O/grad.json > $O/grad.txt 2>&1; echo "grad exit $? (t=$(el))"
kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/run39'
t={}
for f in sorted(glob.glob(f'{O}/*.json')):
    b=os.path.basename(f)
    if b.startswith('grad'): continue
    n = 'torch' if 'torch' in b else b.split('_')[0].lstrip('x')
    for r in json.load(open(f))['results']:
        if r.get('tflops'): t.setdefault((r['seq'],r['seq_k']),{}).setdefault(n,[]).append((round(r['tflops']), r.get('tile','')))
for k in sorted(t):
    med={n:statistics.median(x[0] for x in v) for n,v in t[k].items()}
    print(k, t[k], 'main/bn192 %.3f main/torch %.3f' % (med['main']/med['bn192'], med['main']/med['torch']))
for r in json.load(open(f'{O}/grad.json'))['results']:
    print('grad', r['seq'], r.get('tile'), r.get('tflops') and round(r['tflops']), r.get('rel_err'), r.get('err_dq'), r.get('err_scope'), r.get('check'))
PY
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 170 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd.txt
tar czf $OUT/run39.tgz -C $OUT run39 && rm -rf $O && echo packed
