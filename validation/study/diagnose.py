"""Diagnosis of the lines that still differ: the alternatives the models offer, one assumption
changed at a time (verifier quirks, validators, unit models, gemmK orders, KBlocks, add-order
granularity, input generator), each emulated and judged; the report names those that reproduce
the line, or the closest one and the fields it still misses."""

from __future__ import annotations

from collections import Counter, defaultdict

from ..suites import suite_config, suite_entry
from .cache import Cache, request_key
from .emulate import Request, make_jobs
from .execution import execute
from .judge import LineResult, judge
from .measured import STUDY_SEED
from .recipes import alternatives, default_recipe
from .selection import Selection

__all__ = ["diagnose"]


def diagnose(
    report_lines: list[LineResult],
    selection: Selection,
    jobs_n: int,
    cache_dir: str | None,
    progress: bool,
    scheduler: str = "auto",
) -> None:
    """Try the alternatives the models offer (one assumption changed at a time) on every line that
    differs, and write down which reproduce it."""
    bad = [r for r in report_lines if r.counts_as_failure]
    if not bad:
        return
    cache = Cache(cache_dir)
    todo: dict[tuple, dict[str, Request]] = defaultdict(dict)
    plans: list[tuple[LineResult, list[tuple[str, str, str, str]]]] = []
    cached: dict[str, dict] = {}
    for r in bad:
        m = r.measured
        problem, entry = suite_config(m.test_name).problem, suite_entry(m.test_name)
        base = default_recipe(m.run_set, m.gpu, m.kernel, m.validator, problem.direction)
        atomic = r.mode == "ensemble"
        alts = []
        for cat, desc, recipe, gran in alternatives(base, problem, atomic):
            try:
                atomic_alt = recipe.kernel.atomic_split(problem) > 0
                recipe.validator.plan(problem)
            except ValueError:  # e.g. a KBlocks the partition does not allow
                continue
            members = selection.members if atomic_alt else 0
            g = gran or selection.granularity
            key = request_key(
                m.test_name,
                m.range,
                STUDY_SEED,
                recipe,
                members,
                g,
                problem,
                entry,
                (m.gpu, m.kernel, m.validator, m.run_set),
            )
            alts.append((cat, desc, key, "ensemble" if members else "exact"))
            hit = cache.get(key)
            if hit is not None:
                cached[key] = hit
            else:
                todo[(m.test_name, m.range, STUDY_SEED, recipe.rand_type)][key] = Request(
                    key, recipe, STUDY_SEED, members, g
                )
        plans.append((r, alts))
    jobs = make_jobs(todo)
    cached.update(execute(jobs, jobs_n, cache_dir, progress, scheduler=scheduler))
    for r, alts in plans:
        found, scored = [], []
        for cat, desc, key, mode in alts:
            res = cached.get(key)
            if res is None:
                continue
            alt = judge(r.measured, [res], mode if res["mode"] == "exact" else "ensemble")
            n_eq = sum(alt.equal.values())
            if alt.ok:
                found.append(
                    f"{cat}: {desc}"
                    + (f" ({alt.exact_members}/{alt.n_members} members exact)" if alt.n_members else "")
                )
            scored.append((n_eq, cat, desc, alt.differing))
        if found:
            r.diagnosis = "reproduced when one assumption changes — " + "; ".join(found)
        else:
            scored.sort(key=lambda t: -t[0])
            best = scored[0] if scored else None
            tried = Counter(c for _, c, _, _ in scored)
            r.diagnosis = (
                "no single alternative the models offer reproduces it (tried "
                + ", ".join(f"{n} {c}" for c, n in tried.items())
                + ")"
                + (
                    f"; closest: {best[1]}: {best[2]} ({best[0]}/{len(r.equal)} fields; still differs in "
                    f"{', '.join(best[3])})"
                    if best
                    else ""
                )
                + f"; the recipe itself gets {sum(r.equal.values())}/{len(r.equal)}"
            )
