#!/usr/bin/env python3
"""The Hopper forward's main loop as ptxas compiled it, read on a machine without a GPU.

For each spec: flashjit writes the source, nvcc -cubin compiles it (-Xptxas -v), nvdisasm
reads the SASS. Printed per spec: registers and spills, ptxas' wgmma notes (serialised,
injected waits), HGMMA and 'gsb0' waits in the kernel (a wait after every HGMMA is a
serialised kernel), BSSY divergence regions, and the innermost loop that issues both
products (S and P V: 16 HGMMA at d128): its instruction count and how much of it runs on the uniform
datapath (U* instructions). A change to the consumer once kept every HGMMA pipelined and
still slowed the kernel 4-8% because ptxas moved the loop's ring-slot arithmetic from
uniform to vector registers (bench/results/2026-12-04-h200-run29); compare before and after
a change, e.g. with --templates pointing at a copy of the old templates.

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
    from shared memory descriptors) and P V (A from registers)."""
    best = []
    for addr, text in instrs:
        m = BRANCH.search(text)
        if not m or labels.get(m.group(1), addr + 1) >= addr:
            continue
        body = [t for a, t in instrs if labels[m.group(1)] <= a <= addr]
        has_s = any(S_PRODUCT.search(t) for t in body)
        has_pv = any(PV_PRODUCT.search(t) for t in body)
        if has_s and has_pv and (not best or len(body) < len(best)):
            best = body
    return best


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
    ptxas = subprocess.run([args.nvcc, "-std=c++17", "-cubin", "-arch=sm_90a", "-I" + inc, "-Xptxas", "-v",
                            "-diag-suppress", "177", src, "-o", cubin], capture_output=True, text=True)
    if ptxas.returncode != 0:
        return f"{spec}: nvcc failed\n{ptxas.stderr}"
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
    loop = product_loop(instrs, labels)
    opcodes = [next(w for w in t.split() if not w.startswith("@")) for t in loop]
    uniform = sum(op.startswith("U") for op in opcodes)
    lines = [f"{spec}: {regs.group(1) if regs else '?'} registers, spills {spills.groups() if spills else '?'}",
             f"  HGMMA {sum('HGMMA' in t for t in texts)}, gsb0 waits "
             f"{sum('DEPBAR.LE gsb0, 0x0' in t for t in texts)}, BSSY {sum(t.startswith('BSSY') for t in texts)}, "
             f"instructions {len(texts)}",
             f"  main loop: {len(loop)} instructions, {sum('HGMMA' in t for t in loop)} HGMMA, "
             f"{uniform} uniform-datapath, {sum('R2UR' in t for t in loop)} R2UR"]
    lines += [f"  ptxas: {n}" for n in notes]
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
    p.add_argument("--nvdisasm")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as work:
        for spec in args.specs:
            print(report(spec, args, work))


if __name__ == "__main__":
    main()
