"""Speed of the operand formats beyond fp16 against the fp16 path, with a same-run baseline.

Problem: the GEMM of ``bench_units.py`` (M=256, N=32768, K=64, inputs uniform in [-1, 1], c = 0
as a full (M, N) float32 array) through ``emu.dot_add(a[:, None, :], b.T[None], c, unit)`` (the
GEMM-layout kernels), for each (unit, format) pair below and the same unit with fp16 operands.
The time includes all of dot_add (operand conversion and decoding, output allocation).

Baseline measured in the same rounds: the plain numba float32 loop of ``bench_units.py``. Each
pair reports its throughput as a fraction of the loop's, beside the fp16 unit's; the target
(issue 29) is ``format ratio ≥ fp16 ratio / 1.5``. The block-scaled recipes (issue 39.5:
``SCALED``, scales of 1 along K, ``emu.dot_add(..., scale_a=, scale_b=)``) are held against the
same unit's fp8 (e4m3) path instead, with the same bound; ``--only scaled`` runs those rows alone. Timing: one warm-up call each, then
``--repeat`` rounds timing every job once in turn; medians.

    python benchmarks/bench_formats.py [--repeat 5] [--out benchmarks/results/formats.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import numba  # noqa: E402
from bench_units import K, M, N, cpu_model, fp32_loop, time_rounds  # noqa: E402

import emu  # noqa: E402
import models  # noqa: E402
from emu.operands import value_dtype  # noqa: E402

PAIRS = [
    ("h100", "bf16"),
    ("h100", "tf32"),
    ("h100", "e4m3"),
    ("a100", "bf16"),
    ("mi300", "bf16"),
    ("mi300", "e4m3fnuz"),
    ("mi200", "bf16"),
    ("mi100", "bf16"),
    ("fma32", "bf16"),
]
DTYPES = {
    "bf16": ml_dtypes.bfloat16,
    "tf32": np.float32,
    "e4m3": ml_dtypes.float8_e4m3fn,
    "e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
}
SLOWDOWN = 1.5  # the bound on format ratio / fp16 ratio
#: block-scaled recipes (models.scaled_input) against the same unit's e4m3 path
SCALED = [("b200", "mxe4m3"), ("b200", "mxf4"), ("b200", "nvf4")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "formats.json"))
    ap.add_argument("--only", choices=("all", "scaled"), default="all", help="'scaled': the block-scaled rows only")
    args = ap.parse_args()
    pairs = PAIRS if args.only == "all" else []
    load_before = os.getloadavg()
    rng = np.random.default_rng(1)
    a64 = rng.uniform(-1, 1, (M, K))
    b64 = rng.uniform(-1, 1, (K, N))
    c = np.zeros((M, N), np.float32)
    A32, B32 = a64.astype(np.float16).astype(np.float32), b64.astype(np.float16).astype(np.float32)
    out = np.empty((M, N), np.float32)
    operands = {"fp16": (a64.astype(np.float16), b64.astype(np.float16))}
    for fmt, dt in DTYPES.items():
        operands[fmt] = (a64.astype(dt), b64.astype(dt))

    jobs = {"fp32_loop": lambda: fp32_loop(A32, B32, out)}
    units = sorted({u for u, _ in pairs})
    for u in units:
        a, b = operands["fp16"]
        un = models.unit(u)
        jobs[f"{u}/fp16"] = lambda a=a, b=b, un=un: emu.dot_add(a[:, None, :], b.T[None], c, un)
    for u, fmt in pairs:
        a, b = operands[fmt]
        un = models.unit(u, input=fmt)
        jobs[f"{u}/{fmt}"] = lambda a=a, b=b, un=un: emu.dot_add(a[:, None, :], b.T[None], c, un)
    for u, recipe in SCALED:
        a, b = operands["e4m3"]
        un = models.unit(u, input="e4m3")
        jobs[f"{u}/e4m3"] = lambda a=a, b=b, un=un: emu.dot_add(a[:, None, :], b.T[None], c, un)
        fa, fb, scale, block, kind = models.scaled_input(recipe)
        un = models.unit(u, input=(fa, fb), scale=scale, block=block, kind=kind)
        ta, tb = (value_dtype(f) for f in (fa, fb))
        a, b = a64.astype(ta), b64.astype(tb)
        one = np.uint8(127 if scale == "ue8m0" else 0x38)  # 2^0 as UE8M0, 1.0 as UE4M3
        sa, sb = np.full((M, 1, K // block), one), np.full((1, N, K // block), one)
        jobs[f"{u}/{recipe}"] = lambda a=a, b=b, un=un, sa=sa, sb=sb: emu.dot_add(
            a[:, None, :], b.T[None], c, un, scale_a=sa, scale_b=sb
        )
    times = time_rounds(jobs, args.repeat)
    macs = M * N * K
    rate = {key: macs / statistics.median(ts) for key, ts in times.items()}
    loop = rate["fp32_loop"]
    rows = []
    for u, fmt in pairs:
        r16, rf = rate[f"{u}/fp16"] / loop, rate[f"{u}/{fmt}"] / loop
        rows.append(
            dict(
                unit=u,
                format=fmt,
                vs_fp32_loop=rf,
                fp16_vs_fp32_loop=r16,
                slowdown_vs_fp16=r16 / rf,
                met=r16 / rf <= SLOWDOWN,
                times_s=times[f"{u}/{fmt}"],
            )
        )
    for u, recipe in SCALED:
        r8, rf = rate[f"{u}/e4m3"] / loop, rate[f"{u}/{recipe}"] / loop
        rows.append(
            dict(
                unit=u,
                format=recipe,
                vs_fp32_loop=rf,
                baseline="e4m3",
                fp8_vs_fp32_loop=r8,
                slowdown_vs_fp8=r8 / rf,
                met=r8 / rf <= SLOWDOWN,
                times_s=times[f"{u}/{recipe}"],
            )
        )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
    ).stdout.strip()
    machine = dict(
        cpu=cpu_model(),
        cpus=os.cpu_count(),
        numba_threads=numba.get_num_threads(),
        loadavg_before=load_before,
        loadavg_after=os.getloadavg(),
        date=datetime.datetime.now().isoformat(timespec="seconds"),
        commit=commit,
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(dict(problem=dict(M=M, N=N, K=K), rows=rows, machine=machine), indent=1))
    print(
        f"GEMM M={M} N={N} K={K}; {machine['date']}, commit {commit}; {machine['cpu']}, {machine['cpus']} CPUs; "
        f"load average {load_before[0]:.2f} before, {machine['loadavg_after'][0]:.2f} after; fp32 loop "
        f"{loop / 1e9:.2f} G MAC/s"
    )
    print("| unit | format | × fp32 loop | fp16 × fp32 loop | fp16 / format | ≤ 1.5 |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if "baseline" in r:
            continue
        print(
            f"| {r['unit']} | {r['format']} | {r['vs_fp32_loop']:.3f} | {r['fp16_vs_fp32_loop']:.3f} | "
            f"{r['slowdown_vs_fp16']:.2f} | {'met' if r['met'] else '**not met**'} |"
        )
    print("\n| unit | block-scaled | × fp32 loop | e4m3 × fp32 loop | e4m3 / block-scaled | ≤ 1.5 |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if "baseline" in r:
            print(
                f"| {r['unit']} | {r['format']} | {r['vs_fp32_loop']:.3f} | {r['fp8_vs_fp32_loop']:.3f} | "
                f"{r['slowdown_vs_fp8']:.2f} | {'met' if r['met'] else '**not met**'} |"
            )


if __name__ == "__main__":
    main()
