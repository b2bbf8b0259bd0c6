#!/usr/bin/env bash
# Run 63: fewer instructions around the wgmma in the consumer's main loop (run 62: +113 instructions
# per K/V step cost 5-6% even at d128, so the loop is bound by issue and latency, not by MUFU).
#   0:  main (8394c89).
#   B:  each wgmma's shared-memory descriptor is the operand's base descriptor plus the k step's
#       offset (ptx::smem_desc_advance: one 32-bit add), not a new descriptor built from the address.
#   AB: B, and the warpgroup index taken through __shfl_sync so ptxas knows it is warp-uniform: Q's
#       descriptors move to the uniform datapath, no R2UR left in the loop.
#   C:  AB, and the row max as a pairwise tree (the running max was a chain of kBlockN/8 FMNMX).
# .dist = C's full install: every [fwd] GPU test and the sanitizer cases first. Then two alternating
# passes of the four benches. Carry [".dist", ".dist-0", ".dist-B", ".dist-AB", ".dist-C"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run63; mkdir -p $O
FLASHJIT_CACHE_DIR=/tmp/fjc-C timeout 240 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd-tests.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd-tests.txt
FLASHJIT_CACHE_DIR=/tmp/fjc-C timeout 60 compute-sanitizer --tool racecheck --error-exitcode 99 .dist/bin/flashjit_gpu_tests "sanitizer cases: the persistent Hopper schedules*" -r compact > $O/sanitize-racecheck.txt 2>&1; echo "racecheck exit $? (t=$(el))"; tail -1 $O/sanitize-racecheck.txt
H="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
K="--dtypes bfloat16 --head-dims 128 --seqs 8192 --causal 1 --modes fwd"
F="--dtypes float32 --head-dims 128 --seqs 1500,8192 --causal 0 --modes fwd"
for pass in 1 2; do
  for v in 0 B AB C; do
    for g in H K F; do
      FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 100 .dist-$v/bin/flashjit-bench ${!g} --tag v$v --out $O/v$v-$g-p$pass.json > $O/v$v-$g-p$pass.out 2>&1 || echo "v$v $g $pass failed $?"
    done
    echo "v$v pass $pass (t=$(el))"
  done
done
python3 - <<'PY' | tee $O/summary-table.txt
import json,os,glob,statistics
O=os.environ['OUT']+'/run63'
t={}; err={}
for f in sorted(glob.glob(f'{O}/v*.json')):
    n=os.path.basename(f).split('-')[0]
    try: rows=json.load(open(f))['results']
    except Exception as e: print('bad', f, e); continue
    for r in rows:
        if not r.get('tflops') or r['impl']=='flashjit_ieee': continue
        k=(r['dtype'],r['head_dim'],r['causal'],r['seq'])
        t.setdefault(k,{}).setdefault(n,[]).append(round(r['tflops'],1)); err[(k,n)]=r.get('rel_err')
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    print(k, ' '.join('%s %s (%.3f, err %.2g)' % (n, t[k][n], med[n]/med['v0'], err[(k,n)] or 0) for n in sorted(med)))
PY
tar czf $OUT/run63.tgz -C $OUT run63 && rm -rf $O && echo packed
