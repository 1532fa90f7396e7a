"""``fp16emu warm`` (``python -m validation.warm``): compile every numba kernel the commands use,
once, in parallel worker processes, into the per-user cache every entry point shares
(:func:`emu.jit.default_cache_dir`, or ``NUMBA_CACHE_DIR``).

Numba compiles a kernel the first time it is called with new argument types and keeps the machine
code on disk (``cache=True``, :mod:`emu.jit`). A new user would otherwise pay those compiles a few
at a time, at each new command of the tour. Here each :data:`JOBS` entry calls the library on tiny
inputs, which compiles exactly what a command's real call compiles (the same functions, the same
argument types); the jobs run in ``--jobs`` processes (default: one per core), longest first, and
a line per finished job says what it compiled and for how long. Jobs that share a compiled
function are one job (a function compiled in two processes at once is compiled twice).

Nothing here computes anything of interest: the outputs are discarded. A second run finds every
kernel in the cache and takes seconds.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context

import numpy as np

__all__ = ["JOBS", "Job", "run_job", "warm", "command_estimate", "jobs_for_units", "missing_jobs", "prepare", "main"]

#: one unit of each arithmetic family (emu.units.Family), named as models.unit takes them
FAMILY_UNITS = {
    "fused-exact": "mi100",
    "pairwise": "mi200",
    "two-stage": "mi300",
    "truncated": "h100",
    "fma": "fma32",
    "fp64": "fp64",
}


def _rng():
    return np.random.default_rng(2026)


def _fp16(shape, scale=1.0):
    return (_rng().uniform(-scale, scale, shape)).astype(np.float16)


def _rows(unit_name: str) -> None:
    """The batched layout in fp16 (``emu.dot_add`` on rows: ``fp16emu units``, probe rows of
    ``identify``): one row, a few rows, rows of K a multiple of 4 (the fused decode of the FMA
    and pairwise families), a repeated operand."""
    import emu
    import models

    unit = models.unit(unit_name)
    for P, K in ((1, 4), (37, 6), (300, 8)):
        a, b = _fp16((P, K)), _fp16((P, K))
        emu.dot_add(a, b, np.float32(0), unit)
        emu.dot_add(a, b, np.zeros(P, np.float32), unit)
        emu.dot_add(a[:1], b, np.float32(0), unit)


def _gemm(unit_name: str) -> None:
    """The GEMM layout in fp16 (``emu.gemm``: convolutions, captures)."""
    import emu
    import models

    unit = models.unit(unit_name)
    emu.gemm(_fp16((20, 64)), _fp16((64, 24)), None, unit)


def _wide_rows(unit_name: str) -> None:
    """bf16 operands outside [2^-24, 2^16) (float64 values, the batched layout): probe rows of
    ``identify`` for bf16, tf32; values inside that range run the fp16 kernels."""
    import emu
    import models
    from emu.operands import value_dtype

    unit = models.unit(unit_name, input="bf16")
    a = (_rng().uniform(-1, 1, (37, 4)) * 2.0**40).astype(np.float32).astype(value_dtype("bf16"))
    b = _rng().uniform(-1, 1, (37, 4)).astype(np.float32).astype(value_dtype("bf16"))
    emu.dot_add(a, b, np.float32(0), unit)
    if unit_name == "mi100":  # the exact fused family keeps the GEMM layout for float64 operands
        emu.gemm(a[:8], b.T[:, :8].copy(), None, unit)


def _decode() -> None:
    """The parallel fp16 decode of GEMM operands, C- and F-ordered patterns (``emu.gemm``; a
    capture's operands)."""
    from emu.dot import decode_operands

    bits = _fp16((64, 48)).view(np.uint16)
    for flush in (False, True):
        decode_operands(bits, flush)
        decode_operands(np.asfortranarray(bits), flush)


def _conv_run() -> None:
    """A suite test through the MI200 xdlops kernel and the CPU validation (``fp16emu run``,
    ``explain``, ``make demo``)."""
    from validation.run import run

    run("conv2d_host_validation_f16_fwd_CHECK_KYXC_NHWC_NHWK5_f16", hw="mi200", progress=False)


@dataclass(frozen=True)
class Job:
    """One warm-up job: ``name`` (what it compiles), ``seconds`` (a rough single-core compile
    time on an idle 2-core machine, for ordering and the estimate) and the call."""

    name: str
    seconds: float
    call: object
    args: tuple = ()


def _family_jobs() -> list[Job]:
    # rough single-core compile seconds on an idle 2-core machine: each job's CPU seconds in session
    # 20's warm run from an empty cache (103 s of CPU in all; BENCHMARKS.md, "Session 20"), at least
    # 1; the pairwise and fp64 GEMMs, compiled there by other jobs first, as measured alone: for the
    # order and the estimate
    rows_s = {"fused-exact": 9, "pairwise": 3, "two-stage": 6, "truncated": 15, "fma": 1, "fp64": 1}
    gemm_s = {"fused-exact": 10, "pairwise": 2, "two-stage": 5, "truncated": 7, "fma": 1, "fp64": 2}
    wide_s = {"fused-exact": 20, "pairwise": 2, "two-stage": 7, "truncated": 9, "fma": 1}
    jobs = []
    for fam, unit in FAMILY_UNITS.items():
        jobs.append(Job(f"{fam} ({unit}) rows", rows_s[fam], _rows, (unit,)))
        jobs.append(Job(f"{fam} ({unit}) gemm", gemm_s[fam], _gemm, (unit,)))
        if fam in wide_s:
            jobs.append(Job(f"{fam} ({unit}) bf16 rows", wide_s[fam], _wide_rows, (unit,)))
    return jobs


#: every warm-up job, in no particular order (:func:`warm` runs the longest first)
JOBS: list[Job] = _family_jobs() + [
    Job("a convolution test (mi200 xdlops, cpu validation)", 5, _conv_run),
    Job("operand decode (C- and F-ordered)", 1, _decode),
]


#: an estimate of the longest first-use compile of one command of the README's tour on an idle
#: 2-core machine, in seconds, what a command's notice announces: `fp16emu units` took 22.3 s and
#: `identify` of a capture 16.5 s from an empty cache in session 20 (BENCHMARKS.md, "Session 20"),
#: with room for a slower machine
COMMAND_SECONDS = 40


def command_estimate() -> float:
    """Seconds a command may spend compiling on first use (:data:`COMMAND_SECONDS`)."""
    return float(COMMAND_SECONDS)


def jobs_for_units(units, *, gemm: bool = False) -> list[str]:
    """The names of the warm-up jobs that compile what ``units`` (unit names) run: the batched
    rows of each one's arithmetic family, with ``gemm`` also its GEMM layout and the operand
    decode (what ``identify`` of a capture and ``emu.gemm`` compile)."""
    import models

    by_family = {int(models.unit(rep).family): (fam, rep) for fam, rep in FAMILY_UNITS.items()}
    names = []
    for u in units:
        fam, rep = by_family[int(models.unit(u).family)]
        names.append(f"{fam} ({rep}) rows")
        if gemm:
            names.append(f"{fam} ({rep}) gemm")
    if gemm:
        names.append("operand decode (C- and F-ordered)")
    return list(dict.fromkeys(names))


def _marker(name: str):
    """The file that says the job ``name`` ran to the end with this cache (None: no cache). It lives
    in the cache folder of this version of the emu sources, so an upgrade or an emptied cache
    forgets it with the kernels."""
    import emu.jit

    if not emu.jit.CACHE or not emu.jit.numba.config.CACHE_DIR:
        return None
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return os.path.join(emu.jit.numba.config.CACHE_DIR, f"warm-{slug}.done")


def _mark(name: str) -> None:
    path = _marker(name)
    if path is None:
        return
    try:  # a plain new file of ours, never through a link; an existing one is already the mark
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600))
    except OSError:
        pass


def missing_jobs(names) -> list[str]:
    """Those of the job ``names`` this machine's cache has not run to the end (all of them when
    the cache is off: nothing can be known)."""
    return [name for name in names if (path := _marker(name)) is None or not os.path.isfile(path)]


def prepare(names, *, out=sys.stderr, jobs: int | None = None) -> dict | None:
    """Before a command: the warm-up jobs ``names`` that this machine has not compiled yet, run in
    parallel processes (one per core, at most one per job) with the progress bar of
    :func:`warm`, so that a first call on a 2-core machine compiles in about half the time it
    would on its own. None (nothing done) when all are compiled, the cache is off (the workers'
    kernels would be lost) or there is one core (the command compiles as it goes)."""
    import emu.jit

    n = jobs or os.cpu_count() or 1
    todo = missing_jobs(names)
    if not todo or n < 2 or not emu.jit.CACHE:
        return None
    print(
        f"fp16emu: first use on this machine: compiling the {len(todo)} groups of kernels this command needs "
        f"in parallel (once, cached in {emu.jit.numba.config.CACHE_DIR}; `fp16emu warm` compiles them all at once)",
        file=out,
        flush=True,
    )
    return warm(min(n, len(todo)), out=out, exact=todo)


def run_job(index: int) -> tuple[int, float, float, int, float]:
    """Run ``JOBS[index]`` in this process: (index, wall seconds, seconds spent compiling,
    number of functions compiled, CPU seconds of this process)."""
    from numba.core import event

    job = JOBS[index]
    compiled = []

    class _Count(event.Listener):
        def __init__(self):
            self.depth = 0
            self.t0 = 0.0

        def on_start(self, ev):
            if self.depth == 0:
                self.t0 = time.perf_counter()
            self.depth += 1

        def on_end(self, ev):
            self.depth -= 1
            if self.depth == 0:
                compiled.append(time.perf_counter() - self.t0)

    t0, c0 = time.perf_counter(), time.process_time()
    with event.install_listener("numba:compile", _Count()):
        job.call(*job.args)
    return index, time.perf_counter() - t0, sum(compiled), len(compiled), time.process_time() - c0


def _worker_init() -> None:
    import numba

    numba.set_num_threads(1)  # the workers are the parallelism


def _bar(done: int, total: int, elapsed: float, width: int = 24) -> str:
    fill = int(width * done / max(total, 1))
    return f"[{'#' * fill}{'.' * (width - fill)}] {done}/{total} jobs, {elapsed:5.1f} s"


def warm(
    jobs: int | None = None, *, out=sys.stderr, names: list[str] | None = None, exact: list[str] | None = None
) -> dict:
    """Run the warm-up jobs (all, or those whose name contains one of ``names``, or is one of
    ``exact``) in ``jobs`` processes (default: the cores, at most the
    jobs), longest first, printing a progress bar to ``out``; each job that ends is marked as
    compiled in the cache (:func:`missing_jobs`). Returns {"wall": s, "compile": s summed over
    jobs, "cpu": CPU s summed over jobs, "jobs": [(name, wall, compile s, functions compiled, CPU s)]}."""
    chosen = [
        i
        for i, j in enumerate(JOBS)
        if (not names or any(n in j.name for n in names)) and (exact is None or j.name in exact)
    ]
    chosen.sort(key=lambda i: -JOBS[i].seconds)
    n = max(1, min(jobs or os.cpu_count() or 1, len(chosen)))
    tty = hasattr(out, "isatty") and out.isatty()
    loads = [0.0] * n  # longest first onto the least-loaded process: the wall time to expect
    for i in chosen:
        loads[loads.index(min(loads))] += JOBS[i].seconds
    estimate = max(loads)
    print(
        f"fp16emu warm: compiling the emulator's kernels for this machine: {len(chosen)} jobs in {n} processes "
        f"(about {estimate:.0f} s on an idle 2-core machine)",
        file=out,
        flush=True,
    )
    t0 = time.perf_counter()
    results = []
    with ProcessPoolExecutor(n, mp_context=get_context("spawn"), initializer=_worker_init) as pool:
        futures = [pool.submit(run_job, i) for i in chosen]
        for fut in as_completed(futures):
            i, wall, comp, count, cpu = fut.result()
            _mark(JOBS[i].name)
            results.append((JOBS[i].name, wall, comp, count, cpu))
            line = f"{_bar(len(results), len(chosen), time.perf_counter() - t0)}  {JOBS[i].name}: {wall:.1f} s"
            line += f" ({count} compiled, {cpu:.1f} s of CPU)" if count else " (cached)"
            print(("\r\033[K" if tty else "") + line, end="" if tty else "\n", file=out, flush=True)
    wall = time.perf_counter() - t0
    if tty:
        print(file=out)
    total, cpu = sum(r[2] for r in results), sum(r[4] for r in results)
    print(
        f"fp16emu warm: done in {wall:.1f} s ({total:.1f} s of compiling, {cpu:.1f} s of CPU, in {n} processes); "
        f"the commands now load the kernels from the cache",
        file=out,
        flush=True,
    )
    return {"wall": wall, "compile": total, "cpu": cpu, "jobs": results}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.warm", description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per core)")
    p.add_argument("--only", nargs="*", default=None, help="run only the jobs whose name contains one of these")
    p.add_argument("--list", action="store_true", help="list the jobs and exit")
    args = p.parse_args(argv)
    if args.list:
        for j in JOBS:
            print(f"{j.seconds:5.0f} s  {j.name}")
        return 0
    warm(args.jobs, names=args.only)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
