#!/usr/bin/env bash
# Run 44: main with three consumer warpgroups for 16-bit head_dim 64 where fwd_wgmma_tile_for_shape's model
# picks them. Every [fwd] GPU test (the new forced-tile case: every schedule and length), compute-sanitizer
# racecheck and memcheck on the three-consumer sanitizer case, then issue 6's grid: bf16 B4 H8 forward, d64 and
# d128, causal and not, s600-8192: flashjit (two passes), torch cuDNN and flash, JAX cuDNN, report.py. Carry [".dist"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run44; mkdir -p $O
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 200 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd-tests.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd-tests.txt
for tool in racecheck memcheck; do
  FLASHJIT_CACHE_DIR=/tmp/fjc timeout 100 compute-sanitizer --tool $tool --error-exitcode 99 .dist/bin/flashjit_gpu_tests "sanitizer cases: three consumer*" -r compact > $O/sanitize-$tool.txt 2>&1; echo "$tool exit $? (t=$(el))"; tail -2 $O/sanitize-$tool.txt
done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
G="--dtypes bfloat16 --head-dims 64,128 --seqs 600,1500,3000,4096,8192 --causal 0,1 --modes fwd"
for pass in 1 2; do
  FLASHJIT_CACHE_DIR=/tmp/fjc timeout 90 .dist/bin/flashjit-bench $G --tag main --out $O/flashjit-$pass.json > $O/flashjit-$pass.out 2>&1; echo "flashjit $pass exit $? (t=$(el))"
done
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash $G --out $O/torch.json > $O/torch.out 2>&1; echo "torch exit $? (t=$(el))"
timeout 100 python3 bench/peers.py --framework jax --impls jax_cudnn $G --out $O/jax.json > $O/jax.out 2>&1; echo "jax exit $? (t=$(el))"
kill $SMI
python3 bench/report.py $O/flashjit-1.json $O/torch.json $O/jax.json --out-dir $O > $O/report.out 2>&1; echo "report exit $? (t=$(el))"
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/run44'
t={}; spec={}
for f in sorted(glob.glob(f'{O}/*.json')):
    for r in json.load(open(f))['results']:
        if not r.get('tflops'): continue
        k=(r['dtype'],r['head_dim'],r['causal'],r['seq'])
        t.setdefault(k,{}).setdefault(r['impl'],[]).append(round(r['tflops']))
        if r['impl']=='flashjit': spec[k]=r.get('spec','')
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    peers={n:v for n,v in med.items() if not n.startswith('flashjit')}
    best=max(peers.items(), key=lambda x:x[1]) if peers else None
    fj=med.get('flashjit')
    print(k, t[k], ('flashjit/%s %.3f' % (best[0], fj/best[1])) if best and fj else '', spec.get(k,'')[-26:])
PY
tar czf $OUT/run44.tgz -C $OUT run44 && rm -rf $O && echo packed
