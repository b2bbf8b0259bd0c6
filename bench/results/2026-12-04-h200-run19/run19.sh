#!/usr/bin/env bash
# Device run 19: the padded Hopper forward's last P V runs only the k steps of its visible keys (quarters of
# the tile). Every [fwd] and [sanitize] GPU test on the new kernel; then bf16 non-causal forward at the ragged
# lengths: the same source without the narrow P V (.dist-base), the new one, torch cuDNN, alternating twice.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
B=.dist/bin; O=$OUT/r19; mkdir -p $O
export FLASHJIT_CACHE_DIR=/tmp/fjc19
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
timeout 60 $B/flashjit_gpu_tests "[sanitize]" -r compact > $O/sanitize.txt 2>&1; echo "[sanitize] exit $? (t=$(el))"; tail -1 $O/sanitize.txt
timeout 170 $B/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; grep -E "FAILED|failed" -A6 $O/fwd.txt | head -20; tail -2 $O/fwd.txt
G="--dtypes bfloat16 --head-dims 64,128 --seqs 600,1500,3000 --causal 0 --modes fwd --target-ms 15 --reps 7"
for pass in 1 2; do
  FLASHJIT_CACHE_DIR=/tmp/fjc19base timeout 60 .dist-base/bin/flashjit-bench $G --no-check --tag base --out $O/base$pass.json > $O/base$pass.txt 2>&1; echo "base$pass exit $? (t=$(el))"
  timeout 60 $B/flashjit-bench $G --tag narrow --out $O/narrow$pass.json > $O/narrow$pass.txt 2>&1; echo "narrow$pass exit $? (t=$(el))"
  timeout 90 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch$pass.json > $O/torch$pass.txt 2>&1; echo "torch$pass exit $? (t=$(el))"
done
python3 - <<'PY'
import json,os,glob
O=os.environ['OUT']+'/r19'
t={}
for f in sorted(glob.glob(f'{O}/*.json')):
    name=os.path.basename(f)[:-5]
    try: rows=json.load(open(f))['results']
    except Exception as e: print(name, e); continue
    for r in rows:
        t.setdefault((r['head_dim'],r['seq']),{})[name]=round(r['tflops']) if r.get('tflops') else None
for k in sorted(t): print(k, t[k])
PY
tar czf $OUT/r19.tgz -C $OUT r19 && rm -rf $O && echo packed
