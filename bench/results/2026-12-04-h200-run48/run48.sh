#!/usr/bin/env bash
# Run 48: O's rescale moved between issuing S = Q K^T and P V (while the tensor cores run S, as
# FlashAttention-3 places it) against main (ece0b6a, .dist-old). Every [fwd] GPU test and compute-sanitizer
# racecheck/memcheck on the merged persistent-schedule sanitizer case (with the three-consumer variant), all on the
# new build; then bf16 B4 H8 forward, d64 and d128, causal and not, s1500-8192: new and old, two alternating
# passes, torch cuDNN in the same call. Carry [".dist", ".dist-old"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run48; mkdir -p $O
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 200 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd-tests.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd-tests.txt
for tool in racecheck memcheck; do
  FLASHJIT_CACHE_DIR=/tmp/fjc timeout 100 compute-sanitizer --tool $tool --error-exitcode 99 .dist/bin/flashjit_gpu_tests "sanitizer cases: the persistent Hopper schedules*" -r compact > $O/sanitize-$tool.txt 2>&1; echo "$tool exit $? (t=$(el))"; tail -2 $O/sanitize-$tool.txt
done
G="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,4096,8192 --causal 0,1 --modes fwd"
for pass in 1 2; do
  for v in new old; do
    D=.dist; [ $v = old ] && D=.dist-old
    FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 90 $D/bin/flashjit-bench $G --tag $v --out $O/$v-p$pass.json > $O/$v-p$pass.out 2>&1; echo "$v $pass exit $? (t=$(el))"
  done
done
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch.json > $O/torch.out 2>&1; echo "torch exit $? (t=$(el))"
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/run48'
t={}; err={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n=os.path.basename(f)[:-5].split('-p')[0]
    for r in json.load(open(f))['results']:
        if not r.get('tflops'): continue
        k=(r['head_dim'],r['causal'],r['seq'])
        t.setdefault(k,{}).setdefault(n,[]).append(round(r['tflops']))
        if n=='new': err[k]=r.get('rel_err')
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    print(k, t[k], 'new/old %.3f new/torch %.3f old/torch %.3f rel_err %s' % (med['new']/med['old'], med['new']/med.get('torch',1), med['old']/med.get('torch',1), err.get(k)))
PY
tar czf $OUT/run48.tgz -C $OUT run48 && rm -rf $O && echo packed
