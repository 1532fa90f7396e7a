"""Identification speed (issue 17): rows × points → seconds, on this machine, with its load.

Usage: ``python benchmarks/bench_identify.py [--repeat 3]``. Cases: a 4096-row probe set whose
outputs one named unit computed (a consistent point exists: screen, then full rows for the
survivors), the same with a tenth of the rows' last bit flipped (no point is consistent: every
point runs on every row), fp16 outputs, a larger 16384-row probe file, the measured NVIDIA
H100 rows when ../shared/reference is present, and one adaptive identification (the candidate
pool is evaluated once for every point, then 3–6 probes are asked). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

import emu
import models
from emu.units import Format
from models import space
from validation.identify import probes as probe
from validation.identify import search as ident


def _rows(unit_name, rows, acc="fp32", seed=0):
    p = probe.probe_set(rows, 16, seed=seed, accumulator=acc)
    d = emu.dot_add(p.a, p.b, p.c_values(), models.unit(unit_name, output=acc))
    return ident.Rows(p.a, p.b, p.c, d.view(np.uint16 if acc == "fp16" else np.uint32))


def _time(fn, repeat):
    fn()  # warm-up (numba cache load)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    load0 = os.getloadavg()[0]
    cases = []
    h100 = _rows("h100", 4096)
    cases.append(("4096 probes, h100 outputs (fp32)", h100))
    flipped = h100.d.copy()
    flipped[::10] ^= np.uint32(1)
    cases.append(("same, last bit flipped in 1/10 of rows", ident.Rows(h100.a, h100.b, h100.c, flipped)))
    cases.append(("4096 probes, mi300 outputs (fp32)", _rows("mi300", 4096)))
    cases.append(("4096 probes, a100 outputs (fp16)", _rows("a100", 4096, "fp16")))
    cases.append(("16384 probes, mi100 outputs (fp32)", _rows("mi100", 16384, seed=5)))
    nv = Path(__file__).resolve().parents[2] / "shared" / "reference" / "nvidia_tensor_core_hw" / "H100" / "fp16"
    if nv.exists():
        cases.append(("measured H100 rows (fp32 output)", ident.load_rows(nv, "fp32")))
    print("| case | rows | K | points | consistent | seconds (median) |")
    print("|---|---|---|---|---|---|")
    for label, rows in cases:
        seconds, result = _time(lambda rows=rows: ident.identify(rows, next_count=0), args.repeat)
        print(
            f"| {label} | {len(rows)} | {rows.k} | {result.points_searched} | {len(result.consistent)} | {seconds:.2f} |"
        )
    # adaptive: the pool once, then the probes
    pts = space.points(Format.FP32, 16)
    t0 = time.perf_counter()
    pool = ident.pool_outputs(pts, 16, Format.FP32, pool_rows=2048)
    t_pool = time.perf_counter() - t0
    u = models.unit("mi100")
    t0 = time.perf_counter()
    live, asked, _ = ident.adaptive_identify(
        lambda a, b, c: emu.dot_add(a, b, c.view(np.float32), u).view(np.uint32), pts, pool=pool
    )
    t_ask = time.perf_counter() - t0
    print(
        f"| adaptive, mi100 device: pool of 2048 candidates × {len(pts)} points, then {len(asked)} probes "
        f"→ {len(live)} point | 2048 | 16 | {len(pts)} | {len(live)} | {t_pool:.2f} + {t_ask:.2f} |"
    )
    print(
        f"\nload average {load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; "
        f"{os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"numpy {np.__version__}"
    )


if __name__ == "__main__":
    main()
