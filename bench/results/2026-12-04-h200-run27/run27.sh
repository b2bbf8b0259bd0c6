#!/usr/bin/env bash
# Device run 27: a timeline of the Hopper forward's persistent schedule. A traced build (clock64 at the consumer's
# and producer's tile events, launch 40 of each process; trace in a __device__ array read back by the host) of
# 2d0b0ea, bf16 B4 H8 non-causal: where do the ~1.7 us per tile go at s1500?
set -uo pipefail
O=$OUT/r27; mkdir -p $O
for cell in "128 1500" "128 3000" "64 1500" "128 8192" "128 600"; do
  set -- $cell
  FLASHJIT_TRACE=1 FLASHJIT_CACHE_DIR=/tmp/fjc27 timeout 60 .dist-trace/bin/flashjit-bench --dtypes bfloat16 --head-dims $1 --seqs $2 --causal 0 --modes fwd --no-check --out $O/d$1s$2.json > $O/d$1s$2.txt 2>&1; echo "d$1 s$2 exit $?"
  grep -c flashjit_trace $O/d$1s$2.txt
done
tar czf $OUT/r27.tgz -C $OUT r27 && rm -rf $O && echo packed
