#!/usr/bin/env bash
# Run 75 call 2: the [fwd] GPU tests on main and on K-ahead, warm caches, with per-case durations (did K hang?).
# carry [".dist", ".dist-K"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run75b; mkdir -p $O
for c in main K; do
  dist=.dist; [ $c = K ] && dist=.dist-K
  $dist/bin/flashjit-warmup --grid all --arch sm90 --list 2>/dev/null | grep '^fwd' > $O/specs-$c.txt
  FLASHJIT_CACHE_DIR=/tmp/fjt-$c $dist/bin/flashjit-warmup -j16 $(cat $O/specs-$c.txt) > /dev/null 2>&1
  FLASHJIT_CACHE_DIR=/tmp/fjt-$c timeout 160 $dist/bin/flashjit_gpu_tests "[fwd]" --durations yes > $O/fwd-$c.txt 2>&1
  echo "$c exit $? (t=$(el))"; grep -E " s: " $O/fwd-$c.txt | tail -20; tail -3 $O/fwd-$c.txt
done
