"""Speed of every unit on emu.dot_add over a GEMM-shaped problem, with same-run baselines.

Problem: M=256, N=32768, K=64, fp16 inputs uniform in [-1, 1], c = 0 given as a full (M, N)
float32 array (issue 2), through ``emu.dot_add(a[:, None, :], b.T[None], c, unit)`` (which runs
the GEMM-layout kernels); the time includes all of dot_add (fp16 decoding, output allocation).

Baselines measured in the same run: a plain numba float32 loop vectorised over outputs
(acc[n] += a[k]·b[k, n], on float32 copies made beforehand), numpy's float32 BLAS (A32 @ B32),
and MMA-Sim (when torch and mmasim are installed) on the same unit, two ways:
* per instruction: the ISA object (``mmasim.amd.MFMA`` / ``mmasim.nv_ptx.MMA``) called on one
  tile of its native m×n×k shape at a time, tiles taken from the same A and B, for about
  --mmasim-seconds (fma32: ``MMA_FMA`` on 32×32×8 tiles, the MI100/MI200 instruction's shape);
* batched: its ``arithmetic_op.dpa`` on --mmasim-rows × 2048 outputs of the problem in one call
  (torch vectorises this much better).
The targets against MMA-Sim are checked on the per-instruction figure.

Timing: ``--repeat`` rounds after one untimed warm-up call each; every round times the fp32 loop,
BLAS and each unit once, in turn, so that machine load drifting during the run hits all of
them alike; medians over the rounds are reported. "first call s" is the first dot_add on one
row of the problem (same array types as the timed calls): the numba compile, or the load from
numba's cache (run with NUMBA_CACHE_DIR set to an empty directory to see compile times).
Prints a Markdown table and writes JSON to --out.

    python benchmarks/bench_units.py [--repeat 7] [--units mi100,mi200] [--out benchmarks/results/units.json]
"""

from __future__ import annotations

import argparse
import datetime
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
TARGET_VS_MMASIM = {"mi100": 1000, "mi200": 1000, "fma32": 1000, "fp64": None}
MMASIM_COLS = 2048


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


def _mmasim_op(name):
    """(MMA-Sim ISA object or MMA_FMA, its m, n, k, instruction label), or None."""
    try:
        import torch  # noqa: F401
        from mmasim.amd import MFMA
        from mmasim.arithmetic.fma import MMA_FMA
        from mmasim.nv_ptx import MMA
    except Exception:
        return None
    isa = {
        "mi100": ("CDNA1", "f32_32x32x8f16", MFMA),
        "mi200": ("CDNA2", "f32_32x32x8f16", MFMA),
        "mi300": ("CDNA3", "f32_32x32x8_f16", MFMA),
        "v100": ("Volta", "m8n8k4.f32.f16.f16.f32", MMA),
        "t4": ("Turing", "m16n8k8.f32.f16.f16.f32", MMA),
        "a100": ("Ampere", "m16n8k16.f32.f16.f16.f32", MMA),
        "ada": ("Ada", "m16n8k16.f32.f16.f16.f32", MMA),
        "h100": ("Hopper", "m16n8k16.f32.f16.f16.f32", MMA),
        "b200": ("Blackwell", "m16n8k16.f32.f16.f16.f32", MMA),
    }
    if name == "fma32":
        return MMA_FMA(), 32, 32, 8, "MMA_FMA() on 32x32x8 tiles"
    if name not in isa:
        return None
    arch, shape, cls = isa[name]
    try:
        op = cls(arch, shape)
    except Exception:
        return None
    return op, op.m, op.n, op.k, f"{cls.__name__}({arch!r}, {shape!r})"


def mmasim_rates(name, a16, b16, rows, seconds):
    """MMA-Sim multiply-adds per second: (per instruction, batched dpa, label), or None."""
    found = _mmasim_op(name)
    if found is None:
        return None
    import torch

    op, m, n, k, label = found
    as_float = name == "fma32"  # MMA_FMA takes float32 copies of the fp16 inputs

    def tensor(x):
        return torch.from_numpy(np.ascontiguousarray(x.astype(np.float32) if as_float else x))

    # per instruction: tiles of the problem, one __call__ each
    tiles = [
        (
            tensor(a16[i * m : (i + 1) * m, kk * k : (kk + 1) * k]),
            tensor(b16[kk * k : (kk + 1) * k, j * n : (j + 1) * n]),
        )
        for i in range(2)
        for j in range(4)
        for kk in range(K // k)
    ]
    C = torch.zeros(m, n, dtype=torch.float32)
    op(*tiles[0], C)  # warm-up
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        A, B = tiles[calls % len(tiles)]
        C = op(A, B, C if calls % (K // k) else torch.zeros(m, n, dtype=torch.float32))
        calls += 1
    per_instruction = calls * m * n * k / (time.perf_counter() - t0)

    # batched: one dpa call over rows × MMASIM_COLS outputs with the full K
    sim = op.arithmetic_op if hasattr(op, "arithmetic_op") else op
    a, b = tensor(a16[:rows]), tensor(b16)
    A = a[:, None, :].expand(-1, MMASIM_COLS, -1)
    B = b[:, :MMASIM_COLS].T[None, :, :].expand(rows, -1, -1)
    Cb = torch.zeros(rows, MMASIM_COLS, dtype=torch.float32)
    sim.dpa(A[:1, :8], B[:1, :8], Cb[:1, :8])  # warm-up
    t0 = time.perf_counter()
    sim.dpa(A, B, Cb)
    batched = rows * MMASIM_COLS * K / (time.perf_counter() - t0)
    return per_instruction, batched, label


def time_rounds(jobs: dict, repeat: int) -> dict[str, list[float]]:
    """One untimed warm-up call of each job, then ``repeat`` rounds that time every job once, in
    turn, so that machine load drifting during the run hits all of them alike."""
    for fn in jobs.values():
        fn()
    times = {key: [] for key in jobs}
    for _ in range(repeat):
        for key, fn in jobs.items():
            t0 = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - t0)
    return times


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--units", default="mi100,mi200,mi300,v100,a100,h100,b200,fma32,fp64")
    ap.add_argument("--mmasim-rows", type=int, default=4)
    ap.add_argument("--mmasim-seconds", type=float, default=2.0)
    ap.add_argument("--no-mmasim", action="store_true")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "units.json"))
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    a16 = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b16 = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float32)
    macs = M * N * K
    load_before = os.getloadavg()

    A32, B32 = a16.astype(np.float32), b16.astype(np.float32)
    out = np.empty((M, N), np.float32)
    a_rows, b_cols = a16[:, None, :], b16.T[None, :, :]
    names = args.units.split(",")
    units = {name: models.unit(name) for name in names}

    first = {}
    for name, u in units.items():  # compile or load from cache, on one row
        t0 = time.perf_counter()
        emu.dot_add(a_rows[:1], b_cols, c[:1], u)
        first[name] = time.perf_counter() - t0

    jobs = {"fp32_loop": lambda: fp32_loop(A32, B32, out), "blas": lambda: A32 @ B32}
    for name, u in units.items():
        jobs[name] = lambda u=u: emu.dot_add(a_rows, b_cols, c, u)
    times = time_rounds(jobs, args.repeat)
    rate = {key: macs / statistics.median(ts) for key, ts in times.items()}
    loop_rate, blas_rate = rate["fp32_loop"], rate["blas"]

    rows = []
    for name in names:
        sim = None if args.no_mmasim else mmasim_rates(name, a16, b16, args.mmasim_rows, args.mmasim_seconds)
        r = rate[name]
        t_sim = TARGET_VS_MMASIM.get(name, 300)
        rows.append(
            dict(
                unit=name,
                gmacs=r / 1e9,
                vs_fp32_loop=r / loop_rate,
                vs_blas=r / blas_rate,
                target_vs_loop=TARGET_VS_LOOP.get(name, 0.12),
                mmasim=None if sim is None else sim[2],
                mmasim_instr_gmacs=None if sim is None else sim[0] / 1e9,
                mmasim_batched_gmacs=None if sim is None else sim[1] / 1e9,
                vs_mmasim_instr=None if sim is None else r / sim[0],
                vs_mmasim_batched=None if sim is None else r / sim[1],
                target_vs_mmasim=t_sim,
                first_call_s=first[name],
                times_s=times[name],
            )
        )
    machine = dict(
        cpu=cpu_model(),
        platform=platform.platform(),
        cpus=os.cpu_count(),
        numba_threads=numba.get_num_threads(),
        numba=numba.__version__,
        numpy=np.__version__,
        python=platform.python_version(),
        loadavg_before=load_before,
        loadavg_after=os.getloadavg(),
        date=datetime.datetime.now().isoformat(timespec="seconds"),
        commit=subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
        ).stdout.strip(),
    )
    result = dict(
        problem=dict(M=M, N=N, K=K),
        repeat=args.repeat,
        fp32_loop_gmacs=loop_rate / 1e9,
        blas_gmacs=blas_rate / 1e9,
        fp32_loop_times_s=times["fp32_loop"],
        blas_times_s=times["blas"],
        units=rows,
        machine=machine,
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))

    print(
        f"GEMM M={M} N={N} K={K}; {machine['date']}, commit {machine['commit']}; {machine['cpu']}, "
        f"{machine['cpus']} CPUs, {machine['numba_threads']} numba threads; load average "
        f"{load_before[0]:.2f} before, {machine['loadavg_after'][0]:.2f} after"
    )
    print(
        f"baselines (median of {args.repeat} rounds): numba fp32 loop {loop_rate / 1e9:.2f} G MAC/s, "
        f"numpy fp32 BLAS {blas_rate / 1e9:.2f} G MAC/s"
    )
    print(
        "| unit | G MAC/s | × fp32 loop (target) | × BLAS | MMA-Sim per instr. / batched M MAC/s "
        "| × MMA-Sim per instr. (target) | × MMA-Sim batched | first call s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        ok = "met" if r["vs_fp32_loop"] >= r["target_vs_loop"] else "NOT met"
        if r["mmasim_instr_gmacs"] is None:
            sim, vs, vsb = "n/a", "n/a", "n/a"
        else:
            sim = f"{r['mmasim_instr_gmacs'] * 1e3:.2f} / {r['mmasim_batched_gmacs'] * 1e3:.2f}"
            t = r["target_vs_mmasim"]
            vs = f"{r['vs_mmasim_instr']:.0f}× ({t}×, {'met' if r['vs_mmasim_instr'] >= t else 'NOT met'})"
            vsb = f"{r['vs_mmasim_batched']:.0f}×"
        print(
            f"| {r['unit']} | {r['gmacs']:.2f} | {r['vs_fp32_loop']:.3f} ({r['target_vs_loop']}, {ok}) "
            f"| {r['vs_blas']:.3f} | {sim} | {vs} | {vsb} | {r['first_call_s']:.2f} |"
        )


if __name__ == "__main__":
    main()
