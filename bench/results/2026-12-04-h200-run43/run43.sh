#!/usr/bin/env bash
# Run 43: three consumer warpgroups (192 query rows per CTA, 128 keys per tile, setmaxnreg 32/160) for bf16
# head_dim 64, against the policy's tiles (two consumers: 192 keys non-causal, 128 keys causal up to 4096 keys),
# in one binary through FLASHJIT_FWD_TILE. Non-causal and causal s600-8192, two alternating passes, torch cuDNN.
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/m192; mkdir -p $O
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
G="--dtypes bfloat16 --head-dims 64 --seqs 600,1500,3000,4096,8192 --causal 0,1 --modes fwd"
for pass in 1 2; do
  for v in base m192s4 m192s3; do
    case $v in
      base) E="";;
      m192s4) E="FLASHJIT_FWD_TILE=bm192_bn128_w16_s4_wg";;
      m192s3) E="FLASHJIT_FWD_TILE=bm192_bn128_w16_s3_wg";;
    esac
    env $E FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 90 .dist/bin/flashjit-bench $G --tag $v --out $O/$v-p$pass.json > $O/$v-p$pass.txt 2>&1; echo "$v$pass exit $? (t=$(el))"
  done
done
FLASHJIT_FWD_TILE=bm192_bn128_w16_s4_wg FLASHJIT_CACHE_DIR=/tmp/fjc-m192s4 timeout 60 .dist/bin/flashjit-bench --dtypes bfloat16 --head-dims 64 --seqs 1000,3000 --seq-k 600,1500,3001 --causal 0,1 --modes fwd --tag m192s4-ragged --out $O/ragged.json > $O/ragged.txt 2>&1; echo "ragged exit $? (t=$(el))"; grep -c " ok" $O/ragged.txt; grep -v " ok" $O/ragged.txt | grep flashjit | grep -v "^\[" | head
timeout 90 python3 bench/peers.py --framework torch --impls torch_cudnn $G --out $O/torch.json > $O/torch.txt 2>&1; echo "torch exit $? (t=$(el))"
kill $SMI
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/m192'
t={}; err={}
for f in sorted(glob.glob(f'{O}/*.json')):
    n=os.path.basename(f)[:-5].split('-p')[0]
    if n=='ragged': continue
    for r in json.load(open(f))['results']:
        if r.get('tflops'):
            t.setdefault((r['causal'],r['seq']),{}).setdefault(n,[]).append(round(r['tflops']))
            err.setdefault(n,[]).append(r.get('rel_err'))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    print(k, t[k], ' '.join('%s/base %.3f' % (n, med[n]/med['base']) for n in med if n!='base'))
print({n:(min(v),max(v)) for n,v in err.items() if None not in v})
PY
tar czf $OUT/m192.tgz -C $OUT m192 && rm -rf $O && echo packed
