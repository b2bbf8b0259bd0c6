# Sourced by a run script on the device machine (bench/results/*/runNN.sh), after `set -uo pipefail`.
# Usage: source bench/device_prelude.sh NAME  — gives:
#   $O            the results folder, $OUT/NAME
#   el            seconds since the script started;  before T: true while el < T
#   gpu_line      appends the GPU's name, clocks, power and temperature to $O/gpu.txt
#   pack STAGE    moves what is in $O into $OUT/NAME-STAGE.tgz (a stage's results come back even if a later one hangs)
#   warm_fwd      compiles every sm90 forward spec of the warm-up grid into $TEST_CACHE with .dist's warm-up tool
#   bench_pass    see below; its cache is $BENCH_CACHE
#   ab_round(s), fwd_tests, accept_cells: a new build (.dist) against main (.dist-main), see below
# Two caches on purpose: the GPU tests run on the warmed $TEST_CACHE (no compile time in their limits), while the
# benchmark starts from an empty $BENCH_CACHE, so that its first pass reports cold compile_s.
run_name=$1
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
before() { [ "$(el)" -lt "$1" ]; }
O=$OUT/$run_name; mkdir -p "$O"
TEST_CACHE=/tmp/fjt
BENCH_CACHE=/tmp/fjc-$run_name
gpu_line() {
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv >> "$O/gpu.txt" 2>&1
}
pack() { tar czf "$OUT/$run_name-$1.tgz" -C "$O" . && rm -f "$O"/*; }
warm_fwd() {
  .dist/bin/flashjit-warmup --grid all --arch sm90 --list 2>/dev/null | grep '^fwd' > "$O/fwd-specs.txt"
  FLASHJIT_CACHE_DIR=$TEST_CACHE .dist/bin/flashjit-warmup -j16 $(cat "$O/fwd-specs.txt") > "$O/warmup-new.txt" 2>&1
  echo "warm-up exit $? (t=$(el))"; tail -2 "$O/warmup-new.txt"
}
# bench_pass DIST TAG PASS GROUP...: flashjit-bench from DIST/bin on each group's arguments (the variable named
# GROUP), to $O/TAG-GROUP-pPASS.{json,out}, with the cache in $BENCH_CACHE; then prints the TFLOP/s lines.
bench_pass() {
  local dist=$1 tag=$2 pass=$3 g; shift 3
  for g in "$@"; do
    FLASHJIT_CACHE_DIR=$BENCH_CACHE timeout 60 $dist/bin/flashjit-bench ${!g} --tag $tag \
      --out $O/$tag-$g-p$pass.json > $O/$tag-$g-p$pass.out 2>&1 || echo "$tag $g pass $pass failed $?"
  done
  echo "$tag pass $pass (t=$(el))"; grep -h "TFLOP/s (" $O/$tag-*-p$pass.out | awk '{print $4, $5, $6, $(NF-3)}'
}
# ab_round PASS GROUP: flashjit-bench from .dist (tag new) and .dist-main (tag main), main first in even passes, each
# on an empty cache of its own (compile_s cold in every round), on the arguments in the variable named GROUP; then
# torch cuDNN and flash on the same; prints the TFLOP/s lines and packs the round as pPASS.
ab_round() {
  local p=$1 g=$2 c d cs="new main"
  [ $((p % 2)) = 0 ] && cs="main new"
  for c in $cs; do
    d=.dist; [ $c = main ] && d=.dist-main
    FLASHJIT_CACHE_DIR=/tmp/fjc-$c-$p timeout 60 $d/bin/flashjit-bench ${!g} --tag $c --out $O/$c-$g-p$p.json \
      > $O/$c-$g-p$p.out 2>&1 || echo "$c pass $p failed $?"
  done
  timeout 80 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash ${!g} \
    --out $O/torch-$g-p$p.json > $O/torch-$g-p$p.out 2>&1 || echo "torch $g pass $p exit $?"
  echo "pass $p (t=$(el))"; grep -h "TFLOP/s (" $O/*-p$p.out | awk '{print $2, $4, $5, $6, $(NF-3)}'
  pack p$p
}
# ab_rounds ROUNDS DEADLINE GROUP: ab_round 1, 2, ... ROUNDS on GROUP (a variable name), each only if it starts
# before DEADLINE s.
ab_rounds() {
  local p
  for ((p = 1; p <= $1; ++p)); do
    before $2 || break
    ab_round $p $3
  done
}
# fwd_tests STAGE LIMIT [NAME]: .dist's GPU tests NAME (default every [fwd] one) on $TEST_CACHE within LIMIT
# seconds; packs the output as STAGE.
fwd_tests() {
  local spec=${3:-[fwd]}
  FLASHJIT_CACHE_DIR=$TEST_CACHE timeout $2 .dist/bin/flashjit_gpu_tests "$spec" --durations yes \
    > $O/fwd-tests.txt 2>&1
  echo "$spec exit $? (t=$(el))"; tail -2 $O/fwd-tests.txt
  pack $1
}
# sass_counts SPEC...: from $TEST_CACHE (warm_fwd filled it), each spec's cubin as .dist loads it, read by the
# device's cuobjdump: HGMMA and local-memory (LDL/STL) instruction counts, to $O/sass.txt (issue 6: "the SASS
# shows HGMMA", read on the kernels that ran).
sass_counts() {
  local s dump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
  for s in "$@"; do
    if FLASHJIT_CACHE_DIR=$TEST_CACHE .dist/bin/flashjit cache cubin $s -o /tmp/sass-k.cubin > /dev/null; then
      $dump -sass /tmp/sass-k.cubin > /tmp/sass-k.txt 2>&1
      echo "$s HGMMA $(grep -c HGMMA /tmp/sass-k.txt) LDL/STL $(grep -c -E '\b(LDL|STL)\b' /tmp/sass-k.txt)"
    else
      echo "$s no cubin"
    fi
  done | tee -a "$O/sass.txt"
}
# compile_samples ROUNDS SPEC...: cold compiles of each spec by .dist's flashjit-warmup, one job, an empty cache each
# round, to $O/compile-rN.json (compile_s per spec): more samples of the host's NVRTC time than the bench's one per
# pass, to tell a kernel's cost from the host's noise (the bench's compile_s stays the bar's measure).
compile_samples() {
  local r n=$1; shift
  for ((r = 1; r <= n; ++r)); do
    rm -rf /tmp/fjs-$r
    FLASHJIT_CACHE_DIR=/tmp/fjs-$r .dist/bin/flashjit-warmup -j1 --json $O/compile-r$r.json "$@" \
      > $O/compile-r$r.txt 2>&1
    echo "compile round $r (t=$(el))"; grep -h '^\[' $O/compile-r$r.txt | awk '{print $2, $4}'
  done
}
# accept_cells: issue 6's acceptance cells beyond d128 non-causal 1500-4096, on .dist, one pass, torch beside: d128
# non-causal 8192 (L), d64 non-causal 4096 (S), d128 causal 8192 (K), float32 (TF32) d128 non-causal 8192 (T).
accept_cells() {
  L="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 0 --modes fwd"
  S="--dtypes bfloat16 --head-dims 64 --seqs 4096 --causal 0 --modes fwd"
  K="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 1 --modes fwd"
  T="--dtypes float32 --head-dims 128 --seqs 8192 --causal 0 --modes fwd"
  bench_pass .dist new 1 L S K T
  local g
  for g in L S K; do
    timeout 60 python3 bench/peers.py --framework torch --impls torch_cudnn,torch_flash ${!g} \
      --out $O/torch-$g.json > $O/torch-$g.out 2>&1; echo "torch $g exit $? (t=$(el))"
  done
  timeout 40 python3 bench/peers.py --framework torch --impls torch_flash,torch_efficient \
    --torch-tf32 $T --out $O/torch-T.json > $O/torch-T.out 2>&1; echo "torch T exit $? (t=$(el))"
  grep -h "TFLOP/s (" $O/torch-*.out | awk '{print $2, $4, $5, $6, $(NF-3)}'
  pack accept
}
