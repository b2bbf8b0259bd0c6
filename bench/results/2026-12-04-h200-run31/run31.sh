#!/usr/bin/env bash
# Device script for deferred-o-store.patch and split-q.patch (this directory; they were bench/candidates/ before this run). Build
# first, here, from a clean main:
#   (cd build && make -j2) && rm -rf .dist-old && cmake --install build --prefix .dist-old --strip
#   git apply bench/results/2026-12-04-h200-run31/deferred-o-store.patch && (cd build && make -j2)
#   rm -rf .dist && cmake --install build --prefix .dist --strip
#   git apply bench/results/2026-12-04-h200-run31/split-q.patch && (cd build && make -j2)
#   rm -rf .dist-splitq && cmake --install build --prefix .dist-splitq --strip && rm -rf .dist*/lib .dist*/include
# then run it with carry [".dist", ".dist-old", ".dist-splitq"] (about 7 minutes of device time). The GPU tests
# run on .dist-splitq, which holds both changes.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/deferred; mkdir -p $O
F=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader >/dev/null 2>&1 || F=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$F --format=csv,noheader -lms 100 > $O/smi.csv 2>&1 &
SMI=$!
G="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,4096,8192 --causal 0,1 --modes fwd"
for pass in 1 2 3; do
  for v in old deferred splitq; do
    B=.dist-$v; [ $v = deferred ] && B=.dist
    FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 80 $B/bin/flashjit-bench $G --tag $v --out $O/$v$pass.json > $O/$v$pass.txt 2>&1; echo "$v$pass exit $? (t=$(el))"
  done
done
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch.json > $O/torch.txt 2>&1; echo "torch exit $? (t=$(el))"
kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/deferred'
t={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n=os.path.basename(f)[:-5].rstrip('123')
    for r in json.load(open(f))['results']:
        if r.get('tflops'): t.setdefault((r['head_dim'],r['causal'],r['seq']),{}).setdefault(n,[]).append(round(r['tflops']))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    mine=max(x for n,x in med.items() if n!='torch')
    print(k, t[k], ' '.join('%s/old %.3f' % (v, med.get(v,0)/med['old']) for v in ('deferred','splitq')),
          'best flashjit/torch %.3f' % (mine/med['torch']) if 'torch' in med else '')
PY
FLASHJIT_CACHE_DIR=/tmp/fjc-splitq timeout 170 .dist-splitq/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd.txt
for tool in racecheck memcheck; do
  FLASHJIT_CACHE_DIR=/tmp/fjc-splitq timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool $tool .dist-splitq/bin/flashjit_gpu_tests "[sanitize]" > $O/$tool.txt 2>&1; echo "$tool exit $? (t=$(el))"; tail -3 $O/$tool.txt
done
tar czf $OUT/deferred.tgz -C $OUT deferred && rm -rf $O && echo packed
