#!/usr/bin/env bash
# Run 59: run 58's stream-K with the consumer's ring addresses as 32-bit shared offsets from bases
# taken once (run 58's build moved 64-bit generic address arithmetic of the ring onto the vector
# datapath: 2-5% slower with stream-K off), and stream-K only where whole rounds take >= 10% longer
# than the mean load. .dist: the change (auto); "pers": the change with the persistent schedule
# forced; .dist-old: main (1d72cb3). Every [fwd] GPU test first, then two alternating passes.
# Carry [".dist", ".dist-old"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run59; mkdir -p $O
A="--dtypes bfloat16 --head-dims 128 --seqs 600,1500,3000,8192 --causal 0 --modes fwd"
C="--dtypes bfloat16 --head-dims 128 --seqs 1500,8192 --causal 1 --modes fwd"
B="--dtypes bfloat16 --head-dims 64 --seqs 600,1500,4096 --causal 0 --modes fwd"
F="--dtypes float32 --head-dims 128 --seqs 600,3000 --causal 0 --modes fwd"
for pass in 1 2; do
  for v in new pers old; do
    D=.dist; [ $v = old ] && D=.dist-old
    S=auto; [ $v = pers ] && S=persistent
    for g in A C B F; do
      [ $pass = 2 ] && [ $g = F ] && continue
      FLASHJIT_FWD_SCHEDULE=$S FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 80 $D/bin/flashjit-bench ${!g} --tag $v --out $O/$v-$g-p$pass.json > $O/$v-$g-p$pass.out 2>&1; echo "$v $g $pass exit $? (t=$(el))"
    done
  done
done
FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 230 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd-tests.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd-tests.txt
python3 - <<'PY' | tee $O/summary-table.txt
import json,os,glob,statistics
O=os.environ['OUT']+'/run59'
t={}; spec={}
for f in sorted(glob.glob(f'{O}/*.json')):
    b=os.path.basename(f)[:-5]
    try: rows=json.load(open(f))['results']
    except Exception as e: print('bad', f, e); continue
    for r in rows:
        if not r.get('tflops') or r['impl']=='flashjit_ieee': continue
        n=b.split('-')[0]
        k=(r['dtype'],r['head_dim'],r['causal'],r['seq'])
        t.setdefault(k,{}).setdefault(n,[]).append(round(r['tflops'],1))
        spec[(k,n)]=(r.get('spec','')[-22:], r.get('grid_ctas'))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    rat=' '.join('%s/old %.3f' % (n, med[n]/med['old']) for n in med if n!='old' and 'old' in med)
    print(k, t[k], rat, spec.get((k,'new')), spec.get((k,'pers')))
PY
tar czf $OUT/run59.tgz -C $OUT run59 && rm -rf $O && echo packed
