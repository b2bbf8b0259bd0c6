#!/usr/bin/env bash
# Run 62: is the softmax's exp2 (MUFU.EX2, 16 per clock per SM) what holds the 16-bit forward back?
# Four builds of flashjit-bench from the same tree, differing only in FwdWgmmaKernel::exponentiate:
#   0: main (every exp2 on MUFU);  4: one 8-key group in 4 on the FMA/ALU pipes (ptx::exp2_poly3,
#   a cubic with the exponent bits set by integer add);  2: one group in 2;  F: no exp at all
#   (P = the scaled score: wrong results, an upper bound on what freeing MUFU could give).
# Two alternating passes, bf16 non-causal d64 and d128. Carry [".dist-0", ".dist-4", ".dist-2", ".dist-F"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run62; mkdir -p $O
H="--dtypes bfloat16 --head-dims 64,128 --seqs 1500,3000,4096,8192 --causal 0 --modes fwd"
for pass in 1 2; do
  for v in 0 4 2 F; do
    FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 120 .dist-$v/bin/flashjit-bench $H --tag v$v --out $O/v$v-p$pass.json > $O/v$v-p$pass.out 2>&1; echo "v$v $pass exit $? (t=$(el))"
  done
done
python3 - <<'PY' | tee $O/summary-table.txt
import json,os,glob,statistics
O=os.environ['OUT']+'/run62'
t={}; err={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n=os.path.basename(f).split('-')[0]
    try: rows=json.load(open(f))['results']
    except Exception as e: print('bad', f, e); continue
    for r in rows:
        if not r.get('tflops') or r['impl']=='flashjit_ieee': continue
        k=(r['head_dim'],r['seq'])
        t.setdefault(k,{}).setdefault(n,[]).append(round(r['tflops'],1)); err[(k,n)]=r.get('rel_err')
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    print(k, ' '.join('%s %s (%.3f, err %.2g)' % (n, t[k][n], med[n]/med['v0'], err[(k,n)] or 0) for n in sorted(med)))
PY
tar czf $OUT/run62.tgz -C $OUT run62 && rm -rf $O && echo packed
