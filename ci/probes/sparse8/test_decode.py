#!/usr/bin/env python3
"""Checks decode.py against synthetic raw files: a Python model of the hardware (A unit ->
(m, c), B unit -> (k, n), metadata (thread, field) -> (m, j, s)) runs the probe's experiments
exactly as probe.cu does and writes its raw format; the decoder must recover the model's maps
(up to a common relabelling of the groups of 4 logical k). Stdlib only:

    python3 ci/probes/sparse8/test_decode.py [--write DIR]

--write keeps the synthetic raw files (raw-<model>.txt) in DIR.
"""

import io
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode as D  # noqa: E402


def b_value(instr, u, mode):
    if instr == "mma16":
        return 1.0 if mode == 0 else 1 + (u & 63) / 64 if mode == 1 else 1 + (u >> 6) / 64
    return D.e4m3(D.ONE if mode == 0 else D.ONE + (u & 63) if mode == 1 else D.ONE + (u >> 6))


def replicate(nib):
    return sum(nib << (4 * i) for i in range(8))


def meta_field(lane, te, f):
    r = replicate(D.BASE)
    if lane == te:
        nv = 1 if f % 2 == 0 else 3
        r = (r & ~(3 << (2 * f))) | (nv << (2 * f))
    return r


def fmt(v):
    return "%.9g" % v


def simulate(instr, a_map, b_map, meta_map):
    """The raw lines probe.cu would print for a device with these layouts (sorted as it sorts)."""
    cfg = D.INSTRS[instr]
    b_inv = {kn: u for u, kn in b_map.items()}
    m_inv = {v: k for k, v in meta_map.items()}
    nt = 128 if instr == "wg" else 32

    def run(a, mode, regs):
        m, c = a_map[a]
        j, s = c // 2, c % 2
        t, f = m_inv[(m, j, s)]
        i = (regs(t) >> (2 * f)) & 3
        k = 4 * j + i
        return [(m, n, b_value(instr, b_inv[(k, n)], mode)) for n in range(cfg["n"])]

    out = []
    for a in range(cfg["na"]):
        for p in sorted(D.PATTERNS):
            for mode in range(3):
                hits = run(a, mode, lambda t: replicate(p))
                out.append(f"L {instr} {a} {p} {mode} {len(hits)} "
                           + " ".join(f"{m},{n},{fmt(v)}" for m, n, v in hits))
    recs = []
    for a in range(cfg["na"]):
        base = run(a, 1, lambda t: meta_field(t, -1, 0))
        # only the field that governs A unit a's index can change its output
        m, c = a_map[a]
        te, f = m_inv[(m, c // 2, c % 2)]
        assert 0 <= te < nt
        hits = run(a, 1, lambda t: meta_field(t, te, f))
        if hits != base:
            recs.append(f"M {instr} {a} {te} {f} {len(hits)} "
                        + " ".join(f"{m},{n},{fmt(v)}" for m, n, v in hits))
    return out + recs


def raw(models):
    lines = ["# probe8 sparse8 raw v1", "# device synthetic"]
    for instr, (a, b, m) in models.items():
        lines += simulate(instr, a, b, m)
    lines.append("# end 0")
    return lines


def guess_model(instr):
    cfg = D.INSTRS[instr]
    nt = 128 if instr == "wg" else 32
    a = {u: D.guess_a(instr, u) for u in range(cfg["na"])}
    b = {u: D.guess_b(instr, u) for u in range(cfg["nb"])}
    m = {(t, f): D.guess_meta(instr, t, f) for t in range(nt) for f in range(16)
         if instr != "mma16" or t % 4 < 2}
    return a, b, m


def scrambled_model(instr, seed):
    """Random bijections: any layout at all (a slot's index in a field of its parity: the slot
    is defined by which index of the nibble, i0 or i1, places it)."""
    rnd = random.Random(seed)
    cfg = D.INSTRS[instr]
    nt = 128 if instr == "wg" else 32
    K, rows = cfg["k"], cfg["rows"]
    mc = [(m, c) for m in range(rows) for c in range(K // 2)]
    kn = [(k, n) for k in range(K) for n in range(8)]
    mj = [[(m, j, s) for m in range(rows) for j in range(K // 4)] for s in (0, 1)]
    for x in (mc, kn, mj[0], mj[1]):
        rnd.shuffle(x)
    threads = list(range(nt))
    rnd.shuffle(threads)
    threads = sorted(threads[: rows * K // 32])  # the threads whose metadata is read
    meta = {}
    for s in (0, 1):
        tf = [(t, f) for t in threads for f in range(s, 16, 2)]
        meta.update(zip(tf, mj[s]))
    return dict(enumerate(mc)), dict(enumerate(kn)), meta


def alt_meta_model(instr):
    """The compiler's A and B, but another metadata layout (thread pairs hold whole rows)."""
    a, b, _ = guess_model(instr)
    nt = 128 if instr == "wg" else 32
    m = {}
    for t in range(nt):
        lane, w = t % 32, t // 32
        g, q = lane // 4, lane % 4
        if instr == "mma16":  # threads q = 0, 2: the whole 8 groups of rows g, g + 8
            if q % 2:
                continue
            for f in range(16):
                m[(t, f)] = (g + 8 * (q // 2), f // 2, f % 2)
            continue
        row = 16 * w + g + 8 * (q // 2)
        for f in range(16):
            m[(t, f)] = (row, 8 * (q % 2) + f // 2, f % 2)
    return a, b, m


def equivalent(model, got):
    """got == model up to one permutation of the groups (logical k / 4)."""
    a, b, m = model
    pi = {}
    for u, (k, n) in b.items():
        gk, gn = got["b"].get(u, (None, None))
        if gk is None or gn != n or gk % 4 != k % 4:
            return f"B unit {u}: model {(k, n)}, decoded {(gk, gn)}"
        if pi.setdefault(k // 4, gk // 4) != gk // 4:
            return f"B unit {u}: group relabelling not consistent"
    if sorted(pi.values()) != list(range(len(pi))):
        return "group relabelling not a permutation"
    for u, (mm, c) in a.items():
        want = (mm, 2 * pi[c // 2] + c % 2)
        if got["a"].get(u) != want:
            return f"A unit {u}: model {want}, decoded {got['a'].get(u)}"
    for key, (mm, j, s) in m.items():
        want = (mm, pi[j], s)
        if got["meta"].get(key) != want:
            return f"metadata {key}: model {want}, decoded {got['meta'].get(key)}"
    return None


def check(name, models, keep):
    lines = raw(models)
    if keep:
        with open(os.path.join(keep, f"raw-{name}.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    log = io.StringIO()
    res = D.decode(lines, log=lambda s: log.write(s + "\n"))
    fails = []
    for instr, model in models.items():
        if instr not in res:
            fails.append(f"{instr}: not decoded")
            continue
        if not res[instr]["ok"]:
            fails.append(f"{instr}: decoder reports inconsistency")
        why = equivalent(model, res[instr])
        if why:
            fails.append(f"{instr}: {why}")
    return fails, log.getvalue()


def main(argv):
    keep = argv[argv.index("--write") + 1] if "--write" in argv else None
    failed = 0
    cases = [
        ("guess", {i: guess_model(i) for i in D.INSTRS}),
        ("alt-meta", {i: alt_meta_model(i) for i in D.INSTRS}),
        ("scrambled", {i: scrambled_model(i, 7 + n) for n, i in enumerate(D.INSTRS)}),
    ]
    for name, models in cases:
        fails, text = check(name, models, keep)
        # the guess decodes to the compiler's own labels, with no differences reported
        if name == "guess":
            if text.count("vs the compiler's assumption: 0 of") != 9:
                fails.append("guess model: the decoder reports differences from the compiler")
        if name == "alt-meta":
            if "B agrees with the compiler's layout" not in text:
                fails.append("alt-meta: B should agree with the compiler")
            if text.count("vs the compiler's assumption: 0 of") != 6:
                fails.append("alt-meta: only the metadata should differ")
        if name == "scrambled" and "NOT the compiler's B layout" not in text:
            fails.append("scrambled: B should differ from the compiler")
        print(f"{name}: {'ok' if not fails else 'FAILED'}")
        for f in fails:
            print(f"  {f}")
        if fails:
            print(text[:4000])
        failed += bool(fails)
    # a truncated and a damaged file: the decoder says so instead of crashing
    lines = raw({"mma": guess_model("mma")})
    log = io.StringIO()
    D.decode(lines[: len(lines) // 2], log=lambda s: log.write(s + "\n"))
    t = log.getvalue()
    if "truncated" not in t or "cannot decode" not in t:
        print("truncated: FAILED\n" + t[:2000])
        failed += 1
    else:
        print("truncated: ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
