#!/usr/bin/env python3
"""The Hopper forward's main loop as ptxas compiled it, read on a machine without a GPU.

For each spec: flashjit writes the source, nvcc -cubin compiles it (-Xptxas -v), nvdisasm
reads the SASS. Printed per spec: registers and spills, ptxas' wgmma notes (serialised,
injected waits), HGMMA and 'gsb0' waits in the kernel (a wait after every HGMMA is a
serialised kernel), BSSY divergence regions, and the innermost loop that issues both
products (S and P V: 16 HGMMA at d128): its instruction count, how much of it runs on the
uniform datapath (U* instructions), how many a step executes without the boundary mask and
O's rescale, and how many of its exponentials run before the wait for P V. A change to the
consumer once kept every HGMMA pipelined and still slowed the kernel 4-8% because ptxas moved
the loop's ring-slot arithmetic from uniform to vector registers
(bench/results/2026-12-04-h200-run29); compare before and after a change, e.g. with
--templates pointing at a copy of the old templates.

Needs nvcc (/usr/local/cuda/bin) and nvdisasm: pip install nvidia-cuda-nvdisasm, or --nvdisasm.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(\S.*?)\s*;")
LABEL = re.compile(r"^\s*(\.L_x_\d+):")
BRANCH = re.compile(r"BRA\s+`\((\.L_x_\d+)\)")
S_PRODUCT = re.compile(r"HGMMA\.\S+ R\d+, gdesc")
PV_PRODUCT = re.compile(r"HGMMA\.\S+ R\d+, R\d+, gdesc")


def find_nvdisasm(given):
    if given:
        return given
    found = shutil.which("nvdisasm")
    if found:
        return found
    for site in sys.path:
        for path in glob.glob(os.path.join(site, "nvidia", "cu*", "bin", "nvdisasm")):
            return path
    sys.exit("nvdisasm not found: pip install nvidia-cuda-nvdisasm, or pass --nvdisasm")


def parse(sass):
    """Instructions as (address, text) and labels as name -> address of the next instruction."""
    instrs, labels, pending = [], {}, []
    for line in sass.splitlines():
        m = LABEL.match(line)
        if m:
            pending.append(m.group(1))
            continue
        m = INSTR.search(line)
        if m:
            addr = int(m.group(1), 16)
            for name in pending:
                labels[name] = addr
            pending = []
            instrs.append((addr, m.group(2)))
    return instrs, labels


def product_loop(instrs, labels):
    """The smallest backward-branch loop that issues both products: S = Q K^T (both operands
    from shared memory descriptors) and P V (A from registers), as (address, text) pairs."""
    best = []
    for addr, text in instrs:
        m = BRANCH.search(text)
        if not m or labels.get(m.group(1), addr + 1) >= addr:
            continue
        body = [(a, t) for a, t in instrs if labels[m.group(1)] <= a <= addr]
        has_s = any(S_PRODUCT.search(t) for _, t in body)
        has_pv = any(PV_PRODUCT.search(t) for _, t in body)
        if has_s and has_pv and (not best or len(body) < len(best)):
            best = body
    return best


def common_path(labels, seg):
    """Instructions one K/V step of the loop `seg` executes when it needs neither the boundary
    mask nor O's rescale: forward branches over a block that sets -inf (the mask) or holds 32
    or more FMULs (the rescale) are taken, other conditional branches (mbarrier retries) are not."""
    index = {a: k for k, (a, _) in enumerate(seg)}
    k = count = 0
    while k < len(seg):
        addr, text = seg[k]
        count += 1
        m = BRANCH.search(text)
        target = labels.get(m.group(1)) if m else None
        if target is not None and target < addr:
            if k == len(seg) - 1:
                break  # the loop's back edge: one step done
            k += 1  # an inner retry loop: not taken
            continue
        if target is not None and target in index:
            skipped = [t for _, t in seg[k + 1:index[target]]]
            rare = (any("-0x800000" in t or "0xff800000" in t for t in skipped)
                    or sum(t.startswith("FMUL") for t in skipped) >= 32)
            if not text.startswith("@") or rare:
                k = index[target]
                continue
        k += 1
    return count


def under_pv(loop):
    """How many of the loop's exponentials (MUFU.EX2) ptxas placed before the first wait for
    every product (DEPBAR.LE gsb0, 0x0, the P V wait): only those run while this warpgroup's
    P V does. At 6ae3d42..bbfbea0 ptxas hoisted that wait above the whole softmax of every
    Hopper kernel (0 of N)."""
    waits = [i for i, t in enumerate(loop) if "DEPBAR.LE gsb0, 0x0" in t]
    exps = [i for i, t in enumerate(loop) if "MUFU.EX2" in t]
    if not waits:
        return f"no wait for every product in the loop, {len(exps)} MUFU.EX2"
    return f"{sum(i < waits[0] for i in exps)} of {len(exps)} MUFU.EX2 before the first P V wait"


def report(spec, args, work):
    src = os.path.join(work, spec + ".cu")
    cubin = os.path.join(work, spec + ".cubin")
    with open(src, "w") as f:
        subprocess.run([args.flashjit, "source", spec], stdout=f, check=True)
    inc = os.path.join(work, "inc")
    os.makedirs(inc, exist_ok=True)
    link = os.path.join(inc, "flashjit")
    if not os.path.lexists(link):
        os.symlink(os.path.abspath(args.templates), link)
    if args.nvrtc:
        # The PTX the library's NVRTC writes (templates embedded in the CLI at its build), then ptxas.
        ptx = os.path.join(work, spec + ".ptx")
        with open(ptx, "w") as f:
            subprocess.run([args.flashjit, "ptx", spec], stdout=f, stderr=subprocess.DEVNULL, check=True)
        ptxas = subprocess.run([os.path.join(os.path.dirname(args.nvcc), "ptxas"), "-arch=sm_90a", "-v", ptx,
                                "-o", cubin], capture_output=True, text=True)
    else:
        ptxas = subprocess.run([args.nvcc, "-std=c++17", "-cubin", "-arch=sm_90a", "-I" + inc, "-Xptxas", "-v",
                                "-diag-suppress", "177", src, "-o", cubin], capture_output=True, text=True)
    if ptxas.returncode != 0:
        return f"{spec}: compile failed\n{ptxas.stderr}"
    log = ptxas.stderr
    # The forward kernel's own section (f32 specs also hold the V^T kernel).
    section = log.split("Compiling entry function 'flashjit_fwd'", 1)[-1].split("Compiling entry function", 1)[0]
    regs = re.search(r"Used (\d+) registers", section)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", section)
    notes = [line.split("ptxas info    : ", 1)[-1] for line in log.splitlines()
             if "wgmma" in line.lower() and ("serialized" in line or "injected" in line)]
    sass = subprocess.run([find_nvdisasm(args.nvdisasm), "-c", cubin], capture_output=True, text=True,
                          check=True).stdout
    instrs, labels = parse(sass)
    texts = [t for _, t in instrs]
    seg = product_loop(instrs, labels)
    loop = [t for _, t in seg]
    opcodes = [next(w for w in t.split() if not w.startswith("@")) for t in loop]
    uniform = sum(op.startswith("U") for op in opcodes)
    lines = [f"{spec}: {regs.group(1) if regs else '?'} registers, spills {spills.groups() if spills else '?'}",
             f"  HGMMA {sum('HGMMA' in t for t in texts)}, gsb0 waits "
             f"{sum('DEPBAR.LE gsb0, 0x0' in t for t in texts)}, BSSY {sum(t.startswith('BSSY') for t in texts)}, "
             f"instructions {len(texts)}",
             f"  main loop: {len(loop)} instructions, {sum('HGMMA' in t for t in loop)} HGMMA, "
             f"{uniform} uniform-datapath, {sum('R2UR' in t for t in loop)} R2UR",
             f"  one step without mask or rescale: {common_path(labels, seg)} instructions",
             f"  softmax under P V: {under_pv(loop)}"]
    lines += [f"  ptxas: {n}" for n in notes]
    if args.dump:
        os.makedirs(args.dump, exist_ok=True)
        with open(os.path.join(args.dump, spec + ".loop.sass"), "w") as f:
            f.writelines(f"{a:06x}  {t}\n" for a, t in seg)
    return "\n".join(lines)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("specs", nargs="*", default=["fwd_bf16_d128_noncausal_padded_sm90a",
                                                 "fwd_bf16_d64_noncausal_padded_sm90a",
                                                 "fwd_bf16_d128_causal_padded_sm90a"])
    p.add_argument("--flashjit", default=os.path.join(here, "..", "build", "flashjit"),
                   help="the flashjit CLI (writes the generated source)")
    p.add_argument("--templates", default=os.path.join(here, "..", "templates"),
                   help="the kernel templates to compile against")
    p.add_argument("--nvcc", default="/usr/local/cuda/bin/nvcc")
    p.add_argument("--nvrtc", action="store_true",
                   help="compile the PTX of the CLI's NVRTC (its embedded templates; --templates unused) "
                        "instead of nvcc on the generated source")
    p.add_argument("--nvdisasm")
    p.add_argument("--dump", metavar="DIR", help="also write each spec's main loop (SASS) to DIR/<spec>.loop.sass")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as work:
        for spec in args.specs:
            print(report(spec, args, work))


if __name__ == "__main__":
    main()
