#!/usr/bin/env bash
# Run 64: the leaner main loop as committed (run 63's B: descriptors advanced from a base; the warpgroup
# index through a shuffle for three consumers; unsigned ring slot/parity; d256 builds Q's descriptors per
# step, which ptxas otherwise spills), against main (8394c89) and run 63's B, with the peers in the same
# call. .dist = the change (every [fwd] GPU test first); .dist-0 = main; .dist-B = run 63's B.
# Carry [".dist", ".dist-0", ".dist-B"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run64; mkdir -p $O
FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 230 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd-tests.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd-tests.txt
H="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
K="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 1 --modes fwd"
F="--dtypes float32 --head-dims 128 --seqs 1500,8192 --causal 0 --modes fwd"
for pass in 1 2; do
  for v in new main B; do
    [ $pass = 2 ] && [ $v = B ] && continue
    D=.dist; [ $v = main ] && D=.dist-0; [ $v = B ] && D=.dist-B
    for g in H K F; do
      FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 100 $D/bin/flashjit-bench ${!g} --tag $v --out $O/$v-$g-p$pass.json > $O/$v-$g-p$pass.out 2>&1 || echo "$v $g $pass failed $?"
    done
    echo "$v pass $pass (t=$(el))"
  done
done
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash $H --out $O/torch-H.json > $O/torch-H.out 2>&1; echo "torch H exit $? (t=$(el))"
timeout 40 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash $K --out $O/torch-K.json > $O/torch-K.out 2>&1; echo "torch K exit $? (t=$(el))"
timeout 100 python3 bench/peers.py --framework jax --impls jax_cudnn $H --out $O/jax-H.json > $O/jax-H.out 2>&1; echo "jax H exit $? (t=$(el))"
timeout 60 python3 bench/peers.py --framework jax --impls jax_xla $F --out $O/jax-F.json > $O/jax-F.out 2>&1; echo "jax F exit $? (t=$(el))"
python3 - <<'PY' | tee $O/summary-table.txt
import json,os,glob,statistics
O=os.environ['OUT']+'/run64'
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
        if n=='new': spec[k]=(r.get('spec'), r.get('compile_s'))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    peers=[n for n in med if n not in ('new','main','B')]
    best=max(peers, key=lambda n: med[n]) if peers else None
    line=' '.join('%s %s' % (n, t[k][n]) for n in sorted(med))
    if 'main' in med: line += ' | new/main %.3f' % (med['new']/med['main'])
    if best: line += ' | new/%s %.3f' % (best, med['new']/med[best])
    print(k, line, '| rel_err %.2g' % (err.get((k,'new')) or 0), spec.get(k))
PY
tar czf $OUT/run64.tgz -C $OUT run64 && rm -rf $O && echo packed
