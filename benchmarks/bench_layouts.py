"""Speed of ``emu.dot_add`` / ``emu.gemm`` in every operand layout, against a same-run plain loop.

Layouts (all with the same number of outputs P and the same K, fp16 inputs uniform in [-1, 1],
c = 0 as a full float32 array of the output shape):

* ``rows``: a, b (P, K), c (P,): a batch of independent dot products (MMA-Sim's ``dpa`` shape);
* ``bcast_a``: a (K,), b (P, K): one a-vector for every output;
* ``bcast_b``: a (P, K), b (K,);
* ``gemm``: a[:, None, :] (M, 1, K), b[None] (1, N, K), M·N = P (``dot_add``'s GEMM form);
* ``gemm()``: ``emu.gemm(A (M, K), B (K, N), C)``;
* ``batched``: a (G, M, 1, K), b (G, 1, N, K), G·M·N = P (a batched GEMM).

Every time includes all of the call (fp16 decoding, output allocation). The baseline of each
layout is a plain numba float32 loop over float32 copies of the same arrays in the same memory
layout (copies made beforehand, not timed), parallel over outputs, one fp32 multiply-add per
product in k order (``fastmath`` off, as the emulation), written the way a user would write it:
k innermost for ``rows``/``bcast_*``/``gemm``/``batched`` (each output's products are contiguous),
k outer with the outputs vectorised inside for ``gemm()`` (B is (K, N)). The ratio is
baseline time / emulation time (≥ 1: faster than the plain loop).

With ``rows`` chosen, a third kind of job, ``floor``, times the least any rows kernel must do:
read every fp16 bit pattern of a and b once (a xor over each row, parallel over rows, vectorised)
and write one float32 per output. Its G MAC/s is an upper bound on what any emulation of the rows
layout can reach on this machine, decode and arithmetic left out; the summary sets it against half
the best layout's speed (what "within 2× of the best layout" asks of rows).

Timing: one untimed warm-up call of each job, then ``--repeat`` rounds that time every job once,
in turn (machine load drifting during the run hits all alike); the best round of each
(on a shared machine the least disturbed one). Prints a Markdown table
and writes JSON to --out.

    python benchmarks/bench_layouts.py [--outputs 262144] [--k 64] [--units fma32,mi200,mi100,h100] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import numba  # noqa: E402
from bench_units import cpu_model, time_rounds  # noqa: E402

import emu  # noqa: E402
import models  # noqa: E402

#: the issue's targets: fraction of the plain loop's speed, per unit (others: EXACT_TARGET)
TARGET = {"fma32": 0.5, "mi200": 0.5}
EXACT_TARGET = 0.15


@numba.njit(parallel=True, cache=True, fastmath=False)
def loop_rows(A, B, C, out):
    """out[p] = C[p] + Σ_k A[p, k]·B[p, k], A or B of one row broadcasting."""
    P = out.shape[0]
    K = A.shape[1]
    sa = 1 if A.shape[0] > 1 else 0
    sb = 1 if B.shape[0] > 1 else 0
    for p in numba.prange(P):
        a = A[p * sa]
        b = B[p * sb]
        acc = C[p]
        for k in range(K):
            acc += a[k] * b[k]
        out[p] = acc


@numba.njit(parallel=True, cache=True, fastmath=False)
def loop_gemm_rows(A, B, C, out):
    """out[g, m, n] = C[g, m, n] + Σ_k A[g, m, k]·B[g, n, k] (B given as rows of k)."""
    G, M, N = out.shape
    K = A.shape[2]
    for t in numba.prange(G * M):
        g, m = t // M, t % M
        a = A[g, m]
        for n in range(N):
            b = B[g, n]
            acc = C[g, m, n]
            for k in range(K):
                acc += a[k] * b[k]
            out[g, m, n] = acc


@numba.njit(parallel=True, cache=True, fastmath=False)
def loop_gemm_cols(A, B, C, out):
    """out[m] = C[m] + A[m] @ B with B (K, N): k outer, outputs vectorised (bench_units' loop)."""
    M, N = out.shape
    K = B.shape[0]
    for m in numba.prange(M):
        acc = C[m].copy()
        for k in range(K):
            a = A[m, k]
            Bk = B[k]
            for j in range(N):
                acc[j] += a * Bk[j]
        out[m] = acc


@numba.njit(parallel=True, cache=True, fastmath=False)
def floor_rows(A, B, out):
    """out[p] = xor of the bit patterns of A[p] and B[p] (uint16 views): one read of each operand."""
    P, K = A.shape
    for p in numba.prange(P):
        a = A[p]
        b = B[p]
        x = np.uint16(0)
        for k in range(K):
            x ^= a[k] ^ b[k]
        out[p] = np.float32(x)


def _f32(x):
    return np.ascontiguousarray(x.astype(np.float32))


def layouts(P: int, K: int, rng):
    """name → (emulation call taking a unit, baseline call, outputs, description)."""
    M = 256
    N = P // M
    G = 8
    Mg, Ng = 64, P // (G * 64)
    h = lambda *shape: rng.uniform(-1, 1, shape).astype(np.float16)  # noqa: E731
    out = {}

    a, b, c = h(P, K), h(P, K), np.zeros(P, np.float32)
    A, B, o = _f32(a), _f32(b), np.empty(P, np.float32)
    out["rows"] = (lambda u, a=a, b=b, c=c: emu.dot_add(a, b, c, u), lambda A=A, B=B, c=c, o=o: loop_rows(A, B, c, o))
    a16, b16 = a.view(np.uint16), b.view(np.uint16)
    out["floor"] = (None, lambda a16=a16, b16=b16, o=o: floor_rows(a16, b16, o))

    a1 = h(K)
    A1 = _f32(a1)[None]
    out["bcast_a"] = (
        lambda u, a1=a1, b=b, c=c: emu.dot_add(a1, b, c, u),
        lambda A1=A1, B=B, c=c, o=o: loop_rows(A1, B, c, o),
    )
    out["bcast_b"] = (
        lambda u, a=a, a1=a1, c=c: emu.dot_add(a, a1, c, u),
        lambda A=A, A1=A1, c=c, o=o: loop_rows(A, A1, c, o),
    )
    del a, b, A, B

    am, bn, cm = h(M, K), h(N, K), np.zeros((M, N), np.float32)
    Am, Bn, om = _f32(am)[None], _f32(bn)[None], np.empty((1, M, N), np.float32)
    out["gemm"] = (
        lambda u, am=am, bn=bn, cm=cm: emu.dot_add(am[:, None, :], bn[None], cm, u),
        lambda Am=Am, Bn=Bn, cm=cm, om=om: loop_gemm_rows(Am, Bn, cm[None], om),
    )
    bk = np.ascontiguousarray(bn.T)
    Bk, o2 = _f32(bk), np.empty((M, N), np.float32)
    out["gemm()"] = (
        lambda u, am=am, bk=bk, cm=cm: emu.gemm(am, bk, cm, u),
        lambda Am=Am, Bk=Bk, cm=cm, o2=o2: loop_gemm_cols(Am[0], Bk, cm, o2),
    )

    ag, bg, cg = h(G, Mg, K), h(G, Ng, K), np.zeros((G, Mg, Ng), np.float32)
    Ag, Bg, og = _f32(ag), _f32(bg), np.empty((G, Mg, Ng), np.float32)
    out["batched"] = (
        lambda u, ag=ag, bg=bg, cg=cg: emu.dot_add(ag[:, :, None, :], bg[:, None, :, :], cg, u),
        lambda Ag=Ag, Bg=Bg, cg=cg, og=og: loop_gemm_rows(Ag, Bg, cg, og),
    )
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--outputs", type=int, default=1 << 18, help="outputs per layout (multiple of 2048)")
    ap.add_argument("--k", type=int, default=64)
    ap.add_argument("--units", default="fma32,mi200,mi100,h100")
    ap.add_argument("--layouts", default="rows,bcast_a,bcast_b,gemm,gemm(),batched")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "layouts.json"))
    args = ap.parse_args()
    if args.outputs % 2048:
        raise SystemExit("--outputs: must be a multiple of 2048")
    rng = np.random.default_rng(0)
    units = {n: models.unit(n) for n in args.units.split(",")}
    all_layouts = layouts(args.outputs, args.k, rng)
    names = [n for n in all_layouts if n != "floor"]
    unknown = [n for n in args.layouts.split(",") if n not in names]
    if unknown:
        raise SystemExit(f"--layouts: {', '.join(unknown)} not among {','.join(names)}")
    chosen = {n: all_layouts[n] for n in args.layouts.split(",")}
    floor_call = all_layouts["floor"][1] if "rows" in chosen else None
    load_before = os.getloadavg()
    jobs = {}
    for name, (emu_call, base_call) in chosen.items():
        jobs[("loop", name)] = base_call
        for un, u in units.items():
            jobs[(un, name)] = lambda emu_call=emu_call, u=u: emu_call(u)
    if floor_call is not None:
        jobs[("floor", "rows")] = floor_call
    med = {key: min(v) for key, v in time_rounds(jobs, args.repeat).items()}  # best round each
    load_after = os.getloadavg()
    macs = args.outputs * args.k

    print(
        f"P = {args.outputs} outputs, K = {args.k}, {args.repeat} rounds, best round each; {cpu_model()}, "
        f"{os.cpu_count()} CPUs, numba {numba.__version__} ({numba.config.NUMBA_NUM_THREADS} threads); "
        f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after"
    )
    print()
    header = "| layout | plain loop G MAC/s | " + " | ".join(f"{u} G MAC/s (× loop)" for u in units) + " |"
    print(header)
    print("|" + "---|" * (2 + len(units)))
    rows = []
    for name in chosen:
        base = med[("loop", name)]
        cells = []
        for un in units:
            t = med[(un, name)]
            cells.append(f"{macs / t / 1e9:.2f} ({base / t:.2f}×)")
            rows.append({"layout": name, "unit": un, "seconds": t, "loop_seconds": base, "ratio": base / t})
        print(f"| {name} | {macs / base / 1e9:.2f} | " + " | ".join(cells) + " |")
    print()
    fails = []
    for un in units:
        ts = {name: med[(un, name)] for name in chosen}
        best = min(ts.values())
        worst = max(ts, key=ts.get)
        target = TARGET.get(un, EXACT_TARGET)
        low = [r["layout"] for r in rows if r["unit"] == un and r["ratio"] < target]
        print(
            f"{un}: slowest layout {worst} at {ts[worst] / best:.2f}× the best layout's time (target ≤ 2); "
            f"below {target}× loop: {', '.join(low) or 'none'}"
        )
        if ts[worst] / best > 2 or low:
            fails.append(un)
    floor = None
    if floor_call is not None:
        floor = med[("floor", "rows")]
        print()
        print(
            f"rows read floor (one read of a and b, no decode, no arithmetic): {macs / floor / 1e9:.2f} G MAC/s; "
            "within 2× of the best layout, rows needs "
            + "; ".join(
                f"{un} ≥ {macs / (2 * min(med[(un, n)] for n in chosen)) / 1e9:.2f} G MAC/s"
                + (
                    " (more than the floor: out of reach here)"
                    if floor > 2 * min(med[(un, n)] for n in chosen)
                    else " (under the floor)"
                )
                for un in units
            )
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps(
            {
                "outputs": args.outputs,
                "K": args.k,
                "repeat": args.repeat,
                "cpu": cpu_model(),
                "cpus": os.cpu_count(),
                "load_before": load_before,
                "load_after": load_after,
                "results": rows,
                "rows_floor_seconds": floor,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
