#!/usr/bin/env bash
# Run 58: stream-K for the persistent non-causal Hopper forward (the last round and a half of tiles
# dealt by K/V steps, split tiles merged through a global workspace). .dist: the change (auto picks
# streamk); "pers": the change with FLASHJIT_FWD_SCHEDULE=persistent (the main loop's cost alone);
# .dist-old: main (1d72cb3). The stream-K GPU test and the [sanitize] forward cases (streamk included)
# under racecheck and memcheck, then two alternating passes, torch cuDNN once. Carry [".dist", ".dist-old"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run58; mkdir -p $O
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/smi.txt 2>&1
FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 200 .dist/bin/flashjit_gpu_tests "forward: stream-K*" -r compact > $O/sk-test.txt 2>&1; echo "sk test exit $? (t=$(el))"; tail -3 $O/sk-test.txt
for tool in racecheck memcheck; do
  FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 120 compute-sanitizer --tool $tool --error-exitcode 99 .dist/bin/flashjit_gpu_tests "sanitizer cases: the persistent Hopper schedules*" -r compact > $O/sanitize-$tool.txt 2>&1; echo "$tool exit $? (t=$(el))"; tail -2 $O/sanitize-$tool.txt
done
A="--dtypes bfloat16 --head-dims 128 --seqs 600,1500,3000,4096,8192 --causal 0 --modes fwd"
B="--dtypes bfloat16 --head-dims 64 --seqs 600,1500,3000,4096 --causal 0 --modes fwd"
F="--dtypes float32 --head-dims 128 --seqs 600,1500,3000 --causal 0 --modes fwd"
C="--dtypes bfloat16 --head-dims 128 --seqs 1500,8192 --causal 1 --modes fwd"
T="--dtypes bfloat16 --head-dims 64 --seqs 1500,3000,4096 --causal 0 --modes fwd"
for pass in 1 2; do
  for v in new pers old; do
    D=.dist; [ $v = old ] && D=.dist-old
    S=auto; [ $v = pers ] && S=persistent
    for g in A B; do
      FLASHJIT_FWD_SCHEDULE=$S FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 80 $D/bin/flashjit-bench ${!g} --tag $v --out $O/$v-$g-p$pass.json > $O/$v-$g-p$pass.out 2>&1; echo "$v $g $pass exit $? (t=$(el))"
    done
    [ $v = old ] || { FLASHJIT_FWD_TILE=bm192_bn128_w16_s4_wg FLASHJIT_FWD_SCHEDULE=$S FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 60 $D/bin/flashjit-bench $T --tag ${v}3c --out $O/${v}3c-T-p$pass.json > $O/${v}3c-T-p$pass.out 2>&1; echo "${v}3c T $pass exit $? (t=$(el))"; }
  done
done
for v in new pers old; do
  D=.dist; [ $v = old ] && D=.dist-old
  S=auto; [ $v = pers ] && S=persistent
  for g in F C; do
    [ $g = C ] && [ $v = pers ] && continue
    FLASHJIT_FWD_SCHEDULE=$S FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 80 $D/bin/flashjit-bench ${!g} --tag $v --out $O/$v-$g-p1.json > $O/$v-$g-p1.out 2>&1; echo "$v $g 1 exit $? (t=$(el))"
  done
done
timeout 120 python3 bench/peers.py --framework torch --impls torch_cudnn --dtypes bfloat16 --head-dims 64,128 --seqs 600,1500,3000,4096,8192 --causal 0 --modes fwd --out $O/torch.json > $O/torch.out 2>&1; echo "torch exit $? (t=$(el))"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >> $O/smi.txt 2>&1
python3 - <<'PY' | tee $O/summary-table.txt
import json,os,glob,statistics
O=os.environ['OUT']+'/run58'
t={}; spec={}
for f in sorted(glob.glob(f'{O}/*.json')):
    b=os.path.basename(f)[:-5]
    try: rows=json.load(open(f))['results']
    except Exception as e: print('bad', f, e); continue
    for r in rows:
        if not r.get('tflops') or r['impl']=='flashjit_ieee': continue
        n=b.split('-')[0] if r['impl'].startswith('flashjit') else r['impl']
        k=(r['dtype'],r['head_dim'],r['causal'],r['seq'])
        t.setdefault(k,{}).setdefault(n,[]).append(round(r['tflops'],1))
        if r['impl'].startswith('flashjit'): spec[(k,n)]=(r.get('spec','')[-22:], r.get('rel_err'), r.get('grid_ctas'))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    peer=med.get('torch_cudnn',0)
    rat=' '.join('%s/old %.3f' % (n, med[n]/med['old']) for n in med if n not in ('old','torch_cudnn') and 'old' in med)
    print(k, t[k], rat, ('new/peer %.3f' % (med['new']/peer)) if peer and 'new' in med else '', spec.get((k,'new')), spec.get((k,'new3c')))
PY
tar czf $OUT/run58.tgz -C $OUT run58 && rm -rf $O && echo packed
