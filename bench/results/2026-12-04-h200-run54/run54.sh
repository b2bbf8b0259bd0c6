#!/usr/bin/env bash
# Run 54 (prepared, not yet run): O straight from registers to global memory where it has no staging tile of
# its own (o-direct.patch), so Q is free at the tile's last S and those kernels can run persistent. .dist: main
# plus the patch; .dist-old: main. Every [fwd] GPU test and the [sanitize] forward case under racecheck and
# memcheck on the patch, then the kernels it touches (bf16 d256 causal and not, bf16 d128 non-causal from 8192
# keys = 176-key tiles, f32 TF32 d128) and a control it does not touch (bf16 d128 non-causal 3000), two
# alternating passes, torch cuDNN (and JAX XLA for f32) in the same call. Carry [".dist", ".dist-old"].
set -uo pipefail
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
O=$OUT/run54; mkdir -p $O
FLASHJIT_CACHE_DIR=/tmp/fjc timeout 260 .dist/bin/flashjit_gpu_tests "[fwd]" -r compact > $O/fwd-tests.txt 2>&1; echo "[fwd] exit $? (t=$(el))"; tail -2 $O/fwd-tests.txt
for tool in racecheck memcheck; do
  FLASHJIT_CACHE_DIR=/tmp/fjc timeout 100 compute-sanitizer --tool $tool --error-exitcode 99 .dist/bin/flashjit_gpu_tests "sanitizer cases: the persistent Hopper schedules*" -r compact > $O/sanitize-$tool.txt 2>&1; echo "$tool exit $? (t=$(el))"; tail -2 $O/sanitize-$tool.txt
done
A="--dtypes bfloat16 --head-dims 256 --seqs 1500,4096,8192 --causal 0,1 --modes fwd"
B="--dtypes bfloat16 --head-dims 128 --seqs 3000,8192,16384 --causal 0 --modes fwd"
F="--dtypes float32 --head-dims 128 --seqs 3000,8192 --causal 0 --modes fwd"
for pass in 1 2; do
  for v in new old; do
    D=.dist; [ $v = old ] && D=.dist-old
    for g in A B F; do
      FLASHJIT_CACHE_DIR=/tmp/fjc-$v timeout 60 $D/bin/flashjit-bench ${!g} --tag $v --out $O/$v-$g-p$pass.json > $O/$v-$g-p$pass.out 2>&1; echo "$v $g $pass exit $? (t=$(el))"
    done
  done
done
timeout 100 python3 bench/peers.py --framework torch --impls torch_cudnn $A --out $O/torch-A.json > $O/torch-A.out 2>&1; echo "torch A exit $? (t=$(el))"
timeout 60 python3 bench/peers.py --framework torch --impls torch_cudnn $B --out $O/torch-B.json > $O/torch-B.out 2>&1; echo "torch B exit $? (t=$(el))"
timeout 60 python3 bench/peers.py --framework jax --impls jax_xla $F --out $O/jax-F.json > $O/jax-F.out 2>&1; echo "jax F exit $? (t=$(el))"
python3 - <<'PY'
import json,os,glob,statistics
O=os.environ['OUT']+'/run54'
t={}; spec={}
for f in sorted(glob.glob(f'{O}/*.json')):
    b=os.path.basename(f)[:-5]
    for r in json.load(open(f))['results']:
        if not r.get('tflops') or r['impl']=='flashjit_ieee': continue
        n=b.split('-')[0] if r['impl'].startswith('flashjit') else r['impl']
        k=(r['dtype'],r['head_dim'],r['causal'],r['seq'])
        t.setdefault(k,{}).setdefault(n,[]).append(round(r['tflops']))
        if n=='new': spec[k]=(r.get('spec','')[-22:], r.get('rel_err'))
for k in sorted(t):
    med={n:statistics.median(v) for n,v in t[k].items()}
    peer=max((v for n,v in med.items() if n not in ('new','old')), default=0)
    print(k, t[k], 'new/old %.3f' % (med['new']/med['old']), ('new/peer %.3f' % (med['new']/peer)) if peer else '', spec.get(k))
PY
tar czf $OUT/run54.tgz -C $OUT run54 && rm -rf $O && echo packed
