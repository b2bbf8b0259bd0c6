#!/usr/bin/env bash
# Device run 23: clock and power of each impl under the power cap. bf16 d128 B4 H8 s8192 forward, causal and not:
# 2 s of sustained calls then 20 reps of 50 ms, flashjit then torch cuDNN, nvidia-smi sampling every 20 ms.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
B=.dist/bin; O=$OUT/r23; mkdir -p $O
export FLASHJIT_CACHE_DIR=/tmp/fjc23
F=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader >/dev/null 2>&1 || F=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader -lms 20 > $O/smi.csv 2>&1 &
SMI=$!
mark() { echo "$1,$(date +%Y/%m/%d\ %H:%M:%S.%3N)" >> $O/marks.csv; }
for c in 1 0; do
  S="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal $c --modes fwd"
  G="$S --sustain-ms 2000 --reps 20 --target-ms 50"
  timeout 60 $B/flashjit-bench $S --no-check --sustain-ms 0 --reps 1 --out $O/compile_c$c.json > /dev/null 2>&1  # compile outside the window
  mark flashjit_c$c; timeout 60 $B/flashjit-bench $G --no-check --out $O/flashjit_c$c.json > $O/flashjit_c$c.txt 2>&1; mark idle
  sleep 2
  mark torch_c$c; timeout 90 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch_c$c.json > $O/torch_c$c.txt 2>&1; mark idle
  sleep 2
done
kill $SMI
python3 - <<'PY'
import os,csv,datetime,json,statistics
O=os.environ['OUT']+'/r23'
def ts(s): return datetime.datetime.strptime(s.strip()[:23], '%Y/%m/%d %H:%M:%S.%f')
marks=[(n, ts(t)) for n,t in (l.strip().split(',',1) for l in open(f'{O}/marks.csv'))]
rows=[]
for l in open(f'{O}/smi.csv'):
    p=[x.strip() for x in l.split(',')]
    try: rows.append((ts(p[0]), float(p[1].split()[0]), float(p[2].split()[0]), p[4]))
    except Exception: pass
for (n,t0),(_,t1) in zip(marks, marks[1:]):
    if n=='idle': continue
    w=[r for r in rows if t0 + datetime.timedelta(seconds=1.5) <= r[0] <= t1]
    if not w: print(n,'no samples'); continue
    print(n, 'samples', len(w), 'clock MHz median', statistics.median(r[1] for r in w), 'power W median', statistics.median(r[2] for r in w), 'reasons', sorted(set(r[3] for r in w)))
for f in sorted(os.listdir(O)):
    if f.endswith('.json') and not f.startswith('compile'):
        for r in json.load(open(f'{O}/{f}'))['results']: print(f, r['impl'], round(r['tflops']), 'rep_ms', [round(x,3) for x in r.get('rep_ms',[])][:20])
PY
tar czf $OUT/r23.tgz -C $OUT r23 && rm -rf $O && echo packed
