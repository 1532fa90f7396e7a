"""The GEMM-layout kernels (shared a per row) against the batched layout, bit for bit.

The exact-oracle tests (tests/emu/test_units_exact.py, tests/oracle) feed ``dot_add`` one
(a, b, c) vector per output, which runs the kernels in their batched layout. ``dot_add`` with
a[:, None, :] and b[None] broadcasting (what benchmarks/bench_units.py times) runs the GEMM
layout instead, with a shared by a row's lanes and per-task tables. This script checks that the
two layouts agree on adversarial data: the rows of A and the columns of B are drawn from the
adversarial families of tests/adversarial.py (NaN/inf, subnormals, cancellation, ties, wide
exponent spans, overflow, signed zeros …), C mixes their accumulators, and every (row, column)
pair is one output; C is also given as a scalar, a row and a column (broadcast C).

    python benchmarks/check_layouts.py [--rows 48] [--cols 400] [--seed 0] [--only mi100,h100]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from adversarial import all_families, concat  # noqa: E402

import emu  # noqa: E402
import models  # noqa: E402
from emu.units import Family, Rounding  # noqa: E402


def _units():
    r = dataclasses.replace
    u = models.unit
    units = {n: u(n) for n in models.UNIT_NAMES}
    for n in models.UNIT_NAMES:
        if u(n).family == Family.TRUNCATED_FUSED:
            units[f"{n} fp16 out"] = u(n, output="fp16")
    units.update(
        {
            "mi100 group 8 RZ": r(u("mi100"), group_size=8, output_rounding=Rounding.RZ),
            "mi100 RD all flushes": r(
                u("mi100"),
                output_rounding=Rounding.RD,
                flush_inputs=True,
                flush_c=True,
                flush_products=True,
                flush_partials=True,
                flush_output=True,
            ),
            "mi200 group 8 no flush": r(
                u("mi200"),
                group_size=8,
                flush_inputs=False,
                flush_c=False,
                flush_products=False,
                flush_partials=False,
                flush_output=False,
            ),
            "mi300 RD alignment, group 4": r(u("mi300"), group_size=4, alignment_rounding=Rounding.RD),
            "h100 RNE group 8": r(u("h100"), output_rounding=Rounding.RNE, group_size=8),
            "v100 RD alignment": r(u("v100"), alignment_rounding=Rounding.RD),
            "a100 zero exponent -20": r(u("a100"), zero_exponent=-20),
            "fp64 round each group of 4 RD": r(
                u("fp64"), group_size=4, round_each_group=True, output_rounding=Rounding.RD
            ),
        }
    )
    return units


def _same(x, y, fp16):
    ub = np.uint16 if fp16 else np.uint32
    xb, yb = np.asarray(x).view(ub), np.asarray(y).view(ub)
    nan = np.isnan(np.asarray(x, np.float32)) & np.isnan(np.asarray(y, np.float32))
    return (xb == yb) | nan


def check(name, unit, rng, rows, cols):
    params = unit.params
    fp16 = params.output_format == 1
    L = params.group_size
    bad = 0
    total = 0
    for K in sorted({L, 2 * L + 1, 4 * L + L // 2 + 1, 13}):
        pool_a, pool_b, pool_c, _ = concat(all_families(rng, 40, K, "fp16" if fp16 else "fp32"))
        a = pool_a[rng.integers(0, len(pool_a), rows)]
        b = pool_b[rng.integers(0, len(pool_b), cols)]
        c_bits = pool_c[rng.integers(0, len(pool_c), (rows, cols))]
        c = c_bits.view(np.float16 if fp16 else np.float32)
        for c_given in (c, c[:1, :1].reshape(()), c[:, :1], c[:1, :]):
            got = emu.dot_add(a[:, None, :], b[None, :, :], c_given, unit)  # GEMM layout
            c_full = np.broadcast_to(c_given, (rows, cols)).reshape(-1)
            want = emu.dot_add(np.repeat(a, cols, axis=0), np.tile(b, (rows, 1)), c_full, unit)  # batched
            ok = _same(got.reshape(-1), want, fp16)
            bad += int((~ok).sum())
            total += ok.size
    print(f"{name:32s} {total:8d} outputs, {bad} differ")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=48)
    ap.add_argument("--cols", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated name prefixes (default: all)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    only = tuple(x for x in args.only.split(",") if x)
    units = {n: u for n, u in _units().items() if not only or n.startswith(only)}
    bad = sum(check(n, u, rng, args.rows, args.cols) for n, u in units.items())
    print("all layouts agree" if bad == 0 else f"{bad} outputs differ")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
