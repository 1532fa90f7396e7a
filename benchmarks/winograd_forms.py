"""How the rounding of cuDNN's forward Winograd output transform was found (session 24): every
form of each output-transform row, scored in pairs on the H200's fp16 outputs.

The six random draws of sweep case s0525 (tests/data/captures/h200_probes/probes_set1.tar.gz,
``r_wino_s0525_float16_*``: input (1, 52, 26, 26), weight (26, 52, 3, 3)) give M, the per-position
GEMM result, exactly: the data and filter transforms are exact on 16-bit operands but for rare
sums, and the GEMM is one FMA chain over the channels ascending. What is left is Y = Aᵀ M A with
the fractions 1/f_j in Aᵀ, two passes of four rows. A row's form: its terms (c·m_j, rounded
products, or pairs m1 ± m2, m3 ± m4 formed first) summed as a binary tree, a product leaf
optionally fused into its sibling's add. Output (i, l) of a tile depends only on the first pass's
row i and the second pass's row l, so every pair of forms is scored on the outputs at that tile
position alone; then the joint choice of the eight forms with the fewest differing outputs.

    python benchmarks/winograd_forms.py [--positions 0,0 1,1 ...]

Prints, per tile position, the fewest differing outputs and how many pairs reach it (every pair
on the diagonal; elsewhere the forms the diagonal leaves at its minimum), then the joint choice
(the forms of :func:`emu.winograd.cudnn_fprop_f4x4_3x3`; figures in BENCHMARKS.md, session 24).
About 10 minutes on 2 cores."""

from __future__ import annotations

import argparse
import itertools
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from emu.gemm import fma32  # noqa: E402
from emu.simt import fma_gemm  # noqa: E402
from emu.winograd import CUDNN_FPROP_TILE, cudnn_data_rows, transform, winograd_tiles  # noqa: E402
from validation.captures import load_capture  # noqa: E402

ARCHIVE = ROOT / "tests" / "data" / "captures" / "h200_probes" / "probes_set1.tar.gz"
A = CUDNN_FPROP_TILE.fp32("AT")
C = np.float32(2 / 3)


def _rn(x):
    return np.asarray(x, np.float32)


def trees(n: int) -> list:
    """Every binary tree over leaves 0 … n − 1, children unordered ((2n − 3)!! of them)."""
    if n == 1:
        return [0]
    out = []
    for t in trees(n - 1):
        out.extend(_insert(t, n - 1))
    return out


def _insert(t, leaf):
    res = [(t, leaf)]
    if isinstance(t, tuple):
        a, b = t
        res += [(x, b) for x in _insert(a, leaf)] + [(a, x) for x in _insert(b, leaf)]
    return res


def fusions(t, fusable) -> list:
    """Tree ``t`` with each add marked 0 (two rounded operands) or 1/2 (its left/right product leaf
    fused: one FMA), where that leaf's coefficient is not a power of two."""
    if not isinstance(t, tuple):
        return [t]
    a, b = t
    out = []
    for x in fusions(a, fusable):
        for y in fusions(b, fusable):
            out.append((x, y, 0))
            if not isinstance(a, tuple) and fusable[a]:
                out.append((x, y, 1))
            if not isinstance(b, tuple) and fusable[b]:
                out.append((x, y, 2))
    return out


def evaluate(node, coefs, vals):
    if not isinstance(node, tuple):
        return _rn(coefs[node] * vals[node])
    a, b, f = node
    if f == 1:
        return fma32(coefs[a], vals[a], evaluate(b, coefs, vals))
    if f == 2:
        return fma32(coefs[b], vals[b], evaluate(a, coefs, vals))
    return _rn(evaluate(a, coefs, vals) + evaluate(b, coefs, vals))


def leaf_sets(row: int):
    """(name, leaves(X) → (coefficients, values)) for output row ``row``: each term alone, or
    the pairs m1 ± m2 and m3 ± m4 formed (rounded) first."""
    nz = [j for j in range(6) if A[row, j] != 0]
    sets = [("terms", lambda X, nz=nz: ([A[row, j] for j in nz], [X(j) for j in nz]))]
    four, two, half = np.float32(4), np.float32(2), np.float32(0.5)
    pairs = {
        0: lambda X: ([four, C, -four * C], [X(0), _rn(X(1) + X(2)), _rn(X(3) + X(4))]),
        1: lambda X: ([C, -two * C], [_rn(X(1) - X(2)), _rn(X(3) - X(4))]),
        2: lambda X: ([C, -C], [_rn(X(1) + X(2)), _rn(X(3) + X(4))]),
        3: lambda X: ([C, -half * C, np.float32(1)], [_rn(X(1) - X(2)), _rn(X(3) - X(4)), X(5)]),
    }
    sets.append(("pairs", pairs[row]))
    return sets


def row_forms(row: int) -> list:
    out = []
    for name, leaves in leaf_sets(row):
        coefs = leaves(lambda j: np.zeros(1, np.float32))[0]
        fusable = [abs(float(c)) not in (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0) for c in coefs]
        for t in trees(len(coefs)):
            out += [(name, leaves, f) for f in fusions(t, fusable)]
    return out


def draws(folder: Path):
    """(M (tiles, 6, 6), out (tiles, 4, 4) fp16) of the three fp16 draws, M as the model has it."""
    with tarfile.open(ARCHIVE) as tar:
        members = [m for m in tar.getmembers() if Path(m.name).name.startswith("r_wino_s0525_float16_")]
        tar.extractall(folder, members=members, filter="data")
    Ms, outs = [], []
    for m in sorted(members, key=lambda m: m.name):
        cap = load_capture(folder / m.name)
        s = cap.conv
        x = np.asarray(cap.operands["input"]).view(np.float16).astype(np.float32).reshape(s.N, s.C, s.H, s.W)
        w = np.asarray(cap.operands["weight"]).view(np.float16).astype(np.float32).reshape(s.K, s.C, 3, 3)
        d = winograd_tiles(x, CUDNN_FPROP_TILE, tuple(s.padding), (s.P, s.Q))
        th, tw = d.shape[2:4]
        V = cudnn_data_rows(cudnn_data_rows(d, 4), 5)
        U = transform(CUDNN_FPROP_TILE.fp32("G"), w)
        Vp = V.transpose(4, 5, 1, 0, 2, 3).reshape(6, 6, s.C, -1)
        Up = U.transpose(2, 3, 0, 1)
        M = np.stack(
            [
                np.stack([fma_gemm(np.ascontiguousarray(Up[a, b]), np.ascontiguousarray(Vp[a, b])) for b in range(6)])
                for a in range(6)
            ]
        )
        Ms.append(M.reshape(6, 6, -1).transpose(2, 0, 1))  # (K·N·th·tw, 6, 6), k major
        o = np.asarray(cap.out).reshape(s.N, s.K, th, 4, tw, 4).transpose(1, 0, 2, 4, 3, 5).reshape(-1, 4, 4)
        outs.append(o)
    return np.concatenate(Ms), np.concatenate(outs)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--positions", nargs="*", default=None, help="diagonal tile positions i,i only (default: all)")
    args = p.parse_args(argv)
    if not ARCHIVE.is_file():
        raise SystemExit(f"{ARCHIVE} is absent")
    positions = (
        [tuple(map(int, a.split(","))) for a in args.positions]
        if args.positions
        else list(itertools.product(range(4), range(4)))
    )
    with tempfile.TemporaryDirectory() as tmp:
        M, outs = draws(Path(tmp))
    forms = [row_forms(r) for r in range(4)]
    print(f"{len(outs)} tiles of 4×4 fp16 outputs; forms per row: {[len(f) for f in forms]}")
    t0 = time.time()
    with np.errstate(all="ignore"):

        def table(i, col, rows1, rows2):
            first = np.stack([evaluate(forms[i][a][2], *forms[i][a][1](lambda j: M[:, j, :])) for a in rows1])
            want = outs[:, i, col]
            out = np.empty((len(rows1), len(rows2)), np.int32)
            for n, b in enumerate(rows2):
                _, leaves, f = forms[col][b]
                y = evaluate(f, *leaves(lambda k: first[..., k]))
                out[:, n] = np.count_nonzero(y.astype(np.float16) != want[None, :], axis=1)
            print(
                f"position ({i}, {col}): fewest differing {out.min()} of {len(outs)}, pairs reaching it "
                f"{np.count_nonzero(out == out.min())} of {out.size} ({time.time() - t0:.0f} s)",
                flush=True,
            )
            return out

        # every pair on the diagonal; elsewhere only the forms the diagonal left at its minimum
        diag = [(i, i) for i in range(4) if not args.positions or (i, i) in positions]
        cand1, cand2 = {}, {}
        for i, _ in diag:
            t = table(i, i, range(len(forms[i])), range(len(forms[i])))
            cand1[i] = sorted(set(np.argwhere(t == t.min())[:, 0]))
            cand2[i] = sorted(set(np.argwhere(t == t.min())[:, 1]))
        if len(cand1) < 4:
            return 0
        tables = {(i, col): table(i, col, cand1[i], cand2[col]) for i in range(4) for col in range(4)}
    best = None  # the joint choice of the eight forms
    for a in itertools.product(*(range(len(cand1[i])) for i in range(4))):
        total = sum(int(min(sum(tables[i, col][a[i]] for i in range(4)))) for col in range(4))
        if best is None or total < best[0]:
            best = (total, a)
    total, a = best
    print(f"joint choice: {total} of {outs.size} outputs differ")
    for i in range(4):
        print(f"  first pass row {i}: {forms[i][cand1[i][a[i]]][0]} {forms[i][cand1[i][a[i]]][2]}")
    for col in range(4):
        scores = sum(tables[i, col][a[i]] for i in range(4))
        fits = [forms[col][cand2[col][b]] for b in np.flatnonzero(scores == scores.min())[:4]]
        print(
            f"  second pass row {col} ({np.count_nonzero(scores == scores.min())} forms): {[(f[0], f[2]) for f in fits]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
