#!/usr/bin/env bash
# Run 60: stream-K kept to the TF32 non-causal kernels (FwdWgmmaKernel::kStreamK); the 16-bit and
# causal kernels compile to the same main loops as main (instruction for instruction up to ptxas'
# MOV/IMAD.MOV choices). .dist: the change; .dist-old: main (1d72cb3). Every [fwd] GPU test and the
# [sanitize] forward cases (streamk included) under racecheck and memcheck, then two alternating
# passes new/old: TF32 d64/d128 non-causal (auto: d128 streamk where it pays; d64 also forced
# streamk), bf16 cells as a check that the 16-bit kernels did not move, JAX XLA (TF32's best peer)
# once. Carry [".dist", ".dist-old"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run60; mkdir -p $O
FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 240 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd-tests.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd-tests.txt
for tool in racecheck memcheck; do
  FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 100 compute-sanitizer --tool $tool --error-exitcode 99 .dist/bin/flashjit_gpu_tests "sanitizer cases: the persistent Hopper schedules*" -r compact > $O/sanitize-$tool.txt 2>&1; echo "$tool exit $? (t=$(el))"; tail -2 $O/sanitize-$tool.txt
done
F="--dtypes float32 --head-dims 128 --seqs 600,1500,3000,4096,8192 --causal 0 --modes fwd"
G="--dtypes float32 --head-dims 64 --seqs 600,4096 --causal 0 --modes fwd"
H="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,8192 --causal 0,1 --modes fwd"
for pass in 1 2; do
  for v in new old; do
    D=.dist; [ $v = old ] && D=.dist-old
    for g in F G H; do
      FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 90 $D/bin/flashjit-bench ${!g} --tag $v --out $O/$v-$g-p$pass.json > $O/$v-$g-p$pass.out 2>&1; echo "$v $g $pass exit $? (t=$(el))"
    done
  done
  FLASHJIT_FWD_SCHEDULE=streamk FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 60 .dist/bin/flashjit-bench $G --tag newsk --out $O/newsk-G-p$pass.json > $O/newsk-G-p$pass.out 2>&1; echo "newsk G $pass exit $? (t=$(el))"
done
timeout 120 python3 bench/peers.py --framework jax --impls jax_xla $F --out $O/jax.json > $O/jax.out 2>&1; echo "jax exit $? (t=$(el))"
python3 - <<'PY' | tee $O/summary-table.txt
import json,os,glob,statistics
O=os.environ['OUT']+'/run60'
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
        if r['impl'].startswith('flashjit'): spec[(k,n)]=(r.get('spec','')[-22:], r.get('grid_ctas'), r.get('rel_err'), r.get('compile_s'))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    rat=' '.join('%s/old %.3f' % (n, med[n]/med['old']) for n in med if n not in ('old','jax_xla') and 'old' in med)
    peer=(' new/xla %.2f' % (med['new']/med['jax_xla'])) if 'jax_xla' in med and 'new' in med else ''
    print(k, t[k], rat, peer, spec.get((k,'new')))
PY
tar czf $OUT/run60.tgz -C $OUT run60 && rm -rf $O && echo packed
