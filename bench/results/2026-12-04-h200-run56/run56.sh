#!/usr/bin/env bash
# Run 56: main with TF32 head_dim 128's O from registers and its non-causal persistent schedule (run 55):
# every [fwd] GPU test, the [sanitize] forward case under racecheck and memcheck, then float32 (TF32) B4 H8
# forward at d64 and d128, causal and not, s600-8192, two passes, beside JAX XLA (TF32, the best float32 peer
# in run 50) in the same call. Carry [".dist"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run56; mkdir -p $O
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 250 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd-tests.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd-tests.txt
for tool in racecheck memcheck; do
  FLASHJIT_CACHE_DIR=/tmp/fjc timeout 120 compute-sanitizer --tool $tool --error-exitcode 99 .dist/bin/flashjit_gpu_tests "sanitizer cases: the persistent Hopper schedules*" -r compact > $O/sanitize-$tool.txt 2>&1; echo "$tool exit $? (t=$(el))"; tail -2 $O/sanitize-$tool.txt
done
F="--dtypes float32 --head-dims 64,128 --seqs 600,1500,3000,8192 --causal 0,1 --modes fwd"
for pass in 1 2; do
  FLASHJIT_CACHE_DIR=/tmp/fjc-b timeout 120 .dist/bin/flashjit-bench $F --tag main --out $O/flashjit-$pass.json > $O/flashjit-$pass.out 2>&1; echo "flashjit $pass exit $? (t=$(el))"
done
timeout 120 python3 bench/peers.py --framework jax --impls jax_xla $F --out $O/jax-f32.json > $O/jax-f32.out 2>&1; echo "jax exit $? (t=$(el))"
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/run56'
t={}; spec={}; err={}
for f in sorted(glob.glob(f'{O}/*.json')):
    for r in json.load(open(f))['results']:
        if not r.get('tflops') or r['impl']=='flashjit_ieee': continue
        k=(r['dtype'],r['head_dim'],r['causal'],r['seq'])
        t.setdefault(k,{}).setdefault(r['impl'],[]).append(round(r['tflops']))
        if r['impl']=='flashjit': spec[k]=r.get('spec','')[-22:]; err[k]=(r.get('rel_err'), r.get('compile_s'))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    peers={n:v for n,v in med.items() if not n.startswith('flashjit')}
    best=max(peers.items(), key=lambda x:x[1]) if peers else None
    fj=med.get('flashjit')
    print(k, t[k], ('flashjit/%s %.2f' % (best[0], fj/best[1])) if best and fj else '', spec.get(k,''), err.get(k))
PY
tar czf $OUT/run56.tgz -C $OUT run56 && rm -rf $O && echo packed
