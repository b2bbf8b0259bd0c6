#!/usr/bin/env bash
# Device script for bench/candidates/short-keys-tile.patch (see README.md here). Build first, here:
#   (cd build && make -j2) && rm -rf .dist-old && cmake --install build --prefix .dist-old --strip
#   git apply bench/candidates/short-keys-tile.patch && (cd build && make -j2)
#   rm -rf .dist && cmake --install build --prefix .dist --strip && rm -rf .dist*/lib .dist*/include
# then run it with carry [".dist", ".dist-old"] (about 3-4 minutes of device time).
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/shortkeys; mkdir -p $O
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
G="--dtypes bfloat16 --head-dims 64 --seqs 1500,3000 --seq-k 128,600,1000,1500,2048,4096 --causal 0 --modes fwd"
for pass in 1 2; do
  for v in old new; do
    B=.dist; [ $v = old ] && B=.dist-old
    FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 60 $B/bin/flashjit-bench $G --tag $v --out $O/$v$pass.json > $O/$v$pass.txt 2>&1; echo "$v$pass exit $? (t=$(el))"
  done
done
timeout 60 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch.json > $O/torch.txt 2>&1; echo "torch exit $? (t=$(el))"
kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/shortkeys'
t={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n=os.path.basename(f)[:-5].rstrip('12')
    for r in json.load(open(f))['results']:
        if r.get('tflops'): t.setdefault((r['seq'],r['seq_k']),{}).setdefault(n,[]).append(round(r['tflops']))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    print(k, t[k], 'new/old %.3f' % (med['new']/med['old']), 'new/torch %.3f' % (med['new']/med['torch']) if 'torch' in med else '')
PY
FLASHJIT_CACHE_DIR=/tmp/fjc-new timeout 170 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd.txt
tar czf $OUT/shortkeys.tgz -C $OUT shortkeys && rm -rf $O && echo packed
