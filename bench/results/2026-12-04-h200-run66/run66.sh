#!/usr/bin/env bash
# Run 66: the split-tile (_sk) kernel as landed. Against run 65's build, the kernels without split tiles compute
# their tile count again (reading it from parameter space had reordered their main loops: 1-2.5% slower in
# run 65), and the tile model picks _sk from run 65's fit. .dist = the change (every [fwd] GPU test first),
# .dist-0 = main (6ae3d42); peers in the same call. Carry [".dist", ".dist-0"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run66; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 300 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd-tests.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd-tests.txt
H="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
K="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 1 --modes fwd"
F="--dtypes float32 --head-dims 128 --seqs 600,1500,8192 --causal 0 --modes fwd"
for pass in 1 2; do
  for v in new main; do
    D=.dist; [ $v = main ] && D=.dist-0
    for g in H K F; do
      FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 90 $D/bin/flashjit-bench ${!g} --tag $v --out $O/$v-$g-p$pass.json > $O/$v-$g-p$pass.out 2>&1 || echo "$v $g $pass failed $?"
    done
    echo "$v pass $pass (t=$(el))"
  done
done
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash $H --out $O/torch-H.json > $O/torch-H.out 2>&1; echo "torch H exit $? (t=$(el))"
timeout 40 python3 bench/peers.py --framework torch --impls torch_cudnn $K --out $O/torch-K.json > $O/torch-K.out 2>&1; echo "torch K exit $? (t=$(el))"
timeout 70 python3 bench/peers.py --framework jax --impls jax_xla $F --out $O/jax-F.json > $O/jax-F.out 2>&1; echo "jax F exit $? (t=$(el))"
python3 - <<'PY' | tee $O/summary-table.txt
import json,os,glob,statistics
O=os.environ['OUT']+'/run66'
t={}; err={}; spec={}
for f in sorted(glob.glob(f'{O}/*.json')):
    b=os.path.basename(f).split('-')[0]
    try: rows=json.load(open(f))['results']
    except Exception as e: print('bad', f, e); continue
    for r in rows:
        if not r.get('tflops') or r['impl']=='flashjit_ieee': continue
        n=b if r['impl'].startswith('flashjit') else r['impl']
        k=(r['dtype'],r['head_dim'],r['causal'],r['seq'])
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
tar czf $OUT/run66.tgz -C $OUT run66 && rm -rf $O && echo packed
