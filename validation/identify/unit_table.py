"""``fp16emu units``: every matrix unit on a few probe vectors that tell the units apart.

The vectors are the discriminating cases of the published models (MMA-Sim, arXiv 2511.10909, and
Khattak & Mikaitis, arXiv 2512.07004; the AMD ones are model predictions, the NVIDIA ones hardware
facts of Fasi et al. 2021), built in code so the table needs nothing outside the package.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

import emu
import models

__all__ = ["PROBES", "UNITS", "probe_table", "fmt_value", "print_table"]

# name, products as (a, b) pairs, c, what it shows
PROBES = [
    ("fp16 subnormal input", [(2.0**-20, 1024.0)], 0.0, "MI200 flushes |x| < 2^-14 to 0"),
    (
        "pairing tie lost",
        [(1.0, 1.0), (2.0**-12, 2.0**-12), (2.0**-12, 2.0**-12), (0.0, 0.0)],
        0.0,
        "MI200 rounds 1 + 2^-24 before adding the second 2^-24",
    ),
    (
        "sticky beyond tie",
        [(1.0, 1.0), (2.0**-12, 2.0**-12), (2.0**-14, 2.0**-14), (0.0, 0.0)],
        0.0,
        "only an exact fused sum keeps the sticky bit",
    ),
    (
        "cancellation 2^24",
        [(4096.0, 4096.0), (1.0, 1.0), (-4096.0, 4096.0), (0.0, 0.0)],
        0.0,
        "exact: 1; a rounding tree loses the 1",
    ),
    ("MI300 c round-down", [(1.0, 1.0)], -(2.0**-30), "MI300 floors c at 24 bits below the larger exponent"),
    (
        "MI300 product truncation",
        [(1.0, 1.0), (-1.5 * 2.0**-13, 2.0**-12)],
        0.0,
        "truncating products at 24 fraction bits",
    ),
    (
        "group boundary k3|k4",
        [
            (1.0, 1.0),
            (0.0, 0.0),
            (0.0, 0.0),
            (2.0**-12, 2.0**-12),
            (2.0**-12, 2.0**-12),
            (0.0, 0.0),
            (0.0, 0.0),
            (0.0, 0.0),
        ],
        0.0,
        "groups of 4 vs one group of 8",
    ),
    ("V100 alignment", [(1.0, 2.0**-24)] * 4, 1.0, "products below the 24-bit window vanish (Fasi et al.)"),
]

UNITS = ["mi100", "mi200", "mi300", "v100", "a100", "h100", "fma32", "fp64"]


def fmt_value(x: float) -> str:
    """``x`` as text, 1 ± 2^-e written so when it is one."""
    x = float(x)
    if x == 0 or not np.isfinite(x):
        return repr(x)
    one = Fraction(x) - 1
    if one != 0 and abs(one) < Fraction(1, 2**10):  # show 1 + small as 1+2^e
        n, d = one.numerator, one.denominator
        if abs(n) == 1 and d & (d - 1) == 0:
            return f"1{'+' if n > 0 else '-'}2^-{d.bit_length() - 1}"
    return f"{x:.9g}"


def probe_table(units=UNITS) -> list[dict]:
    """One row per probe: its name, why it matters, the exact value and each unit's result."""
    rows = []
    for name, pairs, c, why in PROBES:
        a = np.array([p[0] for p in pairs], np.float16)
        b = np.array([p[1] for p in pairs], np.float16)
        exact = Fraction(c) + sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a, b))
        results = {u: float(emu.dot_add(a, b, np.float32(c), models.unit(u))) for u in units}
        rows.append({"probe": name, "why": why, "exact": float(exact), **results})
    return rows


def print_table(units=UNITS) -> None:
    print("d = c + Σ a_k·b_k through each unit (fp16 inputs, fp32 accumulator)\n")
    head = f"{'probe':26s} {'exact':>10s} " + " ".join(f"{u:>10s}" for u in units)
    print(head)
    print("-" * len(head))
    for row in probe_table(units):
        cells = " ".join(f"{fmt_value(row[u]):>10s}" for u in units)
        print(f"{row['probe']:26s} {fmt_value(row['exact']):>10s} {cells}")
        print(f"{'':26s} ({row['why']})")
    print("\nUnits: " + "; ".join(f"{u}: {models.unit(u).description}" for u in units))
