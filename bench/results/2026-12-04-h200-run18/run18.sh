#!/usr/bin/env bash
# Device run 18: (1) compute-sanitizer on the Hopper forward after take_tile's fix (lane 0 reads the tile slot
# and frees it), every [fwd] GPU test; (2) d128 non-causal bf16 at the ragged lengths: the default (bn128 s2,
# O apart, persistent) against three stages (O in Q's rows) under each schedule, torch SDPA twice in the same run.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
B=.dist/bin; O=$OUT/r18; mkdir -p $O
export FLASHJIT_CACHE_DIR=/tmp/fjc18
CS=/usr/local/cuda/bin/compute-sanitizer; command -v compute-sanitizer >/dev/null && CS=compute-sanitizer
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee $O/gpu.txt
$B/flashjit_gpu_tests "[sanitize]" -r compact > $O/plain.txt 2>&1; echo "plain [sanitize] exit $? (t=$(el))"; tail -1 $O/plain.txt
for sched in auto dynamic persistent; do
  for tool in racecheck memcheck; do
    [ $tool = memcheck ] && [ $sched != dynamic ] && continue
    f=$O/${tool}_${sched}.txt
    FLASHJIT_FWD_SCHEDULE=$sched timeout 200 $CS --tool $tool --error-exitcode 99 $B/flashjit_gpu_tests "[sanitize]" -r compact > $f 2>&1
    echo "$tool $sched exit $? (t=$(el))"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid" $f | sort | uniq -c | head -5; tail -1 $f
  done
done
timeout 170 $B/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; grep -E "FAILED|failed" -A6 $O/fwd.txt | head -20; tail -2 $O/fwd.txt
G="--dtypes bfloat16 --head-dims 128 --seqs 1500,1536,3000,3072,8192 --causal 0 --modes fwd --target-ms 15 --reps 5"
bench() { # name, env...
  local name=$1; shift
  env "$@" timeout 60 $B/flashjit-bench $G --tag $name --out $O/fj_$name.json > $O/fj_$name.txt 2>&1; echo "$name exit $? (t=$(el))"
}
bench base1
timeout 90 python3 bench/peers.py --framework torch --impls torch_flash,torch_cudnn $G --out $O/torch1.json > $O/torch1.txt 2>&1; echo "torch1 exit $? (t=$(el))"
bench s3tiles FLASHJIT_FWD_TILE=bm128_bn128_w12_s3_wg FLASHJIT_FWD_SCHEDULE=tiles
bench s3pers FLASHJIT_FWD_TILE=bm128_bn128_w12_s3_wg FLASHJIT_FWD_SCHEDULE=persistent
bench s3dyn FLASHJIT_FWD_TILE=bm128_bn128_w12_s3_wg FLASHJIT_FWD_SCHEDULE=dynamic
bench basedyn FLASHJIT_FWD_SCHEDULE=dynamic
bench base2
timeout 90 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch2.json > $O/torch2.txt 2>&1; echo "torch2 exit $? (t=$(el))"
python3 - <<'PY'
import json,os,glob
O=os.environ['OUT']+'/r18'
t={}
for f in sorted(glob.glob(f'{O}/*.json')):
    name=os.path.basename(f)[:-5]
    try: rows=json.load(open(f))['results']
    except Exception as e: print(name, e); continue
    for r in rows:
        col=name if r['impl'].startswith('flashjit') else name+':'+r['impl']
        t.setdefault(r['seq'],{})[col]=round(r['tflops']) if r.get('tflops') else None
for k in sorted(t): print(k, t[k])
PY
tar czf $OUT/r18.tgz -C $OUT r18 && rm -rf $O && echo packed
