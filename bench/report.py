#!/usr/bin/env python3
"""Merges flashjit-bench and peers.py result files into a markdown report and plots.

    python3 bench/report.py results/*.json --seed ../shared/seed/attention_h100.json \\
        --out-dir results/2026-12-02-h200

One TFLOP/s table per (dtype, mode, head_dim, causal) with a row per sequence
length and a column per impl, flashjit's ratio to the best peer of the same
precision measured in the same run, the seed's H100 numbers beside them (marked
as another GPU), then compile times and CUDA-graph replay times where both
sides have them. Plots (matplotlib, optional): TFLOP/s vs seq, one panel per
configuration, one line per impl. Needs only the standard library (and
matplotlib for the plots).
"""

import argparse
import json
import math
import os
import sys
from collections import OrderedDict, defaultdict

DTYPE_ORDER = {"bfloat16": 0, "float16": 1, "float32": 2}
MODE_ORDER = {"fwd": 0, "fwd_bwd": 1}
SEED_LABEL = "H100 (seed, other GPU)"
SHORT_DTYPE = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}


def is_ours(impl):
    return impl.startswith("flashjit")


def impl_order(impl):
    """flashjit first, then torch, then jax, then anything else; stable by name."""
    for rank, prefix in enumerate(("flashjit", "torch_", "jax_")):
        if impl.startswith(prefix):
            return (rank, impl)
    return (9, impl)


def load(paths):
    """Rows and per-file device/config headers. Later files win on duplicate rows."""
    rows, files = OrderedDict(), []
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        files.append({"path": path, "device": doc.get("device", {}), "config": doc.get("config", {}),
                      "n": len(doc.get("results", []))})
        for r in doc.get("results", []):
            r = dict(r)
            r.setdefault("seq_k", r["seq"])
            r["_file"] = os.path.basename(path)
            key = (r["impl"], r["dtype"], r["mode"], r["head_dim"], bool(r["causal"]), r["seq"], r["seq_k"])
            old = rows.get(key)
            # A later error never hides an earlier measurement of the same row.
            if old is None or "error" not in r or "error" in old:
                rows[key] = r
    return list(rows.values()), files


def precision_of(r):
    if "precision" in r:
        return r["precision"]
    return "native" if r["dtype"] != "float32" else "?"


def usable(r):
    return "error" not in r and isinstance(r.get("tflops"), (int, float)) and r.get("check") != "nan"


def config_key(r):
    return (r["dtype"], r["mode"], r["head_dim"], bool(r["causal"]))


def config_sort(k):
    return (DTYPE_ORDER.get(k[0], 9), MODE_ORDER.get(k[1], 9), k[2], k[3])


def config_title(k):
    return "%s %s, head_dim %d, %s" % (k[0], k[1], k[2], "causal" if k[3] else "non-causal")


def seq_label(seq, seq_k):
    return str(seq) if seq == seq_k else "%dx%d" % (seq, seq_k)


def fnum(v, spec=".1f"):
    return format(v, spec) if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)) else "-"


def cell(r, field="tflops", spec=".1f"):
    """A table cell: the value, '!' when the row's check failed, or why it is missing."""
    if r is None:
        return ""
    if "error" in r:
        return "unsup." if str(r["error"]).startswith("unsupported") else "error"
    v = r.get(field)
    if not isinstance(v, (int, float)):
        return "-"
    flag = "" if r.get("check", "ok") == "ok" else " !" + str(r.get("check"))
    return fnum(v, spec) + flag


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return out


class Report:
    def __init__(self, rows, files, seed_rows, seed_device):
        self.rows, self.files = rows, files
        self.seed_rows, self.seed_device = seed_rows, seed_device
        self.by_config = defaultdict(lambda: defaultdict(dict))  # config -> (seq, seq_k) -> impl -> row
        for r in rows:
            self.by_config[config_key(r)][(r["seq"], r["seq_k"])][r["impl"]] = r
        self.seed_by_config = defaultdict(lambda: defaultdict(dict))
        for r in seed_rows:
            self.seed_by_config[config_key(r)][(r["seq"], r.get("seq_k", r["seq"]))][r["impl"]] = r
        self.ratios = defaultdict(list)  # (dtype, mode, impl) -> ratios vs best peer
        self.graph_ratios = defaultdict(list)  # the same from CUDA-graph replay times

    def impls_in(self, cfg):
        names = {i for cells in self.by_config[cfg].values() for i in cells}
        return sorted(names, key=impl_order)

    def best_peer(self, cells, precision):
        best = None
        for impl, r in cells.items():
            if is_ours(impl) or not usable(r) or precision_of(r) != precision:
                continue
            if best is None or r["tflops"] > best["tflops"]:
                best = r
        return best

    def tflops_table(self, cfg):
        impls = self.impls_in(cfg)
        ours = [i for i in impls if is_ours(i)]
        seed = self.seed_by_config.get(cfg, {})
        header = ["seq"] + impls
        for o in ours:
            header.append("%s / best peer" % o)
        if self.seed_rows:
            header.append("best of %s" % SEED_LABEL)
        lines = []
        for (seq, seq_k) in sorted(self.by_config[cfg]):
            cells = self.by_config[cfg][(seq, seq_k)]
            line = [seq_label(seq, seq_k)] + [cell(cells.get(i)) for i in impls]
            for o in ours:
                r = cells.get(o)
                peer = self.best_peer(cells, precision_of(r)) if r is not None and usable(r) else None
                if peer is None:
                    line.append("-")
                    continue
                if r.get("check", "ok") != "ok":
                    # A wrong answer's speed is not a result: shown, not counted in the summary.
                    line.append("(%.2fx, check %s)" % (r["tflops"] / peer["tflops"], r.get("check")))
                    continue
                ratio = r["tflops"] / peer["tflops"]
                self.ratios[(cfg[0], cfg[1], o)].append(ratio)
                line.append("%.2fx (%s)" % (ratio, peer["impl"]))
            if self.seed_rows:
                srow = [r for r in seed.get((seq, seq_k), {}).values() if usable(r)]
                if srow:
                    b = max(srow, key=lambda r: r["tflops"])
                    line.append("%.1f (%s)" % (b["tflops"], b["impl"]))
                else:
                    line.append("-")
            lines.append(line)
        return md_table(header, lines)

    def compile_table(self, cfg):
        impls = [i for i in self.impls_in(cfg)
                 if any("compile_s" in c.get(i, {}) for c in self.by_config[cfg].values())]
        if not impls:
            return []
        ours = [i for i in impls if is_ours(i)]
        header = ["seq"] + ["%s compile_s" % i for i in impls] + ["%s warm_s" % o for o in ours]
        lines = []
        for (seq, seq_k) in sorted(self.by_config[cfg]):
            cells = self.by_config[cfg][(seq, seq_k)]
            line = [seq_label(seq, seq_k)]
            for i in impls:
                r = cells.get(i)
                if r is None or "compile_s" not in r:
                    line.append("")
                    continue
                # '*': the spec was compiled for an earlier row; the number is that first (cold) cost.
                line.append(fnum(r["compile_s"], ".3f") + ("*" if r.get("compile_reused") else ""))
            for o in ours:
                r = cells.get(o)
                line.append(fnum(r.get("warm_compile_s"), ".4f") if r else "")
            lines.append(line)
        return md_table(header, lines)

    def graph_table(self, cfg):
        """graph_ms where flashjit and a peer both have it: CUDA-graph replay on both sides."""
        impls = self.impls_in(cfg)
        with_graph = [i for i in impls
                      if any(isinstance(c.get(i, {}).get("graph_ms"), (int, float)) for c in self.by_config[cfg].values())]
        ours = [i for i in with_graph if is_ours(i)]
        peers = [i for i in with_graph if not is_ours(i)]
        if not ours or not peers:
            return []
        header = ["seq"] + ["%s graph_ms" % i for i in with_graph]
        for o in ours:
            header.append("%s vs best peer (graph)" % o)
        lines = []
        for (seq, seq_k) in sorted(self.by_config[cfg]):
            cells = self.by_config[cfg][(seq, seq_k)]
            line = [seq_label(seq, seq_k)] + [cell(cells.get(i), "graph_ms", ".4f") for i in with_graph]
            for o in ours:
                r = cells.get(o)
                best = None
                for p in peers:
                    pr = cells.get(p)
                    if (pr is not None and usable(pr) and isinstance(pr.get("graph_ms"), (int, float))
                            and r is not None and precision_of(pr) == precision_of(r)):
                        if best is None or pr["graph_ms"] < best["graph_ms"]:
                            best = pr
                if r is None or best is None or not isinstance(r.get("graph_ms"), (int, float)):
                    line.append("-")
                elif r.get("check", "ok") != "ok":
                    line.append("(check %s)" % r.get("check"))
                else:
                    # A speedup: peer time over ours (> 1 means flashjit is faster).
                    speedup = best["graph_ms"] / r["graph_ms"]
                    self.graph_ratios[(cfg[0], cfg[1], o)].append(speedup)
                    line.append("%.2fx (%s)" % (speedup, best["impl"]))
            lines.append(line)
        return md_table(header, lines)

    def unsteady(self, spread=1.05):
        """Rows whose repetitions differ by more than `spread` (slowest / fastest): a clock change while
        they were timed (bench/results/2026-12-04-h200-run21), or noise."""
        out = []
        for r in self.rows:
            reps = [x for x in r.get("rep_ms") or [] if x]
            if len(reps) >= 2 and max(reps) / min(reps) > spread:
                out.append("%s %s %s d%d %s seq %s: reps %.4g-%.4g ms (x%.2f)" % (
                    r["impl"], SHORT_DTYPE.get(r["dtype"], r["dtype"]), r["mode"], r["head_dim"],
                    "causal" if r["causal"] else "noncausal", seq_label(r["seq"], r["seq_k"]),
                    min(reps), max(reps), max(reps) / min(reps)))
        return out

    def problems(self):
        bad, unsupported = [], defaultdict(list)
        for r in self.rows:
            label = "%s %s %s d%d %s seq %s" % (r["impl"], SHORT_DTYPE.get(r["dtype"], r["dtype"]), r["mode"],
                                                 r["head_dim"], "causal" if r["causal"] else "noncausal",
                                                 seq_label(r["seq"], r["seq_k"]))
            if "error" in r:
                err = str(r["error"])
                if err.startswith("unsupported"):
                    unsupported[(r["impl"], err[:160])].append(label)
                else:
                    bad.append("%s: error: %s" % (label, err[:300]))
            elif r.get("check", "ok") != "ok":
                bad.append("%s: check=%s rel_err=%s (tol %s, scope %s)" % (
                    label, r.get("check"), r.get("rel_err"), r.get("err_tol"), r.get("err_scope")))
        return bad, unsupported

    def markdown(self, title, plots):
        out = ["# " + title, ""]
        out.append("## Runs")
        out.append("")
        for f in self.files:
            d, c = f["device"], f["config"]
            gpu = d.get("gpu") or d.get("device_kind") or "?"
            extra = ", ".join("%s %s" % (k, d[k]) for k in ("flashjit", "arch", "torch", "cuda", "jax", "driver_version",
                                                            "nvrtc", "cudnn") if k in d)
            sustain = c.get("sustain_ms")
            out.append("- `%s`: %d rows on %s (%s); started %s, tag %s; %s" % (
                os.path.basename(f["path"]), f["n"], gpu, extra, c.get("started", "?"), c.get("tag", "?"),
                "%g ms of sustained load before each cell's timing" % sustain if sustain else
                "**no sustained load before timing**: medians may mix the boost and power-capped clocks"))
        if self.seed_rows:
            out.append("- seed: %d rows on %s: the columns and plot lines marked \"%s\" come from a different "
                       "GPU (and software) and are context, not a same-machine comparison." % (
                           len(self.seed_rows), self.seed_device.get("device_kind", "?"), SEED_LABEL))
        out.append("")
        out.append("TFLOP/s: fwd 4*B*H*Sq*Sk*D FLOPs, halved when causal; fwd_bwd 3.5x fwd (the seed's "
                   "formula), over the median per-call time (CUDA events around back-to-back calls for flashjit "
                   "and torch, host clock around block_until_ready for JAX; dispatch included). `a / best peer` "
                   "compares an impl with the fastest peer *of the same precision measured in these files* "
                   "(bf16: all; float32: flashjit=tf32 vs TF32 peers such as jax_xla at its default precision, "
                   "flashjit_ieee vs exact-fp32 peers such as torch_math/torch_efficient). `!fail`/`!nan`: the "
                   "row's correctness check failed (see Problems). `unsup.`: the backend rejects the combination.")
        out.append("")
        tables = []
        for cfg in sorted(self.by_config, key=config_sort):
            tables.append("## " + config_title(cfg))
            tables.append("")
            tables += self.tflops_table(cfg)
            tables.append("")
            ct = self.compile_table(cfg)
            if ct:
                tables.append("Compile: seconds until the first call can run (flashjit: codegen + NVRTC + load "
                              "with an empty cache, `*` = spec compiled for an earlier row, that first cost shown; "
                              "warm_s = a fresh Context loading it from the disk cache; torch: first call; JAX: "
                              "lower + compile + first call).")
                tables.append("")
                tables += ct
                tables.append("")
            gt = self.graph_table(cfg)
            if gt:
                tables.append("CUDA-graph replay, ms per call (like with like: both sides replay `inner` captured "
                              "calls, so host dispatch is excluded on both; speedup = peer / flashjit).")
                tables.append("")
                tables += gt
                tables.append("")
            if plots.get(cfg):
                tables.append("![%s](%s)" % (config_title(cfg), plots[cfg]))
                tables.append("")
        # Ratios are filled while the tables are built: summary goes first but is computed last.
        summary = self.summary_lines()
        out += summary + tables
        bad, unsupported = self.problems()
        out.append("## Problems")
        out.append("")
        if not bad:
            out.append("No failed checks or errors.")
        for b in bad:
            out.append("- " + b)
        out.append("")
        unsteady = self.unsteady()
        if unsteady:
            out.append("## Unsteady timings (slowest rep more than 5% above the fastest)")
            out.append("")
            for u in unsteady[:40]:
                out.append("- " + u)
            if len(unsteady) > 40:
                out.append("- ... and %d more rows" % (len(unsteady) - 40))
            out.append("")
        if unsupported:
            out.append("## Unsupported combinations (recorded as error rows, not measured)")
            out.append("")
            for (impl, err), labels in sorted(unsupported.items()):
                out.append("- %s (%d rows): %s" % (impl, len(labels), err))
            out.append("")
        return "\n".join(out) + "\n"

    def summary_lines(self):
        if not self.ratios:
            return []
        lines = ["## Summary: flashjit vs the best peer of the same precision (geometric mean over seq, "
                 "head_dim, causal)", ""]
        body = []
        for (dtype, mode, impl), rs in sorted(self.ratios.items(),
                                              key=lambda kv: (DTYPE_ORDER.get(kv[0][0], 9), kv[0][1], kv[0][2])):
            body.append([dtype, mode, impl, "%.2fx" % geomean(rs), "%.2fx" % min(rs), "%.2fx" % max(rs), len(rs)])
        lines += md_table(["dtype", "mode", "impl", "geomean", "min", "max", "cells"], body)
        lines.append("")
        lines.append("These are event-timed calls, each framework's host dispatch included (C++ for flashjit, "
                     "Python for torch and JAX): at small sizes that dispatch is most of the time. GPU time "
                     "alone, from CUDA-graph replay where a peer has it too (torch):")
        lines.append("")
        body = []
        for (dtype, mode, impl), rs in sorted(self.graph_ratios.items(),
                                              key=lambda kv: (DTYPE_ORDER.get(kv[0][0], 9), kv[0][1], kv[0][2])):
            body.append([dtype, mode, impl, "%.2fx" % geomean(rs), "%.2fx" % min(rs), "%.2fx" % max(rs), len(rs)])
        lines += md_table(["dtype", "mode", "impl", "geomean", "min", "max", "cells"], body) if body else ["(none)"]
        lines.append("")
        return lines

    def plots(self, out_dir):
        """One PNG per configuration group (dtype, mode): a panel per (head_dim, causal)."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("report.py: matplotlib not found; no plots", file=sys.stderr)
            return {}
        groups = defaultdict(list)
        for cfg in self.by_config:
            groups[(cfg[0], cfg[1])].append(cfg)
        made = {}
        for (dtype, mode), cfgs in sorted(groups.items(), key=lambda kv: config_sort(kv[0] + (0, False))):
            cfgs = sorted(cfgs, key=config_sort)
            n = len(cfgs)
            cols = 2 if n > 1 else 1
            rows_n = (n + cols - 1) // cols
            fig, axes = plt.subplots(rows_n, cols, figsize=(6.5 * cols, 4.2 * rows_n), squeeze=False)
            for ax, cfg in zip(axes.flat, cfgs):
                for impl in self.impls_in(cfg):
                    pts = sorted((s, c[impl]["tflops"]) for (s, sk), c in self.by_config[cfg].items()
                                 if impl in c and usable(c[impl]) and s == sk)
                    if pts:
                        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3,
                                lw=2.2 if is_ours(impl) else 1.2, label=impl)
                seed = self.seed_by_config.get(cfg, {})
                pts = sorted((s, max(r["tflops"] for r in c.values() if usable(r)))
                             for (s, sk), c in seed.items() if s == sk and any(usable(r) for r in c.values()))
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], ls="--", color="grey", lw=1,
                            label="best of " + SEED_LABEL)
                ax.set_xscale("log", base=2)
                ticks = sorted({s for (s, sk) in self.by_config[cfg] if s == sk})
                ax.set_xticks(ticks)
                ax.set_xticklabels([str(t) for t in ticks], fontsize=7, rotation=45)
                ax.minorticks_off()
                ax.set_xlabel("seq")
                ax.set_ylabel("TFLOP/s")
                ax.set_title(config_title(cfg), fontsize=10)
                ax.grid(True, alpha=0.3)
                ax.legend(fontsize=7)
            for ax in list(axes.flat)[n:]:
                ax.axis("off")
            fig.tight_layout()
            name = "tflops_%s_%s.png" % (SHORT_DTYPE.get(dtype, dtype), mode)
            fig.savefig(os.path.join(out_dir, name), dpi=110)
            plt.close(fig)
            for cfg in cfgs:
                made[cfg] = name
        return made


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("inputs", nargs="+", help="result JSON files (flashjit-bench and peers.py)")
    p.add_argument("--seed", help="the seed's result file: shown beside ours, marked as another GPU")
    p.add_argument("--out-dir", help="where report.md and the PNGs go (default: the first input's directory)")
    p.add_argument("--md", default="report.md", help="markdown file name (default report.md)")
    p.add_argument("--title", default="flashjit attention benchmark")
    p.add_argument("--no-plots", action="store_true")
    args = p.parse_args(argv)

    rows, files = load(args.inputs)
    seed_rows, seed_device = [], {}
    if args.seed:
        with open(args.seed) as f:
            doc = json.load(f)
        seed_rows, seed_device = doc.get("results", []), doc.get("device", {})
    out_dir = args.out_dir or os.path.dirname(os.path.abspath(args.inputs[0]))
    os.makedirs(out_dir, exist_ok=True)
    rep = Report(rows, files, seed_rows, seed_device)
    plots = {} if args.no_plots else rep.plots(out_dir)
    md = rep.markdown(args.title, plots)
    path = os.path.join(out_dir, args.md)
    with open(path, "w") as f:
        f.write(md)
    print("wrote %s (%d rows from %d files%s, %d plots)" % (
        path, len(rows), len(files), ", seed %d rows" % len(seed_rows) if seed_rows else "", len(set(plots.values()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
