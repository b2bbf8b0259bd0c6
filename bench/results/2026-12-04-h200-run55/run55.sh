#!/usr/bin/env bash
# Run 55: the 16-bit O epilogue through stmatrix (one store per four 8x8 blocks instead of one 4-byte
# store per block) and TF32 head_dim 128's O straight from registers to global memory (its O has no
# staging tile). .dist: the change; .dist-old: main (6548d4b). Every [fwd] GPU test and the [sanitize]
# forward case under racecheck and memcheck on the change, then new vs old in two alternating passes,
# TF32 also with the persistent schedule forced (Q is now free at the last S), torch cuDNN beside the
# bf16 d128 cells in the same call. Carry [".dist", ".dist-old"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run55; mkdir -p $O
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 250 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd-tests.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd-tests.txt
for tool in racecheck memcheck; do
  FLASHJIT_CACHE_DIR=/tmp/fjc timeout 120 compute-sanitizer --tool $tool --error-exitcode 99 .dist/bin/flashjit_gpu_tests "sanitizer cases: the persistent Hopper schedules*" -r compact > $O/sanitize-$tool.txt 2>&1; echo "$tool exit $? (t=$(el))"; tail -2 $O/sanitize-$tool.txt
done
A="--dtypes bfloat16 --head-dims 128 --seqs 600,1500,3000,8192 --causal 0,1 --modes fwd"
B="--dtypes bfloat16 --head-dims 64 --seqs 1500,3000,8192 --causal 0,1 --modes fwd"
C="--dtypes bfloat16 --head-dims 256 --seqs 4096 --causal 0 --modes fwd"
F="--dtypes float32 --head-dims 128 --seqs 600,1500,3000,8192 --causal 0,1 --modes fwd"
P="--dtypes float32 --head-dims 128 --seqs 600,1500,3000,8192 --causal 0 --modes fwd"
for pass in 1 2; do
  for v in new old; do
    D=.dist; [ $v = old ] && D=.dist-old
    for g in A B C F; do
      FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 80 $D/bin/flashjit-bench ${!g} --tag $v --out $O/$v-$g-p$pass.json > $O/$v-$g-p$pass.out 2>&1; echo "$v $g $pass exit $? (t=$(el))"
    done
  done
  FLASHJIT_FWD_SCHEDULE=persistent FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 60 .dist/bin/flashjit-bench $P --tag newpers --out $O/newpers-P-p$pass.json > $O/newpers-P-p$pass.out 2>&1; echo "newpers P $pass exit $? (t=$(el))"
done
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn $A --out $O/torch-A.json > $O/torch-A.out 2>&1; echo "torch A exit $? (t=$(el))"
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/run55'
t={}; spec={}
for f in sorted(glob.glob(f'{O}/*.json')):
    b=os.path.basename(f)[:-5]
    for r in json.load(open(f))['results']:
        if not r.get('tflops') or r['impl']=='flashjit_ieee': continue
        n=b.split('-')[0] if r['impl'].startswith('flashjit') else r['impl']
        k=(r['dtype'],r['head_dim'],r['causal'],r['seq'])
        t.setdefault(k,{}).setdefault(n,[]).append(round(r['tflops']))
        if n=='new': spec[k]=(r.get('spec','')[-22:], r.get('rel_err'))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    peer=max((v for n,v in med.items() if n not in ('new','old','newpers')), default=0)
    extra=(' pers/old %.3f' % (med['newpers']/med['old'])) if 'newpers' in med else ''
    print(k, t[k], 'new/old %.3f' % (med['new']/med['old']), extra, ('new/peer %.3f' % (med['new']/peer)) if peer else '', spec.get(k))
PY
tar czf $OUT/run55.tgz -C $OUT run55 && rm -rf $O && echo packed  # (the run itself wrote loose files: only 8 came back)
