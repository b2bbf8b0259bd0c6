# Sourced by a run script on the device machine (bench/results/*/runNN.sh), after `set -uo pipefail`.
# Usage: source bench/device_prelude.sh NAME  — gives:
#   $O            the results folder, $OUT/NAME
#   el            seconds since the script started;  before T: true while el < T
#   gpu_line      appends the GPU's name, clocks, power and temperature to $O/gpu.txt
#   pack STAGE    moves what is in $O into $OUT/NAME-STAGE.tgz (a stage's results come back even if a later one hangs)
#   warm_fwd      compiles every sm90 forward spec of the warm-up grid into $TEST_CACHE with .dist's warm-up tool
#   bench_pass    see below; its cache is $BENCH_CACHE
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
