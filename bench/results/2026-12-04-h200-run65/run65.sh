#!/usr/bin/env bash
# Run 65: the 16-bit head_dim 64 three-consumer kernel with stream-K's split tiles as its own spec
# ("_wg_sk", TileConfig::stream_k), picked by the tile model where splitting pays; FwdTmaParams::tiles from
# parameter space (the producer's 32 registers spilled otherwise); the producer serves whole tiles, then its
# share of the split run. .dist = the change (every [fwd] GPU test first), .dist-0 = main (6ae3d42).
# Carry [".dist", ".dist-0"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run65; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 300 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd-tests.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd-tests.txt
H="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
D64="--dtypes bfloat16 --head-dims 64 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
X="--dtypes bfloat16 --head-dims 64 --seqs 4000,4096 --seq-k 600 --causal 0 --modes fwd"
for pass in 1 2; do
  for v in new main; do
    D=.dist; [ $v = main ] && D=.dist-0
    FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 90 $D/bin/flashjit-bench $H --tag $v --out $O/$v-H-p$pass.json > $O/$v-H-p$pass.out 2>&1 || echo "$v H $pass failed $?"
    echo "$v pass $pass (t=$(el))"
  done
  FLASHJIT_FWD_TILE=bm192_bn128_w16_s4_wg_sk FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 60 .dist/bin/flashjit-bench $D64 --tag sk --out $O/sk-H-p$pass.json > $O/sk-H-p$pass.out 2>&1 || echo "sk failed $?"
  FLASHJIT_FWD_TILE=bm192_bn128_w16_s4_wg FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 60 .dist/bin/flashjit-bench $D64 --tag c3 --out $O/c3-H-p$pass.json > $O/c3-H-p$pass.out 2>&1 || echo "c3 failed $?"
  echo "variants pass $pass (t=$(el))"
done
FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 40 .dist/bin/flashjit-bench $X --tag new --out $O/new-X.json > $O/new-X.out 2>&1 || echo "X new failed $?"
FLASHJIT_FWD_TILE=bm128_bn128_w12_s4_wg FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 40 .dist/bin/flashjit-bench $X --tag short2 --out $O/short2-X.json > $O/short2-X.out 2>&1 || echo "X short2 failed $?"
echo "X (t=$(el))"
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash $H --out $O/torch-H.json > $O/torch-H.out 2>&1; echo "torch H exit $? (t=$(el))"
python3 - <<'PY' | tee $O/summary-table.txt
import json,os,glob,statistics
O=os.environ['OUT']+'/run65'
t={}; err={}; spec={}
for f in sorted(glob.glob(f'{O}/*.json')):
    b=os.path.basename(f).split('-')[0]
    try: rows=json.load(open(f))['results']
    except Exception as e: print('bad', f, e); continue
    for r in rows:
        if not r.get('tflops') or r['impl']=='flashjit_ieee': continue
        n=b if r['impl'].startswith('flashjit') else r['impl']
        k=(r['dtype'],r['head_dim'],r['causal'],r['seq'],r.get('seq_k',r['seq']))
        t.setdefault(k,{}).setdefault(n,[]).append(round(r['tflops'],1)); err[(k,n)]=r.get('rel_err')
        spec[(k,n)]=(r.get('spec'), r.get('compile_s'))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    peers=[n for n in med if n.startswith('torch') or n.startswith('jax')]
    best=max(peers, key=lambda n: med[n]) if peers else None
    line=' '.join('%s %s' % (n, t[k][n]) for n in sorted(med))
    if 'main' in med and 'new' in med: line += ' | new/main %.3f' % (med['new']/med['main'])
    if best and 'new' in med: line += ' | new/%s %.3f' % (best, med['new']/med[best])
    print(k, line, '| rel_err %.2g' % (err.get((k,'new')) or 0), spec.get((k,'new')))
PY
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >> $O/gpu.txt 2>&1
tar czf $OUT/run65.tgz -C $OUT run65 && rm -rf $O && echo packed
