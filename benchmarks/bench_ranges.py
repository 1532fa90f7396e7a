"""Speed of the study's units over the 2022 study's input ranges, with a same-run baseline.

The GEMM-shaped problem of bench_units.py uses inputs in [-1, 1] and K = 64, where every
accumulator stays small. The study's ranges r1 [-10, 10], r4 [1, 5] and r5 [5, 10] and its long
gemmK grow accumulators into the hundreds and thousands, where the MI100 unit's shortcuts have
to prove more (emu/kernels/fused_exact.py). Problem per range: M × N × K with fp16 inputs uniform
in the range, c = 0, through ``emu.dot_add(a[:, None, :], b.T[None], c, unit)``; the baseline is
bench_units.py's numba float32 loop on the same operands, timed in the same rounds.

    python benchmarks/bench_ranges.py [--repeat 3] [--units mi100,mi200,fma32,fp64] [--k 64,1152]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import numba  # noqa: E402
from bench_units import cpu_model, fp32_loop, time_rounds  # noqa: E402

import emu  # noqa: E402
import models  # noqa: E402

RANGES = {"r0": (-1, 1), "r1": (-10, 10), "r4": (1, 5), "r5": (5, 10)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--units", default="mi100,mi200,fma32,fp64")
    ap.add_argument("--k", default="64,1152", help="gemmK values (comma-separated)")
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--n", type=int, default=4096)
    args = ap.parse_args()
    names = args.units.split(",")
    units = {name: models.unit(name) for name in names}
    M, N = args.m, args.n
    print(
        f"{cpu_model()}, {os.cpu_count()} CPUs, {numba.get_num_threads()} numba threads; "
        f"load average {os.getloadavg()[0]:.2f}; M={M} N={N}; median of {args.repeat} rounds"
    )
    print(
        "| range | K | fp32 loop G MAC/s | "
        + " | ".join(f"{n} G MAC/s (× loop)" for n in names)
        + " | output bits, sha256 prefix per unit |"
    )
    print("|---|---|---|" + "---|" * len(names) + "---|")
    for K in (int(k) for k in args.k.split(",")):
        for key, (lo, hi) in RANGES.items():
            rng = np.random.default_rng([K, lo + 100, hi + 100])
            a16 = rng.uniform(lo, hi, (M, K)).astype(np.float16)
            b16 = rng.uniform(lo, hi, (K, N)).astype(np.float16)
            c = np.zeros((M, N), np.float32)
            A32, B32 = a16.astype(np.float32), b16.astype(np.float32)
            out = np.empty((M, N), np.float32)
            jobs = {"loop": lambda A32=A32, B32=B32, out=out: fp32_loop(A32, B32, out)}
            for name, u in units.items():
                jobs[name] = lambda u=u, a16=a16, b16=b16, c=c: emu.dot_add(a16[:, None, :], b16.T[None], c, u)
            times = time_rounds(jobs, args.repeat)  # the warm-up call compiles or loads the cache
            rate = {k: M * N * K / statistics.median(ts) / 1e9 for k, ts in times.items()}
            cells = " | ".join(f"{rate[n]:.2f} ({rate[n] / rate['loop']:.2f})" for n in names)
            # a digest of each unit's output bits: two runs (two commits) computed the same bits
            digests = "/".join(
                hashlib.sha256(np.ascontiguousarray(jobs[n]()).view(np.uint32).tobytes()).hexdigest()[:8] for n in names
            )
            print(f"| {key} [{lo}, {hi}] | {K} | {rate['loop']:.2f} | {cells} | {digests} |", flush=True)


if __name__ == "__main__":
    main()
