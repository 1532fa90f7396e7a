"""Speed of every unit on emu.dot_add over a GEMM-shaped problem, with same-run baselines.

Problem: M=256, N=32768, K=64, fp16 inputs uniform in [-1, 1], c = 0 (issue 2). Baselines
measured in the same run: a plain numba float32 loop vectorised over outputs
(acc[n] += a[k]·b[k, n]), numpy's float32 BLAS, and MMA-Sim on a slice of the same problem
(when torch and mmasim are installed). Prints a Markdown table and writes JSON to --out.

    python benchmarks/bench_units.py [--repeat 5] [--units mi100,mi200] [--out benchmarks/results/units.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numba  # noqa: E402

import emu  # noqa: E402
import models  # noqa: E402

M, N, K = 256, 32768, 64
TARGET_VS_LOOP = {"fma32": 0.5, "fp64": 0.5, "mi200": 0.3}
TARGET_VS_MMASIM = {"mi100": 1000, "mi200": 1000, "fma32": 1000}


@numba.njit(parallel=True, cache=True, fastmath=False)
def fp32_loop(A, B, out):
    """The baseline: acc[n] += a[k]·b[k, n] in float32, parallel over rows, vectorised over n."""
    M, N = out.shape
    K = B.shape[0]
    for m in numba.prange(M):
        acc = np.zeros(N, np.float32)
        for k in range(K):
            a = A[m, k]
            Bk = B[k]
            for j in range(N):
                acc[j] += a * Bk[j]
        out[m] = acc


def timed(fn, repeat):
    fn()  # compile / warm up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def mmasim_rate(name, a16, b16, rows):
    """MMA-Sim multiply-adds per second on `rows` output rows (None if not installed)."""
    try:
        import torch
        from mmasim.amd import MFMA
        from mmasim.nv_ptx import MMA
    except Exception:
        return None
    op = {
        "mi100": lambda: MFMA("CDNA1", "f32_32x32x8f16"),
        "mi200": lambda: MFMA("CDNA2", "f32_32x32x8f16"),
        "mi300": lambda: MFMA("CDNA3", "f32_32x32x8_f16"),
        "v100": lambda: MMA("Volta", "m8n8k4.f32.f16.f16.f32"),
        "a100": lambda: MMA("Ampere", "m16n8k16.f32.f16.f16.f32"),
        "h100": lambda: MMA("Hopper", "m16n8k16.f32.f16.f16.f32"),
        "b200": lambda: MMA("Blackwell", "m16n8k16.f32.f16.f16.f32"),
        "fma32": None,
    }.get(name)
    if op is None:
        if name != "fma32":
            return None
        from mmasim.arithmetic.fma import MMA_FMA
        sim = MMA_FMA()
        a = torch.from_numpy(a16[:rows].astype(np.float32))
        b = torch.from_numpy(b16.astype(np.float32))
    else:
        sim = op().arithmetic_op
        a = torch.from_numpy(a16[:rows])
        b = torch.from_numpy(b16)
    cols = 2048
    A = a[:, None, :].expand(-1, cols, -1)
    B = b[:, :cols].T[None, :, :].expand(rows, -1, -1)
    C = torch.zeros(rows, cols, dtype=torch.float32)
    t0 = time.perf_counter()
    sim.dpa(A, B, C)
    return rows * cols * K / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--units", default="mi100,mi200,mi300,v100,a100,h100,b200,fma32,fp64")
    ap.add_argument("--mmasim-rows", type=int, default=4)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "units.json"))
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    a16 = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b16 = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float32)
    macs = M * N * K

    A32, B32 = a16.astype(np.float32), b16.astype(np.float32)
    out = np.empty((M, N), np.float32)
    t_loop, _ = timed(lambda: fp32_loop(A32, B32, out), args.repeat)
    t_blas, _ = timed(lambda: A32 @ B32, args.repeat)
    loop_rate, blas_rate = macs / t_loop, macs / t_blas
    rows = []
    a_rows, b_cols = a16[:, None, :], b16.T[None, :, :]
    for name in args.units.split(","):
        u = models.unit(name)
        t0 = time.perf_counter()
        emu.dot_add(a_rows[:1, :, :], b_cols[:, :256, :], c[:1, :256], u)  # compile or load from cache
        first = time.perf_counter() - t0
        t, times = timed(lambda: emu.dot_add(a_rows, b_cols, c, u), args.repeat)
        rate = macs / t
        sim = mmasim_rate(name, a16, b16, args.mmasim_rows)
        rows.append(dict(unit=name, gmacs=rate / 1e9, vs_fp32_loop=rate / loop_rate, vs_blas=rate / blas_rate,
                         mmasim_gmacs=None if sim is None else sim / 1e9, vs_mmasim=None if sim is None else rate / sim,
                         target_vs_loop=TARGET_VS_LOOP.get(name, 0.12),
                         target_vs_mmasim=TARGET_VS_MMASIM.get(name, 300) if name != "fp64" else None,
                         first_call_s=first, times_s=times))
    machine = dict(platform=platform.platform(), processor=platform.processor() or platform.machine(),
                   cpus=os.cpu_count(), numba_threads=numba.get_num_threads(), numba=numba.__version__,
                   numpy=np.__version__, python=platform.python_version(),
                   commit=subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                         cwd=Path(__file__).parent).stdout.strip())
    result = dict(problem=dict(M=M, N=N, K=K), fp32_loop_gmacs=loop_rate / 1e9, blas_gmacs=blas_rate / 1e9,
                  units=rows, machine=machine)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))

    print(f"GEMM M={M} N={N} K={K}; baselines: numba fp32 loop {loop_rate/1e9:.2f} G MAC/s, "
          f"numpy fp32 BLAS {blas_rate/1e9:.2f} G MAC/s; {machine['cpus']} CPUs, {machine['numba_threads']} numba threads")
    print("| unit | G MAC/s | × fp32 loop (target) | MMA-Sim G MAC/s | × MMA-Sim (target) | first call s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        sim = "n/a" if r["mmasim_gmacs"] is None else f"{r['mmasim_gmacs']*1e3:.2f} M"
        vs = "n/a" if r["vs_mmasim"] is None else f"{r['vs_mmasim']:.0f}× ({r['target_vs_mmasim']}×)"
        ok = "ok" if r["vs_fp32_loop"] >= r["target_vs_loop"] else "BELOW"
        print(f"| {r['unit']} | {r['gmacs']:.2f} | {r['vs_fp32_loop']:.3f} ({r['target_vs_loop']}, {ok}) | {sim} | {vs} | {r['first_call_s']:.1f} |")


if __name__ == "__main__":
    main()
