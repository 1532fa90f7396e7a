"""Speed of the design sweep (``fp16emu design``, issue 16), with a same-run baseline.

One seed of the issue's benchmark: for the N smallest 2022 suite tests (MI200 xdlops, CPU
validation), the fit job and the evaluation job of every (test, input generator) of every preset,
with every bug mutant, run one after another in this process and timed (CPU time of this
process):

* ``shared``: :func:`validation.design.sweep.seed_job` as ``fp16emu design`` runs it (GEMMs
  shared across mutants by :func:`models.bugs.emulate_mutants`, comparisons shared across
  verifiers and unchanged outputs by :class:`validation.design.sweep.CompareCache`);
* ``unshared`` (``--baseline``): the same work as the sweep did before that sharing — one
  :func:`models.bugs.emulate` per mutant and one :func:`validation.metrics.compare` per
  (verifier options as written, mutant) — timed on the same tests in the same run.

The issue's benchmark (N tests × every preset × S seeds × every mutant on J cores) is linear in
seeds; it is estimated as S × (one seed's CPU time) / J, and ``--full`` runs it
(``fp16emu design rocmlir_2022:N --seeds S --jobs J``) and reports its wall and CPU time.
Run on an idle machine: other jobs on the cores inflate wall times.

    python benchmarks/bench_design.py [--tests 20] [--seeds 20] [--jobs 2] [--baseline] [--full]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from emu.rounding import fp32_to_fp16  # noqa: E402
from models import bugs  # noqa: E402
from models.kernels import ATOMIC_ORDERS  # noqa: E402
from validation.design import parse_functions, resolve_targets  # noqa: E402
from validation.design.functions import FUNCTION_NAMES  # noqa: E402
from validation.design.sweep import FIT_SEED0, SeedTask, seed_job  # noqa: E402
from validation.metrics import compare  # noqa: E402
from validation.run import plan  # noqa: E402
from validation.suites import suite_config  # noqa: E402


def unshared_job(task: SeedTask) -> None:
    """The expensive steps of a seed job without sharing (the baseline): every mutant emulated
    on its own, one comparison per (verifier options as written, output)."""
    from emu.conv import ConvGemm, sub_gemms
    from validation.design.bounds import element_bounds

    t = task.target
    text = suite_config(t.config) if " " not in t.config else t.config  # targets here: suite names
    config, kmodel, vmodel = plan(text, hw=t.hw, kernel=t.kernel, validator=t.validator)
    problem = config.problem
    inputs = task.generator.inputs(problem, task.seed, max(s.k for s in sub_gemms(problem)))
    op = ConvGemm(problem, x=inputs.get("input"), w=inputs.get("filter"), dy=inputs.get("output"))
    (validation,) = op.compute([vmodel.arithmetic(problem)])
    member = task.seed % ATOMIC_ORDERS.members
    good = bugs.emulate(problem, kmodel, inputs, member=member)
    k16 = fp32_to_fp16(good.kernel_fp32)
    compare(validation, k16, dtype_hint="fp16", round_validation="fp16")
    if task.bounds or any(f.kind == "predicted-bound" for f in task.functions):
        element_bounds(problem, kmodel, vmodel, inputs, validation)
    seen = [k16]
    for m in task.mutants:
        try:
            em = bugs.emulate(problem, kmodel, inputs, m, member=member)
        except bugs.NotApplicable:
            continue
        seen.append(np.asarray(m.seen(fp32_to_fp16(em.kernel_fp32), validation, inputs)))
    for s in seen:
        done = set()
        for f in task.functions:
            if f.thresholds is None:
                continue
            key = repr(sorted(f.thresholds.compare_options().items()))
            if key not in done:
                done.add(key)
                compare(validation, s, **f.thresholds.compare_options())


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


def timed(fn, tasks) -> float:
    t0 = time.process_time()
    for task in tasks:
        fn(task)
    return time.process_time() - t0


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
    seed_job(tasks[1])  # warm numba and imports
    shared = timed(seed_job, tasks)
    print(f"shared (seed_job): one seed {shared:.1f} CPU-s")
    if args.baseline:
        unshared_job(tasks[1])
        base = timed(unshared_job, tasks)
        print(f"unshared baseline: one seed {base:.1f} CPU-s; shared / unshared = {shared / base:.2f}")
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
