#!/usr/bin/env bash
# Run 61: stream-K's flags cleared once read (a CUDA graph replays one epoch and one scratch), and a test
# that replays a stream-K launch from a graph with new inputs before each replay. The stream-K and graph
# GPU tests, the [sanitize] cases under racecheck and memcheck, TF32 d128/d64 s600 timings (one pass).
# Carry [".dist"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run61; mkdir -p $O
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 150 .dist/bin/flashjit_gpu_tests "forward: stream-K*,forward: f32 on the Hopper kernel captured*" -r compact > $O/tests.txt 2>&1; echo "tests exit $? (t=$(el))"; tail -n 2 $O/tests.txt
for tool in racecheck memcheck; do
  FLASHJIT_CACHE_DIR=/tmp/fjc timeout 100 compute-sanitizer --tool $tool --error-exitcode 99 .dist/bin/flashjit_gpu_tests "sanitizer cases: the persistent Hopper schedules*" -r compact > $O/sanitize-$tool.txt 2>&1; echo "$tool exit $? (t=$(el))"; tail -n 2 $O/sanitize-$tool.txt
done
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 60 .dist/bin/flashjit-bench --dtypes float32 --head-dims 64,128 --seqs 600,1500 --causal 0 --modes fwd --tag new --out $O/new.json > $O/new.out 2>&1; echo "bench exit $? (t=$(el))"
python3 -c "
import json
for r in json.load(open('$O/new.json'))['results']:
    if r.get('tflops'): print(r['impl'], r['dtype'], r['head_dim'], r['seq'], round(r['tflops'],1), r.get('spec','')[-24:], r.get('grid_ctas'), r.get('rel_err'))
" | tee $O/summary.txt
tar czf $OUT/run61.tgz -C $OUT run61 && rm -rf $O && echo packed
