#!/usr/bin/env bash
# Device run 13: persistent test; A/B of the Hopper forward's grid (persistent vs one CTA per tile, same binary,
# interleaved P,T,P); d64 causal tile variants; torch peers at the ragged lengths.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
B=.dist/bin; O=$OUT/r13; mkdir -p $O
export FLASHJIT_CACHE_DIR=/tmp/fjc13
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader | tee $O/gpu.txt
timeout 120 $B/flashjit_gpu_tests "forward: the persistent Hopper schedule*" -r compact > $O/persist_test.txt 2>&1; echo "persist test exit $? (t=$(el))"; grep -E "FAILED|failed" -A4 $O/persist_test.txt | head -20; tail -2 $O/persist_test.txt
G="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,1536,3000,3072,4096,8192 --causal 0,1 --modes fwd --target-ms 15 --reps 5"
G2="--dtypes bfloat16 --head-dims 256 --seqs 1500,3000,4096,8192 --causal 0,1 --modes fwd --target-ms 15 --reps 5"
for pass in p1 t1 p2 t2; do
  case $pass in p*) S=persistent;; t*) S=tiles;; esac
  FLASHJIT_FWD_SCHEDULE=$S timeout 150 $B/flashjit-bench $G --no-check --tag schedule=$S --out $O/ab_$pass.json > $O/ab_$pass.txt 2>&1; echo "$pass exit $? (t=$(el))"
done
for pass in p1 t1; do
  case $pass in p*) S=persistent;; t*) S=tiles;; esac
  FLASHJIT_FWD_SCHEDULE=$S timeout 120 $B/flashjit-bench $G2 --no-check --tag schedule=$S --out $O/d256_$pass.json > $O/d256_$pass.txt 2>&1; echo "d256 $pass exit $? (t=$(el))"
done
G3="--dtypes bfloat16 --head-dims 64 --seqs 1500,3000,8192 --causal 1 --modes fwd --target-ms 15 --reps 5"
for tile in bm128_bn128_w12_s2_wg bm128_bn128_w12_s3_wg; do
  for S in persistent tiles; do
    FLASHJIT_FWD_TILE=$tile FLASHJIT_FWD_SCHEDULE=$S timeout 100 $B/flashjit-bench $G3 --no-check --out $O/d64c_${tile}_$S.json > $O/d64c_${tile}_$S.txt 2>&1; echo "$tile $S exit $? (t=$(el))"
  done
done
timeout 150 python3 bench/peers.py --framework torch --impls torch_flash,torch_cudnn --dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,8192 --causal 0,1 --modes fwd --target-ms 15 --reps 5 --out $O/torch.json > $O/torch.txt 2>&1; echo "torch exit $? (t=$(el))"
python3 - <<'PY'
import json,glob,os
O=os.environ['OUT']+'/r13'
def load(f):
    try: return json.load(open(f))['results']
    except Exception as e: return []
t={}
for f in sorted(glob.glob(O+'/*.json')):
    k=os.path.basename(f)[:-5]
    for r in load(f):
        t.setdefault((r['impl'] if 'torch' in k else '', r['head_dim'],r['seq'],r['causal']),{})[k]=r.get('tflops')
for key in sorted(t): print(key, {k:(round(v) if v else v) for k,v in t[key].items()})
PY
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
tar czf $OUT/r13.tgz -C $OUT r13 && echo packed
