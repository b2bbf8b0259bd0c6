#!/usr/bin/env bash
# Device run 21: where do the two speed modes of the repetitions come from? bf16 d128 non-causal s1500 B4 H8
# forward, 40 reps of ~5 ms each (rep_ms lists every one): flashjit persistent, flashjit one CTA per tile,
# torch cuDNN, while nvidia-smi samples clocks, power and clock-event reasons every 20 ms.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
B=.dist/bin; O=$OUT/r21; mkdir -p $O
export FLASHJIT_CACHE_DIR=/tmp/fjc21
F=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader >/dev/null 2>&1 || F=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader -lms 20 > $O/smi.csv 2>&1 &
SMI=$!
G="--dtypes bfloat16 --head-dims 128 --seqs 1500,3000 --causal 0 --modes fwd --target-ms 5 --reps 40"
mark() { echo "$1 $(date +%H:%M:%S.%N)" >> $O/marks.txt; }
for pass in 1 2; do
  mark fj_persistent$pass; FLASHJIT_FWD_SCHEDULE=persistent timeout 60 $B/flashjit-bench $G --out $O/persistent$pass.json > $O/persistent$pass.txt 2>&1; echo "persistent$pass exit $? (t=$(el))"
  mark fj_tiles$pass; FLASHJIT_FWD_SCHEDULE=tiles timeout 60 $B/flashjit-bench $G --out $O/tiles$pass.json > $O/tiles$pass.txt 2>&1; echo "tiles$pass exit $? (t=$(el))"
  mark torch$pass; timeout 90 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch$pass.json > $O/torch$pass.txt 2>&1; echo "torch$pass exit $? (t=$(el))"
done
mark end; kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/r21'
for f in sorted(glob.glob(f'{O}/*.json')):
    for r in json.load(open(f))['results']:
        reps=[round(x*1e3,1) for x in r.get('rep_ms',[])]
        print(os.path.basename(f), r['impl'], r['seq'], 'median', round(r['median_ms']*1e3,1), 'graph', r.get('graph_ms') and round(r['graph_ms']*1e3,1), 'reps', reps)
PY
echo "smi distinct (clock, mem, reasons):"; cut -d, -f2,3,6 $O/smi.csv | sort | uniq -c | sort -rn | head -12
tar czf $OUT/r21.tgz -C $OUT r21 && rm -rf $O && echo packed
