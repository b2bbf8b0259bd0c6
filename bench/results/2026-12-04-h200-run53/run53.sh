#!/usr/bin/env bash
# Run 53: main with head_dim 256's 80-key policy tile: the head_dim 256 GPU test and the README example
# through the policy, then one pass of bf16 B4 H8 head_dim 256 (the spec the policy picks). Carry [".dist"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run53; mkdir -p $O
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 100 .dist/bin/flashjit_gpu_tests "forward: head_dim 256 on the Hopper kernel","the README example runs" -r compact > $O/tests.txt 2>&1; echo "tests exit $? (t=$(el))"; tail -2 $O/tests.txt
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 60 .dist/bin/flashjit-bench --dtypes bfloat16,float16 --head-dims 256 --seqs 1500,8192 --causal 0,1 --modes fwd --tag main --out $O/d256.json > $O/d256.out 2>&1; echo "bench exit $? (t=$(el))"
python3 -c "
import json
for r in json.load(open('$O/d256.json'))['results']:
    print(r['dtype'], r['causal'], r['seq'], r.get('spec','')[-22:], round(r.get('tflops') or 0), r.get('rel_err'))
"
tar czf $OUT/run53.tgz -C $OUT run53 && rm -rf $O && echo packed
