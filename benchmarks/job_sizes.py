"""The job-size distribution of a finished ``fp16emu study reproduce`` run, and a paper estimate
of its wall time on W workers.

Reads the run's ``jobs.tsv`` (one line per emulation job, tab-separated, no header: test, range,
seed, input generator, lines, seconds; written by :func:`validation.study.execution.execute`) and
prints the count, total, quantiles and the ten longest jobs, then for each W the makespan of
longest-processing-time-first list scheduling of the measured job times (Graham 1969: each job,
longest first, goes to the worker that frees up first) next to its lower bound max(total / W,
longest job). The estimate assumes every job takes on W workers what it took in the measured run,
and leaves out the run's fixed costs (reading the measured files, numba's cache, the report).

    python benchmarks/job_sizes.py out/reproduce/jobs.tsv [--workers 1,2,64]
"""

from __future__ import annotations

import argparse
import heapq
import sys
from pathlib import Path
from typing import NamedTuple

__all__ = ["Job", "read_jobs", "quantile", "lpt_makespan", "lower_bound", "summary", "main"]


class Job(NamedTuple):
    test: str
    range: str
    seed: int
    rand_type: str
    lines: int
    seconds: float


def read_jobs(path: str | Path) -> list[Job]:
    """The jobs of a ``jobs.tsv``; a malformed line raises ValueError naming its line number."""
    jobs = []
    for n, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        f = raw.split("\t")
        if len(f) != 6:
            raise ValueError(
                f"{path}:{n}: expected 6 tab-separated fields (test, range, seed, "
                f"rand_type, lines, seconds), got {len(f)}"
            )
        try:
            jobs.append(Job(f[0], f[1], int(f[2]), f[3], int(f[4]), float(f[5])))
        except ValueError as err:
            raise ValueError(f"{path}:{n}: {err}") from None
    return jobs


def quantile(sorted_values: list[float], q: float) -> float:
    """The q-quantile (0 ≤ q ≤ 1) of ascending values, linear between order statistics (numpy's
    default 'linear' method)."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def lpt_makespan(seconds: list[float], workers: int) -> float:
    """Wall time of longest-processing-time-first list scheduling on ``workers`` workers."""
    if workers < 1:
        raise ValueError(f"workers: must be ≥ 1, got {workers}")
    free = [0.0] * min(workers, max(1, len(seconds)))
    for s in sorted(seconds, reverse=True):
        heapq.heapreplace(free, free[0] + s)
    return max(free)


def lower_bound(seconds: list[float], workers: int) -> float:
    """No schedule on ``workers`` workers is shorter than max(total / W, longest job)."""
    return max(sum(seconds) / workers, max(seconds, default=0.0))


def _clock(s: float) -> str:
    m, s = divmod(round(s), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}"


def summary(jobs: list[Job], workers: list[int], top: int = 10) -> str:
    """The printed report."""
    secs = sorted(j.seconds for j in jobs)
    total = sum(secs)
    out = [
        f"{len(jobs)} jobs, {sum(j.lines for j in jobs)} lines, {total:.1f} worker-seconds "
        f"(mean {total / max(1, len(jobs)):.1f} s)",
        "quantiles (s): "
        + ", ".join(
            f"{name} {quantile(secs, q):.1f}"
            for name, q in (("min", 0), ("p10", 0.1), ("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1))
        ),
        f"top {top} jobs (test, range, seed, inputs, lines, seconds):",
    ]
    for j in sorted(jobs, key=lambda j: -j.seconds)[:top]:
        out.append(f"  {j.test}\t{j.range}\t{j.seed}\t{j.rand_type}\t{j.lines}\t{j.seconds:.1f}")
    out.append("paper wall time, LPT list scheduling of the measured job times (lower bound):")
    for w in workers:
        out.append(f"  W = {w}: {_clock(lpt_makespan(secs, w))} ({_clock(lower_bound(secs, w))})")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("jobs_tsv", help="a finished run's jobs.tsv (fp16emu study reproduce --out DIR)")
    ap.add_argument("--workers", default="1,2,64", help="comma-separated worker counts (default 1,2,64)")
    ap.add_argument("--top", type=int, default=10, help="longest jobs listed (default 10)")
    args = ap.parse_args(argv)
    try:
        workers = [int(w) for w in args.workers.split(",")]
        if any(w < 1 for w in workers):
            raise ValueError
    except ValueError:
        print(f"--workers: expected comma-separated integers ≥ 1, got {args.workers!r}", file=sys.stderr)
        return 2
    try:
        jobs = read_jobs(args.jobs_tsv)
    except (OSError, ValueError) as err:
        print(f"jobs_tsv: {err}", file=sys.stderr)
        return 2
    if not jobs:
        print(f"jobs_tsv: {args.jobs_tsv} holds no jobs", file=sys.stderr)
        return 2
    print(f"from {args.jobs_tsv}")
    print(summary(jobs, workers, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
