#!/usr/bin/env bash
# Device run 25: a second Q buffer (kQStages = 2) in the Hopper forward, so each tile's Q loads while the tile
# before it runs. bf16 forward B4 H8 at sustained clocks, old (.dist-old = 2d0b0ea) vs new (.dist) alternating
# twice, torch cuDNN once; then every [fwd] GPU test and the [sanitize] cases under racecheck and memcheck on the
# new build (also the first GPU run of 2d0b0ea's causal group from the L2 size).
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/r25; mkdir -p $O
F=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader >/dev/null 2>&1 || F=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader -lms 100 > $O/smi.csv 2>&1 &
SMI=$!
G="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,4096,8192 --causal 0,1 --modes fwd"
for pass in 1 2; do
  FLASHJIT_CACHE_DIR=/tmp/fjc25old timeout 90 .dist-old/bin/flashjit-bench $G --no-check --tag old --out $O/old$pass.json > $O/old$pass.txt 2>&1; echo "old$pass exit $? (t=$(el))"
  FLASHJIT_CACHE_DIR=/tmp/fjc25 timeout 90 .dist/bin/flashjit-bench $G --tag q2 --out $O/q2$pass.json > $O/q2$pass.txt 2>&1; echo "q2$pass exit $? (t=$(el))"
done
timeout 120 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch.json > $O/torch.txt 2>&1; echo "torch exit $? (t=$(el))"
kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/r25'
t={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n=os.path.basename(f)[:-5].rstrip('12')
    try: rows=json.load(open(f))['results']
    except Exception as e: print(f, e); continue
    for r in rows:
        if r.get('tflops'): t.setdefault((r['head_dim'],r['causal'],r['seq']),{}).setdefault(n,[]).append(round(r['tflops']))
for k in sorted(t): print(k, t[k])
PY
FLASHJIT_CACHE_DIR=/tmp/fjc25 timeout 180 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; grep -E "FAILED|failed" -A6 $O/fwd.txt | head -20; tail -2 $O/fwd.txt
for tool in racecheck memcheck; do
  FLASHJIT_CACHE_DIR=/tmp/fjc25 timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool $tool .dist/bin/flashjit_gpu_tests "[sanitize]" > $O/$tool.txt 2>&1; echo "$tool exit $? (t=$(el))"; tail -3 $O/$tool.txt
done
tar czf $OUT/r25.tgz -C $OUT r25 && rm -rf $O && echo packed
