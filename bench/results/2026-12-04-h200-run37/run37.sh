#!/usr/bin/env bash
# Device script for bench/candidates/deferred-o-two-q.patch (see README.md here). Build first, here:
#   (cd build && make -j2) && rm -rf .dist-old && cmake --install build --prefix .dist-old --strip
#   git apply bench/candidates/deferred-o-two-q.patch && (cd build && make -j2)
#   rm -rf .dist && cmake --install build --prefix .dist --strip && rm -rf .dist*/lib .dist*/include
# then run it with carry [".dist", ".dist-old"] (about 6-7 minutes of device time).
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/twoq; mkdir -p $O
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 200 > $O/smi.csv 2>&1 &
SMI=$!
G="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,4096,8192 --causal 0,1 --modes fwd"
X1="--dtypes bfloat16 --head-dims 256 --seqs 1500,8192 --causal 0 --modes fwd"
X2="--dtypes float32 --head-dims 64 --seqs 1500,8192 --causal 0 --modes fwd --impls flashjit"
for pass in 1 2 3; do
  for v in old new; do
    B=.dist; [ $v = old ] && B=.dist-old
    FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 80 $B/bin/flashjit-bench $G --tag $v --out $O/$v$pass.json > $O/$v$pass.txt 2>&1; echo "$v$pass exit $? (t=$(el))"
    FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 40 $B/bin/flashjit-bench $X1 --tag $v --out $O/x$v$pass.json > $O/x$v$pass.txt 2>&1; echo "x$v$pass exit $? (t=$(el))"
    FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 40 $B/bin/flashjit-bench $X2 --tag $v --out $O/xx$v$pass.json > $O/xx$v$pass.txt 2>&1; echo "xx$v$pass exit $? (t=$(el))"
  done
done
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch.json > $O/torch.txt 2>&1; echo "torch exit $? (t=$(el))"
kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/twoq'
t={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n=os.path.basename(f)[:-5].rstrip('123').lstrip('x')
    for r in json.load(open(f))['results']:
        if r.get('tflops') and r['impl'] != 'flashjit_ieee':
            t.setdefault((r['dtype'],r['head_dim'],r['causal'],r['seq']),{}).setdefault(n,[]).append(round(r['tflops']))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    print(k, t[k], 'new/old %.3f' % (med['new']/med['old']), 'new/torch %.3f old/torch %.3f' % (med['new']/med['torch'], med['old']/med['torch']) if 'torch' in med else '')
PY
FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 170 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd.txt
for tool in racecheck memcheck; do
  FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool $tool .dist/bin/flashjit_gpu_tests "[sanitize]" > $O/$tool.txt 2>&1; echo "$tool exit $? (t=$(el))"; tail -3 $O/$tool.txt
done
tar czf $OUT/twoq.tgz -C $OUT twoq && rm -rf $O && echo packed
