"""Speed of the design sweep (``fp16emu design``, issue 16), with a same-run baseline.

One seed of the issue's benchmark: for the N smallest 2022 suite tests (MI200 xdlops, CPU
validation), the fit job and the evaluation job of every (test, input generator) of every preset,
with every bug mutant, run one after another in this process and timed (CPU time of this
process, one numba thread as each worker of ``--jobs 2`` on 2 cores has; the two paths interleaved
task by task, after a warm-up on the first test):

* ``shared``: :func:`validation.design.sweep.seed_job` as ``fp16emu design`` runs it (GEMMs
  shared across mutants by :func:`models.bugs.emulate_mutants`, comparisons shared across
  verifiers and unchanged outputs by :class:`validation.design.sweep.CompareCache`);
* ``unshared`` (``--baseline``): the same :func:`seed_job` with that sharing switched off, as
  the sweep ran before it — one :func:`models.bugs.emulate` per mutant and one
  :func:`validation.metrics.compare` per (verifier options as written, output array) — timed on
  the same tests in the same run; its results are checked equal to the shared ones.

The issue's benchmark (N tests × every preset × S seeds × every mutant on J cores) is linear in
seeds; it is estimated as S × (one seed's CPU time) / J, and ``--full`` runs it
(``fp16emu design rocmlir_2022:N --seeds S --jobs J``) and reports its wall and CPU time.
Run on an idle machine: other jobs on the cores inflate wall times.

    python benchmarks/bench_design.py [--tests 20] [--seeds 20] [--jobs 2] [--baseline] [--full]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numba

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models import bugs  # noqa: E402
from validation.design import (  # noqa: E402
    parse_functions,
    resolve_targets,
    sweep,
)
from validation.design.functions import FUNCTION_NAMES  # noqa: E402
from validation.design.sweep import FIT_SEED0, CompareCache, SeedTask, seed_job  # noqa: E402
from validation.metrics import compare  # noqa: E402


def _emulate_each(problem, model, inputs, mutants, *, member=None, **kw):
    """:func:`models.bugs.emulate_mutants` without sharing: one :func:`models.bugs.emulate` each."""
    good = bugs.emulate(problem, model, inputs, member=member, **kw)
    out = {}
    for m in mutants:
        try:
            out[m.label] = bugs.emulate(problem, model, inputs, m, member=member, **kw)
        except bugs.NotApplicable as err:
            out[m.label] = err
    return good, out


def _compare_each(self, seen16, **opts):
    """:meth:`CompareCache.result` as the sweep compared before: keyed by the array object and
    the options as written (so torch's explicit (1e-3, 1e-5) and the default are two comparisons,
    and an unchanged output is compared again)."""
    opts = dict(opts, distinct_pairs=True)  # the sweep before computed diff4's pairs every time
    key = (id(seen16), repr(sorted(opts.items())))
    store = self.__dict__.setdefault("_each", {})
    if key not in store:
        store[key] = (seen16, compare(self.validation32, seen16, **opts))
    return store[key][1]


def unshared_job(task: SeedTask) -> dict:
    """:func:`seed_job` with the sharing switched off (the baseline): same results, every mutant
    emulated on its own, comparisons shared only between identical option sets on one array."""
    saved = (sweep.bugs.emulate_mutants, CompareCache.result)
    sweep.bugs.emulate_mutants, CompareCache.result = _emulate_each, _compare_each
    try:
        return seed_job(task)
    finally:
        sweep.bugs.emulate_mutants, CompareCache.result = saved


def one_seed_tasks(targets, functions) -> list[SeedTask]:
    """One fit job and one evaluation job per (test, generator), as ``design`` makes them."""
    gens = []
    for f in functions:
        if f.generator not in gens:
            gens.append(f.generator)
    mutants = bugs.default_mutants()
    tasks = []
    for t in targets:
        for g in gens:
            tasks.append(SeedTask(t, g, FIT_SEED0, bounds=True))
            # the recommended function (fitted per test) measures as rocmlir does: no extra comparison
            tasks.append(SeedTask(t, g, 1, tuple(f for f in functions if f.generator == g), mutants))
    return tasks


def timed(fns, tasks) -> list[float]:
    """CPU seconds of each function in ``fns`` over ``tasks``, interleaved task by task so that
    both see the same machine load."""
    spent = [0.0] * len(fns)
    for task in tasks:
        results = []
        for i, fn in enumerate(fns):
            t0 = time.process_time()
            results.append(fn(task))
            spent[i] += time.process_time() - t0
        if len({json.dumps(r, sort_keys=True) for r in results}) > 1:  # NaN-safe
            raise AssertionError(f"shared and unshared results differ: {task.target.label} seed {task.seed}")
    return spent


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tests", type=int, default=20, help="the N smallest 2022 suite tests (default 20)")
    ap.add_argument("--seeds", type=int, default=20, help="seeds of the full benchmark (default 20)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes of the full benchmark (default 2)")
    ap.add_argument("--baseline", action="store_true", help="also time the unshared path (doubles the time)")
    ap.add_argument("--full", action="store_true", help="run and time the full benchmark too")
    args = ap.parse_args()
    targets = resolve_targets([f"rocmlir_2022:{args.tests}"], hw="mi200", kernel="xdlops", validator="cpu")
    functions = parse_functions(list(FUNCTION_NAMES))
    tasks = one_seed_tasks(targets, functions)
    print(f"{len(targets)} tests × {len(tasks) // (2 * len(targets))} generators; presets: {', '.join(FUNCTION_NAMES)}")
    print(f"mutants: {len(bugs.default_mutants())}; one seed = {len(tasks)} jobs (fit + evaluation)")
    # one numba thread, as each of the sweep's workers has with --jobs 2 on 2 cores
    numba.set_num_threads(1)
    fns = [seed_job] + ([unshared_job] if args.baseline else [])
    first = [t for t in tasks if t.target == tasks[0].target]
    timed(fns, first)  # warm: imports, numba cache loads, first compilations
    spent = timed(fns, tasks)
    shared = spent[0]
    print(f"shared (seed_job): one seed {shared:.1f} CPU-s")
    if args.baseline:
        print(f"unshared baseline: one seed {spent[1]:.1f} CPU-s; shared / unshared = {shared / spent[1]:.2f}")
    est = shared * args.seeds / args.jobs
    print(
        f"estimate of the full benchmark ({args.tests} tests, {args.seeds} seeds, {args.jobs} free cores): "
        f"{shared * args.seeds / 60:.0f} CPU-min, about {est / 60:.0f} min wall"
    )
    if args.full:
        cmd = [sys.executable, "-m", "validation.cli", "design", f"rocmlir_2022:{args.tests}", "--hw", "mi200",
               "--kernel", "xdlops", "--seeds", str(args.seeds), "--jobs", str(args.jobs), "--no-progress",
               "--format", "json"]  # fmt: skip
        t0, c0 = time.time(), os.times()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=Path(__file__).resolve().parents[1])
        c1 = os.times()
        cpu = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
        print(f"full benchmark: {time.time() - t0:.0f} s wall, {cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
