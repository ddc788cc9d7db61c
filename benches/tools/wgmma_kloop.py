#!/usr/bin/env python3
"""Instructions per k-step of the WGMMA consumer loop: the Choreo GEMM against the hand kernel.

Translates benches/kernels/gemm.co with target/debug/choreoc (build it first: `cargo build -p
choreo-compiler --bin choreoc`), compiles it and benches/kernels/gemm_wgmma.cu for sm_90a with
`nvcc -cubin -O3` (the flags and include folders of benches/build.rs), disassembles both with
cuobjdump and, for each kernel, finds the consumer's k-loop: the innermost backward branch
around the HGMMA instructions. It prints, per kernel,

- `hot`: the instructions of one k-step on its usual path (every mbarrier try_wait succeeds at
  once, every bounds check passes): the shortest path through the loop's control flow from the
  loop head through every HGMMA to the back edge (so out-of-line spin loops and failure paths
  are not counted);
- `static`: every instruction between the loop head and the back edge;
- the hot path's instructions by opcode group.

Usage: benches/tools/wgmma_kloop.py [--nvcc-bin DIR] [--keep DIR] [--list] [--show KERNEL]
(run from the repository root). DIR defaults to $CHOREO_SASS_NVCC_BIN, else the CUDA 12.4
toolkit that ci/smoke-cuda12 installs (~/.cache/choreo/cuda-12.4/toolkit/bin), else the nvcc
on PATH. `--show f16` prints the hot path of the kernels whose name contains `f16`.
"""

import argparse
import collections
import heapq
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The kernels compared: a label, the .cubin they are in, and a pattern of their mangled name.
KERNELS = [
    ("choreo gemm_f16", "choreo", r"__choreo_device_gemm_f16"),
    ("choreo gemm_bf16", "choreo", r"__choreo_device_gemm_bf16"),
    ("choreo gemm_e4m3", "choreo", r"__choreo_device_gemm_e4m3"),
    ("hand f16 wait0 (Choreo's algorithm)", "hand", r"kernelI6__halfLi1ELi4ELi16ELi0E"),
    ("hand f16 wait1 (baseline)", "hand", r"kernelI6__halfLi1ELi4ELi16ELi1E"),
    ("hand bf16 wait0", "hand", r"kernelI13__nv_bfloat16Li1ELi4ELi16ELi0E"),
]

INSN = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*/\* 0x[0-9a-f]+ \*/\s*$")


def nvcc_bin(arg):
    for d in [arg, os.environ.get("CHOREO_SASS_NVCC_BIN"),
              os.path.expanduser("~/.cache/choreo/cuda-12.4/toolkit/bin")]:
        if d and os.path.exists(os.path.join(d, "nvcc")):
            return d
    nvcc = shutil.which("nvcc")
    if nvcc:
        return os.path.dirname(nvcc)
    sys.exit("no nvcc: pass --nvcc-bin DIR")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def build(bindir, work):
    root = os.getcwd()
    choreoc = os.path.join(root, "target/debug/choreoc")
    if not os.path.exists(choreoc):
        sys.exit("no target/debug/choreoc: cargo build -p choreo-compiler --bin choreoc")
    cu = os.path.join(work, "gemm.cu")
    run([choreoc, "emit-cu", "benches/kernels/gemm.co", "-o", cu])
    includes = ["-I", "choreo-compiler/include", "-I", "choreo-compiler/src/emit/cuda"]
    flags = ["-cubin", "-O3", "-std=c++17", "-arch=sm_90a", "-DCHOREO_LEAN_PRELUDE"]
    nvcc = os.path.join(bindir, "nvcc")
    sass = {}
    for name, src in [("choreo", cu), ("hand", "benches/kernels/gemm_wgmma.cu")]:
        cubin = os.path.join(work, name + ".cubin")
        run([nvcc, *flags, *includes, "-o", cubin, src])
        sass[name] = run([os.path.join(bindir, "cuobjdump"), "-sass", cubin])
    return sass


def functions(sass):
    """{mangled name: [(address, instruction text)]}"""
    out, cur = {}, None
    for line in sass.splitlines():
        m = re.match(r"\s+Function : (\S+)", line)
        if m:
            cur = out.setdefault(m.group(1), [])
            continue
        m = INSN.match(line)
        if m and cur is not None:
            out_text = re.sub(r"\s+", " ", m.group(2)).rstrip(" ;")
            cur.append((int(m.group(1), 16), out_text))
    return out


def branch_target(text):
    m = re.search(r"\bBRA(?:\.\S+)?\s+(?:`\(\.L_x_\d+\)\s*)?0x([0-9a-f]+)", text)
    return int(m.group(1), 16) if m else None


def successors(insns, i):
    """Indices of the instructions that may follow instruction i."""
    addr_index = {a: j for j, (a, _) in enumerate(insns)}
    text = insns[i][1]
    op = re.sub(r"^@!?U?P\w+\s+", "", text).split(" ")[0]
    predicated = text.startswith("@")
    succ = []
    if op.startswith("BRA") or op.startswith("JMP"):
        t = branch_target(text)
        if t is not None and t in addr_index:
            succ.append(addr_index[t])
        if predicated or ".ANY" in op or ".DIV" in op:
            succ.append(i + 1)
    elif op.startswith("EXIT") or op.startswith("RET") or op == "BPT.TRAP" or op.startswith("TRAP"):
        if predicated:
            succ.append(i + 1)
    else:
        succ.append(i + 1)
    return [s for s in succ if s < len(insns)]


def shortest(insns, src, dst, lo, hi):
    """Instructions on the shortest path src -> dst (inclusive of src, exclusive of dst) that
    stays inside [lo, hi]; None when there is none."""
    dist = {src: 0}
    prev = {}
    heap = [(0, src)]
    while heap:
        d, i = heapq.heappop(heap)
        if i == dst:
            path = []
            while i != src:
                i = prev[i]
                path.append(i)
            return list(reversed(path))
        if d > dist.get(i, 1 << 60):
            continue
        for s in successors(insns, i):
            if not lo <= s <= hi:
                continue
            if d + 1 < dist.get(s, 1 << 60):
                dist[s] = d + 1
                prev[s] = i
                heapq.heappush(heap, (d + 1, s))
    return None


def kloop(insns):
    """(hot path indices, static count) of the k-loop around the first HGMMA group."""
    mma = [i for i, (_, t) in enumerate(insns) if re.search(r"\b[HQIB]GMMA", t)]
    if not mma:
        return None
    first = mma[0]
    # The group: the HGMMAs up to the one that signals gsb0 (the commit).
    last = next((i for i in mma if "gsb0" in insns[i][1]), mma[-1])
    group = [i for i in mma if first <= i <= last]
    head_addr = insns[first][0]
    back = None
    for j in range(last + 1, len(insns)):
        t = branch_target(insns[j][1])
        if t is not None and t <= head_addr:
            back = j
            break
    if back is None:
        return None
    head = next(i for i, (a, _) in enumerate(insns) if a == branch_target(insns[back][1]))
    path, at = [], head
    for stop in group + [back]:
        seg = shortest(insns, at, stop, head, back)
        if seg is None:
            return None
        path += seg
        at = stop
    path.append(back)
    return path, back - head + 1


GROUPS = [
    ("GMMA", r"^[HQIB]GMMA"),
    ("uniform (U*, R2UR, S2UR)", r"^(U\w+|R2UR|S2UR)"),
    ("integer/logic (IMAD, IADD3, LOP3, SHF, LEA, ...)",
     r"^(IMAD|IADD|IABS|LOP|SHF|LEA|MOV|SEL|PRMT|VIADD|BREV|FLO|POPC|SGXT|BMSK)"),
    ("compare/predicate", r"^(ISETP|PLOP|P2R|R2P|FSETP)"),
    ("branch/convergence (BRA, BSSY, BSYNC, WARPSYNC, YIELD)",
     r"^(BRA|BSSY|BSYNC|WARPSYNC|YIELD|NOP|JMP)"),
    ("mbarrier/sync (SYNCS, WARPGROUP, VOTE, S2R)", r"^(SYNCS|WARPGROUP|VOTE|S2R|BAR|DEPBAR)"),
]


def group_of(text):
    op = re.sub(r"^@!?U?P\w+\s+", "", text)
    for name, pat in GROUPS:
        if re.match(pat, op):
            return name
    return "other"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nvcc-bin")
    ap.add_argument("--keep", help="keep the .cu/.cubin files in this folder")
    ap.add_argument("--list", action="store_true", help="list the kernels of both cubins")
    ap.add_argument("--show", help="print the hot path of kernels whose label contains this")
    args = ap.parse_args()
    bindir = nvcc_bin(args.nvcc_bin)
    work = args.keep or tempfile.mkdtemp(prefix="wgmma-kloop-")
    os.makedirs(work, exist_ok=True)
    sass = build(bindir, work)
    funcs = {name: functions(text) for name, text in sass.items()}
    if args.list:
        for name, fs in funcs.items():
            for f in fs:
                print(name, f)
        return
    print(f"nvcc: {bindir}")
    print(f"{'kernel':40} {'hot':>5} {'static':>7}  hot by group")
    for label, cubin, pat in KERNELS:
        match = [f for f in funcs[cubin] if re.search(pat, f)]
        if not match:
            print(f"{label:40} (not found)")
            continue
        insns = funcs[cubin][match[0]]
        found = kloop(insns)
        if not found:
            print(f"{label:40} (no k-loop found)")
            continue
        path, static = found
        groups = collections.Counter(group_of(insns[i][1]) for i in path)
        detail = ", ".join(f"{n.split(' ')[0]} {c}" for n, c in
                           sorted(groups.items(), key=lambda x: -x[1]))
        print(f"{label:40} {len(path):5} {static:7}  {detail}")
        if args.show and args.show in label:
            for i in path:
                print(f"    {insns[i][0]:05x}  {insns[i][1]}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
