#!/usr/bin/env python3
"""Decode the raw output of probe.cu: the layout of 8-bit 2:4-sparse MMA operands and metadata.

Usage: python3 decode.py raw.txt [--json layout.json]

For each probed instruction ("mma": mma.sp m16n8k64 e4m3, "wg": wgmma .sp m64n8k64 e4m3, SS) it
prints
  - B: for every B unit (mma: byte b of register r of thread t, unit 16t + 4r + b; wg: byte offset
    in the shared B tile) the logical (k, n) it holds;
  - A: for every A unit the (row m, compressed column c) of the 2:4-compressed A it holds
    (c = 2j + s: slot s of group j, the group of logical k 4j..4j+3);
  - metadata: for every (thread, 2-bit field f = bits 2f..2f+1) of the metadata register the
    (row m, group j, slot s) whose index it holds (slot 0 = i0, slot 1 = i1: the two positions
    of the kept values in their group of 4, encoded i0 | i1 << 2 per nibble);
  - the nibble semantics (which position each slot takes under each of the six ordered pairs);
  - each map as a bit-linear closed form when it is one (every coordinate bit the XOR of unit
    bits), and a comparison with the layout the compiler assumed (emit/cuda/mma.cuh,
    wgmma_sp.cuh).

Logical k is only defined up to a common permutation of the groups (A, B and the metadata may
be relabelled together without changing any product). The decoder labels the groups by the
compiler's B layout when the hardware's B agrees with it (then A and the metadata are expressed
in the compiler's own k), else by the smallest B unit of each group (and says so).

Stdlib only. `python3 test_decode.py` checks the decoder against synthetic raw files.
"""

import json
import sys

PATTERNS = [0x4, 0x8, 0xC, 0x9, 0xD, 0xE]
BASE = 0x8  # metadata nibble of the M experiments
ONE = 0x38  # e4m3 1.0

INSTRS = {
    # rows of D, A units, B units, K (logical), N
    "mma": dict(rows=16, na=512, nb=512, k=64, n=8),
    "wg": dict(rows=64, na=2048, nb=512, k=64, n=8),
    "mma16": dict(rows=16, na=256, nb=256, k=32, n=8),  # the control: known 16-bit layout
}


def e4m3(b):
    e, m = (b >> 3) & 15, b & 7
    if e == 0:
        return m / 8.0 * 2.0 ** -6
    return (1 + m / 8.0) * 2.0 ** (e - 7)


# Output value -> code index (0..63) of the B encodings: e4m3 byte ONE + index, or (mma16) the
# f16 1 + index / 64.
CODES = {"e4m3": {e4m3(ONE + i): i for i in range(64)}, "f16": {1 + i / 64: i for i in range(64)}}


def codes(instr):
    return CODES["f16" if instr == "mma16" else "e4m3"]


class Failure(Exception):
    pass


def parse(lines):
    """Raw lines -> {instr: {"L": {(unit, pattern, mode): hits}, "M": {(unit, t, f): hits}}}.

    hits is a list of (m, n, value); a record with more than 16 nonzero outputs keeps 16 and
    is flagged in "over".
    """
    data = {i: {"L": {}, "M": {}, "over": []} for i in INSTRS}
    header, ended = [], False
    for line in lines:
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            header.append(line)
            if line.startswith("# end"):
                ended = True
            continue
        parts = line.split()
        kind, instr = parts[0], parts[1]
        unit, p1, p2, count = (int(x) for x in parts[2:6])
        hits = []
        for h in parts[6:]:
            m, n, v = h.split(",")
            hits.append((int(m), int(n), float(v)))
        key = (unit, p1, p2)
        if kind not in ("L", "M") or instr not in data:
            raise Failure(f"unknown record: {line}")
        data[instr][kind][key] = hits
        if count != len(hits):
            data[instr]["over"].append((kind, key, count))
    return data, header, ended


# ---- the compiler's assumed layouts (what the decoded layout is compared with) ----------------


def guess_b(instr, u):
    if instr == "mma16":  # register r of thread t, half h: k 8r + 2q + h, column g
        t, r, h = u // 8, (u // 2) % 4, u % 2
        return 8 * r + 2 * (t % 4) + h, t // 4
    if instr == "mma":  # register r of thread t: k 16r + 4q + byte, column g
        t, r, y = u // 16, (u // 4) % 4, u % 4
        return 16 * r + 4 * (t % 4) + y, t // 4
    # wg: K-major rows of 64 bytes, 64-byte swizzle (an involution on the offset)
    b = u ^ (((u >> 7) & 3) << 4)
    return b % 64, b // 64


def guess_a(instr, u):
    if instr == "mma16":  # the dense m16n8k16 f16 A layout over the compressed 16 x 16
        t, r, h = u // 8, (u // 2) % 4, u % 2
        return t // 4 + 8 * (r % 2), 2 * (t % 4) + h + 8 * (r // 2)
    if instr == "mma":  # the dense m16n8k32 fp8 A layout over the compressed 16 x 32
        t, r, y = u // 16, (u // 4) % 4, u % 4
        return t // 4 + 8 * (r % 2), 4 * (t % 4) + y + 16 * (r // 2)
    # wg: K-major rows of 32 bytes, 32-byte swizzle
    b = u ^ (((u >> 7) & 1) << 4)
    return b // 32, b % 32


def guess_meta(instr, t, f):
    # (nibble = group, low field i0, high field i1); wg: warp w adds 16 w to the row.
    lane = t % 32
    g, q = lane // 4, lane % 4
    if instr == "mma16":
        # thread (g, q): K chunk q (groups 4q..4q+3); bits 0..15 row g, 16..31 row g + 8
        row = 16 * (t // 32) + g + 8 * (f // 8)
        return row, 4 * q + (f % 8) // 2, f % 2
    # 8-bit (measured on an H200 by this probe, 2026-12-03): thread (g, q) holds one row,
    # g + 8 (q & 1), and groups 8 (q >> 1) .. 8 (q >> 1) + 7
    row = 16 * (t // 32) + g + 8 * (q & 1)
    return row, 8 * (q >> 1) + f // 2, f % 2


# ---- decoding ---------------------------------------------------------------------------------


def code_of(v, what, table):
    if v not in table:
        raise Failure(f"{what}: output {v} is no B code (sum of several products?)")
    return table[v]


def decode_instr(instr, d, log):
    cfg = INSTRS[instr]
    L, M = d["L"], d["M"]
    if not L:
        raise Failure("no L records")
    if d["over"]:
        log(f"  ! {len(d['over'])} records with more than 16 nonzero outputs (first: {d['over'][0]})")
    rows, na, nb, N = cfg["rows"], cfg["na"], cfg["nb"], cfg["n"]
    ctab = codes(instr)

    # 1. A unit -> row (mode 0: B all ones; D row m holds 1 in every column).
    a_row, unseen, odd = {}, [], []
    for a in range(na):
        rs = set()
        for p in PATTERNS:
            hits = L.get((a, p, 0))
            if hits is None:
                raise Failure(f"missing L record {a} {p} 0")
            for m, n, v in hits:
                rs.add(m)
                if v != 1.0:
                    odd.append((a, p, m, n, v))
            if hits and len(hits) != N:
                odd.append((a, p, "columns", len(hits)))
        if not rs:
            unseen.append(a)
        elif len(rs) > 1:
            raise Failure(f"A unit {a} reaches rows {sorted(rs)}")
        else:
            a_row[a] = rs.pop()
    if unseen:
        log(f"  ! {len(unseen)} A units change no output (first {unseen[:8]})")
    if odd:
        log(f"  ! {len(odd)} B-all-ones outputs are not one 1.0 per column (first {odd[:4]})")

    # 2. B units met by each A unit under each pattern (enc lo + enc hi), B unit -> column.
    hit, b_col = {}, {}
    for a in a_row:
        for p in PATTERNS:
            lo = {(m, n): code_of(v, f"A {a} p {p} lo", ctab) for m, n, v in L[(a, p, 1)]}
            hi = {(m, n): code_of(v, f"A {a} p {p} hi", ctab) for m, n, v in L[(a, p, 2)]}
            if set(lo) != set(hi):
                raise Failure(f"A {a} p {p}: lo and hi hit different outputs")
            s = {}
            for (m, n), x in lo.items():
                b = x + 64 * hi[(m, n)]
                if b >= nb:
                    raise Failure(f"A {a} p {p}: B unit {b} out of range")
                if b_col.setdefault(b, n) != n:
                    raise Failure(f"B unit {b} in columns {b_col[b]} and {n}")
                s[n] = b
            hit[(a, p)] = frozenset(s.values())

    # 3. B k-classes: the B units met together form one logical k (one unit per column).
    parent = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for s in hit.values():
        s = sorted(s)
        for x in s[1:]:
            parent[find(x)] = find(s[0])
    classes = {}
    for b in b_col:
        classes.setdefault(find(b), set()).add(b)
    cls_of = {b: find(b) for b in b_col}
    log(f"  B: {len(b_col)} units seen, {len(classes)} logical k rows "
        f"(expected {cfg['k']} of {N} units)")
    bad = [c for c in classes.values() if len(c) != N or len({b_col[b] for b in c}) != N]
    if bad:
        log(f"  ! {len(bad)} k rows are not one unit per column (first {sorted(bad[0])})")

    # 4. Slots and positions: slot 0 follows i0 = v & 3, slot 1 follows i1 = v >> 2.
    kappa = {(a, p): cls_of[min(hit[(a, p)])] for a in a_row for p in PATTERNS if hit[(a, p)]}
    a_slot, pos_of, sem_bad = {}, {}, []
    for a in a_row:
        k = {p: kappa.get((a, p)) for p in PATTERNS}
        cand = []
        for s in (0, 1):
            idx = {p: (p & 3) if s == 0 else (p >> 2) for p in PATTERNS}
            # classes must be equal exactly when the index is equal
            ok = all((k[p] == k[q]) == (idx[p] == idx[q]) for p in PATTERNS for q in PATTERNS)
            if ok:
                cand.append((s, idx))
        if len(cand) != 1:
            sem_bad.append((a, {hex(p): k[p] for p in PATTERNS}))
            continue
        s, idx = cand[0]
        a_slot[a] = s
        for p in PATTERNS:
            c = k[p]
            if pos_of.setdefault(c, idx[p]) != idx[p]:
                sem_bad.append((a, "position", c))
    if sem_bad:
        log(f"  ! {len(sem_bad)} A units do not follow the nibble semantics i0 | i1 << 2 "
            f"(first {sem_bad[:2]})")
    else:
        log("  nibble semantics: slot 0 at position i0 = bits 0-1, slot 1 at i1 = bits 2-3 of "
            "its nibble, for all six ordered pairs")

    # groups: classes joined by a common A unit
    gparent = {}

    def gfind(x):
        while gparent.setdefault(x, x) != x:
            gparent[x] = gparent[gparent[x]]
            x = gparent[x]
        return x

    for a in a_slot:
        cs = sorted({kappa[(a, p)] for p in PATTERNS})
        for c in cs[1:]:
            gparent[gfind(c)] = gfind(cs[0])
    groups = {}
    for c in pos_of:
        groups.setdefault(gfind(c), {})[pos_of[c]] = c
    complete = [g for g in groups.values() if sorted(g) == [0, 1, 2, 3]]
    log(f"  {len(groups)} groups of 4 logical k ({len(complete)} complete)")

    # 5. Group labels: the compiler's B layout if the hardware agrees, else min B unit order.
    def label_by_guess():
        lab = {}
        for g in groups.values():
            js = set()
            for p, c in g.items():
                ks = {guess_b(instr, b)[0] for b in classes[c]}
                if len(ks) != 1:
                    return None
                k = ks.pop()
                if k % 4 != p:
                    return None
                js.add(k // 4)
            if len(js) != 1:
                return None
            lab[id(g)] = js.pop()
        if sorted(lab.values()) != list(range(len(groups))):
            return None
        return lab

    lab = label_by_guess()
    b_guess_ok = lab is not None
    if lab is None:
        order = sorted(groups.values(), key=lambda g: min(min(classes[c]) for c in g.values()))
        lab = {id(g): j for j, g in enumerate(order)}
        log("  ! the hardware's B is NOT the compiler's B layout: groups labelled by their "
            "smallest B unit")
    else:
        log("  B agrees with the compiler's layout: k labels are the compiler's")
    class_k = {}
    for g in groups.values():
        for p, c in g.items():
            class_k[c] = 4 * lab[id(g)] + p
    b_map = {b: (class_k[cls_of[b]], b_col[b]) for b in b_col if cls_of[b] in class_k}
    a_map = {}
    for a, s in a_slot.items():
        j = class_k[kappa[(a, PATTERNS[0])]] // 4
        a_map[a] = (a_row[a], 2 * j + s)

    # 6. Metadata: (thread, field) -> (row, group, slot) from the M records.
    meta_map, meta_bad = {}, []
    for (a, t, f), hits in sorted(M.items()):
        if a not in a_map:
            meta_bad.append((a, t, f, "unknown A unit"))
            continue
        m, c = a_map[a]
        j, s = c // 2, c % 2
        # expected: slot s of (m, j) moved from its base position to the new one
        base_pos = (BASE & 3) if s == 0 else (BASE >> 2)
        want_pos = 1 if f % 2 == 0 else 3
        got = {(mm, n): code_of(v, f"M {a} {t} {f}", ctab) for mm, n, v in hits}
        want = {(m, b_col[b]): b % 64 for b in b_map if b_map[b][0] == 4 * j + want_pos}
        if got != want or base_pos == want_pos:
            meta_bad.append((a, t, f, "moved elsewhere"))
        key = (t, f)
        if key in meta_map and meta_map[key] != (m, j, s):
            meta_bad.append((a, t, f, f"also {meta_map[key]}"))
        meta_map[key] = (m, j, s)
    if meta_bad:
        log(f"  ! {len(meta_bad)} metadata records off the model (first {meta_bad[:3]})")
    return dict(a=a_map, b=b_map, meta=meta_map, b_guess_ok=b_guess_ok, ok=not (
        unseen or odd or bad or sem_bad or meta_bad))


# ---- presentation -----------------------------------------------------------------------------


def bit_linear(fn, nbits):
    """fn: int -> tuple of ints. If every output bit is the XOR of some input bits (and a
    constant), return [(const, [input bits]) per output coordinate bit]; else None."""
    base = fn(0)
    if base is None:
        return None
    cols = [fn(1 << i) for i in range(nbits)]
    if any(c is None for c in cols):
        return None
    cols = [tuple(x ^ y for x, y in zip(c, base)) for c in cols]
    for x in range(1 << nbits):
        v = fn(x)
        if v is None:
            return None
        acc = list(base)
        for i in range(nbits):
            if x >> i & 1:
                acc = [p ^ q for p, q in zip(acc, cols[i])]
        if tuple(acc) != v:
            return None
    return base, cols


def describe_linear(names_in, names_out, widths, fit):
    base, cols = fit
    out = []
    for o, (name, w) in enumerate(zip(names_out, widths)):
        terms = []
        for bit in range(w):
            srcs = [names_in[i] for i, c in enumerate(cols) if c[o] >> bit & 1]
            const = base[o] >> bit & 1
            txt = " ^ ".join(srcs) if srcs else ""
            if const:
                txt = (txt + " ^ 1") if txt else "1"
            terms.append(f"{name}[{bit}] = {txt or '0'}")
        out.append("; ".join(terms))
    return out


def unit_bits(instr, which):
    if instr == "mma16":
        return ["h0", "r0", "r1", "t0", "t1", "t2", "t3", "t4"]  # unit 8t + 2r + h
    if instr == "mma":
        return ["b0", "b1", "r0", "r1", "t0", "t1", "t2", "t3", "t4"]  # unit 16t + 4r + b
    n = 11 if which == "a" else 9
    return [f"o{i}" for i in range(n)]  # byte offset


def report(instr, res, log):
    cfg = INSTRS[instr]
    a, b, meta = res["a"], res["b"], res["meta"]
    na, nb = cfg["na"], cfg["nb"]
    kb = (cfg["rows"] - 1).bit_length()
    kk = (cfg["k"] - 1).bit_length()

    def show(title, fn, nbits, names_in, names_out, widths, guess, keyname):
        fit = bit_linear(fn, nbits)
        log(f"  {title}:")
        if fit:
            for line in describe_linear(names_in, names_out, widths, fit):
                log(f"    {line}")
        else:
            log("    (not bit-linear; see the table)")
        if guess is not None:
            diff = [x for x in range(1 << nbits) if fn(x) is not None and fn(x) != guess(x)]
            log(f"    vs the compiler's assumption: {len(diff)} of {1 << nbits} differ"
                + (f" (first {keyname} {diff[0]}: hardware {fn(diff[0])}, compiler "
                   f"{guess(diff[0])})" if diff else ""))

    show("B unit -> (k, n)", lambda u: b.get(u), (nb - 1).bit_length(), unit_bits(instr, "b"),
         ["k", "n"], [kk, 3], (lambda u: guess_b(instr, u)) if res["b_guess_ok"] else None, "unit")
    show("A unit -> (m, c)", lambda u: a.get(u), (na - 1).bit_length(), unit_bits(instr, "a"),
         ["m", "c"], [kb, kk - 1], (lambda u: guess_a(instr, u)) if res["b_guess_ok"] else None,
         "unit")
    nt = 128 if instr == "wg" else 32
    tb = (nt - 1).bit_length()
    used = sorted({t for t, _ in meta})
    log(f"  metadata: {len(meta)} (thread, field) pairs govern an index; threads used: "
        f"{len(used)} of {nt}" + ("" if len(used) == nt else f" ({used})"))

    def mfn(x):
        return meta.get((x >> 4, x & 15))

    show("metadata (thread t, field f = bits 2f..2f+1) -> (m, j, s)", mfn, 4 + tb,
         [f"f{i}" for i in range(4)] + [f"t{i}" for i in range(tb)], ["m", "j", "s"],
         [kb, kk - 2, 1],
         (lambda x: guess_meta(instr, x >> 4, x & 15)) if res["b_guess_ok"] else None,
         "t*16+f")
    if not res["b_guess_ok"]:
        log("  (no comparison with the compiler: its B layout is not the hardware's, so its k "
            "labels do not apply)")
    log("  tables:")
    log("    B unit: k,n")
    for lo in range(0, nb, 16):
        log(f"    {lo:4d}: " + " ".join(f"{b[u][0]},{b[u][1]}" if u in b else "-"
                                       for u in range(lo, lo + 16)))
    log("    A unit: m,c")
    for lo in range(0, na, 16):
        log(f"    {lo:4d}: " + " ".join(f"{a[u][0]},{a[u][1]}" if u in a else "-"
                                       for u in range(lo, lo + 16)))
    log("    metadata thread: field 0..15 -> m,j,s")
    for t in range(nt):
        log(f"    {t:4d}: " + " ".join(
            "{},{},{}".format(*meta[(t, f)]) if (t, f) in meta else "-" for f in range(16)))


def decode(lines, log=print):
    data, header, ended = parse(lines)
    for h in header:
        log(h)
    if not ended:
        log("! the raw file has no '# end' line: truncated?")
    out = {}
    for instr in INSTRS:
        log(f"== {instr}")
        try:
            res = decode_instr(instr, data[instr], log)
        except Failure as e:
            log(f"  ! cannot decode: {e}")
            continue
        report(instr, res, log)
        log(f"  consistent with the model (one row per A unit, nibble semantics, one index per "
            f"metadata field): {'yes' if res['ok'] else 'NO'}")
        out[instr] = res
    return out


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    with open(argv[1]) as f:
        res = decode(f)
    if "--json" in argv:
        path = argv[argv.index("--json") + 1]
        with open(path, "w") as f:
            json.dump({i: {"a": {str(k): v for k, v in r["a"].items()},
                           "b": {str(k): v for k, v in r["b"].items()},
                           "meta": {f"{k[0]},{k[1]}": v for k, v in r["meta"].items()},
                           "b_guess_ok": r["b_guess_ok"], "ok": r["ok"]}
                       for i, r in res.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
