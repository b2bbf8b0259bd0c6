#!/usr/bin/env python3
"""Peer attention implementations on flashjit-bench's grid, in the seed's JSON schema.

    python3 bench/peers.py --framework torch --out torch.json   # torch SDPA backends
    python3 bench/peers.py --framework jax --out jax.json       # jax.nn.dot_product_attention

torch impls: torch_flash, torch_efficient, torch_math, torch_cudnn (one SDPA
backend each, forced with torch.nn.attention.sdpa_kernel). jax impls: jax_xla,
jax_cudnn (implementation="xla" / "cudnn"). Run each framework in its own
process, as the seed did. Grid flags mirror flashjit-bench; --list prints the
rows without importing either framework.

Per row: inputs are random normal [B, S, H, D] tensors (torch gets BHSD views
of them, the layout its users pass), one call is checked against a float64
reference on the same inputs, then `inner` back-to-back calls are timed
(repeated, median and quartiles per call) rotating among input sets larger than
the L2 together. torch times with CUDA events and also replays the calls from a
CUDA graph (graph_ms); JAX times with the host clock around
block_until_ready, which is what its users see (no event API).
Combinations a backend rejects are recorded as rows with "error":
"unsupported: ..." (not skipped), so the report can say why a cell is empty.
"""

import argparse
import datetime
import json
import math
import os
import platform
import socket
import sys
import time
import traceback
import warnings

# The seed's grid (shared/seed/attention_h100.json); flashjit-bench has the same defaults.
DEFAULT_GRID = {
    "batch": 4,
    "heads": 8,
    "head_dims": [64, 128],
    "seqs": [128, 512, 1024, 2048, 4096, 8192, 600, 1500, 3000],
    "seq_k": [],
    "dtypes": ["bfloat16", "float32"],
    "modes": ["fwd", "fwd_bwd"],
    "causal": [0, 1],
}
TORCH_IMPLS = ["torch_flash", "torch_efficient", "torch_math", "torch_cudnn"]
JAX_IMPLS = ["jax_xla", "jax_cudnn"]
DTYPE_ALIASES = {
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "f16": "float16", "fp16": "float16", "float16": "float16", "half": "float16",
    "f32": "float32", "fp32": "float32", "float32": "float32",
}
# One FLOP formula for the whole bench (the seed's): fwd = 4*B*H*Sq*Sk*D, halved
# when causal; fwd_bwd = 3.5 x fwd.
FWD_FLOPS_PER_ELEM = 4.0
FWD_BWD_FLOP_FACTOR = 3.5
MIB = 1024.0 * 1024.0
# Query rows always checked on a large problem: the first and last ones (edge tiles, causal corners).
EDGE_ROWS = 16
# Error tolerances (flags, not asserts): bf16/f16 operands ~1e-3..1e-2, tf32 ~3e-4, fp32 far under 1e-3.
TOLERANCE = {"native": 3e-2, "tf32": 5e-3, "ieee": 1e-4}


def log(msg, end="\n"):
    sys.stderr.write(msg + end)
    sys.stderr.flush()


# ---------------------------------------------------------------------------
# Options and the grid
# ---------------------------------------------------------------------------

def int_list(text):
    return [int(x) for x in str(text).split(",") if x.strip() != ""]


def str_list(text):
    return [x.strip() for x in str(text).split(",") if x.strip() != ""]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--framework", choices=["torch", "jax"], required=False,
                   help="which peers to run (one framework per process)")
    p.add_argument("--dtypes", type=str_list, help="bfloat16,float32 (float16 also accepted)")
    p.add_argument("--head-dims", type=int_list, help="e.g. 64,128")
    p.add_argument("--seqs", type=int_list, help="query lengths (and key lengths unless --seq-k)")
    p.add_argument("--seq-k", type=int_list, help="key lengths, each crossed with --seqs")
    p.add_argument("--modes", type=str_list, help="fwd,fwd_bwd")
    p.add_argument("--causal", type=int_list, help="0,1")
    p.add_argument("--batch", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--impls", type=str_list,
                   help="subset of " + ",".join(TORCH_IMPLS + JAX_IMPLS) +
                        " (other frameworks' and flashjit's names are ignored)")
    p.add_argument("--config", help="JSON with the seed's config keys (a seed result file works too)")
    p.add_argument("--tag", help="row tag (default: the GPU name)")
    p.add_argument("--out", help="write the JSON here (rewritten after every row)")
    p.add_argument("--quick", action="store_true", help="a tiny grid for smoke tests")
    p.add_argument("--list", "--dry-run", dest="list", action="store_true",
                   help="print the rows without running (imports neither framework)")
    p.add_argument("--target-ms", type=float, help="time of one repetition (default 50)")
    p.add_argument("--reps", type=int, help="repetitions (default 7)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--sustain-ms", type=float, default=200.0,
                   help="GPU time of untimed calls right before the timed ones, so that every impl is timed at "
                        "the clock the power cap holds under sustained load (default 200; 0: none)")
    p.add_argument("--graph-reps", type=int, default=5)
    p.add_argument("--graph-max-calls", type=int, default=1000)
    p.add_argument("--max-inner", type=int, default=10000)
    p.add_argument("--rotate-l2-factor", type=float, default=3.0)
    p.add_argument("--max-sets", type=int, default=128)
    p.add_argument("--l2-mb", type=float, default=0,
                   help="L2 size for the rotation (default: torch reads it; JAX assumes 60, the H200's)")
    p.add_argument("--ref-rows", type=int, default=256)
    p.add_argument("--ref-full-seq", type=int, default=1024,
                   help="JAX: full check when Sq*Sk <= this^2 (torch checks everything on the GPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-graph", action="store_true", help="torch: skip the CUDA-graph timing")
    p.add_argument("--no-check", action="store_true")
    p.add_argument("--max-seconds", type=float, default=0, help="start no new row after this (0: no limit)")
    p.add_argument("--torch-tf32", action="store_true",
                   help="allow TF32 in torch float32 matmuls (impl names get a _tf32 suffix)")
    p.add_argument("--jax-precision", choices=["default", "highest"], default="default",
                   help="JAX float32 matmul precision; default is TF32 on the GPU, highest is exact "
                        "(impl names get an _ieee suffix)")
    p.add_argument("--device", default="cuda", help="torch device (cpu works for a smoke test)")
    return p.parse_args(argv)


def load_config(path):
    with open(path) as f:
        j = json.load(f)
    if isinstance(j.get("config"), dict):
        j = j["config"]
    return j


def resolve_options(args):
    """defaults < --quick < --config < flags given (flashjit-bench's precedence)."""
    o = dict(DEFAULT_GRID)
    o.update(target_ms=50.0, reps=7, tag=None, impls=None)
    if args.quick:
        o.update(batch=2, heads=4, head_dims=[64], seqs=[256, 300], target_ms=10.0, reps=3)
    if args.config:
        c = load_config(args.config)
        as_list = lambda v: v if isinstance(v, list) else [v]
        for key in ("batch", "heads", "target_ms", "reps"):
            if key in c:
                o[key] = c[key]
        if "head_dims" in c:
            o["head_dims"] = as_list(c["head_dims"])
        if "seqs" in c:
            o["seqs"] = as_list(c["seqs"])
        elif "seq_lens" in c or "ragged_seq_lens" in c:
            o["seqs"] = as_list(c.get("seq_lens", [])) + as_list(c.get("ragged_seq_lens", []))
        if "seq_k" in c:
            o["seq_k"] = as_list(c["seq_k"])
        for key in ("dtypes", "modes"):
            if key in c:
                o[key] = as_list(c[key])
        if "causal" in c:
            o["causal"] = [int(x) for x in as_list(c["causal"])]
        if "impls" in c:
            o["impls"] = as_list(c["impls"])
        if isinstance(c.get("tag"), str):
            o["tag"] = c["tag"]
    for key in ("dtypes", "head_dims", "seqs", "seq_k", "modes", "causal", "batch", "heads", "impls",
                "tag", "target_ms", "reps"):
        v = getattr(args, key)
        if v is not None:
            o[key] = v
    o["dtypes"] = [canonical_dtype(d) for d in o["dtypes"]]
    for m in o["modes"]:
        if m not in ("fwd", "fwd_bwd"):
            raise SystemExit("peers.py: --modes takes fwd, fwd_bwd; got %r" % m)
    for c in o["causal"]:
        if c not in (0, 1):
            raise SystemExit("peers.py: --causal takes 0, 1; got %r" % c)
    return o


def canonical_dtype(name):
    if name not in DTYPE_ALIASES:
        raise SystemExit("peers.py: unknown dtype %r (bfloat16, float16, float32)" % name)
    return DTYPE_ALIASES[name]


def framework_impls(framework, requested, args):
    known = TORCH_IMPLS if framework == "torch" else JAX_IMPLS
    impls = known if not requested else [i for i in requested if i in known]
    return impls


def impl_label(impl, dtype, args):
    """The row's impl name: float32 variants that change the math get a suffix."""
    if dtype == "float32":
        if impl.startswith("torch_") and args.torch_tf32:
            return impl + "_tf32"
        if impl.startswith("jax_") and args.jax_precision == "highest":
            return impl + "_ieee"
    return impl


def build_grid(o, impls):
    rows = []
    for dtype in o["dtypes"]:
        for d in o["head_dims"]:
            for c in o["causal"]:
                for s in o["seqs"]:
                    for sk in (o["seq_k"] or [s]):
                        for mode in o["modes"]:
                            for impl in impls:
                                rows.append(dict(impl=impl, dtype=dtype, head_dim=d, seq=s, seq_k=sk,
                                                 causal=bool(c), mode=mode, batch=o["batch"],
                                                 heads=o["heads"]))
    return rows


def row_label(r):
    s = "%s %s d%d s%d" % (r["impl"], r["dtype"], r["head_dim"], r["seq"])
    if r["seq_k"] != r["seq"]:
        s += "x%d" % r["seq_k"]
    return s + " %s %s" % ("causal" if r["causal"] else "noncausal", r["mode"])


def row_flops(r):
    f = FWD_FLOPS_PER_ELEM * r["batch"] * r["heads"] * r["seq"] * r["seq_k"] * r["head_dim"]
    if r["causal"]:
        f *= 0.5
    if r["mode"] == "fwd_bwd":
        f *= FWD_BWD_FLOP_FACTOR
    return f


def row_seed(base, r):
    """A stable 63-bit seed from the row's label (FNV-1a), independent of the impl."""
    label = "%s d%d s%dx%d c%d %s" % (r["dtype"], r["head_dim"], r["seq"], r["seq_k"], r["causal"], r["mode"])
    h = 0xcbf29ce484222325
    for ch in label.encode():
        h = ((h ^ ch) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return (h ^ base) & 0x7FFFFFFFFFFFFFFF


def percentile(values, p):
    """Linear-interpolated percentile (numpy's default)."""
    v = sorted(values)
    if not v:
        return float("nan")
    pos = p / 100.0 * (len(v) - 1)
    lo = int(math.floor(pos))
    hi = min(len(v) - 1, lo + 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def sample_rows(seqlen, count, seed):
    """Rows checked on a large problem: the first and last EDGE_ROWS plus random ones."""
    import numpy as np
    if seqlen <= count:
        return np.arange(seqlen)
    rng = np.random.default_rng(seed)
    edge = set(range(EDGE_ROWS)) | set(range(seqlen - EDGE_ROWS, seqlen))
    rest = [i for i in rng.permutation(seqlen) if i not in edge][: max(0, count - len(edge))]
    return np.array(sorted(edge | set(int(i) for i in rest)))


# ---------------------------------------------------------------------------
# float64 reference: one implementation over numpy or torch arrays
# ---------------------------------------------------------------------------

class NumpyOps:
    def __init__(self):
        import numpy as np
        self.np = np

    def t(self, a):
        return a.swapaxes(-1, -2)

    def amax(self, a):
        return a.max(axis=-1, keepdims=True)

    def rsum(self, a):
        return a.sum(axis=-1, keepdims=True)

    def arange(self, n):
        return self.np.arange(n)

    def where(self, c, a, b):
        return self.np.where(c, a, b)

    def exp(self, a):
        return self.np.exp(a)

    def log(self, a):
        return self.np.log(a)

    def isfinite(self, a):
        return self.np.isfinite(a)


class TorchOps:
    def __init__(self, torch, device):
        self.torch = torch
        self.device = device

    def t(self, a):
        return a.transpose(-1, -2)

    def amax(self, a):
        return a.amax(dim=-1, keepdim=True)

    def rsum(self, a):
        return a.sum(dim=-1, keepdim=True)

    def arange(self, n):
        return self.torch.arange(n, device=self.device)

    def where(self, c, a, b):
        if not self.torch.is_tensor(a):
            a = self.torch.tensor(a, dtype=self.torch.float64, device=self.device)
        if not self.torch.is_tensor(b):
            b = self.torch.tensor(b, dtype=self.torch.float64, device=self.device)
        return self.torch.where(c, a, b)

    def exp(self, a):
        return a.exp()

    def log(self, a):
        return a.log()

    def isfinite(self, a):
        return self.torch.isfinite(a)


def ref_attention(ops, q, k, v, do, causal, scale, seqlen_q, rows=None):
    """float64 attention over the last two axes, batched over leading ones.

    q: [..., R, D] (rows `rows` of the query, or all Sq rows when rows is None);
    k, v: [..., Sk, D]; do like q or None. Causal is bottom-right aligned: query
    i sees key j iff j <= i + Sk - Sq. A row that sees no key has O = 0, lse =
    -inf and no gradient. Returns (o, lse) or (o, lse, dq, dk, dv) when `do` is
    given (then rows must be None: every row contributes to dK, dV).
    """
    sk = k.shape[-2]
    s = (q @ ops.t(k)) * scale
    if causal:
        i = ops.arange(seqlen_q) if rows is None else rows
        j = ops.arange(sk)
        visible = j[None, :] <= i[:, None] + (sk - seqlen_q)
        s = ops.where(visible, s, -math.inf)
    m = ops.amax(s)
    m_safe = ops.where(ops.isfinite(m), m, 0.0)
    p = ops.exp(s - m_safe)
    l = ops.rsum(p)
    l_safe = ops.where(l > 0, l, 1.0)
    p = p / l_safe
    o = p @ v
    lse = ops.where(l > 0, m_safe + ops.log(l_safe), -math.inf)
    if do is None:
        return o, lse
    del s
    dp = do @ ops.t(v)
    di = ops.rsum(do * o)
    ds = p * (dp - di) * scale
    del dp
    return o, lse, ds @ k, ops.t(ds) @ q, ops.t(p) @ do


class ErrAcc:
    """||out - ref||, ||ref||, max |out - ref| and NaN over the elements added."""

    def __init__(self):
        self.diff2 = 0.0
        self.ref2 = 0.0
        self.max_abs = 0.0
        self.nan = False

    def add(self, got, ref, xp):
        if not bool(xp.isfinite(got).all()):
            self.nan = True
            return
        d = got - ref
        self.diff2 += float((d * d).sum())
        self.ref2 += float((ref * ref).sum())
        self.max_abs = max(self.max_abs, float(abs(d).max()))

    def rel(self):
        if self.nan:
            return float("nan")
        return math.sqrt(self.diff2 / self.ref2) if self.ref2 > 0 else math.sqrt(self.diff2)


def finish_check(row, accs, scope, precision, nan_in):
    rel, max_abs = 0.0, 0.0
    nan = bool(nan_in)
    for name, acc in accs.items():
        row["err_" + name] = None if acc.nan else acc.rel()
        nan = nan or acc.nan
        rel = max(rel, acc.rel()) if not acc.nan else rel
        max_abs = max(max_abs, acc.max_abs)
    row["max_abs_err"] = None if nan else max_abs
    row["rel_err"] = None if nan else rel
    row["err_scope"] = scope
    tol = TOLERANCE[precision]
    row["err_tol"] = tol
    if nan:
        row["check"] = "nan"
        row["nan_in"] = sorted(set(nan_in) | {n for n, a in accs.items() if a.nan})
    else:
        row["check"] = "ok" if rel <= tol else "fail"


# ---------------------------------------------------------------------------
# Shared row plumbing
# ---------------------------------------------------------------------------

def base_row(r, tag):
    return {"impl": r["impl_label"], "dtype": r["dtype"], "head_dim": r["head_dim"], "seq": r["seq"],
            "causal": r["causal"], "mode": r["mode"], "batch": r["batch"], "heads": r["heads"], "tag": tag,
            "seq_k": r["seq_k"]}


def sets_for(set_bytes, l2_bytes, args):
    n = int(math.ceil(args.rotate_l2_factor * l2_bytes / max(1, set_bytes)))
    return max(1, min(n, args.max_sets))


def time_loop(call, sync_start, sync_stop, args, o):
    """inner sized from a probe so one repetition takes ~target_ms; returns
    (inner, per-call ms of each repetition). sync_start/stop return a host-side
    timestamp token and elapsed ms between tokens."""
    for i in range(max(1, args.warmup)):
        call(i)
    probe = 3
    t0 = sync_start()
    for i in range(probe):
        call(i)
    one_ms = sync_stop(t0) / probe
    inner = int(min(max(1, math.ceil(o["target_ms"] / max(one_ms, 1e-4))), args.max_inner))
    # The H200 boosts for the first ~50 ms of full load, then its power cap
    # lowers the clock (bench/results/2026-12-04-h200-run21): time the
    # sustained state, as flashjit-bench does.
    for i in range(int(min(math.ceil(args.sustain_ms / max(one_ms, 1e-4)), 100000))):
        call(i)
    per_call = []
    for rep in range(o["reps"]):
        t0 = sync_start()
        for i in range(inner):
            call(rep * inner + i)
        per_call.append(sync_stop(t0) / inner)
    return inner, per_call


def fill_timing(row, r, inner, per_call):
    med = percentile(per_call, 50)
    row["inner"] = inner
    row["median_ms"] = med
    row["q1_ms"] = percentile(per_call, 25)
    row["q3_ms"] = percentile(per_call, 75)
    row["rep_ms"] = [round(x, 6) for x in per_call]  # per call, one per rep, in order: clock states show here
    row["tflops"] = row_flops(r) / (med * 1e9)


def first_line(e):
    text = str(e).strip().splitlines()
    return (type(e).__name__ + ": " + (text[0] if text else "")).strip()


# ---------------------------------------------------------------------------
# torch
# ---------------------------------------------------------------------------

def sdpa_reasons(caught):
    """torch's reasons for rejecting a backend, from its warnings: the headers ("Flash
    attention kernel not used because:") and source locations dropped."""
    out = []
    for w in caught:
        text = str(w.message).split("(Triggered internally")[0].strip()
        for line in text.splitlines():
            line = line.strip()
            if line and not line.endswith("because:") and line not in out:
                out.append(line)
    return out


class TorchRunner:
    def __init__(self, args, o):
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.torch, self.F, self.sdpa_kernel = torch, F, sdpa_kernel
        self.args, self.o = args, o
        self.device = torch.device(args.device)
        self.cuda = self.device.type == "cuda"
        if self.cuda and not torch.cuda.is_available():
            raise SystemExit("peers.py: torch sees no CUDA device (torch.cuda.is_available() is False)")
        torch.backends.cuda.matmul.allow_tf32 = bool(args.torch_tf32)
        torch.backends.cudnn.allow_tf32 = bool(args.torch_tf32)
        self.backends = {"torch_flash": SDPBackend.FLASH_ATTENTION,
                         "torch_efficient": SDPBackend.EFFICIENT_ATTENTION,
                         "torch_math": SDPBackend.MATH}
        if hasattr(SDPBackend, "CUDNN_ATTENTION"):
            self.backends["torch_cudnn"] = SDPBackend.CUDNN_ATTENTION
        self.dtypes = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
        self.ops = TorchOps(torch, self.device)
        if self.cuda:
            props = torch.cuda.get_device_properties(self.device)
            self.l2_bytes = args.l2_mb * MIB if args.l2_mb else getattr(props, "L2_cache_size", 60 * 10**6)
        else:
            self.l2_bytes = (args.l2_mb or 60) * MIB

    def device_info(self):
        torch = self.torch
        d = {"framework": "torch", "torch": torch.__version__, "cuda": torch.version.cuda,
             "python": platform.python_version(), "backend": "gpu" if self.cuda else "cpu"}
        if self.cuda:
            p = torch.cuda.get_device_properties(self.device)
            d.update(device_kind=p.name, gpu=p.name, cc="%d.%d" % (p.major, p.minor),
                     sm_count=p.multi_processor_count, l2_mb=self.l2_bytes / MIB,
                     total_mem_mb=p.total_memory / MIB, cudnn=torch.backends.cudnn.version())
        else:
            d.update(device_kind="cpu", gpu="cpu")
        return d

    def precision(self, dtype, impl):
        if dtype != "float32":
            return "native"
        if impl == "torch_math":
            return "tf32" if self.torch.backends.cuda.matmul.allow_tf32 else "ieee"
        # The fused float32 kernels (efficient) compute in fp32 on CUDA cores.
        return "ieee"

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def timers(self):
        torch = self.torch
        if not self.cuda:
            return (lambda: time.perf_counter(), lambda t0: (time.perf_counter() - t0) * 1e3)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def t_start():
            start.record()
            return start

        def t_stop(_):
            stop.record()
            stop.synchronize()
            return start.elapsed_time(stop)
        return t_start, t_stop

    def make_call(self, r):
        torch, F = self.torch, self.F
        sq, sk = r["seq"], r["seq_k"]
        kw = {}
        if r["causal"]:
            if sq == sk:
                kw["is_causal"] = True
            else:
                # is_causal is top-left aligned in torch when Sq != Sk; flashjit's is bottom-right.
                from torch.nn.attention.bias import causal_lower_right
                kw["attn_mask"] = causal_lower_right(sq, sk)

        def fwd(q, k, v):
            # [B, S, H, D] storage, [B, H, S, D] views: the layout SDPA users pass.
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  **kw).transpose(1, 2)

        if r["mode"] == "fwd":
            return lambda s: fwd(s[0], s[1], s[2])

        def fwd_bwd(s):
            out = fwd(s[0], s[1], s[2])
            # autograd.grad: out.backward(dout) without accumulating into .grad.
            return (out,) + torch.autograd.grad(out, (s[0], s[1], s[2]), s[3])
        return fwd_bwd

    def make_set(self, r, gen, dtype):
        torch = self.torch
        b, h, d = r["batch"], r["heads"], r["head_dim"]
        grad = r["mode"] == "fwd_bwd"

        def rnd(s):
            x = torch.randn((b, s, h, d), generator=gen, device=self.device, dtype=torch.float32).to(dtype)
            return x.requires_grad_(grad)
        tensors = [rnd(r["seq"]), rnd(r["seq_k"]), rnd(r["seq_k"])]
        if grad:
            tensors.append(rnd(r["seq"]).detach())
        return tensors

    def run_row(self, r, row):
        torch = self.torch
        impl = r["impl"]
        dtype = self.dtypes[r["dtype"]]
        row["precision"] = self.precision(r["dtype"], impl)
        if impl not in self.backends:
            row["error"] = "unsupported: this torch has no %s backend" % impl
            return row
        esize = torch.tensor([], dtype=dtype).element_size()
        n_q = r["batch"] * r["seq"] * r["heads"] * r["head_dim"]
        n_k = r["batch"] * r["seq_k"] * r["heads"] * r["head_dim"]
        in_bytes = (2 * n_q + 2 * n_k if r["mode"] == "fwd_bwd" else n_q + 2 * n_k) * esize
        out_bytes = (2 * n_q + 2 * n_k if r["mode"] == "fwd_bwd" else n_q) * esize
        gen = torch.Generator(device=self.device)
        gen.manual_seed(row_seed(self.args.seed, r))
        call = self.make_call(r)

        with self.sdpa_kernel([self.backends[impl]]), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sets = [self.make_set(r, gen, dtype)]
            # Backend setup (first call): also where an unsupported combination is rejected.
            self.sync()
            t0 = time.perf_counter()
            try:
                outs = call(sets[0])
                self.sync()
            except RuntimeError as e:
                msg = first_line(e)
                if any(t in str(e) for t in ("No available kernel", "No viable backend")):
                    row["error"] = "unsupported: " + "; ".join(sdpa_reasons(caught)[:3] or [msg])
                else:
                    row["error"] = msg
                return row
            row["compile_s"] = time.perf_counter() - t0

            if not self.args.no_check:
                self.check(r, row, sets[0], outs)
            del outs

            # Memory of one call: inputs + outputs + temporaries (max_memory_allocated delta).
            if self.cuda:
                self.sync()
                torch.cuda.reset_peak_memory_stats(self.device)
                base = torch.cuda.memory_allocated(self.device)
                outs = call(sets[0])
                self.sync()
                row["peak_mb"] = (torch.cuda.max_memory_allocated(self.device) - base + in_bytes) / MIB
                del outs

            nsets = sets_for(in_bytes + out_bytes, self.l2_bytes, self.args)
            while len(sets) < nsets:
                sets.append(self.make_set(r, gen, dtype))
            row["rotate_sets"] = nsets
            t_start, t_stop = self.timers()
            inner, per_call = time_loop(lambda i: call(sets[i % nsets]), t_start, t_stop, self.args, self.o)
            fill_timing(row, r, inner, per_call)
            if self.cuda and not self.args.no_graph:
                self.graph(r, row, call, sets, inner)
        del sets
        if self.cuda:
            torch.cuda.empty_cache()  # the math backend's [S, S] blocks must not crowd the next row
        return row

    def graph(self, r, row, call, sets, inner):
        torch = self.torch
        n = max(1, min(inner, self.args.graph_max_calls))
        try:
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for i in range(3):
                    call(sets[i % len(sets)])
            torch.cuda.current_stream(self.device).wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for i in range(n):
                    call(sets[i % len(sets)])
            g.replay()
            self.sync()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            ms = []
            for _ in range(max(1, self.args.graph_reps)):
                start.record()
                g.replay()
                stop.record()
                stop.synchronize()
                ms.append(start.elapsed_time(stop) / n)
            row["graph_ms"] = percentile(ms, 50)
            row["graph_inner"] = n
            row["graph_tflops"] = row_flops(r) / (row["graph_ms"] * 1e9)
            del g
        except Exception as e:  # capture is not supported by every backend/version
            row["graph_ms"] = None
            row["graph_error"] = first_line(e)
            self.sync()

    def check(self, r, row, s, outs):
        """float64 reference on the GPU, everything checked, chunked over heads."""
        torch = self.torch
        f64 = torch.float64
        scale = 1.0 / math.sqrt(r["head_dim"])
        sq, sk = r["seq"], r["seq_k"]
        names = ["o"] + (["dq", "dk", "dv"] if r["mode"] == "fwd_bwd" else [])
        accs = {n: ErrAcc() for n in names}
        nan_in = [n for n, t in zip(names, outs if isinstance(outs, tuple) else (outs,))
                  if not bool(torch.isfinite(t).all())]
        got = outs if isinstance(outs, tuple) else (outs,)
        # Heads per chunk: about 2^27 score elements (1 GiB in float64) per [S, S] temporary.
        hc = max(1, min(r["heads"], (1 << 27) // max(1, sq * sk)))
        with torch.no_grad():
            for b in range(r["batch"]):
                for h0 in range(0, r["heads"], hc):
                    sl = (b, slice(None), slice(h0, h0 + hc))
                    q = s[0].detach()[sl].transpose(0, 1).to(f64)   # [hc, Sq, D]
                    k = s[1].detach()[sl].transpose(0, 1).to(f64)
                    v = s[2].detach()[sl].transpose(0, 1).to(f64)
                    do = s[3][sl].transpose(0, 1).to(f64) if r["mode"] == "fwd_bwd" else None
                    ref = ref_attention(self.ops, q, k, v, do, r["causal"], scale, sq)
                    refs = [ref[0]] + (list(ref[2:]) if do is not None else [])
                    for name, g, rt in zip(names, got, refs):
                        accs[name].add(g.detach()[sl].transpose(0, 1).to(f64), rt, torch)
                    del ref, refs
        finish_check(row, accs, "full", row["precision"], nan_in)


# ---------------------------------------------------------------------------
# JAX
# ---------------------------------------------------------------------------

class JaxRunner:
    def __init__(self, args, o):
        # Without this JAX takes 75% of the GPU at start (the seed ran JAX this way too).
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax
        import jax.numpy as jnp
        import numpy as np
        self.jax, self.jnp, self.np = jax, jnp, np
        self.args, self.o = args, o
        if args.jax_precision == "highest":
            jax.config.update("jax_default_matmul_precision", "highest")
        self.dtypes = {"bfloat16": jnp.bfloat16, "float16": jnp.float16, "float32": jnp.float32}
        self.l2_bytes = (args.l2_mb or 60) * MIB
        self.ops = NumpyOps()

    def device_info(self):
        jax = self.jax
        dev = jax.devices()[0]
        import jaxlib
        return {"framework": "jax", "jax": jax.__version__, "jaxlib": getattr(jaxlib, "__version__", "?"),
                "backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()],
                "device_kind": dev.device_kind, "gpu": dev.device_kind,
                "python": platform.python_version()}

    def precision(self, dtype):
        if dtype != "float32":
            return "native"
        if self.args.jax_precision == "highest" or self.jax.default_backend() != "gpu":
            return "ieee"
        return "tf32"

    def make_fn(self, r):
        jax, jnp = self.jax, self.jnp
        impl = {"jax_xla": "xla", "jax_cudnn": "cudnn"}[r["impl"]]
        sq, sk = r["seq"], r["seq_k"]
        kw = {"implementation": impl}
        if r["causal"]:
            if sq == sk:
                kw["is_causal"] = True
            else:
                # Bottom-right alignment made explicit (is_causal's alignment for Sq != Sk is the
                # implementation's): query i sees key j iff j <= i + Sk - Sq.
                i = jnp.arange(sq)[:, None]
                j = jnp.arange(sk)[None, :]
                kw["mask"] = (j <= i + (sk - sq))[None, None]

        def attn(q, k, v):
            return jax.nn.dot_product_attention(q, k, v, **kw)

        if r["mode"] == "fwd":
            return attn

        def fwd_bwd(q, k, v, do):
            out, vjp = jax.vjp(attn, q, k, v)
            return (out,) + tuple(vjp(do))
        return fwd_bwd

    def make_set(self, r, key, dtype):
        jax = self.jax
        b, h, d = r["batch"], r["heads"], r["head_dim"]
        keys = jax.random.split(key, 4)
        shapes = [(b, r["seq"], h, d), (b, r["seq_k"], h, d), (b, r["seq_k"], h, d)]
        if r["mode"] == "fwd_bwd":
            shapes.append((b, r["seq"], h, d))
        arrays = [jax.random.normal(kk, shp, dtype=self.jnp.float32).astype(dtype) for kk, shp in zip(keys, shapes)]
        blind = self.blind_rows(r)
        if blind and r["mode"] == "fwd_bwd":
            # jax gives a query that sees no key mean(V), not 0 (see check()); a zero dO on those
            # rows makes the gradients independent of that choice.
            arrays[3] = arrays[3].at[:, :blind].set(0)
        return arrays

    @staticmethod
    def blind_rows(r):
        """Leading query rows that see no key (causal with Sq > Sk)."""
        return max(0, r["seq"] - r["seq_k"]) if r["causal"] else 0

    def run_row(self, r, row):
        jax, np = self.jax, self.np
        dtype = self.dtypes[r["dtype"]]
        row["precision"] = self.precision(r["dtype"])
        key = jax.random.PRNGKey(row_seed(self.args.seed, r) & 0x7FFFFFFF)
        key, sub = jax.random.split(key)
        sets = [self.make_set(r, sub, dtype)]
        jax.block_until_ready(sets[0])
        fn = self.make_fn(r)
        # compile_s: trace + compile + first call, as a user's first call pays.
        t0 = time.perf_counter()
        try:
            compiled = jax.jit(fn).lower(*sets[0]).compile()
            outs = compiled(*sets[0])
            jax.block_until_ready(outs)
        except Exception as e:  # cudnn rejects float32, some shapes: record, don't crash
            msg = first_line(e)
            row["error"] = ("unsupported: " + msg) if r["impl"] == "jax_cudnn" or "not supported" in msg.lower() \
                else msg
            return row
        row["compile_s"] = time.perf_counter() - t0
        try:
            ma = compiled.memory_analysis()
            if ma is not None:
                row["xla_temp_mb"] = ma.temp_size_in_bytes / MIB
                row["xla_arg_mb"] = ma.argument_size_in_bytes / MIB
                row["xla_out_mb"] = ma.output_size_in_bytes / MIB
                row["peak_mb"] = row["xla_temp_mb"] + row["xla_arg_mb"] + row["xla_out_mb"]
        except Exception:
            pass

        if not self.args.no_check:
            self.check(r, row, sets[0], outs if isinstance(outs, tuple) else (outs,))
        del outs

        in_bytes = sum(int(a.size) * a.dtype.itemsize for a in sets[0])
        # Outputs: o (fwd); o, dq, dk, dv (fwd_bwd: the same sizes as q, k, v, dout).
        out_bytes = in_bytes if r["mode"] == "fwd_bwd" else int(sets[0][0].size) * sets[0][0].dtype.itemsize
        set_bytes = in_bytes + out_bytes
        nsets = sets_for(set_bytes, self.l2_bytes, self.args)
        while len(sets) < nsets:
            key, sub = jax.random.split(key)
            sets.append(self.make_set(r, sub, dtype))
        jax.block_until_ready(sets)
        row["rotate_sets"] = nsets
        last = [None]

        def call(i):
            last[0] = compiled(*sets[i % nsets])

        def t_start():
            jax.block_until_ready(last[0])
            return time.perf_counter()

        def t_stop(t0):
            jax.block_until_ready(last[0])
            return (time.perf_counter() - t0) * 1e3
        inner, per_call = time_loop(call, t_start, t_stop, self.args, self.o)
        fill_timing(row, r, inner, per_call)
        row["timer"] = "host clock around block_until_ready"
        return row

    def check(self, r, row, s, outs):
        """numpy float64 reference: everything when small; else sampled query rows of
        the first and last batch (all heads) for O, and full gradients of two heads."""
        np = self.np
        f64 = np.float64
        host = [np.asarray(a.astype(self.jnp.float32)).astype(f64) for a in s]
        got = [np.asarray(a.astype(self.jnp.float32)).astype(f64) for a in outs]
        names = ["o"] + (["dq", "dk", "dv"] if r["mode"] == "fwd_bwd" else [])
        nan_in = [n for n, g in zip(names, got) if not np.isfinite(g).all()]
        accs = {n: ErrAcc() for n in names}
        scale = 1.0 / math.sqrt(r["head_dim"])
        sq = r["seq"]
        B, H = r["batch"], r["heads"]
        full = r["seq"] * r["seq_k"] <= self.args.ref_full_seq ** 2
        blind = self.blind_rows(r)
        head = lambda a, b, h: a[b, :, h, :]  # [S, D]
        if full:
            pairs, scope = [(b, h) for b in range(B) for h in range(H)], "full"
            for b, h in pairs:
                do = head(host[3], b, h) if r["mode"] == "fwd_bwd" else None
                ref = ref_attention(self.ops, head(host[0], b, h), head(host[1], b, h), head(host[2], b, h), do,
                                    r["causal"], scale, sq)
                refs = [ref[0]] + (list(ref[2:]) if do is not None else [])
                for name, g, rt in zip(names, got, refs):
                    if name == "o":
                        g, rt = head(g, b, h)[blind:], rt[blind:]
                    else:
                        g = head(g, b, h)
                    accs[name].add(g, rt, np)
        else:
            rows = sample_rows(sq, self.args.ref_rows, row_seed(self.args.seed, r))
            rows = rows[rows >= blind]
            batches = [0] if B == 1 else [0, B - 1]
            for b in batches:
                for h in range(H):
                    o_ref, _ = ref_attention(self.ops, head(host[0], b, h)[rows], head(host[1], b, h),
                                             head(host[2], b, h), None, r["causal"], scale, sq, rows=rows)
                    accs["o"].add(head(got[0], b, h)[rows], o_ref, np)
            scope = "o:rows%d_b%s" % (len(rows), ",".join(str(b) for b in batches))
            if r["mode"] == "fwd_bwd":
                pairs = sorted({(0, 0), (B - 1, H - 1)})
                for b, h in pairs:
                    ref = ref_attention(self.ops, head(host[0], b, h), head(host[1], b, h), head(host[2], b, h),
                                        head(host[3], b, h), r["causal"], scale, sq)
                    for name, g, rt in zip(names[1:], got[1:], ref[2:]):
                        accs[name].add(head(g, b, h), rt, np)
                scope += ";grads:heads" + ",".join("(%d,%d)" % p for p in pairs)
        if blind:
            scope += ";o_rows_without_keys_excluded"
            row["note"] = ("jax outputs mean(V) for the %d query rows that see no key (flashjit and torch: 0); "
                           "they are left out of err_o, and dO is zero on them" % blind)
        finish_check(row, accs, scope, row["precision"], nan_in)


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------

def write_json(path, doc):
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, allow_nan=False, default=str)
        f.write("\n")
    os.replace(tmp, path)


def sanitize(x):
    """NaN/inf -> None so the file is strict JSON (as flashjit-bench writes it)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: sanitize(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [sanitize(v) for v in x]
    return x


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) and v is not None else "-"


def print_table(rows):
    print("%-16s %-8s %3s %6s %6s %3s %-7s %9s %8s %9s %9s %9s %-5s" % (
        "impl", "dtype", "d", "seq", "seq_k", "c", "mode", "median_ms", "TFLOP/s", "graph_ms", "rel_err",
        "compile_s", "check"))
    short = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}
    for r in rows:
        head = "%-16s %-8s %3d %6d %6d %3d %-7s " % (r["impl"], short.get(r["dtype"], r["dtype"]), r["head_dim"],
                                                    r["seq"], r.get("seq_k", r["seq"]), int(r["causal"]), r["mode"])
        if "error" in r:
            print(head + "ERROR " + r["error"][:100])
            continue
        rel = r.get("rel_err", "-")
        rel = "NaN" if rel is None else fmt(rel, ".2e")
        print(head + "%9s %8s %9s %9s %9s %-5s" % (fmt(r.get("median_ms"), ".4f"), fmt(r.get("tflops"), ".1f"),
                                                 fmt(r.get("graph_ms"), ".4f"), rel, fmt(r.get("compile_s"), ".3f"),
                                                 r.get("check", "-")))


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def config_json(args, o, impls, n_rows):
    c = {"output": args.out, "batch": o["batch"], "heads": o["heads"], "head_dims": o["head_dims"],
         "seq_lens": [s for s in o["seqs"] if s % 128 == 0],
         "ragged_seq_lens": [s for s in o["seqs"] if s % 128 != 0], "seq_k": o["seq_k"],
         "dtypes": o["dtypes"], "modes": o["modes"], "causal": o["causal"], "impls": impls, "tag": o["tag"],
         "framework": args.framework, "rows_planned": n_rows, "command": " ".join(sys.argv),
         "started": now_iso(), "target_ms": o["target_ms"], "reps": o["reps"], "warmup": args.warmup, "sustain_ms": args.sustain_ms,
         "seed": args.seed, "rotate_l2_factor": args.rotate_l2_factor}
    if args.framework == "torch":
        c["notes"] = {
            "timing": "CUDA events around `inner` back-to-back calls (~target_ms), `reps` repetitions, median "
                      "and quartiles per call, dispatch included; inputs rotate among rotate_sets sets. fwd_bwd "
                      "= forward + torch.autograd.grad(out, (q, k, v), dout) (out.backward(dout) without "
                      "accumulating into .grad).",
            "graph_ms": "the same calls (at most graph_max_calls) captured with torch.cuda.CUDAGraph, replayed "
                        "graph_reps times, median per call",
            "layout": "q, k, v stored [B, S, H, D]; SDPA gets [B, H, S, D] transposed views",
            "causal": "is_causal=True when Sq == Sk; torch.nn.attention.bias.causal_lower_right otherwise "
                      "(bottom-right, as flashjit)",
            "compile_s": "wall time of the first call (backend setup, lazy init, cuDNN plan build)",
            "peak_mb": "torch.cuda.max_memory_allocated during one call minus what was allocated before it, "
                       "plus the call's inputs: inputs + outputs + temporaries",
            "errors": "float64 reference on the GPU over every element (chunked over heads)",
            "unsupported": "combinations a backend rejects are rows with error 'unsupported: <reason>' "
                           "(not skipped)",
            "precision": "float32: torch_math uses exact fp32 matmuls unless --torch-tf32 (then impl "
                         "*_tf32); torch_efficient's fp32 kernel is exact fp32; flash/cudnn have no fp32",
        }
    else:
        c["notes"] = {
            "timing": "host clock (perf_counter) around `inner` back-to-back calls of the AOT-compiled function "
                      "after block_until_ready, ending with block_until_ready; `reps` repetitions, median and "
                      "quartiles per call; inputs rotate among rotate_sets sets. fwd_bwd = jax.vjp forward + "
                      "the vjp applied to dout, in one jitted function returning (out, dq, dk, dv).",
            "compile_s": "jit lower + compile + first call",
            "peak_mb": "XLA memory_analysis: argument + output + temp bytes (xla_*_mb)",
            "errors": "numpy float64 reference: every element when Sq*Sk <= ref_full_seq^2; else O on "
                      "ref_rows sampled query rows of all heads of the first and last batch, and full "
                      "gradients of heads (0,0) and (B-1,H-1)",
            "precision": "float32 matmuls run at JAX's default precision on GPU (TF32) unless "
                         "--jax-precision highest (impl *_ieee); cudnn has no fp32",
            "unsupported": "combinations an implementation rejects are rows with error 'unsupported: "
                           "<reason>' (not skipped)",
            "env": "XLA_PYTHON_CLIENT_PREALLOCATE=%s" % os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"),
        }
    c["notes"]["tflops"] = "fwd 4*B*H*Sq*Sk*D FLOPs, halved when causal; fwd_bwd 3.5x (the seed's convention)"
    return c


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not args.sustain_ms >= 0:
        raise SystemExit("peers.py: --sustain-ms must be >= 0; got %s" % args.sustain_ms)
    o = resolve_options(args)
    frameworks = [args.framework] if args.framework else (["torch", "jax"] if args.list else None)
    if frameworks is None:
        raise SystemExit("peers.py: --framework torch|jax is required (one framework per process)")
    if args.list:
        total = 0
        for fw in frameworks:
            impls = framework_impls(fw, o["impls"], args)
            rows = build_grid(o, impls)
            total += len(rows)
            for r in rows:
                print("%-18s %-8s d%-3d seq %5d seq_k %5d causal %d %s" % (
                    impl_label(r["impl"], r["dtype"], args), r["dtype"], r["head_dim"], r["seq"], r["seq_k"],
                    int(r["causal"]), r["mode"]))
        print("# %d rows" % total)
        return 0

    impls = framework_impls(args.framework, o["impls"], args)
    rows = build_grid(o, impls)
    try:
        runner = TorchRunner(args, o) if args.framework == "torch" else JaxRunner(args, o)
    except ImportError as e:
        log("peers.py: cannot import %s: %s" % (args.framework, e))
        return 2
    info = runner.device_info()
    if o["tag"] is None:
        o["tag"] = "".join(ch.lower() if ch.isalnum() else "_" for ch in info.get("gpu", "unknown"))
    info["host"] = socket.gethostname()
    doc = {"device": info, "config": config_json(args, o, impls, len(rows)), "results": []}
    tty = sys.stderr.isatty()
    t_begin = time.perf_counter()
    skipped = 0
    for n, r in enumerate(rows):
        if args.max_seconds and time.perf_counter() - t_begin > args.max_seconds:
            skipped = len(rows) - n
            break
        r["impl_label"] = impl_label(r["impl"], r["dtype"], args)
        label = row_label(dict(r, impl=r["impl_label"]))
        log("%s[%d/%d] %-55s" % ("\r" if tty else "", n + 1, len(rows), label), end="" if tty else "\n")
        row = base_row(r, o["tag"])
        try:
            runner.run_row(r, row)
        except Exception as e:
            row["error"] = first_line(e)
            row["traceback"] = traceback.format_exc().strip().splitlines()[-3:]
            if args.framework == "torch":
                try:
                    runner.torch.cuda.empty_cache()
                except Exception:
                    pass
        row = sanitize(row)
        if "error" in row:
            status = "ERROR " + row["error"][:120]
        else:
            status = "%.1f TFLOP/s (%.4f ms)%s" % (row["tflops"], row["median_ms"],
                                                  "" if row.get("check", "ok") == "ok" else " CHECK " + row["check"])
        log("%s[%d/%d] %-55s %s%s" % ("\r" if tty else "", n + 1, len(rows), label, status,
                                      "\x1b[K" if tty else ""), end="" if tty else "\n")
        doc["results"].append(row)
        doc["config"]["finished"] = now_iso()
        doc["config"]["rows_done"] = len(doc["results"])
        write_json(args.out, doc)
    if tty:
        log("")
    doc["config"]["rows_skipped_max_seconds"] = skipped
    write_json(args.out, doc)
    print_table(doc["results"])
    if skipped:
        print("%d rows not started (--max-seconds %g)" % (skipped, args.max_seconds))
    if args.out:
        print("wrote " + args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
