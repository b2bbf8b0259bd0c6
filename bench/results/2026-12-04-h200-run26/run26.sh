#!/usr/bin/env bash
# Device run 26: where does run 25's second Q buffer lose 2.5% at long sequences, and does Q latency cost per tile?
# bf16 forward B4 H8, sustained clocks; variants alternating twice: old (2d0b0ea), pad (old + 32 KiB of unused
# dynamic shared memory: the 228 KiB carveout alone), q2 (run 25: two Q buffers), qa (two Q buffers, the next
# tile's Q issued a whole tile ahead).
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/r26; mkdir -p $O
F=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader >/dev/null 2>&1 || F=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader -lms 100 > $O/smi.csv 2>&1 &
SMI=$!
G="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,8192 --causal 0,1 --modes fwd"
for pass in 1 2; do
  for v in old pad q2 qa; do
    FLASHJIT_CACHE_DIR=/tmp/fjc26$v timeout 80 .dist-$v/bin/flashjit-bench $G --tag $v --out $O/$v$pass.json > $O/$v$pass.txt 2>&1; echo "$v$pass exit $? (t=$(el))"
  done
done
kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/r26'
t={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n=os.path.basename(f)[:-5].rstrip('12')
    try: rows=json.load(open(f))['results']
    except Exception as e: print(f, e); continue
    for r in rows:
        if r.get('tflops'): t.setdefault((r['head_dim'],r['causal'],r['seq']),{}).setdefault(n,[]).append((round(r['tflops']), r.get('max_abs_err')))
for k in sorted(t): print(k, {n:[x[0] for x in v] for n,v in t[k].items()}, 'errs', {n:max((x[1] or 0) for x in v) for n,v in t[k].items()})
PY
tar czf $OUT/r26.tgz -C $OUT r26 && rm -rf $O && echo packed
