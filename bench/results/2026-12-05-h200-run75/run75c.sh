#!/usr/bin/env bash
# Run 75 call 2 (the last 4 device minutes): K-ahead's [fwd] GPU tests, warm cache, per-case durations, as far as
# 120 s get: does a test case hang? carry [".dist-K"].
O=$OUT/run75c; mkdir -p $O
.dist-K/bin/flashjit-warmup --grid all --arch sm90 --list 2>/dev/null | grep '^fwd' > $O/specs.txt
FLASHJIT_CACHE_DIR=/tmp/fjt-K .dist-K/bin/flashjit-warmup -j16 $(cat $O/specs.txt) > /dev/null 2>&1
FLASHJIT_CACHE_DIR=/tmp/fjt-K timeout 120 .dist-K/bin/flashjit_gpu_tests "[fwd]" --durations yes > $O/fwd-K.txt 2>&1
echo "K exit $?"; grep -E "^[0-9.]+ s: " $O/fwd-K.txt; tail -3 $O/fwd-K.txt
