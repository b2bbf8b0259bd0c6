#!/usr/bin/env bash
# Device run 24: causal tiles longest-first within groups of 8 (batch, head) pairs instead of over all heads at
# once. Every [fwd] GPU test on the new kernel; bf16 causal forward B4 H8 at sustained clocks, old (.dist-old) vs
# new (.dist) alternating twice, torch cuDNN once; clock samples.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/r24; mkdir -p $O
F=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader >/dev/null 2>&1 || F=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader -lms 50 > $O/smi.csv 2>&1 &
SMI=$!
G="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,4096,8192 --causal 1 --modes fwd"
for pass in 1 2; do
  FLASHJIT_CACHE_DIR=/tmp/fjc24old timeout 90 .dist-old/bin/flashjit-bench $G --no-check --tag old --out $O/old$pass.json > $O/old$pass.txt 2>&1; echo "old$pass exit $? (t=$(el))"
  FLASHJIT_CACHE_DIR=/tmp/fjc24 timeout 90 .dist/bin/flashjit-bench $G --tag grouped --out $O/grouped$pass.json > $O/grouped$pass.txt 2>&1; echo "grouped$pass exit $? (t=$(el))"
done
timeout 90 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch.json > $O/torch.txt 2>&1; echo "torch exit $? (t=$(el))"
FLASHJIT_CACHE_DIR=/tmp/fjc24 timeout 150 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; grep -E "FAILED|failed" -A6 $O/fwd.txt | head -20; tail -2 $O/fwd.txt
kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/r24'
t={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n=os.path.basename(f)[:-5].rstrip('12')
    for r in json.load(open(f))['results']:
        if r.get('tflops'): t.setdefault((r['head_dim'],r['seq']),{}).setdefault(n,[]).append(round(r['tflops']))
for k in sorted(t): print(k, t[k])
PY
tar czf $OUT/r24.tgz -C $OUT r24 && rm -rf $O && echo packed
