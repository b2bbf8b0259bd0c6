#!/usr/bin/env bash
# Device run 29: the Hopper forward's tile boundary (run 27's timeline: ~2300 cycles from a consumer's last P V to
# its next tile's first S). Q loads per consumer (64-row boxes, one barrier each, consumer 0's rows first), and the
# row sums, lse and the next tile's index are done while the last P V runs. bf16 forward B4 H8 at sustained clocks,
# old (.dist-old = 2d0b0ea) vs new (.dist) alternating three times, torch cuDNN once; then every [fwd] GPU test and
# the [sanitize] cases under racecheck and memcheck on the new build.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/r29; mkdir -p $O
F=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader >/dev/null 2>&1 || F=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader -lms 100 > $O/smi.csv 2>&1 &
SMI=$!
G="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,4096,8192 --causal 0,1 --modes fwd"
for pass in 1 2 3; do
  FLASHJIT_CACHE_DIR=/tmp/fjc29old timeout 80 .dist-old/bin/flashjit-bench $G --no-check --tag old --out $O/old$pass.json > $O/old$pass.txt 2>&1; echo "old$pass exit $? (t=$(el))"
  FLASHJIT_CACHE_DIR=/tmp/fjc29 timeout 80 .dist/bin/flashjit-bench $G --tag new --out $O/new$pass.json > $O/new$pass.txt 2>&1; echo "new$pass exit $? (t=$(el))"
done
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch.json > $O/torch.txt 2>&1; echo "torch exit $? (t=$(el))"
kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/r29'
t={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n=os.path.basename(f)[:-5].rstrip('123')
    try: rows=json.load(open(f))['results']
    except Exception as e: print(f, e); continue
    for r in rows:
        if r.get('tflops'): t.setdefault((r['head_dim'],r['causal'],r['seq']),{}).setdefault(n,[]).append(round(r['tflops']))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    print(k, t[k], 'new/old %.3f' % (med.get('new',0)/med['old']), 'new/torch %.3f' % (med.get('new',0)/med.get('torch',1)))
PY
FLASHJIT_CACHE_DIR=/tmp/fjc29 timeout 170 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; grep -E "FAILED|failed" -A6 $O/fwd.txt | head -20; tail -2 $O/fwd.txt
for tool in racecheck memcheck; do
  FLASHJIT_CACHE_DIR=/tmp/fjc29 timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool $tool .dist/bin/flashjit_gpu_tests "[sanitize]" > $O/$tool.txt 2>&1; echo "$tool exit $? (t=$(el))"; tail -3 $O/$tool.txt
done
tar czf $OUT/r29.tgz -C $OUT r29 && rm -rf $O && echo packed
