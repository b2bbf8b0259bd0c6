#!/usr/bin/env bash
# Run 32: split-q.patch alone (.dist-sq) against clean main (.dist-old), 3 interleaved passes, plus head_dim 256
# and float32 rows, torch cuDNN in the same run. Build .dist-old from main, then git apply bench/results/2026-12-04-h200-run31/split-q.patch, build,
# cmake --install build --prefix .dist-sq --strip; carry [".dist-old", ".dist-sq"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/sq; mkdir -p $O
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 100 > $O/smi.csv 2>&1 &
SMI=$!
G="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,4096,8192 --causal 0,1 --modes fwd"
for pass in 1 2 3; do
  for v in old sq; do
    FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 80 .dist-$v/bin/flashjit-bench $G --tag $v --out $O/$v$pass.json > $O/$v$pass.txt 2>&1; echo "$v$pass exit $? (t=$(el))"
    FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 40 .dist-$v/bin/flashjit-bench --dtypes bfloat16 --head-dims 256 --seqs 1500,8192 --causal 0 --modes fwd --tag $v --out $O/x$v$pass.json > $O/x$v$pass.txt 2>&1; echo "x$v$pass exit $? (t=$(el))"
    FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 40 .dist-$v/bin/flashjit-bench --dtypes float32 --head-dims 128 --seqs 8192 --causal 0 --modes fwd --tag $v --out $O/f$v$pass.json > $O/f$v$pass.txt 2>&1; echo "f$v$pass exit $? (t=$(el))"
  done
done
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch.json > $O/torch.txt 2>&1; echo "torch exit $? (t=$(el))"
kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/sq'
t={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n=os.path.basename(f)[:-5].rstrip('123').lstrip('xf')
    for r in json.load(open(f))['results']:
        if r.get('tflops'): t.setdefault((r['dtype'],r['head_dim'],r['causal'],r['seq']),{}).setdefault(n,[]).append(round(r['tflops']))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    print(k, t[k], 'sq/old %.3f' % (med['sq']/med['old']), 'sq/torch %.3f old/torch %.3f' % (med['sq']/med['torch'], med['old']/med['torch']) if 'torch' in med else '')
PY
tar czf $OUT/sq.tgz -C $OUT sq && rm -rf $O && echo packed
